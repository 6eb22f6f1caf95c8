package diagnose

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/evaluate"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// trace in IPVS mode: the walk (evaluate, Node.IPVS) goes through
// kube-proxy's iptables rules and then IPVS's scheduling; here its virtual
// services are labelled with their Service ports and pods and said in
// words.

// TraceIPVS is what IPVS did on one trace.
type TraceIPVS struct {
	// VirtualServers are those the connection met, each once; empty when
	// none serves its destination.
	VirtualServers []TraceVirtualServer `json:"virtualServers"`
	// Lines say it for people.
	Lines []string `json:"-"`
}

// TraceVirtualServer is a virtual service met, with its real servers as
// the EndpointSlices describe them.
type TraceVirtualServer struct {
	evaluate.IPVSService
	ServicePort string `json:"servicePort,omitempty"`
}

// traceEvalNode is the node as the walk sees it: IPVS walked when its
// table was read.
func traceEvalNode(n *Node, nodeIPs []netip.Addr) evaluate.Node {
	return evaluate.Node{Addresses: nodeIPs, IPVS: n.Ruleset.HasIPVS()}
}

// ipvsBound: a is bound to kube-ipvs0 (as read, else a virtual server's
// address that is not the node's). The node's own connection to it then
// has it as its source too: the route is the local table's, whose
// preferred source is the address itself (kube-proxy: "for IPVS src and
// dst both would be lbIP", pkg/proxy/ipvs/proxier.go).
func ipvsBound(n *Node, a netip.Addr) bool {
	if !n.Ruleset.HasIPVS() {
		return false
	}
	if n.Ruleset.HasIPVSInterface() {
		for _, p := range n.Ruleset.IPVS.Interface.Addrs {
			if p.Addr().Unmap() == a {
				return true
			}
		}
		return false
	}
	for _, s := range n.Ruleset.IPVS.Table.Services {
		if s.Addr.IsValid() && s.Addr.Addr().Unmap() == a {
			return true // or the node's own address: the same source
		}
	}
	return false
}

// ipvsClusterCIDRs are the cluster CIDRs of IPVS mode's masquerade rule:
// `-A KUBE-SERVICES ! -s CIDR … --match-set KUBE-CLUSTER-IP dst,dst -j
// KUBE-MARK-MASQ`.
func ipvsClusterCIDRs(n *Node) []string {
	var out []string
	if !n.Ruleset.HasIPVS() {
		return out
	}
	for _, t := range n.Ruleset.IPTables {
		if t.Name != kubeproxy.TableNAT {
			continue
		}
		if c := t.Chain(kubeproxy.ChainServices); c != nil {
			for _, r := range c.Rules {
				if r.Target == kubeproxy.ChainMarkMasq && r.Source.Not && strings.Contains(r.Text, "KUBE-CLUSTER-IP") {
					out = append(out, r.Source.Value)
				}
			}
		}
	}
	return out
}

// ipvsOutcome adds what IPVS did to an outcome.
func ipvsOutcome(to *TraceOutcome, o evaluate.Outcome) {
	to.IPVS = o.IPVS
}

// ipvsUnpredictable: the outcome's real server was picked by a scheduler
// whose shares the rules do not give (lc, sh …): it has no share.
func ipvsUnpredictable(o TraceOutcome) bool {
	return o.IPVS != nil && o.IPVS.RealServer != nil && !o.IPVS.Predictable
}

// labelIPVS adds IPVS's part of a trace: the virtual services met, their
// hops' owners, and the sentences.
func labelIPVS(n *Node, pt *PacketTrace, res *evaluate.Result, labels *correlate.TraceLabels) {
	if !n.Ruleset.HasIPVS() {
		return
	}
	ti := &TraceIPVS{VirtualServers: []TraceVirtualServer{}}
	for i := range pt.Outcomes {
		for j := range pt.Outcomes[i].Path {
			if h := &pt.Outcomes[i].Path[j]; h.Backend == "ipvs" {
				h.ServicePort = pt.ServicePort
				if h.Verb == "dnat" {
					h.Endpoint = h.Target
				}
			}
		}
	}
	for _, vs := range res.IPVS {
		tv := TraceVirtualServer{IPVSService: vs, ServicePort: pt.ServicePort}
		ti.VirtualServers = append(ti.VirtualServers, tv)
		ti.Lines = append(ti.Lines, ipvsServiceLines(vs, pt.ServicePort, labels)...)
	}
	if len(res.IPVS) == 0 {
		ti.Lines = append(ti.Lines, ipvsNotMet(n, pt, res.Packet))
	} else {
		if !n.Ruleset.HasIPVSInterface() {
			ti.Lines = append(ti.Lines, "kube-ipvs0's addresses were not given (ip addr show kube-ipvs0): the virtual servers' addresses were taken as bound there, as kube-proxy binds them.")
		}
		ti.Lines = append(ti.Lines, "Not checked against the kernel: the IPVS scheduler's choice (read from the table's scheduler and weights).")
		if pkt := res.Packet; pkt.Family == kubeproxy.IPv4 {
			pt.Confirm = append(pt.Confirm, fmt.Sprintf("grep ' %s %04X ' /proc/net/ip_vs_conn   # after a connection: its real server (DestIP DPrt, hex)",
				hexAddr(pkt.Dst.Addr()), pkt.Dst.Port()))
		}
	}
	pt.IPVS = ti
}

// ipvsNotMet says why IPVS did not balance a connection: no virtual
// server for it (then what the rules do is all), or one the packet never
// reached (its address not the node's).
func ipvsNotMet(n *Node, pt *PacketTrace, pkt evaluate.Packet) string {
	what := strings.ToUpper(pt.Packet.Protocol) + " " + pt.Packet.Destination
	for _, s := range n.Ruleset.IPVS.Table.Services {
		if strings.EqualFold(string(s.Protocol), pkt.Protocol) && s.Addr == pkt.Dst {
			return fmt.Sprintf("IPVS has a virtual server for %s, but the connection never reaches it: IPVS schedules only what is addressed to the node (bound to kube-ipvs0) or sent by it; the outcomes above are the rules'.", what)
		}
	}
	s := fmt.Sprintf("IPVS: no virtual server for %s, so IPVS does not balance it: %s.", what, pt.Summary)
	for _, o := range pt.Outcomes {
		if o.Verdict == evaluate.VerdictAccept && o.Delivery == "local" {
			return s + " Delivered to the node itself: a process listening on that address and port gets it, else the kernel refuses it."
		}
	}
	return s
}

// ipvsServiceLines: "IPVS TCP 10.96.10.1:80 (shop/web:http), scheduler
// rr: 3 real servers, a new connection to each in turn", then a line each.
func ipvsServiceLines(vs evaluate.IPVSService, sp string, labels *correlate.TraceLabels) []string {
	head := fmt.Sprintf("IPVS %s %s", strings.ToUpper(vs.Protocol), vs.Address)
	if sp != "" {
		head += " (" + sp + ")"
	}
	head += ", at " + vs.Hook + ", scheduler " + schedulerName(vs.Scheduler) + ": "
	live := 0
	for _, r := range vs.RealServers {
		if !r.Draining {
			live++
		}
	}
	switch {
	case live == 0:
		head += "no real server to take a new connection: IPVS answers ICMP port unreachable"
	case vs.Predictable && vs.Scheduler == "wrr":
		head += fmt.Sprintf("%s, new connections in proportion to their weights", realServers(live))
	case vs.Predictable:
		head += fmt.Sprintf("%s, new connections to each in turn", realServers(live))
	default:
		head += fmt.Sprintf("%s; which one a new connection gets is not predictable from the rules (%s decides by the kernel's connection counts or a hash)", realServers(live), schedulerName(vs.Scheduler))
	}
	lines := []string{head}
	if vs.Persistent {
		lines = append(lines, fmt.Sprintf("  persistent %d s (ClientIP affinity): a client that connected in the last %d s goes back to its real server; the shares are a new client's", vs.TimeoutSeconds, vs.TimeoutSeconds))
	}
	for _, r := range vs.RealServers {
		s := fmt.Sprintf("  %s  weight %d", r.Address, r.Weight)
		switch {
		case r.Draining:
			s += "  draining: no new connection"
		case r.Share != nil:
			s += "  " + r.Share.Percent()
		}
		if l, ok := labels.Endpoint(r.Address.String()); ok {
			s += "  pod " + l.Pod
			if l.Node != "" {
				s += " on " + l.Node
			}
			if l.Terminating {
				s += " (terminating)"
			}
		} else if sp != "" {
			s += "  not in the EndpointSlices"
		}
		lines = append(lines, s)
	}
	return lines
}

func realServers(n int) string {
	if n == 1 {
		return "1 real server"
	}
	return fmt.Sprintf("%d real servers", n)
}

func schedulerName(s string) string {
	if s == "" {
		return "not shown (the --stats and --rate listings leave it out)"
	}
	return s
}

// hexAddr is an IPv4 address as /proc/net/ip_vs_conn prints it.
func hexAddr(a netip.Addr) string {
	b := a.As4()
	return fmt.Sprintf("%02X%02X%02X%02X", b[0], b[1], b[2], b[3])
}

// shareWords is an outcome's share in a summary: none for a real server
// an unpredictable scheduler picks.
func shareWords(p evaluate.Prob, unpredictable bool) string {
	if unpredictable {
		return "?"
	}
	return p.Percent()
}

// traceIPVSGaps: what an IPVS trace could not check. It changes no status: the
// outcomes are the table's.
func traceIPVSGaps(rep *TraceReport) []Gap {
	for _, pt := range rep.Traces {
		if pt.IPVS != nil && len(pt.IPVS.VirtualServers) > 0 {
			return []Gap{{Check: "the IPVS scheduler's choice",
				Reason: "not checked against the kernel: the real servers and shares are read from the IPVS table (scheduler, weights); this tool's IPVS model has not been held to a kernel with ip_vs"}}
		}
	}
	return nil
}
