package diagnose

import (
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/inspect"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// unreferencedServiceChains marks the chains it reaches by their position
// in the table; a table whose chains moved after it was indexed must be
// counted the same.
func TestUnreferencedServiceChainsMarks(t *testing.T) {
	build := func() *inspect.IPTable {
		t := inspect.NewIPTable(kubeproxy.IPv4, kubeproxy.TableNAT)
		jump := func(target string) *inspect.IPRule { return &inspect.IPRule{Target: target} }
		for _, c := range []*inspect.IPChain{
			{Name: kubeproxy.ChainServices, Rules: []*inspect.IPRule{jump("KUBE-SVC-AAAAAAAAAAAAAAAA")}},
			{Name: "KUBE-SVC-AAAAAAAAAAAAAAAA", Rules: []*inspect.IPRule{jump("KUBE-SEP-AAAAAAAAAAAAAAAA")}},
			{Name: "KUBE-SEP-AAAAAAAAAAAAAAAA", Rules: []*inspect.IPRule{{Target: "DNAT"}}},
			{Name: "KUBE-SVC-BBBBBBBBBBBBBBBB", Rules: []*inspect.IPRule{jump("KUBE-SEP-BBBBBBBBBBBBBBBB"), jump("KUBE-SEP-BBBBBBBBBBBBBBBB")}},
			{Name: "KUBE-SEP-BBBBBBBBBBBBBBBB", Rules: []*inspect.IPRule{{Target: "DNAT"}}},
		} {
			t.AddChain(c)
		}
		t.Reindex()
		return t
	}
	for _, tc := range []struct {
		name   string
		change func(*inspect.IPTable)
	}{
		{"as indexed", func(*inspect.IPTable) {}},
		{"chains moved after indexing", func(t *inspect.IPTable) {
			t.Chains[0], t.Chains[3] = t.Chains[3], t.Chains[0]
			t.Chains[1], t.Chains[2] = t.Chains[2], t.Chains[1]
		}},
		{"a chain put in place of another after indexing", func(t *inspect.IPTable) {
			// its position is not its place: it must not pass for
			// KUBE-SERVICES, which is reached
			t.Chains[4] = &inspect.IPChain{Name: "KUBE-SEP-CCCCCCCCCCCCCCCC", Rules: []*inspect.IPRule{{Target: "DNAT"}}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tab := build()
			tc.change(tab)
			chains, rules := unreferencedServiceChains(tab, nil)
			if chains != 2 || rules != 3 {
				t.Errorf("unreferenced: %d chains, %d rules; want 2 chains, 3 rules", chains, rules)
			}
		})
	}
}
