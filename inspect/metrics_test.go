package inspect

import (
	"os"
	"strings"
	"testing"
)

// metrics-iptables.txt is what kube-proxy v1.37.2's own /metrics handler
// served after the fixture's syncs.
func TestParseMetricsFromKubeProxy(t *testing.T) {
	f, err := os.Open("../testdata/fixtures/small-v1.37/metrics-iptables.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	in, err := Read(f, "metrics-iptables.txt")
	if err != nil {
		t.Fatal(err)
	}
	if in.Format != FormatMetrics || in.Metrics == nil {
		t.Fatalf("format %s", in.Format)
	}
	counts := in.Metrics.RuleCounts()
	seen := map[string]RuleCount{}
	for _, rc := range counts {
		seen[string(rc.Family)+"/"+rc.Table] = rc
	}
	for _, k := range []string{"IPv4/nat", "IPv4/filter", "IPv6/nat", "IPv6/filter"} {
		rc, ok := seen[k]
		if !ok || rc.Total <= 0 || !rc.HasLast || rc.Last > rc.Total {
			t.Errorf("%s: %+v (all: %+v)", k, rc, counts)
		}
	}
	if _, ok := in.Metrics.Value("kubeproxy_sync_proxy_rules_last_timestamp_seconds", map[string]string{"ip_family": "IPv4"}); !ok {
		t.Error("no last sync timestamp for IPv4")
	}
}

func TestParseMetricsNoFamilyLabel(t *testing.T) {
	// kube-proxy before 1.33: no ip_family label.
	const old = `# TYPE kubeproxy_sync_proxy_rules_iptables_total gauge
kubeproxy_sync_proxy_rules_iptables_total{table="nat"} 72
kubeproxy_sync_proxy_rules_iptables_total{table="filter"} 11
`
	m, err := ParseMetrics(strings.NewReader(old), "old")
	if err != nil {
		t.Fatal(err)
	}
	rc := m.RuleCounts()
	if len(rc) != 2 || rc[0].Family != "" || rc[0].Table != "filter" || rc[0].Total != 11 || rc[1].Total != 72 || rc[0].HasLast {
		t.Errorf("RuleCounts = %+v", rc)
	}
}

func FuzzParseMetrics(f *testing.F) {
	if data, err := os.ReadFile("../testdata/fixtures/small-v1.37/metrics-iptables.txt"); err == nil {
		f.Add(string(data[:min(len(data), 4096)]))
	}
	f.Add("# TYPE a gauge\na{b=\"c\"} 1\n")
	f.Add("a 1 2 3\n\x00")
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseMetrics(strings.NewReader(s), "fuzz")
		if err == nil {
			m.RuleCounts()
		}
	})
}

// FuzzRead feeds anything to format detection and the chosen parser.
func FuzzRead(f *testing.F) {
	f.Add(saveSample)
	f.Add("table ip kube-proxy {\n chain services {\n }\n}\n")
	f.Add(`{"nftables":[{"table":{"family":"ip","name":"x"}}]}`)
	f.Add("add table ip kube-proxy\nadd chain ip kube-proxy services\n")
	f.Add("# HELP x y\nx 1\n")
	f.Fuzz(func(t *testing.T, s string) {
		in, err := Read(strings.NewReader(s), "fuzz")
		if err != nil {
			return
		}
		if (in.Ruleset == nil) == (in.Metrics == nil) {
			t.Fatalf("format %s: ruleset %v metrics %v", in.Format, in.Ruleset != nil, in.Metrics != nil)
		}
	})
}
