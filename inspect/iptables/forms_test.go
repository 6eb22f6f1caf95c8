package iptables_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/inspect"
	"github.com/proxyrules/kubectl-proxyrules/inspect/input"
	"github.com/proxyrules/kubectl-proxyrules/internal/fixture"
	"github.com/proxyrules/kubectl-proxyrules/internal/netnstest"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// The forms of testdata/forms are what the real iptables 1.8.9 (nf_tables
// and legacy backends print the same) lists after loading a fixture's
// rules, written by kube-proxy's own code, into a network namespace:
// `go test ./inspect/iptables -run TestRealIPTablesForms -update` (root)
// rewrites them; without -update that test lists them again and compares.
var update = flag.Bool("update", false, "rewrite testdata/forms from the real iptables tools (needs root and network namespaces)")

// formScenarios are the scenarios whose listings are committed; the
// real-tool test reads every scenario.
var formScenarios = []string{"small-v1.37", "small-v1.34", "sync-failure-v1.37", "foreign-mark-v1.37"}

// extraRules are loaded on top of kube-proxy's rules in small-v1.37: other
// writers' chains and extensions seen in posted dumps (AWS VPC CNI, Calico,
// Docker: CONNMARK, SNAT, REDIRECT, MASQUERADE ports, multiport, statistic
// nth, recent --update, LOG, goto), which every form must keep, and which
// attribution must ignore.
var extraRules = map[string]bool{"small-v1.37": true}

type form struct {
	name   string
	args   []string
	table  string
	whole  bool // the whole table, not one chain
	format inspect.Format
	ifaces bool // shows -i/-o (-S, or -L -v)
}

func formsOf(svc string) []form {
	S, L := inspect.FormatIPTablesRules, inspect.FormatIPTablesList
	return []form{
		{"S", []string{"-S"}, "filter", true, S, true},
		{"S-nat", []string{"-t", "nat", "-S"}, "nat", true, S, true},
		{"S-mangle", []string{"-t", "mangle", "-S"}, "mangle", true, S, true},
		{"Sv-nat", []string{"-t", "nat", "-S", "-v"}, "nat", true, S, true},
		{"S-nat-KUBE-SERVICES", []string{"-t", "nat", "-S", "KUBE-SERVICES"}, "nat", false, S, true},
		{"S-nat-svc", []string{"-t", "nat", "-S", svc}, "nat", false, S, true},
		{"L-nat", []string{"-t", "nat", "-L", "-n"}, "nat", true, L, false},
		{"Lvx-nat", []string{"-t", "nat", "-L", "-n", "-v", "-x", "--line-numbers"}, "nat", true, L, true},
		{"Lv", []string{"-L", "-n", "-v"}, "filter", true, L, true},
		{"Lv-mangle", []string{"-t", "mangle", "-L", "-n", "-v"}, "mangle", true, L, true},
		{"L-nat-svc", []string{"-t", "nat", "-L", svc, "-n"}, "nat", false, L, false},
		{"L-nat-KUBE-SERVICES", []string{"-t", "nat", "-L", "KUBE-SERVICES", "-n", "--line-numbers"}, "nat", false, L, false},
	}
}

var families = []struct {
	name, prefix string
	family       kubeproxy.Family
}{{"ipv4", "iptables", kubeproxy.IPv4}, {"ipv6", "ip6tables", kubeproxy.IPv6}}

func readRuleset(t *testing.T, name string, data []byte) (*inspect.Ruleset, inspect.Format) {
	t.Helper()
	in, err := input.Read(bytes.NewReader(data), name)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if in.Ruleset == nil {
		t.Fatalf("%s: not a ruleset (%s)", name, in.Format)
	}
	return in.Ruleset, in.Format
}

// busiestServiceChain is the KUBE-SVC- chain with the most rules, the one
// chain the single-chain forms list.
func busiestServiceChain(rs *inspect.Ruleset, fam kubeproxy.Family) string {
	nat := rs.IPTable(fam, "nat")
	best, n := "", -1
	for _, c := range nat.Chains {
		if strings.HasPrefix(c.Name, kubeproxy.PrefixService) && (len(c.Rules) > n || len(c.Rules) == n && c.Name < best) {
			best, n = c.Name, len(c.Rules)
		}
	}
	return best
}

// facts is what a rule says, as every form shows it.
func facts(r *inspect.IPRule, ifaces bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "-j %s goto=%v -p %s -s %v -d %v dport %v comment %q dnat %s prob %v random %v",
		r.Target, r.Goto, r.Protocol, r.Source, r.Destination(), r.DPort(), r.Comment, r.ToDestination, r.Probability, r.Random)
	if m := r.MarkMatch(); m != nil {
		fmt.Fprintf(&b, " mark %s %v %#x/%#x", m.Module, m.Not, m.Value, m.Mask)
	}
	if m := r.SetMark(); m != nil {
		fmt.Fprintf(&b, " setmark %#x/%#x", m.Value, m.Mask)
	}
	m := r.More
	if m == nil {
		m = &inspect.IPRuleMore{}
	}
	fmt.Fprintf(&b, " ct %v src-type %v dst-type %v random-fully %v restore %v/%#x reject %q set %v",
		m.CTState, m.SrcType, m.DstType, m.RandomFully, m.RestoreMark, m.RestoreMarkMask, m.RejectWith, m.MatchSet)
	if m.Recent != nil {
		fmt.Fprintf(&b, " recent %+v", *m.Recent)
	}
	if ifaces {
		fmt.Fprintf(&b, " -i %v -o %v", m.InIface, m.OutIface)
	}
	return b.String()
}

// owner is what attribution says of a chain.
func owner(c correlate.ChainOwner) string {
	return fmt.Sprintf("kind %s owner %q %s endpoint %q stale %v evidence %s note %q", c.Kind, c.ServicePort, c.Protocol, c.Endpoint, c.Stale, c.Evidence, c.Note)
}

func owners(rs *inspect.Ruleset, objs *correlate.Objects, fam kubeproxy.Family, table string) map[string]correlate.ChainOwner {
	out := map[string]correlate.ChainOwner{}
	for _, c := range correlate.Attribute(rs, objs).Chains {
		if c.Family == string(fam) && c.Table == table {
			out[c.Chain] = c
		}
	}
	return out
}

// checkForm checks one listing against the iptables-save form of the same
// rules, as the tool printed it and as pasted after the command line that
// printed it (with CRLF line ends): the detected format, the table it was
// placed in, every chain's rules (their facts, and for -S their text), and
// the attribution of every chain, with the API objects and (for whole
// tables) without.
func checkForm(t *testing.T, f form, prog string, fam kubeproxy.Family, data []byte, save *inspect.Ruleset, objs *correlate.Objects) {
	t.Helper()
	t.Run("listed", func(t *testing.T) { checkRead(t, f, fam, data, save, objs, false) })
	t.Run("pasted", func(t *testing.T) {
		paste := []byte("root@node-a:~# " + prog + " " + strings.Join(f.args, " ") + "\r\n")
		paste = append(paste, bytes.ReplaceAll(data, []byte("\n"), []byte("\r\n"))...)
		checkRead(t, f, fam, paste, save, objs, true)
	})
}

func checkRead(t *testing.T, f form, fam kubeproxy.Family, data []byte, save *inspect.Ruleset, objs *correlate.Objects, pasted bool) {
	rs, format := readRuleset(t, f.name, data)
	if format != f.format {
		t.Errorf("format %s, want %s", format, f.format)
	}
	if len(rs.IPTables) != 1 {
		var got []string
		for _, tb := range rs.IPTables {
			got = append(got, string(tb.Family)+"/"+tb.Name)
		}
		t.Fatalf("tables %v, want %s/%s alone", got, fam, f.table)
	}
	warnings := strings.Join(rs.Dumps[0].Warnings, "\n")
	if pasted == strings.Contains(warnings, "inferred") {
		t.Errorf("pasted %v, warnings: %s", pasted, warnings)
	}
	if got := rs.IPTables[0]; got.Family != fam && !pasted {
		// Without an address (an IPv6 table of jumps only), nothing shows
		// the family: read as IPv4, and said so.
		if fam != kubeproxy.IPv6 || !strings.Contains(warnings, "read as IPv4") {
			t.Fatalf("read as %s/%s, want %s/%s (warnings: %s)", got.Family, got.Name, fam, f.table, warnings)
		}
		got.Family = fam
	}
	got, want := rs.IPTables[0], save.IPTable(fam, f.table)
	if got.Family != fam || got.Name != f.table {
		t.Fatalf("read as %s/%s, want %s/%s", got.Family, got.Name, fam, f.table)
	}
	if got.Partial == f.whole {
		t.Errorf("Partial = %v for whole = %v", got.Partial, f.whole)
	}
	var names []string
	for _, c := range got.Chains {
		names = append(names, c.Name)
		w := want.Chain(c.Name)
		if w == nil {
			t.Errorf("chain %s is not in the save form", c.Name)
			continue
		}
		if c.OnlyReferenced {
			if len(c.Rules) != 0 {
				t.Errorf("%s: only referenced, but %d rules", c.Name, len(c.Rules))
			}
			continue
		}
		if c.Policy != w.Policy {
			t.Errorf("%s: policy %q, save %q", c.Name, c.Policy, w.Policy)
		}
		if len(c.Rules) != len(w.Rules) {
			t.Errorf("%s: %d rules, save %d", c.Name, len(c.Rules), len(w.Rules))
			continue
		}
		for i, r := range c.Rules {
			if a, b := facts(r, f.ifaces), facts(w.Rules[i], f.ifaces); a != b {
				t.Errorf("%s rule %d:\n got %s\nsave %s", c.Name, i+1, a, b)
			}
			// -L rows are rewritten as -S arguments: the same text, but for
			// the interfaces -L shows only with -v, and the extensions the
			// reader keeps as -L prints them (LOG).
			if f.ifaces && r.Text != w.Rules[i].Text && !strings.Contains(w.Rules[i].Text, "-j LOG") {
				t.Errorf("%s rule %d: text\n got %s\nsave %s", c.Name, i+1, r.Text, w.Rules[i].Text)
			}
		}
	}
	if f.whole {
		var wantNames []string
		for _, c := range want.Chains {
			wantNames = append(wantNames, c.Name)
		}
		if strings.Join(names, " ") != strings.Join(wantNames, " ") {
			t.Errorf("chains\n got %v\nsave %v", names, wantNames)
		}
	}
	for _, o := range []*correlate.Objects{objs, nil} {
		if o == nil && !f.whole {
			continue // an excerpt's referenced endpoint chains need the objects
		}
		gotOwners, saveOwners := owners(rs, o, fam, f.table), owners(save, o, fam, f.table)
		if len(gotOwners) == 0 && len(saveOwners) > 0 {
			t.Errorf("objects %v: no chain attributed", o != nil)
		}
		for name, g := range gotOwners {
			s, ok := saveOwners[name]
			if !ok {
				t.Errorf("objects %v: %s attributed, not in the save form", o != nil, name)
				continue
			}
			if g.OnlyReferenced && s.Evidence&correlate.EvidenceHash == 0 {
				continue // the save form proved it from rules this form does not show
			}
			if owner(g) != owner(s) || !g.OnlyReferenced && g.Rules != s.Rules {
				t.Errorf("objects %v: %s\n got %s (%d rules)\nsave %s (%d rules)", o != nil, name, owner(g), g.Rules, owner(s), s.Rules)
			}
		}
		if f.whole && len(gotOwners) != len(saveOwners) {
			t.Errorf("objects %v: %d kube-proxy chains, save %d", o != nil, len(gotOwners), len(saveOwners))
		}
	}
}

// TestFormsMatchSave reads the committed real-tool listings (no root
// needed) and checks each against the iptables-save form of the same rules.
func TestFormsMatchSave(t *testing.T) {
	for _, sc := range formScenarios {
		objs := fixture.Objects(t, fixture.Dir(sc))
		for _, fam := range families {
			dir := filepath.Join("testdata", "forms", sc)
			saveData, err := os.ReadFile(filepath.Join(dir, fam.name+"-save.txt"))
			if err != nil {
				t.Fatalf("%v (regenerate with -update as root)", err)
			}
			save, _ := readRuleset(t, "save", saveData)
			for _, f := range formsOf(busiestServiceChain(save, fam.family)) {
				t.Run(sc+"/"+fam.name+"-"+f.name, func(t *testing.T) {
					data, err := os.ReadFile(filepath.Join(dir, fam.name+"-"+f.name+".txt"))
					if err != nil {
						t.Fatalf("%v (regenerate with -update as root)", err)
					}
					checkForm(t, f, fam.prefix, fam.family, data, save, objs)
				})
			}
		}
	}
}

var (
	nfacctMatch = regexp.MustCompile(` -m nfacct --nfacct-name +\S+`)
	saveDate    = regexp.MustCompile(`(?m)^(# (Generated by|Completed).*?) on .*$`)
)

// TestRealIPTablesForms loads every scenario's restore input (kube-proxy's
// own) with the real iptables-restore of each backend into a network
// namespace, lists it in every form, checks each against the real
// iptables-save of the same namespace, and compares the committed
// listings with what the tools print now (or rewrites them with -update).
func TestRealIPTablesForms(t *testing.T) {
	committed := map[string]bool{}
	for _, sc := range formScenarios {
		committed[sc] = true
	}
	for _, dir := range fixture.Scenarios(t) {
		sc := filepath.Base(dir)
		if _, err := os.Stat(filepath.Join(dir, "iptables", "restore-ipv4.txt")); err != nil {
			continue
		}
		if fixture.ReadMeta(t, dir).LegacyBackendHasKubeChains {
			continue // its namespace holds two kube-proxies' rules
		}
		objs := fixture.Objects(t, dir)
		for _, backend := range []string{"nft", "legacy"} {
			t.Run(sc+"/"+backend, func(t *testing.T) {
				ns := netnstest.New(t, "iptables-"+backend+"-restore", "ip6tables-"+backend+"-restore")
				for _, fam := range families {
					restore, err := os.ReadFile(filepath.Join(dir, "iptables", "restore-"+fam.name+".txt"))
					if err != nil {
						t.Fatal(err)
					}
					prog := fam.prefix + "-" + backend
					if _, err := ns.Run(nfacctMatch.ReplaceAll(restore, nil), prog+"-restore"); err != nil {
						t.Fatal(err)
					}
					if extraRules[sc] {
						extra, err := os.ReadFile(filepath.Join("testdata", "extra-"+fam.name+".rules"))
						if err != nil {
							t.Fatal(err)
						}
						if _, err := ns.Run(extra, prog+"-restore", "--noflush"); err != nil {
							t.Fatal(err)
						}
					}
					saveData, err := ns.Run(nil, prog+"-save")
					if err != nil {
						t.Fatal(err)
					}
					saveData = saveDate.ReplaceAll(saveData, []byte("$1"))
					formDir := filepath.Join("testdata", "forms", sc)
					if *update && committed[sc] && backend == "nft" {
						writeFile(t, filepath.Join(formDir, fam.name+"-save.txt"), saveData)
					}
					save, _ := readRuleset(t, prog+"-save", saveData)
					for _, f := range formsOf(busiestServiceChain(save, fam.family)) {
						out, err := ns.Run(nil, prog, f.args...)
						if err != nil {
							t.Fatal(err)
						}
						file := filepath.Join(formDir, fam.name+"-"+f.name+".txt")
						switch {
						case !committed[sc]:
						case *update && backend == "nft":
							writeFile(t, file, out)
						default:
							if old, err := os.ReadFile(file); err != nil || !bytes.Equal(old, out) {
								t.Errorf("%s %v prints something else than %s now: rerun with -update and review the diff (%v)", prog, f.args, file, err)
							}
						}
						t.Run(fam.name+"-"+f.name, func(t *testing.T) { checkForm(t, f, prog, fam.family, out, save, objs) })
					}
				}
			})
		}
	}
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}
