package ipvs

import "strings"

// IsIPVSLine says whether one line (spaces and a paste's prompt trimmed by
// the caller or not) is a line only an IPVS listing prints: a header of
// the kernel or ipvsadm, a service or real server line, an -Sn line, or
// the command that lists one. Input detection asks it before the iptables
// forms, whose "-A " an ipvsadm -Sn line also starts with.
func IsIPVSLine(line string) bool {
	l := string(trimPasted([]byte(line)))
	if l == "" {
		return false
	}
	switch {
	case strings.HasPrefix(l, "IP Virtual Server version "), strings.HasPrefix(l, "Prot LocalAddress:Port"),
		strings.HasPrefix(l, "-> RemoteAddress:Port"):
		return true
	case strings.HasPrefix(l, "-A -"), strings.HasPrefix(l, "-a -"):
		// an iptables chain name never starts with "-"
		f := strings.Fields(l)
		return len(f) > 2 && (f[1] == "-t" || f[1] == "-u" || f[1] == "-f" || f[1] == "--tcp-service" ||
			f[1] == "--udp-service" || f[1] == "--sctp-service" || f[1] == "--fwmark-service")
	case strings.Contains(l, "ipvsadm") || strings.Contains(l, "/proc/net/ip_vs"):
		return isCommandLine([]byte(l))
	}
	f := strings.Fields(l)
	if len(f) < 3 {
		return false
	}
	p := parser{t: &Table{}, lim: DefaultLimits(), cur: -1, saved: map[string]int{}}
	switch f[0] {
	case "TCP", "UDP", "SCTP":
		_, _, why := p.parseAddrPort(f[1])
		// a name (ipvsadm -L without -n) still has its ":port"
		return why == "" || why == errName && strings.Contains(f[1], ":")
	case "FWM":
		return isDigits(f[1]) || isHex(f[1])
	}
	return false
}
