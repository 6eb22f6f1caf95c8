package diagnose_test

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/diagnose"
	"github.com/proxyrules/kubectl-proxyrules/inspect/conntrack"
	"github.com/proxyrules/kubectl-proxyrules/inspect/kpconfig"
	"github.com/proxyrules/kubectl-proxyrules/internal/fixture"
)

// ct is one /proc/net/nf_conntrack line: proto, orig src:sport → dst:dport,
// answered by rsrc:rsport, seconds left.
func ct(proto, src string, sport int, dst string, dport int, rsrc string, rsport, timeout int) string {
	protoNo, state := map[string]int{"udp": 17, "tcp": 6}[proto], ""
	if proto == "tcp" {
		state = "ESTABLISHED "
	}
	return fmt.Sprintf("ipv4     2 %s      %d %d %ssrc=%s dst=%s sport=%d dport=%d src=%s dst=%s sport=%d dport=%d [ASSURED] mark=0 zone=0 use=2",
		proto, protoNo, timeout, state, src, dst, sport, dport, rsrc, src, rsport, sport)
}

// healthyTable: small-v1.37's Services answered by serving endpoints, and
// flows to no Service.
var healthyTable = []string{
	ct("udp", "10.244.0.5", 40001, "10.96.0.10", 53, "10.244.0.2", 53, 29),
	ct("udp", "10.244.0.6", 40002, "10.96.0.10", 53, "10.244.1.2", 53, 118),
	ct("tcp", "10.244.0.5", 40004, "10.96.10.1", 80, "10.244.2.11", 8080, 86399),
	ct("udp", "10.244.0.5", 40005, "10.96.30.1", 514, "10.244.2.101", 5514, 100),
	ct("tcp", "192.0.2.7", 40006, "10.0.0.10", 30080, "10.244.1.21", 8080, 86399),
	ct("udp", "10.244.0.5", 40010, "8.8.8.8", 53, "8.8.8.8", 53, 29),
}

// healthySysctls is a node as kube-proxy v1.37.2 (iptables mode,
// localhostNodePorts) leaves it, in the bundle's grep -H form.
func healthySysctls() map[string]string {
	return map[string]string{
		conntrack.SysctlCount: "1200", conntrack.SysctlMax: "262144", conntrack.SysctlBuckets: "65536",
		conntrack.SysctlUDPTimeout: "30", conntrack.SysctlUDPTimeoutStream: "120", conntrack.SysctlTCPTimeoutEstab: "86400",
		conntrack.SysctlTCPBeLiberal: "0", conntrack.SysctlIPForward: "1", conntrack.SysctlIPv6Forwarding: "1",
		conntrack.SysctlRouteLocalnet: "1", conntrack.SysctlBridgeIPTables: "1", conntrack.SysctlBridgeIP6Tables: "1",
		conntrack.SysctlLocalPortRange: "32768\t60999", conntrack.SysctlRPFilterAll: "0", conntrack.SysctlRPFilterDefault: "0",
	}
}

func sysctlBundle(t *testing.T, values map[string]string) *conntrack.Sysctls {
	t.Helper()
	var b strings.Builder
	for _, name := range conntrack.SysctlNames {
		v, ok := values[name]
		switch {
		case !ok:
			fmt.Fprintf(&b, "grep: %s: No such file or directory\n", conntrack.SysctlPath(name))
		case v != "":
			fmt.Fprintf(&b, "%s:%s\n", conntrack.SysctlPath(name), v)
		}
	}
	s, err := conntrack.ReadSysctls(strings.NewReader(b.String()))
	if err != nil || len(s.Warnings) > 0 {
		t.Fatalf("%v %q", err, s.Warnings)
	}
	return s
}

// stats is /proc/net/stat/nf_conntrack with two CPUs whose insert_failed,
// drop and early_drop are those given (split over the CPUs).
func stats(t *testing.T, insertFailed, drop, earlyDrop int) *conntrack.Stats {
	t.Helper()
	head := "entries  clashres found new invalid ignore delete chainlength insert insert_failed drop early_drop icmp_error  expect_new expect_create expect_delete search_restart\n"
	row := func(f, d, e int) string {
		vals := []int{0x4b0, 0, 0, 0, 0, 0, 0, 0, 0x300, f, d, e, 0, 0, 0, 0, 0}
		var w []string
		for _, v := range vals {
			w = append(w, fmt.Sprintf("%08x", v))
		}
		return strings.Join(w, " ") + "\n"
	}
	s, err := conntrack.ReadStats(strings.NewReader(head + row(insertFailed-insertFailed/2, drop-drop/2, earlyDrop-earlyDrop/2) + row(insertFailed/2, drop/2, earlyDrop/2)))
	if err != nil || len(s.Warnings) > 0 {
		t.Fatalf("%v %q", err, s.Warnings)
	}
	return s
}

// ctCase is one node: small-v1.37 (node-a, iptables mode, kube-proxy's
// own configz) with the fault the changes inject.
type ctCase struct {
	lines   []string
	sysctls map[string]string
	in      diagnose.ConntrackInputs
	objects func(*correlate.Objects)
	nft     bool
	config  func(*kpconfig.Config)
}

func (c ctCase) run(t *testing.T) *diagnose.ConntrackReport {
	t.Helper()
	n, in := c.node(t)
	return diagnose.Conntrack(n, in)
}

// node is the case's node and its conntrack readings.
func (c ctCase) node(t *testing.T) (*diagnose.Node, diagnose.ConntrackInputs) {
	t.Helper()
	dir := filepath.Join(fixture.Root, "small-v1.37")
	files := []string{"iptables/save-nft-ipv4.txt", "iptables/save-nft-ipv6.txt"}
	cfgFile := "configz-iptables.json"
	if c.nft {
		files, cfgFile = []string{"nftables/ruleset.txt"}, "configz-nftables.json"
	}
	rs, ok := fixture.Load(t, dir, files...)
	if !ok {
		t.Fatal("no rules")
	}
	objs := fixture.Objects(t, dir)
	if c.objects != nil {
		c.objects(objs)
	}
	f, err := os.Open(filepath.Join(dir, cfgFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfg, err := kpconfig.Parse(f, cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	if c.config != nil {
		c.config(cfg)
	}
	in := c.in
	lines := healthyTable
	if c.lines != nil {
		lines = c.lines
	}
	tab, err := conntrack.ReadTable(strings.NewReader(strings.Join(lines, "\n")), conntrack.Limits{}, nil)
	if err != nil || len(tab.Entries) != len(lines) {
		t.Fatalf("%v: %d entries of %d", err, len(tab.Entries), len(lines))
	}
	in.Table = tab
	values := healthySysctls()
	for k, v := range c.sysctls {
		if v == "-" {
			delete(values, k)
		} else {
			values[k] = v
		}
	}
	in.Sysctls = sysctlBundle(t, values)
	if in.Before == nil {
		in.Before, in.After, in.Interval = stats(t, 3, 0, 0), stats(t, 3, 0, 0), 5*time.Second
	}
	if in.MaxPerCore == nil {
		perCore, floor := int32(32768), int32(131072)
		in.MaxPerCore, in.Min, in.CPUs = &perCore, &floor, 8
	}
	n := &diagnose.Node{Name: "node-a", Ruleset: rs, Objects: objs, Config: cfg,
		Addresses: []netip.Addr{netip.MustParseAddr("10.0.0.10"), netip.MustParseAddr("fd00::10")}}
	return n, in
}

func describe(rep *diagnose.ConntrackReport) string {
	var out []string
	for _, p := range rep.Problems {
		out = append(out, fmt.Sprintf("%s %s: %s", p.Severity, p.Kind, p.Message))
	}
	for _, g := range rep.NotChecked {
		out = append(out, "not checked: "+g.Check)
	}
	return strings.Join(out, "\n")
}

// A healthy node, in both modes: no finding, every input read.
func TestConntrackHealthy(t *testing.T) {
	for _, nft := range []bool{false, true} {
		rep := ctCase{nft: nft}.run(t)
		if len(rep.Problems) != 0 || len(rep.NotChecked) != 0 || rep.Status != diagnose.StatusHealthy {
			t.Errorf("nft=%v: %s\n%s", nft, rep.Status, describe(rep))
		}
		if rep.Facts == nil || len(rep.Facts.Entries) != 5 {
			t.Errorf("nft=%v: facts %+v", nft, rep.Facts)
		}
	}
}

func deleteLogs(o *correlate.Objects) {
	for i, s := range o.Services {
		if s.Name == "logs" {
			o.Services = append(o.Services[:i], o.Services[i+1:]...)
			break
		}
	}
}

func logsNodePortAtZero(o *correlate.Objects) {
	for _, s := range o.Services {
		if s.Name == "logs" {
			s.Spec.Type = corev1.ServiceTypeNodePort
			s.Spec.Ports[1].NodePort = 30514
		}
	}
	for _, s := range o.EndpointSlices {
		if s.Labels["kubernetes.io/service-name"] == "logs" {
			s.Endpoints = nil
		}
	}
}

func i32(v int32) *int32 { return &v }

// conntrackFault is one fault injected alone into small-v1.37's node, and
// its verdict.
type conntrackFault struct {
	name     string
	c        ctCase
	kind     string
	severity diagnose.Severity
	message  string
	command  string
}

func conntrackFaults(t *testing.T) []conntrackFault {
	return []conntrackFault{
		{name: "UDP to a deleted Service", c: ctCase{objects: deleteLogs},
			kind: diagnose.ConntrackStale, severity: diagnose.SeverityError, message: "1 UDP entry to 10.96.30.1:514 (a cluster IP no Service has): answered by no serving endpoint (10.244.2.101); deleted Service: not cleaned before #141371",
			command: "conntrack -D -p udp --orig-dst 10.96.30.1 --orig-port-dst 514 --reply-src 10.244.2.101"},
		{name: "UDP NodePort of a Service at zero", c: ctCase{objects: logsNodePortAtZero,
			lines: []string{ct("udp", "192.0.2.7", 40001, "10.0.0.10", 30514, "10.244.2.101", 5514, 118)}},
			kind: diagnose.ConntrackStale, severity: diagnose.SeverityError, message: "NodePort of a Service with no endpoints: skipped",
			command: "conntrack -D -p udp --orig-dst 10.0.0.10 --orig-port-dst 30514 --reply-src 10.244.2.101"},
		{name: "UDP to a gone endpoint, kube-proxy cleans", c: ctCase{lines: append([]string{ct("udp", "10.244.0.5", 40001, "10.96.0.10", 53, "10.244.0.99", 53, 110)}, healthyTable...)},
			kind: diagnose.ConntrackStalePending, severity: diagnose.SeverityWarning, message: "1 UDP entry to kube-system/kube-dns:dns: answered by no serving endpoint (10.244.0.99); no endpoint change since",
			command: "conntrack -D -p udp --orig-dst 10.96.0.10 --orig-port-dst 53 --reply-src 10.244.0.99"},
		{name: "TCP to a gone endpoint", c: ctCase{lines: []string{ct("tcp", "10.244.0.5", 40001, "10.96.10.1", 80, "10.244.0.99", 8080, 3000)}},
			kind: diagnose.ConntrackStaleTCP, severity: diagnose.SeverityInfo, message: "TCP: kube-proxy cleans UDP only"},
		{name: "table 95% full", c: ctCase{sysctls: map[string]string{conntrack.SysctlCount: "249037"}},
			kind: diagnose.ConntrackTableNearFull, severity: diagnose.SeverityWarning, message: "95% full (249037 of 262144)"},
		{name: "table full", c: ctCase{sysctls: map[string]string{conntrack.SysctlCount: "262144"}},
			kind: diagnose.ConntrackTableFull, severity: diagnose.SeverityError, message: "new connections dropped"},
		{name: "drops growing", c: ctCase{in: diagnose.ConntrackInputs{Before: stats(t, 3, 10, 0), After: stats(t, 13, 60, 0), Interval: 5 * time.Second}},
			kind: diagnose.ConntrackDrops, severity: diagnose.SeverityError, message: "insert_failed +10 in 5s (2.0/s), drop +50 in 5s (10.0/s)"},
		{name: "early drops growing", c: ctCase{in: diagnose.ConntrackInputs{Before: stats(t, 0, 0, 4), After: stats(t, 0, 0, 9), Interval: 5 * time.Second}},
			kind: diagnose.ConntrackEarlyDrops, severity: diagnose.SeverityWarning, message: "early_drop +5 in 5s (1.0/s)"},
		{name: "max lowered", c: ctCase{sysctls: map[string]string{conntrack.SysctlMax: "131072"}},
			kind: diagnose.ConntrackMaxLowered, severity: diagnose.SeverityWarning, message: "nf_conntrack_max is 131072, below the 262144 kube-proxy sets: someone lowered it"},
		{name: "ip_forward off", c: ctCase{sysctls: map[string]string{conntrack.SysctlIPForward: "0"}},
			kind: diagnose.ConntrackForwarding, severity: diagnose.SeverityError, message: "IPv4 forwarding is off"},
		{name: "IPv6 forwarding off with IPv6 Services", c: ctCase{sysctls: map[string]string{conntrack.SysctlIPv6Forwarding: "0"}},
			kind: diagnose.ConntrackForwarding, severity: diagnose.SeverityError, message: "IPv6 forwarding is off"},
		{name: "bridge-nf-call-iptables off with br_netfilter", c: ctCase{sysctls: map[string]string{conntrack.SysctlBridgeIPTables: "0"}},
			kind: diagnose.ConntrackBridgeNF, severity: diagnose.SeverityWarning, message: "br_netfilter is loaded but net.bridge.bridge-nf-call-iptables is 0"},
		{name: "route_localnet off with localhost NodePorts", c: ctCase{sysctls: map[string]string{conntrack.SysctlRouteLocalnet: "0"}},
			kind: diagnose.ConntrackRouteLocalnet, severity: diagnose.SeverityWarning, message: "route_localnet is 0"},
		{name: "route_localnet off, localhost NodePorts read off the nat table", c: ctCase{sysctls: map[string]string{conntrack.SysctlRouteLocalnet: "0"},
			config: func(c *kpconfig.Config) { c.LocalhostNodePorts = nil }},
			kind: diagnose.ConntrackRouteLocalnet, severity: diagnose.SeverityWarning, message: "route_localnet is 0"},
		{name: "NodePorts in the ephemeral range", c: ctCase{sysctls: map[string]string{conntrack.SysctlLocalPortRange: "30000 60999"}},
			kind: diagnose.ConntrackPortRange, severity: diagnose.SeverityWarning, message: "8 NodePorts inside the ephemeral port range 30000-60999: 30080 (nodePort of shop/api:http)"},
		{name: "health-check NodePort in the ephemeral range", c: ctCase{sysctls: map[string]string{conntrack.SysctlLocalPortRange: "32000 60999"}},
			kind: diagnose.ConntrackPortRange, severity: diagnose.SeverityWarning, message: "2 NodePorts inside the ephemeral port range 32000-60999: 32001 (healthCheckNodePort of shop/ingress), 32002 (healthCheckNodePort of shop/reports)"},
		{name: "tcp_be_liberal reset", c: ctCase{config: func(c *kpconfig.Config) { c.ConntrackTCPBeLiberal = true }},
			kind: diagnose.ConntrackTCPBeLiberal, severity: diagnose.SeverityWarning, message: "kube-proxy's configuration sets tcp_be_liberal, but the node has it off"},
	}
}

// Each fault injected alone, and its verdict.
func TestConntrackFaults(t *testing.T) {
	for _, tc := range conntrackFaults(t) {
		t.Run(tc.name, func(t *testing.T) {
			rep := tc.c.run(t)
			if len(rep.Problems) != 1 {
				t.Fatalf("%d problems, want 1:\n%s", len(rep.Problems), describe(rep))
			}
			p := rep.Problems[0]
			if p.Kind != tc.kind || p.Severity != tc.severity || !strings.Contains(p.Message, tc.message) {
				t.Errorf("got %s %s %q\nwant %s %s …%q…", p.Severity, p.Kind, p.Message, tc.severity, tc.kind, tc.message)
			}
			if p.Evidence == "" || p.Consequence == "" || p.Remedy == "" {
				t.Errorf("evidence %q, consequence %q, remedy %q", p.Evidence, p.Consequence, p.Remedy)
			}
			if tc.command != "" && (len(p.Commands) != 1 || p.Commands[0] != tc.command) {
				t.Errorf("commands %q, want %q", p.Commands, tc.command)
			}
			want := diagnose.StatusProblems
			if tc.severity == diagnose.SeverityInfo {
				want = diagnose.StatusHealthy
			}
			if rep.Status != want {
				t.Errorf("status %s, want %s", rep.Status, want)
			}
		})
	}
}

// Settings that only matter in some modes or with some modules: no
// finding.
func TestConntrackSettingsNotApplying(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    ctCase
	}{
		{"br_netfilter not loaded", ctCase{sysctls: map[string]string{conntrack.SysctlBridgeIPTables: "-", conntrack.SysctlBridgeIP6Tables: "-"}}},
		{"route_localnet off in nftables mode", ctCase{nft: true, sysctls: map[string]string{conntrack.SysctlRouteLocalnet: "0"}}},
		{"route_localnet off, localhostNodePorts off", ctCase{sysctls: map[string]string{conntrack.SysctlRouteLocalnet: "0"},
			config: func(c *kpconfig.Config) { c.LocalhostNodePortsEffective = false }}},
		{"NodePort range reserved", ctCase{sysctls: map[string]string{conntrack.SysctlLocalPortRange: "30000 60999", conntrack.SysctlLocalReservedPorts: "30000-32767"}}},
		{"tcp_be_liberal on, as configured", ctCase{sysctls: map[string]string{conntrack.SysctlTCPBeLiberal: "1"},
			config: func(c *kpconfig.Config) { c.ConntrackTCPBeLiberal = true }}},
		{"max raised above kube-proxy's", ctCase{sysctls: map[string]string{conntrack.SysctlMax: "1048576"}}},
		{"maxPerCore 0: kube-proxy leaves max", ctCase{sysctls: map[string]string{conntrack.SysctlMax: "65536"},
			in: diagnose.ConntrackInputs{MaxPerCore: i32(0), Min: i32(0), CPUs: 8}}},
		{"insert_failed flat", ctCase{in: diagnose.ConntrackInputs{Before: stats(t, 7, 2, 1), After: stats(t, 7, 2, 1), Interval: time.Second}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if rep := tc.c.run(t); len(rep.Problems) != 0 || rep.Status != diagnose.StatusHealthy {
				t.Errorf("%s\n%s", rep.Status, describe(rep))
			}
		})
	}
}

// Each missing input is a gap, never a finding.
func TestConntrackNotChecked(t *testing.T) {
	dir := filepath.Join(fixture.Root, "small-v1.37")
	rs, _ := fixture.Load(t, dir, "iptables/save-nft-ipv4.txt")
	n := &diagnose.Node{Name: "node-a", Ruleset: rs, Objects: fixture.Objects(t, dir)}
	rep := diagnose.Conntrack(n, diagnose.ConntrackInputs{})
	var checks []string
	for _, g := range rep.NotChecked {
		checks = append(checks, g.Check+" | "+g.Reason)
	}
	sort.Strings(checks)
	got := strings.Join(checks, "\n")
	for _, want := range []string{"the conntrack table was not read", "not two reads of /proc/net/stat/nf_conntrack", "how full the conntrack table is", "the sysctls were not read"} {
		if !strings.Contains(got, want) {
			t.Errorf("no gap %q in\n%s", want, got)
		}
	}
	if len(rep.Problems) != 0 || rep.Status != diagnose.StatusIncomplete || rep.Facts != nil {
		t.Errorf("%s\n%s", rep.Status, describe(rep))
	}

	// a capped read says how much it left out
	tab, _ := conntrack.ReadTable(strings.NewReader(strings.Join(healthyTable, "\n")), conntrack.Limits{MaxEntries: 2}, nil)
	rep = diagnose.Conntrack(n, diagnose.ConntrackInputs{Table: tab})
	found := false
	for _, g := range rep.NotChecked {
		found = found || strings.Contains(g.Check, "INCOMPLETE: 4 entries over the cap")
	}
	if !found {
		t.Errorf("no cap gap:\n%s", describe(rep))
	}

	// capped on the node (grep -m: nothing counted past the cap), the
	// table's size from nf_conntrack_count, or unknown
	for count, want := range map[int64]string{
		1000: "INCOMPLETE: the read stopped at its cap, 2 entries; up to 998 more of the table's 1000 entries were not read",
		-1:   "INCOMPLETE: the read stopped at its cap, 2 entries; how many more the table holds is unknown",
	} {
		tab, _ := conntrack.ReadTable(strings.NewReader(strings.Join(healthyTable[:2], "\n")), conntrack.Limits{}, nil)
		tab.Truncated.Incomplete, tab.Count = true, count
		rep = diagnose.Conntrack(n, diagnose.ConntrackInputs{Table: tab})
		if !slices.ContainsFunc(rep.NotChecked, func(g diagnose.Gap) bool { return strings.Contains(g.Check, want) }) {
			t.Errorf("count %d: no gap %q:\n%s", count, want, describe(rep))
		}
	}
}
