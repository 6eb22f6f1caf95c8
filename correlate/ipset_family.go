package correlate

import (
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// newIPSetFamily is what one family's proxier knows of the node: its
// addresses as GetAllLocalAddressesExcept lists them (no loopback, no IPv6
// link-local: netlink_linux.go:155-166) and the NodePort addresses.
func newIPSetFamily(in IPSetInput, v6 bool) *ipsetFamily {
	f := &ipsetFamily{v6: v6, addrs: map[netip.Addr]bool{}, known: len(in.NodeIPs) > 0}
	var all []netip.Addr
	for _, a := range in.NodeIPs {
		a = a.Unmap()
		if a.Is6() != v6 || slices.Contains(all, a) {
			continue
		}
		all = append(all, a)
		if !f.nodeIP.IsValid() && !a.IsLoopback() {
			f.nodeIP = a
		}
		if !a.IsLoopback() && !(v6 && a.IsLinkLocalUnicast()) {
			f.addrs[a] = true
		}
	}
	f.nodePortIPs = f.nodePortAddrs(in.NodePortAddresses, all)
	return f
}

// nodePortAddrs are the addresses the family's NodePorts answer on
// (proxier.go:748-771, NewNodePortAddresses): with no CIDR of the family,
// or one matching all, every node address; else the node's addresses in a
// CIDR, loopback left out.
func (f *ipsetFamily) nodePortAddrs(cfg []string, all []netip.Addr) []netip.Addr {
	var cidrs []netip.Prefix
	matchAll := false
	for _, s := range cfg {
		for _, c := range expandNodePortAddress(strings.TrimSpace(s), f.nodeIP) {
			p, err := netip.ParsePrefix(c)
			if err != nil || p.Addr().Is6() != f.v6 {
				continue
			}
			matchAll = matchAll || p.Bits() == 0
			cidrs = append(cidrs, p)
		}
	}
	matchAll = matchAll || len(cidrs) == 0
	var out []netip.Addr
	for _, a := range all {
		switch {
		case matchAll:
			if f.addrs[a] {
				out = append(out, a)
			}
		case !a.IsLoopback() && slices.ContainsFunc(cidrs, func(p netip.Prefix) bool { return p.Contains(a) }):
			out = append(out, a)
		}
	}
	return out
}

// expandNodePortAddress is kube-proxy's expandNodePortAddressKeywords
// (cmd/kube-proxy/app/server.go:656-680) for one family's node IP.
func expandNodePortAddress(s string, nodeIP netip.Addr) []string {
	switch s {
	case "primary":
		if nodeIP.IsValid() && !nodeIP.IsLoopback() {
			return []string{netip.PrefixFrom(nodeIP, nodeIP.BitLen()).String()}
		}
		return nil
	case "localhost":
		return []string{"127.0.0.0/8", "::1/128"}
	case "all":
		return []string{"0.0.0.0/0", "::/0"}
	}
	return []string{s}
}

// sctpAny stands for "any address, this SCTP NodePort" in the possible
// members when the node's addresses are not known.
func sctpAny(port int32) string { return "*,sctp:" + strconv.Itoa(int(port)) }
