package correlate

import (
	"strings"
	"testing"
)

func FuzzReadObjects(f *testing.F) {
	f.Add(`{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Service","metadata":{"name":"a","namespace":"b"},"spec":{"clusterIP":"10.0.0.1","ports":[{"name":"p","port":80,"protocol":"TCP"}]}}]}`)
	f.Add("apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: a, namespace: b, labels: {kubernetes.io/service-name: a}}\naddressType: IPv4\nendpoints: [{addresses: [10.1.1.1]}]\nports: [{name: p, port: 80, protocol: TCP}]\n---\nkind: Service\n")
	f.Add("{}")
	f.Fuzz(func(t *testing.T, s string) {
		objs, err := ReadObjects(strings.NewReader(s), "fuzz")
		if err != nil {
			return
		}
		for _, sp := range objs.ServicePorts() {
			_ = sp.String()
			for _, ep := range sp.Endpoints {
				_ = ep.String()
			}
		}
	})
}

func FuzzParseNFTName(f *testing.F) {
	f.Add("service-ULMVA6XW-ns1/svc1/tcp/p80")
	f.Add("endpoint-5HFFSBBM-ns5/svc5/tcp/p80__fd00.10.180..3/80")
	f.Add("endpoint-CI6C53Q3-" + strings.Repeat("x", 230) + "...")
	f.Fuzz(func(t *testing.T, s string) {
		n, ok := ParseNFTName(s)
		if ok && n.HashOK && n.Truncated {
			t.Fatalf("%q: truncated and verified", s)
		}
	})
}
