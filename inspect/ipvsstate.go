package inspect

import (
	"github.com/proxyrules/kubectl-proxyrules/inspect/ifaddr"
	"github.com/proxyrules/kubectl-proxyrules/inspect/ipset"
	"github.com/proxyrules/kubectl-proxyrules/inspect/ipvs"
)

const (
	// FormatIPVS is an IPVS listing: /proc/net/ip_vs, ipvsadm -Ln (--stats,
	// --rate) or -Sn; the Dump's Version names which (ipvs.Format).
	FormatIPVS Format = "ipvs"
	// FormatIPSet is `ipset save` or `ipset list` output; the Dump's
	// Version names which (ipset.Format), its Tables the sets, its Rules
	// the members.
	FormatIPSet Format = "ipset"
	// FormatIPAddr is `ip addr` output (show, -o, -br) of which kube-ipvs0
	// is kept; the Dump's Version names the form (ifaddr.Format), its
	// Rules kube-ipvs0's addresses.
	FormatIPAddr Format = "ip-addr"
	// FormatFIBTrie is /proc/net/fib_trie, the kernel's IPv4 routing
	// tables, of which the local addresses are kept (ifaddr.ReadFIBTrie);
	// the Dump's Rules count them.
	FormatFIBTrie Format = "fib-trie"
	// FormatIfInet6 is /proc/net/if_inet6, every IPv6 address with its
	// link (ifaddr.ReadIfInet6); the Dump's Rules count the local ones.
	FormatIfInet6 Format = "if-inet6"
)

// IPVSState is the IPVS side of a node in IPVS mode, beside its iptables
// rules; each part is joined over every input that showed it, and nil
// when none did.
type IPVSState struct {
	// Table is the virtual server table.
	Table *ipvs.Table
	// Sets are the node's ipsets (kube-proxy's KUBE-CLUSTER-IP …).
	Sets *ipset.Sets
	// Interface is kube-ipvs0 with the addresses bound to it; nil also when
	// an ip addr listing did not show it (its Dump warns so).
	Interface *ifaddr.Interface
	// Local are the node's local addresses as the kernel's files list
	// them where ip is missing (a live read in the kube-proxy image):
	// every IPv4 local address from /proc/net/fib_trie (its link not
	// said), every IPv6 one from /proc/net/if_inet6 with kube-ipvs0's
	// told apart (Kube). Local.Has(a) says whether a cluster IP is bound
	// and whether that is known (a family not read is not). Joined over
	// both files.
	Local *ifaddr.LocalAddrs
}

// mergeIPVS adds other's IPVS state to r's.
func (r *Ruleset) mergeIPVS(other *IPVSState) {
	if other == nil {
		return
	}
	if r.IPVS == nil {
		r.IPVS = &IPVSState{}
	}
	if other.Table != nil {
		r.IPVS.Table = ipvs.Join(r.IPVS.Table, other.Table)
	}
	if other.Sets != nil {
		r.IPVS.Sets = ipset.Join(r.IPVS.Sets, other.Sets)
	}
	if other.Interface != nil {
		r.IPVS.Interface = ifaddr.Join(r.IPVS.Interface, other.Interface)
	}
	if other.Local != nil {
		r.IPVS.Local = ifaddr.JoinLocal(r.IPVS.Local, other.Local)
	}
}

// HasIPVS: an IPVS table was read (it may hold no virtual server).
func (r *Ruleset) HasIPVS() bool { return r != nil && r.IPVS != nil && r.IPVS.Table != nil }

// HasIPSets: ipsets were read (there may be none).
func (r *Ruleset) HasIPSets() bool { return r != nil && r.IPVS != nil && r.IPVS.Sets != nil }

// HasIPVSInterface: kube-ipvs0 was read (it may hold no address).
func (r *Ruleset) HasIPVSInterface() bool {
	return r != nil && r.IPVS != nil && r.IPVS.Interface != nil
}

// HasLocalAddrs: the node's local addresses were read (fib_trie or
// if_inet6; Local.IPv4 and Local.IPv6 say which).
func (r *Ruleset) HasLocalAddrs() bool {
	return r != nil && r.IPVS != nil && r.IPVS.Local != nil
}

// IPVSRuleset is the ruleset of one IPVS listing read from source.
func IPVSRuleset(t *ipvs.Table, source string) *Ruleset {
	reals := 0
	for _, s := range t.Services {
		reals += len(s.RealServers)
	}
	return &Ruleset{
		Dumps: []Dump{{Source: source, Format: FormatIPVS, Version: string(t.Format), Rules: len(t.Services) + reals, Warnings: t.Warnings}},
		IPVS:  &IPVSState{Table: t},
	}
}

// IPSetRuleset is the ruleset of one ipset listing read from source.
func IPSetRuleset(s *ipset.Sets, source string) *Ruleset {
	return &Ruleset{
		Dumps: []Dump{{Source: source, Format: FormatIPSet, Version: string(s.Format), Tables: len(s.Sets), Rules: s.Members(), Warnings: s.Warnings}},
		IPVS:  &IPVSState{Sets: s},
	}
}

// IPAddrRuleset is the ruleset of one ip addr listing read from source:
// kube-ipvs0's addresses, no IPVS state when the listing lacks the link.
func IPAddrRuleset(l *ifaddr.Listing, source string) *Ruleset {
	rs := &Ruleset{Dumps: []Dump{{Source: source, Format: FormatIPAddr, Version: string(l.Format), Warnings: l.Warnings}}}
	if l.Interface != nil {
		rs.Dumps[0].Rules = len(l.Interface.Addrs)
		rs.IPVS = &IPVSState{Interface: l.Interface}
	}
	return rs
}

// LocalAddrsRuleset is the ruleset of one /proc/net/fib_trie or
// /proc/net/if_inet6 read from source: the node's local addresses.
func LocalAddrsRuleset(l *ifaddr.LocalListing, source string) *Ruleset {
	f := FormatFIBTrie
	if l.Format == ifaddr.FormatIfInet6 {
		f = FormatIfInet6
	}
	return &Ruleset{
		Dumps: []Dump{{Source: source, Format: f, Rules: len(l.Local.Addrs), Warnings: l.Warnings}},
		IPVS:  &IPVSState{Local: l.Local},
	}
}
