package correlate

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/yaml"
)

// project keeps of obj (a *Service or *EndpointSlice) only apiVersion, kind
// and the fields paths name ("spec.ports[].name": JSON names, [] for each
// element), as the fast decoder fills them.
func project[T any](obj *T, paths []string) *T {
	out := new(T)
	src, dst := reflect.ValueOf(obj).Elem(), reflect.ValueOf(out).Elem()
	copyPath(src, dst, []string{"apiVersion"})
	copyPath(src, dst, []string{"kind"})
	for _, p := range paths {
		copyPath(src, dst, strings.Split(p, "."))
	}
	return out
}

// copyPath copies the field at path from src to dst (structs, allocating
// pointers and slices on the way as src has them).
func copyPath(src, dst reflect.Value, path []string) {
	switch src.Kind() {
	case reflect.Pointer:
		if src.IsNil() {
			return
		}
		if dst.IsNil() {
			dst.Set(reflect.New(src.Type().Elem()))
		}
		copyPath(src.Elem(), dst.Elem(), path)
		return
	case reflect.Slice:
		if src.IsNil() {
			return
		}
		if dst.IsNil() {
			dst.Set(reflect.MakeSlice(src.Type(), src.Len(), src.Len()))
		}
		for i := 0; i < src.Len(); i++ {
			copyPath(src.Index(i), dst.Index(i), path)
		}
		return
	}
	if len(path) == 0 {
		dst.Set(src)
		return
	}
	name, _ := strings.CutSuffix(path[0], "[]") // slices are walked above
	f, ok := jsonField(src.Type(), name)
	if !ok {
		panic("no field " + name + " in " + src.Type().String())
	}
	copyPath(src.FieldByIndex(f.Index), dst.FieldByIndex(f.Index), path[1:])
}

// jsonField finds the field of t that JSON calls name, through inlined
// embedded structs (TypeMeta).
func jsonField(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == name {
			return f, true
		}
		if f.Anonymous && (tag == "" || strings.Contains(opts, "inline")) {
			if inner, ok := jsonField(f.Type, name); ok {
				inner.Index = append([]int{i}, inner.Index...)
				return inner, true
			}
		}
	}
	return reflect.StructField{}, false
}

// checkFastAgrees decodes data both ways and compares: the fast path must
// equal the generic decoder's objects projected on the fields it fills,
// with the same service ports and other kinds. wantFast says the fast path
// must take this input.
func checkFastAgrees(t *testing.T, name string, data []byte, wantFast bool) {
	t.Helper()
	generic, genErr := decodeGeneric(bytes.NewReader(data), name)
	fast, _, ok := decodeFast(data, nil)
	if wantFast && !ok {
		t.Fatalf("%s: the fast path declined", name)
	}
	got, err := ReadObjects(bytes.NewReader(data), name)
	if genErr != nil || generic != nil && len(generic.Services)+len(generic.EndpointSlices)+len(generic.Other) == 0 {
		if err == nil {
			t.Fatalf("%s: the generic decoder fails (%v) but ReadObjects does not", name, genErr)
		}
		if genErr != nil && err.Error() != genErr.Error() {
			t.Errorf("%s: error %q, the generic decoder's is %q", name, err, genErr)
		}
		return
	}
	if err != nil {
		t.Fatalf("%s: %v (the generic decoder reads it)", name, err)
	}
	if ok {
		want := &Objects{Other: generic.Other}
		for _, s := range generic.Services {
			want.Services = append(want.Services, project(s, fastServiceFields))
		}
		for _, s := range generic.EndpointSlices {
			want.EndpointSlices = append(want.EndpointSlices, project(s, fastSliceFields))
		}
		if diff := cmp.Diff(want.Services, fast.Services); diff != "" {
			t.Errorf("%s: Services (-generic, projected +fast):\n%s", name, diff)
		}
		if diff := cmp.Diff(want.EndpointSlices, fast.EndpointSlices); diff != "" {
			t.Errorf("%s: EndpointSlices (-generic, projected +fast):\n%s", name, diff)
		}
		if diff := cmp.Diff(want.Other, fast.Other); diff != "" {
			t.Errorf("%s: other kinds (-generic +fast):\n%s", name, diff)
		}
	}
	generic.dropInvalid() // as ReadObjects does on either path
	if diff := cmp.Diff(generic.ServicePorts(), got.ServicePorts(), cmp.AllowUnexported(ServicePort{}, Endpoint{})); diff != "" {
		t.Errorf("%s: service ports (-generic +ReadObjects):\n%s", name, diff)
	}
}

// Every fixture's objects (kubectl get … -o json of kube-proxy's own
// scenarios, nodes.json) decode on the fast path to what the Kubernetes
// decoder reads.
func TestFastDecoderAgreesOnFixtures(t *testing.T) {
	files, _ := filepath.Glob("../testdata/fixtures/*/objects.json")
	nodes, _ := filepath.Glob("../testdata/fixtures/*/nodes.json")
	if len(files) < 10 || len(nodes) == 0 {
		t.Fatalf("fixtures: %v %v", files, nodes)
	}
	for _, f := range append(files, nodes...) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		checkFastAgrees(t, f, data, true)
		// The same objects compacted, as the API server lists them and
		// bundles store them.
		var compact bytes.Buffer
		compactJSON(t, &compact, data)
		checkFastAgrees(t, f+" (compact)", compact.Bytes(), true)
	}
}

func compactJSON(t *testing.T, dst *bytes.Buffer, src []byte) {
	t.Helper()
	if err := json.Compact(dst, src); err != nil {
		t.Fatal(err)
	}
}

func toYAML(t *testing.T, v any) string {
	t.Helper()
	data, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// The rules at the edges: where the fast path answers it agrees with the
// Kubernetes decoder; the rest it hands over, with the same errors.
func TestFastDecoderEdges(t *testing.T) {
	const svc = `{"apiVersion":"v1","kind":"Service","metadata":{"name":"web","namespace":"shop"},"spec":{"clusterIP":"10.96.0.10","ports":[{"name":"http","port":80,"protocol":"TCP"}]}}`
	const slice = `{"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice","metadata":{"name":"web-1","namespace":"shop","labels":{"kubernetes.io/service-name":"web"}},"addressType":"IPv4","endpoints":[{"addresses":["10.244.0.5"],"conditions":{"ready":true}}],"ports":[{"name":"http","port":8080,"protocol":"TCP"}]}`
	list := func(items ...string) string {
		return `{"apiVersion":"v1","kind":"List","items":[` + strings.Join(items, ",") + `]}`
	}
	tests := []struct {
		name     string
		in       string
		wantFast bool
	}{
		{"list", list(svc, slice), true},
		{"kubectl order: items before kind", `{"apiVersion":"v1","items":[` + svc + `],"kind":"List","metadata":{"resourceVersion":""}}`, true},
		{"single objects, a stream with nulls", svc + "\n" + "null" + slice + "  \n", true},
		{"nested lists", list(list(svc), slice), true},
		{"typed list kind", `{"apiVersion":"v1","kind":"ServiceList","items":[` + svc + `]}`, true},
		{"other kinds stay whole", list(svc, `{"apiVersion":"v1","kind":"Node","metadata":{"name":"node-a","labels":{"topology.kubernetes.io/zone":"z"}},"spec":{"podCIDR":"10.244.0.0/24"},"status":{"addresses":[{"type":"InternalIP","address":"10.0.0.1"}]}}`,
			`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},"spec":{"replicas":2,"ports":"odd"}}`,
			`{"apiVersion":"discovery.k8s.io/v1beta1","kind":"EndpointSlice","metadata":{"name":"old"},"addressType":"IPv4","endpoints":[]}`), true},
		{"escaped keys and values", list(`{"apiVersion":"v1","kind":"Service","metadata":{"n\u0061me":"w\u00e9b","namespace":"shop\/x"},"spec":{"clusterIP":"10.96.0.1","ports":[{"port":80}]}}`), true},
		{"invalid UTF-8 is replaced", list("{\"apiVersion\":\"v1\",\"kind\":\"Service\",\"metadata\":{\"name\":\"w\xffb\",\"namespace\":\"s\"},\"spec\":{\"clusterIP\":\"10.96.0.1\",\"ports\":[{\"port\":80}]}}"), true},
		{"keys match case-sensitively", list(`{"apiVersion":"v1","kind":"Service","metadata":{"Name":"ignored","name":"web","namespace":"shop"},"spec":{"ClusterIP":"1.2.3.4","clusterIP":"10.96.0.1","Ports":[{"port":1}],"ports":[{"Port":9,"port":80}]}}`), true},
		{"a head key in another case goes generic", list(`{"apiVersion":"v1","Kind":"Service","metadata":{"name":"web","namespace":"shop"},"spec":{"clusterIP":"10.96.0.1"}}`, svc), true},
		{"a top-level head key in another case", `{"APIVERSION":"v1","kind":"List","Items":[` + svc + `]}`, true},
		{"duplicate keys go generic", list(`{"apiVersion":"v1","kind":"Service","metadata":{"name":"a","name":"web","namespace":"shop"},"spec":{"ports":[{"port":1,"nodePort":5}],"ports":[{"port":80}],"clusterIP":"10.96.0.1"}}`), true},
		{"nulls leave fields unset", list(`{"apiVersion":"v1","kind":"Service","metadata":{"name":"web","namespace":null,"labels":null},"spec":{"clusterIP":"10.96.0.1","clusterIPs":null,"ports":[null,{"name":null,"port":null}],"internalTrafficPolicy":null,"sessionAffinityConfig":null,"externalIPs":[null]},"status":null}`,
			`{"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice","metadata":{"name":"x","namespace":"shop","labels":{"kubernetes.io/service-name":"web","l":null}},"addressType":null,"endpoints":[null,{"addresses":null,"conditions":{"ready":null,"serving":false},"nodeName":null,"zone":"z","hints":null}],"ports":[{"name":null,"port":null,"protocol":null}]}`), true},
		{"empty is not nil", list(`{"apiVersion":"v1","kind":"Service","metadata":{"name":"web","namespace":"shop","labels":{}},"spec":{"clusterIPs":[],"ports":[],"externalIPs":[],"sessionAffinityConfig":{},"loadBalancerSourceRanges":[]},"status":{"loadBalancer":{"ingress":[]}}}`,
			`{"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice","metadata":{"name":"x","namespace":"shop","labels":{}},"endpoints":[{"addresses":[],"hints":{"forZones":[],"forNodes":[{"name":"n"}]}}],"ports":[]}`), true},
		{"every field read", list(`{"apiVersion":"v1","kind":"Service","metadata":{"name":"lb","namespace":"shop"},"spec":{"type":"LoadBalancer","clusterIP":"10.96.0.3","clusterIPs":["10.96.0.3","fd00::3"],"ports":[{"name":"https","protocol":"TCP","port":443,"nodePort":30443,"targetPort":"https"}],"externalIPs":["192.0.2.1"],"loadBalancerSourceRanges":["10.0.0.0/8"],"externalTrafficPolicy":"Local","internalTrafficPolicy":"Local","healthCheckNodePort":31000,"sessionAffinity":"ClientIP","sessionAffinityConfig":{"clientIP":{"timeoutSeconds":600}}},"status":{"loadBalancer":{"ingress":[{"ip":"198.51.100.1","ipMode":"VIP"},{"hostname":"lb.example"}]}}}`,
			`{"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice","metadata":{"name":"lb-1","namespace":"shop","labels":{"kubernetes.io/service-name":"lb"}},"addressType":"IPv6","endpoints":[{"addresses":["fd00::5","fd00::6"],"conditions":{"ready":false,"serving":true,"terminating":true},"nodeName":"node-a","zone":"zone-a","hints":{"forZones":[{"name":"zone-a"}],"forNodes":[{"name":"node-a"}]},"targetRef":{"kind":"Pod","name":"p"}}],"ports":[{"name":"https","protocol":"TCP","port":8443,"appProtocol":"h2"}]}`), true},
		// Errors: the generic decoder's, word for word.
		{"numbers the typed fields refuse", list(`{"apiVersion":"v1","kind":"Service","metadata":{"name":"web","namespace":"shop"},"spec":{"clusterIP":"10.96.0.1","ports":[{"port":80.0}]}}`), false},
		{"an int32 out of range", list(`{"apiVersion":"v1","kind":"Service","metadata":{"name":"web","namespace":"shop"},"spec":{"clusterIP":"10.96.0.1","ports":[{"port":2147483648}]}}`), false},
		{"a string where a number is due", list(`{"apiVersion":"v1","kind":"Service","metadata":{"name":"web","namespace":"shop"},"spec":{"clusterIP":"10.96.0.1","ports":[{"port":"80"}]}}`), false},
		{"a number where a string is due", list(`{"apiVersion":"v1","kind":"Service","metadata":{"name":7}}`), false},
		{"an object without kind", list(svc, `{"apiVersion":"v1","metadata":{"name":"x"}}`), false},
		{"a null item", list(svc, `null`), false},
		{"no kind at the top", `{"items":[` + svc + `]}`, false},
		{"truncated", list(svc, slice)[:200], false},
		{"trailing garbage", list(svc) + "}", false},
		{"bad literal skipped", list(`{"apiVersion":"v1","kind":"Service","metadata":{"name":"web","namespace":"shop"},"x":tru}`), false},
		{"bad number skipped", list(`{"apiVersion":"v1","kind":"Service","metadata":{"name":"web","namespace":"shop"},"x":01}`), false},
		{"control character in a string", list("{\"apiVersion\":\"v1\",\"kind\":\"Service\",\"metadata\":{\"name\":\"a\tb\"}}"), false},
		{"too deep", list(`{"apiVersion":"v1","kind":"Service","metadata":{"name":"web"},"x":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}`), false},
		{"yaml", "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  namespace: shop\nspec:\n  clusterIP: 10.96.0.1\n  ports:\n  - port: 80\n", false},
		{"an array at the top", `[` + svc + `]`, false},
		{"nothing of interest", `{"apiVersion":"v1","kind":"List","items":[]}`, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkFastAgrees(t, tc.name, []byte(tc.in), tc.wantFast)
		})
	}
}

// ReadServiceObjects keeps one Service, its slices and the other kinds,
// on both paths.
func TestReadServiceObjects(t *testing.T) {
	data, err := os.ReadFile("../testdata/fixtures/small-v1.37/objects.json")
	if err != nil {
		t.Fatal(err)
	}
	all, err := ReadObjects(bytes.NewReader(data), "objects.json")
	if err != nil {
		t.Fatal(err)
	}
	only := ServiceFilter{Namespace: "shop", Name: "frontend"}
	var yamlDocs bytes.Buffer
	for _, s := range all.Services {
		yamlDocs.WriteString("---\n" + toYAML(t, s))
	}
	for _, s := range all.EndpointSlices {
		yamlDocs.WriteString("---\n" + toYAML(t, s))
	}
	for name, in := range map[string][]byte{"json": data, "yaml": yamlDocs.Bytes()} {
		got, err := ReadServiceObjects(bytes.NewReader(in), name, only)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Services) != 1 || got.Services[0].Name != "frontend" {
			t.Errorf("%s: services %v", name, got.Services)
		}
		var want []string
		for _, s := range all.EndpointSlices {
			if s.Namespace == "shop" && s.Labels[discoveryv1.LabelServiceName] == "frontend" {
				want = append(want, s.Name)
			}
		}
		var names []string
		for _, s := range got.EndpointSlices {
			names = append(names, s.Name)
		}
		if len(want) == 0 || !reflect.DeepEqual(names, want) {
			t.Errorf("%s: slices %v, want %v", name, names, want)
		}
		if diff := cmp.Diff(servicePortsOf(all, only), got.ServicePorts(), cmp.AllowUnexported(ServicePort{}, Endpoint{})); diff != "" {
			t.Errorf("%s: service ports (-all, filtered +ReadServiceObjects):\n%s", name, diff)
		}
	}
	if _, err := ReadServiceObjects(strings.NewReader(`{"apiVersion":"v1","kind":"List","items":[]}`), "empty.json", only); err == nil {
		t.Error("no objects at all: no error")
	}
}

func servicePortsOf(o *Objects, only ServiceFilter) []*ServicePort {
	var out []*ServicePort
	for _, sp := range o.ServicePorts() {
		if sp.Namespace == only.Namespace && sp.Name == only.Name {
			out = append(out, sp)
		}
	}
	return out
}
