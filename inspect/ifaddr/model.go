// Package ifaddr reads one network interface's addresses from `ip addr`
// output: kube-proxy's IPVS mode binds every Service address it serves to
// the dummy link kube-ipvs0, so which addresses the link holds is node
// state a diagnosis needs beside the IPVS table and the ipsets. Plain data,
// no Kubernetes types.
//
// Forms read (iproute2's): `ip addr show [dev] NAME` and a whole `ip addr`
// listing (of which only the named link is kept), `ip -o addr` (one line
// an address) and `ip -br addr`; also pasted (CRLF, indentation, shell
// prompts, the command line). `ip link` shows no address: it is passed
// over with a warning rather than read as a link without addresses.
// Bounds (limits.go) as in inspect/ipvs: lines, bytes and addresses are
// capped, what a cap left out is in Listing.Truncated, and the error is
// only the io.Reader's. Where ip is missing (the kube-proxy image) the
// node's local addresses are read from the kernel's files instead:
// ReadFIBTrie and ReadIfInet6 (local.go).
package ifaddr

import "net/netip"

// KubeIPVS0 is the link kube-proxy's IPVS mode binds Service addresses to.
const KubeIPVS0 = "kube-ipvs0"

// Format is the text form a listing was read from.
type Format string

const (
	FormatAddr    Format = "addr"    // ip addr: a header line a link, then its addresses
	FormatOneline Format = "oneline" // ip -o addr: a line an address
	FormatBrief   Format = "brief"   // ip -br addr: a line a link
	FormatMixed   Format = "mixed"   // more than one of those pasted together
)

// Listing is what a reader kept of an `ip addr` listing.
type Listing struct {
	Format Format
	// Interface is the link asked for, nil when the listing does not show it.
	Interface *Interface
	// Links is how many links the listing showed, the one asked for
	// included: a whole listing without it says the node has no such link.
	Links     int
	Truncated Truncation
	Warnings  []string
}

// Interface is one link and its addresses.
type Interface struct {
	// Name is the link's name, without the "@peer" ip prints for a veth.
	Name string
	// Flags are the header's <…> flags ("BROADCAST", "NOARP", "UP" …), in
	// order; nil when the form does not show them (-o, -br).
	Flags []string
	// State is the operational state ("UP", "DOWN", "UNKNOWN" …); a dummy
	// link that is up shows UNKNOWN. "" when the form does not show it (-o).
	State string
	// Addrs are the addresses with their prefix length as shown (kube-proxy
	// binds /32 and /128), IPv4 and IPv6, in the listing's order, each once.
	Addrs []netip.Prefix
}

// Truncation says what a cap left out: when Incomplete, the addresses
// kept may not be all of the link's.
type Truncation struct {
	Incomplete   bool
	AddrsLeftOut int64 // addresses over MaxAddrs
	LongLines    int64 // lines over MaxLineBytes, skipped
	Unread       bool  // reading stopped at MaxBytes
	BytesRead    int64
}

// HasFlag reports whether the header showed flag f.
func (i *Interface) HasFlag(f string) bool {
	if i == nil {
		return false
	}
	for _, x := range i.Flags {
		if x == f {
			return true
		}
	}
	return false
}

// Join is a and b's link as one: the addresses of both (each once), and
// the flags and state of whichever shows them (a's first). Neither input
// changes; nil when both are nil.
func Join(a, b *Interface) *Interface {
	if a == nil || b == nil {
		if a == nil {
			a = b
		}
		if a == nil {
			return nil
		}
		c := *a
		c.Flags, c.Addrs = append([]string(nil), a.Flags...), append([]netip.Prefix(nil), a.Addrs...)
		return &c
	}
	c := Join(a, nil)
	if c.Flags == nil {
		c.Flags = append([]string(nil), b.Flags...)
	}
	if c.State == "" {
		c.State = b.State
	}
	seen := make(map[netip.Prefix]bool, len(c.Addrs))
	for _, p := range c.Addrs {
		seen[p] = true
	}
	for _, p := range b.Addrs {
		if !seen[p] {
			seen[p] = true
			c.Addrs = append(c.Addrs, p)
		}
	}
	return c
}
