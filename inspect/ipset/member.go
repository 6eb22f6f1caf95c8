package ipset

import (
	"net/netip"
	"strconv"
	"strings"
)

// parseMember reads a member as ipset prints it for a set of type typ,
// followed by its options; ok is false when it is kept only as Raw.
func parseMember(typ, family, text string) (m Member, ok bool) {
	text = strings.TrimSpace(text)
	raw, opts := text, ""
	if i := strings.IndexAny(text, " \t"); i >= 0 {
		raw, opts = text[:i], text[i+1:]
	}
	m.Raw = raw
	if i := strings.Index(opts, `comment "`); i >= 0 {
		c := opts[i+len(`comment "`):]
		if j := strings.IndexByte(c, '"'); j >= 0 {
			c = c[:j]
		}
		m.Comment = c
	}
	kind, comps, _ := strings.Cut(typ, ":")
	parts, names := strings.Split(raw, ","), strings.Split(comps, ",")
	if raw == "" || len(parts) != len(names) || kind != "hash" && kind != "bitmap" {
		return Member{Raw: raw, Comment: m.Comment}, false
	}
	ips := 0
	for i, part := range parts {
		// member parts and type components pair up, one per comma; an
		// empty part (a trailing comma) is read, and refused, like any
		if !m.component(names[i], kind, part, &ips) {
			return Member{Raw: raw, Comment: m.Comment}, false
		}
	}
	if !m.oneFamily(family) {
		return Member{Raw: raw, Comment: m.Comment}, false
	}
	return m, true
}

// oneFamily: the member's addresses are all of one family, the set's
// ("inet", "inet6") when it has one.
func (m *Member) oneFamily(family string) bool {
	v6 := family == "inet6"
	check := family == "inet" || v6
	for _, a := range []netip.Addr{m.IP, m.IP2, m.Net.Addr()} {
		if !a.IsValid() {
			continue
		}
		if !check {
			v6, check = a.Is6(), true
		}
		if a.Is6() != v6 || a.Is4In6() {
			return false
		}
	}
	return true
}

// component reads one part of a member: an address, a [proto:]port or a
// network; ips counts the addresses read (the second is IP2).
func (m *Member) component(name, kind, part string, ips *int) bool {
	switch name {
	case "ip":
		a, err := netip.ParseAddr(part)
		if err != nil || a.Zone() != "" {
			return false
		}
		if *ips == 0 {
			m.IP = a
		} else {
			m.IP2 = a
		}
		*ips++
		return true
	case "port":
		return m.port(kind, part)
	case "net":
		if a, err := netip.ParseAddr(part); err == nil && a.Zone() == "" {
			m.Net = netip.PrefixFrom(a, a.BitLen()) // a host network is printed bare
			return true
		}
		p, err := netip.ParsePrefix(part)
		if err != nil {
			return false
		}
		m.Net = p
		return true
	}
	return false // mac, mark, iface, set: not modelled
}

// port reads bitmap:port's "30080" or a hash type's "tcp:80"; an ICMP
// type in the port's place ("icmp:echo-request") leaves HasPort false.
func (m *Member) port(kind, part string) bool {
	proto, port, hasProto := strings.Cut(part, ":")
	if !hasProto {
		port, proto = part, ""
		if kind == "hash" {
			proto = "tcp" // ipset's default, as restore input may omit it
		}
	}
	if hasProto && (proto == "" || kind == "bitmap") {
		return false
	}
	m.Proto = proto
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || port == "" || port[0] == '+' {
		if strings.Contains(proto, "icmp") && port != "" {
			return true
		}
		return false
	}
	m.Port, m.HasPort = uint16(n), true
	return true
}
