package collect

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
)

// explain's live read (KernelTable, one Service) reads the conntrack
// entries of that Service alone, in one grep: no sysctls, no counters,
// so no wait for their second read (the clock stands still: a wait for
// the counters' interval would be the only use of it), and no other
// Service's address in the filter. A Service not among the objects (a
// deleted one, read whole) reads no table.
func TestCollectServiceConntrack(t *testing.T) {
	line := "ipv4     2 udp      17 29 src=10.244.1.9 dst=10.96.0.10 sport=40001 dport=80 [UNREPLIED] src=10.244.1.5 dst=10.244.1.9 sport=8080 dport=40001 mark=0 zone=0 use=2\n"
	web := testService()
	web.Spec.Type = corev1.ServiceTypeNodePort
	web.Spec.Ports[0].NodePort = 30080
	other := svcWith("dns", "10.96.0.53", 30053, []string{"192.0.2.53"}, nil)
	objs := &correlate.Objects{Services: []*corev1.Service{other, web}}
	wantGrep := strings.Join(ConntrackTableCommand(ConntrackFilter{Mode: "exact", Patterns: []string{"10.96.0.10", "dport=30080"}, MaxEntries: MaxConntrackEntries}).Argv, " ")
	for _, tc := range []struct {
		name    string
		service string
		kernel  bool
		// calls are the conntrack execs wanted, each its commands
		calls [][]string
		kept  int64
	}{
		{"the Service's entries, one grep", "web", false, [][]string{{wantGrep}}, 2},
		{"a Service not in the objects: no table", "gone", false, nil, 0},
		{"with Kernel (triage, collect): their read only", "web", true, nil, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, defaultObjects()...)
			conntrackOutputs(e.runner, objs, "")
			e.runner.outputs[wantGrep] = fakeResult{out: strings.Repeat(line, 2)}
			c := e.collector(Options{Node: testNode, Via: ViaDebugPod, Objects: objs, ServiceNamespace: "default", ServiceName: tc.service,
				KernelTable: true, Kernel: tc.kernel})
			c.now = func() time.Time { return fixedTime }
			if tc.kernel {
				c.now = tickingClock(fixedTime, 2*time.Second) // the counters' wait, passed at once
			}
			man, err := c.Collect(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			e.runner.checkAllowed(t)
			if tc.kept < 0 { // Kernel's own read: not this one's grep
				if slices.ContainsFunc(slices.Concat(e.runner.conntrackCalls...), func(c string) bool { return c == wantGrep }) {
					t.Errorf("conntrack execs %q: the Service's grep beside Kernel's read", e.runner.conntrackCalls)
				}
				return
			}
			if !slices.EqualFunc(e.runner.conntrackCalls, tc.calls, slices.Equal) {
				t.Errorf("conntrack execs %q, want %q", e.runner.conntrackCalls, tc.calls)
			}
			ct := man.Conntrack
			if tc.calls == nil {
				if ct != nil {
					t.Errorf("a conntrack record %+v without a read", ct)
				}
				return
			}
			if ct == nil || ct.Filter != "exact" || ct.Patterns != 2 || ct.Kept != tc.kept || ct.Capped || ct.Total != -1 || len(ct.Stats) != 0 {
				t.Fatalf("record %+v; want exact, 2 patterns, %d kept, no total, no counters", ct, tc.kept)
			}
			var table *BundleFile
			for i, f := range man.Files {
				if f.Kind == KindConntrack {
					table = &man.Files[i]
				}
				if f.Kind == KindConntrackStats || f.Kind == KindSysctls {
					t.Errorf("file %s of kind %s", f.Path, f.Kind)
				}
			}
			if table == nil || table.Path != "conntrack.txt" || table.Bytes != int64(2*len(line)) || table.Error != "" {
				t.Errorf("table file %+v", table)
			}
			if len(man.Warnings) > 0 {
				t.Errorf("warnings %q", man.Warnings)
			}
			if b := openBundle(t, e.dir); b.Manifest.Conntrack == nil || b.Manifest.Conntrack.Kept != tc.kept {
				t.Errorf("read back %+v", b.Manifest.Conntrack)
			}
		})
	}
}
