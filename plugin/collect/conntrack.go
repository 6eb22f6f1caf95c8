package collect

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/inspect/conntrack"
)

// The kernel's connection tracking state, read with what the kube-proxy
// image has (grep, wc, cat; no conntrack binary since v1.37's base image,
// no head, no sed): the sysctls Services depend on, the per-CPU counters
// twice for rates, and the table filtered on the node to the entries that
// mention a Service address or a NodePort, capped in entries there.

// Kinds of the files these commands write.
const (
	KindConntrack      = "conntrack"       // /proc/net/nf_conntrack, filtered and capped
	KindConntrackStats = "conntrack-stats" // /proc/net/stat/nf_conntrack
	KindSysctls        = "sysctls"         // grep -H . over conntrack.SysctlNames' files
)

const (
	conntrackProc      = "/proc/net/nf_conntrack"
	conntrackStatsProc = "/proc/net/stat/nf_conntrack"
	// MaxConntrackEntries is the most entry lines grep -m sends from a
	// node. A /proc line is at most some 600 bytes (IPv6 in full, with
	// accounting, mark, zone and labels), so this also bounds the bytes:
	// under maxConntrackLine each, the output cap of the kind.
	MaxConntrackEntries = 50_000
	maxConntrackLine    = 1 << 10
	// maxPatternBytes bounds the patterns of the one grep, quoted, well
	// inside MaxScriptBytes: more addresses are matched by prefixes.
	maxPatternBytes = 16 << 10
	// conntrackStatsInterval is the least time between the two reads of
	// the counters; reading the rules usually takes longer.
	conntrackStatsInterval = 3 * time.Second
)

// Conntrack IDs of the commands, and so their files' names.
const (
	idSysctls     = "sysctls"
	idStatsBefore = "conntrack-stats-before"
	idStatsAfter  = "conntrack-stats-after"
	idTable       = "conntrack"
)

// ConntrackRead is what a bundle's manifest says of the conntrack read.
type ConntrackRead struct {
	// Filter is how the table was filtered on the node: "exact" (whole
	// Service addresses and dport=NodePort words), "prefix" (their
	// prefixes: too many to list), or "none" (every entry).
	Filter   string `json:"filter"`
	Patterns int    `json:"patterns"`
	// MaxEntries is grep -m's cap; Kept the entry lines sent; Capped that
	// the cap was reached (more matching entries may have been left out).
	MaxEntries int   `json:"maxEntries"`
	Kept       int64 `json:"kept"`
	Capped     bool  `json:"capped,omitempty"`
	// Total is the whole table's entries on the node (its
	// nf_conntrack_count, read with the table), -1 when unread.
	Total int64 `json:"total"`
	// Stats are the counter files, in the order read, with when.
	Stats []ConntrackStatsRead `json:"stats,omitempty"`
	// Skipped: the exec of these reads failed or was refused (a warning
	// says why); nothing of the above was read.
	Skipped bool `json:"skipped,omitempty"`
}

// ConntrackStatsRead is one read of /proc/net/stat/nf_conntrack.
type ConntrackStatsRead struct {
	Path string    `json:"path"`
	At   time.Time `json:"at"`
}

// SysctlsCommand reads the sysctls Services depend on; a file the kernel
// lacks (net/bridge/ without br_netfilter) makes grep exit 2, no failure.
func SysctlsCommand() NodeCommand {
	return NodeCommand{ID: idSysctls, Program: "grep", Argv: conntrack.BundleCommand(), Kind: KindSysctls, Optional: true}
}

// ConntrackStatsCommand reads the per-CPU counters once; id names the read.
func ConntrackStatsCommand(id string) NodeCommand {
	return NodeCommand{ID: id, Program: "cat", Argv: []string{"cat", conntrackStatsProc}, Kind: KindConntrackStats, Optional: true}
}

// ConntrackTableCommand reads the entries f selects, at most f.MaxEntries.
func ConntrackTableCommand(f ConntrackFilter) NodeCommand {
	return NodeCommand{ID: idTable, Program: "grep", Argv: f.Argv(), Kind: KindConntrack, Optional: true}
}

// ConntrackFilter is the grep that selects a table's entries on the node.
type ConntrackFilter struct {
	// Mode is "exact", "prefix" or "none" (ConntrackRead.Filter).
	Mode string
	// Patterns are fixed strings (grep -F): whole addresses and
	// dport=PORT (exact, with -w), or their prefixes.
	Patterns   []string
	MaxEntries int
}

// Argv is grep -F [-w] -m N -e P ... /proc/net/nf_conntrack.
func (f ConntrackFilter) Argv() []string {
	argv := []string{"grep", "-F"}
	if f.Mode == "exact" {
		argv = append(argv, "-w")
	}
	argv = append(argv, "-m", strconv.Itoa(f.MaxEntries))
	for _, p := range f.Patterns {
		argv = append(argv, "-e", p)
	}
	return append(argv, conntrackProc)
}

// ServiceConntrackFilter selects the entries that mention a Service's
// cluster, external or load-balancer IP, or go to one of its NodePorts. The
// addresses are spelled as /proc does: IPv6 in full ("fd00:0000:…:000a").
// When the patterns would not fit one grep, prefixes match a superset
// (/24 and /112, then /16 and /96, NodePorts by their leading digits);
// beyond that the table is read unfiltered, within the same cap.
func ServiceConntrackFilter(objs *correlate.Objects) ConntrackFilter {
	addrs, ports := serviceTargets(objs)
	// The range the cluster IPs come from, so that the entries of a
	// deleted Service are read too (kube-proxy v1.37.2 never cleans them,
	// #141371): prefixes, so the other patterns are prefixes (no -w) too.
	ranges := correlate.ClusterIPRange(objs).Prefixes
	rangePats := rangePatterns(ranges)
	for a := range addrs {
		if len(rangePats) > 0 && slices.ContainsFunc(ranges, func(p netip.Prefix) bool { return p.Contains(a) }) {
			delete(addrs, a)
		}
	}
	for _, p := range ranges { // a range of one address: that address, exact
		if p.IsSingleIP() {
			addrs[p.Addr()] = true
		}
	}
	if len(addrs) == 0 && len(ports) == 0 && len(rangePats) == 0 {
		return ConntrackFilter{Mode: "none", Patterns: []string{"src="}, MaxEntries: MaxConntrackEntries}
	}
	for _, level := range []prefixLevel{{}, {v4: 3, v6: 7, port: 2}, {v4: 2, v6: 6, port: 3}} {
		pats := append(level.patterns(addrs, ports), rangePats...)
		if patternBytes(pats) <= maxPatternBytes {
			mode := "exact"
			if level.v4 > 0 || len(rangePats) > 0 {
				mode = "prefix"
			}
			slices.Sort(pats)
			return ConntrackFilter{Mode: mode, Patterns: slices.Compact(pats), MaxEntries: MaxConntrackEntries}
		}
	}
	return ConntrackFilter{Mode: "none", Patterns: []string{"src="}, MaxEntries: MaxConntrackEntries}
}

// rangePatterns are "=" and the leading octets (groups) of every address
// of the prefixes (but a single address), as /proc spells them: a prefix not on an octet (group)
// boundary is as many patterns as it spans of the next boundary, at most
// 256 (a wider IPv6 one is widened to the boundary before).
func rangePatterns(prefixes []netip.Prefix) []string {
	var out []string
	for _, p := range prefixes {
		if p.IsSingleIP() {
			continue // read exact, with the other addresses
		}
		p = p.Masked()
		unit, sep := 8, "."
		if p.Addr().Is6() {
			unit, sep = 16, ":"
		}
		b := (p.Bits() + unit - 1) / unit * unit
		for b > p.Bits() && b-p.Bits() > 8 {
			b -= unit
		}
		if b == 0 {
			continue // a prefix that wide would read the whole table
		}
		step := netip.PrefixFrom(p.Addr(), b).Masked()
		for range 1 << max(b-p.Bits(), 0) {
			s := ProcAddr(step.Addr())
			parts := strings.Split(s, sep)
			pat := "=" + strings.Join(parts[:b/unit], sep)
			if b < p.Addr().BitLen() {
				pat += sep
			}
			out = append(out, pat)
			step = nextPrefix(step)
		}
	}
	return out
}

// nextPrefix is the prefix of the same length just after p.
func nextPrefix(p netip.Prefix) netip.Prefix {
	a := p.Addr().As16()
	bit := p.Addr().BitLen() - p.Bits() // the lowest bit of the prefix, from the right
	off := 16 - p.Addr().BitLen()/8
	for i := 15; i >= off; i-- {
		pos := (15 - i) * 8
		if bit >= pos+8 {
			continue
		}
		add := 1 << max(bit-pos, 0)
		sum := int(a[i]) + add
		a[i] = byte(sum)
		if sum < 256 {
			break
		}
		bit = pos + 8
	}
	next := netip.AddrFrom16(a)
	if p.Addr().Is4() {
		next = next.Unmap()
	}
	return netip.PrefixFrom(next, p.Bits())
}

// serviceTargets are the Services' addresses and NodePorts.
func serviceTargets(objs *correlate.Objects) (map[netip.Addr]bool, map[int32]bool) {
	addrs, ports := map[netip.Addr]bool{}, map[int32]bool{}
	if objs == nil {
		return addrs, ports
	}
	add := func(s string) {
		if a, err := netip.ParseAddr(s); err == nil && !a.IsUnspecified() {
			addrs[a.Unmap()] = true
		}
	}
	for _, svc := range objs.Services {
		add(svc.Spec.ClusterIP)
		for _, ip := range svc.Spec.ClusterIPs {
			add(ip)
		}
		for _, ip := range svc.Spec.ExternalIPs {
			add(ip)
		}
		for _, ing := range svc.Status.LoadBalancer.Ingress {
			add(ing.IP)
		}
		for _, p := range svc.Spec.Ports {
			if p.NodePort > 0 {
				ports[p.NodePort] = true
			}
		}
	}
	return addrs, ports
}

// prefixLevel says how much of each target a pattern keeps: octets of an
// IPv4 address, groups of an IPv6 one, digits a port drops; zero: all.
type prefixLevel struct{ v4, v6, port int }

func (l prefixLevel) patterns(addrs map[netip.Addr]bool, ports map[int32]bool) []string {
	set := map[string]bool{}
	for a := range addrs {
		set[l.addr(a)] = true
	}
	for p := range ports {
		s := strconv.Itoa(int(p))
		if l.port > 0 {
			s = s[:max(1, len(s)-l.port)]
		}
		set["dport="+s] = true
	}
	out := make([]string, 0, len(set))
	for p := range set {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// addr is a's pattern: the whole address as /proc spells it (-w makes it a
// word), or "=" and its leading octets or groups with their separator.
func (l prefixLevel) addr(a netip.Addr) string {
	s := ProcAddr(a)
	if l.v4 == 0 {
		return s
	}
	keep, sep := l.v4, "."
	if a.Is6() {
		keep, sep = l.v6, ":"
	}
	parts := strings.Split(s, sep)
	return "=" + strings.Join(parts[:keep], sep) + sep
}

// ProcAddr spells an address as /proc/net/nf_conntrack does: IPv4 dotted,
// IPv6 in full, four lowercase hex digits a group.
func ProcAddr(a netip.Addr) string {
	a = a.Unmap()
	if a.Is4() {
		return a.String()
	}
	return a.WithZone("").StringExpanded()
}

func patternBytes(pats []string) int {
	n := 0
	for _, p := range pats {
		n += len(" '-e' ''") + len(p)
	}
	return n
}

// conntrackPattern is one grep -e pattern: a whole address or its prefix,
// dport=PORT or its prefix, or src= (every entry). None starts with "-".
var conntrackPattern = regexp.MustCompile(`^(=?[0-9a-f.:]{1,39}|dport=[0-9]{1,5}|src=)$`)

// allowedConntrack says whether argv is one of the conntrack reads.
func allowedConntrack(argv []string) bool {
	switch {
	case slices.Equal(argv, conntrack.BundleCommand()):
		return true
	case slices.Equal(argv, []string{"cat", conntrackStatsProc}):
		return true
	}
	return allowedConntrackGrep(argv)
}

// allowedConntrackGrep checks grep -F [-w] -m N (-e PATTERN)+ /proc/net/nf_conntrack.
func allowedConntrackGrep(argv []string) bool {
	if len(argv) < 7 || argv[0] != "grep" || argv[1] != "-F" || argv[len(argv)-1] != conntrackProc {
		return false
	}
	args := argv[2 : len(argv)-1]
	if args[0] == "-w" {
		args = args[1:]
	}
	if len(args) < 4 || args[0] != "-m" || !capDigits.MatchString(args[1]) || len(args)%2 != 0 {
		return false
	}
	for i := 2; i < len(args); i += 2 {
		if args[i] != "-e" || !conntrackPattern.MatchString(args[i+1]) {
			return false
		}
	}
	return true
}

var capDigits = regexp.MustCompile(`^[1-9][0-9]{0,6}$`)

// ConntrackCapNote says what a capped read left out.
func ConntrackCapNote(r *ConntrackRead) string {
	total := "an unknown number of"
	if r.Total >= 0 {
		total = fmt.Sprintf("%d", r.Total)
	}
	return fmt.Sprintf("INCOMPLETE: the conntrack table was read filtered (%s) and capped on the node at %d entries: %d kept of %s entries in the whole table",
		r.Filter, r.MaxEntries, r.Kept, total)
}
