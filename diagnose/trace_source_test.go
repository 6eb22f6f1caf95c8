package diagnose_test

import (
	"net/netip"
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/diagnose"
	"github.com/proxyrules/kubectl-proxyrules/evaluate"
	"github.com/proxyrules/kubectl-proxyrules/internal/fixture"
)

// The source a connection from the node has is the one the kernel's route
// picks: 127.0.0.1 for a loopback destination (kube-proxy's KUBE-FIREWALL
// drops 127/8 destinations from any other source), the destination
// itself for one of the node's addresses, else the node's address. And a
// loopback source is the node's own. Measured on the e2e cluster's
// iptables node: UDP to 127.0.0.1:9 from a process on the node is
// accepted, from its address dropped.
func TestTraceSourceFromNode(t *testing.T) {
	dir := fixture.Dir("small-v1.37")
	save, _ := fixture.Text(t, dir, "iptables/save-nft-ipv4.txt")
	n := &diagnose.Node{Name: "node-a", Ruleset: fixture.Parse(t, save, "save"), Objects: fixture.Objects(t, dir)}
	nodeIP := netip.MustParseAddr("10.0.0.10")
	for _, tc := range []struct {
		from, to     string
		source, orig string
		verdict      evaluate.Verdict
	}{
		{"node", "127.0.0.1:9", "127.0.0.1", "node", evaluate.VerdictAccept},
		{"127.0.0.1", "127.0.0.1:9", "127.0.0.1", "node", evaluate.VerdictAccept},
		{"node", "10.0.0.10:9", "10.0.0.10", "node", evaluate.VerdictAccept},
		{"node", "192.0.2.1:9", "10.0.0.10", "node", evaluate.VerdictAccept},
		// A packet from the node's address to 127/8: KUBE-FIREWALL's
		// "block incoming localnet connections".
		{"10.0.0.10", "127.0.0.1:9", "10.0.0.10", "node", evaluate.VerdictDrop},
	} {
		rep, err := diagnose.Trace(n, diagnose.TraceRequest{Dst: netip.MustParseAddrPort(tc.to), Protocol: "udp", From: tc.from, NodeIPs: []netip.Addr{nodeIP}})
		if err != nil {
			t.Fatal(err)
		}
		pt := rep.Traces[0]
		if pt.Packet.Source != tc.source+":40000" || pt.Packet.From != tc.orig {
			t.Errorf("--from %s to %s: from %s (%s), want %s (%s)", tc.from, tc.to, pt.Packet.Source, pt.Packet.From, tc.source, tc.orig)
		}
		if len(pt.Outcomes) != 1 || pt.Outcomes[0].Verdict != tc.verdict {
			t.Errorf("--from %s to %s: %s, want %s", tc.from, tc.to, pt.Summary, tc.verdict)
		}
	}
}
