package correlate

import (
	"net/netip"
	"slices"

	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// What IPVS mode should hold for each Service port on the node, beside
// what the table holds: the frontends kube-proxy v1.37.2's IPVS proxier
// creates a virtual server for (pkg/proxy/ipvs/proxier.go syncProxyRules)
// and the endpoints it makes their real servers (syncEndpoint). Facts; the
// judging is diagnose's.

// IPVSExplanation is a node's IPVS table joined with what kube-proxy
// should have programmed.
type IPVSExplanation struct {
	Facts *IPVSFacts `json:"facts"`
	Ports []IPVSPort `json:"ports"`
	// NodeIPs are the addresses NodePort virtual servers were expected on:
	// the Node's and those given (--node-ip).
	NodeIPs []netip.Addr `json:"nodeIPs"`
}

// IPVSPort is one Service port in one family.
type IPVSPort struct {
	ServicePort     string           `json:"servicePort"`
	Namespace       string           `json:"namespace"`
	Name            string           `json:"name"`
	Family          kubeproxy.Family `json:"family"`
	Protocol        string           `json:"protocol"`
	AffinitySeconds int32            `json:"affinitySeconds,omitempty"`
	Frontends       []IPVSFrontend   `json:"frontends"`
	// Endpoints are the port's endpoints of this family, with why kube-proxy
	// uses each here or not.
	Endpoints []IPVSEndpoint `json:"endpoints"`
}

// IPVSEndpoint is one endpoint of a port and why it is used here or not.
type IPVSEndpoint struct {
	Addr netip.AddrPort `json:"addr"`
	Node string         `json:"node,omitempty"`
	Why  string         `json:"why"`
}

// IPVSFrontend is one address a port answers on, and its virtual server.
type IPVSFrontend struct {
	Kind string         `json:"kind"` // Frontend*
	Addr netip.AddrPort `json:"addr"`
	// Local: a Local traffic policy applies: the node's own endpoints, or
	// all of them when it has none (LocalFallback; IPVS mode, #97081).
	Local         bool `json:"local,omitempty"`
	LocalFallback bool `json:"localFallback,omitempty"`
	// Unknown: which endpoints kube-proxy uses here cannot be told (the
	// node or its zone is not known); Expected is then empty.
	Unknown bool `json:"unknown,omitempty"`
	// Inferred: a NodePort virtual server found on an address not known to
	// be the node's (kube-proxy creates one on each local address).
	Inferred bool `json:"inferred,omitempty"`
	// VirtualServer indexes Facts.VirtualServers; -1 when the table has
	// none for this frontend.
	VirtualServer int `json:"virtualServer"`
	// Expected are the endpoints kube-proxy makes its real servers;
	// Missing those the virtual server lacks.
	Expected []netip.AddrPort `json:"expected"`
	Missing  []netip.AddrPort `json:"missing,omitempty"`
}

// IPVSExplainInput is what ExplainIPVS joins.
type IPVSExplainInput struct {
	IPVSInput
	Node NodeView
	// NodePortAddresses is kube-proxy's nodePortAddresses: CIDRs that limit
	// the node addresses NodePorts answer on (empty: all).
	NodePortAddresses []string
}

// ExplainIPVS joins the table with what kube-proxy should have programmed
// for every proxied Service port.
func ExplainIPVS(in IPVSExplainInput) *IPVSExplanation {
	ex := &IPVSExplanation{Facts: FindIPVS(in.IPVSInput), Ports: []IPVSPort{}, NodeIPs: ipvsNodePortIPs(in)}
	if in.Objects == nil {
		return ex
	}
	byKey := map[ipvsKey]int{}
	for i, vs := range ex.Facts.VirtualServers {
		if vs.FWMark == 0 {
			byKey[ipvsKey{vs.Protocol, vs.Addr}] = i
		}
	}
	proxyLB := proxyModeIngress(in.Objects)
	for _, sp := range in.Objects.ServicePorts() {
		if !sp.Proxied {
			continue
		}
		for _, fam := range []kubeproxy.Family{kubeproxy.IPv4, kubeproxy.IPv6} {
			if p, ok := ex.port(sp, fam, in.Node, byKey, proxyLB); ok {
				ex.Ports = append(ex.Ports, p)
			}
		}
	}
	return ex
}

type ipvsKey struct {
	proto string
	addr  netip.AddrPort
}

// port is sp's frontends of family fam; ok is false when sp has none in
// that family.
func (ex *IPVSExplanation) port(sp *ServicePort, fam kubeproxy.Family, nv NodeView, byKey map[ipvsKey]int, proxyLB map[string]bool) (IPVSPort, bool) {
	p := IPVSPort{ServicePort: sp.String(), Namespace: sp.Namespace, Name: sp.Name, Family: fam,
		Protocol: string(sp.Protocol), AffinitySeconds: sp.AffinitySeconds, Frontends: []IPVSFrontend{}, Endpoints: []IPVSEndpoint{}}
	proto := ipvsProto(sp)
	add := func(kind string, ips []string, local bool) {
		for _, s := range ips {
			a, err := netip.ParseAddr(s)
			if err != nil || a.Is6() != (fam == kubeproxy.IPv6) {
				continue
			}
			p.Frontends = append(p.Frontends, IPVSFrontend{Kind: kind, Addr: netip.AddrPortFrom(a, uint16(sp.Port)), Local: local, VirtualServer: -1})
		}
	}
	add(FrontendClusterIP, sp.ClusterIPs, sp.InternalLocal)
	if len(p.Frontends) == 0 {
		return p, false // no cluster IP of this family: kube-proxy writes nothing for it
	}
	add(FrontendExternalIP, sp.ExternalIPs, sp.ExternalLocal)
	var lbs []string
	for _, ip := range sp.LoadBalancerIPs {
		// kube-proxy programs only VIP-mode ingress IPs (proxyutil.IsVIPMode)
		if !proxyLB[sp.Namespace+"/"+sp.Name+" "+ip] {
			lbs = append(lbs, ip)
		}
	}
	add(FrontendLoadBalancerIP, lbs, sp.ExternalLocal)
	if sp.NodePort > 0 {
		for _, a := range ex.NodeIPs {
			if a.Is6() == (fam == kubeproxy.IPv6) {
				p.Frontends = append(p.Frontends, IPVSFrontend{Kind: FrontendNodePort, Addr: netip.AddrPortFrom(a, uint16(sp.NodePort)), Local: sp.ExternalLocal, VirtualServer: -1})
			}
		}
		// NodePort virtual servers on addresses not given: found, not expected
		for i, vs := range ex.Facts.VirtualServers {
			if vs.AddrInferred && vs.ServicePort == p.ServicePort && vs.Addr.Addr().Is6() == (fam == kubeproxy.IPv6) {
				p.Frontends = append(p.Frontends, IPVSFrontend{Kind: FrontendNodePort, Addr: vs.Addr, Local: sp.ExternalLocal, Inferred: true, VirtualServer: i})
			}
		}
	}
	e := expect(sp, fam, nv)
	for i := range sp.Endpoints {
		ep := &sp.Endpoints[i]
		if ep.IPv6 != (fam == kubeproxy.IPv6) {
			continue
		}
		if ap, err := netip.ParseAddrPort(ep.String()); err == nil {
			p.Endpoints = append(p.Endpoints, IPVSEndpoint{Addr: ap, Node: ep.NodeName, Why: e.why(sp, ep.String())})
		}
	}
	for i := range p.Frontends {
		ex.settle(&p.Frontends[i], e, proto, byKey)
	}
	return p, true
}

// settle finds fe's virtual server and the endpoints kube-proxy makes its
// real servers, and marks them on the virtual server's.
func (ex *IPVSExplanation) settle(fe *IPVSFrontend, e expectation, proto string, byKey map[ipvsKey]int) {
	if fe.VirtualServer < 0 {
		if i, ok := byKey[ipvsKey{proto, fe.Addr}]; ok {
			fe.VirtualServer = i
		}
	}
	use := e.cluster
	switch {
	case fe.Local && !e.localKnown:
		fe.Unknown = true
	case fe.Local && len(e.local) > 0:
		use = e.local
	case fe.Local:
		fe.LocalFallback = true
	}
	if e.topology == TopologyUnknown && (!fe.Local || fe.LocalFallback) {
		fe.Unknown = true
	}
	fe.Expected = []netip.AddrPort{}
	if fe.Unknown {
		return
	}
	for s := range use {
		if ap, err := netip.ParseAddrPort(s); err == nil {
			fe.Expected = append(fe.Expected, ap)
		}
	}
	slices.SortFunc(fe.Expected, netip.AddrPort.Compare)
	if fe.VirtualServer < 0 {
		return
	}
	vs := &ex.Facts.VirtualServers[fe.VirtualServer]
	for _, want := range fe.Expected {
		found := false
		for j := range vs.RealServers {
			if vs.RealServers[j].Addr == want {
				vs.RealServers[j].Expected, found = true, true
			}
		}
		if !found {
			fe.Missing = append(fe.Missing, want)
		}
	}
}

func ipvsProto(sp *ServicePort) string {
	switch sp.Proto() {
	case "udp":
		return "UDP"
	case "sctp":
		return "SCTP"
	}
	return "TCP"
}

// ipvsNodePortIPs are the node's addresses NodePorts answer on: the Node's and
// those given, within nodePortAddresses' CIDRs when it names any.
func ipvsNodePortIPs(in IPVSExplainInput) []netip.Addr {
	var cidrs []netip.Prefix
	for _, s := range in.NodePortAddresses {
		if p, err := netip.ParsePrefix(s); err == nil {
			cidrs = append(cidrs, p)
		}
	}
	var out []netip.Addr
	seen := map[netip.Addr]bool{}
	addrs := slices.Clone(in.NodeIPs)
	for _, s := range in.Node.IPs {
		if a, err := netip.ParseAddr(s); err == nil {
			addrs = append(addrs, a)
		}
	}
	for _, a := range addrs {
		a = a.Unmap()
		if seen[a] || a.IsLoopback() || a.IsLinkLocalUnicast() {
			continue
		}
		if len(cidrs) > 0 && !slices.ContainsFunc(cidrs, func(p netip.Prefix) bool { return p.Contains(a) }) {
			continue
		}
		seen[a] = true
		out = append(out, a)
	}
	return out
}
