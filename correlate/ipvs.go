package correlate

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/proxyrules/kubectl-proxyrules/inspect/ipvs"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// This file joins a node's IPVS table with the Services: which Service
// port and frontend each virtual server is, and whether each real server
// is an endpoint of that port. Facts only; judging them is diagnose's.
//
// What kube-proxy v1.37.2's IPVS proxier programs (pkg/proxy/ipvs/,
// datapath-facts §5.2): a virtual server per (address, protocol, port)
// for cluster IPs, external IPs, VIP-mode load-balancer IPs and, for a
// NodePort, each node address (not kube-ipvs0's, loopback or IPv6
// link-local); ClientIP affinity as "persistent <seconds>"; real servers
// weight 1, Masq (weight 0 while a removed TCP endpoint drains).

// IPVSInput is what FindIPVS joins.
type IPVSInput struct {
	Objects *Objects
	// NodeIPs are the node's addresses: where its NodePorts answer.
	NodeIPs []netip.Addr
	Table   *ipvs.Table
}

// What a virtual server is.
const (
	// VirtualServiceServicePort: a frontend of a Service port.
	VirtualServiceServicePort = "servicePort"
	// VirtualServiceProbe: kube-proxy's startup probe (CanUseIPVSProxier,
	// pkg/proxy/ipvs/supported.go:78-98), created and deleted at start; a
	// leftover one is that probe, not a Service's (PR #114669).
	VirtualServiceProbe = "kubeProxyProbe"
	// VirtualServiceUnattributed: no current Service port has it (a
	// deleted Service's, a removed port's, or not kube-proxy's).
	VirtualServiceUnattributed = "unattributed"
)

// IPVSProbe is the probe's address and port; its protocol is TCP.
var IPVSProbe = netip.MustParseAddrPort("198.51.100.0:20000")

// IPVSFacts are a table joined with the Services.
type IPVSFacts struct {
	VirtualServers []IPVSVirtualServer `json:"virtualServers"`
	Counts         IPVSCounts          `json:"counts"`
	// Incomplete: the reader's caps left part of the table out
	// (Table.Truncated), so the counts are of what was read.
	Incomplete bool `json:"incomplete,omitempty"`
}

// IPVSCounts let a caller say how much of the table was attributed.
type IPVSCounts struct {
	VirtualServers int `json:"virtualServers"`
	// Attributed are the virtual servers known: a Service port's
	// frontend, or kube-proxy's probe (counted in Probes too).
	Attributed   int `json:"attributed"`
	Probes       int `json:"probes"`
	Unattributed int `json:"unattributed"`
	RealServers  int `json:"realServers"`
	// Endpoints are the real servers that are an endpoint of their
	// virtual server's Service port; NotEndpoints those of an attributed
	// virtual server that are not; the rest belong to virtual servers not
	// attributed.
	Endpoints    int `json:"endpoints"`
	NotEndpoints int `json:"notEndpoints"`
}

// IPVSVirtualServer is one virtual server and what it was joined to.
type IPVSVirtualServer struct {
	Index     int            `json:"index"` // in Table.Services
	Protocol  string         `json:"protocol"`
	Addr      netip.AddrPort `json:"addr"`
	FWMark    uint32         `json:"fwMark,omitempty"`
	Scheduler string         `json:"scheduler,omitempty"`
	// Persistence is the persistence timeout in seconds, 0 for none.
	Persistence uint32 `json:"persistence,omitempty"`
	Kind        string `json:"kind"` // VirtualService*
	ServicePort string `json:"servicePort,omitempty"`
	Frontend    string `json:"frontend,omitempty"` // Frontend*
	// AffinitySeconds is the Service port's ClientIP affinity timeout
	// (kube-proxy programs it as the persistence), 0 for none.
	AffinitySeconds int32 `json:"affinitySeconds,omitempty"`
	// AddrInferred: a NodePort virtual server on an address not known to
	// be the node's, attributed by its port (kube-proxy creates one on
	// every local address but kube-ipvs0's and loopback).
	AddrInferred bool             `json:"addrInferred,omitempty"`
	RealServers  []IPVSRealServer `json:"realServers"`
}

// IPVSRealServer is one real server of a virtual server.
type IPVSRealServer struct {
	Addr    netip.AddrPort `json:"addr"`
	Forward string         `json:"forward,omitempty"`
	Weight  int32          `json:"weight"`
	// Endpoint: an endpoint (address and target port) of the virtual
	// server's Service port, in any condition.
	Endpoint bool `json:"endpoint"`
	// Expected: kube-proxy makes this endpoint a real server here (set by
	// ExplainIPVS: ready, of the topology, local under a Local policy).
	Expected bool `json:"expected,omitempty"`
	// ActiveConn and InActConn are the connections the form shows, -1
	// where it does not (-Sn, --stats).
	ActiveConn int64 `json:"activeConn"`
	InActConn  int64 `json:"inActConn"`
}

// FindIPVS joins in.Table with the Services.
func FindIPVS(in IPVSInput) *IPVSFacts {
	f := &IPVSFacts{VirtualServers: []IPVSVirtualServer{}}
	if in.Table == nil {
		return f
	}
	f.Incomplete = in.Table.Truncated.Incomplete
	// the conntrack join's index: the same frontends, NodePorts and
	// endpoints (no localhost NodePorts in IPVS mode)
	ix := newConntrackIndex(ConntrackInput{Objects: in.Objects, NodeIPs: in.NodeIPs, Mode: kubeproxy.ModeIPVS})
	for i := range in.Table.Services {
		vs := ix.joinIPVS(&in.Table.Services[i])
		vs.Index = i
		f.Counts.Add(&vs)
		f.VirtualServers = append(f.VirtualServers, vs)
	}
	return f
}

// Add counts vs into c (a caller counts the virtual servers it selected).
func (c *IPVSCounts) Add(vs *IPVSVirtualServer) {
	c.VirtualServers++
	c.RealServers += len(vs.RealServers)
	switch vs.Kind {
	case VirtualServiceUnattributed:
		c.Unattributed++
		return
	case VirtualServiceProbe:
		c.Probes++
	}
	c.Attributed++
	for _, rs := range vs.RealServers {
		if rs.Endpoint {
			c.Endpoints++
		} else {
			c.NotEndpoints++
		}
	}
}

// joinIPVS finds the Service port and frontend of s, and which of its real
// servers are that port's endpoints.
func (ix *conntrackIndex) joinIPVS(s *ipvs.Service) IPVSVirtualServer {
	addr := netip.AddrPortFrom(s.Addr.Addr().Unmap(), s.Addr.Port())
	vs := IPVSVirtualServer{Protocol: string(s.Protocol), FWMark: s.FWMark, Scheduler: s.Scheduler,
		Kind: VirtualServiceUnattributed, RealServers: make([]IPVSRealServer, 0, len(s.RealServers))}
	if s.Protocol != ipvs.ProtoFWMark {
		vs.Addr = addr
	}
	if s.Flags&ipvs.FlagPersistent != 0 {
		vs.Persistence = s.Timeout
	}
	var sp *ServicePort
	if s.Protocol != ipvs.ProtoFWMark {
		sp, vs.Frontend = ix.ipvsFrontend(strings.ToLower(string(s.Protocol)), addr)
	}
	if sp == nil && s.Protocol != ipvs.ProtoFWMark && !ix.known[addr.Addr()] && len(ix.byAddr[addr.Addr()]) == 0 && !addr.Addr().IsLoopback() && addr != IPVSProbe {
		// a NodePort on a local address the input does not name (loopback
		// ones are an older version's: see diagnose)
		if sp = ix.nodePorts[strings.ToLower(string(s.Protocol))+"/"+fmt.Sprint(addr.Port())]; sp != nil {
			vs.Frontend, vs.AddrInferred = FrontendNodePort, true
		}
	}
	switch {
	case sp != nil:
		vs.Kind, vs.ServicePort, vs.AffinitySeconds = VirtualServiceServicePort, sp.String(), sp.AffinitySeconds
	case s.Protocol == ipvs.ProtoTCP && addr == IPVSProbe:
		vs.Kind = VirtualServiceProbe
	}
	for _, r := range s.RealServers {
		ra := netip.AddrPortFrom(r.Addr.Addr().Unmap(), r.Addr.Port())
		vs.RealServers = append(vs.RealServers, IPVSRealServer{Addr: ra, Forward: string(r.Forward), Weight: r.Weight,
			Endpoint: sp != nil && ix.endpoints[sp][ra], ActiveConn: r.ActiveConn, InActConn: r.InActConn})
	}
	return vs
}

// ipvsFrontend is the Service port whose frontend addr is, as FindConntrack
// finds an entry's: the address's own frontends first, then a NodePort on
// a node address.
func (ix *conntrackIndex) ipvsFrontend(proto string, addr netip.AddrPort) (*ServicePort, string) {
	for _, fe := range ix.byAddr[addr.Addr()] {
		if fe.sp.Proto() == proto && uint16(fe.sp.Port) == addr.Port() {
			return fe.sp, fe.kind
		}
	}
	if ix.nodeIPs[addr.Addr()] {
		if sp := ix.nodePorts[proto+"/"+fmt.Sprint(addr.Port())]; sp != nil {
			return sp, FrontendNodePort
		}
	}
	return nil, ""
}
