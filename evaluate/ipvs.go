package evaluate

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"

	"github.com/proxyrules/kubectl-proxyrules/inspect/iptables/ruleargs"
	"github.com/proxyrules/kubectl-proxyrules/inspect/ipvs"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// IPVS, in kube-proxy's IPVS mode (Node.IPVS): the iptables rules only
// mark and filter; the kernel's IPVS picks a real server and DNATs to it.
// Its netfilter hooks (net/netfilter/ipvs/ip_vs_core.c, ip_vs_ops4 and
// ip_vs_ops6) that schedule a new connection are ip_vs_in_hook at
// LOCAL_IN, priority NF_IP_PRI_NAT_SRC-1 (99: after filter INPUT, before
// nat INPUT), for packets routed to the node (kube-proxy binds every
// Service address to kube-ipvs0), and at LOCAL_OUT, priority
// NF_IP_PRI_NAT_DST+2 (-98: after nat OUTPUT, before filter OUTPUT), for
// the node's own connections. What this relies on besides:
//   - the virtual service is looked up by protocol, destination address
//     and port (ip_vs_service_find; firewall-mark services, which
//     kube-proxy does not make, are not looked up);
//   - every scheduler passes over a real server of weight 0; rr takes the
//     others in turn (1/N each, whatever their weights), wrr in proportion
//     to their weights; lc, wlc, sh, dh, mh, sed, nq … decide by
//     connection counts or hashes the rules do not hold;
//   - no real server to take: ip_vs_leave answers ICMP port unreachable
//     and drops the packet;
//   - a Masq (NAT) real server elsewhere: the packet, DNATed, is sent
//     through LOCAL_OUT again (ip_vs_nat_send_or_cont: NF_HOOK from the
//     first priority) and POSTROUTING, where nat's source chains still run
//     (kube-proxy sets net.ipv4.vs.conntrack=1, so the connection stays
//     tracked) and IPVS passes over its own packet (ipvs_property); a real
//     server on the node itself: the packet goes on in the same hook;
//   - persistence (ClientIP affinity) sends a client back to its real
//     server within the timeout; the shares are a new client's.

// IPVSService is a virtual service a walk met, with its real servers.
type IPVSService struct {
	Hook      string         `json:"hook"`
	Protocol  string         `json:"protocol"`
	Address   netip.AddrPort `json:"address"`
	Scheduler string         `json:"scheduler"`
	// Predictable: the scheduler's shares follow from the table (rr,
	// wrr); else the real servers are the outcomes, without shares.
	Predictable bool `json:"predictable"`
	// Persistent: ClientIP affinity, for TimeoutSeconds.
	Persistent     bool             `json:"persistent,omitempty"`
	TimeoutSeconds uint32           `json:"timeoutSeconds,omitempty"`
	RealServers    []IPVSRealServer `json:"realServers"`
}

// IPVSRealServer is one real server of a virtual service.
type IPVSRealServer struct {
	Address netip.AddrPort `json:"address"`
	Forward string         `json:"forward,omitempty"`
	Weight  int32          `json:"weight"`
	// Share of a new connection under rr and wrr; nil when the scheduler
	// is not predictable, and for a draining one.
	Share *Prob `json:"share,omitempty"`
	// Draining: weight 0, no new connection goes there.
	Draining bool `json:"draining,omitempty"`
}

// IPVSChoice is what IPVS did to an outcome's connection.
type IPVSChoice struct {
	Hook      string `json:"hook"`
	Service   string `json:"service"` // "TCP 10.96.10.1:80"
	Scheduler string `json:"scheduler"`
	// RealServer is the one picked; absent when none could be.
	RealServer *netip.AddrPort `json:"realServer,omitempty"`
	Weight     int32           `json:"weight,omitempty"`
	// Share is the scheduler's share for this real server (rr, wrr);
	// nil when not predictable: the outcome's probability is then that
	// of reaching the virtual service.
	Share       *Prob `json:"share,omitempty"`
	Predictable bool  `json:"predictable"`
}

// ipvsKey finds a virtual service.
type ipvsKey struct {
	proto string
	addr  netip.AddrPort
}

// ipvsPrio is where IPVS schedules in hook, and whether it does.
func ipvsPrio(hook string) (int, bool) {
	switch hook {
	case hookInput:
		return prioNATSrc - 1, true
	case hookOutput:
		return prioNATDst + 2, true
	}
	return 0, false
}

// withIPVS adds IPVS's scheduling to a hook's plan when the walk models it.
func (e *Evaluator) withIPVS(hook string, plan hookPlan) hookPlan {
	prio, ok := ipvsPrio(hook)
	if !ok || !e.node.IPVS || !e.rs.HasIPVS() {
		return plan
	}
	i := sort.Search(len(plan), func(i int) bool { return plan[i].prio > prio })
	return append(plan[:i:i], append([]unit{{prio: prio, ipvs: true}}, plan[i:]...)...)
}

// kubeProxyTables are the iptables tables kube-proxy writes chains in:
// nat and filter, and mangle (its canary) in iptables mode; its IPVS
// proxier writes none in mangle (pkg/proxy/ipvs/proxier.go,
// iptablesJumpChain, iptablesChains).
func (e *Evaluator) kubeProxyTables() []string {
	if e.node.IPVS && e.rs.HasIPVS() {
		return []string{"nat", "filter"}
	}
	return []string{"nat", "filter", "mangle"}
}

// indexIPVS indexes the virtual services, and takes kube-ipvs0's
// addresses as the node's: as read, else the virtual services' (kube-proxy
// binds them there; a node port's address is the node's anyway).
func (e *Evaluator) indexIPVS() {
	if !e.node.IPVS || !e.rs.HasIPVS() {
		return
	}
	bound := e.rs.HasIPVSInterface()
	if bound {
		for _, p := range e.rs.IPVS.Interface.Addrs {
			e.local[p.Addr().Unmap()] = true
		}
	}
	e.ipvsIndex = map[ipvsKey]*ipvs.Service{}
	for i := range e.rs.IPVS.Table.Services {
		s := &e.rs.IPVS.Table.Services[i]
		if s.Protocol == ipvs.ProtoFWMark || !s.Addr.IsValid() {
			continue
		}
		a := netip.AddrPortFrom(s.Addr.Addr().Unmap(), s.Addr.Port())
		k := ipvsKey{strings.ToLower(string(s.Protocol)), a}
		if _, dup := e.ipvsIndex[k]; !dup {
			e.ipvsIndex[k] = s
		}
		if !bound {
			e.local[a.Addr()] = true
		}
	}
}

// ipvsStep is IPVS's hook for t: past it with no virtual service for the
// destination (or a packet IPVS sent already); else each real server a
// branch (the others queued). False when t ended (t.end says how).
func (w *walk) ipvsStep(t *thread, hook string) bool {
	t.unit++
	t.natChain, t.started = 0, false
	if t.ipvs != nil {
		return true
	}
	svc := w.e.ipvsIndex[ipvsKey{strings.ToLower(w.pkt.Protocol), t.dst}]
	if svc == nil {
		if w.e.rs.IPVS.Table.Truncated.Incomplete {
			w.note(NotModelled{Table: "ipvs", Rule: -1, What: "the IPVS table read was cut short",
				Why: "a virtual service for " + t.dst.String() + " may be one left out: taken as none"})
		}
		return true
	}
	vs := w.ipvsService(hook, svc)
	var live []int
	for i, rs := range vs.RealServers {
		if !rs.Draining {
			live = append(live, i)
		}
	}
	if len(live) == 0 {
		t.ipvs = &IPVSChoice{Hook: hook, Service: ipvsName(svc), Scheduler: vs.Scheduler, Predictable: vs.Predictable}
		t.reject = "icmp-port-unreachable"
		if w.pkt.Family == kubeproxy.IPv6 {
			t.reject = "icmp6-port-unreachable"
		}
		w.addHop(t, Hop{Hook: hook, Table: "ipvs", Family: string(w.pkt.Family), Backend: "ipvs", Chain: ipvsName(svc), Rule: -1,
			Verb: "reject", Target: t.reject, Action: w.words("no real server to schedule: reject " + t.reject)})
		t.end = VerdictReject
		return false
	}
	for k := len(live) - 1; k >= 1; k-- {
		c := w.clone(t)
		if w.ipvsTo(c, hook, svc, vs, live[k]) {
			w.queue = append(w.queue, c)
		} else {
			w.finish(c, c.end)
			w.e.release(c)
		}
	}
	return w.ipvsTo(t, hook, svc, vs, live[0])
}

// ipvsTo sends t to real server i of svc; false when t ended (a
// forwarding method not modelled).
func (w *walk) ipvsTo(t *thread, hook string, svc *ipvs.Service, vs *IPVSService, i int) bool {
	rs := vs.RealServers[i]
	to := rs.Address
	if vs.Predictable {
		t.prob = t.prob.Mul(*rs.Share)
	}
	t.ipvs = &IPVSChoice{Hook: hook, Service: ipvsName(svc), Scheduler: vs.Scheduler, RealServer: &to, Weight: rs.Weight,
		Share: rs.Share, Predictable: vs.Predictable}
	h := Hop{Hook: hook, Table: "ipvs", Family: string(w.pkt.Family), Backend: "ipvs", Chain: ipvsName(svc), Rule: i,
		Verb: "dnat", Target: to.String(), Share: rs.Share}
	if !w.opts.Brief {
		h.Action = fmt.Sprintf("%s → %s, weight %d", schedulerWord(vs.Scheduler), to, rs.Weight)
	}
	switch ipvs.Forward(rs.Forward) {
	case ipvs.ForwardMasq, ipvs.ForwardLocal, "":
	default:
		h.Verb, h.Action = "unknown", w.words("not modelled: IPVS forwarding method "+rs.Forward)
		w.addHop(t, h)
		w.note(NotModelled{Table: "ipvs", Chain: ipvsName(svc), Rule: i, What: "IPVS forwarding method " + rs.Forward,
			Why: "kube-proxy uses Masq (NAT) only; the outcome is unknown"})
		t.end = VerdictUnknown
		return false
	}
	w.addHop(t, h)
	t.ipvsSvc = svc
	t.dst, t.dnat, t.natDst = to, true, true
	if w.e.isLocal(to.Addr()) {
		return true // ip_vs_nat_send_or_cont: on in the same hook
	}
	// sent again through LOCAL_OUT, then POSTROUTING; IPVS routed it
	t.hooks, t.unit, t.natChain, t.started = hooksLocalOut, 0, 0, false
	t.frames = t.frames[:0]
	t.routed = true
	return true
}

// ipvsService is svc as the report shows it, added to the result once.
func (w *walk) ipvsService(hook string, svc *ipvs.Service) *IPVSService {
	for i := range w.res.IPVS {
		if s := &w.res.IPVS[i]; s.Hook == hook && s.Address == svc.Addr && strings.EqualFold(s.Protocol, string(svc.Protocol)) {
			return s
		}
	}
	vs := IPVSService{Hook: hook, Protocol: strings.ToLower(string(svc.Protocol)), Address: svc.Addr, Scheduler: svc.Scheduler,
		Persistent: svc.Flags&ipvs.FlagPersistent != 0, RealServers: make([]IPVSRealServer, 0, len(svc.RealServers))}
	if vs.Persistent {
		vs.TimeoutSeconds = svc.Timeout
	}
	var live int
	var weights int64
	for _, rs := range svc.RealServers {
		r := IPVSRealServer{Address: rs.Addr, Forward: string(rs.Forward), Weight: rs.Weight, Draining: rs.Weight <= 0}
		if !r.Draining {
			live++
			weights += int64(rs.Weight)
		}
		vs.RealServers = append(vs.RealServers, r)
	}
	switch vs.Scheduler {
	case "rr", "wrr":
		vs.Predictable = true
		for i := range vs.RealServers {
			r := &vs.RealServers[i]
			if r.Draining {
				continue
			}
			p := Fraction(1, uint64(live))
			if vs.Scheduler == "wrr" {
				p = Fraction(uint64(r.Weight), uint64(weights))
			}
			r.Share = &p
		}
	}
	w.res.IPVS = append(w.res.IPVS, vs)
	return &w.res.IPVS[len(w.res.IPVS)-1]
}

// ipvsName is a virtual service as ipvsadm lists it: "TCP 10.96.10.1:80".
func ipvsName(s *ipvs.Service) string {
	return string(s.Protocol) + " " + s.Addr.String()
}

func schedulerWord(s string) string {
	if s == "" {
		return "(scheduler not shown)"
	}
	return s
}

// finishIPVS adds what IPVS did to t's outcome.
func (w *walk) finishIPVS(out *Outcome, t *thread) {
	if t.ipvs != nil {
		c := *t.ipvs
		out.IPVS = &c
	}
}

// ipvsOption is an option of -m ipvs (xt_ipvs.c), in IPVS mode: --ipvs
// matches a packet IPVS sent (skb->ipvs_property, set once it picked a
// real server); the others compare that connection's virtual service,
// and a packet IPVS did not send matches none of them, negated or not.
// kube-proxy writes `-A KUBE-IPVS-OUT-FILTER -s LB -m ipvs --vaddr LB
// --vproto P --vport N -j DROP` for load balancers the node must not
// reach (pkg/proxy/ipvs/proxier.go). Outside IPVS mode, not read (both
// ways, as before).
func (w *walk) ipvsOption(t *thread, o ruleargs.Option) (cond, bool) {
	if !w.e.node.IPVS || !w.e.rs.HasIPVS() {
		return cond{}, false
	}
	svc, arg := t.ipvsSvc, o.Arg()
	if o.Name == "--ipvs" {
		return not(truth(svc != nil), o.Not), true
	}
	if svc == nil {
		switch o.Name {
		case "--vaddr", "--vport", "--vproto", "--vdir", "--vmethod", "--vportctl":
			return no, true
		}
		return cond{}, false
	}
	switch o.Name {
	case "--vaddr":
		return not(addrCond(svc.Addr.Addr(), arg), o.Not), true
	case "--vport":
		return not(portCond(svc.Addr.Port(), arg), o.Not), true
	case "--vproto":
		want, ok1 := protoNumber(strings.ToLower(arg))
		have, ok2 := protoNumber(strings.ToLower(string(svc.Protocol)))
		if !ok1 || !ok2 {
			return cond{}, false
		}
		return not(truth(want == have), o.Not), true
	case "--vdir":
		return not(truth(strings.EqualFold(arg, "ORIGINAL")), o.Not), true // a new connection's packet
	case "--vmethod":
		return not(truth(strings.EqualFold(arg, "MASQ")), o.Not), true // the forwarding methods modelled are Masq's
	}
	return cond{}, false
}
