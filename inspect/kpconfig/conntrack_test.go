package kpconfig

import (
	"strings"
	"testing"
	"time"
)

// kube-proxy's conntrack section: given values, its defaults for absent
// or null ones, 0 that leaves the node's sysctl alone, both layouts.
func TestParseConntrack(t *testing.T) {
	i32 := func(v int32) *int32 { return &v }
	for _, tc := range []struct {
		name, in          string
		maxPerCore, min   *int32
		established, udp  time.Duration
		beLiberal         bool
		defaultedContains string
	}{
		{"absent: kube-proxy's defaults",
			`{"apiVersion":"kubeproxy.config.k8s.io/v1alpha1","kind":"KubeProxyConfiguration"}`,
			i32(32768), i32(131072), 24 * time.Hour, 0, false, "conntrack.maxPerCore: 32768"},
		{"null as kubeadm writes it",
			`{"apiVersion":"kubeproxy.config.k8s.io/v1alpha1","kind":"KubeProxyConfiguration","conntrack":{"maxPerCore":null,"min":null,"tcpEstablishedTimeout":null,"udpTimeout":"0s"}}`,
			i32(32768), i32(131072), 24 * time.Hour, 0, false, "conntrack.min: 131072"},
		{"set, and maxPerCore 0 leaves the node's max",
			`{"apiVersion":"kubeproxy.config.k8s.io/v1alpha1","kind":"KubeProxyConfiguration","conntrack":{"maxPerCore":0,"min":0,"tcpEstablishedTimeout":"2h","udpTimeout":"45s","tcpBeLiberal":true}}`,
			i32(0), i32(0), 2 * time.Hour, 45 * time.Second, true, "conntrack.tcpCloseWaitTimeout: 1h0m0s"},
		{"the internal type's Linux.Conntrack",
			`{"kubeproxy.config.k8s.io":{"Mode":"iptables","Linux":{"Conntrack":{"MaxPerCore":65536,"Min":null,"TCPEstablishedTimeout":"1h0m0s","UDPTimeout":"30s","TCPBeLiberal":false}}}}`,
			i32(65536), i32(131072), time.Hour, 30 * time.Second, false, "Conntrack.Min: 131072"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse(strings.NewReader(tc.in), "test")
			if err != nil {
				t.Fatal(err)
			}
			ct := cfg.Conntrack
			if *ct.MaxPerCore != *tc.maxPerCore || *ct.Min != *tc.min || ct.TCPEstablishedTimeout != tc.established || ct.UDPTimeout != tc.udp || ct.TCPBeLiberal != tc.beLiberal {
				t.Errorf("conntrack %+v (maxPerCore %d, min %d)", ct, *ct.MaxPerCore, *ct.Min)
			}
			if !strings.Contains(strings.Join(cfg.Defaulted, "\n"), tc.defaultedContains) {
				t.Errorf("defaulted %q lacks %q", cfg.Defaulted, tc.defaultedContains)
			}
		})
	}
}
