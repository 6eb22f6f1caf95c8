package diagnose

import (
	"strings"
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/internal/fixture"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// A whole nat table without the filter table (`iptables -t nat -S`, written
// by the real iptables from kube-proxy's rules of a healthy node) does not
// show the reject of a Service without endpoints: not checked, never "no
// KUBE-SERVICES rule" (issue 28, item 1).
func TestNATWithoutFilterIsNotAnError(t *testing.T) {
	dir := fixture.Dir("small-v1.37")
	rs := fixture.ReadFiles(t, "../inspect/iptables/testdata/forms/small-v1.37/ipv4-S-nat.txt")
	if tb := rs.IPTable(kubeproxy.IPv4, kubeproxy.TableNAT); tb == nil || tb.Partial || len(rs.IPTables) != 1 {
		t.Fatalf("the whole nat table is not read as whole and alone")
	}
	n := &Node{Name: "node-a", Ruleset: rs, Objects: fixture.Objects(t, dir)}
	tr := Triage(n)
	for _, f := range tr.Findings {
		if f.Severity == SeverityError {
			t.Errorf("triage: %s %s: %s", f.Area, f.Subject, f.Message)
		}
	}
	ex, err := ExplainService(n, "shop", "empty", "")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, g := range ex.NotChecked {
		found = found || strings.Contains(g.Check, "no KUBE-SERVICES rule for the cluster IP") && strings.Contains(g.Reason, "no IPv4 filter table")
	}
	if ex.hasProblems() || !found {
		t.Errorf("explain shop/empty: status %s, problems %+v, not checked %+v", ex.Status, ex.Ports[0].Problems, ex.NotChecked)
	}
}
