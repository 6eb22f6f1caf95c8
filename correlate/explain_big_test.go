package correlate_test

import (
	"bytes"
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/inspect"
	"github.com/proxyrules/kubectl-proxyrules/inspect/iptables"
	"github.com/proxyrules/kubectl-proxyrules/inspect/nft"
	"github.com/proxyrules/kubectl-proxyrules/internal/synth"
)

// TestExplainBigService: a Service of 5,000 endpoints is walked to every
// one of them, in both modes, each with its share: more endpoints than a
// walk's default outcome bound must not drop any.
func TestExplainBigService(t *testing.T) {
	const n = 5000
	c := synth.Cluster{Services: 1, Endpoints: n}
	objs := c.Objects()
	for _, mode := range []string{"iptables", "nftables"} {
		var dump bytes.Buffer
		var rs *inspect.Ruleset
		var err error
		if mode == "iptables" {
			if err = c.WriteIPTablesSave(&dump); err == nil {
				rs, err = iptables.Parse(&dump, "big")
			}
		} else if err = c.WriteNFTJSON(&dump); err == nil {
			rs, err = nft.ParseJSON(&dump, "big")
		}
		if err != nil {
			t.Fatal(err)
		}
		all := correlate.ExplainAll(rs, objs, correlate.NodeView{Name: synth.LocalNode})
		if len(all) != 1 || len(all[0].Ports) == 0 {
			t.Fatalf("%s: %d explanations", mode, len(all))
		}
		pp := all[0].Ports[0]
		reached := 0
		for _, ep := range pp.Endpoints {
			if ep.InRules && ep.InSlices {
				reached++
			}
		}
		if reached != n {
			t.Errorf("%s: %d of %d endpoints reached", mode, reached, n)
		}
		for _, r := range pp.Routes {
			if len(r.Hops) != n || r.ShareSum < 0.999999 {
				t.Errorf("%s %s %s: %d hops, shares add up to %v", mode, r.Entry, r.From, len(r.Hops), r.ShareSum)
			}
		}
	}
}
