package ipvs

import (
	"encoding/binary"
	"math/bits"
	"net/netip"
	"strconv"
	"strings"
)

// errName is the reason for a line whose address is a host or port name.
const errName = "a host or port name, not a number"

// serviceLine reads a service line of /proc/net/ip_vs or ipvsadm -Ln
// (--stats, --rate): "TCP  0A600001:01BB rr persistent 10800 FFFFFFFF",
// "TCP  10.96.0.1:443 rr persistent 10800", "FWM  1 IPv6 rr", "TCP
// 10.3.0.42:80  14209  111769  74613  7207174  8334358".
func (p *parser) serviceLine(f []string) string {
	if len(f) < 3 {
		return "too few fields"
	}
	s := Service{Protocol: Protocol(f[0]), PersistBits: maskUnset}
	hex := false
	rest := f[2:]
	if s.Protocol == ProtoFWMark {
		hex = p.hdr == hdrProc || p.hdr == hdrNone && len(f[1]) == 8
		base := 10
		if hex {
			base = 16
		}
		mark, err := strconv.ParseUint(f[1], base, 32)
		if err != nil || mark == 0 {
			return "bad firewall mark"
		}
		s.FWMark, s.Family = uint32(mark), 4
		if rest[0] == "IPv6" {
			s.Family, rest = 6, rest[1:]
		}
	} else {
		ap, isHex, why := p.parseAddrPort(f[1])
		if why != "" {
			return why
		}
		s.Addr, hex, s.Family = ap, isHex, family(ap.Addr())
	}
	if len(rest) == 0 {
		return "no scheduler"
	}
	if c, ok := p.counters(rest); ok {
		s.Counters = c
		p.noteForm(false, c)
	} else {
		if why := s.readFlags(rest, hex); why != "" {
			return why
		}
		p.noteForm(hex, nil)
	}
	s.settleMask()
	p.addService(s)
	return ""
}

// readFlags reads the scheduler and the flags after it.
func (s *Service) readFlags(rest []string, hex bool) string {
	s.Scheduler = rest[0]
	for i := 1; i < len(rest); i++ {
		switch rest[i] {
		case "persistent":
			if i+1 >= len(rest) {
				return "persistent without a timeout"
			}
			t, err := strconv.ParseUint(rest[i+1], 10, 32)
			if err != nil {
				return "bad persistence timeout"
			}
			s.Flags |= FlagPersistent
			s.Timeout = uint32(t)
			i++
			if hex && i+1 < len(rest) {
				// the kernel prints the netmask after the timeout
				m, err := strconv.ParseUint(rest[i+1], 16, 32)
				if err != nil {
					return "bad persistence netmask"
				}
				s.PersistBits = procMaskBits(uint32(m), s.Family)
				i++
			}
		case "mask":
			if i+1 >= len(rest) {
				return "mask without a value"
			}
			s.PersistBits = maskBits(rest[i+1])
			i++
		case "ops":
			s.Flags |= FlagOnePacket
		case "pe":
			if i+1 < len(rest) {
				s.Extra = append(s.Extra, "pe "+rest[i+1])
				i++
			}
		default:
			s.Extra = append(s.Extra, rest[i])
		}
	}
	return ""
}

// realServerLine reads "-> 0AF40102:1F90      Masq    1      0          0",
// "-> 10.244.1.2:8443   Masq    1      0          0" or, with --stats or
// --rate, "-> 10.2.1.22:80   2   12   8   774   894".
func (p *parser) realServerLine(f []string) string {
	if len(f) < 3 {
		return "too few fields"
	}
	ap, hex, why := p.parseAddrPort(f[1])
	if why != "" {
		return why
	}
	rs := RealServer{Addr: ap, ActiveConn: -1, InActConn: -1}
	if c, ok := p.counters(f[2:]); ok {
		rs.Counters = c
	} else {
		if len(f) != 6 {
			return "want forward, weight, ActiveConn, InActConn"
		}
		w, err1 := strconv.ParseInt(f[3], 10, 32)
		a, err2 := strconv.ParseInt(f[4], 10, 64)
		in, err3 := strconv.ParseInt(f[5], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil || !isWord(f[2]) {
			return "bad forward, weight or connection counts"
		}
		rs.Forward, rs.Weight, rs.ActiveConn, rs.InActConn = Forward(f[2]), int32(w), a, in
	}
	why = p.addRealServer(rs, -1)
	if why == "" {
		p.noteForm(hex, rs.Counters)
	}
	return why
}

// parseAddrPort reads an address and port in the kernel's hex
// ("0A600001:01BB", "[fd00:0000:…:000a]:01BB") or ipvsadm's numeric form
// ("10.96.0.1:443", "[fd00::a]:443"); hex says which.
func (p *parser) parseAddrPort(s string) (ap netip.AddrPort, hex bool, why string) {
	host, port, ok := cutPort(s)
	if !ok {
		if strings.ContainsAny(s, "ghijklmnopqrstuvwxyz") {
			return ap, false, errName
		}
		return ap, false, "no address:port"
	}
	var addr netip.Addr
	switch {
	case strings.HasPrefix(host, "["):
		inner := strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
		a, err := netip.ParseAddr(inner)
		if err != nil || !a.Is6() || a.Zone() != "" {
			return ap, false, "bad IPv6 address"
		}
		addr = a
		// The kernel prints IPv6 in full (%pI6) and its port in hex;
		// ipvsadm shortens the address (inet_ntop) and prints the port in
		// decimal. A header says which when the address cannot.
		hex = p.hdr == hdrProc || p.hdr == hdrNone && fullIPv6(inner)
	case len(host) == 8 && isHex(host):
		v, _ := strconv.ParseUint(host, 16, 32)
		addr = netip.AddrFrom4([4]byte(binary.BigEndian.AppendUint32(nil, uint32(v))))
		hex = true
	default:
		a, err := netip.ParseAddr(host)
		switch {
		case err == nil && a.Is4():
			addr = a
		case err == nil || !strings.ContainsAny(host, "ghijklmnopqrstuvwxyz"):
			return ap, false, "bad address" // IPv6 without brackets, or garbage
		default:
			return ap, false, errName
		}
	}
	base := 10
	if hex {
		base = 16
	}
	n, err := strconv.ParseUint(port, base, 16)
	if err != nil {
		if !hex && !isDigits(port) {
			return ap, false, errName
		}
		return ap, false, "bad port"
	}
	return netip.AddrPortFrom(addr, uint16(n)), hex, ""
}

func cutPort(s string) (host, port string, ok bool) {
	i := strings.LastIndexByte(s, ':')
	if i <= 0 || i == len(s)-1 {
		return "", "", false
	}
	host, port = s[:i], s[i+1:]
	if strings.HasPrefix(host, "[") != strings.HasSuffix(host, "]") {
		return "", "", false
	}
	return host, port, true
}

// fullIPv6 is an address as %pI6 prints it: eight groups of four digits.
func fullIPv6(s string) bool {
	groups := strings.Split(s, ":")
	if len(groups) != 8 {
		return false
	}
	for _, g := range groups {
		if len(g) != 4 {
			return false
		}
	}
	return true
}

// procMaskBits reads the kernel's persistence netmask. IPv4: the mask in
// host order. IPv6: the prefix length, stored as sent over netlink and
// printed through ntohl, so byte-swapped on a little-endian node.
func procMaskBits(m uint32, fam uint8) int {
	if fam == 6 {
		if m > 128 {
			m = bits.ReverseBytes32(m)
		}
		if m > 128 {
			return -1
		}
		return int(m)
	}
	return prefixLen(m)
}

// maskBits reads ipvsadm's "mask 255.255.255.0" (IPv4) or "mask 64" (IPv6).
func maskBits(s string) int {
	if n, err := strconv.ParseUint(s, 10, 8); err == nil && n <= 128 {
		return int(n)
	}
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is4() {
		return -1
	}
	return prefixLen(binary.BigEndian.Uint32(a.AsSlice()))
}

func prefixLen(m uint32) int {
	n := bits.LeadingZeros32(^m)
	if m<<n != 0 {
		return -1 // not a prefix
	}
	return n
}

// maskUnset marks a persistence netmask the line did not show.
const maskUnset = -2

// settleMask sets the persistence netmask a line did not show: the
// host's (ipvsadm leaves out the default), 0 without persistence.
func (s *Service) settleMask() {
	switch {
	case s.Flags&FlagPersistent == 0:
		s.PersistBits = 0
	case s.PersistBits == maskUnset:
		s.PersistBits = hostBits(s.Family)
	}
}

func hostBits(fam uint8) int {
	if fam == 6 {
		return 128
	}
	return 32
}

func family(a netip.Addr) uint8 {
	if a.Is6() {
		return 6
	}
	return 4
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return s != ""
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

func isWord(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
			return false
		}
	}
	return s != ""
}
