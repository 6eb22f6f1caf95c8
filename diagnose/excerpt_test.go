package diagnose

import (
	"strings"
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/internal/fixture"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// An excerpt of a table (one chain's iptables -S, written by the real
// iptables from kube-proxy's rules) is not the table: what it does not show
// is not an error, but not checked (false ERRORs otherwise: "no
// KUBE-SERVICES rule", "KUBE-MARK-MASQ has no MARK rule").
func TestExcerptIsNotChecked(t *testing.T) {
	dir := fixture.Dir("small-v1.37")
	rs := fixture.ReadFiles(t, "../inspect/iptables/testdata/forms/small-v1.37/ipv4-S-nat-svc.txt")
	if tb := rs.IPTable(kubeproxy.IPv4, kubeproxy.TableNAT); tb == nil || !tb.Partial {
		t.Fatalf("the one-chain listing is not read as partial")
	}
	n := &Node{Name: "node-a", Ruleset: rs, Objects: fixture.Objects(t, dir)}
	ex, err := ExplainService(n, "shop", "cart", "")
	if err != nil {
		t.Fatal(err)
	}
	if ex.Status != StatusIncomplete || ex.hasProblems() {
		t.Errorf("explain on an excerpt: status %s, problems %+v", ex.Status, ex.Ports[0].Problems)
	}
	found := false
	for _, g := range ex.NotChecked {
		found = found || strings.Contains(g.Check, "no KUBE-SERVICES rule for the cluster IP 10.96.10.7:80") && strings.Contains(g.Reason, "excerpt")
	}
	if !found {
		t.Errorf("the missing entry is not listed as not checked: %+v", ex.NotChecked)
	}
	// Triage: no false ERROR either (the masquerade chains are not in the
	// excerpt).
	tr := Triage(n)
	for _, f := range tr.Findings {
		if f.Severity == SeverityError {
			t.Errorf("triage on an excerpt: %s %s: %s", f.Area, f.Subject, f.Message)
		}
	}
	if tr.Status != StatusIncomplete {
		t.Errorf("triage status %s", tr.Status)
	}
	// The same chain in the whole table, with its KUBE-SERVICES rule
	// removed, is an error again.
	whole := fixture.ReadFiles(t, "../inspect/iptables/testdata/forms/small-v1.37/ipv4-S-nat.txt")
	nat := whole.IPTable(kubeproxy.IPv4, kubeproxy.TableNAT)
	svcs := nat.Chain(kubeproxy.ChainServices)
	kept := svcs.Rules[:0]
	for _, r := range svcs.Rules {
		if r.Target != "KUBE-SVC-I5LIAMPLWKMBJ54B" {
			kept = append(kept, r)
		}
	}
	svcs.Rules = kept
	ex, err = ExplainService(&Node{Name: "node-a", Ruleset: whole, Objects: fixture.Objects(t, dir)}, "shop", "cart", "")
	if err != nil {
		t.Fatal(err)
	}
	if ex.Status != StatusProblems || ex.Ports[0].Problems[0].Kind != ProblemNoEntry {
		t.Errorf("whole table without the entry: status %s, %+v", ex.Status, ex.Ports[0].Problems)
	}
}
