package correlate

import (
	"net/netip"
	"strings"

	"github.com/proxyrules/kubectl-proxyrules/evaluate"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// What trace joins with the API objects: the entries of a Service (where
// its packets are addressed), the Service an address belongs to, and the
// owners of the chains and endpoints an outcome's path goes through.

// TraceEntry is one address a Service's packets are sent to.
type TraceEntry struct {
	// Kind: clusterIP, nodePort, externalIP, loadBalancerIP; "address"
	// for an address given that is none of a Service's.
	Kind     string
	Dst      netip.AddrPort
	Protocol string // tcp, udp, sctp
	// ServicePort owns the address; nil when none does.
	ServicePort *ServicePort
}

// ServiceEntries are every entry of sp: its cluster IPs, its node port on
// each of the node's addresses, its external and load-balancer IPs.
func ServiceEntries(sp *ServicePort, nodeIPs []netip.Addr) []TraceEntry {
	var out []TraceEntry
	add := func(kind, ip string, port int32) {
		a, err := netip.ParseAddr(ip)
		if err != nil || port <= 0 || port > 65535 {
			return
		}
		out = append(out, TraceEntry{Kind: kind, Dst: netip.AddrPortFrom(a.Unmap(), uint16(port)), Protocol: sp.Proto(), ServicePort: sp})
	}
	for _, ip := range sp.ClusterIPs {
		add("clusterIP", ip, sp.Port)
	}
	if sp.NodePort > 0 {
		for _, a := range nodeIPs {
			// a node port answers in the Service's families only
			for _, ip := range sp.ClusterIPs {
				if isIPv6(ip) == a.Is6() {
					add("nodePort", a.String(), sp.NodePort)
					break
				}
			}
		}
	}
	for _, ip := range sp.ExternalIPs {
		add("externalIP", ip, sp.Port)
	}
	for _, ip := range sp.LoadBalancerIPs {
		add("loadBalancerIP", ip, sp.Port)
	}
	return out
}

// EntryAt is what dst is: the entry of the Service port it belongs to
// (a node port when dst is one of the node's addresses), or a bare
// address.
func EntryAt(objs *Objects, dst netip.AddrPort, protocol string, nodeIPs []netip.Addr) TraceEntry {
	e := TraceEntry{Kind: "address", Dst: dst, Protocol: protocol}
	if objs == nil {
		return e
	}
	ip := dst.Addr().Unmap().String()
	port := int32(dst.Port())
	isNode := false
	for _, a := range nodeIPs {
		isNode = isNode || a.Unmap() == dst.Addr().Unmap()
	}
	for _, sp := range objs.ServicePorts() {
		if !sp.Proxied || sp.Proto() != protocol {
			continue
		}
		switch {
		case sp.Port == port && contains(sp.ClusterIPs, ip):
			e.Kind = "clusterIP"
		case sp.Port == port && contains(sp.ExternalIPs, ip):
			e.Kind = "externalIP"
		case sp.Port == port && contains(sp.LoadBalancerIPs, ip):
			e.Kind = "loadBalancerIP"
		case isNode && sp.NodePort == port:
			e.Kind = "nodePort"
		default:
			continue
		}
		e.ServicePort = sp
		return e
	}
	return e
}

// HopOwner is what a chain on a path belongs to.
type HopOwner struct {
	ServicePort string `json:"servicePort,omitempty"`
	Endpoint    string `json:"endpoint,omitempty"`
}

// EndpointLabel is an endpoint as the EndpointSlices describe it.
type EndpointLabel struct {
	ServicePort string `json:"servicePort"`
	Pod         string `json:"pod,omitempty"`
	Node        string `json:"node,omitempty"`
	Ready       bool   `json:"ready"`
	Serving     bool   `json:"serving"`
	Terminating bool   `json:"terminating"`
}

// TraceLabels names the owners of chains and endpoints on a trace's paths:
// from the chain names recomputed for the Service ports at hand (the one
// traced first), the nftables names themselves, and kube-proxy's comments.
type TraceLabels struct {
	objs      *Objects
	byChain   map[string]HopOwner
	endpoints map[string]EndpointLabel
	hashed    map[*ServicePort]bool
}

// NewTraceLabels labels with objs (which may be nil: only names and
// comments then).
func NewTraceLabels(objs *Objects) *TraceLabels {
	return &TraceLabels{objs: objs, byChain: map[string]HopOwner{}, endpoints: map[string]EndpointLabel{}, hashed: map[*ServicePort]bool{}}
}

// Learn adds the chain names and endpoints of sp (every chain and
// endpoint kube-proxy writes for it).
func (l *TraceLabels) Learn(sp *ServicePort) {
	if sp == nil || l.hashed[sp] {
		return
	}
	l.hashed[sp] = true
	spn, proto := sp.String(), sp.Proto()
	hash := PortProtoHash(spn, proto)
	for _, prefix := range []string{kubeproxy.PrefixService, kubeproxy.PrefixLocal, kubeproxy.PrefixExternal, kubeproxy.PrefixFirewall} {
		l.byChain[prefix+hash] = HopOwner{ServicePort: spn}
	}
	if sp.PortName == "" {
		l.byChain[kubeproxy.PrefixService+LegacyPortProtoHash(sp.Namespace, sp.Name, proto)] = HopOwner{ServicePort: spn}
	}
	for _, ep := range sp.Endpoints {
		s := ep.String()
		l.byChain[EndpointChain(spn, proto, s)] = HopOwner{ServicePort: spn, Endpoint: s}
		if _, ok := l.endpoints[s]; !ok {
			l.endpoints[s] = EndpointLabel{ServicePort: spn, Pod: ep.Pod, Node: ep.NodeName, Ready: ep.Ready, Serving: ep.Serving, Terminating: ep.Terminating}
		}
	}
}

// LearnEndpoint adds the Service ports that have ep among their
// endpoints (for an address traced that no entry names).
func (l *TraceLabels) LearnEndpoint(ep string) {
	if l.objs == nil {
		return
	}
	if _, ok := l.endpoints[ep]; ok {
		return
	}
	for _, sp := range l.objs.ServicePorts() {
		for _, e := range sp.Endpoints {
			if e.String() == ep {
				l.Learn(sp)
				return
			}
		}
	}
}

// Chain is the owner of a chain of a path, "" fields when not known. The
// rule text that jumped there helps where names cannot (a comment
// "ns/svc:port -> ip:port").
func (l *TraceLabels) Chain(chain, jumpComment string) HopOwner {
	if o, ok := l.byChain[chain]; ok {
		return o
	}
	if n, ok := ParseNFTName(chain); ok {
		return HopOwner{ServicePort: n.ServicePortName(), Endpoint: n.Endpoint}
	}
	if spn, ep, ok := strings.Cut(jumpComment, " -> "); ok && kubeproxy.HasAnyPrefix(chain, kubeproxy.PrefixEndpoint) {
		return HopOwner{ServicePort: spn, Endpoint: ep}
	}
	return HopOwner{}
}

// Endpoint is what the slices say of the endpoint "ip:port".
func (l *TraceLabels) Endpoint(ep string) (EndpointLabel, bool) {
	e, ok := l.endpoints[ep]
	return e, ok
}

// OutcomeEndpoint is the endpoint an unknown outcome was headed for, by
// the name of the endpoint chain whose target nft did not show: the chain
// of the outcome's last hop.
func (l *TraceLabels) OutcomeEndpoint(o evaluate.Outcome) string {
	last, ok := lastHop(o)
	if !ok {
		return ""
	}
	return l.Chain(last.Chain, "").Endpoint
}

// PodSource picks an address of prefix for "a pod on this node": the
// highest of its first 250 that no endpoint uses (a pod that is an
// endpoint of the Service would hairpin; the low addresses are the ones
// handed out first).
func PodSource(prefix netip.Prefix, objs *Objects) netip.Addr {
	used := map[netip.Addr]bool{}
	if objs != nil {
		for _, sp := range objs.ServicePorts() {
			for _, ep := range sp.Endpoints {
				if a, err := netip.ParseAddr(ep.IP); err == nil && prefix.Contains(a) {
					used[a] = true
				}
			}
		}
	}
	var candidates []netip.Addr
	for a, i := prefix.Masked().Addr().Next(), 0; i < 250 && prefix.Contains(a); a, i = a.Next(), i+1 {
		candidates = append(candidates, a)
	}
	for i := len(candidates) - 1; i > 0; i-- {
		if !used[candidates[i]] {
			return candidates[i]
		}
	}
	return prefix.Masked().Addr().Next()
}

// PodCIDRsOf are the node's pod ranges (spec.podCIDRs).
func (o *Objects) PodCIDRsOf(node string) []netip.Prefix {
	var out []netip.Prefix
	if o == nil {
		return out
	}
	if n := o.Node(node); n != nil {
		cidrs := n.Spec.PodCIDRs
		if len(cidrs) == 0 && n.Spec.PodCIDR != "" {
			cidrs = []string{n.Spec.PodCIDR}
		}
		for _, c := range cidrs {
			if p, err := netip.ParsePrefix(c); err == nil {
				out = append(out, p.Masked())
			}
		}
	}
	return out
}

// NodeAddresses are the node's InternalIP and ExternalIP addresses.
func (o *Objects) NodeAddresses(node string) []netip.Addr {
	var out []netip.Addr
	if o == nil {
		return out
	}
	if n := o.Node(node); n != nil {
		for _, a := range n.Status.Addresses {
			if a.Type != "InternalIP" && a.Type != "ExternalIP" {
				continue
			}
			if ip, err := netip.ParseAddr(a.Address); err == nil {
				out = append(out, ip.Unmap())
			}
		}
	}
	return out
}

// EndpointOnNode says whether ip is an endpoint of some Service on node
// (a pod there).
func (o *Objects) EndpointOnNode(ip netip.Addr, node string) bool {
	if o == nil || node == "" {
		return false
	}
	s := ip.Unmap().String()
	for _, sp := range o.ServicePorts() {
		for _, ep := range sp.Endpoints {
			if ep.NodeName == node && ep.IP == s {
				return true
			}
		}
	}
	return false
}
