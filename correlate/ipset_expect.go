package correlate

import (
	"net/netip"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// This file says which members kube-proxy v1.37.2's IPVS proxier puts in
// its ipsets, and what put each there; a node's members are then
// attributed (ipset_classify.go). Facts only; judging them is diagnose's.
//
// syncProxyRules (pkg/proxy/ipvs/proxier.go:757-1170), per family, for
// each Service port with a cluster IP of that family:
//   - KUBE-LOOP-BACK: "epIP,proto:epPort,epIP" for every endpoint on this
//     node (IsLocal), in any condition: the loop (:785-811) runs over the
//     whole endpoints map, before any ready/serving/topology selection;
//   - KUBE-CLUSTER-IP "clusterIP,proto:port"; KUBE-IPVS-IPS the cluster IP;
//   - each external IP of the family: KUBE-EXTERNAL-IP-LOCAL when the
//     external policy is Local, else KUBE-EXTERNAL-IP; KUBE-IPVS-IPS the
//     address unless it is a node address (shouldBind, :896);
//   - each VIP-mode load-balancer IP of the family: KUBE-LOAD-BALANCER,
//     -LOCAL (external policy Local), and with source ranges of the family
//     (none when one is 0.0.0.0/0 or ::/0, serviceport.go:214-220) -FW,
//     -SOURCE-CIDR "lbIP,proto:port,cidr" per range and -SOURCE-IP
//     "lbIP,proto:port,lbIP" when a range holds the node IP; KUBE-IPVS-IPS
//     the address unless it is a node address;
//   - a NodePort, when kube-proxy found node addresses for NodePorts
//     (:750-771; none found skips the rest of the port, health check
//     included): KUBE-NODE-PORT-TCP/-UDP the port (bitmap:port),
//     KUBE-NODE-PORT-SCTP-HASH "nodeIP,sctp:port" per address; the -LOCAL
//     set too when the external policy is Local;
//   - KUBE-HEALTH-CHECK-NODE-PORT the health-check node port of a
//     LoadBalancer with external policy Local (NeedsHealthCheck).

// IPSetInput is what ExpectedIPSets reads.
type IPSetInput struct {
	Objects *Objects
	// Node is the node's name: its endpoints are the local ones. "" when
	// not known: KUBE-LOOP-BACK is then undecided.
	Node string
	// NodeIPs are the node's addresses as kube-proxy lists them (every
	// interface's but kube-ipvs0's); the first of each family is the
	// family's node IP. None given: the sets that depend on them are
	// undecided.
	NodeIPs []netip.Addr
	// NodePortAddresses is kube-proxy's nodePortAddresses (CIDRs or the
	// keywords "primary", "all", "localhost"); empty means every address.
	NodePortAddresses []string
}

// FrontendHealthCheckNodePort: the member is a Service's health-check
// node port (KUBE-HEALTH-CHECK-NODE-PORT).
const FrontendHealthCheckNodePort = "healthCheckNodePort"

// IPSetOwner is what put a member in a set: a Service port, through one of
// its frontends (Frontend*), or for KUBE-LOOP-BACK one of its endpoints on
// this node (Endpoint, "ip:port"; Frontend is then "").
type IPSetOwner struct {
	ServicePort string `json:"servicePort"`
	Frontend    string `json:"frontend,omitempty"`
	Endpoint    string `json:"endpoint,omitempty"`
}

// IPSetMember is one member of a set and what put it there.
type IPSetMember struct {
	Member string       `json:"member"`
	Owners []IPSetOwner `json:"owners"`
}

// IPSetExpected is what one set should hold.
type IPSetExpected struct {
	Name string `json:"name"`
	// Members are those kube-proxy writes, by member.
	Members []IPSetMember `json:"members"`
	// Undecided says what the input lacks to tell some members, "" when
	// nothing; Possible are the members kube-proxy may then write
	// (attributed when present, never missing).
	Undecided string        `json:"undecided,omitempty"`
	Possible  []IPSetMember `json:"possible,omitempty"`
}

// IPSetExpectation is what every set of kube-proxy's IPVS proxier should
// hold, for both families.
type IPSetExpectation struct {
	Sets []IPSetExpected `json:"sets"`

	want, maybe map[string]map[string][]IPSetOwner // set → member → owners
	undecided   map[string]string
	related     *ipsetRelated
}

// ipsetFamily is what one family's proxier knows of the node.
type ipsetFamily struct {
	v6 bool
	// nodeIP is the family's node IP (invalid when none).
	nodeIP netip.Addr
	// addrs are the node's addresses of the family; nodePortIPs those
	// NodePorts answer on. known: NodeIPs were given.
	addrs       map[netip.Addr]bool
	nodePortIPs []netip.Addr
	known       bool
}

// ExpectedIPSets is what kube-proxy's IPVS proxier writes into its ipsets
// for in.Objects on in.Node.
func ExpectedIPSets(in IPSetInput) *IPSetExpectation {
	e := &IPSetExpectation{want: map[string]map[string][]IPSetOwner{}, maybe: map[string]map[string][]IPSetOwner{},
		undecided: map[string]string{}, related: newIPSetRelated(in)}
	fams := []*ipsetFamily{newIPSetFamily(in, false), newIPSetFamily(in, true)}
	for _, f := range fams {
		e.markUndecided(in, f)
	}
	if in.Objects != nil {
		vip := proxyModeIngress(in.Objects)
		for _, sp := range in.Objects.ServicePorts() {
			if !sp.Proxied {
				continue
			}
			for _, f := range fams {
				e.servicePort(sp, f, in.Node, vip)
			}
		}
	}
	e.Sets = e.sorted()
	return e
}

func (e *IPSetExpectation) markUndecided(in IPSetInput, f *ipsetFamily) {
	name := func(b string) string { return IPSetName(b, f.v6) }
	if in.Node == "" {
		e.undecided[name(IPSetLoopBack)] = "the node is not known: which endpoints are local"
	}
	if f.known {
		return
	}
	why := "the node's addresses are not known"
	for _, b := range []string{IPSetNodePortTCP, IPSetNodePortLocalTCP, IPSetNodePortUDP, IPSetNodePortLocalUDP,
		IPSetNodePortSCTP, IPSetNodePortLocalSCTP, IPSetHealthCheckNodePort} {
		e.undecided[name(b)] = why + ": whether NodePorts have any, and which"
	}
	e.undecided[name(IPSetLoadBalancerSourceIP)] = why + ": whether a source range holds the node IP"
	e.undecided[name(IPSetIPVSIPs)] = why + ": whether an external or load-balancer IP is one (not bound then)"
}

// add records member in set: expected, or possible when sure is false.
func (e *IPSetExpectation) add(set, member string, o IPSetOwner, sure bool) {
	m := e.want
	if !sure {
		m = e.maybe
	}
	if m[set] == nil {
		m[set] = map[string][]IPSetOwner{}
	}
	if !slices.Contains(m[set][member], o) {
		m[set][member] = append(m[set][member], o)
	}
}

// servicePort adds what one Service port puts in one family's sets
// (syncProxyRules' loop body, proxier.go:774-1162).
func (e *IPSetExpectation) servicePort(sp *ServicePort, f *ipsetFamily, node string, proxyLB map[string]bool) {
	clusterIP, ok := familyAddr(sp.ClusterIPs, f.v6)
	if !ok {
		return // not in this family's service map (servicechangetracker.go:145)
	}
	name := func(b string) string { return IPSetName(b, f.v6) }
	proto, spName := sp.Proto(), sp.String()
	e.loopBack(sp, f, node, proto)
	fe := IPSetOwner{ServicePort: spName, Frontend: FrontendClusterIP}
	e.add(name(IPSetClusterIP), ipPortMember(clusterIP, proto, sp.Port), fe, true)
	e.add(name(IPSetIPVSIPs), clusterIP.String(), fe, true)
	// apiservice.ExternalPolicyLocal also asks that the Service be
	// reachable from outside; the API accepts the policy only on those.
	extLocal := sp.ExternalLocal
	for _, s := range sp.ExternalIPs {
		a, ok := familyAddr([]string{s}, f.v6)
		if !ok {
			continue
		}
		fe := IPSetOwner{ServicePort: spName, Frontend: FrontendExternalIP}
		set := IPSetExternalIP
		if extLocal {
			set = IPSetExternalIPLocal
		}
		e.add(name(set), ipPortMember(a, proto, sp.Port), fe, true)
		e.bind(f, a, fe)
	}
	for _, s := range sp.LoadBalancerIPs {
		if a, ok := familyAddr([]string{s}, f.v6); ok && !proxyLB[sp.Namespace+"/"+sp.Name+" "+s] {
			e.loadBalancer(sp, f, a, extLocal)
		}
	}
	if sp.NodePort != 0 {
		if f.known && len(f.nodePortIPs) == 0 {
			return // no NodePort addresses: the port's rest is skipped (:1026-1030)
		}
		e.nodePort(sp, f, extLocal)
	}
	if sp.HealthCheckNodePort != 0 && sp.Type == corev1.ServiceTypeLoadBalancer && extLocal {
		e.add(name(IPSetHealthCheckNodePort), strconv.Itoa(int(sp.HealthCheckNodePort)),
			IPSetOwner{ServicePort: spName, Frontend: FrontendHealthCheckNodePort}, f.known)
	}
}

// loopBack adds the hairpin members of the port's endpoints on this node.
func (e *IPSetExpectation) loopBack(sp *ServicePort, f *ipsetFamily, node, proto string) {
	for i := range sp.Endpoints {
		ep := &sp.Endpoints[i]
		a, err := netip.ParseAddr(ep.IP)
		if err != nil || ep.IPv6 != f.v6 || ep.Port == 0 || node != "" && ep.NodeName != node {
			continue
		}
		a = a.Unmap()
		member := ipPortMember(a, proto, ep.Port) + "," + a.String()
		e.add(IPSetName(IPSetLoopBack, f.v6), member, IPSetOwner{ServicePort: sp.String(), Endpoint: ep.String()}, node != "")
	}
}

// bind adds a an external or load-balancer address to KUBE-IPVS-IPS: bound
// to kube-ipvs0 unless the node has it already.
func (e *IPSetExpectation) bind(f *ipsetFamily, a netip.Addr, fe IPSetOwner) {
	if !f.addrs[a] {
		e.add(IPSetName(IPSetIPVSIPs, f.v6), a.String(), fe, f.known)
	}
}

func (e *IPSetExpectation) loadBalancer(sp *ServicePort, f *ipsetFamily, lb netip.Addr, extLocal bool) {
	name := func(b string) string { return IPSetName(b, f.v6) }
	fe := IPSetOwner{ServicePort: sp.String(), Frontend: FrontendLoadBalancerIP}
	member := ipPortMember(lb, sp.Proto(), sp.Port)
	e.add(name(IPSetLoadBalancer), member, fe, true)
	if extLocal {
		e.add(name(IPSetLoadBalancerLocal), member, fe, true)
	}
	if ranges := sourceRanges(sp.SourceRanges, f.v6); len(ranges) > 0 {
		e.add(name(IPSetLoadBalancerFW), member, fe, true)
		fromNode := false
		for _, r := range ranges {
			e.add(name(IPSetLoadBalancerSourceCIDR), member+","+prefixText(r), fe, true)
			fromNode = fromNode || f.nodeIP.IsValid() && r.Contains(f.nodeIP)
		}
		if fromNode || !f.known {
			e.add(name(IPSetLoadBalancerSourceIP), member+","+lb.String(), fe, f.known)
		}
	}
	e.bind(f, lb, fe)
}

func (e *IPSetExpectation) nodePort(sp *ServicePort, f *ipsetFamily, extLocal bool) {
	fe := IPSetOwner{ServicePort: sp.String(), Frontend: FrontendNodePort}
	var sets []string
	var members []string
	switch sp.Protocol {
	case corev1.ProtocolTCP:
		sets, members = []string{IPSetNodePortTCP, IPSetNodePortLocalTCP}, []string{strconv.Itoa(int(sp.NodePort))}
	case corev1.ProtocolUDP:
		sets, members = []string{IPSetNodePortUDP, IPSetNodePortLocalUDP}, []string{strconv.Itoa(int(sp.NodePort))}
	case corev1.ProtocolSCTP:
		sets = []string{IPSetNodePortSCTP, IPSetNodePortLocalSCTP}
		for _, a := range f.nodePortIPs {
			members = append(members, ipPortMember(a, "sctp", sp.NodePort))
		}
		if !f.known {
			members = []string{sctpAny(sp.NodePort)}
		}
	default:
		return
	}
	if !extLocal {
		sets = sets[:1]
	}
	for _, s := range sets {
		for _, m := range members {
			e.add(IPSetName(s, f.v6), m, fe, f.known)
		}
	}
}

// familyAddr is the first address of ips in the family.
func familyAddr(ips []string, v6 bool) (netip.Addr, bool) {
	for _, s := range ips {
		if a, err := netip.ParseAddr(strings.TrimSpace(s)); err == nil && a.Unmap().Is6() == v6 {
			return a.Unmap(), true
		}
	}
	return netip.Addr{}, false
}

// sourceRanges are the load-balancer source ranges of the family; none
// when one allows every address (serviceport.go:207-220).
func sourceRanges(ranges []string, v6 bool) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ranges {
		p, err := netip.ParsePrefix(strings.TrimSpace(s))
		if err != nil || p.Addr().Is6() != v6 {
			continue
		}
		if p.Bits() == 0 {
			return nil
		}
		out = append(out, p)
	}
	return out
}
