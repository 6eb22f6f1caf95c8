package correlate

import (
	"net/netip"
	"strconv"
	"strings"
)

// The ipsets kube-proxy v1.37.2's IPVS proxier keeps (pkg/proxy/ipvs/
// ipset.go, the ipsetInfo list of proxier.go), by their IPv4 names;
// IPSetName gives the IPv6 ones.
const (
	IPSetLoopBack               = "KUBE-LOOP-BACK"
	IPSetClusterIP              = "KUBE-CLUSTER-IP"
	IPSetExternalIP             = "KUBE-EXTERNAL-IP"
	IPSetExternalIPLocal        = "KUBE-EXTERNAL-IP-LOCAL"
	IPSetLoadBalancer           = "KUBE-LOAD-BALANCER"
	IPSetLoadBalancerFW         = "KUBE-LOAD-BALANCER-FW"
	IPSetLoadBalancerLocal      = "KUBE-LOAD-BALANCER-LOCAL"
	IPSetLoadBalancerSourceIP   = "KUBE-LOAD-BALANCER-SOURCE-IP"
	IPSetLoadBalancerSourceCIDR = "KUBE-LOAD-BALANCER-SOURCE-CIDR"
	IPSetNodePortTCP            = "KUBE-NODE-PORT-TCP"
	IPSetNodePortLocalTCP       = "KUBE-NODE-PORT-LOCAL-TCP"
	IPSetNodePortUDP            = "KUBE-NODE-PORT-UDP"
	IPSetNodePortLocalUDP       = "KUBE-NODE-PORT-LOCAL-UDP"
	IPSetNodePortSCTP           = "KUBE-NODE-PORT-SCTP-HASH"
	IPSetNodePortLocalSCTP      = "KUBE-NODE-PORT-LOCAL-SCTP-HASH"
	IPSetHealthCheckNodePort    = "KUBE-HEALTH-CHECK-NODE-PORT"
	IPSetIPVSIPs                = "KUBE-IPVS-IPS"
)

// ipsetBases are the sets in kube-proxy's order.
var ipsetBases = []string{IPSetLoopBack, IPSetClusterIP, IPSetExternalIP, IPSetExternalIPLocal,
	IPSetLoadBalancer, IPSetLoadBalancerFW, IPSetLoadBalancerLocal, IPSetLoadBalancerSourceIP,
	IPSetLoadBalancerSourceCIDR, IPSetNodePortTCP, IPSetNodePortLocalTCP, IPSetNodePortUDP,
	IPSetNodePortLocalUDP, IPSetNodePortSCTP, IPSetNodePortLocalSCTP, IPSetHealthCheckNodePort, IPSetIPVSIPs}

// IPSetName is the name of the set base (an IPSet* constant) for a family:
// the IPv6 proxier's sets are "KUBE-6-…", cut to ipset's 31 characters
// (NewIPSet, ipset.go:105-121): KUBE-6-LOAD-BALANCER-SOURCE-CID.
func IPSetName(base string, ipv6 bool) string {
	if !ipv6 || !strings.HasPrefix(base, "KUBE-") {
		return base
	}
	name := "KUBE-6-" + strings.TrimPrefix(base, "KUBE-")
	if len(name) > 31 {
		name = name[:31]
	}
	return name
}

// IPSetNames are the names of every set kube-proxy's IPVS proxier keeps,
// IPv4 then IPv6.
func IPSetNames() []string {
	out := make([]string, 0, 2*len(ipsetBases))
	for _, v6 := range []bool{false, true} {
		for _, b := range ipsetBases {
			out = append(out, IPSetName(b, v6))
		}
	}
	return out
}

// ipPortMember is a hash:ip,port member as ipset prints it
// ("10.96.0.10,udp:53", "fd00::1,tcp:80"); kube-proxy's Entry.String
// (pkg/proxy/ipvs/ipset/ipset.go:229-252) is the same text.
func ipPortMember(a netip.Addr, proto string, port int32) string {
	return a.String() + "," + proto + ":" + strconv.Itoa(int(port))
}

// prefixText is a net as ipset prints it: masked, and without the length
// of a single address (10.0.0.1/32 prints 10.0.0.1; checked with ipset
// 7.17: `ipset add T 1.2.3.4,tcp:443,10.0.0.1/32` saves "…,10.0.0.1").
func prefixText(p netip.Prefix) string {
	p = p.Masked()
	if p.IsSingleIP() {
		return p.Addr().String()
	}
	return p.String()
}

// CanonicalIPSetMember is member in the spelling `ipset save` prints:
// addresses as inet_ntop writes them (IPv6 compressed), nets masked and
// without a single address's length, the protocol lower-case, ports
// without leading zeros. What it cannot read it returns unchanged, so a
// member from any source compares with ExpectedIPSets' members.
func CanonicalIPSetMember(member string) string {
	parts := strings.Split(strings.TrimSpace(member), ",")
	for i, p := range parts {
		parts[i] = canonicalIPSetPart(p)
	}
	return strings.Join(parts, ",")
}

func canonicalIPSetPart(p string) string {
	if a, err := netip.ParseAddr(p); err == nil {
		return a.Unmap().String()
	}
	if pf, err := netip.ParsePrefix(p); err == nil {
		if pf.Addr().Is4In6() && pf.Bits() >= 96 {
			pf = netip.PrefixFrom(pf.Addr().Unmap(), pf.Bits()-96)
		}
		return prefixText(pf)
	}
	if n, err := strconv.Atoi(p); err == nil && n >= 0 {
		return strconv.Itoa(n)
	}
	if proto, port, ok := strings.Cut(p, ":"); ok {
		if n, err := strconv.Atoi(port); err == nil && n >= 0 && !strings.Contains(port, ":") {
			return strings.ToLower(proto) + ":" + strconv.Itoa(n)
		}
	}
	return p
}
