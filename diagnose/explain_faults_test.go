package diagnose_test

import (
	"slices"
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
	// atopFilter puts rule first in filter, as iptables -I would (the
	// order of chains' rules in a save is the order they run).
	atopFilter := func(rule string) string {
		f := strings.Index(save, "*filter\n")
		i := strings.Index(save[f:], "\n-A ")
		if f < 0 || i < 0 {
			t.Fatal("the fixture has no filter rules")
		}
		return save[:f+i+1] + rule + "\n" + save[f+i+1:]
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
			endpoints: []string{"10.244.0.11:8080"}, message: "no rule sends new connections to it", shares: map[string]float64{"10.244.1.11:8080": 0.5, "10.244.2.11:8080": 0.5}},
		{name: "a DROP atop kube-proxy's services chain (nftables)", service: "web",
			rules: replace(nftText, "\tchain services {\n", "\tchain services {\n\t\tip daddr 10.96.10.1 drop\n"), kind: diagnose.ProblemDropped,
			endpoints: []string{"10.244.0.11:8080", "10.244.1.11:8080", "10.244.2.11:8080"},
			message:   "dropped by services, a rule kube-proxy does not write", shares: map[string]float64{}},
		{name: "KUBE-MARK-MASQ sets another bit than KUBE-POSTROUTING tests", service: "api",
			rules: replace(save, "-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000", "-A KUBE-MARK-MASQ -j MARK --set-xmark 0x8000/0x8000"), kind: diagnose.ProblemNoMasquerade,
			message: "not masqueraded", shares: map[string]float64{"10.244.1.21:8080": 0.5, "10.244.2.21:8080": 0.5}},
		// A DROP for the original destination: after the DNAT, every
		// endpoint's branch ends in it. The cause is the rule, and the
		// endpoints are its symptom, not three removed jumps.
		{name: "a DROP for the original destination atop filter KUBE-SERVICES", service: "web",
			rules: atopFilter("-A KUBE-SERVICES -m conntrack --ctorigdst 10.96.10.1/32 -j DROP"), kind: diagnose.ProblemDropped,
			endpoints: []string{"10.244.0.11:8080", "10.244.1.11:8080", "10.244.2.11:8080"},
			message:   "100.0% of new connections to the cluster IP 10.96.10.1:80 (from a pod) are dropped by KUBE-SERVICES, a rule kube-proxy does not write", shares: map[string]float64{}},
		// A DROP without kube-proxy's "has no local endpoints" comment is
		// not kube-proxy's, although kube-proxy writes DROPs there.
		{name: "a DROP for a Service without endpoints atop filter KUBE-SERVICES", service: "empty",
			rules: atopFilter("-A KUBE-SERVICES -d 10.96.10.9/32 -j DROP"), kind: diagnose.ProblemDropped,
			message: "dropped by KUBE-SERVICES, a rule kube-proxy does not write", shares: map[string]float64{}},
		// nftables has endpoint chains only for affinity (shop/cart). One
		// flushed: the numgen vmap's goto into it comes back out of the
		// service chain, past services, to cluster-ips-check's reject.
		{name: "nft flush chain of an affinity endpoint chain", service: "cart",
			rules: without(without(nftText, "\t\tupdate @affinity-O5JCUGGF-shop/cart/tcp/http__10.244.0.81/8080 "), "\t\tmeta l4proto tcp dnat to 10.244.0.81:8080"),
			kind:  diagnose.ProblemEmptyChain, endpoints: []string{"10.244.0.81:8080"},
			message: "50.0% of new connections to the cluster IP 10.96.10.7:80 (from a pod) are rejected by cluster-ips-check",
			shares:  map[string]float64{"10.244.2.81:8080": 0.5}},
		// The numgen vmap deleted: only clients with a record reach an
		// endpoint; new ones are rejected.
		{name: "nft: the service chain's numgen vmap deleted", service: "cart",
			rules: without(nftText, "\t\tnumgen random mod 2 vmap { 0 : goto endpoint-O5JCUGGF-shop/cart/"), kind: diagnose.ProblemRemovedJump,
			endpoints: []string{"10.244.0.81:8080", "10.244.2.81:8080"}, message: "rejected by cluster-ips-check", shares: map[string]float64{}},
		// The affinity check of one endpoint deleted: new clients are
		// shared as before, returning ones are not kept.
		{name: "nft: an affinity rule of the service chain deleted", service: "cart",
			rules: without(nftText, "\t\tip saddr @affinity-O5JCUGGF-shop/cart/tcp/http__10.244.0.81/8080 goto"), kind: diagnose.ProblemAffinityUnkept,
			endpoints: []string{"10.244.0.81:8080"}, message: "not kept", shares: map[string]float64{"10.244.0.81:8080": 0.5, "10.244.2.81:8080": 0.5}},
		{name: "iptables: an --rcheck rule of KUBE-SVC deleted", service: "cart",
			rules: without(save, "-A KUBE-SVC-I5LIAMPLWKMBJ54B -m comment --comment \"shop/cart:http -> 10.244.0.81:8080\" -m recent --rcheck"), kind: diagnose.ProblemAffinityUnkept,
			endpoints: []string{"10.244.0.81:8080"}, message: "no rule of KUBE-SVC-I5LIAMPLWKMBJ54B sends a client with that record back", shares: map[string]float64{"10.244.0.81:8080": 0.5, "10.244.2.81:8080": 0.5}},
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
			// The fault's problems (one an endpoint, or one) name just
			// its endpoints; nothing else is said.
			found, covered := 0, []string{}
			for _, p := range pp.Problems {
				if p.Kind == tc.kind && strings.Contains(p.Message, tc.message) {
					found++
					covered = append(covered, p.Endpoints...)
				} else if p.Severity != diagnose.SeverityInfo {
					t.Errorf("another problem: %s %s: %s", p.Severity, p.Kind, p.Message)
				}
			}
			if slices.Sort(covered); found == 0 || strings.Join(covered, ",") != strings.Join(tc.endpoints, ",") {
				t.Errorf("%d %s problems saying %q for %v (want %v): %+v", found, tc.kind, tc.message, covered, tc.endpoints, pp.Problems)
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
