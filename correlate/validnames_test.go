package correlate

import (
	"encoding/json"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

func svcObj(namespace, name, portName string) map[string]any {
	port := map[string]any{"port": 80, "protocol": "TCP"}
	if portName != "" {
		port["name"] = portName
	}
	return map[string]any{"apiVersion": "v1", "kind": "Service", "metadata": map[string]any{"namespace": namespace, "name": name},
		"spec": map[string]any{"clusterIP": "10.96.0.9", "ports": []any{port}}}
}

func sliceObj(namespace, name, service, portName, nodeName string) map[string]any {
	ep := map[string]any{"addresses": []any{"10.1.0.9"}}
	if nodeName != "" {
		ep["nodeName"] = nodeName
	}
	port := map[string]any{"port": 8080, "protocol": "TCP"}
	if portName != "" {
		port["name"] = portName
	}
	return map[string]any{"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
		"metadata":    map[string]any{"namespace": namespace, "name": name, "labels": map[string]any{"kubernetes.io/service-name": service}},
		"addressType": "IPv4", "endpoints": []any{ep}, "ports": []any{port}}
}

func nodeObj(name string) map[string]any {
	return map[string]any{"apiVersion": "v1", "kind": "Node", "metadata": map[string]any{"name": name}}
}

// Objects whose names the API server refuses are left out, counted in
// one warning that quotes the first escaped; the valid ones are kept,
// read by the fast path (JSON) and the generic one (YAML) alike.
func TestReadObjectsLeavesOutInvalidNames(t *testing.T) {
	valid := []map[string]any{
		svcObj("shop", "web", "http"),
		sliceObj("shop", "web-abc12", "web", "http", "node-a"),
		svcObj("shop", "1st", ""), // a DNS-1123 label: valid since 1.37
		nodeObj("ip-10-0-0-10.internal"),
	}
	for _, tc := range []struct {
		name      string
		hostile   map[string]any
		wantFirst string
	}{
		{"service newline", svcObj("shop", "a\nb", "http"), `Service "shop/a\nb"`},
		{"service SGR", svcObj("shop", "\x1b[31mweb", "http"), `Service "shop/\x1b[31mweb"`},
		{"service 300 chars", svcObj("shop", strings.Repeat("a", 300), "http"), `Service "shop/` + strings.Repeat("a", 75) + `"…: must be no more than 63 characters`},
		{"service dotdot", svcObj("shop", "../x", ""), `Service "shop/../x"`},
		{"namespace", svcObj("shop\ntriage node-a OK", "web2", ""), `Service "shop\ntriage node-a OK/web2": namespace: a lowercase RFC 1123 label`},
		{"service port name", svcObj("shop", "web3", "HTTP\nx"), `Service "shop/web3": port name "HTTP\nx": `},
		{"slice name", sliceObj("shop", "a\nb", "web", "http", ""), `EndpointSlice "shop/a\nb"`},
		{"slice service-name", sliceObj("shop", "web-x", "web\n\x1b[2J", "http", ""), `EndpointSlice "shop/web-x": kubernetes.io/service-name "web\n\x1b[2J": `},
		{"slice port name", sliceObj("shop", "web-y", "web", "a b", ""), `port name "a b": `},
		{"slice nodeName", sliceObj("shop", "web-z", "web", "http", "../node"), `endpoint nodeName "../node": `},
		{"node", nodeObj("../x"), `Node "../x"`},
		{"node SGR", nodeObj("\x1b]52;c;aGk=\x07"), `Node "\x1b]52;c;aGk=\a"`},
	} {
		items := append([]map[string]any{tc.hostile}, valid...)
		list := map[string]any{"apiVersion": "v1", "kind": "List", "items": items}
		js, err := json.Marshal(list)
		if err != nil {
			t.Fatal(err)
		}
		ym, err := yaml.Marshal(list)
		if err != nil {
			t.Fatal(err)
		}
		for path, data := range map[string][]byte{"json": js, "yaml": ym} {
			objs, err := ReadObjects(strings.NewReader(string(data)), "objects.json")
			if err != nil {
				t.Fatalf("%s %s: %v", tc.name, path, err)
			}
			if len(objs.Services) != 2 || len(objs.EndpointSlices) != 1 || len(objs.Other) != 1 {
				t.Errorf("%s %s: kept %d Services, %d slices, %d others; want the 2, 1 and 1 valid", tc.name, path, len(objs.Services), len(objs.EndpointSlices), len(objs.Other))
			}
			w := objs.LeftOut.Warning()
			if !strings.HasPrefix(w, "1 object with an invalid name left out: ") || !strings.Contains(w, tc.wantFirst) {
				t.Errorf("%s %s: warning %q, want one naming %q", tc.name, path, w, tc.wantFirst)
			}
			if strings.ContainsFunc(w, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
				t.Errorf("%s %s: warning %q holds a raw control character", tc.name, path, w)
			}
		}
	}
}

// Several left out, from several files: one count, the first named.
func TestLeftOutAdds(t *testing.T) {
	read := func(items ...map[string]any) *Objects {
		data, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
		objs, err := ReadObjects(strings.NewReader(string(data)), "x")
		if err != nil {
			t.Fatal(err)
		}
		return objs
	}
	all := read(svcObj("shop", "a\nb", ""), svcObj("shop", "ok", ""), nodeObj("A"))
	all.Add(read(svcObj("shop", "c d", "")))
	all.Add(read(svcObj("shop", "fine", "")))
	if w := all.LeftOut.Warning(); !strings.HasPrefix(w, `3 objects with invalid names left out: first Service "shop/a\nb"`) {
		t.Errorf("warning %q", w)
	}
	if len(all.Services) != 2 {
		t.Errorf("kept %d Services, want 2", len(all.Services))
	}
	if w := read(svcObj("shop", "ok", "")).LeftOut.Warning(); w != "" {
		t.Errorf("valid objects: warning %q", w)
	}
}

// The loops that spare most names a regular expression answer as the
// library does.
func TestNameChecksAgreeWithValidation(t *testing.T) {
	for _, s := range []string{"", "a", "-", "a-", "-a", "a-b", "A", "a_b", "a.b", "a..b", ".a", "a.", "1", "1a", "a\n", "a b",
		strings.Repeat("a", 63), strings.Repeat("a", 64), strings.Repeat("a", 253), strings.Repeat("a", 254),
		strings.Repeat("a", 100) + "." + strings.Repeat("b", 100), "ip-10-0-0-10.eu-west-1.compute.internal", "\x1b[31m"} {
		if got, want := dns1123Label(s), first(validation.IsDNS1123Label(s)); got != want {
			t.Errorf("dns1123Label(%q) = %q, want %q", s, got, want)
		}
		if got, want := dns1123Subdomain(s), first(validation.IsDNS1123Subdomain(s)); got != want {
			t.Errorf("dns1123Subdomain(%q) = %q, want %q", s, got, want)
		}
	}
}
