package collect

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/inspect/conntrack"
)

func TestConntrackAllowed(t *testing.T) {
	tests := []struct {
		argv []string
		want bool
	}{
		{conntrack.BundleCommand(), true},
		{[]string{"cat", "/proc/net/stat/nf_conntrack"}, true},
		{[]string{"wc", "-l", "/proc/net/nf_conntrack"}, false}, // no longer run: the count is the sysctl's
		{[]string{"grep", "-F", "-w", "-m", "50000", "-e", "10.96.0.10", "-e", "dport=30080", "/proc/net/nf_conntrack"}, true},
		{[]string{"grep", "-F", "-m", "50000", "-e", "=10.96.0.", "-e", "=fd00:0000:0000:0000:0000:0000:0001:", "-e", "dport=300", "/proc/net/nf_conntrack"}, true},
		{[]string{"grep", "-F", "-m", "1", "-e", "src=", "/proc/net/nf_conntrack"}, true},
		// anything else grep, cat or wc could do
		{[]string{"grep", "-r", ".", "/etc"}, false},
		{[]string{"cat", "/etc/shadow"}, false},
		{[]string{"cat", "/proc/net/stat/nf_conntrack", "/etc/shadow"}, false},
		{[]string{"wc", "-l", "/etc/shadow"}, false},
		{[]string{"grep", "-f", "/proc/net/nf_conntrack", "/etc/shadow"}, false},
		{[]string{"grep", "-H", ".", "/etc/shadow"}, false},
		{append(conntrack.BundleCommand(), "/etc/shadow"), false},
		{[]string{"grep", "-H", ".", "/proc/sys/net/ipv4/ip_forward"}, false}, // only the whole fixed list
		{[]string{"grep", "-F", "-m", "10", "-e", "x", "/etc/shadow"}, false},
		{[]string{"grep", "-F", "-m", "10", "-e", "10.0.0.1", "/proc/net/nf_conntrack", "/etc/shadow"}, false},
		{[]string{"grep", "-F", "-m", "10", "-e", "/etc/shadow", "/proc/net/nf_conntrack"}, false},
		{[]string{"grep", "-F", "-m", "10", "-e", "-f/etc/shadow", "/proc/net/nf_conntrack"}, false},
		{[]string{"grep", "-F", "-m", "10", "-f", "/etc/shadow", "/proc/net/nf_conntrack"}, false},
		{[]string{"grep", "-F", "-m", "0", "-e", "10.0.0.1", "/proc/net/nf_conntrack"}, false},
		{[]string{"grep", "-F", "-m", "10", "/proc/net/nf_conntrack"}, false},
		{[]string{"grep", "-F", "-m", "10", "-e", "10.0.0.1", "-e", "/proc/net/nf_conntrack"}, false},
		{[]string{"grep", "-F", "-w", "-w", "-m", "10", "-e", "10.0.0.1", "/proc/net/nf_conntrack"}, false},
		{[]string{"grep", "-F", "-m", "10", "-e", "x y", "/proc/net/nf_conntrack"}, false},
	}
	for _, tt := range tests {
		if got := Allowed(tt.argv) == nil; got != tt.want {
			t.Errorf("Allowed(%q) = %v, want %v", tt.argv, got, tt.want)
		}
	}
}

func svcWith(name, clusterIP string, nodePort int32, external, lb []string) *corev1.Service {
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.ServiceSpec{ClusterIP: clusterIP, ClusterIPs: []string{clusterIP}, ExternalIPs: external,
			Ports: []corev1.ServicePort{{Port: 53, Protocol: corev1.ProtocolUDP, NodePort: nodePort}}}}
	for _, ip := range lb {
		s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
	}
	return s
}

// manyServices are n Services with cluster IPs from 10.96.0.0/16 (and
// fd00::/108 for every other one) and a NodePort each.
func manyServices(n int) *correlate.Objects {
	objs := &correlate.Objects{}
	for i := 0; i < n; i++ {
		ip := fmt.Sprintf("10.96.%d.%d", i/250, i%250+1)
		if i%2 == 1 {
			ip = fmt.Sprintf("fd00::%x", i+1)
		}
		objs.Services = append(objs.Services, svcWith(fmt.Sprint("s", i), ip, int32(30000+i%2768), nil, nil))
	}
	return objs
}

func TestServiceConntrackFilter(t *testing.T) {
	tests := []struct {
		name     string
		objs     *correlate.Objects
		mode     string
		want     []string // patterns that must be there
		patterns int      // how many, when not 0
	}{
		{"none", nil, "none", []string{"src="}, 1},
		{"headless", &correlate.Objects{Services: []*corev1.Service{svcWith("h", "None", 0, nil, nil)}}, "none", []string{"src="}, 1},
		{"exact", &correlate.Objects{Services: []*corev1.Service{
			svcWith("dns", "10.96.0.10", 0, nil, nil),
			svcWith("web", "fd00::a", 30080, []string{"192.0.2.7"}, []string{"198.51.100.9", "::ffff:198.51.100.10"}),
		}}, "exact", []string{"10.96.0.10", "fd00:0000:0000:0000:0000:0000:0000:000a", "dport=30080", "192.0.2.7", "198.51.100.9", "198.51.100.10"}, 6},
		{"prefix", manyServices(2000), "prefix", []string{"=10.96.0.", "=10.96.3.", "=fd00:0000:0000:0000:0000:0000:0000:", "dport=300", "dport=319"}, 0},
		{"none beyond prefixes", func() *correlate.Objects {
			objs := &correlate.Objects{}
			for i := 0; i < 3000; i++ { // 3,000 /16s: no prefix level fits
				objs.Services = append(objs.Services, svcWith(fmt.Sprint("s", i), fmt.Sprintf("%d.%d.0.1", 11+i/250, i%250), 0, nil, nil))
			}
			return objs
		}(), "none", []string{"src="}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := ServiceConntrackFilter(tt.objs)
			if f.Mode != tt.mode || f.MaxEntries != MaxConntrackEntries {
				t.Errorf("mode %q, cap %d; want %q, %d", f.Mode, f.MaxEntries, tt.mode, MaxConntrackEntries)
			}
			for _, p := range tt.want {
				if !slices.Contains(f.Patterns, p) {
					t.Errorf("no pattern %q in %q", p, f.Patterns)
				}
			}
			if tt.patterns > 0 && len(f.Patterns) != tt.patterns {
				t.Errorf("%d patterns %q, want %d", len(f.Patterns), f.Patterns, tt.patterns)
			}
			cmd := ConntrackTableCommand(f)
			if err := cmd.Check(); err != nil {
				t.Fatal(err)
			}
			if _, err := Script([]NodeCommand{SysctlsCommand(), ConntrackStatsCommand(idStatsAfter), cmd}); err != nil {
				t.Errorf("the read does not fit one exec: %v", err)
			}
		})
	}
}

// The filter, run by the real grep over the kernel's own /proc text
// (inspect/conntrack/testdata): -w keeps 10.250.31.1 from matching
// 10.250.31.10, and IPv6 is matched as /proc spells it.
func TestConntrackFilterRealGrep(t *testing.T) {
	if _, err := exec.LookPath("grep"); err != nil {
		t.Skip("no grep")
	}
	proc, err := filepath.Abs("../../inspect/conntrack/testdata/proc-nf_conntrack.txt")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		svcs  []*corev1.Service
		lines int
	}{
		{"cluster IP .10: its three entries", []*corev1.Service{svcWith("dns", "10.250.31.10", 0, nil, nil)}, 3},
		{"address .1 is not .10's prefix", []*corev1.Service{svcWith("lo", "10.250.31.1", 0, nil, nil)}, 1},
		{"IPv6 in full", []*corev1.Service{svcWith("v6", "fd00:31::a", 0, nil, nil)}, 1},
		{"a NodePort", []*corev1.Service{svcWith("np", "10.96.0.1", 5353, nil, nil)}, 2},
		{"nothing", []*corev1.Service{svcWith("x", "10.96.0.1", 0, nil, nil)}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			argv := ConntrackTableCommand(ServiceConntrackFilter(&correlate.Objects{Services: tt.svcs})).Argv
			argv[len(argv)-1] = proc
			out, _ := exec.Command(argv[0], argv[1:]...).Output()
			if got := strings.Count(string(out), "\n"); got != tt.lines {
				t.Errorf("%q: %d lines, want %d:\n%s", argv, got, tt.lines, out)
			}
		})
	}
}

// tickingClock advances by step at every call: a fake node whose reads
// take that long, so the collector need not wait between the counters.
func tickingClock(start time.Time, step time.Duration) func() time.Time {
	now := start
	return func() time.Time { now = now.Add(step); return now }
}

func conntrackOutputs(r *fakeRunner, objs *correlate.Objects, table string) {
	read := func(name string) string {
		data, err := os.ReadFile(filepath.Join("..", "..", "inspect", "conntrack", "testdata", name))
		if err != nil {
			panic(err)
		}
		return string(data)
	}
	r.outputs[strings.Join(conntrack.BundleCommand(), " ")] = fakeResult{out: read("sysctls.txt"), rc: 2}
	r.outputs["cat /proc/net/stat/nf_conntrack"] = fakeResult{out: read("stat-before.txt")}
	r.outputs[strings.Join(ConntrackTableCommand(ServiceConntrackFilter(objs)).Argv, " ")] = fakeResult{out: table}
}

// A live read writes the sysctls, the counters twice (with when) and the
// filtered table into the bundle, and says in the manifest what the cap
// left out.
func TestCollectConntrack(t *testing.T) {
	line := "ipv4     2 udp      17 29 src=10.244.1.9 dst=10.96.0.10 sport=40001 dport=53 [UNREPLIED] src=10.244.1.5 dst=10.244.1.9 sport=53 dport=40001 mark=0 zone=0 use=2\n"
	tests := []struct {
		name    string
		entries int
		capped  bool
		rc      int
	}{
		{"some entries", 3, false, 0},
		{"none match", 0, false, 1},
		{"capped", MaxConntrackEntries, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, defaultObjects()...)
			objs := &correlate.Objects{Services: []*corev1.Service{testService()}}
			conntrackOutputs(e.runner, objs, strings.Repeat(line, tt.entries))
			e.runner.outputs[strings.Join(ConntrackTableCommand(ServiceConntrackFilter(objs)).Argv, " ")] = fakeResult{out: strings.Repeat(line, tt.entries), rc: tt.rc}
			c := e.collector(Options{Node: testNode, Via: ViaDebugPod, Objects: objs, Kernel: true})
			c.now = tickingClock(fixedTime, 2*time.Second)
			man, err := c.Collect(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			e.runner.checkAllowed(t)
			ct := man.Conntrack
			if ct == nil {
				t.Fatal("no conntrack record in the manifest")
			}
			// The total is the sysctls' nf_conntrack_count (8 in the fixture).
			if ct.Filter != "exact" || ct.Patterns != 1 || ct.Kept != int64(tt.entries) || ct.Capped != tt.capped || ct.Total != 8 {
				t.Errorf("record %+v; want exact, 1 pattern, %d kept, capped %v, total 8", ct, tt.entries, tt.capped)
			}
			// The table is read after the rules (the objects its filter
			// needs are listed meanwhile), in the counters' second exec
			// before them, so that its read is part of the wait between
			// the two, and walked once (no wc -l): seconds each on a node
			// with a million entries.
			table := strings.Join(ConntrackTableCommand(ServiceConntrackFilter(objs)).Argv, " ")
			calls := e.runner.conntrackCalls
			if len(calls) != 2 || slices.Contains(calls[0], table) || !slices.Contains(calls[0], "cat /proc/net/stat/nf_conntrack") ||
				len(calls[1]) != 2 || calls[1][0] != table || calls[1][1] != "cat /proc/net/stat/nf_conntrack" ||
				slices.ContainsFunc(slices.Concat(calls...), func(c string) bool { return strings.HasPrefix(c, "wc ") }) {
				t.Errorf("conntrack execs %q; want the table read once, with the second counters, before them", calls)
			}
			if len(ct.Stats) != 2 || ct.Stats[0].Path != "conntrack-stats-before.txt" || ct.Stats[1].Path != "conntrack-stats-after.txt" || !ct.Stats[1].At.After(ct.Stats[0].At) {
				t.Errorf("stats reads %+v; want before and after, in order", ct.Stats)
			}
			kinds := map[string]BundleFile{}
			for _, f := range man.Files {
				kinds[f.Path] = f
			}
			for path, kind := range map[string]string{"sysctls.txt": KindSysctls, "conntrack-stats-before.txt": KindConntrackStats,
				"conntrack-stats-after.txt": KindConntrackStats, "conntrack.txt": KindConntrack} {
				f, ok := kinds[path]
				if !ok || f.Kind != kind || f.Error != "" {
					t.Errorf("%s: %+v, want kind %s, no error", path, f, kind)
				}
			}
			if got := kinds["conntrack.txt"].Bytes; got != int64(tt.entries*len(line)) {
				t.Errorf("conntrack.txt has %d bytes, want %d", got, tt.entries*len(line))
			}
			if len(man.Warnings) > 0 {
				t.Errorf("warnings %q", man.Warnings)
			}
			// The bundle reads back, its new kinds within their bounds.
			b := openBundle(t, e.dir)
			if b.Manifest.Conntrack == nil || b.Manifest.Conntrack.Kept != ct.Kept {
				t.Errorf("read back %+v", b.Manifest.Conntrack)
			}
		})
	}
}

// A node without /proc/net/nf_conntrack (no root, no NF_CONNTRACK_PROCFS):
// a warning, and the rest of the bundle.
func TestCollectConntrackUnreadable(t *testing.T) {
	e := newEnv(t, defaultObjects()...)
	objs := &correlate.Objects{Services: []*corev1.Service{testService()}}
	e.runner.outputs[strings.Join(ConntrackTableCommand(ServiceConntrackFilter(objs)).Argv, " ")] = fakeResult{rc: 2}
	man, err := e.collector(Options{Node: testNode, Via: ViaDebugPod, Objects: objs, Kernel: true}).Collect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(man.Warnings) != 1 || !strings.Contains(man.Warnings[0], "the conntrack table was not read (exit status 2") {
		t.Errorf("warnings %q", man.Warnings)
	}
	if man.Conntrack == nil || man.Conntrack.Total != -1 || len(man.Conntrack.Stats) != 0 {
		t.Errorf("record %+v; want no total, no stats", man.Conntrack)
	}
}

// The bundle's bounds take what collect writes of the new kinds, and
// refuse more.
func TestConntrackKindBounds(t *testing.T) {
	for kind, n := range map[string]int{KindConntrack: 1, KindConntrackStats: 2, KindSysctls: 1} {
		if collectWrites[kind] != n || kindBounds[kind].files < n || DefaultLimits.File(kind) <= 0 {
			t.Errorf("%s: collect writes %d (want %d), bound %d, cap %d", kind, collectWrites[kind], n, kindBounds[kind].files, DefaultLimits.File(kind))
		}
		m := &Manifest{}
		for i := 0; i <= kindBounds[kind].files; i++ {
			m.Files = append(m.Files, BundleFile{Path: fmt.Sprint(kind, i), Kind: kind, Bytes: 1})
		}
		if err := checkKinds(m, DefaultLimits); err == nil {
			t.Errorf("%s: %d files accepted", kind, len(m.Files))
		}
	}
	if got := outputCap(ConntrackTableCommand(ConntrackFilter{Mode: "none", Patterns: []string{"src="}, MaxEntries: MaxConntrackEntries})); got < MaxConntrackEntries*maxConntrackLine {
		t.Errorf("the table's output cap %d is below what grep -m sends", got)
	}
}

// isConntrackRead: a command of the conntrack reads (the fake runner keeps
// their execs apart from the rules' reads).
func isConntrackRead(c NodeCommand) bool {
	return c.Kind == KindConntrack || c.Kind == KindConntrackStats || c.Kind == KindSysctls
}

// The counters' second read waits until the first is the interval old:
// conntrack's 3 s by default, less when asked (triage, which reads many
// nodes), with the time the reads in between took counted in.
func TestConntrackStatsInterval(t *testing.T) {
	for _, tc := range []struct {
		name     string
		interval time.Duration
		want     time.Duration
	}{
		{"default", 0, 3 * time.Second},
		{"triage's", time.Second, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, defaultObjects()...)
			objs := &correlate.Objects{Services: []*corev1.Service{testService()}}
			conntrackOutputs(e.runner, objs, "")
			c := e.collector(Options{Node: testNode, Via: ViaDebugPod, Objects: objs, Kernel: true, StatsInterval: tc.interval})
			c.now = func() time.Time { return fixedTime } // no time passes between the reads
			waited := recordWaits(c)
			if _, err := c.Collect(context.Background()); err != nil {
				t.Fatal(err)
			}
			if len(*waited) != 1 || (*waited)[0] != tc.want {
				t.Errorf("waited %v, want once %v", *waited, tc.want)
			}
		})
	}
}
