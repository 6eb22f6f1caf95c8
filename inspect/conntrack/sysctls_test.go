package conntrack

import (
	"bytes"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func mustSysctls(t testing.TB, in []byte) *Sysctls {
	t.Helper()
	s, err := ReadSysctls(bytes.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The fixture is `grep -H . FILES` in the generator's namespace:
// ip_local_reserved_ports is empty there, so grep prints no line for it.
func TestReadSysctlsFixture(t *testing.T) {
	s := mustSysctls(t, readFixture(t, "sysctls.txt"))
	want := map[string]string{
		SysctlCount: "8", SysctlMax: "262144", SysctlBuckets: "262144", SysctlUDPTimeout: "30",
		SysctlUDPTimeoutStream: "120", SysctlTCPTimeoutEstab: "432000", SysctlTCPBeLiberal: "0",
		SysctlIPForward: "0", SysctlIPv6Forwarding: "0", SysctlRouteLocalnet: "0",
		SysctlBridgeIPTables: "1", SysctlBridgeIP6Tables: "1", SysctlLocalPortRange: "32768 60999",
		SysctlRPFilterAll: "0", SysctlRPFilterDefault: "0",
	}
	// no ip_vs on the kernel that wrote it: IPVS mode's files are absent
	absent := []string{SysctlIPVSConntrack, SysctlIPVSExpireNodestConn, SysctlIPVSExpireQuiescent, SysctlIPVSConnReuseMode}
	if !reflect.DeepEqual(s.Values, want) || len(s.Warnings) != 0 || !reflect.DeepEqual(s.Absent, absent) {
		t.Errorf("values %v\nwarnings %q absent %q", s.Values, s.Warnings, s.Absent)
	}
	if lo, hi, ok := s.PortRange(); !ok || lo != 32768 || hi != 60999 {
		t.Errorf("port range %d-%d %v", lo, hi, ok)
	}
	tab := mustRead(t, readFixture(t, "proc-nf_conntrack.txt"), Limits{})
	tab.SetSizes(*s)
	if tab.Count != int64(len(tab.Entries)) || tab.Max != 262144 || tab.Buckets != 262144 {
		t.Errorf("sizes %d/%d/%d", tab.Count, tab.Max, tab.Buckets)
	}
	// every name has its /proc/sys file in the bundle
	for _, n := range SysctlNames {
		if n != SysctlLocalReservedPorts && !bytes.Contains(readFixture(t, "sysctls.txt"), []byte(SysctlPath(n)+":")) && !slices.Contains(absent, n) {
			t.Errorf("%s: %s not in the fixture", n, SysctlPath(n))
		}
	}
}

func TestReadSysctlsVariants(t *testing.T) {
	for _, tc := range []struct {
		name      string
		in        string
		values    map[string]string
		absent    []string
		nwarnings int
	}{
		{"no br_netfilter", "/proc/sys/net/ipv4/ip_forward:1\ngrep: /proc/sys/net/bridge/bridge-nf-call-iptables: No such file or directory\n",
			map[string]string{SysctlIPForward: "1"}, []string{SysctlBridgeIPTables}, 0},
		{"sysctl -a form", "net.ipv4.ip_forward = 1\r\nnet.ipv4.ip_local_port_range = 30000\t32767\r\n",
			map[string]string{SysctlIPForward: "1", SysctlLocalPortRange: "30000 32767"}, nil, 0},
		{"garbage", "hello world\n\x00\x01\ngrep: /etc/x: Permission denied\n/proc/sys/net/x\n", map[string]string{}, nil, 4},
		{"empty", "", map[string]string{}, nil, 0},
		{"long line", "/proc/sys/a:" + strings.Repeat("1", 5000) + "\n", map[string]string{}, nil, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := mustSysctls(t, []byte(tc.in))
			if !reflect.DeepEqual(s.Values, tc.values) || !reflect.DeepEqual(s.Absent, tc.absent) || len(s.Warnings) != tc.nwarnings {
				t.Errorf("values %v absent %q warnings %q", s.Values, s.Absent, s.Warnings)
			}
		})
	}
}

func TestPortRange(t *testing.T) {
	for in, ok := range map[string]bool{"32768 60999": true, "1 2 3": false, "60999 32768": false, "x y": false, "": false, "0 65536": false} {
		s := Sysctls{Values: map[string]string{SysctlLocalPortRange: in}}
		if _, _, got := s.PortRange(); got != ok {
			t.Errorf("%q: ok %v", in, got)
		}
	}
	if got := SysctlPath(SysctlBridgeIPTables); got != "/proc/sys/net/bridge/bridge-nf-call-iptables" {
		t.Errorf("path %s", got)
	}
	if cmd := BundleCommand(); len(cmd) != 3+len(SysctlNames) || cmd[3] != "/proc/sys/net/netfilter/nf_conntrack_count" {
		t.Errorf("command %q", cmd)
	}
}
