package diagnose_test

import (
	"fmt"
	"math"
	"net/netip"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/diagnose"
	"github.com/proxyrules/kubectl-proxyrules/evaluate"
	"github.com/proxyrules/kubectl-proxyrules/internal/fixture"
)

// TestExplainSharesAreTraceOutcomes: for every fixture Service, entry and
// source explain walks, in every form of every fixture, the shares explain
// draws are the outcomes trace gives for the same connection (a new
// client's), endpoint by endpoint, and so are the shares dropped,
// rejected or not DNATed.
func TestExplainSharesAreTraceOutcomes(t *testing.T) {
	compared := 0
	for _, dir := range fixture.Dirs(t) {
		objs := fixture.Objects(t, dir)
		meta := fixture.ReadMeta(t, dir)
		for _, form := range fixture.Forms(t, dir) {
			t.Run(filepath.Base(dir)+"/"+form.Name, func(t *testing.T) {
				n := &diagnose.Node{Name: meta.Node, Ruleset: fixture.ReadFiles(t, form.Files...), Objects: objs}
				for _, ex := range diagnose.ExplainServices(n).Items {
					for _, pp := range ex.Ports {
						for _, r := range pp.Routes {
							dst := netip.MustParseAddrPort(r.Address)
							req := diagnose.TraceRequest{Dst: dst, Protocol: strings.ToLower(pp.Protocol), From: r.Source, Origin: evaluate.Origin(r.From)}
							// the node's addresses explain used (stand-ins where
							// the fixture has no Node object)
							if r.Entry == "nodePort" {
								req.NodeIPs = append(req.NodeIPs, dst.Addr())
							}
							if r.From == "node" {
								req.NodeIPs = append(req.NodeIPs, netip.MustParseAddr(r.Source))
							}
							rep, err := diagnose.Trace(n, req)
							if err != nil {
								t.Fatalf("%s %s: %v", pp.ServicePort, r.Address, err)
							}
							want, got := routeShares(r), traceShares(rep.Traces[0])
							if !sameShares(want, got) {
								t.Errorf("%s %s %s %s from %s (%s): explain says %s, trace says %s", pp.ServicePort, pp.Mode, pp.Family, r.Address, r.From, r.Source, fmtShares(want), fmtShares(got))
							}
							compared++
						}
					}
				}
			})
		}
	}
	if compared < 500 {
		t.Errorf("only %d routes compared", compared)
	}
}

// routeShares: explain's route as shares by what happens ("→ IP:PORT",
// "drop", …).
func routeShares(r correlate.Route) map[string]float64 {
	out := map[string]float64{}
	for _, h := range r.Hops {
		out["→ "+h.Endpoint] += h.Share
	}
	for _, o := range r.Other {
		out[o.Verdict] += o.Share
	}
	return out
}

// traceShares: trace's outcomes of the case explain shows, likewise; an
// unknown outcome that names its endpoint by its chain counts as it.
func traceShares(pt diagnose.PacketTrace) map[string]float64 {
	out := map[string]float64{}
	for _, o := range pt.Outcomes {
		if !correlate.ExplainCase(o.Assumes) {
			continue
		}
		switch {
		case o.Endpoint != nil:
			out["→ "+*o.Endpoint] += o.Probability.Float64()
		case o.Verdict == evaluate.VerdictUnknown && o.NamedEndpoint != "":
			out["→ "+o.NamedEndpoint] += o.Probability.Float64()
		default:
			out[string(o.Verdict)] += o.Probability.Float64()
		}
	}
	return out
}

func sameShares(a, b map[string]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if math.Abs(b[k]-v) > 1e-9 {
			return false
		}
	}
	return true
}

func fmtShares(m map[string]float64) string {
	var parts []string
	for k, v := range m {
		parts = append(parts, fmt.Sprintf("%.4f %s", v, k))
	}
	sort.Strings(parts)
	return "{" + strings.Join(parts, ", ") + "}"
}
