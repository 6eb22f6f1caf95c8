package diagnose

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
)

// IPVS mode's part of `stale`: the virtual servers no current Service port
// has (IPVSReport.Unowned), with whom they belonged to where the API
// objects still tell. A deleted Service leaves no name in the IPVS table
// (no comments, no hashes): only its address and its real servers.

// StaleVirtualServer is a virtual server no current Service port has.
type StaleVirtualServer struct {
	IPVSUnowned
	Protocol string `json:"protocol"`
	// Addr is "" for a firewall-mark virtual server.
	Addr   string `json:"addr,omitempty"`
	Family string `json:"family,omitempty"`
	// RealServerAddrs are its real servers: where connections to it go.
	RealServerAddrs []string `json:"realServerAddrs"`
	// FormerOwner is the Service ("ns/name") or Service port it belonged
	// to, "unknown" when nothing tells; OwnerEvidence says how it was told.
	FormerOwner   string `json:"formerOwner"`
	OwnerEvidence string `json:"ownerEvidence,omitempty"`
}

// staleIPVS sets the report's virtual servers when the node has an IPVS
// table, and returns whether any needs someone to act.
func (rep *StaleReport) staleIPVS(n *Node) bool {
	rep.VirtualServers = []StaleVirtualServer{}
	if !n.Ruleset.HasIPVS() {
		return false
	}
	rep.IPVSRead = true
	ir := IPVS(n)
	if ir.ex.Facts.Incomplete {
		rep.NotChecked = append(rep.NotChecked, ipvsPartialGap("the virtual servers no current Service port has, past what was read"))
	}
	byName := map[string]IPVSUnowned{}
	for _, u := range ir.Unowned {
		byName[u.VirtualServer] = u
	}
	out, problems := []StaleVirtualServer{}, false
	for i := range ir.ex.Facts.VirtualServers {
		vs := &ir.ex.Facts.VirtualServers[i]
		u, ok := byName[virtualServerName(vs)]
		if !ok || vs.Kind == correlate.VirtualServiceServicePort {
			continue
		}
		s := StaleVirtualServer{IPVSUnowned: u, Protocol: vs.Protocol, RealServerAddrs: []string{}, FormerOwner: "unknown"}
		if vs.FWMark == 0 {
			s.Addr, s.Family = vs.Addr.String(), familyOf(vs.Addr.Addr())
		}
		for _, rs := range vs.RealServers {
			s.RealServerAddrs = append(s.RealServerAddrs, rs.Addr.String())
		}
		switch u.What {
		case UnownedStale:
			s.FormerOwner, s.OwnerEvidence = formerIPVSOwner(n, ir.ex, vs)
		case UnownedProbe:
			s.FormerOwner = "kube-proxy's startup probe"
		}
		if n.Select != nil && (s.FormerOwner == "unknown" || u.What != UnownedStale || !n.selected(s.FormerOwner)) {
			continue // a selection keeps only its Services' leftovers
		}
		problems = problems || u.Severity == SeverityWarning || u.Severity == SeverityError
		out = append(out, s)
	}
	rep.VirtualServers = out
	return problems
}

func familyOf(a netip.Addr) string {
	if a.Is6() && !a.Is4In6() {
		return "IPv6"
	}
	return "IPv4"
}

// formerIPVSOwner tells whose a stale virtual server was from what the
// API objects still hold: a current Service at its address (a port
// removed), or a current Service port whose endpoints are all its real
// servers (the Service re-created, so with another address); "unknown"
// otherwise.
func formerIPVSOwner(n *Node, ex *correlate.IPVSExplanation, vs *correlate.IPVSVirtualServer) (owner, evidence string) {
	if n.Objects == nil || vs.FWMark != 0 {
		return "unknown", ""
	}
	addr := vs.Addr.Addr().String()
	for _, sp := range n.Objects.ServicePorts() {
		for _, kind := range []struct {
			name string
			ips  []string
		}{{"cluster IP", sp.ClusterIPs}, {"external IP", sp.ExternalIPs}, {"load-balancer IP", sp.LoadBalancerIPs}} {
			if slices.Contains(kind.ips, addr) {
				return sp.Namespace + "/" + sp.Name, fmt.Sprintf("%s is the %s of %s/%s, which has no %s port %d now: a port removed from it", addr, kind.name, sp.Namespace, sp.Name, vs.Protocol, vs.Addr.Port())
			}
		}
	}
	for _, sp := range n.Objects.ServicePorts() {
		if !strings.EqualFold(string(sp.Protocol), vs.Protocol) || len(sp.Endpoints) == 0 {
			continue
		}
		eps := map[string]bool{}
		for _, e := range sp.Endpoints {
			eps[e.String()] = true
		}
		all := true
		for _, rs := range vs.RealServers {
			all = all && eps[rs.Addr.String()]
		}
		if all && len(vs.RealServers) > 0 {
			return sp.String(), fmt.Sprintf("its real servers are endpoints of %s: most likely that Service was re-created (a new address) or another Service selects the same pods", sp)
		}
	}
	return "unknown", whatAddressIs(n, ex, vs)
}

// whatAddressIs says what a stale virtual server's address is when no
// Service tells whose it was: a node address (a NodePort's), or one of the
// Service range (a deleted Service's cluster IP).
func whatAddressIs(n *Node, ex *correlate.IPVSExplanation, vs *correlate.IPVSVirtualServer) string {
	a := vs.Addr.Addr()
	// the node's addresses: those known, and those a current NodePort's
	// virtual server is on
	node := slices.Contains(nodeAddrs(n), a)
	for i := range ex.Facts.VirtualServers {
		o := &ex.Facts.VirtualServers[i]
		node = node || o.Frontend == correlate.FrontendNodePort && o.Addr.Addr() == a
	}
	if node {
		return fmt.Sprintf("%s is the node's address: a NodePort (%s %d) no current Service has, a deleted Service's or a removed port's", a, vs.Protocol, vs.Addr.Port())
	}
	rng := correlate.ClusterIPRange(n.Objects)
	for _, p := range rng.Prefixes {
		if p.Contains(a) {
			src, _, _ := strings.Cut(rng.Source, " (")
			return fmt.Sprintf("%s is in the Service range %s (%s), and no current Service has it: a deleted Service's cluster IP", a, p, src)
		}
	}
	return ""
}

// ipvsPartialGap says that check was made on part of the IPVS table only.
func ipvsPartialGap(check string) Gap {
	return Gap{Check: check, Reason: "the IPVS table was read only in part (a cap, or a cut paste)", Remedy: "the whole cat /proc/net/ip_vs"}
}
