package nft

import (
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/knftables"

	"github.com/proxyrules/kubectl-proxyrules/inspect"
)

// The three nftables forms of one ruleset (knftables dump, `nft list
// ruleset`, `nft -j list ruleset`) must give the same chains, the same
// jump/goto graph (verdict-map elements included), the same DNAT targets per
// chain and the same set and map elements.

// view is the format-independent content of one nftables table.
type view struct {
	Chains   []string
	Edges    []string // "chain -> jump|goto target"
	DNAT     []string // "chain: ip:port ip:port"
	Elements []string // "set|map name: key . key [=> value]"
}

func parseFile(t testing.TB, path string) *inspect.Ruleset {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rs *inspect.Ruleset
	switch {
	case strings.HasSuffix(path, ".json"):
		rs, err = ParseJSON(f, path)
	case strings.HasSuffix(path, ".knft") || strings.Contains(filepath.Base(path), "knftables-"):
		rs, err = ParseKnftablesDump(f, path)
	default:
		rs, err = ParseText(f, path)
	}
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return rs
}

func parseFiles(t testing.TB, paths ...string) *inspect.Ruleset {
	rs := &inspect.Ruleset{}
	for _, p := range paths {
		rs.Merge(parseFile(t, p))
	}
	return rs
}

// normValue normalises an element key or value part: addresses and
// prefixes in canonical form, verdicts as "goto x".
func normValue(s string) string {
	s = strings.TrimSpace(s)
	if a, err := netip.ParseAddr(s); err == nil {
		return a.String()
	}
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.String()
	}
	return strings.Join(strings.Fields(s), " ")
}

func viewOf(t *inspect.NFTTable) view {
	var v view
	maps := map[string]*inspect.NFTMap{}
	for _, m := range t.Maps {
		maps[m.Name] = m
	}
	for _, c := range t.Chains {
		v.Chains = append(v.Chains, c.Name)
		var dnat []string
		for _, r := range c.Rules {
			for _, j := range r.Info.Jumps {
				v.Edges = append(v.Edges, c.Name+" -> jump "+j)
			}
			for _, g := range r.Info.Gotos {
				v.Edges = append(v.Edges, c.Name+" -> goto "+g)
			}
			for _, name := range r.Info.VMaps {
				m := maps[name]
				if m == nil {
					v.Edges = append(v.Edges, c.Name+" -> missing vmap "+name)
					continue
				}
				for _, e := range m.Elements {
					if len(e.Value) == 1 {
						if f := strings.Fields(e.Value[0]); len(f) == 2 && (f[0] == "goto" || f[0] == "jump") {
							v.Edges = append(v.Edges, c.Name+" -> "+f[0]+" "+f[1])
						}
					}
				}
			}
			dnat = append(dnat, r.Info.DNAT...)
		}
		if len(dnat) > 0 {
			v.DNAT = append(v.DNAT, c.Name+": "+strings.Join(dnat, " "))
		}
	}
	elem := func(kind, name string, e *knftables.Element) string {
		var key, val []string
		for _, k := range e.Key {
			key = append(key, normValue(k))
		}
		for _, x := range e.Value {
			val = append(val, normValue(x))
		}
		s := kind + " " + name + ": " + strings.Join(key, " . ")
		if len(val) > 0 {
			s += " => " + strings.Join(val, " . ")
		}
		if e.Comment != nil {
			s += fmt.Sprintf(" comment %q", *e.Comment)
		}
		return s
	}
	for _, s := range t.Sets {
		for _, e := range s.Elements {
			v.Elements = append(v.Elements, elem("set", s.Name, e))
		}
	}
	for _, m := range t.Maps {
		for _, e := range m.Elements {
			v.Elements = append(v.Elements, elem("map", m.Name, e))
		}
	}
	sort.Strings(v.Chains)
	sort.Strings(v.Edges)
	sort.Strings(v.DNAT)
	sort.Strings(v.Elements)
	return v
}

func diffLists(t testing.TB, what, nameA, nameB string, a, b []string) {
	t.Helper()
	inA := map[string]int{}
	for _, s := range a {
		inA[s]++
	}
	for _, s := range b {
		inA[s]--
	}
	var onlyA, onlyB []string
	for s, n := range inA {
		for ; n > 0; n-- {
			onlyA = append(onlyA, s)
		}
		for ; n < 0; n++ {
			onlyB = append(onlyB, s)
		}
	}
	sort.Strings(onlyA)
	sort.Strings(onlyB)
	if len(onlyA)+len(onlyB) > 0 {
		t.Errorf("%s differ:\n only in %s: %q\n only in %s: %q", what, nameA, onlyA, nameB, onlyB)
	}
}

// compareForms checks that each kube-proxy table is the same in every
// form. Tables missing from a form are an error.
func compareForms(t *testing.T, forms map[string]*inspect.Ruleset) {
	t.Helper()
	var names []string
	for n := range forms {
		names = append(names, n)
	}
	sort.Strings(names)
	ref := names[0]
	for _, fam := range []knftables.Family{knftables.IPv4Family, knftables.IPv6Family} {
		refT := forms[ref].NFTTable(fam, "kube-proxy")
		for _, n := range names[1:] {
			tb := forms[n].NFTTable(fam, "kube-proxy")
			if (refT == nil) != (tb == nil) {
				t.Errorf("table %s kube-proxy: present in %s: %v, in %s: %v", fam, ref, refT != nil, n, tb != nil)
				continue
			}
			if refT == nil {
				continue
			}
			a, b := viewOf(refT), viewOf(tb)
			if len(a.Chains) == 0 {
				t.Errorf("table %s kube-proxy in %s has no chains", fam, ref)
			}
			diffLists(t, string(fam)+" chains", ref, n, a.Chains, b.Chains)
			diffLists(t, string(fam)+" jump/goto graph", ref, n, a.Edges, b.Edges)
			diffLists(t, string(fam)+" DNAT targets", ref, n, a.DNAT, b.DNAT)
			diffLists(t, string(fam)+" set/map elements", ref, n, a.Elements, b.Elements)
		}
	}
}

// TestNFTFormatsAgree compares the knftables dumps written by hand from
// kube-proxy's test expectations with what real nft 1.0.6 listed after
// loading them (see testdata/nft/gen.sh).
func TestNFTFormatsAgree(t *testing.T) {
	for _, sc := range []struct {
		name string
		knft []string
	}{
		{"kp137", []string{"kp137-ipv4.knft", "kp137-ipv6.knft"}},
		{"kp136", []string{"kp136-ipv4.knft"}},
		{"kp134", []string{"kp134-ipv4.knft"}},
	} {
		t.Run(sc.name, func(t *testing.T) {
			var knft []string
			for _, k := range sc.knft {
				knft = append(knft, filepath.Join("testdata", k))
			}
			compareForms(t, map[string]*inspect.Ruleset{
				"knftables": parseFiles(t, knft...),
				"text":      parseFile(t, filepath.Join("testdata", sc.name+".nft.txt")),
				"json":      parseFile(t, filepath.Join("testdata", sc.name+".nft.json")),
			})
		})
	}
}

// TestNFTFixtures runs the same comparison on the fixtures generated from
// kube-proxy's own code (testdata/fixtures/<scenario>/nftables/), when they
// exist.
func TestNFTFixtures(t *testing.T) {
	dirs, _ := filepath.Glob("../../testdata/fixtures/*/nftables")
	if len(dirs) == 0 {
		t.Skip("no fixtures in ../testdata/fixtures yet")
	}
	for _, dir := range dirs {
		scenario := filepath.Base(filepath.Dir(dir))
		t.Run(scenario, func(t *testing.T) {
			forms := map[string]*inspect.Ruleset{}
			for _, f := range []struct{ form, file string }{
				{"text", "ruleset.txt"}, {"json", "ruleset.json"},
			} {
				p := filepath.Join(dir, f.file)
				if _, err := os.Stat(p); err == nil {
					forms[f.form] = parseFile(t, p)
				}
			}
			knft, _ := filepath.Glob(filepath.Join(dir, "knftables-*.txt"))
			if len(knft) > 0 {
				forms["knftables"] = parseFiles(t, knft...)
			}
			for name, rs := range forms {
				for _, d := range rs.Dumps {
					for _, w := range d.Warnings {
						if !strings.HasPrefix(w, "skipped ") {
							t.Errorf("%s (%s): warning: %s", name, d.Source, w)
						}
					}
				}
			}
			if len(forms) < 2 {
				t.Skipf("only %d nftables form(s) in %s", len(forms), dir)
			}
			compareForms(t, forms)
			// the JSON renderer must print kube-proxy's rules exactly as nft does
			if forms["text"] != nil && forms["json"] != nil {
				compareRuleText(t, forms["text"], forms["json"])
			}
		})
	}
	// kube-proxy's own transaction logs and the iptables-nft listings, when
	// the generator kept them: they must parse without errors.
	others, _ := filepath.Glob("../../testdata/fixtures/*/*/*")
	for _, p := range others {
		base := filepath.Base(p)
		switch {
		case strings.HasPrefix(base, "nft-transactions-"):
			rs := parseFile(t, p)
			if rs.Dumps[0].Tables == 0 {
				t.Errorf("%s: no tables", p)
			}
		case base == "nft-list.txt" || strings.HasPrefix(base, "nft-list-"):
			rs := parseFile(t, p)
			if len(rs.IPTables) == 0 {
				t.Errorf("%s: no iptables-nft tables found", p)
			}
		case strings.HasPrefix(base, "nft-list") && strings.HasSuffix(base, ".json"):
			rs := parseFile(t, p)
			if len(rs.IPTables) == 0 {
				t.Errorf("%s: no iptables-nft tables found", p)
			}
		}
	}
}

// compareRuleText checks that the rules rendered from JSON read exactly
// as nft listed them, table by table and chain by chain.
func compareRuleText(t *testing.T, text, js *inspect.Ruleset) {
	t.Helper()
	if len(text.NFTables) != len(js.NFTables) {
		t.Errorf("text has %d nftables tables, JSON %d", len(text.NFTables), len(js.NFTables))
	}
	for _, tt := range text.NFTables {
		jt := js.NFTTable(tt.Family, tt.Name)
		if jt == nil {
			t.Errorf("table %s %s missing from JSON", tt.Family, tt.Name)
			continue
		}
		for _, c := range tt.Chains {
			jc := jt.Chain(c.Name)
			if jc == nil {
				t.Errorf("chain %s missing from JSON", c.Name)
				continue
			}
			if len(c.Rules) != len(jc.Rules) {
				t.Errorf("chain %s: %d rules in text, %d in JSON", c.Name, len(c.Rules), len(jc.Rules))
				continue
			}
			for i, r := range c.Rules {
				if r.Rule.Rule != jc.Rules[i].Rule.Rule {
					t.Errorf("table %s %s chain %s rule %d:\n text %q\n json %q", tt.Family, tt.Name, c.Name, i, r.Rule.Rule, jc.Rules[i].Rule.Rule)
				}
				if (r.Comment == nil) != (jc.Rules[i].Comment == nil) || r.Comment != nil && *r.Comment != *jc.Rules[i].Comment {
					t.Errorf("chain %s rule %d: comments differ", c.Name, i)
				}
			}
			if c.IsBase() != jc.IsBase() {
				t.Errorf("chain %s: base in text %v, in JSON %v", c.Name, c.IsBase(), jc.IsBase())
			} else if c.IsBase() {
				if *c.Priority != *jc.Priority || *c.Hook != *jc.Hook || *c.Type != *jc.Type {
					t.Errorf("chain %s: text %s/%s/%s, JSON %s/%s/%s", c.Name, *c.Type, *c.Hook, *c.Priority, *jc.Type, *jc.Hook, *jc.Priority)
				}
			}
		}
	}
}

// TestNFTJSONRendersLikeNFT: every rule of every real ruleset rendered from
// `nft -j` must read exactly as `nft list` printed it (kube-proxy tables,
// other CNIs' tables, and the native nft parts of iptables-nft tables).
func TestNFTJSONRendersLikeNFT(t *testing.T) {
	for _, name := range []string{"kp137", "kp136", "kp134"} {
		t.Run(name, func(t *testing.T) {
			text := parseFile(t, filepath.Join("testdata", name+".nft.txt"))
			js := parseFile(t, filepath.Join("testdata", name+".nft.json"))
			compareRuleText(t, text, js)
		})
	}
}

// readAll is a helper for tests that need the bytes of a test input.
func readAll(t testing.TB, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
