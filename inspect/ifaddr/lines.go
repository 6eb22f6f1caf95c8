package ifaddr

import (
	"net/netip"
	"strings"

	"github.com/proxyrules/kubectl-proxyrules/inspect/internal/scan"
)

// header is an `ip addr` link line: "3: kube-ipvs0: <BROADCAST,NOARP> mtu
// 1500 qdisc noop state DOWN group default qlen 1000".
type header struct {
	index, name string // name as printed, "@peer" included
	flags       []string
	state       string
	link        bool // ip link's line ("mode DEFAULT"): no addresses follow
}

// parseHeader reads a header line; ok is false when l is none.
func parseHeader(l string) (h header, ok bool) {
	idx, rest, ok := strings.Cut(l, ": ")
	if !ok || !isDigits(idx) {
		return h, false
	}
	name, rest, ok := strings.Cut(rest, ": <")
	if !ok || name == "" || strings.ContainsAny(name, " \t") {
		return h, false
	}
	flags, rest, ok := strings.Cut(rest, ">")
	if !ok || rest != "" && rest[0] != ' ' || strings.ContainsAny(flags, " \t<") {
		return h, false
	}
	h = header{index: idx, name: name}
	if flags != "" {
		h.flags = strings.Split(flags, ",")
	}
	f := strings.Fields(rest)
	for i, w := range f {
		switch {
		case w == "state" && i+1 < len(f):
			h.state = f[i+1]
		case w == "mode", w == `\`: // ip link, ip -o link
			h.link = true
		}
	}
	return h, true
}

// oneline reads an `ip -o addr` line: "3: kube-ipvs0    inet 10.96.0.1/32
// scope global kube-ipvs0\       valid_lft forever preferred_lft forever".
func oneline(f []string) (index, name string, p netip.Prefix, ok bool) {
	if len(f) < 4 || !strings.HasSuffix(f[0], ":") || !isDigits(f[0][:len(f[0])-1]) {
		return "", "", p, false
	}
	p, ok = addrOf(f[2:])
	return f[0], f[1], p, ok
}

// addrOf reads "inet 10.96.0.1/32 …", "inet6 fd00::b/128 …" or "inet
// 10.0.0.1 peer 10.0.0.2/32 …" (the local address, the peer's length).
func addrOf(f []string) (netip.Prefix, bool) {
	if len(f) < 2 || f[0] != "inet" && f[0] != "inet6" {
		return netip.Prefix{}, false
	}
	p, err := netip.ParsePrefix(f[1])
	if err != nil {
		a, err := netip.ParseAddr(f[1])
		if err != nil {
			return netip.Prefix{}, false
		}
		bits := a.BitLen()
		if len(f) > 3 && f[2] == "peer" {
			if pp, err := netip.ParsePrefix(f[3]); err == nil {
				bits = pp.Bits()
			}
		}
		p = netip.PrefixFrom(a, bits)
	}
	if !p.IsValid() || p.Addr().Zone() != "" || p.Addr().Is4() != (f[0] == "inet") || p.Addr().Is4In6() {
		return netip.Prefix{}, false
	}
	return p, true
}

var operStates = map[string]bool{"UP": true, "DOWN": true, "UNKNOWN": true, "LOWERLAYERDOWN": true, "DORMANT": true, "NOTPRESENT": true, "TESTING": true}

// brief reads an `ip -br addr` line: "kube-ipvs0 DOWN 10.96.0.1/32 …".
func brief(f []string) (name, state string, addrs []netip.Prefix, ok bool) {
	if len(f) < 2 || !operStates[f[1]] || !isName(f[0]) {
		return "", "", nil, false
	}
	for _, w := range f[2:] {
		p, err := netip.ParsePrefix(w)
		if err != nil || p.Addr().Zone() != "" || p.Addr().Is4In6() {
			return "", "", nil, false
		}
		addrs = append(addrs, p)
	}
	return f[0], f[1], addrs, true
}

// isName: a link name as ip prints it (at most 15 bytes, "@peer" after).
func isName(s string) bool {
	base := baseName(s)
	return base != "" && len(base) <= 15 && !strings.ContainsAny(s, "/:,<>=\"'")
}

// baseName is a printed name without its "@peer".
func baseName(s string) string {
	b, _, _ := strings.Cut(s, "@")
	return b
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// isCommand is the pasted command that printed a listing: "ip addr show
// kube-ipvs0", "[root@node-a ~]# ip -br a", "$ sudo ip -o addr".
func isCommand(l string) bool {
	f := strings.Fields(l)
	for i, w := range f {
		if w != "ip" && !strings.HasSuffix(w, "/ip") {
			continue
		}
		if i > 0 && f[i-1] != "sudo" && !scan.IsPrompt(f[i-1]) {
			return false
		}
		for _, o := range f[i+1:] {
			if strings.HasPrefix(o, "-") {
				continue
			}
			return o == "a" || o == "ad" || o == "addr" || o == "address"
		}
		return false
	}
	return false
}

// IsLine says whether one line (spaces and a paste's prompt trimmed or
// not) is one only `ip addr` prints: a link's header line ("N: name:
// <FLAGS> …", not ip link's, which has "mode"), a line of -o ("N: name
// inet ADDR/LEN …") or of -br (a name, an operational state, prefixes), or
// the command that printed one.
func IsLine(line string) bool {
	l := scan.TrimPasted(line)
	if h, ok := parseHeader(l); ok {
		return !h.link
	}
	f := strings.Fields(l)
	if _, _, _, ok := oneline(f); ok {
		return true
	}
	if _, _, _, ok := brief(f); ok {
		return true
	}
	return isCommand(l)
}
