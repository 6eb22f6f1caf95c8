package diagnose_test

import (
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/diagnose"
	"github.com/proxyrules/kubectl-proxyrules/evaluate"
	"github.com/proxyrules/kubectl-proxyrules/inspect"
	"github.com/proxyrules/kubectl-proxyrules/inspect/ipset"
	"github.com/proxyrules/kubectl-proxyrules/internal/fixture"
)

// traceIPVSNode is a fixture's IPVS-mode node: kube-proxy v1.37.2's IPv4
// iptables rules, IPVS table and ipsets, and the objects.
func traceIPVSNode(t *testing.T, scenario string, edit func(*inspect.Ruleset)) *diagnose.Node {
	t.Helper()
	dir := fixture.Dir(scenario)
	rs, ok := fixture.Load(t, dir, "ipvs/iptables-save-nft-ipv4.txt", "ipvs/proc-net-ip_vs.txt")
	if !ok || !rs.HasIPVS() {
		t.Fatalf("%s: no IPVS state", scenario)
	}
	f, err := os.Open(filepath.Join(dir, "ipvs", "ipset-save.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if rs.IPVS.Sets, err = ipset.Read(f, ipset.DefaultLimits()); err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(rs)
	}
	return &diagnose.Node{Name: "node-a", Ruleset: rs, Objects: fixture.Objects(t, dir)}
}

var podNames = regexp.MustCompile(`\(pod web-[a-z0-9-]+\)`)

// TestTraceIPVS: trace in IPVS mode says the real servers as outcomes with
// their pods and shares (rr), the draining one without, and an lc virtual
// server's real servers with no share and the scheduler named.
func TestTraceIPVS(t *testing.T) {
	lc := func(rs *inspect.Ruleset) {
		for i := range rs.IPVS.Table.Services {
			if s := &rs.IPVS.Table.Services[i]; s.Addr.String() == "10.96.10.1:80" {
				s.Scheduler = "lc"
			}
		}
	}
	// unbind reads kube-ipvs0's addresses, less one
	unbind := func(addr string) func(*inspect.Ruleset) {
		return func(rs *inspect.Ruleset) {
			text, _ := fixture.Text(t, fixture.Dir("small-v1.37"), "ipvs/ip-addr-kube-ipvs0.txt")
			rs.Merge(fixture.Parse(t, text, "ip-addr-kube-ipvs0.txt"))
			if !rs.HasIPVSInterface() {
				t.Fatal("kube-ipvs0 not read")
			}
			ifc := rs.IPVS.Interface
			ifc.Addrs = slices.DeleteFunc(ifc.Addrs, func(p netip.Prefix) bool { return p.Addr().String() == addr })
		}
	}
	nodeIP := []netip.Addr{netip.MustParseAddr("10.0.0.10")}
	for _, tc := range []struct {
		name     string
		scenario string
		edit     func(*inspect.Ruleset)
		req      diagnose.TraceRequest
		summary  string
		lines    []string // in the IPVS lines, in order
		status   diagnose.Status
		source   string // the packet's, when said
	}{
		{name: "pod", scenario: "small-v1.37", req: diagnose.TraceRequest{Dst: netip.MustParseAddrPort("10.96.10.1:80"), Protocol: "tcp", From: "pod"},
			summary: "3 outcomes: 33.3% → 10.244.0.11:8080 (pod web-…), 33.3% → 10.244.1.11:8080 (pod web-…), 33.3% → 10.244.2.11:8080 (pod web-…); masqueraded: no",
			lines:   []string{"IPVS TCP 10.96.10.1:80 (shop/web:http), at input, scheduler rr: 3 real servers, new connections to each in turn", "10.244.0.11:8080  weight 1  33.3%  pod web-", "Not checked against the kernel"}},
		{name: "node", scenario: "small-v1.37", req: diagnose.TraceRequest{Namespace: "shop", Service: "web", Port: "http", From: "node"},
			summary: "3 outcomes: 33.3% → 10.244.0.11:8080 (pod web-…), 33.3% → 10.244.1.11:8080 (pod web-…), 33.3% → 10.244.2.11:8080 (pod web-…); masqueraded: yes",
			lines:   []string{"IPVS TCP 10.96.10.1:80 (shop/web:http), at output, scheduler rr"},
			// the route to an address on kube-ipvs0 is local: its source is the address
			source: "10.96.10.1:40000"},
		{name: "lc", scenario: "small-v1.37", edit: lc, req: diagnose.TraceRequest{Dst: netip.MustParseAddrPort("10.96.10.1:80"), Protocol: "tcp", From: "pod"},
			summary: "3 outcomes: ? → 10.244.0.11:8080 (pod web-…), ? → 10.244.1.11:8080 (pod web-…), ? → 10.244.2.11:8080 (pod web-…); masqueraded: no",
			lines:   []string{"scheduler lc: 3 real servers; which one a new connection gets is not predictable from the rules", "10.244.0.11:8080  weight 1  pod web-"}},
		{name: "draining", scenario: "ipvs-drain-v1.37", req: diagnose.TraceRequest{Dst: netip.MustParseAddrPort("10.96.60.10:53"), Protocol: "tcp", From: "pod"},
			summary: "2 outcomes: 50.0% → 10.244.0.60:5353",
			lines:   []string{"scheduler rr: 2 real servers", "10.244.1.60:5353  weight 0  draining: no new connection"}},
		{name: "persistent", scenario: "small-v1.37", req: diagnose.TraceRequest{Dst: netip.MustParseAddrPort("10.96.10.7:80"), Protocol: "tcp", From: "pod"},
			summary: "2 outcomes: 50.0% → 10.244.0.81:8080",
			lines:   []string{"scheduler rr: 2 real servers", "persistent 10800 s (ClientIP affinity): a client that connected in the last 10800 s goes back to its real server; the shares are a new client's"}},
		{name: "no real server", scenario: "small-v1.37", req: diagnose.TraceRequest{Dst: netip.MustParseAddrPort("10.96.10.9:80"), Protocol: "tcp", From: "node"},
			summary: "1 outcome: 100% rejected (icmp-port-unreachable)",
			lines:   []string{"no real server to take a new connection: IPVS answers ICMP port unreachable"}, status: diagnose.StatusProblems},
		{name: "no virtual server", scenario: "small-v1.37", req: diagnose.TraceRequest{Dst: netip.MustParseAddrPort("10.96.10.1:81"), Protocol: "tcp", From: "pod"},
			summary: "1 outcome: 100% rejected (icmp-port-unreachable)",
			lines:   []string{"IPVS: no virtual server for TCP 10.96.10.1:81, so IPVS does not balance it: 1 outcome: 100% rejected (icmp-port-unreachable)."}, status: diagnose.StatusProblems},
		// no Service on the address at all: the node's own, delivered to it
		{name: "not a Service", scenario: "small-v1.37", req: diagnose.TraceRequest{Dst: netip.MustParseAddrPort("10.0.0.10:22"), Protocol: "tcp", From: "outside"},
			summary: "1 outcome: 100% accepted, to the node itself (10.0.0.10:22)",
			lines:   []string{"IPVS: no virtual server for TCP 10.0.0.10:22", "Delivered to the node itself: a process listening"}},
		// kube-ipvs0 read without 10.96.10.1: the virtual server is never reached
		{name: "address not bound", scenario: "small-v1.37", edit: unbind("10.96.10.1"), req: diagnose.TraceRequest{Dst: netip.MustParseAddrPort("10.96.10.1:80"), Protocol: "tcp", From: "pod"},
			summary: "1 outcome: 100% accepted, not DNATed (10.96.10.1:80)",
			lines:   []string{"IPVS has a virtual server for TCP 10.96.10.1:80, but the connection never reaches it"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := traceIPVSNode(t, tc.scenario, tc.edit)
			tc.req.NodeIPs = nodeIP
			rep, err := diagnose.Trace(n, tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Traces) != 1 {
				t.Fatalf("%d traces", len(rep.Traces))
			}
			pt := rep.Traces[0]
			// pod names are kube-proxy's fixture's: "web-…" stands for one
			if !strings.HasPrefix(podNames.ReplaceAllString(pt.Summary, "(pod web-…)"), tc.summary) {
				t.Errorf("summary %q\nwant it to start %q", pt.Summary, tc.summary)
			}
			if pt.IPVS == nil {
				t.Fatal("no IPVS part")
			}
			text := strings.Join(pt.IPVS.Lines, "\n")
			at := 0
			for _, l := range tc.lines {
				i := strings.Index(text[at:], l)
				if i < 0 {
					t.Errorf("IPVS lines lack (in order) %q:\n%s", l, text)
					break
				}
				at += i
			}
			if tc.source != "" && pt.Packet.Source != tc.source {
				t.Errorf("source %s, want %s", pt.Packet.Source, tc.source)
			}
			if tc.status != "" && rep.Status != tc.status {
				t.Errorf("status %s, want %s", rep.Status, tc.status)
			}
			for _, o := range pt.Outcomes {
				if o.Verdict == evaluate.VerdictDNAT && (o.IPVS == nil || o.Pod == "") {
					t.Errorf("outcome %s: IPVS %v, pod %q", *o.Endpoint, o.IPVS, o.Pod)
				}
			}
			gap := false
			for _, g := range rep.NotChecked {
				gap = gap || g.Check == "the IPVS scheduler's choice"
			}
			if gap != (len(pt.IPVS.VirtualServers) > 0) {
				t.Errorf("not checked %+v: the IPVS scheduler's choice is said %v, want %v", rep.NotChecked, gap, len(pt.IPVS.VirtualServers) > 0)
			}
		})
	}
}
