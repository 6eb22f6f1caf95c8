package correlate

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// sortChains orders by mode, family, table and name, and keeps the input
// order of equal entries, whichever TableRef value (shared or not) the
// chains point to.
func TestSortChains(t *testing.T) {
	refs := []*TableRef{
		{Mode: "nftables", Family: "ip", Table: "kube-proxy"},
		{Mode: "iptables", Family: "ipv6", Table: "nat"},
		{Mode: "iptables", Family: "ipv4", Table: "nat", Backend: "nft"},
		{Mode: "iptables", Family: "ipv4", Table: "filter"},
		{Mode: "iptables", Family: "ipv4", Table: "nat"}, // another pointer, same table
		{Mode: "nftables", Family: "ip6", Table: "kube-proxy"},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		name   string
		n      int
		tables []*TableRef
	}{
		{"empty", 0, refs},
		{"one table", 50, refs[1:2]},
		{"tables interleaved", 400, refs},
		{"runs of one table", 400, nil},
	} {
		chains := make([]ChainOwner, tc.n)
		for i := range chains {
			ref := refs[i*len(refs)/max(tc.n, 1)]
			if tc.tables != nil {
				ref = tc.tables[rng.IntN(len(tc.tables))]
			}
			// few names, so that equal entries meet; Rules tells them apart
			chains[i] = ChainOwner{TableRef: ref, Chain: fmt.Sprintf("KUBE-SEP-%02d", rng.IntN(20)), Rules: int32(i)}
		}
		want := slices.Clone(chains)
		slices.SortStableFunc(want, func(a, b ChainOwner) int {
			return cmp.Or(cmp.Compare(a.Mode, b.Mode), cmp.Compare(a.Family, b.Family), cmp.Compare(a.Table, b.Table), cmp.Compare(a.Chain, b.Chain))
		})
		sortChains(chains)
		for i := range want {
			g, w := chains[i], want[i]
			if g.Mode != w.Mode || g.Family != w.Family || g.Table != w.Table || g.Chain != w.Chain || g.Rules != w.Rules {
				t.Errorf("%s: [%d] = %s/%s/%s %s #%d, want %s/%s/%s %s #%d", tc.name, i,
					g.Mode, g.Family, g.Table, g.Chain, g.Rules, w.Mode, w.Family, w.Table, w.Chain, w.Rules)
				break
			}
		}
	}
}
