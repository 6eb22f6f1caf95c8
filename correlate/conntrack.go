package correlate

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/proxyrules/kubectl-proxyrules/inspect/conntrack"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// This file joins a node's conntrack table with the Services: which entry
// targets which Service port, whether its reply comes from a serving
// endpoint, and whether kube-proxy v1.37.2's own cleanup would remove it.
// Facts only; diagnose/conntrack.go judges them.
//
// kube-proxy v1.37.2's cleanup (pkg/proxy/conntrack/cleanup.go,
// CleanStaleEntries, :45-167), which the Cause* values below follow:
//   - UDP Service ports only (:69) and UDP entries only (:128);
//   - allowed replies are the *serving* endpoints' ip:port, whatever the
//     traffic policies, topology or terminating state (:75-86);
//   - keys are clusterIP:port, each VIP-mode load-balancer IP:port and
//     externalIP:port (:101-111), and the NodePort alone, only when the
//     Service has a serving endpoint (:112-121: a NodePort is matched on
//     the port alone, so an empty set would hit unrelated flows);
//   - an entry whose orig-dst:orig-dport is a key and whose
//     reply-src:reply-sport is not allowed is deleted (:139-156);
//   - it runs after a sync only when a changed EndpointSlice belongs to a
//     Service with a UDP port (ConntrackCleanupRequired,
//     pkg/proxy/endpointschangetracker.go:212-230; iptables proxier.go:1423,
//     nftables proxier.go:1916): an entry it would delete stays until the
//     next such change;
//   - a deleted Service has no key any more: its entries stay (fixed by
//     #141371 on master, not in v1.37.2);
//   - Services scaled to zero have been cleaned since v1.37.0 (#139629),
//     their NodePort entries still not (the :119 guard).

// ConntrackInput is what FindConntrack joins.
type ConntrackInput struct {
	Objects *Objects
	// NodeIPs are the node's addresses: where its NodePorts answer.
	NodeIPs []netip.Addr
	// Mode is kube-proxy's proxy mode. In iptables mode 127.0.0.1 is a
	// NodePort destination too (localhostNodePorts, route_localnet); in
	// nftables mode localhost NodePorts are never DNATed.
	Mode kubeproxy.Mode
	// ServiceCIDRs, when known from elsewhere (nftables' cluster-ips-check
	// rule, the apiserver's --service-cluster-ip-range), tell a deleted
	// Service's address. ServiceCIDR objects among Objects come first.
	ServiceCIDRs []netip.Prefix
	Table        *conntrack.Table
}

// Frontends of a Service an entry's original destination can be.
const (
	FrontendClusterIP      = "clusterIP"
	FrontendExternalIP     = "externalIP"
	FrontendLoadBalancerIP = "loadBalancerIP"
	FrontendNodePort       = "nodePort"
)

// Causes: whether and why kube-proxy v1.37.2's cleanup leaves an entry
// whose reply source is no serving endpoint.
const (
	// CauseNoEndpointChange: kube-proxy's rule matches the entry; it is
	// deleted at the first sync that changes a UDP Service's endpoints.
	CauseNoEndpointChange = "noEndpointChange"
	// CauseUDPOnly: a TCP or SCTP entry; kube-proxy never deletes those.
	CauseUDPOnly = "udpOnly"
	// CauseDeletedService: no current Service has the address (#141371).
	CauseDeletedService = "deletedService"
	// CauseNodePortNoEndpoints: a NodePort entry of a Service with no
	// serving endpoint (cleanup.go:119).
	CauseNodePortNoEndpoints = "nodePortNoEndpoints"
	// CauseNotServicePort: a Service's cluster IP on a port (or protocol)
	// it does not have: a removed port, or a client trying one; kube-proxy
	// keys on ip:port.
	CauseNotServicePort = "notServicePort"
)

// Endpoint states of an entry's reply source.
const (
	ReplyServing     = "serving"
	ReplyNotServing  = "an endpoint, not serving"
	ReplyNotEndpoint = "no endpoint of the port"
	ReplyNotDNATed   = "not DNATed" // reply-src is the original destination: created before the rules
)

// ConntrackFacts are a table joined with the Services.
type ConntrackFacts struct {
	// Entries are those whose original destination is a Service's
	// frontend (or a deleted one's), in table order.
	Entries []ConntrackEntry `json:"entries"`
	// Groups are the entries per Service port (or deleted address).
	Groups []ConntrackGroup `json:"groups"`
	// Read is how many entries the table held as read (see its
	// Truncated).
	Read int `json:"read"`
	// ServiceRange is what told a deleted Service's address.
	ServiceRange ServiceRange `json:"serviceRange"`
}

// ServiceRange is where cluster IPs are allocated, and how that is known.
type ServiceRange struct {
	Prefixes []netip.Prefix `json:"prefixes"`
	Source   string         `json:"source"`
}

// ConntrackEntry is one entry that targets a Service.
type ConntrackEntry struct {
	Index     int            `json:"index"` // in Table.Entries
	Proto     string         `json:"proto"`
	Dst       netip.AddrPort `json:"dst"`      // the original destination
	ReplySrc  netip.AddrPort `json:"replySrc"` // who answers: the endpoint after DNAT
	Timeout   uint32         `json:"timeout"`
	State     string         `json:"state,omitempty"`
	Unreplied bool           `json:"unreplied,omitempty"`
	// ServicePort is "ns/name:port"; for a deleted Service's address "",
	// for CauseNotServicePort the Service "ns/name".
	ServicePort string `json:"servicePort,omitempty"`
	Frontend    string `json:"frontend"`
	Deleted     bool   `json:"deleted,omitempty"`
	Reply       string `json:"reply"` // Reply*
	// Stale: the reply source is no serving endpoint of the port.
	Stale bool `json:"stale"`
	// Cause, Why and KubeProxyCleans, for a stale entry: see Cause*.
	Cause           string `json:"cause,omitempty"`
	Why             string `json:"why,omitempty"`
	KubeProxyCleans bool   `json:"kubeProxyCleans,omitempty"`
	// Command clears it (printed, never run).
	Command string `json:"command,omitempty"`
}

// ConntrackGroup is the entries to one Service port, or to one deleted
// Service's address and port.
type ConntrackGroup struct {
	ServicePort string `json:"servicePort,omitempty"`
	// Target is the Service port, or the deleted address and port.
	Target  string `json:"target"`
	Proto   string `json:"proto"`
	Deleted bool   `json:"deleted,omitempty"`
	Entries int    `json:"entries"`
	Stale   int    `json:"stale"`
	// ByCause are the stale entries by cause.
	ByCause []StaleConntrack `json:"byCause"`
}

// StaleConntrack are a group's stale entries of one cause.
type StaleConntrack struct {
	Cause           string `json:"cause"`
	Why             string `json:"why"`
	KubeProxyCleans bool   `json:"kubeProxyCleans"`
	Entries         int    `json:"entries"`
	// NotDNATed counts those whose reply source is the address itself.
	NotDNATed int `json:"notDNATed"`
	// Longest and Shortest are the seconds left.
	Longest  uint32 `json:"longest"`
	Shortest uint32 `json:"shortest"`
	// ReplySources are the answering addresses (the gone endpoints).
	ReplySources []string `json:"replySources"`
	Commands     []string `json:"commands"`
}

// FindConntrack joins in.Table with the Services.
func FindConntrack(in ConntrackInput) *ConntrackFacts {
	f := &ConntrackFacts{Entries: []ConntrackEntry{}, Groups: []ConntrackGroup{}}
	if in.Table == nil {
		return f
	}
	f.Read = len(in.Table.Entries)
	ix := newConntrackIndex(in)
	f.ServiceRange = ix.rng
	for i := range in.Table.Entries {
		e := &in.Table.Entries[i]
		if e.Proto != "udp" && e.Proto != "tcp" && e.Proto != "sctp" {
			continue
		}
		if ce, ok := ix.join(e); ok {
			ce.Index = i
			f.Entries = append(f.Entries, ce)
		}
	}
	f.Groups = groupConntrack(f.Entries)
	return f
}

type frontend struct {
	sp   *ServicePort
	kind string
}

type conntrackIndex struct {
	byAddr     map[netip.Addr][]frontend
	clusterIPs map[netip.Addr]*ServicePort // any port of the Service
	nodePorts  map[string]*ServicePort     // "udp/30053"
	nodeIPs    map[netip.Addr]bool
	serving    map[*ServicePort]map[netip.AddrPort]bool
	endpoints  map[*ServicePort]map[netip.AddrPort]bool
	known      map[netip.Addr]bool // node and endpoint IPs: never a deleted Service's
	rng        ServiceRange
}

func newConntrackIndex(in ConntrackInput) *conntrackIndex {
	ix := &conntrackIndex{byAddr: map[netip.Addr][]frontend{}, clusterIPs: map[netip.Addr]*ServicePort{},
		nodePorts: map[string]*ServicePort{}, nodeIPs: map[netip.Addr]bool{}, known: map[netip.Addr]bool{},
		serving: map[*ServicePort]map[netip.AddrPort]bool{}, endpoints: map[*ServicePort]map[netip.AddrPort]bool{}}
	for _, a := range in.NodeIPs {
		ix.nodeIPs[a.Unmap()] = true
		ix.known[a.Unmap()] = true
	}
	if in.Mode == kubeproxy.ModeIPTables {
		// localhostNodePorts: 127.0.0.1:NodePort is DNATed (kube-proxy-facts §5)
		ix.nodeIPs[netip.AddrFrom4([4]byte{127, 0, 0, 1})] = true
	}
	if in.Objects == nil {
		ix.rng = ServiceRange{Source: "none: no API objects"}
		return ix
	}
	proxyLB := proxyModeIngress(in.Objects)
	for _, sp := range in.Objects.ServicePorts() {
		if !sp.Proxied {
			continue
		}
		ix.addServicePort(sp, proxyLB)
	}
	ix.rng = serviceRange(in, ix.clusterIPs)
	return ix
}

func (ix *conntrackIndex) addServicePort(sp *ServicePort, proxyLB map[string]bool) {
	add := func(ips []string, kind string) {
		for _, s := range ips {
			if a, err := netip.ParseAddr(s); err == nil {
				ix.byAddr[a] = append(ix.byAddr[a], frontend{sp, kind})
				if kind == FrontendClusterIP {
					ix.clusterIPs[a] = sp
				}
			}
		}
	}
	add(sp.ClusterIPs, FrontendClusterIP)
	add(sp.ExternalIPs, FrontendExternalIP)
	var lbs []string
	for _, ip := range sp.LoadBalancerIPs {
		// kube-proxy keys only VIP-mode ingress IPs (proxyutil.IsVIPMode)
		if !proxyLB[sp.Namespace+"/"+sp.Name+" "+ip] {
			lbs = append(lbs, ip)
		}
	}
	add(lbs, FrontendLoadBalancerIP)
	if sp.NodePort > 0 {
		ix.nodePorts[sp.Proto()+"/"+fmt.Sprint(sp.NodePort)] = sp
	}
	srv, all := map[netip.AddrPort]bool{}, map[netip.AddrPort]bool{}
	for _, ep := range sp.Endpoints {
		a, err := netip.ParseAddr(ep.IP)
		if err != nil {
			continue
		}
		ap := netip.AddrPortFrom(a, uint16(ep.Port))
		all[ap] = true
		ix.known[a] = true
		// the serving condition as kube-proxy reads it (Serving nil =
		// true, endpointslicecache.go:212; cleanup.go:83 IsServing)
		if ep.Serving {
			srv[ap] = true
		}
	}
	ix.serving[sp], ix.endpoints[sp] = srv, all
}

// proxyModeIngress are the load-balancer IPs with ipMode Proxy, which
// kube-proxy does not program (the fast object reader does not keep
// ipMode: then every IP counts as VIP mode, kube-proxy's default).
func proxyModeIngress(o *Objects) map[string]bool {
	out := map[string]bool{}
	for _, svc := range o.Services {
		for _, ing := range svc.Status.LoadBalancer.Ingress {
			if ing.IPMode != nil && *ing.IPMode == corev1.LoadBalancerIPModeProxy {
				out[svc.Namespace+"/"+svc.Name+" "+ing.IP] = true
			}
		}
	}
	return out
}

// join finds the Service port e targets.
func (ix *conntrackIndex) join(e *conntrack.Entry) (ConntrackEntry, bool) {
	dst := e.Orig.Dst.Unmap()
	ce := ConntrackEntry{Proto: e.Proto, Dst: netip.AddrPortFrom(dst, e.Orig.DPort),
		ReplySrc: netip.AddrPortFrom(e.Reply.Src.Unmap(), e.Reply.SPort), Timeout: e.Timeout, State: e.State,
		Unreplied: e.Flags&conntrack.FlagUnreplied != 0}
	for _, fe := range ix.byAddr[dst] {
		if fe.sp.Proto() == e.Proto && uint16(fe.sp.Port) == e.Orig.DPort {
			ix.judge(&ce, fe.sp, fe.kind)
			return ce, true
		}
	}
	if ix.nodeIPs[dst] {
		if sp := ix.nodePorts[e.Proto+"/"+fmt.Sprint(e.Orig.DPort)]; sp != nil {
			ix.judge(&ce, sp, FrontendNodePort)
			return ce, true
		}
		return ce, false
	}
	if sp := ix.clusterIPs[dst]; sp != nil {
		// the Service's address, not one of its ports
		ce.ServicePort, ce.Frontend = sp.Namespace+"/"+sp.Name, FrontendClusterIP
		ce.Reply = ReplyNotEndpoint
		if ce.ReplySrc.Addr() == dst {
			ce.Reply = ReplyNotDNATed
		}
		ce.Stale = true
		ix.cause(&ce, CauseNotServicePort)
		return ce, true
	}
	if len(ix.byAddr[dst]) == 0 && !ix.known[dst] && ix.inRange(dst) {
		ce.Frontend, ce.Deleted, ce.Stale = FrontendClusterIP, true, true
		ce.Reply = ReplyNotEndpoint
		if ce.ReplySrc.Addr() == dst {
			ce.Reply = ReplyNotDNATed
		}
		ix.cause(&ce, CauseDeletedService)
		return ce, true
	}
	return ce, false
}

// judge says whether ce's reply comes from a serving endpoint of sp, and
// if not whether kube-proxy would delete it.
func (ix *conntrackIndex) judge(ce *ConntrackEntry, sp *ServicePort, kind string) {
	ce.ServicePort, ce.Frontend = sp.String(), kind
	switch {
	case ix.serving[sp][ce.ReplySrc]:
		ce.Reply = ReplyServing
		return
	case ix.endpoints[sp][ce.ReplySrc]:
		ce.Reply = ReplyNotServing
	case ce.ReplySrc.Addr() == ce.Dst.Addr():
		ce.Reply = ReplyNotDNATed
	default:
		ce.Reply = ReplyNotEndpoint
	}
	if kind == FrontendLoadBalancerIP && ce.Reply == ReplyNotDNATed {
		// an LB IP the node does not proxy (ipMode Proxy, read without
		// ipMode): the load balancer answers, nothing is stale
		ce.Reply = ReplyServing
		return
	}
	ce.Stale = true
	cause := CauseNoEndpointChange
	switch {
	case ce.Proto != "udp":
		cause = CauseUDPOnly
	case kind == FrontendNodePort && len(ix.serving[sp]) == 0:
		cause = CauseNodePortNoEndpoints
	}
	ix.cause(ce, cause)
}

// cause fills the cleanup verdict and the command that clears the entry.
func (ix *conntrackIndex) cause(ce *ConntrackEntry, cause string) {
	if ce.Proto != "udp" {
		cause = CauseUDPOnly // before any other: kube-proxy never looks at it
	}
	ce.Cause, ce.KubeProxyCleans = cause, cause == CauseNoEndpointChange
	ce.Why = CauseWhy(cause, ce.Proto)
	ce.Command = ClearCommand(ce.Proto, ce.Dst, ce.ReplySrc.Addr())
}

// CauseWhy is a cause in words.
func CauseWhy(cause, proto string) string {
	switch cause {
	case CauseNoEndpointChange:
		return "no endpoint change since: kube-proxy deletes it at its next sync that changes a UDP Service's endpoints"
	case CauseUDPOnly:
		return strings.ToUpper(proto) + ": kube-proxy cleans UDP only"
	case CauseDeletedService:
		return "deleted Service: not cleaned before #141371 (kube-proxy v1.37.2 has no key for it)"
	case CauseNodePortNoEndpoints:
		return "NodePort of a Service with no endpoints: skipped (kube-proxy matches NodePorts on the port alone)"
	case CauseNotServicePort:
		return "not a port of the Service: kube-proxy matches ip:port"
	}
	return cause
}

// ClearCommand is the conntrack command that deletes the entries to dst
// answered by replySrc (conntrack-tools; the kube-proxy image has none:
// run it from a debug pod with the host network).
func ClearCommand(proto string, dst netip.AddrPort, replySrc netip.Addr) string {
	fam := ""
	if dst.Addr().Is6() {
		fam = "-f ipv6 "
	}
	return fmt.Sprintf("conntrack -D %s-p %s --orig-dst %s --orig-port-dst %d --reply-src %s", fam, proto, dst.Addr(), dst.Port(), replySrc)
}

func (ix *conntrackIndex) inRange(a netip.Addr) bool {
	for _, p := range ix.rng.Prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// ClusterIPRange is ServiceRange of the objects alone: what a live read
// filters the node's table by, so that a deleted Service's entries (an
// address no current Service has) are read too.
func ClusterIPRange(objs *Objects) ServiceRange {
	ips := map[netip.Addr]*ServicePort{}
	if objs == nil {
		return serviceRange(ConntrackInput{Objects: &Objects{}}, ips)
	}
	for _, svc := range objs.Services {
		for _, s := range append([]string{svc.Spec.ClusterIP}, svc.Spec.ClusterIPs...) {
			if a, err := netip.ParseAddr(s); err == nil {
				ips[a.Unmap()] = nil
			}
		}
	}
	return serviceRange(ConntrackInput{Objects: objs}, ips)
}

// serviceRange is where cluster IPs come from: the ServiceCIDR objects,
// else the prefixes given, else per family the smallest prefix holding
// every known cluster IP (no wider than the apiserver allows a service
// range: /12 for IPv4, /64 for IPv6; a deleted Service's IP outside it is
// not found).
func serviceRange(in ConntrackInput, clusterIPs map[netip.Addr]*ServicePort) ServiceRange {
	if ps := serviceCIDRObjects(in.Objects); len(ps) > 0 {
		return ServiceRange{Prefixes: ps, Source: "the ServiceCIDR objects"}
	}
	if len(in.ServiceCIDRs) > 0 {
		return ServiceRange{Prefixes: in.ServiceCIDRs, Source: "the service CIDRs given"}
	}
	var ps []netip.Prefix
	for _, v6 := range []bool{false, true} {
		var p netip.Prefix
		for a := range clusterIPs {
			if a.Is6() != v6 {
				continue
			}
			if !p.IsValid() {
				p = netip.PrefixFrom(a, a.BitLen())
				continue
			}
			for !p.Contains(a) {
				p = netip.PrefixFrom(p.Addr(), p.Bits()-1).Masked()
			}
		}
		if minBits := map[bool]int{false: 12, true: 64}[v6]; p.IsValid() && p.Bits() >= minBits {
			ps = append(ps, p)
		}
	}
	if len(ps) == 0 {
		return ServiceRange{Source: "none: no ServiceCIDR objects, none given, no cluster IPs"}
	}
	return ServiceRange{Prefixes: ps, Source: "the range of the known cluster IPs (no ServiceCIDR objects): a deleted Service's IP outside it is not found"}
}

// serviceCIDRObjects are the spec.cidrs of networking.k8s.io ServiceCIDR
// objects (kept unstructured).
func serviceCIDRObjects(o *Objects) []netip.Prefix {
	var out []netip.Prefix
	for _, obj := range o.Other {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok || u.GetKind() != "ServiceCIDR" {
			continue
		}
		cidrs, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "cidrs")
		for _, c := range cidrs {
			if p, err := netip.ParsePrefix(c); err == nil {
				out = append(out, p.Masked())
			}
		}
	}
	return out
}

// groupConntrack counts the entries per Service port (or deleted
// address), the stale ones per cause.
func groupConntrack(entries []ConntrackEntry) []ConntrackGroup {
	byKey := map[string]*ConntrackGroup{}
	var keys []string
	for i := range entries {
		e := &entries[i]
		target := e.ServicePort
		switch {
		case e.Deleted:
			target = e.Dst.String()
		case e.Cause == CauseNotServicePort:
			target = e.ServicePort + " " + e.Dst.String()
		}
		key := target + "/" + e.Proto
		g := byKey[key]
		if g == nil {
			g = &ConntrackGroup{Target: target, Proto: e.Proto, Deleted: e.Deleted, ByCause: []StaleConntrack{}}
			if !e.Deleted && e.Cause != CauseNotServicePort {
				g.ServicePort = e.ServicePort
			}
			byKey[key] = g
			keys = append(keys, key)
		}
		g.Entries++
		if e.Stale {
			g.Stale++
			g.addStale(e)
		}
	}
	sort.Strings(keys)
	out := make([]ConntrackGroup, 0, len(keys))
	for _, k := range keys {
		g := byKey[k]
		for i := range g.ByCause {
			sort.Strings(g.ByCause[i].ReplySources)
			sort.Strings(g.ByCause[i].Commands)
		}
		out = append(out, *g)
	}
	return out
}

func (g *ConntrackGroup) addStale(e *ConntrackEntry) {
	var s *StaleConntrack
	for i := range g.ByCause {
		if g.ByCause[i].Cause == e.Cause {
			s = &g.ByCause[i]
		}
	}
	if s == nil {
		g.ByCause = append(g.ByCause, StaleConntrack{Cause: e.Cause, Why: e.Why, KubeProxyCleans: e.KubeProxyCleans, Shortest: e.Timeout,
			ReplySources: []string{}, Commands: []string{}})
		s = &g.ByCause[len(g.ByCause)-1]
	}
	s.Entries++
	if e.Reply == ReplyNotDNATed {
		s.NotDNATed++
	}
	s.Longest, s.Shortest = max(s.Longest, e.Timeout), min(s.Shortest, e.Timeout)
	if src := e.ReplySrc.Addr().String(); !slices.Contains(s.ReplySources, src) {
		s.ReplySources = append(s.ReplySources, src)
	}
	if !slices.Contains(s.Commands, e.Command) {
		s.Commands = append(s.Commands, e.Command)
	}
}
