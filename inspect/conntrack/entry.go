package conntrack

import (
	"bytes"
	"net/netip"
	"unsafe"
)

// entryParser reads one entry line. The layout (the kernel's
// ct_seq_show, net/netfilter/nf_conntrack_standalone.c, and conntrack's
// printer, which copies it):
//
//	[ipv4 2 | ipv6 10] PROTO NUM TIMEOUT [STATE] src= dst= sport= dport= [packets= bytes=] [UNREPLIED]
//	    src= dst= sport= dport= [packets= bytes=] [ASSURED] mark= [secctx=] [zone=] use= [id=]
//
// ICMP tuples have type= code= id= in place of the ports. Unknown key=value
// words (labels=, delta-time=, zone-orig=, ...) are passed over.
type entryParser struct {
	f        [][]byte
	prefixed bool // the line had the l3 prefix
	zoneSeen bool
}

// parse fills e from line; it returns "" or why the line is no entry.
func (p *entryParser) parse(e *Entry, line []byte) string {
	*e = Entry{}
	p.f = fields(p.f, line)
	f := p.f
	p.prefixed, p.zoneSeen = false, false
	if len(f) >= 2 && (bytes.Equal(f[0], []byte("ipv4")) || bytes.Equal(f[0], []byte("ipv6"))) {
		e.Family = 4
		if f[0][3] == '6' {
			e.Family = 6
		}
		if n, ok := atou(f[1], 255); !ok || (n != 2 && n != 10) {
			return "bad l3 protocol number"
		}
		p.prefixed = true
		f = f[2:]
	}
	if len(f) < 3 {
		return "too few words"
	}
	num, ok := atou(f[1], 255)
	if !ok {
		return "no protocol number"
	}
	e.ProtoNo = uint8(num)
	e.Proto = protoName(f[0], e.ProtoNo)
	if e.Proto == "" {
		return "no protocol name"
	}
	to, ok := atou(f[2], 1<<32-1)
	if !ok {
		return "no timeout"
	}
	e.Timeout = uint32(to)
	f = f[3:]
	if len(f) > 0 && isState(f[0]) {
		e.State = stateName(f[0])
		f = f[1:]
	}
	return p.words(e, f)
}

// words reads the tuples, flags and the entry's own keys.
func (p *entryParser) words(e *Entry, f [][]byte) string {
	dir := 0 // 0 original, 1 reply, 2 after the tuples
	var have [2]uint8
	t := &e.Orig
	inBracket := false // -o timestamp's "[start=Sat Dec  5 05:01:20 2026]" holds spaces
	for _, w := range f {
		if inBracket {
			inBracket = w[len(w)-1] != ']'
			continue
		}
		if w[0] == '[' {
			e.Flags |= flagOf(w)
			inBracket = w[len(w)-1] != ']'
			continue
		}
		eq := bytes.IndexByte(w, '=')
		if eq <= 0 {
			return "a word that is no key=value"
		}
		k, v := w[:eq], w[eq+1:]
		if dir < 2 && bytes.Equal(k, []byte("src")) && have[dir]&1 != 0 {
			if dir == 1 {
				return "a third tuple"
			}
			dir, t = 1, &e.Reply
		}
		var ok bool
		switch string(k) {
		case "src", "dst":
			if dir == 2 {
				return "an address after the tuples"
			}
			var a netip.Addr
			if a, ok = parseAddr(v); ok {
				if k[0] == 's' {
					t.Src, have[dir] = a, have[dir]|1
				} else {
					t.Dst, have[dir] = a, have[dir]|2
				}
			}
		case "sport", "dport", "type", "code", "packets", "bytes":
			ok = dir < 2 && p.tupleNumber(t, k, v)
		case "id":
			if dir < 2 {
				var n uint64
				n, ok = atou(v, 1<<16-1)
				t.ICMPID = uint16(n)
			} else {
				var n uint64
				n, ok = atou(v, 1<<32-1)
				e.ID = uint32(n)
			}
		case "mark", "zone", "use":
			dir, ok = 2, p.entryNumber(e, k, v)
		default:
			ok = true // a key this reader does not keep
		}
		if !ok {
			return "bad " + string(k) + "="
		}
	}
	return p.check(e, have)
}

func (p *entryParser) tupleNumber(t *Tuple, k, v []byte) bool {
	switch string(k) {
	case "sport", "dport":
		n, ok := atou(v, 1<<16-1)
		if k[0] == 's' {
			t.SPort = uint16(n)
		} else {
			t.DPort = uint16(n)
		}
		return ok
	case "type", "code":
		n, ok := atou(v, 255)
		if k[0] == 't' {
			t.Type = uint8(n)
		} else {
			t.Code = uint8(n)
		}
		return ok
	}
	n, ok := atou(v, 1<<64-1)
	if k[0] == 'p' {
		t.Packets = n
	} else {
		t.Bytes = n
	}
	t.HasCounters = true
	return ok
}

func (p *entryParser) entryNumber(e *Entry, k, v []byte) bool {
	switch string(k) {
	case "mark":
		n, ok := atou(v, 1<<32-1)
		e.Mark = uint32(n)
		return ok
	case "zone":
		n, ok := atou(v, 1<<16-1)
		e.Zone = uint16(n)
		p.zoneSeen = true
		return ok
	}
	n, ok := atou(v, 1<<32-1)
	e.Use = uint32(n)
	return ok
}

// check holds an entry to what every form prints: both tuples' addresses,
// of one family, the l3 prefix's if there is one.
func (p *entryParser) check(e *Entry, have [2]uint8) string {
	if have[0] != 3 || have[1] != 3 {
		return "a tuple without src= and dst="
	}
	fam := uint8(4)
	if e.Orig.Src.Is6() {
		fam = 6
	}
	if e.Family != 0 && e.Family != fam {
		return "addresses of the other family"
	}
	e.Family = fam
	for _, a := range [...]netip.Addr{e.Orig.Dst, e.Reply.Src, e.Reply.Dst} {
		if a.Is6() != (fam == 6) {
			return "addresses of two families"
		}
	}
	return ""
}

func flagOf(w []byte) Flags {
	switch string(w) {
	case "[UNREPLIED]":
		return FlagUnreplied
	case "[ASSURED]":
		return FlagAssured
	case "[OFFLOAD]":
		return FlagOffload
	case "[HW_OFFLOAD]":
		return FlagHWOffload
	}
	if bytes.IndexByte(w, '=') >= 0 {
		return 0 // [start=...] and other timestamps
	}
	return FlagUnknown
}

// protoName interns the names the kernel prints (no allocation per line);
// another name is kept as printed.
func protoName(b []byte, num uint8) string {
	switch string(b) {
	case "tcp":
		return "tcp"
	case "udp":
		return "udp"
	case "udplite":
		return "udplite"
	case "sctp":
		return "sctp"
	case "dccp":
		return "dccp"
	case "icmp":
		return "icmp"
	case "icmpv6":
		return "icmpv6"
	case "gre":
		return "gre"
	case "unknown":
		return "unknown"
	}
	for _, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return ""
		}
	}
	return string(b)
}

// isState is an upper-case word: TCP's ESTABLISHED, SYN_SENT, SCTP's
// COOKIE_WAIT, DCCP's RESPOND...
func isState(b []byte) bool {
	if len(b) == 0 || b[0] < 'A' || b[0] > 'Z' {
		return false
	}
	for _, c := range b {
		if !(c >= 'A' && c <= 'Z' || c == '_' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

var knownStates = []string{"NONE", "SYN_SENT", "SYN_RECV", "ESTABLISHED", "FIN_WAIT", "CLOSE_WAIT", "LAST_ACK",
	"TIME_WAIT", "CLOSE", "SYN_SENT2", "LISTEN", "CLOSED", "COOKIE_WAIT", "COOKIE_ECHOED", "SHUTDOWN_SENT",
	"SHUTDOWN_RECD", "SHUTDOWN_ACK_SENT", "HEARTBEAT_SENT", "HEARTBEAT_ACKED", "REQUEST", "RESPOND",
	"PARTOPEN", "OPEN", "CLOSEREQ", "CLOSING", "TIMEWAIT", "IGNORE", "INVALID"}

func stateName(b []byte) string {
	for _, s := range knownStates {
		if string(b) == s {
			return s
		}
	}
	return string(b)
}

// atou reads a decimal number up to max.
func atou(b []byte, max uint64) (uint64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if n > (max-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

// parseAddr reads an address without copying it: IPv4 by hand (most of a
// table), IPv6 (also /proc's fully expanded form) by netip, which keeps no
// part of the text of an address with no zone.
func parseAddr(b []byte) (netip.Addr, bool) {
	if a, ok := parseIPv4(b); ok {
		return a, true
	}
	if len(b) < 2 || len(b) > 64 || bytes.IndexByte(b, ':') < 0 || bytes.IndexByte(b, '%') >= 0 {
		return netip.Addr{}, false
	}
	a, err := netip.ParseAddr(unsafe.String(&b[0], len(b)))
	if err != nil || !a.Is6() {
		return netip.Addr{}, false
	}
	return a, true
}

func parseIPv4(b []byte) (netip.Addr, bool) {
	var ip [4]byte
	i := 0
	for k := 0; k < 4; k++ {
		if k > 0 {
			if i >= len(b) || b[i] != '.' {
				return netip.Addr{}, false
			}
			i++
		}
		start, n := i, 0
		for i < len(b) && b[i] >= '0' && b[i] <= '9' && i-start < 3 {
			n = n*10 + int(b[i]-'0')
			i++
		}
		if i == start || n > 255 || (i-start > 1 && b[start] == '0') {
			return netip.Addr{}, false
		}
		ip[k] = byte(n)
	}
	if i != len(b) {
		return netip.Addr{}, false
	}
	return netip.AddrFrom4(ip), true
}
