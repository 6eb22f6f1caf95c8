package correlate_test

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/inspect"
	"github.com/proxyrules/kubectl-proxyrules/inspect/input"
	"github.com/proxyrules/kubectl-proxyrules/internal/fixture"
	"github.com/proxyrules/kubectl-proxyrules/internal/netnstest"
)

// nfacctMatch is kube-proxy's `-m nfacct --nfacct-name NAME` counter
// match. Loading it needs the named nfacct object in the namespace; it only
// counts packets, so the round trip drops it.
var nfacctMatch = regexp.MustCompile(` -m nfacct --nfacct-name +\S+`)

func parseBytes(t *testing.T, name string, data []byte) *inspect.Ruleset {
	t.Helper()
	in, err := input.Read(bytes.NewReader(data), name)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if in.Ruleset == nil {
		t.Fatalf("%s: not a ruleset (%s)", name, in.Format)
	}
	return in.Ruleset
}

// TestRealIPTablesRoundTrip loads kube-proxy's own restore input into a
// throw-away network namespace with the real iptables-restore (nft and
// legacy backends), reads it back with the real iptables-save and, for the
// nft backend, with nft list ruleset and nft -j list ruleset, and checks
// that every form gives the attribution kube-proxy's evidence gives.
func TestRealIPTablesRoundTrip(t *testing.T) {
	for _, dir := range fixture.Scenarios(t) {
		v4 := filepath.Join(dir, "iptables", "restore-ipv4.txt")
		if _, err := os.Stat(v4); err != nil {
			continue
		}
		expected := fixture.Expected(t, dir)
		objs := fixture.Objects(t, dir)
		for _, backend := range []string{"nft", "legacy"} {
			t.Run(filepath.Base(dir)+"/"+backend, func(t *testing.T) {
				tools := []string{"iptables-" + backend + "-restore", "iptables-" + backend + "-save"}
				if backend == "nft" {
					tools = append(tools, "nft")
				}
				ns := netnstest.New(t, tools...)
				rs := &inspect.Ruleset{}
				for _, fam := range []struct{ prefix, file string }{{"iptables", "restore-ipv4.txt"}, {"ip6tables", "restore-ipv6.txt"}} {
					data, err := os.ReadFile(filepath.Join(dir, "iptables", fam.file))
					if err != nil {
						t.Fatal(err)
					}
					data = nfacctMatch.ReplaceAll(data, nil)
					if _, err := ns.Run(data, fam.prefix+"-"+backend+"-restore"); err != nil {
						t.Fatal(err)
					}
					saved, err := ns.Run(nil, fam.prefix+"-"+backend+"-save")
					if err != nil {
						t.Fatal(err)
					}
					part := parseBytes(t, fam.prefix+"-"+backend+"-save", saved)
					if got := part.Dumps[0].Backend; string(got) != map[string]string{"nft": "nf_tables", "legacy": "legacy"}[backend] {
						t.Errorf("%s-save: backend %q", fam.prefix, got)
					}
					rs.Merge(part)
				}
				checkAttribution(t, staleByOwnership(expected, objs), "iptables", correlate.Attribute(rs, objs), true)
				if backend != "nft" {
					return
				}
				// The same kernel state as nft shows it: iptables mode, no comments.
				for _, args := range [][]string{{"list", "ruleset"}, {"-j", "list", "ruleset"}} {
					out, err := ns.Run(nil, "nft", args...)
					if err != nil {
						t.Fatal(err)
					}
					nrs := parseBytes(t, "nft", out)
					if len(nrs.NFTables) != 0 {
						t.Errorf("nft %v: iptables-nft tables read as nftables mode: %d tables", args, len(nrs.NFTables))
					}
					exp := forgetDeletedOwners(staleByOwnership(expected, objs), objs)
					if args[0] == "-j" {
						exp = forgetStaleEndpoints(exp)
					}
					checkAttribution(t, exp, "iptables", correlate.Attribute(nrs, objs), true)
				}
			})
		}
	}
}

// forgetStaleEndpoints blanks what only a DNAT target can tell about a
// stale endpoint chain: nft 1.0.6's JSON prints the DNAT of an iptables-nft
// rule that also has an xtables match (comment, recent) as a bare
// `xt target DNAT`, without the address. Current endpoints still match by
// hash; the text form (`nft list`) keeps the address.
func forgetStaleEndpoints(expected []fixture.ExpectedChain) []fixture.ExpectedChain {
	out := make([]fixture.ExpectedChain, 0, len(expected))
	for _, e := range expected {
		if e.Stale && e.Kind == "endpoint" {
			e.ServicePort, e.Endpoint = "", ""
		}
		out = append(out, e)
	}
	return out
}

// TestRealNFTablesRoundTrip loads kube-proxy's nftables ruleset and its
// knftables dump with the real nft -f, lists them back as text and JSON,
// and checks the attribution of each.
func TestRealNFTablesRoundTrip(t *testing.T) {
	for _, dir := range fixture.Scenarios(t) {
		if _, err := os.Stat(filepath.Join(dir, "nftables", "ruleset.txt")); err != nil {
			continue
		}
		expected := fixture.Expected(t, dir)
		objs := fixture.Objects(t, dir)
		for _, load := range [][]string{{"ruleset.txt"}, {"knftables-ipv4.txt", "knftables-ipv6.txt"}} {
			t.Run(filepath.Base(dir)+"/"+load[0], func(t *testing.T) {
				ns := netnstest.New(t, "nft")
				for _, f := range load {
					data, err := os.ReadFile(filepath.Join(dir, "nftables", f))
					if err != nil {
						t.Fatal(err)
					}
					if _, err := ns.Run(data, "nft", "-f", "-"); err != nil {
						t.Fatal(err)
					}
				}
				for _, args := range [][]string{{"list", "ruleset"}, {"-j", "list", "ruleset"}} {
					out, err := ns.Run(nil, "nft", args...)
					if err != nil {
						t.Fatal(err)
					}
					checkAttribution(t, expected, "nftables", correlate.Attribute(parseBytes(t, "nft", out), objs), true)
				}
			})
		}
	}
}
