package evaluate_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/evaluate"
	"github.com/proxyrules/kubectl-proxyrules/internal/fixture"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// TestWalkScratchAgrees: WalkScratch, whose outcomes and paths are the
// evaluator's scratch (its hops cut from an arena the next walk reuses),
// says what Walk says, walk after walk of the same evaluator: Services
// whose paths share their start (the dispatch chains) and part after it.
func TestWalkScratchAgrees(t *testing.T) {
	// render is a result whole, the paths of Brief walks included.
	render := func(r *evaluate.Result) string {
		var outs []string
		for _, o := range r.Outcomes {
			hops, _ := json.Marshal(o.Hops())
			o.Path = nil
			out, _ := json.Marshal(o)
			outs = append(outs, string(out)+" "+string(hops))
		}
		notes, _ := json.Marshal(r.NotModelled)
		return fmt.Sprintf("%v truncated=%v %s", outs, r.Truncated, notes)
	}
	walked := 0
	for _, dir := range fixture.Dirs(t) {
		node, probes := fixtureProbes(t, dir)
		for _, form := range fixture.Forms(t, dir) {
			rs := fixture.ReadFiles(t, form.Files...)
			fresh, scratch := evaluate.New(rs, node), evaluate.New(rs, node)
			for _, brief := range []bool{true, false} {
				for _, pr := range probes {
					pr.pkt.Family = kubeproxy.IPv4
					if pr.pkt.Dst.Addr().Is6() {
						pr.pkt.Family = kubeproxy.IPv6
					}
					opts := evaluate.Options{Brief: brief}
					want := render(fresh.Walk(pr.pkt, opts))
					got := render(scratch.WalkScratch(pr.pkt, opts))
					if got != want {
						t.Errorf("%s %s %s brief=%v: WalkScratch says\n%s\nWalk says\n%s", dir, form.Name, pr.name, brief, got, want)
					}
					walked++
				}
			}
		}
	}
	if walked < 500 {
		t.Errorf("only %d walks", walked)
	}
}
