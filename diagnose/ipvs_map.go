package diagnose

import (
	"cmp"
	"slices"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
)

// IPVS mode's part of `map`: every virtual server with the Service port
// and frontend it is (or kube-proxy's probe, or no owner), and every real
// server with whether it is an endpoint of that port. In IPVS mode the
// iptables chains name no Service: the virtual servers do.

// MapVirtualServer is one virtual server of the map.
type MapVirtualServer struct {
	// VirtualServer is its name as ipvsadm writes it ("TCP 10.96.0.1:443
	// rr persistent 10800").
	VirtualServer string `json:"virtualServer"`
	Family        string `json:"family,omitempty"`
	// Unowned says what a virtual server no Service port has is: stale,
	// kubeProxyProbe... as IPVSUnowned.What; "" for a Service port's, and
	// for all without the API objects.
	Unowned string `json:"unowned,omitempty"`
	correlate.IPVSVirtualServer
}

// mapIPVS sets the map's virtual servers and their counts when the node
// has an IPVS table; the selection keeps only its Service ports'.
func (m *ChainMap) mapIPVS(n *Node) {
	m.VirtualServers = []MapVirtualServer{}
	if !n.Ruleset.HasIPVS() {
		return
	}
	rep := IPVS(n)
	what := map[string]string{}
	for _, u := range rep.Unowned {
		what[u.VirtualServer] = u.What
	}
	vss := []MapVirtualServer{}
	for _, vs := range rep.ex.Facts.VirtualServers {
		if n.Select != nil && (vs.ServicePort == "" || !n.selected(vs.ServicePort)) {
			continue
		}
		fam := "IPv4"
		if vs.Addr.Addr().Is6() {
			fam = "IPv6"
		}
		if vs.FWMark != 0 {
			fam = ""
		}
		name := virtualServerName(&vs)
		vss = append(vss, MapVirtualServer{VirtualServer: name, Family: fam, Unowned: what[name], IPVSVirtualServer: vs})
	}
	slices.SortStableFunc(vss, func(a, b MapVirtualServer) int {
		return cmp.Or(cmp.Compare(mapVSRank(&a), mapVSRank(&b)), cmp.Compare(a.ServicePort, b.ServicePort),
			cmp.Compare(frontendRank[a.Frontend], frontendRank[b.Frontend]), a.Addr.Compare(b.Addr), cmp.Compare(a.Index, b.Index))
	})
	counts := correlate.IPVSCounts{}
	for i := range vss {
		counts.Add(&vss[i].IPVSVirtualServer)
	}
	m.VirtualServers, m.Summary.IPVS = vss, &counts
	m.Summary.IPVSIncomplete = rep.ex.Facts.Incomplete
}

// frontendRank orders a Service port's virtual servers as explain lists
// its frontends.
var frontendRank = map[string]int{correlate.FrontendClusterIP: 0, correlate.FrontendExternalIP: 1, correlate.FrontendLoadBalancerIP: 2, correlate.FrontendNodePort: 3}

// mapVSRank puts the Service ports' virtual servers first, then the
// probe, then those without an owner.
func mapVSRank(vs *MapVirtualServer) int {
	switch vs.Kind {
	case correlate.VirtualServiceServicePort:
		return 0
	case correlate.VirtualServiceProbe:
		return 1
	}
	return 2
}
