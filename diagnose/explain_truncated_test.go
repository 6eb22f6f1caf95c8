package diagnose_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/diagnose"
	"github.com/proxyrules/kubectl-proxyrules/internal/fixture"
)

// A walk cut short proves no absence: 15 foreign rules atop kube-proxy's
// nat KUBE-SERVICES, each with a match the evaluator does not model, fork
// every connection 2^15 ways, more than a walk follows. explain and
// triage must then say that whether every endpoint is reached was not
// checked, instead of reporting the endpoints the walk did not get to as
// missing.
func TestTruncatedWalkIsNotChecked(t *testing.T) {
	dir := fixture.Dir("small-v1.37")
	save, _ := fixture.Text(t, dir, "iptables/save-nft-ipv4.txt")
	first := "-A KUBE-SERVICES -d 10.96.10.7/32 -p tcp -m comment --comment \"shop/cart:http cluster IP\""
	if !strings.Contains(save, first) {
		t.Fatal("the fixture's nat KUBE-SERVICES changed")
	}
	var forks strings.Builder
	for i := range 15 {
		fmt.Fprintf(&forks, "-A KUBE-SERVICES -m connlimit --connlimit-above %d -j MARK --or-mark 0x%x\n", i+1, 1<<(i+16))
	}
	rules := strings.Replace(save, first, forks.String()+first, 1)
	n := &diagnose.Node{Name: "node-a", Ruleset: fixture.Parse(t, rules, "forks"), Objects: fixture.Objects(t, dir)}

	ex, err := diagnose.ExplainService(n, "shop", "web", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(ex.Ports) != 1 || len(ex.Ports[0].Routes) == 0 || !ex.Ports[0].Routes[0].Truncated {
		t.Fatalf("the walk of shop/web is not cut short: %+v", ex.Ports)
	}
	for _, p := range ex.Ports[0].Problems {
		if p.Kind == diagnose.ProblemMissingEndpoints || p.Kind == diagnose.ProblemShares {
			t.Errorf("explain reports %s on a cut walk: %s", p.Kind, p.Message)
		}
	}
	if ex.Status != diagnose.StatusIncomplete || !gapSays(ex.NotChecked, "more ways than a walk follows") {
		t.Errorf("explain: status %s, not checked %+v", ex.Status, ex.NotChecked)
	}

	rep := diagnose.Triage(n)
	for _, f := range rep.Findings {
		if strings.Contains(f.Subject, "shop/web") && (strings.Contains(f.Message, "no rule reaches") || strings.Contains(f.Message, "share")) {
			t.Errorf("triage: %s %s: %s", f.Severity, f.Subject, f.Message)
		}
	}
	if !gapSays(rep.NotChecked, "shop/web:http") {
		t.Errorf("triage does not say shop/web's walk was cut: %+v", rep.NotChecked)
	}
}

func gapSays(gaps []diagnose.Gap, part string) bool {
	for _, g := range gaps {
		if strings.Contains(g.Check+" "+g.Reason, part) {
			return true
		}
	}
	return false
}
