package correlate_test

import (
	"strings"
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/internal/fixture"
)

// Each hop of an nftables numgen map names its own entry of the map, not
// the whole map: kube-proxy's rules for shop/cart (two endpoints) in
// small-v1.37, and the same with every endpoint of the large fixture.
func TestNFTHopRuleIsItsEntry(t *testing.T) {
	for _, tc := range []struct{ dir, ns, name string }{
		{"small-v1.37", "shop", "cart"},
		{"large-v1.37", "load", "svc-003"},
	} {
		dir := fixture.Dir(tc.dir)
		rs, ok := fixture.Load(t, dir, "nftables/ruleset.json")
		if !ok {
			t.Fatalf("%s: no nftables ruleset", tc.dir)
		}
		ex, err := correlate.Explain(rs, fixture.Objects(t, dir), correlate.ExplainOptions{Namespace: tc.ns, Name: tc.name})
		if err != nil {
			t.Fatal(err)
		}
		hops := 0
		for _, pp := range ex.Ports {
			for _, r := range pp.Routes {
				if len(r.Hops) < 2 {
					continue
				}
				for i, h := range r.Hops {
					hops++
					if !strings.Contains(h.Rule, "numgen random mod ") || strings.Count(h.Rule, " : ") != 1 {
						t.Errorf("%s/%s hop %d: rule %q, want the numgen rule with one entry", tc.ns, tc.name, i, h.Rule)
					}
					if !strings.Contains(h.Rule, h.Chain) || !strings.HasSuffix(strings.TrimSpace(h.Rule), "}") && !strings.Contains(h.Rule, "} ") {
						t.Errorf("%s/%s hop %d: rule %q does not hold its own chain %s in a closed map", tc.ns, tc.name, i, h.Rule, h.Chain)
					}
					for j, o := range r.Hops {
						if j != i && o.Chain != "" && strings.Contains(h.Rule, o.Chain) {
							t.Errorf("%s/%s hop %d: rule %q also holds hop %d's chain %s", tc.ns, tc.name, i, h.Rule, j, o.Chain)
						}
					}
				}
			}
		}
		if hops == 0 {
			t.Errorf("%s/%s: no route with several hops", tc.ns, tc.name)
		}
	}
}
