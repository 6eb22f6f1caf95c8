package diagnose_test

import (
	"strings"
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/diagnose"
	"github.com/proxyrules/kubectl-proxyrules/internal/fixture"
)

// One fault at a time, injected into kube-proxy's own rules for
// small-v1.37 as another writer would leave them; explain must name it,
// with what the kernel does (evaluate/kernel_test.go applies the same
// faults to a real kernel), and nothing else.
func TestExplainFaults(t *testing.T) {
	dir := fixture.Dir("small-v1.37")
	save, _ := fixture.Text(t, dir, "iptables/save-nft-ipv4.txt")
	nftText, _ := fixture.Text(t, dir, "nftables/ruleset.txt")
	objs := fixture.Objects(t, dir)
	without := func(text, prefix string) string {
		var kept []string
		for _, l := range strings.Split(text, "\n") {
			if !strings.HasPrefix(l, prefix) {
				kept = append(kept, l)
			}
		}
		return strings.Join(kept, "\n")
	}
	replace := func(text, old, new string) string {
		if !strings.Contains(text, old) {
			t.Fatalf("the fixture no longer has %q", old)
		}
		return strings.Replace(text, old, new, 1)
	}
	for _, tc := range []struct {
		name, rules, service string
		kind                 string // the problem's kind
		endpoints            []string
		message              string // a part of its message
		shares               map[string]float64
	}{
		{name: "iptables -t nat -F an endpoint chain", service: "web",
			rules: without(save, "-A KUBE-SEP-EPVTA2RHFPHQF37H "), kind: diagnose.ProblemEmptyChain, endpoints: []string{"10.244.1.11:8080"},
			message: "is empty", shares: map[string]float64{"10.244.0.11:8080": 1.0 / 3, "10.244.2.11:8080": 2.0 / 3}},
		{name: "the jump to an endpoint chain deleted", service: "web",
			rules: without(save, "-A KUBE-SVC-67NZLRHBNDSAWJRO -m comment --comment \"shop/web:http -> 10.244.0.11:8080\""), kind: diagnose.ProblemRemovedJump,
			endpoints: []string{"10.244.0.11:8080"}, message: "no rule jumps to it", shares: map[string]float64{"10.244.1.11:8080": 0.5, "10.244.2.11:8080": 0.5}},
		{name: "a DROP atop kube-proxy's services chain (nftables)", service: "web",
			rules: replace(nftText, "\tchain services {\n", "\tchain services {\n\t\tip daddr 10.96.10.1 drop\n"), kind: diagnose.ProblemDropped,
			endpoints: []string{"10.244.0.11:8080", "10.244.1.11:8080", "10.244.2.11:8080"},
			message:   "dropped by services, a rule kube-proxy does not write", shares: map[string]float64{}},
		{name: "KUBE-MARK-MASQ sets another bit than KUBE-POSTROUTING tests", service: "api",
			rules: replace(save, "-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000", "-A KUBE-MARK-MASQ -j MARK --set-xmark 0x8000/0x8000"), kind: diagnose.ProblemNoMasquerade,
			message: "not masqueraded", shares: map[string]float64{"10.244.1.21:8080": 0.5, "10.244.2.21:8080": 0.5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := fixture.Parse(t, tc.rules, tc.name)
			ex, err := diagnose.ExplainService(&diagnose.Node{Name: "node-a", Ruleset: rs, Objects: objs}, "shop", tc.service, "")
			if err != nil {
				t.Fatal(err)
			}
			if ex.Status != diagnose.StatusProblems || len(ex.Ports) != 1 {
				t.Fatalf("status %s, %d ports", ex.Status, len(ex.Ports))
			}
			pp := ex.Ports[0]
			found := false
			for _, p := range pp.Problems {
				if p.Kind == tc.kind && strings.Contains(p.Message, tc.message) && strings.Join(p.Endpoints, ",") == strings.Join(tc.endpoints, ",") {
					found = true
				} else if p.Severity != diagnose.SeverityInfo {
					t.Errorf("another problem: %s %s: %s", p.Severity, p.Kind, p.Message)
				}
			}
			if !found {
				t.Errorf("no %s problem saying %q for %v: %+v", tc.kind, tc.message, tc.endpoints, pp.Problems)
			}
			internal := pp.Routes[0]
			got := map[string]float64{}
			for _, h := range internal.Hops {
				got[h.Endpoint] += h.Share
			}
			if !sameShares(got, tc.shares) {
				t.Errorf("internal shares %v, want the kernel's %v", got, tc.shares)
			}
		})
	}
}
