package metrics

import (
	"os"
	"strings"
	"testing"
)

func TestParseMetricsNoFamilyLabel(t *testing.T) {
	// kube-proxy before 1.33: no ip_family label.
	const old = `# TYPE kubeproxy_sync_proxy_rules_iptables_total gauge
kubeproxy_sync_proxy_rules_iptables_total{table="nat"} 72
kubeproxy_sync_proxy_rules_iptables_total{table="filter"} 11
`
	m, err := Parse(strings.NewReader(old), "old")
	if err != nil {
		t.Fatal(err)
	}
	rc := m.RuleCounts()
	if len(rc) != 2 || rc[0].Family != "" || rc[0].Table != "filter" || rc[0].Total != 11 || rc[1].Total != 72 || rc[0].HasLast {
		t.Errorf("RuleCounts = %+v", rc)
	}
}

func FuzzParseMetrics(f *testing.F) {
	if data, err := os.ReadFile("../../testdata/fixtures/small-v1.37/metrics-iptables.txt"); err == nil {
		f.Add(string(data[:min(len(data), 4096)]))
	}
	f.Add("# TYPE a gauge\na{b=\"c\"} 1\n")
	f.Add("a 1 2 3\n\x00")
	f.Fuzz(func(t *testing.T, s string) {
		m, err := Parse(strings.NewReader(s), "fuzz")
		if err == nil {
			m.RuleCounts()
		}
	})
}
