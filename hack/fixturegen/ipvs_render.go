//go:build kpipvs && !kp134

package main

// Renderers of IPVS state as the kernel and ipvsadm print it. The fixtures'
// IPVS state comes from kube-proxy's FakeIPVS (there is no IPVS in the
// generator's kernel), so these renderers are the only writers of those
// files; each follows the C format strings it cites, never a guess.

import (
	"encoding/binary"
	"fmt"
	"net"
	"sort"
	"strings"
)

// ipvsService is one virtual server with its real servers, as the kernel
// holds it after kube-proxy's netlink calls.
type ipvsService struct {
	Addr       net.IP
	Proto      string // "TCP", "UDP", "SCTP"
	Port       uint16
	Sched      string
	Persistent bool
	Timeout    uint32
	// Netmask is what kube-proxy's runner sends (pkg/proxy/ipvs/util/ipvs_linux.go
	// toIPVSService): 0xffffffff for IPv4, 128 (a prefix length) for IPv6.
	Netmask uint32
	Dests   []ipvsDest
}

type ipvsDest struct {
	Addr net.IP
	Port uint16
	// Fwd is ip_vs_fwd_name()/fwd_name(): kube-proxy's toIPVSDestination sets
	// no forwarding flags, i.e. IP_VS_CONN_F_MASQ (0): "Masq".
	Fwd          string
	Weight       int
	ActiveConn   int
	InactiveConn int
}

func (s *ipvsService) v6() bool { return s.Addr.To4() == nil }

// ipvsHeader is the first line of /proc/net/ip_vs and `ipvsadm -Ln`:
// NVERSION(IP_VS_VERSION_CODE) is 1.2.1; size is ip_vs_conn_tab_size,
// 1 << CONFIG_IP_VS_TAB_BITS (default 12).
const ipvsHeader = "IP Virtual Server version 1.2.1 (size=4096)\n"

// u32diff is `int r = ntohl(a) - ntohl(b)` in libipvs' comparators: an
// unsigned subtraction read as a signed int (it wraps for far-apart values).
func u32diff(a, b uint32) int { return int(int32(a - b)) }

func protoNum(p string) int {
	switch p {
	case "TCP":
		return 6
	case "UDP":
		return 17
	case "SCTP":
		return 132
	}
	return 0
}

// addrWords are the address's 32-bit words in host order (ntohl of
// addr.ip, or of each s6_addr32[i]).
func addrWords(ip net.IP) []uint32 {
	if v4 := ip.To4(); v4 != nil {
		return []uint32{binary.BigEndian.Uint32(v4)}
	}
	v6 := ip.To16()
	w := make([]uint32, 4)
	for i := range w {
		w[i] = binary.BigEndian.Uint32(v6[4*i:])
	}
	return w
}

func cmpAddr(a, b net.IP) int {
	wa, wb := addrWords(a), addrWords(b)
	r := 0
	for i := 0; r == 0 && i < len(wa) && i < len(wb); i++ {
		r = u32diff(wa[i], wb[i])
	}
	return r
}

// sortIPVS orders services and real servers as ipvsadm does without
// --nosort: ipvs_cmp_services (fwmark, af, protocol, address, port) and
// ipvs_cmp_dests (address, port) in libipvs/libipvs.c.
// /proc/net/ip_vs is not sorted: it walks the kernel's service hash table
// (ip_vs_svc_hashkey mixes in the netns pointer) and each service's
// destination list, so its order differs between nodes and runs; the
// fixture shows it in ipvsadm's order and readers must not rely on order.
func sortIPVS(svcs []ipvsService) {
	af := func(s *ipvsService) int {
		if s.v6() {
			return 10 // AF_INET6
		}
		return 2 // AF_INET
	}
	sort.SliceStable(svcs, func(i, j int) bool {
		a, b := &svcs[i], &svcs[j]
		if r := af(a) - af(b); r != 0 {
			return r < 0
		}
		if r := protoNum(a.Proto) - protoNum(b.Proto); r != 0 {
			return r < 0
		}
		if r := cmpAddr(a.Addr, b.Addr); r != 0 {
			return r < 0
		}
		return int(a.Port)-int(b.Port) < 0
	})
	for k := range svcs {
		d := svcs[k].Dests
		sort.SliceStable(d, func(i, j int) bool {
			if r := cmpAddr(d[i].Addr, d[j].Addr); r != 0 {
				return r < 0
			}
			return int(d[i].Port)-int(d[j].Port) < 0
		})
	}
}

// pI6 is the kernel's %pI6: eight 4-digit lower-case hex groups, no "::".
func pI6(ip net.IP) string {
	b := ip.To16()
	g := make([]string, 8)
	for i := range g {
		g[i] = fmt.Sprintf("%04x", binary.BigEndian.Uint16(b[2*i:]))
	}
	return strings.Join(g, ":")
}

// ntohl on a little-endian node (amd64, arm64): the netmask attribute is
// sent in native order by github.com/moby/ipvs (nl.Uint32Attr) and stored
// with nla_get_be32, so the kernel's ntohl(svc->netmask) swaps the bytes of
// the value kube-proxy sent.
func ntohlLE(v uint32) uint32 {
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], v)
	return binary.BigEndian.Uint32(b[:])
}

// renderProcNetIPVS prints /proc/net/ip_vs as ip_vs_info_seq_show() does
// (net/netfilter/ipvs/ip_vs_ctl.c, Linux 5.x-6.x):
//
//	"%s  %08X:%04X %s %s "   IPv4 service: proto, ntohl(addr), port, scheduler, "ops " or ""
//	"%s  [%pI6]:%04X %s "    IPv6 service
//	"persistent %d %08X\n"   with IP_VS_SVC_F_PERSISTENT: timeout, ntohl(netmask); else "\n"
//	"  -> %08X:%04X      %-7s %-6d %-10d %-10d\n"   IPv4 destination
//	"  -> [%pI6]:%04X      %-7s %-6d %-10d %-10d\n" IPv6 destination
func renderProcNetIPVS(svcs []ipvsService) string {
	var b strings.Builder
	b.WriteString(ipvsHeader)
	b.WriteString("Prot LocalAddress:Port Scheduler Flags\n")
	b.WriteString("  -> RemoteAddress:Port Forward Weight ActiveConn InActConn\n")
	for _, s := range svcs {
		if s.v6() {
			fmt.Fprintf(&b, "%s  [%s]:%04X %s ", s.Proto, pI6(s.Addr), s.Port, s.Sched)
		} else {
			fmt.Fprintf(&b, "%s  %08X:%04X %s %s ", s.Proto, addrWords(s.Addr)[0], s.Port, s.Sched, "")
		}
		if s.Persistent {
			fmt.Fprintf(&b, "persistent %d %08X\n", s.Timeout, ntohlLE(s.Netmask))
		} else {
			b.WriteString("\n")
		}
		for _, d := range s.Dests {
			if d.Addr.To4() == nil {
				fmt.Fprintf(&b, "  -> [%s]:%04X", pI6(d.Addr), d.Port)
			} else {
				fmt.Fprintf(&b, "  -> %08X:%04X", addrWords(d.Addr)[0], d.Port)
			}
			fmt.Fprintf(&b, "      %-7s %-6d %-10d %-10d\n", d.Fwd, d.Weight, d.ActiveConn, d.InactiveConn)
		}
	}
	return b.String()
}

// ipvsadmAddr is addrport_to_anyname() with FMT_NUMERIC (ipvsadm.c):
// "%s%s%s:%u" with "[" "]" around inet_ntop's IPv6 text.
func ipvsadmAddr(ip net.IP, port uint16) string {
	if ip.To4() != nil {
		return fmt.Sprintf("%s:%d", ip.To4(), port)
	}
	return fmt.Sprintf("[%s]:%d", ip, port)
}

// renderIPVSAdmList prints `ipvsadm -Ln` as ipvsadm 1.31 does (ipvsadm.c
// list_all, print_title, print_service_entry; format strings checked against
// Debian bookworm's ipvsadm 1:1.31-1 binary):
//
//	"IP Virtual Server version %d.%d.%d (size=%d)\n"
//	"Prot LocalAddress:Port Scheduler Flags\n  -> RemoteAddress:Port           Forward Weight ActiveConn InActConn\n"
//	svc_name "%-4s %s" (protocol, address:port); then "%s %s" (svc_name, scheduler)
//	" persistent %u" (+ " mask %s"/" mask %i" only for a non-host netmask)
//	"  -> %-28s %-7s %-6d %-10u %-10u\n"
func renderIPVSAdmList(svcs []ipvsService) string {
	var b strings.Builder
	b.WriteString(ipvsHeader)
	b.WriteString("Prot LocalAddress:Port Scheduler Flags\n")
	b.WriteString("  -> RemoteAddress:Port           Forward Weight ActiveConn InActConn\n")
	for _, s := range svcs {
		name := fmt.Sprintf("%-4s %s", s.Proto, ipvsadmAddr(s.Addr, s.Port))
		fmt.Fprintf(&b, "%s %s", name, s.Sched)
		if s.Persistent {
			fmt.Fprintf(&b, " persistent %d", s.Timeout)
			b.WriteString(maskSuffix(&s, " mask "))
		}
		b.WriteString("\n")
		for _, d := range s.Dests {
			fmt.Fprintf(&b, "  -> %-28s %-7s %-6d %-10d %-10d\n", ipvsadmAddr(d.Addr, d.Port), d.Fwd, d.Weight, d.ActiveConn, d.InactiveConn)
		}
	}
	return b.String()
}

// maskSuffix is printed only when the netmask is not the host mask
// (0xffffffff for IPv4, 128 for IPv6); kube-proxy always sends the host mask.
func maskSuffix(s *ipvsService, prefix string) string {
	if s.v6() {
		if s.Netmask != 128 {
			return fmt.Sprintf("%s%d", prefix, s.Netmask)
		}
		return ""
	}
	if s.Netmask != 0xffffffff {
		var m [4]byte
		binary.BigEndian.PutUint32(m[:], s.Netmask)
		return prefix + net.IP(m[:]).String()
	}
	return ""
}

// ruleProto is print_service_entry's FMT_RULE protocol switch.
func ruleProto(p string) string {
	switch p {
	case "TCP":
		return "-t"
	case "UDP":
		return "-u"
	}
	return "--sctp-service"
}

// fwdSwitch is ipvsadm's fwd_switch(): Masq -m, Local/Route -g, Tunnel -i.
func fwdSwitch(fwd string) string {
	switch fwd {
	case "Masq":
		return "-m"
	case "Tunnel":
		return "-i"
	}
	return "-g"
}

// renderIPVSAdmSave prints `ipvsadm -Sn` (FMT_RULE: no header, no title):
//
//	"-A %s -s %s" (svc_name "%s %s": -t/-u/--sctp-service, address:port; scheduler)
//	" -p %u" when persistent (+ " -M …" for a non-host netmask), "\n"
//	"-a %s -r %s %s -w %d\n" (svc_name, address:port, fwd_switch, weight)
func renderIPVSAdmSave(svcs []ipvsService) string {
	var b strings.Builder
	for _, s := range svcs {
		name := fmt.Sprintf("%s %s", ruleProto(s.Proto), ipvsadmAddr(s.Addr, s.Port))
		fmt.Fprintf(&b, "-A %s -s %s", name, s.Sched)
		if s.Persistent {
			fmt.Fprintf(&b, " -p %d", s.Timeout)
			b.WriteString(maskSuffix(&s, " -M "))
		}
		b.WriteString("\n")
		for _, d := range s.Dests {
			fmt.Fprintf(&b, "-a %s -r %s %s -w %d\n", name, ipvsadmAddr(d.Addr, d.Port), fwdSwitch(d.Fwd), d.Weight)
		}
	}
	return b.String()
}

// canonicalIPVS puts services and real servers in a total order (family,
// protocol, address bytes, port), the input sortIPVS then reorders as
// ipvsadm does.
func canonicalIPVS(svcs []ipvsService) {
	key := func(ip net.IP, port uint16) string {
		return fmt.Sprintf("%x/%05d", ip.To16(), port)
	}
	sort.Slice(svcs, func(i, j int) bool {
		a, b := &svcs[i], &svcs[j]
		if a.v6() != b.v6() {
			return !a.v6()
		}
		if a.Proto != b.Proto {
			return a.Proto < b.Proto
		}
		return key(a.Addr, a.Port) < key(b.Addr, b.Port)
	})
	for k := range svcs {
		d := svcs[k].Dests
		sort.Slice(d, func(i, j int) bool { return key(d[i].Addr, d[i].Port) < key(d[j].Addr, d[j].Port) })
	}
}
