package diagnose_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/diagnose"
)

// explainCT explains ns/name on the case's node (small-v1.37, node-a) with
// its conntrack readings as the node's kernel state.
func explainCT(t *testing.T, c ctCase, ns, name string) *diagnose.ServiceExplanation {
	t.Helper()
	n, in := c.node(t)
	n.Kernel = &in
	ex, err := diagnose.ExplainService(n, ns, name, "")
	if err != nil {
		t.Fatal(err)
	}
	return ex
}

// conntrackProblems are the port's problems of the conntrack kinds, as
// "family kind severity: message".
func conntrackProblems(ex *diagnose.ServiceExplanation) []string {
	var out []string
	for _, pp := range ex.Ports {
		for _, p := range pp.Problems {
			if strings.HasPrefix(p.Kind, "stale") || p.Kind == diagnose.ConntrackNoServicePort {
				out = append(out, pp.ServicePort+" "+pp.Family+" "+p.Kind+" "+string(p.Severity)+": "+p.Message)
			}
		}
	}
	return out
}

// explain svc/X mentions the Service's stale conntrack entries, each fault
// injected alone into small-v1.37's node: problems with Conntrack's
// severity (UDP) or notes (TCP), in the port and family they belong to,
// with the command that clears them; none on the healthy table.
func TestExplainConntrack(t *testing.T) {
	goneDNS := ct("udp", "10.244.0.5", 40001, "10.96.0.10", 53, "10.244.0.99", 53, 110)
	for _, tc := range []struct {
		name, ns, svc string
		c             ctCase
		former        bool
		// want: the conntrack problems ("port family kind severity: …"
		// prefixes); status the explanation's.
		want    []string
		status  diagnose.Status
		port    string // the port whose entries are checked
		entries int
		stale   int
		command string
	}{
		{name: "healthy table", ns: "kube-system", svc: "kube-dns", c: ctCase{},
			status: diagnose.StatusHealthy, port: "kube-system/kube-dns:dns IPv4", entries: 2},
		{name: "DNS answered by a gone endpoint", ns: "kube-system", svc: "kube-dns", c: ctCase{lines: append([]string{goneDNS}, healthyTable...)},
			want:   []string{"kube-system/kube-dns:dns IPv4 staleUDPPending warning: 1 UDP conntrack entry answered by no serving endpoint (10.244.0.99), 110s left: no endpoint change since"},
			status: diagnose.StatusProblems, port: "kube-system/kube-dns:dns IPv4", entries: 3, stale: 1,
			command: "conntrack -D -p udp --orig-dst 10.96.0.10 --orig-port-dst 53 --reply-src 10.244.0.99"},
		{name: "TCP to a gone endpoint is a note", ns: "kube-system", svc: "kube-dns",
			c:    ctCase{lines: []string{ct("tcp", "10.244.0.5", 40001, "10.96.0.10", 53, "10.244.0.99", 53, 3000)}},
			want: []string{"kube-system/kube-dns:dns-tcp IPv4 staleTCP info: 1 TCP conntrack entry answered by no serving endpoint (10.244.0.99), 3000s left: TCP: kube-proxy cleans UDP only"},
			// a note: the rules are right, so is the verdict
			status: diagnose.StatusHealthy, port: "kube-system/kube-dns:dns-tcp IPv4", entries: 1, stale: 1},
		{name: "the IPv6 entry goes to the IPv6 port", ns: "shop", svc: "dual",
			c: ctCase{lines: []string{ct("tcp", "10.244.0.5", 40001, "10.96.10.11", 80, "10.244.0.141", 8080, 3000),
				"ipv6     10 tcp      6 3000 ESTABLISHED src=fd00:0010:0244:0000:0000:0000:0000:0005 dst=fd00:0010:0096:0000:0000:0000:0000:000b sport=40002 dport=80 src=fd00:0010:0244:0000:0000:0000:0000:0099 dst=fd00:0010:0244:0000:0000:0000:0000:0005 sport=8080 dport=40002 [ASSURED] mark=0 zone=0 use=2"}},
			want:   []string{"shop/dual:http IPv6 staleTCP info: 1 TCP conntrack entry answered by no serving endpoint (fd00:10:244::99)"},
			status: diagnose.StatusHealthy, port: "shop/dual:http IPv6", entries: 1, stale: 1},
		{name: "a deleted Service's entries (its rules still there)", ns: "infra", svc: "logs", c: ctCase{objects: deleteLogs}, former: true,
			want:   []string{"infra/logs:syslog IPv4 staleUDP error: 1 UDP conntrack entry answered by no serving endpoint (10.244.2.101), 100s left: deleted Service: not cleaned before #141371"},
			status: diagnose.StatusProblems, port: "infra/logs:syslog IPv4", entries: 1, stale: 1,
			command: "conntrack -D -p udp --orig-dst 10.96.30.1 --orig-port-dst 514 --reply-src 10.244.2.101"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ex *diagnose.ServiceExplanation
			if tc.former {
				n, in := tc.c.node(t)
				n.Kernel = &in
				var ok bool
				if ex, ok = diagnose.ExplainFormerService(n, correlate.FormerServiceMatch{Namespace: tc.ns, Name: tc.svc}, ""); !ok {
					t.Fatal("not explained as a former Service")
				}
			} else {
				ex = explainCT(t, tc.c, tc.ns, tc.svc)
			}
			got := conntrackProblems(ex)
			if len(got) != len(tc.want) {
				t.Fatalf("conntrack problems:\n%s\nwant %d:\n%s", strings.Join(got, "\n"), len(tc.want), strings.Join(tc.want, "\n"))
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tc.want[i]) {
					t.Errorf("problem\n%s\nwant it to start\n%s", got[i], tc.want[i])
				}
			}
			if ex.Status != tc.status {
				t.Errorf("status %s, want %s", ex.Status, tc.status)
			}
			if ex.Conntrack == nil {
				t.Fatal("no conntrack part")
			}
			var found *diagnose.PortConntrack
			for i, p := range ex.Conntrack.Ports {
				if p.ServicePort+" "+p.Family == tc.port {
					found = &ex.Conntrack.Ports[i]
				} else if !tc.former && !strings.HasPrefix(p.ServicePort, tc.ns+"/"+tc.svc+":") {
					t.Errorf("another Service's entries: %+v", p)
				}
			}
			if found == nil || found.Entries != tc.entries || found.Stale != tc.stale {
				t.Fatalf("port %s: %+v; want %d entries, %d stale (ports %+v)", tc.port, found, tc.entries, tc.stale, ex.Conntrack.Ports)
			}
			if tc.command != "" && (len(found.ByCause) != 1 || !slices.Equal(found.ByCause[0].Commands, []string{tc.command})) {
				t.Errorf("commands %+v, want %q", found.ByCause, tc.command)
			}
		})
	}
}

// Without the kernel state explain is as it was (no conntrack part, no
// gap: explain is about the rules); with the healthy table only the
// conntrack part is added.
func TestExplainConntrackAbsent(t *testing.T) {
	n, in := ctCase{}.node(t)
	without, err := diagnose.ExplainService(n, "kube-system", "kube-dns", "")
	if err != nil {
		t.Fatal(err)
	}
	if without.Conntrack != nil || without.Status != diagnose.StatusHealthy || len(without.NotChecked) != 0 {
		t.Fatalf("without kernel state: conntrack %+v, status %s, gaps %+v", without.Conntrack, without.Status, without.NotChecked)
	}
	n.Kernel = &in
	with, err := diagnose.ExplainService(n, "kube-system", "kube-dns", "")
	if err != nil {
		t.Fatal(err)
	}
	if with.Conntrack == nil || with.Conntrack.Read != len(healthyTable) {
		t.Fatalf("with the healthy table: %+v", with.Conntrack)
	}
	with.Conntrack = nil
	a, _ := json.Marshal(without)
	b, _ := json.Marshal(with)
	if string(a) != string(b) {
		t.Errorf("the healthy table changed the explanation:\n%s\n%s", a, b)
	}

	// sysctls but no table: said, no gap
	in.Table = nil
	rep, _ := diagnose.ExplainService(n, "kube-system", "kube-dns", "")
	if rep.Conntrack == nil || !rep.Conntrack.NotRead || len(rep.NotChecked) != 0 || rep.Status != diagnose.StatusHealthy {
		t.Errorf("no table: %+v, gaps %+v, %s", rep.Conntrack, rep.NotChecked, rep.Status)
	}
}

// BenchmarkExplainConntrack: explain of kube-dns with a table at the live
// read's cap (collect.MaxConntrackEntries, 50,000 entries of the Service,
// one in ten answered by a gone endpoint), against none.
func BenchmarkExplainConntrack(b *testing.B) {
	for _, entries := range []int{0, 50_000} {
		b.Run(fmt.Sprint(entries), func(b *testing.B) {
			lines := make([]string, 0, entries)
			for i := range entries {
				reply := "10.244.0.2"
				if i%10 == 0 {
					reply = "10.244.0.99"
				}
				lines = append(lines, ct("udp", fmt.Sprintf("10.244.%d.%d", 1+i/60000, 2+i%250), 1024+i%60000, "10.96.0.10", 53, reply, 53, 29))
			}
			c := ctCase{lines: lines}
			if entries == 0 {
				c.lines = []string{ct("udp", "10.244.0.5", 40010, "8.8.8.8", 53, "8.8.8.8", 53, 29)}
			}
			n, in := c.node(&testing.T{})
			n.Kernel = &in
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := diagnose.ExplainService(n, "kube-system", "kube-dns", ""); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
