package diagnose

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/proxyrules/kubectl-proxyrules/inspect"
	"github.com/proxyrules/kubectl-proxyrules/inspect/input"
	"github.com/proxyrules/kubectl-proxyrules/inspect/metrics"
	"github.com/proxyrules/kubectl-proxyrules/internal/fixture"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

var timeZero time.Time

// fxStale builds the stale function from expected.json, as correlate does
// in production, and counts the stale per-service chains (those whose rules
// kube-proxy would count; leftover KUBE-XLB chains are stale too but never
// counted).
func fxStale(t testing.TB, dir string) (ChainSet, int) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var exp struct {
		Chains []struct {
			Mode, Family, Table, Chain string
			Stale                      bool
		}
	}
	if err := json.Unmarshal(data, &exp); err != nil {
		t.Fatal(err)
	}
	stale := ChainSet{}
	n := 0
	for _, c := range exp.Chains {
		if c.Stale && c.Mode == "iptables" {
			stale[ChainRef{kubeproxy.Family(c.Family), c.Table, c.Chain}] = true
			if kubeproxy.IsServiceChainName(c.Chain) {
				n++
			}
		}
	}
	return stale, n
}

func fxMetrics(t testing.TB, dir, file string) *metrics.Metrics {
	t.Helper()
	text, ok := fixture.Text(t, dir, file)
	if !ok {
		t.Fatalf("%s/%s missing", dir, file)
	}
	m, err := metrics.Parse(strings.NewReader(text), file)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// fxRestoreFailed reports whether the fixture's iptables metrics count a
// failed restore (the metric then describes rules that never reached the
// kernel).
func fxRestoreFailed(m *metrics.Metrics) bool {
	for _, s := range m.Samples(metrics.RestoreFailures) {
		if s.Value > 0 {
			return true
		}
	}
	return false
}

// fxLegacyLeftovers: the fixture's iptables-nft-save says legacy tables are
// present, so its save-legacy files are an older kube-proxy's leftovers, not
// the state the metrics describe.
func fxLegacyLeftovers(t testing.TB, dir string) bool {
	rs, ok := fixture.Load(t, dir, "iptables/save-nft-ipv4.txt")
	return ok && len(rs.Dumps) > 0 && rs.Dumps[0].LegacyTablesPresent
}

func metricValue(t testing.TB, m *metrics.Metrics, fam kubeproxy.Family, table string) int {
	t.Helper()
	v, ok := m.Value(metrics.IPTablesTotal, map[string]string{"ip_family": string(fam), "table": table})
	if !ok {
		t.Fatalf("no %s for %s %s", metrics.IPTablesTotal, fam, table)
	}
	return int(v)
}

// TestKubeProxyRuleCountFixtures: for every fixture and every form of its
// iptables dumps, the count equals kube-proxy's own iptables_total exactly
// (large-churn: once the lingering stale chains are left out).
func TestKubeProxyRuleCountFixtures(t *testing.T) {
	forms := []string{"iptables/save-nft-ipv4.txt", "iptables/save-nft-ipv6.txt", "iptables/save-legacy-ipv4.txt", "iptables/save-legacy-ipv6.txt", "iptables/restore-ipv4.txt", "iptables/restore-ipv6.txt", "iptables/nft-list.txt"}
	checked := 0
	for _, dir := range fixture.Dirs(t) {
		if _, ok := fixture.Text(t, dir, "metrics-iptables.txt"); !ok {
			continue
		}
		m := fxMetrics(t, dir, "metrics-iptables.txt")
		if fxRestoreFailed(m) {
			continue // TestCompareCountsFixtures checks the diagnosis
		}
		stale, nStale := fxStale(t, dir)
		legacyLeftovers := fxLegacyLeftovers(t, dir)
		for _, f := range forms {
			if legacyLeftovers && strings.Contains(f, "legacy") {
				continue
			}
			rs, ok := fixture.Load(t, dir, f)
			if !ok {
				continue
			}
			for _, tb := range rs.IPTables {
				if tb.Name != "nat" && tb.Name != "filter" {
					continue
				}
				want := metricValue(t, m, tb.Family, tb.Name)
				lnp := true
				if on, _ := LocalhostNodePortsFromDump(rs.IPTable(tb.Family, "nat")); on != nil {
					lnp = *on
				}
				got, staleRules := KubeProxyRuleCount(tb, stale, lnp)
				plain, _ := KubeProxyRuleCount(tb, nil, lnp)
				if got != want {
					t.Errorf("%s %s %s %s: counted %d, kube-proxy's metric %d (stale rules %d)", filepath.Base(dir), f, tb.Family, tb.Name, got, want, staleRules)
				}
				if plain != got+staleRules {
					t.Errorf("%s %s %s %s: without stale %d ≠ %d + %d", filepath.Base(dir), f, tb.Family, tb.Name, plain, got, staleRules)
				}
				if (staleRules > 0) != (nStale > 0 && tb.Family == kubeproxy.IPv4 && tb.Name == "nat") {
					t.Errorf("%s %s %s %s: %d stale rules (%d stale chains in expected.json)", filepath.Base(dir), f, tb.Family, tb.Name, staleRules, nStale)
				}
				checked++
			}
		}
	}
	if checked < 40 {
		t.Errorf("only %d tables checked", checked)
	}
}

// TestKubeProxyRuleCountScope: built-in chain jumps, canaries, kubelet
// chains, KUBE-XLB leftovers and other tables are not counted; KUBE-FIREWALL
// is counted only for IPv4 with localhostNodePorts.
func TestKubeProxyRuleCountScope(t *testing.T) {
	rs := fixture.Parse(t, `*nat
:PREROUTING ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:KUBE-SERVICES - [0:0]
:KUBE-MARK-MASQ - [0:0]
:KUBE-MARK-DROP - [0:0]
:KUBE-KUBELET-CANARY - [0:0]
:KUBE-PROXY-CANARY - [0:0]
:KUBE-XLB-AAAAAAAAAAAAAAAA - [0:0]
:KUBE-SVC-AAAAAAAAAAAAAAAA - [0:0]
:KUBE-SEP-AAAAAAAAAAAAAAAA - [0:0]
:CNI-FOO - [0:0]
-A PREROUTING -j KUBE-SERVICES
-A POSTROUTING -j KUBE-POSTROUTING
-A KUBE-SERVICES -d 10.96.0.1/32 -p tcp -m comment --comment "a cluster IP" -j KUBE-SVC-AAAAAAAAAAAAAAAA
-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000
-A KUBE-MARK-DROP -j MARK --set-xmark 0x8000/0x8000
-A KUBE-XLB-AAAAAAAAAAAAAAAA -j KUBE-SEP-AAAAAAAAAAAAAAAA
-A KUBE-SVC-AAAAAAAAAAAAAAAA -j KUBE-SEP-AAAAAAAAAAAAAAAA
-A KUBE-SEP-AAAAAAAAAAAAAAAA -p tcp -j DNAT --to-destination 10.0.0.1:80
-A CNI-FOO -j RETURN
COMMIT
*filter
:INPUT ACCEPT [0:0]
:KUBE-FIREWALL - [0:0]
:KUBE-FORWARD - [0:0]
-A INPUT -j KUBE-FIREWALL
-A KUBE-FIREWALL ! -s 127.0.0.0/8 -d 127.0.0.0/8 -m comment --comment "block incoming localnet connections" -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP
-A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP
COMMIT
*mangle
:KUBE-SERVICES - [0:0]
-A KUBE-SERVICES -j RETURN
COMMIT
`, "scope")
	nat, filter := rs.IPTable(kubeproxy.IPv4, "nat"), rs.IPTable(kubeproxy.IPv4, "filter")
	if n, s := KubeProxyRuleCount(nat, nil, true); n != 4 || s != 0 {
		t.Errorf("nat: %d %d, want 4 0", n, s)
	}
	if n, s := KubeProxyRuleCount(nat, ChainSet{{kubeproxy.IPv4, "nat", "KUBE-SEP-AAAAAAAAAAAAAAAA"}: true}, true); n != 3 || s != 1 {
		t.Errorf("nat with a stale SEP: %d %d, want 3 1", n, s)
	}
	if n, _ := KubeProxyRuleCount(filter, nil, true); n != 2 {
		t.Errorf("filter, localhostNodePorts on: %d, want 2", n)
	}
	if n, _ := KubeProxyRuleCount(filter, nil, false); n != 1 {
		t.Errorf("filter, localhostNodePorts off: %d, want 1", n)
	}
	filter.Family = kubeproxy.IPv6
	if n, _ := KubeProxyRuleCount(filter, nil, true); n != 1 {
		t.Errorf("IPv6 filter: %d, want 1 (no KUBE-FIREWALL)", n)
	}
	if n, s := KubeProxyRuleCount(rs.IPTable(kubeproxy.IPv4, "mangle"), nil, true); n != 0 || s != 0 {
		t.Errorf("mangle: %d %d", n, s)
	}
	if n, s := KubeProxyRuleCount(nil, nil, true); n != 0 || s != 0 {
		t.Errorf("nil: %d %d", n, s)
	}
	if on, _ := LocalhostNodePortsFromDump(nat); on != nil {
		t.Errorf("no nodeports rule: localhostNodePorts %v", *on)
	}
}

// TestCompareCountsFixtures: every fixture's metrics agree with its dump.
func TestCompareCountsFixtures(t *testing.T) {
	for _, dir := range fixture.Dirs(t) {
		if _, ok := fixture.Text(t, dir, "metrics-iptables.txt"); !ok {
			continue
		}
		name := filepath.Base(dir)
		m := fxMetrics(t, dir, "metrics-iptables.txt")
		stale, nStale := fxStale(t, dir)
		failed := fxRestoreFailed(m)
		legacyLeftovers := fxLegacyLeftovers(t, dir)
		for _, forms := range fixture.IPTablesForms {
			if legacyLeftovers && strings.Contains(forms[0], "legacy") {
				continue
			}
			rs, ok := fixture.Load(t, dir, forms...)
			if !ok {
				continue
			}
			rep := CompareCounts(rs, m, stale, timeZero, CountOptions{})
			if failed {
				// The metric was set for a restore that failed: every row of
				// that family says so, whether the counts happen to agree
				// (sync-failure-v1.37: the failed sync swaps one endpoint
				// for another, so the counts are equal) or not.
				failedFam := map[kubeproxy.Family]bool{}
				for _, f := range rep.Failures {
					if f.Metric == metrics.RestoreFailures {
						failedFam[f.Family] = true
					}
				}
				if len(failedFam) == 0 {
					t.Errorf("%s %s: failures %+v", name, forms[0], rep.Failures)
				}
				for _, row := range rep.Tables {
					switch {
					case failedFam[row.Family] && row.Agree && !strings.Contains(row.Reason, "restore(s) failed"),
						failedFam[row.Family] && !row.Agree && !strings.Contains(row.Reason, "failed restore"):
						t.Errorf("%s %s %s %s: reason %q", name, forms[0], row.Family, row.Table, row.Reason)
					case !failedFam[row.Family] && (!row.Agree || row.Reason != ""):
						t.Errorf("%s %s %s %s: %+v", name, forms[0], row.Family, row.Table, row)
					}
				}
				continue
			}
			if rep.Mode != "iptables" || rep.ModeFromMetrics != "iptables" || rep.ModeFromDump != "iptables" {
				t.Errorf("%s %s: mode %q (metrics %q, dump %q)", name, forms[0], rep.Mode, rep.ModeFromMetrics, rep.ModeFromDump)
			}
			if len(rep.Tables) != 4 {
				t.Errorf("%s %s: %d rows: %+v", name, forms[0], len(rep.Tables), rep.Tables)
			}
			for _, row := range rep.Tables {
				if !row.Agree || row.Difference == nil || *row.Difference != 0 || !row.InDump || row.Metric == nil {
					t.Errorf("%s %s %s %s: %+v", name, forms[0], row.Family, row.Table, row)
				}
				if row.UnreferencedChains != 0 || len(row.Suspects) != 0 {
					t.Errorf("%s %s %s %s: unreferenced %d suspects %+v", name, forms[0], row.Family, row.Table, row.UnreferencedChains, row.Suspects)
				}
				if row.StaleRules > 0 && !strings.Contains(row.Reason, "stale") {
					t.Errorf("%s: stale rules without a reason: %+v", name, row)
				}
			}
			if legacyLeftovers && forms[0] == "iptables/save-nft-ipv4.txt" && !strings.Contains(strings.Join(rep.Notes, "\n"), "iptables-legacy tables are present") {
				t.Errorf("%s %s: no note on the legacy tables: %q", name, forms[0], rep.Notes)
			}
			if len(rep.Failures) != 0 || len(rep.LastSync) != 2 {
				t.Errorf("%s: failures %+v lastSync %+v", name, rep.Failures, rep.LastSync)
			}
			for _, s := range rep.LastSync {
				if s.LastSync == nil || s.LastQueued == nil || s.Pending || s.Hung || s.LastSyncAgeSeconds != nil {
					t.Errorf("%s: sync state %+v", name, s)
				}
			}
			meta := fixture.ReadMeta(t, dir)
			_ = meta
		}
		// Without the stale function the lingering chains still show, as
		// chains nothing reaches any more.
		if nStale > 0 && !failed && !fxHasLeftoverChains(t, dir) {
			rs, _ := fixture.Load(t, dir, "iptables/save-nft-ipv4.txt")
			rep := CompareCounts(rs, m, nil, timeZero, CountOptions{})
			for _, row := range rep.Tables {
				if row.Table != "nat" || row.Family != kubeproxy.IPv4 {
					continue
				}
				if row.Agree || row.Difference == nil || *row.Difference != row.UnreferencedRules || row.UnreferencedChains != nStale ||
					!strings.Contains(row.Reason, "stale chains lingering") {
					t.Errorf("%s without stale func: %+v", name, row)
				}
			}
		}
	}
}

// TestCompareCountsLargeClusterMode reads the mode off the comments.
func TestCompareCountsLargeClusterMode(t *testing.T) {
	type metaLC struct {
		LargeClusterModeByFamily map[kubeproxy.Family]bool `json:"largeClusterModeByFamily"`
	}
	for _, dir := range fixture.Dirs(t) {
		data, err := os.ReadFile(filepath.Join(dir, "meta.json"))
		if err != nil {
			t.Fatal(err)
		}
		var meta metaLC
		if err := json.Unmarshal(data, &meta); err != nil {
			t.Fatal(err)
		}
		for _, forms := range fixture.IPTablesForms {
			rs, ok := fixture.Load(t, dir, forms...)
			if !ok {
				continue
			}
			lc := CompareCounts(rs, nil, nil, timeZero, CountOptions{}).LargeClusterMode
			if len(lc.ByFamily) != 2 {
				t.Fatalf("%s: %+v", dir, lc)
			}
			anyLarge := false
			for _, f := range lc.ByFamily {
				want := meta.LargeClusterModeByFamily[f.Family]
				anyLarge = anyLarge || want
				if forms[0] == "iptables/nft-list.txt" {
					if f.FromDump != nil || !strings.Contains(f.Evidence, "nft") {
						t.Errorf("%s nft: %s: %+v", dir, f.Family, f)
					}
					continue
				}
				if f.FromDump == nil || *f.FromDump != want {
					t.Errorf("%s %s %s: fromDump %v, meta %v (%s)", dir, forms[0], f.Family, f.FromDump, want, f.Evidence)
				}
			}
			if forms[0] != "iptables/nft-list.txt" && (lc.FromDump == nil || *lc.FromDump != anyLarge) {
				t.Errorf("%s %s: overall %v", dir, forms[0], lc.FromDump)
			}
			// The same evidence whatever order the dumps come in.
			if len(forms) == 2 {
				if rev, ok := fixture.Load(t, dir, forms[1], forms[0]); ok {
					if got := CompareCounts(rev, nil, nil, timeZero, CountOptions{}).LargeClusterMode.Evidence; got != lc.Evidence {
						t.Errorf("%s: evidence depends on dump order:\n%s\n%s", dir, got, lc.Evidence)
					}
				}
			}
		}
	}
}

// TestCompareCountsDiagnoses: each way the dump and the metrics can differ
// gets a specific reason.
func TestCompareCountsDiagnoses(t *testing.T) {
	dir := filepath.Join(fixture.Root, "small-v1.37")
	save4, _ := fixture.Text(t, dir, "iptables/save-nft-ipv4.txt")
	save6, _ := fixture.Text(t, dir, "iptables/save-nft-ipv6.txt")
	metricsText, _ := fixture.Text(t, dir, "metrics-iptables.txt")
	// queuedAfterSync makes IPv4's last queued sync 5 s later than its
	// last successful one: a sync that has not succeeded.
	queuedAfterSync := func(text string) string {
		re := regexp.MustCompile(`(?m)^kubeproxy_sync_proxy_rules_last_timestamp_seconds\{ip_family="IPv4"\} (\S+)$`)
		m := re.FindStringSubmatch(text)
		if m == nil {
			t.Fatal("no IPv4 last sync timestamp in the metrics")
		}
		last, _ := strconv.ParseFloat(m[1], 64)
		q := regexp.MustCompile(`(?m)^kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds\{ip_family="IPv4"\} \S+$`)
		return q.ReplaceAllString(text, fmt.Sprintf(`kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds{ip_family="IPv4"} %f`, last+5))
	}
	setMetric := func(text string, fam kubeproxy.Family, table string, v int) string {
		re := regexp.MustCompile(fmt.Sprintf(`(?m)^(kubeproxy_sync_proxy_rules_iptables_(total|last)\{ip_family="%s",table="%s"\}) \d+$`, fam, table))
		return re.ReplaceAllString(text, fmt.Sprintf("${1} %d", v))
	}
	// kube-proxy < 1.33: no ip_family label; the IPv4 proxier synced last.
	var old []string
	for _, l := range strings.Split(metricsText, "\n") {
		if strings.Contains(l, `ip_family="IPv6"`) {
			continue
		}
		old = append(old, strings.ReplaceAll(l, `ip_family="IPv4",`, ""))
	}
	oldMetrics := strings.Join(old, "\n")

	nodeportsRule := `-A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS`
	type rowWant struct {
		fam    kubeproxy.Family
		table  string
		agree  bool
		diff   *int
		reason string
	}
	ip := func(i int) *int { return &i }
	for _, c := range []struct {
		name        string
		dumps       []string
		metricsText string
		opts        CountOptions
		rows        []rowWant
		note        string
		failures    int
		noRowsFor   kubeproxy.Family
	}{
		{"agree", []string{save4, save6}, metricsText, CountOptions{},
			[]rowWant{{kubeproxy.IPv4, "nat", true, ip(0), ""}, {kubeproxy.IPv6, "filter", true, ip(0), ""}}, "", 0, ""},
		{"foreign rule in KUBE-SERVICES", []string{insertIntoTable(save4, "nat", nil, []string{"-A KUBE-SERVICES -s 192.0.2.1/32 -j ACCEPT"}), save6}, metricsText, CountOptions{},
			[]rowWant{{kubeproxy.IPv4, "nat", false, ip(1), "another writer"}, {kubeproxy.IPv4, "filter", true, ip(0), ""}}, "", 0, ""},
		{"foreign rule in a service chain", []string{insertIntoTable(save4, "nat", nil, []string{"-A KUBE-SVC-NPX46M4PTMTKRN6Y -j LOG"}), save6}, metricsText, CountOptions{},
			[]rowWant{{kubeproxy.IPv4, "nat", false, ip(1), "another writer"}}, "", 0, ""},
		{"foreign rule in filter KUBE-FORWARD", []string{insertIntoTable(save4, "filter", nil, []string{"-A KUBE-FORWARD -s 10.0.0.0/8 -j ACCEPT"}), save6}, metricsText, CountOptions{},
			[]rowWant{{kubeproxy.IPv4, "filter", false, ip(1), "another writer"}}, "", 0, ""},
		{"rule removed", []string{strings.Replace(save4, "-A KUBE-SVC-NPX46M4PTMTKRN6Y -m comment --comment \"default/kubernetes:https -> 10.0.0.2:6443\" -j KUBE-SEP-HSRFD4S3AHFNRYNO\n", "", 1), save6}, metricsText, CountOptions{},
			[]rowWant{{kubeproxy.IPv4, "nat", false, ip(-1), "fewer"}}, "", 0, ""},
		// The failed sync is queued after the last success: failing now.
		{"failed restore", []string{save4, save6},
			queuedAfterSync(setMetric(metricsText, kubeproxy.IPv4, "nat", 190)) + "# TYPE kubeproxy_sync_proxy_rules_iptables_restore_failures_total counter\nkubeproxy_sync_proxy_rules_iptables_restore_failures_total{ip_family=\"IPv4\"} 2\n",
			CountOptions{}, []rowWant{{kubeproxy.IPv4, "nat", false, ip(-2), "failed restore"}, {kubeproxy.IPv6, "nat", true, ip(0), ""}}, "", 1, ""},
		{"no ip_family label", []string{save4, save6}, oldMetrics, CountOptions{},
			[]rowWant{{kubeproxy.IPv4, "nat", true, ip(0), "IPv4 synced last"}, {kubeproxy.IPv6, "nat", false, ip(24 - 188), "no ip_family label"}}, "no ip_family label", 0, ""},
		{"table not in dump", []string{save4}, metricsText, CountOptions{},
			[]rowWant{{kubeproxy.IPv6, "nat", false, nil, "table not in dump"}, {kubeproxy.IPv4, "nat", true, ip(0), ""}}, "", 0, ""},
		{"localhostNodePorts off", []string{strings.Replace(save4, nodeportsRule, strings.Replace(nodeportsRule, "-j KUBE-NODEPORTS", "! -d 127.0.0.0/8 -j KUBE-NODEPORTS", 1), 1), save6},
			setMetric(metricsText, kubeproxy.IPv4, "filter", 8), CountOptions{},
			[]rowWant{{kubeproxy.IPv4, "filter", true, ip(0), ""}}, "", 0, ""},
		{"localhostNodePorts off from the configuration", []string{save4, save6}, setMetric(metricsText, kubeproxy.IPv4, "filter", 8), CountOptions{LocalhostNodePorts: new(bool)},
			[]rowWant{{kubeproxy.IPv4, "filter", true, ip(0), ""}}, "", 0, ""},
		{"truncated dump", []string{save4[:strings.Index(save4, "-A KUBE-SVC-NPX46M4PTMTKRN6Y")], save6}, metricsText, CountOptions{},
			[]rowWant{{kubeproxy.IPv4, "nat", false, nil, "truncated"}}, "", 0, ""},
		{"no metrics", []string{save4, save6}, "", CountOptions{},
			[]rowWant{{kubeproxy.IPv4, "nat", false, nil, "no metrics"}}, "no metrics given", 0, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			rs := &inspect.Ruleset{}
			for i, d := range c.dumps {
				rs.Merge(fixture.Parse(t, d, fmt.Sprintf("dump%d", i)))
			}
			var m *metrics.Metrics
			if c.metricsText != "" {
				var err error
				if m, err = metrics.Parse(strings.NewReader(c.metricsText), "metrics"); err != nil {
					t.Fatal(err)
				}
			}
			rep := CompareCounts(rs, m, nil, timeZero, c.opts)
			for _, w := range c.rows {
				var row *TableCount
				for i := range rep.Tables {
					if rep.Tables[i].Family == w.fam && rep.Tables[i].Table == w.table {
						row = &rep.Tables[i]
					}
				}
				if row == nil {
					t.Fatalf("no row %s %s in %+v", w.fam, w.table, rep.Tables)
				}
				diffBad := false
				switch {
				case w.diff != nil:
					diffBad = row.Difference == nil || *row.Difference != *w.diff
				case !strings.Contains(c.name, "truncated"):
					diffBad = row.Difference != nil
				default:
					diffBad = row.Difference == nil || *row.Difference >= 0
				}
				if row.Agree != w.agree || diffBad {
					t.Errorf("%s %s: agree %v diff %v, want %v %v (%+v)", w.fam, w.table, row.Agree, deref(row.Difference), w.agree, deref(w.diff), *row)
				}
				if !strings.Contains(row.Reason, w.reason) || (w.reason == "" && row.Reason != "") {
					t.Errorf("%s %s: reason %q, want %q", w.fam, w.table, row.Reason, w.reason)
				}
			}
			if c.note != "" && !strings.Contains(strings.Join(rep.Notes, "\n"), c.note) {
				t.Errorf("notes %q lack %q", rep.Notes, c.note)
			}
			if len(rep.Failures) != c.failures {
				t.Errorf("failures %+v", rep.Failures)
			}
			if c.name == "foreign rule in KUBE-SERVICES" {
				for _, row := range rep.Tables {
					if row.Family == kubeproxy.IPv4 && row.Table == "nat" && (len(row.Suspects) != 1 || !strings.Contains(row.Suspects[0].Rule, "192.0.2.1")) {
						t.Errorf("suspects %+v", row.Suspects)
					}
				}
			}
			if c.name == "failed restore" && (rep.Failures[0].Family != kubeproxy.IPv4 || rep.Failures[0].Value != 2 || rep.Failures[0].Meaning == "") {
				t.Errorf("failure %+v", rep.Failures[0])
			}
		})
	}
}

// fxHasLeftoverChains: meta.json lists leftover chains (stale in
// expected.json, but not service chains kube-proxy lets linger).
func fxHasLeftoverChains(t testing.TB, dir string) bool {
	data, err := os.ReadFile(filepath.Join(dir, "meta.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		LeftoverChains []json.RawMessage `json:"leftoverChains"`
	}
	_ = json.Unmarshal(data, &m)
	return len(m.LeftoverChains) > 0
}

func deref(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}

// TestCompareCountsNFTables: nftables mode has no rule-count metric; the
// report says so rather than compare.
func TestCompareCountsNFTables(t *testing.T) {
	for _, dir := range fixture.Dirs(t) {
		name := filepath.Base(dir)
		if _, ok := fixture.Text(t, dir, "metrics-nftables.txt"); !ok {
			continue
		}
		rs, ok := fixture.Load(t, dir, "nftables/ruleset.txt")
		if !ok {
			continue
		}
		m := fxMetrics(t, dir, "metrics-nftables.txt")
		rep := CompareCounts(rs, m, nil, timeZero, CountOptions{})
		if rep.Mode != "nftables" || rep.ModeFromMetrics != "nftables" || rep.ModeFromDump != "nftables" || len(rep.Tables) != 0 {
			t.Errorf("%s: mode %s rows %+v", name, rep.Mode, rep.Tables)
		}
		if !strings.Contains(strings.Join(rep.Notes, "\n"), "no rule-count metric") {
			t.Errorf("%s: notes %q", name, rep.Notes)
		}
		if len(rep.LastSync) != 2 || rep.LargeClusterMode.FromDump != nil {
			t.Errorf("%s: lastSync %+v largeCluster %+v", name, rep.LastSync, rep.LargeClusterMode)
		}
		// iptables leftovers next to nftables mode: listed, not compared
		ipt, ok := fixture.Load(t, dir, "iptables/save-nft-ipv4.txt")
		if !ok {
			continue
		}
		rs.Merge(ipt)
		rep = CompareCounts(rs, m, nil, timeZero, CountOptions{})
		if rep.Mode != "nftables" || len(rep.Tables) != 2 || rep.Tables[0].Metric != nil || !strings.Contains(rep.Tables[0].Reason, "leftovers") {
			t.Errorf("%s with iptables leftovers: %+v", name, rep.Tables)
		}
		if !strings.Contains(strings.Join(rep.Notes, "\n"), "leftovers of another mode") {
			t.Errorf("%s: notes %q", name, rep.Notes)
		}
	}
}

// TestCompareCountsSync: pending and hung syncs.
func TestCompareCountsSync(t *testing.T) {
	const last, queued = 1795939142.5, 1795939200.0
	text := fmt.Sprintf(`# TYPE kubeproxy_sync_proxy_rules_last_timestamp_seconds gauge
kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv4"} %f
kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv6"} %f
# TYPE kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds gauge
kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds{ip_family="IPv4"} %f
kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds{ip_family="IPv6"} %f
`, last, queued+1, queued, queued)
	m, err := metrics.Parse(strings.NewReader(text), "m")
	if err != nil {
		t.Fatal(err)
	}
	at := func(s float64) time.Time { return unixFloat(s) }
	for _, c := range []struct {
		now            time.Time
		pending4, hung bool
		reason         string
	}{
		{timeZero, true, false, "give the scrape time"},
		{at(queued + 5), true, false, "within 2 × syncPeriod"},
		{at(queued + 300), true, true, "queued but not synced"},
		{at(queued + 2*3600), true, true, "queued but not synced"},
	} {
		st := CompareCounts(nil, m, nil, c.now, CountOptions{}).LastSync
		if len(st) != 2 || st[0].Family != kubeproxy.IPv4 || st[1].Family != kubeproxy.IPv6 {
			t.Fatalf("%+v", st)
		}
		s4, s6 := st[0], st[1]
		if s4.Pending != c.pending4 || s4.Hung != c.hung || !strings.Contains(s4.Reason, c.reason) {
			t.Errorf("now %v: IPv4 %+v", c.now, s4)
		}
		if s6.Pending || (s6.Hung != (c.now.Sub(at(queued+1)) > time.Hour+time.Minute)) {
			t.Errorf("now %v: IPv6 %+v", c.now, s6)
		}
		if !c.now.IsZero() && (s4.LastSyncAgeSeconds == nil || math.Abs(*s4.LastSyncAgeSeconds-c.now.Sub(at(last)).Seconds()) > 0.01) {
			t.Errorf("age %v", s4.LastSyncAgeSeconds)
		}
	}
	// a longer syncPeriod moves the threshold
	st := CompareCounts(nil, m, nil, at(queued+300), CountOptions{SyncPeriod: 10 * time.Minute}).LastSync
	if st[0].Hung {
		t.Errorf("syncPeriod 10m: hung after 5m: %+v", st[0])
	}
}

// TestCompareCountsPartial: nothing panics on partial input.
func TestCompareCountsPartial(t *testing.T) {
	m := fxMetrics(t, filepath.Join(fixture.Root, "small-v1.37"), "metrics-iptables.txt")
	rep := CompareCounts(nil, nil, nil, timeZero, CountOptions{})
	if rep.Mode != "unknown" || rep.Tables == nil || rep.LastSync == nil || rep.Failures == nil || rep.Notes == nil {
		t.Errorf("nil inputs: %+v", rep)
	}
	rep = CompareCounts(&inspect.Ruleset{}, m, nil, time.Now(), CountOptions{})
	if len(rep.Tables) != 4 {
		t.Errorf("metrics only: %+v", rep.Tables)
	}
	for _, row := range rep.Tables {
		if row.InDump || row.Agree || !strings.Contains(row.Reason, "table not in dump") {
			t.Errorf("metrics only: %+v", row)
		}
	}
	// tables without kube-proxy chains, and every truncation of a dump
	CompareCounts(fixture.Parse(t, "*nat\n:FOO - [0:0]\n-A FOO -j RETURN\nCOMMIT\n*filter\nCOMMIT\n", "x"), m, nil, timeZero, CountOptions{})
	text, _ := fixture.Text(t, filepath.Join(fixture.Root, "small-v1.37"), "iptables/save-nft-ipv4.txt")
	for n := 0; n < len(text); n += 131 {
		in, err := input.Read(strings.NewReader(text[:n]), "cut")
		if err != nil || in.Ruleset == nil {
			continue
		}
		rep := CompareCounts(in.Ruleset, m, allStale(in.Ruleset), time.Now(), CountOptions{})
		for _, row := range rep.Tables {
			if row.InDump && row.Metric != nil && row.Difference == nil {
				t.Fatalf("cut at %d: %+v", n, row)
			}
		}
	}
	// JSON keeps its shape
	b, err := json.Marshal(CompareCounts(nil, m, nil, timeZero, CountOptions{}))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{`"mode"`, `"tables"`, `"largeClusterMode"`, `"fromDump"`, `"lastSync"`, `"failures"`, `"notes"`, `"metric"`, `"actual"`, `"difference"`, `"agree"`} {
		if !strings.Contains(string(b), k) {
			t.Errorf("JSON lacks %s: %s", k, b)
		}
	}
}

// allStale calls every chain of rs stale.
func allStale(rs *inspect.Ruleset) ChainSet {
	s := ChainSet{}
	for _, t := range rs.IPTables {
		for _, c := range t.Chains {
			s[ChainRef{t.Family, t.Name, c.Name}] = true
		}
	}
	return s
}
