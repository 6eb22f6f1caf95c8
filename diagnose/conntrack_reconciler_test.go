package diagnose_test

import (
	"strings"
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/diagnose"
	"github.com/proxyrules/kubectl-proxyrules/inspect/metrics"
	"github.com/proxyrules/kubectl-proxyrules/internal/fixture"
)

// kube-proxy's conntrack reconciler metrics (small-v1.37's, written by
// kube-proxy's own code) are read per family, and the entries kube-proxy
// is counted on to clean say whether its cleanup has been running; without
// the metrics (absent until its first run) they say it has not run.
func TestConntrackReconcilerMetrics(t *testing.T) {
	text, ok := fixture.Text(t, fixture.Dir("small-v1.37"), "metrics-iptables.txt")
	if !ok {
		t.Fatal("no metrics")
	}
	withRuns, err := metrics.Parse(strings.NewReader(text), "metrics-iptables.txt")
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, l := range strings.Split(text, "\n") {
		if !strings.Contains(l, "conntrack_reconciler") {
			kept = append(kept, l)
		}
	}
	noRuns, err := metrics.Parse(strings.NewReader(strings.Join(kept, "\n")), "before-first-reconcile.txt")
	if err != nil {
		t.Fatal(err)
	}
	pending := ctCase{lines: append([]string{ct("udp", "10.244.0.5", 40001, "10.96.0.10", 53, "10.244.0.99", 53, 110)}, healthyTable...)}
	for _, tc := range []struct {
		name     string
		metrics  []*metrics.Metrics
		runs     int
		evidence string
	}{
		{"after reconciles", []*metrics.Metrics{withRuns}, 1, "kube-proxy's conntrack reconciler since kube-proxy started: IPv4: 1 run, 0 entries deleted"},
		{"before the first", []*metrics.Metrics{noRuns}, 0, "has not run since kube-proxy started"},
		{"no metrics given", nil, -1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, in := pending.node(t)
			n.Metrics = tc.metrics
			rep := diagnose.Conntrack(n, in)
			switch {
			case tc.runs < 0 && rep.Reconciler != nil:
				t.Errorf("reconciler %+v without metrics", rep.Reconciler)
			case tc.runs >= 0 && (rep.Reconciler == nil || len(rep.Reconciler) != tc.runs):
				t.Errorf("reconciler %+v, want %d families", rep.Reconciler, tc.runs)
			}
			var ev string
			for _, p := range rep.Problems {
				if p.Kind == diagnose.ConntrackStalePending {
					ev = p.Evidence
				}
			}
			if tc.evidence != "" && !strings.Contains(ev, tc.evidence) || tc.evidence == "" && strings.Contains(ev, "reconciler") {
				t.Errorf("evidence %q, want …%q…", ev, tc.evidence)
			}
		})
	}
}

// The reasons for stale UDP entries are kube-proxy v1.37's cleanup: on a
// node whose kube-proxy is known to be another minor version they are not
// checked, and the report says so; a v1.37 or unknown version, or no
// stale entry, adds nothing.
func TestConntrackCleanupVersion(t *testing.T) {
	stale := ctCase{lines: append([]string{ct("udp", "10.244.0.5", 40001, "10.96.0.10", 53, "10.244.0.99", 53, 110)}, healthyTable...)}
	for _, tc := range []struct {
		name, version string
		c             ctCase
		wantGap       bool
	}{
		{"v1.37", "v1.37.2", stale, false},
		{"unknown", "", stale, false},
		{"v1.36", "v1.36.4", stale, true},
		{"v1.38", "v1.38.0", stale, true},
		{"v1.36 without stale entries", "v1.36.4", ctCase{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, in := tc.c.node(t)
			n.KubeProxyVersion = tc.version
			rep := diagnose.Conntrack(n, in)
			gap := false
			for _, g := range rep.NotChecked {
				gap = gap || strings.Contains(g.Check, "judged as kube-proxy v1.37 cleans") && strings.Contains(g.Reason, tc.version)
			}
			if gap != tc.wantGap {
				t.Errorf("gap %v, want %v: %+v", gap, tc.wantGap, rep.NotChecked)
			}
		})
	}
}
