package diagnose

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/inspect"
)

// kube-proxy's IPVS mode binds each cluster IP, and each external and
// load-balancer IP that is not the node's own, to the dummy link
// kube-ipvs0 (pkg/proxy/ipvs/proxier.go syncService, bindAddr): that is
// what makes the node take their packets as its own, so that IPVS sees
// them at LOCAL_IN. An address not bound breaks its Service on this node;
// one bound that no Service has is a leftover kube-proxy unbinds on sync.

// ProblemNotBound: a Service address with a virtual server is not bound
// to kube-ipvs0.
const ProblemNotBound = "notBound"

// UnownedBinding: an address bound to kube-ipvs0 that no Service has.
const UnownedBinding = "binding"

// judgeBindings checks the addresses bound to kube-ipvs0 (from `ip addr
// show kube-ipvs0`) against the Service addresses kube-proxy binds.
func (rep *IPVSReport) judgeBindings(n *Node) {
	st := n.Ruleset.IPVS
	bound, unknown := rep.boundBy(st)
	if bound == nil {
		rep.NotChecked = append(rep.NotChecked, Gap{Check: "whether each Service address is bound to kube-ipvs0 (else the node does not take its packets, and IPVS never sees them)",
			Reason: "kube-ipvs0's addresses were not read: the virtual servers imply them, but do not show them", Remedy: "--from-dump with ip addr show kube-ipvs0 (or /proc/net/fib_trie and /proc/net/if_inet6) from the node"})
		return
	}
	unread := map[string]bool{}
	nodeIPs := map[netip.Addr]bool{}
	for _, a := range rep.ex.NodeIPs {
		nodeIPs[a] = true
	}
	wanted := map[netip.Addr]bool{}
	for i := range rep.Ports {
		p := &rep.Ports[i]
		var missing []string
		for _, fe := range p.Frontends {
			ap, err := netip.ParseAddrPort(fe.Addr)
			if err != nil || fe.Kind == correlate.FrontendNodePort || nodeIPs[ap.Addr()] {
				continue // NodePorts are the node's addresses: never bound
			}
			wanted[ap.Addr()] = true
			isBound, known := bound(ap.Addr())
			if !known {
				unread[unknown(ap.Addr())] = true
				continue
			}
			if fe.VirtualServer != "" && !isBound && !slices.Contains(missing, ap.Addr().String()) {
				missing = append(missing, ap.Addr().String())
			}
		}
		for _, a := range missing {
			p.Problems = append(p.Problems, Problem{Severity: SeverityError, Kind: ProblemNotBound,
				Message: fmt.Sprintf("%s has a virtual server but is not bound to kube-ipvs0: the node does not take packets to it as its own, so IPVS never sees them and connections fail; kube-proxy binds it on its next sync", a)})
		}
		sortProblems(p.Problems)
	}
	for _, why := range slices.Sorted(maps.Keys(unread)) {
		rep.NotChecked = append(rep.NotChecked, Gap{Check: "whether the Service addresses are bound to kube-ipvs0", Reason: why, Remedy: "--from-dump with ip addr show kube-ipvs0 from the node"})
	}
	if st.Interface == nil || n.Objects == nil || n.Select != nil {
		return // which addresses no Service has needs every Service, and the link's own list
	}
	for _, pfx := range st.Interface.Addrs {
		a := pfx.Addr().Unmap()
		if !wanted[a] && !rep.hasServiceAddr(a) {
			rep.Unowned = append(rep.Unowned, IPVSUnowned{VirtualServer: "kube-ipvs0 " + pfx.String(), Severity: SeverityWarning, What: UnownedBinding,
				Message: "bound to kube-ipvs0 but no current Service has this address: kube-proxy unbinds stale addresses on every sync, so it is not syncing or another program bound it; the node answers for this address itself"})
		}
	}
}

// boundBy says how to tell whether an address is bound: from kube-ipvs0's
// own addresses (ip addr show), else from the node's local addresses
// (/proc/net/fib_trie and if_inet6: an address kube-proxy binds is local
// exactly when it is bound). unknown says why one cannot be told. Both
// nil when neither was read.
func (rep *IPVSReport) boundBy(st *inspect.IPVSState) (bound func(netip.Addr) (bool, bool), unknown func(netip.Addr) string) {
	switch {
	case st.Interface != nil:
		set := map[netip.Addr]bool{}
		for _, p := range st.Interface.Addrs {
			set[p.Addr().Unmap()] = true
		}
		return func(a netip.Addr) (bool, bool) { return set[a], true }, nil
	case st.Local != nil:
		l := st.Local
		return l.Has, func(a netip.Addr) string {
			if a.Is4() && !l.IPv4 || a.Is6() && !l.IPv6 {
				return "the node's local " + familyWord(a) + " addresses were not read"
			}
			return "the read of the node's local addresses was cut short (a cap)"
		}
	}
	return nil, nil
}

func familyWord(a netip.Addr) string {
	if a.Is4() {
		return "IPv4"
	}
	return "IPv6"
}

// hasServiceAddr: some virtual server of the table is on a (a binding of a
// deleted Service's address is reported with its virtual server).
func (rep *IPVSReport) hasServiceAddr(a netip.Addr) bool {
	for _, vs := range rep.ex.Facts.VirtualServers {
		if vs.Addr.Addr() == a && vs.Kind == correlate.VirtualServiceUnattributed {
			return true
		}
	}
	return false
}
