package evaluate

import (
	"net/netip"
	"strconv"
	"strings"
)

// fieldType is the type of what a selector reads, which decides how a
// literal compared with it is read.
type fieldType uint8

const (
	tUnknown fieldType = iota
	tAddr
	tPort
	tNum // marks, random bits, numbers of other kinds
	tProto
	tIface
	tCTState
	tCTStatus
	tFibType
	tNfproto
	tPkttype
	tCTDir
)

// value is what a selector read from the packet.
type value struct {
	t    fieldType
	addr netip.Addr
	num  uint64
	str  string
}

var protoNumbers = map[string]uint64{
	"icmp": 1, "igmp": 2, "tcp": 6, "udp": 17, "dccp": 33, "ipv6": 41, "gre": 47, "esp": 50, "ah": 51,
	"icmpv6": 58, "ipv6-icmp": 58, "sctp": 132, "udplite": 136,
}

// protoNumber reads a protocol by name or number.
func protoNumber(s string) (uint64, bool) {
	switch s { // what kube-proxy writes, without a map lookup: every rule names one
	case "tcp":
		return 6, true
	case "udp":
		return 17, true
	case "sctp":
		return 132, true
	}
	s = strings.ToLower(s)
	if n, ok := protoNumbers[s]; ok {
		return n, true
	}
	n, err := strconv.ParseUint(s, 10, 8)
	return n, err == nil
}

// ctState bits (include/uapi/linux/netfilter/nf_conntrack_common.h:
// NF_CT_STATE_BIT, and nft's ct state names).
const (
	ctInvalid     = 1 << 0
	ctEstablished = 1 << 1
	ctRelated     = 1 << 2
	ctNew         = 1 << 3
	ctUntracked   = 1 << 6
)

var ctStateBits = map[string]uint64{
	"invalid": ctInvalid, "established": ctEstablished, "related": ctRelated, "new": ctNew, "untracked": ctUntracked,
}

// ct status bits (enum ip_conntrack_status).
const (
	ctsExpected  = 1 << 0
	ctsSeenReply = 1 << 1
	ctsAssured   = 1 << 2
	ctsConfirmed = 1 << 3
	ctsSNAT      = 1 << 4
	ctsDNAT      = 1 << 5
	ctsDying     = 1 << 9
)

var ctStatusBits = map[string]uint64{
	"expected": ctsExpected, "seen-reply": ctsSeenReply, "assured": ctsAssured, "confirmed": ctsConfirmed,
	"snat": ctsSNAT, "dnat": ctsDNAT, "dying": ctsDying,
}

// parseUint reads a decimal or 0x hexadecimal number.
func parseUint(s string) (uint64, bool) {
	v, err := strconv.ParseUint(s, 0, 64)
	if err != nil {
		return 0, false
	}
	return v, true
}

// matchLiteral compares v with one literal of its type: an address, a
// prefix or a range of addresses; a number or a range; a name. ok is false
// when the literal cannot be read as that type (the match is then not
// evaluated).
func matchLiteral(v value, lit string) (match, ok bool) {
	switch v.t {
	case tAddr:
		return addrMatches(v.addr, lit)
	case tPort, tNum:
		if lo, hi, isRange := strings.Cut(lit, "-"); isRange {
			a, ok1 := parseUint(lo)
			b, ok2 := parseUint(hi)
			return v.num >= a && v.num <= b, ok1 && ok2
		}
		n, ok := parseUint(lit)
		return v.num == n, ok
	case tProto:
		n, ok := protoNumber(lit)
		return v.num == n, ok
	case tIface:
		if prefix, wild := strings.CutSuffix(lit, "*"); wild {
			return strings.HasPrefix(v.str, prefix), true
		}
		return v.str == lit, true
	case tCTState:
		bit, ok := ctStateBits[strings.ToLower(lit)]
		return v.num&bit != 0, ok
	case tCTStatus:
		bit, ok := ctStatusBits[strings.ToLower(lit)]
		return v.num&bit != 0, ok
	case tFibType, tPkttype, tNfproto, tCTDir:
		return strings.EqualFold(v.str, lit), true
	}
	return false, false
}

// addrMatches compares an address with an address, a prefix or a range
// ("a-b") as nft and iptables print them.
func addrMatches(a netip.Addr, lit string) (match, ok bool) {
	if lo, hi, isRange := strings.Cut(lit, "-"); isRange {
		l, err1 := netip.ParseAddr(lo)
		h, err2 := netip.ParseAddr(hi)
		if err1 != nil || err2 != nil {
			return false, false
		}
		return a.Is4() == l.Is4() && a.Compare(l) >= 0 && a.Compare(h) <= 0, true
	}
	if strings.Contains(lit, "/") {
		p, err := parsePrefix(lit)
		if err != nil {
			return false, false
		}
		return p.Contains(a), true
	}
	b, err := netip.ParseAddr(lit)
	if err != nil {
		return false, false
	}
	return a.Unmap() == b.Unmap(), true
}

// parsePrefix reads a prefix, also with iptables' dotted mask
// (10.0.0.0/255.0.0.0).
func parsePrefix(s string) (netip.Prefix, error) {
	if addr, mask, ok := strings.Cut(s, "/"); ok && strings.Contains(mask, ".") {
		m, err := netip.ParseAddr(mask)
		if err != nil {
			return netip.Prefix{}, err
		}
		bits := 0
		for _, b := range m.AsSlice() {
			for b&0x80 != 0 {
				bits++
				b <<= 1
			}
		}
		a, err := netip.ParseAddr(addr)
		if err != nil {
			return netip.Prefix{}, err
		}
		return a.Prefix(bits)
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return p, err
	}
	return p.Masked(), nil
}

// ifaceMatches is iptables' -i/-o: a trailing '+' matches any suffix.
func ifaceMatches(iface, pattern string) bool {
	if prefix, ok := strings.CutSuffix(pattern, "+"); ok {
		return strings.HasPrefix(iface, prefix)
	}
	return iface == pattern
}

// portInRange reads iptables' "80", "80:90", ":90", "80:" and nft's
// "80-90".
func portInRange(port uint16, spec string) (match, ok bool) {
	lo, hi, isRange := strings.Cut(spec, ":")
	if !isRange {
		lo, hi, isRange = strings.Cut(spec, "-")
	}
	if !isRange {
		n, ok := parsePort(spec)
		return n == port, ok
	}
	a, b := uint16(0), uint16(65535)
	var ok1, ok2 = true, true
	if lo != "" {
		a, ok1 = parsePort(lo)
	}
	if hi != "" {
		b, ok2 = parsePort(hi)
	}
	return port >= a && port <= b, ok1 && ok2
}

var serviceNames = map[string]uint16{
	"http": 80, "https": 443, "domain": 53, "ssh": 22, "smtp": 25, "ntp": 123, "snmp": 161, "syslog": 514,
}

func parsePort(s string) (uint16, bool) {
	if n, err := strconv.ParseUint(s, 10, 16); err == nil {
		return uint16(n), true
	}
	n, ok := serviceNames[strings.ToLower(s)]
	return n, ok
}

// isLoopback: 127.0.0.0/8 and ::1.
func isLoopback(a netip.Addr) bool { return a.Unmap().IsLoopback() }
