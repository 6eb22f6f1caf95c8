package ifaddr

import (
	"net/netip"
	"slices"
)

// The node's local addresses, read where a kube-proxy image can (it has no
// ip): the kernel's local routing table in /proc/net/fib_trie (IPv4: every
// address the node takes packets to as its own is a "/32 host LOCAL"
// leaf, whichever link holds it; a link that is down, as kube-ipvs0 is,
// keeps its local routes) and /proc/net/if_inet6 (IPv6: every address with
// its link's name). Neither is in network-namespace-blind /sys.

// Kernel files the local addresses are read from (LocalAddrs.Source).
const (
	ProcFIBTrie          = "/proc/net/fib_trie"
	ProcIfInet6          = "/proc/net/if_inet6"
	FormatFIBTrie Format = "fib_trie" // /proc/net/fib_trie
	FormatIfInet6 Format = "if_inet6" // /proc/net/if_inet6
)

// IPv6 address flags (if_inet6's fifth column) of an address the kernel
// does not take as local yet (no local route): DAD not done, or failed.
const (
	ifaFDADFailed = 0x08
	ifaFTentative = 0x40
)

// LocalAddrs are the addresses a node holds as its own. In IPVS mode
// every cluster IP (and external or load-balancer IP that is not a node
// address) must be among them, bound to kube-ipvs0, for the node to take
// packets to it to IPVS at LOCAL_IN. Every list is sorted, each address
// once.
type LocalAddrs struct {
	// Addrs are all local host addresses: IPv4 from fib_trie's "/32 host
	// LOCAL" leaves (its link is not said), IPv6 from if_inet6 without
	// the tentative and DAD-failed ones.
	Addrs []netip.Addr
	// Ranges are LOCAL routes wider than /32 (lo's 127.0.0.0/8, an
	// "ip route add local 10.96.0.0/12 dev lo"): the node takes every
	// address in them as its own too. At most maxRanges.
	Ranges []netip.Prefix
	// Kube are the IPv6 addresses of Addrs if_inet6 lists on kube-ipvs0.
	// fib_trie does not name links: an IPv4 address is known to be
	// local, not to be on kube-ipvs0.
	Kube []netip.Addr
	// Unusable are IPv6 addresses listed but tentative or DAD-failed:
	// assigned (to KubeUnusable's link when kube-ipvs0) yet not local.
	Unusable     []netip.Addr
	KubeUnusable []netip.Addr
	// IPv4 and IPv6 say which family was read: an address of a family
	// not read is unknown, not missing.
	IPv4, IPv6 bool
	// Incomplete: a cap left addresses out, so one not listed may be local.
	Incomplete bool
	// Source names the kernel files read: ProcFIBTrie, ProcIfInet6 or
	// both, joined by " and ".
	Source string
}

// Has says whether a is local (bound) and whether that is known: false,
// true is "read, and not bound"; an address of a family not read, or not
// found in a capped read, is not known.
func (l *LocalAddrs) Has(a netip.Addr) (local, known bool) {
	if l == nil || !a.IsValid() {
		return false, false
	}
	a = a.Unmap()
	if _, found := slices.BinarySearchFunc(l.Addrs, a, netip.Addr.Compare); found {
		return true, true
	}
	for _, p := range l.Ranges {
		if p.Contains(a) {
			return true, true
		}
	}
	read := a.Is4() && l.IPv4 || a.Is6() && l.IPv6
	return false, read && !l.Incomplete
}

// OnKube says whether if_inet6 listed a (IPv6) as a usable address of
// kube-ipvs0.
func (l *LocalAddrs) OnKube(a netip.Addr) bool {
	if l == nil {
		return false
	}
	_, found := slices.BinarySearchFunc(l.Kube, a.Unmap(), netip.Addr.Compare)
	return found
}

// JoinLocal is a and b as one read: the addresses of both, the families
// either read. Neither input changes; nil when both are nil. An IPv6
// address one read found usable and the other not (DAD ended between
// them) is both local and in Unusable.
func JoinLocal(a, b *LocalAddrs) *LocalAddrs {
	if a == nil && b == nil {
		return nil
	}
	if a == nil {
		a, b = b, nil
	}
	c := &LocalAddrs{Addrs: slices.Clone(a.Addrs), Ranges: slices.Clone(a.Ranges), Kube: slices.Clone(a.Kube), Unusable: slices.Clone(a.Unusable),
		KubeUnusable: slices.Clone(a.KubeUnusable), IPv4: a.IPv4, IPv6: a.IPv6, Incomplete: a.Incomplete, Source: a.Source}
	if b == nil {
		return c
	}
	c.Addrs = mergeSorted(c.Addrs, b.Addrs)
	for _, p := range b.Ranges {
		if len(c.Ranges) < maxRanges {
			c.Ranges = appendPrefix(c.Ranges, p)
		}
	}
	c.Kube = mergeSorted(c.Kube, b.Kube)
	c.Unusable = mergeSorted(c.Unusable, b.Unusable)
	c.KubeUnusable = mergeSorted(c.KubeUnusable, b.KubeUnusable)
	c.IPv4, c.IPv6, c.Incomplete = c.IPv4 || b.IPv4, c.IPv6 || b.IPv6, c.Incomplete || b.Incomplete
	switch {
	case c.Source == "" || c.Source == b.Source:
		c.Source = b.Source
	case b.Source != "":
		c.Source += " and " + b.Source
	}
	return c
}

// mergeSorted is a's and b's addresses, sorted, each once.
func mergeSorted(a, b []netip.Addr) []netip.Addr {
	if len(b) == 0 {
		return a
	}
	a = append(a, b...)
	slices.SortFunc(a, netip.Addr.Compare)
	return slices.Compact(a)
}

// sortedSet is an address set that keeps at most max addresses.
type sortedSet struct {
	seen    map[netip.Addr]struct{}
	list    []netip.Addr
	max     int
	leftOut int64
}

// add keeps a once; false when the cap left it out.
func (s *sortedSet) add(a netip.Addr) bool {
	if _, ok := s.seen[a]; ok {
		return true
	}
	if len(s.seen) >= s.max {
		s.leftOut++
		return false
	}
	if s.seen == nil {
		s.seen = map[netip.Addr]struct{}{}
	}
	s.seen[a] = struct{}{}
	s.list = append(s.list, a)
	return true
}

func (s *sortedSet) sorted() []netip.Addr {
	slices.SortFunc(s.list, netip.Addr.Compare)
	return s.list
}
