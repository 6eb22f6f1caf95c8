package diagnose

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
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
	if st.Interface == nil {
		rep.NotChecked = append(rep.NotChecked, Gap{Check: "whether each Service address is bound to kube-ipvs0 (else the node does not take its packets, and IPVS never sees them)",
			Reason: "kube-ipvs0's addresses were not read: the virtual servers imply them, but do not show them", Remedy: "--from-dump with ip addr show kube-ipvs0 from the node"})
		return
	}
	bound := map[netip.Addr]bool{}
	for _, p := range st.Interface.Addrs {
		bound[p.Addr().Unmap()] = true
	}
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
			if fe.VirtualServer != "" && !bound[ap.Addr()] && !slices.Contains(missing, ap.Addr().String()) {
				missing = append(missing, ap.Addr().String())
			}
		}
		for _, a := range missing {
			p.Problems = append(p.Problems, Problem{Severity: SeverityError, Kind: ProblemNotBound,
				Message: fmt.Sprintf("%s has a virtual server but is not bound to kube-ipvs0: the node does not take packets to it as its own, so IPVS never sees them and connections fail; kube-proxy binds it on its next sync", a)})
		}
		sortProblems(p.Problems)
	}
	if n.Objects == nil || n.Select != nil {
		return // which addresses no Service has needs every Service
	}
	for _, pfx := range st.Interface.Addrs {
		a := pfx.Addr().Unmap()
		if !wanted[a] && !rep.hasServiceAddr(a) {
			rep.Unowned = append(rep.Unowned, IPVSUnowned{VirtualServer: "kube-ipvs0 " + pfx.String(), Severity: SeverityWarning, What: UnownedBinding,
				Message: "bound to kube-ipvs0 but no current Service has this address: kube-proxy unbinds stale addresses on every sync, so it is not syncing or another program bound it; the node answers for this address itself"})
		}
	}
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
