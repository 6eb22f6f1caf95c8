//go:build e2e

package e2e

import "testing"

// TestOracleVectors: the oracle's names match kube-proxy's own test vectors
// (pkg/proxy/{iptables,nftables}/proxier_test.go).
func TestOracleVectors(t *testing.T) {
	svc1 := svcDef{ns: "ns1", name: "svc1", ports: []svcPort{{name: "p80", port: 80, target: 80, proto: "TCP"}},
		eps: []endpoint{{ip: "10.180.0.1"}}}
	kube := svcDef{ns: "default", name: "kubernetes", ports: []svcPort{{name: "https", port: 443, target: 6443, proto: "TCP"}}}
	web := svcDef{ns: "default", name: "web", ports: []svcPort{{port: 80, target: 80, proto: "TCP"}}}
	for name, want := range map[string]owner{
		"KUBE-SVC-XPGD46QRK7WJZT7O": {servicePort: "ns1/svc1:p80", protocol: "TCP", kind: "service"},
		"KUBE-SEP-SXIVWICOYRO3J4NJ": {servicePort: "ns1/svc1:p80", protocol: "TCP", kind: "endpoint", endpoint: "10.180.0.1:80"},
		"KUBE-SVC-NPX46M4PTMTKRN6Y": {servicePort: "default/kubernetes:https", protocol: "TCP", kind: "service"},
		"KUBE-SVC-LOLE4ISW44XBNF3G": {servicePort: "default/web", protocol: "TCP", kind: "service"},
	} {
		if got, ok := allNames("iptables", []svcDef{svc1, kube, web})[name]; !ok || got != want {
			t.Errorf("%s: %+v, want %+v", name, got, want)
		}
	}
	for name, want := range map[string]owner{
		"service-ULMVA6XW-ns1/svc1/tcp/p80":                 {servicePort: "ns1/svc1:p80", protocol: "TCP", kind: "service"},
		"endpoint-5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80": {servicePort: "ns1/svc1:p80", protocol: "TCP", kind: "endpoint", endpoint: "10.180.0.1:80"},
	} {
		if got, ok := allNames("nftables", []svcDef{svc1})[name]; !ok || got != want {
			t.Errorf("%s: %+v, want %+v", name, got, want)
		}
	}
}
