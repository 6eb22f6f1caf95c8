package evaluate

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/inspect"
	"github.com/proxyrules/kubectl-proxyrules/inspect/input"
)

// iptablesFixtures are the fixtures' iptables dumps of every form but
// iptables-nft through nft (package fixture imports correlate, which
// imports this package: read here directly).
func iptablesFixtures(t *testing.T) map[string]*inspect.Ruleset {
	files, err := filepath.Glob("../testdata/fixtures/*/iptables/*-ipv[46]*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	out := map[string]*inspect.Ruleset{}
	for _, f := range files {
		if filepath.Ext(filepath.Base(f)) != ".txt" || len(filepath.Base(f)) > 40 || filepath.Base(f) == "failed-restore-ipv4.txt" {
			continue
		}
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		in, err := input.Read(fh, f)
		fh.Close()
		if err != nil || in.Ruleset == nil {
			continue
		}
		out[f] = in.Ruleset
	}
	return out
}

// TestModelPathAgrees: a plain rule evaluated from its parsed model gives
// what reading its arguments whole gives, for every plain rule of every
// fixture's iptables forms, on packets that match or miss each part.
func TestModelPathAgrees(t *testing.T) {
	packets := []Packet{
		{Protocol: "tcp", Src: netip.MustParseAddrPort("10.244.0.250:40000"), Dst: netip.MustParseAddrPort("10.96.10.1:80"), Origin: FromPod},
		{Protocol: "udp", Src: netip.MustParseAddrPort("10.0.0.10:40000"), Dst: netip.MustParseAddrPort("10.96.0.10:53"), Origin: FromNode},
		{Protocol: "tcp", Src: netip.MustParseAddrPort("203.0.113.7:40000"), Dst: netip.MustParseAddrPort("10.0.0.10:30443"), Origin: FromOutside},
		{Protocol: "tcp", Src: netip.MustParseAddrPort("10.244.0.81:40000"), Dst: netip.MustParseAddrPort("10.244.0.81:8080"), Origin: FromPod, Mark: 0x4000},
		{Protocol: "sctp", Src: netip.MustParseAddrPort("[fd00:10:244::2]:40000"), Dst: netip.MustParseAddrPort("[fd00:10:96::b]:80"), Origin: FromPod, Mark: 0x8000},
	}
	plainRules, compared := 0, 0
	for name, rs := range iptablesFixtures(t) {
		{
			e := New(rs, Node{Addresses: []netip.Addr{netip.MustParseAddr("10.0.0.10")}})
			for _, tb := range rs.IPTables {
				if tb.FromNFT {
					continue
				}
				for _, c := range tb.Chains {
					ch := chainRef{ipt: tb, ic: c}
					for i, r := range c.Rules {
						if !plain(r) {
							continue
						}
						plainRules++
						for _, p := range packets {
							for _, hook := range []string{hookPrerouting, hookOutput, hookPostrouting} {
								fresh := func() (*walk, *thread) {
									w := &walk{e: e, pkt: p, res: &Result{}}
									th := &thread{src: p.Src, dst: p.Dst, origDst: p.Dst, origSrc: p.Src, mark: p.Mark, prob: One(), ctstate: ctNew,
										hooks: []string{hook}, iif: "eth0", iifKnown: true}
									return w, th
								}
								w1, t1 := fresh()
								a := describeBranches(w1.evalPlain(t1, ch, i, r))
								w2, t2 := fresh()
								b := describeBranches(w2.evalIPT(t2, ch, i, e.iptSpec(r)))
								if a != b {
									t.Errorf("%s %s %s rule %d %q on %s at %s:\nmodel  %s\nwhole  %s", name, tb.Family, c.Name, i, r.Text, p, hook, a, b)
								}
								compared++
							}
						}
					}
				}
			}
		}
	}
	if plainRules < 5000 {
		t.Errorf("only %d plain rules", plainRules)
	}
	t.Logf("%d plain rules, %d comparisons", plainRules, compared)
}

// describeBranches: each branch's effect and what it did to the packet.
func describeBranches(brs []branch) string {
	s := ""
	for _, b := range brs {
		th := b.t
		share := ""
		if b.eff.share != nil {
			share = b.eff.share.String()
		}
		s += fmt.Sprintf("[act=%d target=%s share=%s prob=%s dst=%s mark=%#x masq=%v reject=%q assumes=%d] ",
			b.eff.act, b.eff.target, share, th.prob, th.dst, th.mark, th.masq, th.reject, countAssumes(th))
	}
	return s
}

func countAssumes(t *thread) int {
	n := 0
	for a := t.assumes; a != nil; a = a.prev {
		n++
	}
	return n
}
