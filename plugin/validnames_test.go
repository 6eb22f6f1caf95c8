package plugin

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// hostileObjects are objects no API server accepts, each of which the
// analysis would judge (a Service with ready endpoints and no rules is an
// error) if it read them.
func hostileObjects() []map[string]any {
	svc := func(namespace, name, portName string) map[string]any {
		port := map[string]any{"port": 80, "protocol": "TCP", "targetPort": 8080}
		if portName != "" {
			port["name"] = portName
		}
		return map[string]any{"apiVersion": "v1", "kind": "Service", "metadata": map[string]any{"namespace": namespace, "name": name},
			"spec": map[string]any{"type": "ClusterIP", "clusterIP": "10.96.77.7", "clusterIPs": []any{"10.96.77.7"}, "ports": []any{port}}}
	}
	slice := func(namespace, name, service, portName string) map[string]any {
		port := map[string]any{"port": 8080, "protocol": "TCP"}
		if portName != "" {
			port["name"] = portName
		}
		return map[string]any{"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
			"metadata":    map[string]any{"namespace": namespace, "name": name, "labels": map[string]any{"kubernetes.io/service-name": service}},
			"addressType": "IPv4", "ports": []any{port},
			"endpoints": []any{map[string]any{"addresses": []any{"10.244.9.9"}, "conditions": map[string]any{"ready": true}, "nodeName": "node-a"}}}
	}
	forged := "shop/web\ntriage node-a OK"
	return []map[string]any{
		svc("shop", "a\nb", "http"), slice("shop", "a-x1", "a\nb", "http"),
		svc("shop", "\x1b[31mred", ""), slice("shop", "red-x1", "\x1b[31mred", ""),
		svc("shop", "ports", "HTTP\n"), slice("shop", "ports-x1", "ports", "HTTP\n"),
		svc(forged, "web", ""),
		{"apiVersion": "v1", "kind": "Node", "metadata": map[string]any{"name": "../x"}},
	}
}

// Objects files with invalid names: the invalid objects are left out
// with one warning, and what the valid ones get is what they get alone.
func TestObjectsWithInvalidNamesLeftOut(t *testing.T) {
	small := smallFixture
	data, err := os.ReadFile(small + "objects.json")
	if err != nil {
		t.Fatal(err)
	}
	var list map[string]any
	if err := json.Unmarshal(data, &list); err != nil {
		t.Fatal(err)
	}
	var items []any
	for _, o := range hostileObjects() {
		items = append(items, o)
	}
	list["items"] = append(items, list["items"].([]any)...)
	mixed, err := json.Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	mixedFile := filepath.Join(t.TempDir(), "objects.json")
	if err := os.WriteFile(mixedFile, mixed, 0o600); err != nil {
		t.Fatal(err)
	}
	dump := small + "iptables/save-nft-ipv4.txt"
	const all = "8 objects with invalid names left out: first Service"
	for _, tc := range []struct {
		name string
		args []string
		warn string
	}{
		{"triage", []string{"triage", "--from-dump", dump, "--node", "node-a", "--at", "1795939150"}, all},
		{"triage json", []string{"triage", "--from-dump", dump, "--node", "node-a", "--at", "1795939150", "-o", "json"}, all},
		{"map", []string{"map", "--from-dump", dump, "--node", "node-a"}, all},
		// One Service's objects are read, and the objects of other kinds.
		{"explain", []string{"explain", "svc/frontend", "-n", "shop", "--from-dump", dump, "--node", "node-a"}, `1 object with an invalid name left out: Node "../x"`},
	} {
		want, wantErrOut, wantErr := runCmd(t, nil, append(tc.args, "--from-objects", small+"objects.json")...)
		got, errOut, err := runCmd(t, nil, append(tc.args, "--from-objects", mixedFile)...)
		if got != want || exitOf(t, err, errOut) != exitOf(t, wantErr, wantErrOut) {
			t.Errorf("%s: the hostile objects changed the output:\n--- alone\n%s\n--- with them\n%s", tc.name, want, got)
		}
		if strings.Contains(got, "\x1b") || strings.Contains(errOut, "\x1b") {
			t.Errorf("%s: a raw escape reached the output", tc.name)
		}
		if n := strings.Count(errOut, "left out"); n != 1 || !strings.Contains(errOut, tc.warn) {
			t.Errorf("%s: stderr %q, want one warning: %s", tc.name, errOut, tc.warn)
		}
	}
}
