package correlate_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/internal/fixture"
)

// The fixtures under testdata/fixtures are written by kube-proxy's own code
// (hack/fixturegen, `make fixtures`) and read back with the real iptables
// and nft binaries. expected.json holds the attribution derived from
// kube-proxy's own evidence (comments, jump graph, DNAT targets, nftables
// names), not from this package's hashes.
type chainKey struct{ mode, family, table, chain string }

// TestAttributionMatchesKubeProxy: every chain of every form of every
// fixture gets the owner kube-proxy's own evidence says it has (100%).
func TestAttributionMatchesKubeProxy(t *testing.T) {
	for _, dir := range fixture.Scenarios(t) {
		expected := fixture.Expected(t, dir)
		objs := fixture.Objects(t, dir)
		for _, form := range fixture.Forms(t, dir) {
			t.Run(filepath.Base(dir)+"/"+form.Name, func(t *testing.T) {
				rs := fixture.ReadFiles(t, form.Files...)
				res := correlate.Attribute(rs, objs)
				exp := staleByOwnership(expected, objs)
				if !form.Comments {
					exp = forgetDeletedOwners(expected, objs)
				}
				checkAttribution(t, exp, form.Mode, res, true)
			})
		}
	}
}

// staleByOwnership applies the schema's definition of stale, "owned by no
// current Service or endpoint", where expected.json (which says "reached by
// no rule") differs: in sync-failure the rules lag the objects, so an
// endpoint chain still reached is nevertheless owned by no current endpoint.
func staleByOwnership(expected []fixture.ExpectedChain, objs *correlate.Objects) []fixture.ExpectedChain {
	current := map[string]bool{}
	for _, sp := range objs.ServicePorts() {
		current[sp.String()] = true
		for _, ep := range sp.Endpoints {
			current[sp.String()+" "+ep.String()] = true
		}
	}
	out := make([]fixture.ExpectedChain, 0, len(expected))
	for _, e := range expected {
		if e.Kind == "endpoint" && e.ServicePort != "" && !current[e.ServicePort+" "+e.Endpoint] {
			e.Stale = true
		}
		out = append(out, e)
	}
	return out
}

// forgetDeletedOwners blanks the owner of chains whose Service is gone:
// a form without comments (iptables-nft read through nft) holds nothing
// that names it, and no hash can be inverted.
func forgetDeletedOwners(expected []fixture.ExpectedChain, objs *correlate.Objects) []fixture.ExpectedChain {
	current := map[string]bool{}
	for _, sp := range objs.ServicePorts() {
		current[sp.String()] = true
	}
	out := make([]fixture.ExpectedChain, 0, len(expected))
	for _, e := range expected {
		if e.Stale && e.ServicePort != "" && !current[e.ServicePort] {
			e.ServicePort = ""
		}
		out = append(out, e)
	}
	return out
}

func checkAttribution(t *testing.T, expected []fixture.ExpectedChain, mode string, res *correlate.Result, strict bool) {
	t.Helper()
	got := map[chainKey]correlate.ChainOwner{}
	for _, c := range res.Chains {
		got[chainKey{c.Mode, c.Family, c.Table, c.Chain}] = c
	}
	want := map[chainKey]bool{}
	n := 0
	for _, e := range expected {
		if e.Mode != mode {
			continue
		}
		k := chainKey{e.Mode, e.Family, e.Table, e.Chain}
		want[k] = true
		n++
		g, ok := got[k]
		if !ok {
			t.Errorf("%v: chain missing from the attribution", k)
			continue
		}
		if string(g.Kind) != e.Kind || g.ServicePort != e.ServicePort || (e.Protocol != "" && g.Protocol != e.Protocol) ||
			g.Endpoint != e.Endpoint || g.Stale != e.Stale {
			t.Errorf("%v:\n got kind=%s servicePort=%q protocol=%s endpoint=%q stale=%v evidence=%s\nwant kind=%s servicePort=%q protocol=%s endpoint=%q stale=%v",
				k, g.Kind, g.ServicePort, g.Protocol, g.Endpoint, g.Stale, g.Evidence, e.Kind, e.ServicePort, e.Protocol, e.Endpoint, e.Stale)
		}
	}
	if n == 0 {
		t.Fatalf("expected.json has no %s chains", mode)
	}
	if !strict {
		return
	}
	for k, g := range got {
		if k.mode == mode && (k.table == "nat" || k.table == "filter" || k.mode == "nftables") && !want[k] && strings.HasPrefix(k.chain, "KUBE-") == (mode == "iptables") {
			t.Errorf("%v: attributed (%s %q) but not in expected.json", k, g.Kind, g.ServicePort)
		}
	}
}

// Without API objects, comments, DNAT targets and nftables names still
// attribute every per-service chain of a form that has comments.
func TestAttributionWithoutObjects(t *testing.T) {
	for _, dir := range fixture.Scenarios(t) {
		expected := fixture.Expected(t, dir)
		for _, form := range fixture.Forms(t, dir) {
			if !form.Comments {
				continue
			}
			t.Run(filepath.Base(dir)+"/"+form.Name, func(t *testing.T) {
				rs := fixture.ReadFiles(t, form.Files...)
				res := correlate.Attribute(rs, nil)
				// Without objects nothing can be called stale.
				exp := make([]fixture.ExpectedChain, 0, len(expected))
				for _, e := range expected {
					e.Stale = false
					exp = append(exp, e)
				}
				checkAttribution(t, exp, form.Mode, res, false)
			})
		}
	}
}
