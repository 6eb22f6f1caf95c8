package conntrack

import (
	"bytes"
	"io"
	"strconv"
	"strings"

	"github.com/proxyrules/kubectl-proxyrules/inspect/internal/scan"
)

// Sysctls are kernel settings by their dotted name ("net.ipv4.ip_forward").
//
// The bundle is what `grep -H . FILES 2>&1` prints, which the kube-proxy
// image can run (it has grep, no sysctl; datapath facts §4.4): a
// `/proc/sys/PATH:VALUE` line per file, "grep: PATH: No such file or
// directory" for a file the kernel lacks (net/bridge/ without
// br_netfilter), nothing for an empty file (ip_local_reserved_ports). The
// `sysctl -a` form, `name = value`, is read too.
type Sysctls struct {
	Values map[string]string
	// Absent are the files grep could not read.
	Absent   []string
	Warnings []string
}

// The names the conntrack and Service diagnoses read.
const (
	SysctlCount              = "net.netfilter.nf_conntrack_count"
	SysctlMax                = "net.netfilter.nf_conntrack_max"
	SysctlBuckets            = "net.netfilter.nf_conntrack_buckets"
	SysctlUDPTimeout         = "net.netfilter.nf_conntrack_udp_timeout"
	SysctlUDPTimeoutStream   = "net.netfilter.nf_conntrack_udp_timeout_stream"
	SysctlTCPTimeoutEstab    = "net.netfilter.nf_conntrack_tcp_timeout_established"
	SysctlTCPBeLiberal       = "net.netfilter.nf_conntrack_tcp_be_liberal"
	SysctlIPForward          = "net.ipv4.ip_forward"
	SysctlIPv6Forwarding     = "net.ipv6.conf.all.forwarding"
	SysctlRouteLocalnet      = "net.ipv4.conf.all.route_localnet"
	SysctlBridgeIPTables     = "net.bridge.bridge-nf-call-iptables"
	SysctlBridgeIP6Tables    = "net.bridge.bridge-nf-call-ip6tables"
	SysctlLocalPortRange     = "net.ipv4.ip_local_port_range"
	SysctlLocalReservedPorts = "net.ipv4.ip_local_reserved_ports"
	SysctlRPFilterAll        = "net.ipv4.conf.all.rp_filter"
	SysctlRPFilterDefault    = "net.ipv4.conf.default.rp_filter"
	// IPVS mode's: kube-proxy sets them at start (pkg/proxy/ipvs/proxier.go);
	// the files exist only while ip_vs is loaded.
	SysctlIPVSConntrack        = "net.ipv4.vs.conntrack"
	SysctlIPVSExpireNodestConn = "net.ipv4.vs.expire_nodest_conn"
	SysctlIPVSExpireQuiescent  = "net.ipv4.vs.expire_quiescent_template"
	SysctlIPVSConnReuseMode    = "net.ipv4.vs.conn_reuse_mode"
)

// SysctlNames are the settings a bundle holds, in the order read.
var SysctlNames = []string{SysctlCount, SysctlMax, SysctlBuckets, SysctlUDPTimeout, SysctlUDPTimeoutStream,
	SysctlTCPTimeoutEstab, SysctlTCPBeLiberal, SysctlIPForward, SysctlIPv6Forwarding, SysctlRouteLocalnet,
	SysctlBridgeIPTables, SysctlBridgeIP6Tables, SysctlLocalPortRange, SysctlLocalReservedPorts,
	SysctlRPFilterAll, SysctlRPFilterDefault,
	SysctlIPVSConntrack, SysctlIPVSExpireNodestConn, SysctlIPVSExpireQuiescent, SysctlIPVSConnReuseMode}

// BundleCommand is the command that writes a sysctl bundle on a node with
// only grep (run with stderr kept: a missing file's message is how Absent
// learns of it; grep exits 2 then, which is no failure here).
func BundleCommand() []string {
	cmd := []string{"grep", "-H", "."}
	for _, n := range SysctlNames {
		cmd = append(cmd, SysctlPath(n))
	}
	return cmd
}

// SysctlPath is the /proc/sys file of a dotted name.
func SysctlPath(name string) string {
	return "/proc/sys/" + strings.ReplaceAll(name, ".", "/")
}

const sysctlPrefix = "/proc/sys/"

// maxSysctls bounds a bundle (a real one: the 20 above; `sysctl -a` some
// 2,000 lines).
const maxSysctls = 20_000

// ReadSysctls reads a sysctl bundle. Lines that are neither form are
// warnings.
func ReadSysctls(r io.Reader) (*Sysctls, error) {
	lim := Limits{MaxLineBytes: 4096, MaxBytes: 8 << 20}.normalized()
	s := &Sysctls{Values: map[string]string{}}
	var trunc Truncation
	lr := newLineReader(r, lim, &trunc)
	w := scan.Warnings{Max: lim.MaxWarnings}
	for {
		line, ok := lr.next()
		if !ok {
			break
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		if len(s.Values) >= maxSysctls {
			w.Line(lr.no, line, "more settings than "+strconv.Itoa(maxSysctls))
			continue
		}
		if why := s.line(line); why != "" {
			w.Line(lr.no, line, why)
		}
	}
	s.Warnings = append(w.Done(), trunc.warnings(lim)...)
	return s, lr.err
}

func (s *Sysctls) line(line []byte) string {
	if rest, ok := bytes.CutPrefix(line, []byte("grep: ")); ok {
		path, _, found := bytes.Cut(rest, []byte(": "))
		if !found || !bytes.HasPrefix(path, []byte(sysctlPrefix)) {
			return "a grep message about no /proc/sys file"
		}
		s.Absent = append(s.Absent, nameOf(path))
		return ""
	}
	if bytes.HasPrefix(line, []byte(sysctlPrefix)) {
		path, value, found := bytes.Cut(line, []byte(":"))
		if !found {
			return "no value"
		}
		if !isSysctlName(path[len(sysctlPrefix):]) {
			return "no setting's path"
		}
		s.Values[nameOf(path)] = normalizeValue(value)
		return ""
	}
	name, value, found := bytes.Cut(line, []byte(" = "))
	if !found || !isSysctlName(name) {
		return "neither PATH:VALUE nor NAME = VALUE"
	}
	s.Values[string(name)] = normalizeValue(value)
	return ""
}

// nameOf turns /proc/sys/net/ipv4/ip_forward into net.ipv4.ip_forward.
func nameOf(path []byte) string {
	return strings.ReplaceAll(string(path[len(sysctlPrefix):]), "/", ".")
}

// normalizeValue joins a value's words with one space: the kernel
// separates ip_local_port_range's two numbers with a tab.
func normalizeValue(v []byte) string {
	return string(bytes.Join(bytes.Fields(v), []byte(" ")))
}

func isSysctlName(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-' || c == '/') {
			return false
		}
	}
	return true
}

// Int is a setting that holds one integer.
func (s *Sysctls) Int(name string) (int64, bool) {
	v, ok := s.Values[name]
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	return n, err == nil
}

// PortRange is net.ipv4.ip_local_port_range: the first and last port.
func (s *Sysctls) PortRange() (lo, hi int, ok bool) {
	a, b, found := strings.Cut(s.Values[SysctlLocalPortRange], " ")
	if !found {
		return 0, 0, false
	}
	l, err1 := strconv.Atoi(a)
	h, err2 := strconv.Atoi(b)
	if err1 != nil || err2 != nil || l < 0 || h > 65535 || l > h {
		return 0, 0, false
	}
	return l, h, true
}

// Has says whether the bundle read a setting; a file the kernel lacks
// (Absent) is not read.
func (s *Sysctls) Has(name string) bool {
	_, ok := s.Values[name]
	return ok
}
