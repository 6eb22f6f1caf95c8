package correlate_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/inspect"
)

// The fixtures under testdata/fixtures are written by kube-proxy's own code
// (hack/fixturegen, `make fixtures`) and read back with the real iptables
// and nft binaries. expected.json holds the attribution derived from
// kube-proxy's own evidence (comments, jump graph, DNAT targets, nftables
// names), not from this package's hashes.
const fixtureRoot = "../testdata/fixtures"

type expectedChain struct {
	Mode        string `json:"mode"`
	Family      string `json:"family"`
	Table       string `json:"table"`
	Chain       string `json:"chain"`
	Kind        string `json:"kind"`
	ServicePort string `json:"servicePort"`
	Protocol    string `json:"protocol"`
	Endpoint    string `json:"endpoint"`
	Stale       bool   `json:"stale"`
}

func scenarios(t *testing.T) []string {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(fixtureRoot, "*", "expected.json"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no fixtures under %s (run `make fixtures`): %v", fixtureRoot, err)
	}
	for i := range dirs {
		dirs[i] = filepath.Dir(dirs[i])
	}
	return dirs
}

func loadExpected(t *testing.T, dir string) []expectedChain {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var exp struct {
		Chains []expectedChain `json:"chains"`
	}
	if err := json.Unmarshal(data, &exp); err != nil {
		t.Fatal(err)
	}
	return exp.Chains
}

func loadObjects(t *testing.T, dir string) *correlate.Objects {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "objects.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	objs, err := correlate.ReadObjects(f, "objects.json")
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func readDumps(t *testing.T, paths ...string) *inspect.Ruleset {
	t.Helper()
	rs := &inspect.Ruleset{}
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		in, err := inspect.Read(f, filepath.Base(p))
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		rs.Merge(in.Ruleset)
	}
	return rs
}

// dumpForm is one way a scenario's rules were written down.
type dumpForm struct {
	name  string
	mode  string
	files []string
	// comments: the form carries kube-proxy's comments, so most chains
	// can be attributed without API objects.
	comments bool
}

func forms(dir string) []dumpForm {
	var out []dumpForm
	add := func(name, mode string, comments bool, files ...string) {
		for i, f := range files {
			files[i] = filepath.Join(dir, f)
			if _, err := os.Stat(files[i]); err != nil {
				return
			}
		}
		out = append(out, dumpForm{name, mode, files, comments})
	}
	add("kube-proxy restore input", "iptables", true, "iptables/restore-ipv4.txt", "iptables/restore-ipv6.txt")
	add("iptables-nft-save", "iptables", true, "iptables/save-nft-ipv4.txt", "iptables/save-nft-ipv6.txt")
	// In legacy-leftovers the legacy backend holds an older kube-proxy's
	// rules, not the state expected.json describes (triage's business).
	if meta, err := os.ReadFile(filepath.Join(dir, "meta.json")); err != nil || !strings.Contains(string(meta), `"legacyBackendHasKubeChains": true`) {
		add("iptables-legacy-save", "iptables", true, "iptables/save-legacy-ipv4.txt", "iptables/save-legacy-ipv6.txt")
	}
	add("iptables-nft seen by nft list ruleset", "iptables", false, "iptables/nft-list.txt")
	add("nft -j list ruleset", "nftables", true, "nftables/ruleset.json")
	add("nft list ruleset", "nftables", true, "nftables/ruleset.txt")
	add("knftables dump", "nftables", true, "nftables/knftables-ipv4.txt", "nftables/knftables-ipv6.txt")
	return out
}

type chainKey struct{ mode, family, table, chain string }

// TestAttributionMatchesKubeProxy: every chain of every form of every
// fixture gets the owner kube-proxy's own evidence says it has (100%).
func TestAttributionMatchesKubeProxy(t *testing.T) {
	for _, dir := range scenarios(t) {
		expected := loadExpected(t, dir)
		objs := loadObjects(t, dir)
		for _, form := range forms(dir) {
			t.Run(filepath.Base(dir)+"/"+form.name, func(t *testing.T) {
				rs := readDumps(t, form.files...)
				res := correlate.Attribute(rs, objs)
				exp := staleByOwnership(expected, objs)
				if !form.comments {
					exp = forgetDeletedOwners(expected, objs)
				}
				checkAttribution(t, exp, form.mode, res, true)
			})
		}
	}
}

// staleByOwnership applies the schema's definition of stale, "owned by no
// current Service or endpoint", where expected.json (which says "reached by
// no rule") differs: in sync-failure the rules lag the objects, so an
// endpoint chain still reached is nevertheless owned by no current endpoint.
func staleByOwnership(expected []expectedChain, objs *correlate.Objects) []expectedChain {
	current := map[string]bool{}
	for _, sp := range objs.ServicePorts() {
		current[sp.String()] = true
		for _, ep := range sp.Endpoints {
			current[sp.String()+" "+ep.String()] = true
		}
	}
	out := make([]expectedChain, 0, len(expected))
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
func forgetDeletedOwners(expected []expectedChain, objs *correlate.Objects) []expectedChain {
	current := map[string]bool{}
	for _, sp := range objs.ServicePorts() {
		current[sp.String()] = true
	}
	out := make([]expectedChain, 0, len(expected))
	for _, e := range expected {
		if e.Stale && e.ServicePort != "" && !current[e.ServicePort] {
			e.ServicePort = ""
		}
		out = append(out, e)
	}
	return out
}

func checkAttribution(t *testing.T, expected []expectedChain, mode string, res *correlate.Result, strict bool) {
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
	for _, dir := range scenarios(t) {
		expected := loadExpected(t, dir)
		for _, form := range forms(dir) {
			if !form.comments {
				continue
			}
			t.Run(filepath.Base(dir)+"/"+form.name, func(t *testing.T) {
				rs := readDumps(t, form.files...)
				res := correlate.Attribute(rs, nil)
				// Without objects nothing can be called stale.
				exp := make([]expectedChain, 0, len(expected))
				for _, e := range expected {
					e.Stale = false
					exp = append(exp, e)
				}
				checkAttribution(t, exp, form.mode, res, false)
			})
		}
	}
}
