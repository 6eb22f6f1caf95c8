package evaluate_test

import (
	"bytes"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/evaluate"
	"github.com/proxyrules/kubectl-proxyrules/inspect/input"
	"github.com/proxyrules/kubectl-proxyrules/internal/fixture"
)

// FuzzWalk: whatever any reader makes of an input, walking it ends, never
// panics, and gives outcomes whose probabilities are between 0 and 1.
func FuzzWalk(f *testing.F) {
	for _, file := range []string{"iptables/save-nft-ipv4.txt", "iptables/nft-list.txt", "nftables/ruleset.txt", "nftables/knftables-ipv4.txt", "iptables/save-legacy-ipv6.txt"} {
		data, err := os.ReadFile(filepath.Join(fixture.Dir("small-v1.37"), file))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data[:min(len(data), 6000)])
	}
	f.Add([]byte("*nat\n:PREROUTING ACCEPT [0:0]\n:A - [0:0]\n-A PREROUTING -j A\n-A A -g A\nCOMMIT\n"))
	f.Add([]byte("table ip t {\n chain c {\n type nat hook output priority -100; policy accept;\n numgen random mod 3 vmap { 0 : jump c, 1 : goto c }\n }\n}\n"))
	node := evaluate.Node{Addresses: []netip.Addr{netip.MustParseAddr("10.0.0.10"), netip.MustParseAddr("fd00::10")}}
	packets := []evaluate.Packet{
		{Protocol: "tcp", Src: netip.MustParseAddrPort("10.244.0.2:40000"), Dst: netip.MustParseAddrPort("10.96.10.1:80"), Origin: evaluate.FromPod},
		{Protocol: "udp", Src: netip.MustParseAddrPort("10.0.0.10:40000"), Dst: netip.MustParseAddrPort("10.96.0.10:53"), Origin: evaluate.FromNode},
		{Protocol: "tcp", Src: netip.MustParseAddrPort("203.0.113.1:40000"), Dst: netip.MustParseAddrPort("10.0.0.10:30080"), Origin: evaluate.FromOutside},
		{Protocol: "tcp", Src: netip.MustParseAddrPort("[fd00:10:244::2]:40000"), Dst: netip.MustParseAddrPort("[fd00:10:96::b]:80"), Origin: evaluate.FromPod},
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		in, err := input.Read(bytes.NewReader(data), "fuzz")
		if err != nil || in.Ruleset == nil {
			return
		}
		e := evaluate.New(in.Ruleset, node)
		for _, p := range packets {
			r := e.Walk(p, evaluate.Options{MaxOutcomes: 256, MaxSteps: 1 << 14})
			for _, o := range r.Outcomes {
				if o.Probability.IsZero() && o.Verdict != evaluate.VerdictUnknown || o.Probability.Float64() > 1 {
					t.Fatalf("%s: an outcome with probability %s", p, o.Probability)
				}
			}
		}
	})
}
