package diagnose_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/diagnose"
	"github.com/proxyrules/kubectl-proxyrules/inspect"
	"github.com/proxyrules/kubectl-proxyrules/inspect/kpconfig"
	"github.com/proxyrules/kubectl-proxyrules/inspect/metrics"
	"github.com/proxyrules/kubectl-proxyrules/internal/fixture"
)

// node builds the diagnosis input of a fixture as an SRE would pass it:
// the form's dumps, the objects (and Nodes), the metrics and ConfigMap of
// that mode, evidence time from the metrics.
func node(t *testing.T, dir string, form fixture.Form) *diagnose.Node {
	t.Helper()
	objs := fixture.Objects(t, dir)
	if text, ok := fixture.Text(t, dir, "nodes.json"); ok {
		nodes, err := correlate.ReadObjects(strings.NewReader(text), "nodes.json")
		if err != nil {
			t.Fatal(err)
		}
		objs.Add(nodes)
	}
	n := &diagnose.Node{Name: fixture.ReadMeta(t, dir).Node, Ruleset: fixture.ReadFiles(t, form.Files...), Objects: objs}
	if text, ok := fixture.Text(t, dir, "metrics-"+form.Mode+".txt"); ok {
		m, err := metrics.Parse(strings.NewReader(text), "metrics")
		if err != nil {
			t.Fatal(err)
		}
		n.Metrics = []*metrics.Metrics{m}
		n.At, _ = m.Newest()
	}
	if text, ok := fixture.Text(t, dir, "kube-proxy-configmap-"+form.Mode+".yaml"); ok {
		cfg, err := kpconfig.Parse(strings.NewReader(text), "configmap")
		if err != nil {
			t.Fatal(err)
		}
		n.Config = cfg
		n.Kernel = healthyKernel(t)
		n.Kernel.MaxPerCore, n.Kernel.Min = cfg.Conntrack.MaxPerCore, cfg.Conntrack.Min
	} else {
		n.Kernel = healthyKernel(t)
	}
	return n
}

// healthyScenarios are the fixtures kube-proxy synced without any fault.
var healthyScenarios = []string{"small-v1.37", "large-v1.37", "large-churn-v1.37", "masq-bit15-v1.37", "small-v1.34", "nft-churn-v1.37", "topology-v1.37"}

// On every healthy fixture, in every form and mode, triage finds no error
// or warning and, with every input given, says HEALTHY.
func TestTriageHealthyFixtures(t *testing.T) {
	for _, sc := range healthyScenarios {
		dir := fixture.Dir(sc)
		for _, form := range fixture.Forms(t, dir) {
			t.Run(sc+"/"+form.Name, func(t *testing.T) {
				rep := diagnose.Triage(node(t, dir, form))
				for _, f := range rep.Findings {
					if f.Severity != diagnose.SeverityInfo {
						t.Errorf("%s %s %s: %s", f.Severity, f.Area, f.Subject, f.Message)
					}
				}
				if rep.Status != diagnose.StatusHealthy {
					t.Errorf("status %s, not checked: %+v", rep.Status, rep.NotChecked)
				}
			})
		}
	}
}

// mustFirst checks that the report's first finding is the fault, found
// once, with the status a fault gives.
func mustFirst(t *testing.T, rep *diagnose.TriageReport, area, contains string) {
	t.Helper()
	if rep.Status != diagnose.StatusProblems || len(rep.Findings) == 0 {
		t.Fatalf("status %s, findings %+v", rep.Status, rep.Findings)
	}
	first := rep.Findings[0]
	if first.Area != area || !strings.Contains(first.Message, contains) {
		t.Fatalf("first finding %s %q, want %s containing %q; all: %+v", first.Area, first.Message, area, contains, rep.Findings)
	}
	n := 0
	for _, f := range rep.Findings {
		if strings.Contains(f.Message, contains) {
			n++
		}
	}
	if n != 1 {
		t.Errorf("the fault is reported %d times", n)
	}
}

// withLineRemoved drops the first line of a form's file that contains
// needle: a rule removed by hand.
func withLineRemoved(t *testing.T, n *diagnose.Node, path, needle string) *diagnose.Node {
	t.Helper()
	text, _ := fixture.Text(t, filepath.Dir(path), filepath.Base(path))
	i := strings.Index(text, needle)
	if i < 0 {
		t.Fatalf("%s has no %q", path, needle)
	}
	start := strings.LastIndex(text[:i], "\n") + 1
	end := i + strings.Index(text[i:], "\n") + 1
	rs := fixture.Parse(t, text[:start]+text[end:], filepath.Base(path))
	other := &inspect.Ruleset{}
	for _, d := range n.Ruleset.Dumps {
		if d.Source != filepath.Base(path) {
			other.Dumps = append(other.Dumps, d)
		}
	}
	for _, tb := range n.Ruleset.IPTables {
		if tb.Source != filepath.Base(path) {
			other.IPTables = append(other.IPTables, tb)
		}
	}
	other.Merge(rs)
	n.Ruleset = other
	return n
}

func iptablesForm(t *testing.T, dir string) fixture.Form {
	for _, f := range fixture.Forms(t, dir) {
		if f.Name == "iptables-nft-save" {
			return f
		}
	}
	t.Fatal("no iptables-nft-save form")
	return fixture.Form{}
}

// A rule removed by another writer: one cause (fewer rules than kube-proxy
// counted), its symptom the endpoint no rule reaches any more.
func TestVerdictRuleRemovedByHand(t *testing.T) {
	dir := fixture.Dir("small-v1.37")
	form := iptablesForm(t, dir)
	n := withLineRemoved(t, node(t, dir, form), form.Files[0], "-A KUBE-SVC-5AAIPCBE47H4PN46 -m comment --comment \"shop/unnamed -> 10.244.1.91:80\"")
	rep := diagnose.Triage(n)
	mustFirst(t, rep, "counts", "removed from kube-proxy's chains")
	if len(rep.Findings[0].Symptoms) < 2 {
		t.Errorf("symptoms %+v, want the endpoint and the count", rep.Findings[0].Symptoms)
	}
	// The cause rules out the stock guesses of its symptoms: here shop/web's
	// dispatch rule removed, whose problem alone asks whether kube-proxy
	// is running.
	n = withLineRemoved(t, node(t, dir, form), form.Files[0], "-A KUBE-SERVICES -d 10.96.10.1/32 -p tcp -m comment --comment \"shop/web:http cluster IP\"")
	rep = diagnose.Triage(n)
	mustFirst(t, rep, "counts", "removed from kube-proxy's chains")
	if len(rep.Findings[0].Symptoms) == 0 {
		t.Fatalf("no symptoms under %+v", rep.Findings[0])
	}
	for _, sy := range rep.Findings[0].Symptoms {
		if strings.Contains(sy.Message, "propagation lag") || strings.Contains(sy.Message, "has not caught up") || strings.Contains(sy.Message, "is kube-proxy running") {
			t.Errorf("symptom under \"another writer removed\" still guesses: %q", sy.Message)
		}
	}
}

// A source range removed from KUBE-FW: explain names it; triage joins it
// with the count difference; without metrics it stands alone.
func TestVerdictSourceRangeRemoved(t *testing.T) {
	dir := fixture.Dir("small-v1.37")
	form := iptablesForm(t, dir)
	n := withLineRemoved(t, node(t, dir, form), form.Files[0], "-A KUBE-FW-D4LVFIRJ4ZSSG6YW -s 10.0.0.0/8")
	ex, err := diagnose.ExplainService(n, "shop", "frontend", "")
	if err != nil {
		t.Fatal(err)
	}
	if ex.Status != diagnose.StatusProblems || len(ex.Ports[0].Problems) == 0 || !strings.Contains(ex.Ports[0].Problems[0].Message, "does not let 10.0.0.0/8 through") {
		t.Fatalf("explain: %s %+v", ex.Status, ex.Ports[0].Problems)
	}
	mustFirst(t, diagnose.Triage(n), "counts", "removed from kube-proxy's chains")
	n.Metrics = nil
	mustFirst(t, diagnose.Triage(n), "service", "does not let 10.0.0.0/8 through")
}

// The stale v1.23 KUBE-XLB chain that blocks every restore is the cause;
// the endpoints that moved, the failed restores, the counts and the stale
// chains are its symptoms.
func TestVerdictLeftoverBlocksRestores(t *testing.T) {
	dir := fixture.Dir("sync-failure-v1.37")
	rep := diagnose.Triage(node(t, dir, iptablesForm(t, dir)))
	mustFirst(t, rep, "sync", "KUBE-XLB-KKIQHC5ZC4IBF76O (left by kube-proxy ≤ 1.23) still jumps to KUBE-SEP-J3CSYAOACR6KUZIC")
	c := rep.Findings[0]
	if !strings.Contains(c.Message, "2 failures") || !strings.Contains(c.Message, "10.244.0.51:8080, which is gone") || !strings.Contains(c.Remedy, "iptables -t nat -X KUBE-XLB-KKIQHC5ZC4IBF76O") {
		t.Errorf("cause %+v", c)
	}
	for _, f := range rep.Findings[1:] {
		if f.Severity != diagnose.SeverityInfo {
			t.Errorf("unclaimed %s: %s", f.Severity, f.Message)
		}
	}
}

// node-a's dump passed as node-b's: said first; the Local-policy verdicts
// are its symptoms.
func TestVerdictDumpOfAnotherNode(t *testing.T) {
	dir := fixture.Dir("small-v1.37")
	n := node(t, dir, iptablesForm(t, dir))
	n.Name = "node-b"
	rep := diagnose.Triage(n)
	mustFirst(t, rep, "identity", "the dump is of node node-a, not node-b")
	if len(rep.Findings[0].Symptoms) == 0 {
		t.Error("no Local-policy symptoms")
	}
	n.Name = "node-zz"
	rep = diagnose.Triage(n)
	if rep.Findings[0].Area != "identity" || !strings.Contains(rep.Findings[0].Message, "no Node named node-zz") {
		t.Errorf("node-zz: %+v", rep.Findings[0])
	}
	// Offline without a name, the dump names its node.
	n.Name = ""
	if id := diagnose.IdentifyNode("", n); id.Inferred != "node-a" || !strings.Contains(id.Evidence, "Local-policy chains") {
		t.Errorf("inferred %+v", id)
	}
}

// An IPv4-only dump with IPv6 Services in the objects: not HEALTHY, but
// INCOMPLETE, naming the Services and the dump that would check them.
func TestVerdictMissingIPv6Dump(t *testing.T) {
	dir := fixture.Dir("small-v1.37")
	form := iptablesForm(t, dir)
	form.Files = form.Files[:1]
	rep := diagnose.Triage(node(t, dir, form))
	if rep.Status != diagnose.StatusIncomplete || rep.Summary[diagnose.SeverityError]+rep.Summary[diagnose.SeverityWarning] != 0 {
		t.Fatalf("status %s, findings %+v", rep.Status, rep.Findings)
	}
	if len(rep.NotChecked) != 1 || !strings.Contains(rep.NotChecked[0].Check, "2 IPv6 Services (shop/dual, shop/v6-only)") || rep.NotChecked[0].Remedy != "ip6tables-save" {
		t.Errorf("not checked %+v", rep.NotChecked)
	}
	for _, tc := range rep.Counts.Tables {
		if tc.Family == "IPv6" && (tc.Compared || tc.NotCompared == "") {
			t.Errorf("IPv6 %s compared %v (%q), want n/a with a reason", tc.Table, tc.Compared, tc.NotCompared)
		}
	}
}

// Metrics hours older than the bundle they came in: kube-proxy stopped
// syncing, said first.
func TestVerdictOldMetricsInFreshBundle(t *testing.T) {
	dir := fixture.Dir("small-v1.37")
	n := node(t, dir, iptablesForm(t, dir))
	n.At, n.AtSource = n.At.Add(3*time.Hour), "the bundle's collectedAt"
	mustFirst(t, diagnose.Triage(n), "sync", "kube-proxy is not syncing")
}

// slowSyncs: a sync queued 100 s ago, none finished since; kube-proxy's
// syncs take over 2 minutes (beyond the 16 s histogram buckets).
const slowSyncs = `# TYPE kubeproxy_sync_proxy_rules_last_timestamp_seconds gauge
kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv4"} 1000
# TYPE kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds gauge
kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds{ip_family="IPv4"} 1010
# TYPE kubeproxy_sync_proxy_rules_endpoint_changes_pending gauge
kubeproxy_sync_proxy_rules_endpoint_changes_pending 2
# TYPE kubeproxy_sync_proxy_rules_duration_seconds histogram
kubeproxy_sync_proxy_rules_duration_seconds_bucket{ip_family="IPv4",le="0.001"} 0
kubeproxy_sync_proxy_rules_duration_seconds_bucket{ip_family="IPv4",le="16.384"} 1
kubeproxy_sync_proxy_rules_duration_seconds_bucket{ip_family="IPv4",le="+Inf"} 3
kubeproxy_sync_proxy_rules_duration_seconds_sum{ip_family="IPv4"} 400
kubeproxy_sync_proxy_rules_duration_seconds_count{ip_family="IPv4"} 3
`

// Rules that lag the objects while kube-proxy has changes queued and
// syncs slowly: propagation lag, one cause, not an error in the rules.
func TestVerdictPropagationLag(t *testing.T) {
	dir := fixture.Dir("large-churn-v1.37")
	m, err := metrics.Parse(strings.NewReader(slowSyncs), "metrics")
	if err != nil {
		t.Fatal(err)
	}
	n := &diagnose.Node{Name: "node-a", Ruleset: fixture.ReadFiles(t, filepath.Join(dir, "iptables", "restore-ipv4.sync1.txt")), Objects: fixture.Objects(t, dir),
		Metrics: []*metrics.Metrics{m}, At: time.Unix(1110, 0)}
	rep := diagnose.Triage(n)
	st := rep.Counts.LastSync[0]
	if st.Hung || !st.Slow || st.LongSyncs != 2 || st.MeanSyncSeconds < 133 {
		t.Fatalf("sync state %+v, want slow, not hung", st)
	}
	first := rep.Findings[0]
	if first.Severity != diagnose.SeverityWarning || first.Title != "propagation lag" || !strings.Contains(first.Message, "10 endpoints are not yet programmed") || len(first.Symptoms) < 2 {
		t.Fatalf("first finding %+v", first)
	}
	if rep.Summary[diagnose.SeverityError] != 2 {
		// the stale chains still reached stay errors of their own, one
		// per former owner (load/svc-003 deleted, load/svc-001's
		// endpoints gone); with a sync underway, not "kube-proxy stopped"
		t.Errorf("summary %v: %+v", rep.Summary, rep.Findings)
	}
	for _, f := range rep.Findings {
		if f.Remedy != "" && strings.Contains(f.Subject, "(deleted)") {
			t.Errorf("a deleted Service under a sync underway is made a cause of its own: %+v", f)
		}
	}
}

// Two scrapes: the recent mean is the syncs between them, not the lifetime.
func TestSyncDurationsBetweenScrapes(t *testing.T) {
	later, err := metrics.Parse(strings.NewReader(slowSyncs), "later")
	if err != nil {
		t.Fatal(err)
	}
	earlier, err := metrics.Parse(strings.NewReader(strings.NewReplacer(`} 400`, `} 10`, `_count{ip_family="IPv4"} 3`, `_count{ip_family="IPv4"} 1`, "1010\n", "900\n", "} 1000\n", "} 900\n").Replace(slowSyncs)), "earlier")
	if err != nil {
		t.Fatal(err)
	}
	n := &diagnose.Node{Ruleset: &inspect.Ruleset{}, Metrics: []*metrics.Metrics{later, earlier}, At: time.Unix(1020, 0)}
	st := diagnose.Counts(n).LastSync[0]
	if st.RecentSyncs == nil || *st.RecentSyncs != 2 || st.RecentMeanSyncSeconds == nil || *st.RecentMeanSyncSeconds != 195 {
		t.Errorf("recent %v %v, want 2 syncs of 195 s", st.RecentSyncs, st.RecentMeanSyncSeconds)
	}
}

// nftables mode: a range removed from the firewall chain's saddr set.
func TestVerdictSourceRangeRemovedNFTables(t *testing.T) {
	dir := fixture.Dir("small-v1.37")
	text, _ := fixture.Text(t, dir, "nftables/ruleset.txt")
	cut := strings.Replace(text, "ip saddr != { 10.0.0.0/8, 198.51.100.10, 203.0.113.0/25 } drop", "ip saddr != { 10.0.0.0/8, 198.51.100.10, 203.0.113.0/25, 192.0.2.0/24 } drop", 1)
	if cut == text {
		t.Fatal("firewall rule not found")
	}
	n := &diagnose.Node{Name: "node-a", Ruleset: fixture.Parse(t, cut, "ruleset.txt"), Objects: fixture.Objects(t, dir)}
	mustFirst(t, diagnose.Triage(n), "service", "lets 192.0.2.0/24 through although loadBalancerSourceRanges do not allow it")
}
