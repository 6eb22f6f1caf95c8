package evaluate

import (
	"net/netip"
	"strings"

	"github.com/proxyrules/kubectl-proxyrules/inspect/ipset"
	"github.com/proxyrules/kubectl-proxyrules/inspect/iptables/ruleargs"
)

// `-m set --match-set NAME FLAGS` (xt_set) is decided from the set's
// members when the ipsets were read (Ruleset.IPVS.Sets, `ipset save` or
// `ipset list`); else, or for a set not listed whole, it is a statement
// followed both ways, the same words in every rule. A member matches as
// the set type's kernel module compares it: each component of the type
// against the packet's source or destination (FLAGS: src or dst per
// component, in order), a port with its protocol (hash:*,port), a
// bitmap:port's port of a TCP, UDP, SCTP or UDP-Lite packet alone.

// setOption is an option of -m set.
func (w *walk) setOption(t *thread, o ruleargs.Option) (cond, bool) {
	if o.Name != "--match-set" || len(o.Args) != 2 {
		return cond{}, false
	}
	what := unknown("-m set --match-set %s %s", o.Args[0], o.Args[1])
	sets := w.e.ipsets()
	if sets == nil {
		return not(what, o.Not), true
	}
	set := sets.Set(o.Args[0])
	if set == nil {
		// xt_set refuses a rule naming a set that does not exist: the
		// set is not in the input, not absent
		return not(what, o.Not), true
	}
	if !set.Listed || sets.Truncated.Incomplete || len(set.Members) == 0 && set.Entries > 0 {
		return not(what, o.Not), true
	}
	m, ok := w.inSet(t, set, strings.Split(o.Args[1], ","))
	if !ok {
		return not(what, o.Not), true
	}
	return not(truth(m), o.Not), true
}

// ipsets are the node's sets as read, nil when none were.
func (e *Evaluator) ipsets() *ipset.Sets {
	if e.rs == nil || e.rs.IPVS == nil {
		return nil
	}
	return e.rs.IPVS.Sets
}

// inSet: some member of set matches t's packet; ok false when the set's
// type or a member is not one this reads.
func (w *walk) inSet(t *thread, set *ipset.Set, dirs []string) (match, ok bool) {
	_, comps, _ := strings.Cut(set.Type, ":")
	names := strings.Split(comps, ",")
	if len(dirs) < len(names) {
		return false, false
	}
	fam6 := w.pkt.Family == "IPv6"
	if set.Family != "" && (set.Family == "inet6") != fam6 {
		return false, true
	}
	addr := func(d string) netip.Addr {
		if d == "src" {
			return t.src.Addr().Unmap()
		}
		return t.dst.Addr().Unmap()
	}
	port := func(d string) uint16 {
		if d == "src" {
			return t.src.Port()
		}
		return t.dst.Port()
	}
	proto := strings.ToLower(w.pkt.Protocol)
	for _, name := range names {
		switch name {
		case "ip", "net", "port":
		default:
			return false, false // mac, mark, iface: not read here
		}
	}
	for _, m := range set.Members {
		if m.Raw != "" && !m.IP.IsValid() && !m.HasPort && !m.Net.IsValid() {
			return false, false // a member not understood
		}
		if memberMatches(m, names, dirs, addr, port, proto) {
			return true, true
		}
	}
	return false, true
}

// memberMatches compares one member, component by component.
func memberMatches(m ipset.Member, names, dirs []string, addr func(string) netip.Addr, port func(string) uint16, proto string) bool {
	ips := 0
	for i, name := range names {
		switch name {
		case "ip":
			want := m.IP
			if ips > 0 {
				want = m.IP2
			}
			ips++
			if want != addr(dirs[i]) {
				return false
			}
		case "net":
			if !m.Net.Contains(addr(dirs[i])) {
				return false
			}
		case "port":
			switch proto {
			case "tcp", "udp", "sctp", "udplite":
			default:
				return false
			}
			if !m.HasPort || m.Port != port(dirs[i]) || m.Proto != "" && m.Proto != proto {
				return false
			}
		}
	}
	return true
}
