//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/proxyrules/kubectl-proxyrules/internal/kernelprobe"
)

// TestLiveConntrackFlows: real UDP flows, sent from a node's namespace and
// from a pod's through a kernel lab (kernel_helpers_test.go), held against
// `conntrack --node` (issue 31, item 5), on node-a (iptables) and node-b
// (nftables):
//   - flows to a healthy UDP Service: the plugin counts exactly the
//     entries `conntrack -L` lists, none stale;
//   - an endpoint taken out of the EndpointSlice: kube-proxy v1.37.2
//     deletes the entries it answered and keeps the others (the kernel
//     says so), and the plugin reports none left;
//   - node-a: route_localnet 0 and back, with localhost NodePorts on: the
//     kernel refuses the node's flow to 127.0.0.1:NodePort (EINVAL, no
//     entry), then DNATs it, and the plugin's routeLocalnetOff appears and
//     clears.
//
// Its Services live in a namespace of their own and are deleted at the end:
// this file sorts after udp_conntrack_test.go, whose test must stay the
// last but this one to delete Services (see there).
func TestLiveConntrackFlows(t *testing.T) {
	kernelPrecheck(t)
	defer noDebugPods(t)
	const ns = "e2e-ctflows"
	defs := withNamespace([]svcDef{flowsService("node-a", 1), flowsService("node-b", 2)}, ns)
	createObjects(t, namespaceObjects(ns)...)
	defer run(nil, "kubectl", "-n", ns, "delete", "service,endpointslice", "--all", "--wait=false")
	marks := markAll(t)
	objs, svcEvents, sliceEvents := objectsOf(defs)
	createObjects(t, objs...)
	waitAll(t, marks, svcEvents, sliceEvents)
	for i, name := range nodes {
		t.Run(name, func(t *testing.T) {
			n := kernelNode(t, name)
			l := newKLab(t, n, kInRange)
			s := readFlowsService(t, defs[i])
			// Registered after the lab: run before its checks.
			t.Cleanup(func() {
				inNode(name, "conntrack", "-D", "-p", "udp", "-d", s.vip.Addr().String())
				inNode(name, "conntrack", "-D", "-p", "udp", "-d", "127.0.0.1", "--dport", fmt.Sprint(s.nodePort))
			})
			// An unreplied UDP entry lives 30 s (the sink never answers):
			// 120 s outlive a live read, however slow the machine.
			setNodeSysctl(t, name, "net.netfilter.nf_conntrack_udp_timeout", "120")
			t.Run("flows", func(t *testing.T) { flowsHealthy(t, l, s) })
			t.Run("endpoint removed", func(t *testing.T) { flowsEndpointRemoved(t, l, s) })
			if n.mode == "iptables" {
				t.Run("route_localnet", func(t *testing.T) { flowsRouteLocalnet(t, l, s) })
			}
		})
	}
}

// flowsService is a NodePort Service with one UDP port and three
// endpoints on the node's pod CIDR (10.244.third.0/24; the lab's pod is
// .250, other tests use lower addresses).
func flowsService(node string, third int) svcDef {
	d := svcDef{name: "flows-" + strings.TrimPrefix(node, "node-"), typ: "NodePort",
		ports: []svcPort{{name: "dns", port: 53, target: 5353, proto: "UDP"}}}
	for i := range 3 {
		d.eps = append(d.eps, endpoint{ip: fmt.Sprintf("10.244.%d.%d", third, 160+i), node: node})
	}
	return d
}

// flowsSvc is a flows Service as the API server has it.
type flowsSvc struct {
	d        svcDef
	sp       string         // ns/name:dns, as the plugin names it
	vip      netip.AddrPort // cluster IP:53
	nodePort uint16
	eps      []netip.AddrPort // ip:5353, as the entries' reply sources
}

func readFlowsService(t *testing.T, d svcDef) flowsSvc {
	t.Helper()
	var obj struct {
		Spec struct {
			ClusterIP string `json:"clusterIP"`
			Ports     []struct {
				Port     uint16
				NodePort uint16 `json:"nodePort"`
			}
		}
	}
	if err := json.Unmarshal(kubectl(t, "-n", d.ns, "get", "service", d.name, "-o", "json"), &obj); err != nil {
		t.Fatal(err)
	}
	vip, err := netip.ParseAddr(obj.Spec.ClusterIP)
	if err != nil || len(obj.Spec.Ports) != 1 || obj.Spec.Ports[0].NodePort == 0 {
		t.Fatalf("%s: cluster IP %q, ports %+v", d.key(), obj.Spec.ClusterIP, obj.Spec.Ports)
	}
	s := flowsSvc{d: d, sp: spn(d, d.ports[0]), vip: netip.AddrPortFrom(vip, obj.Spec.Ports[0].Port), nodePort: obj.Spec.Ports[0].NodePort}
	for _, e := range d.eps {
		s.eps = append(s.eps, netip.AddrPortFrom(netip.MustParseAddr(e.ip), uint16(d.ports[0].target)))
	}
	return s
}

// flowsHealthy: flows from the node and from the pod, every one DNATed
// to an endpoint; the plugin counts the entries `conntrack -L` lists, none
// stale, no finding about the Service.
func flowsHealthy(t *testing.T, l *kLab, s flowsSvc) {
	const perSource = 30
	var obs []kernelprobe.Observation
	for _, from := range []kernelprobe.From{kNodeF, kPod} {
		got := l.Send(t, kernelprobe.Probe{From: from, Proto: "udp", Dst: s.vip, Flows: perSource})
		requireDNAT(t, fmt.Sprintf("udp from the %s to %s", from, s.vip), got, s.eps)
		obs = append(obs, got...)
	}
	before := listUDP(t, l.n.name, s.vip.Addr(), 0)
	r := readCtFlows(t, l.n.name)
	after := listUDP(t, l.n.name, s.vip.Addr(), 0)
	if before.total != after.total {
		t.Fatalf("conntrack -L: %d entries to %s before the plugin's read, %d after: the count cannot be compared", before.total, s.vip.Addr(), after.total)
	}
	if after.total != len(obs) {
		t.Errorf("conntrack -L lists %d entries to %s, want the %d flows sent", after.total, s.vip.Addr(), len(obs))
	}
	g := r.group(s.sp)
	t.Logf("%s, %d flows from the node and %d from a pod: plugin %d entries, %d stale; conntrack -L %d (by endpoint %v)",
		s.sp, perSource, perSource, g.Entries, g.Stale, after.total, after.byReply)
	if g.Entries != after.total || g.Stale != 0 || len(g.ByCause) != 0 {
		t.Errorf("plugin: %s has %d entries, %d stale by %+v; want the %d conntrack -L lists, none stale", s.sp, g.Entries, g.Stale, g.ByCause, after.total)
	}
	if p := r.about(s.sp); len(p) > 0 {
		t.Errorf("plugin: findings about the healthy %s: %+v", s.sp, p)
	}
}

// requireDNAT: every flow has an entry DNATed to one of eps (the premise
// of the counts).
func requireDNAT(t *testing.T, what string, obs []kernelprobe.Observation, eps []netip.AddrPort) {
	t.Helper()
	for _, o := range obs {
		if o.Verdict != kernelprobe.DNAT || !slices.Contains(eps, o.Endpoint) {
			t.Fatalf("%s: flow %d %s to %v (%s), want DNAT to one of %v", what, o.Flow, o.Verdict, o.Endpoint, o.Raw, eps)
		}
	}
}

// flowsEndpointRemoved takes the last endpoint out of the EndpointSlice:
// kube-proxy's next sync is a UDP endpoint change, after which it deletes
// the entries answered by that endpoint (cleanup.go) and none other.
func flowsEndpointRemoved(t *testing.T, l *kLab, s flowsSvc) {
	node := l.n.name
	gone := s.eps[len(s.eps)-1]
	before := listUDP(t, node, s.vip.Addr(), 0)
	if before.byReply[gone] == 0 {
		t.Fatalf("no entry to %s answered by %s before its removal (by endpoint %v): nothing to clean", s.vip, gone, before.byReply)
	}
	runs0, deleted0 := reconciler(t, node)
	patchEndpoints(t, s.d, s.d.eps[:len(s.d.eps)-1])
	waitFor(t, 30*time.Second, "kube-proxy on "+node+" reconciles conntrack after the endpoint change", func() error {
		if runs, _ := reconciler(t, node); runs <= runs0 {
			return fmt.Errorf("kubeproxy_conntrack_reconciler_sync_duration_seconds_count still %v", runs)
		}
		return nil
	})
	_, deleted := reconciler(t, node)
	after := listUDP(t, node, s.vip.Addr(), 0)
	t.Logf("%s on %s: %s removed; conntrack -L by endpoint before %v, after %v; kube-proxy deleted %v entries",
		s.sp, node, gone, before.byReply, after.byReply, deleted-deleted0)
	if after.byReply[gone] != 0 {
		t.Errorf("kernel: %d entries to %s answered by the removed %s are left; kube-proxy v1.37.2 deletes them at the endpoint change", after.byReply[gone], s.vip, gone)
	}
	for _, ep := range s.eps[:len(s.eps)-1] {
		if after.byReply[ep] != before.byReply[ep] {
			t.Errorf("kernel: entries answered by the serving %s went from %d to %d; kube-proxy keeps them", ep, before.byReply[ep], after.byReply[ep])
		}
	}
	if d := deleted - deleted0; d < float64(before.byReply[gone]) {
		t.Errorf("kubeproxy_conntrack_reconciler_deleted_entries_total grew by %v, want at least the %d entries of %s", d, before.byReply[gone], gone)
	}
	r := readCtFlows(t, node)
	again := listUDP(t, node, s.vip.Addr(), 0)
	g := r.group(s.sp)
	t.Logf("plugin after the removal: %s %d entries, %d stale; conntrack -L %d", s.sp, g.Entries, g.Stale, again.total)
	if again.total != after.total || g.Entries != again.total || g.Stale != 0 {
		t.Errorf("plugin: %s has %d entries, %d stale; conntrack -L lists %d (%d before the read), none answered by %s", s.sp, g.Entries, g.Stale, again.total, after.total, gone)
	}
	for _, kind := range []string{"staleUDP", "staleUDPPending"} {
		if p := r.about(s.sp, kind); len(p) > 0 {
			t.Errorf("plugin: %s about %s after kube-proxy cleaned: %+v", kind, s.sp, p)
		}
	}
}

// patchEndpoints gives d's EndpointSlice these endpoints and waits until
// both kube-proxies synced the change.
func patchEndpoints(t *testing.T, d svcDef, eps []endpoint) {
	t.Helper()
	p, _ := json.Marshal([]any{map[string]any{"op": "replace", "path": "/endpoints", "value": endpointObjects(eps)}})
	marks := markAll(t)
	kubectl(t, "-n", d.ns, "patch", "endpointslice", sliceName(d), "--type=json", "-p", string(p))
	waitAll(t, marks, 0, 1)
}

// reconciler is kube-proxy's conntrack cleanup, as its metrics count it:
// finished runs (the metric is observed at the end of CleanStaleEntries,
// after the sync's timestamp) and entries deleted.
func reconciler(t *testing.T, node string) (runs, deleted float64) {
	t.Helper()
	m, err := readMetrics(node)
	if err != nil {
		t.Fatalf("kube-proxy metrics on %s: %v", node, err)
	}
	runs, _ = m.get("kubeproxy_conntrack_reconciler_sync_duration_seconds_count", `ip_family="IPv4"`)
	deleted, _ = m.get("kubeproxy_conntrack_reconciler_deleted_entries_total", `ip_family="IPv4"`)
	return runs, deleted
}

// flowsRouteLocalnet: with localhost NodePorts on (iptables mode, the
// default), route_localnet 0 makes the kernel refuse the node's own flow
// to 127.0.0.1:NodePort after DNAT (a packet from 127.0.0.1 is not routed
// off the host), and the plugin says so; back at 1 the flow is DNATed and
// the finding goes. The sysctl is put back as it was.
func flowsRouteLocalnet(t *testing.T, l *kLab, s flowsSvc) {
	const key = "net.ipv4.conf.all.route_localnet"
	node := l.n.name
	was := setNodeSysctl(t, node, key, "")
	if out, _ := inNode(node, "sysctl", "-n", "net.ipv4.conf."+kIfSink+".route_localnet"); strings.TrimSpace(string(out)) != "0" {
		t.Fatalf("%s's %s has route_localnet %s: the device's own setting would route 127.0.0.1 whatever all says", node, kIfSink, out)
	}
	np := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), s.nodePort)
	for _, tc := range []struct {
		value   string
		dnat    bool // else no entry: sendto fails with EINVAL
		finding bool
	}{{"0", false, true}, {"1", true, false}} {
		if _, err := inNode(node, "sysctl", "-qw", key+"="+tc.value); err != nil {
			t.Fatal(err)
		}
		obs := l.Send(t, kernelprobe.Probe{From: kNodeF, Proto: "udp", Dst: np, Flows: 5})
		for _, o := range obs {
			// route_localnet 0: the reroute after DNAT (ip_route_me_harder)
			// refuses the source 127.0.0.1 off the loopback device
			// (__mkroute_output): the datagram dies unconfirmed, EINVAL.
			dnat := o.Verdict == kernelprobe.DNAT && slices.Contains(s.eps, o.Endpoint)
			refused := o.Raw == "" && o.Errno == syscall.EINVAL
			if tc.dnat && !dnat || !tc.dnat && !refused {
				t.Errorf("kernel, %s=%s: udp from the node to %s: flow %d %s (%v, errno %v, entry %q); want DNAT to a serving endpoint: %v",
					key, tc.value, np, o.Flow, o.Verdict, o.Endpoint, o.Errno, o.Raw, tc.dnat)
			}
		}
		r := readCtFlows(t, node)
		vip, local := listUDP(t, node, s.vip.Addr(), 0), listUDP(t, node, np.Addr(), np.Port())
		g := r.group(s.sp)
		t.Logf("%s=%s: %d flows to %s: %s (errno %v); routeLocalnetOff %v; plugin %s %d entries, conntrack -L %d to the cluster IP + %d to %s",
			key, tc.value, len(obs), np, obs[0].Verdict, obs[0].Errno, r.has("routeLocalnetOff"), s.sp, g.Entries, vip.total, local.total, np)
		if got := r.has("routeLocalnetOff"); got != tc.finding {
			t.Errorf("plugin, %s=%s on %s: routeLocalnetOff reported %v, want %v", key, tc.value, node, got, tc.finding)
		}
		if g.Entries != vip.total+local.total || g.Stale != 0 {
			t.Errorf("plugin: %s has %d entries, %d stale; conntrack -L lists %d to %s and %d to %s, none stale",
				s.sp, g.Entries, g.Stale, vip.total, s.vip.Addr(), local.total, np)
		}
	}
	if _, err := inNode(node, "sysctl", "-qw", key+"="+was); err != nil {
		t.Error(err)
	}
}

// setNodeSysctl sets key in node's namespace ("" leaves it) and puts it
// back at the end of the test, a failed one included; it returns what it was.
func setNodeSysctl(t *testing.T, node, key, value string) string {
	t.Helper()
	out, err := inNode(node, "sysctl", "-n", key)
	if err != nil {
		t.Fatal(err)
	}
	was := strings.TrimSpace(string(out))
	t.Cleanup(func() {
		if _, err := inNode(node, "sysctl", "-qw", key+"="+was); err != nil {
			t.Errorf("putting back %s=%s in %s: %v", key, was, node, err)
		}
	})
	if value != "" {
		if _, err := inNode(node, "sysctl", "-qw", key+"="+value); err != nil {
			t.Fatal(err)
		}
	}
	return was
}

// udpListed is what `conntrack -L -p udp -d ADDR [--dport P]` lists in a
// node's namespace: entries by reply source (the endpoint after DNAT).
type udpListed struct {
	total   int
	byReply map[netip.AddrPort]int
}

func listUDP(t *testing.T, node string, dst netip.Addr, dport uint16) udpListed {
	t.Helper()
	args := []string{"-L", "-p", "udp", "-d", dst.String()}
	if dport != 0 {
		args = append(args, "--dport", strconv.Itoa(int(dport)))
	}
	out, err := inNode(node, "conntrack", args...)
	if err != nil {
		t.Fatalf("conntrack %s in %s: %v", strings.Join(args, " "), node, err)
	}
	l := udpListed{byReply: map[netip.AddrPort]int{}}
	for _, line := range strings.Split(string(out), "\n") {
		var srcs, sports []string
		for _, f := range strings.Fields(line) {
			switch k, v, _ := strings.Cut(f, "="); k {
			case "src":
				srcs = append(srcs, v)
			case "sport":
				sports = append(sports, v)
			}
		}
		if len(srcs) < 2 || len(sports) < 2 {
			continue
		}
		reply, err := netip.ParseAddrPort(srcs[1] + ":" + sports[1])
		if err != nil {
			t.Fatalf("conntrack -L in %s: %q: %v", node, line, err)
		}
		l.total++
		l.byReply[reply]++
	}
	return l
}

// ctFlowsReport is what this test reads of `conntrack -o json`.
type ctFlowsReport struct {
	Facts *struct {
		Groups []ctFlowsGroup `json:"groups"`
	} `json:"facts"`
	Problems []struct {
		Kind     string `json:"kind"`
		Severity string `json:"severity"`
		Subject  string `json:"subject"`
	} `json:"problems"`
}

type ctFlowsGroup struct {
	ServicePort string `json:"servicePort"`
	Entries     int    `json:"entries"`
	Stale       int    `json:"stale"`
	ByCause     []struct {
		Cause   string `json:"cause"`
		Entries int    `json:"entries"`
	} `json:"byCause"`
}

func readCtFlows(t *testing.T, node string) ctFlowsReport {
	t.Helper()
	start := time.Now()
	var r ctFlowsReport
	errOut := conntrackJSON(t, node, &r)
	if r.Facts == nil {
		t.Fatalf("conntrack --node %s: no facts (the table was not read)\n%s", node, errOut)
	}
	t.Logf("conntrack --node %s read in %s", node, time.Since(start).Round(10*time.Millisecond))
	return r
}

func (r ctFlowsReport) group(sp string) ctFlowsGroup {
	for _, g := range r.Facts.Groups {
		if g.ServicePort == sp {
			return g
		}
	}
	return ctFlowsGroup{}
}

func (r ctFlowsReport) has(kind string) bool {
	for _, p := range r.Problems {
		if p.Kind == kind {
			return true
		}
	}
	return false
}

// about are the problems whose subject is sp (of the kinds given, or any).
func (r ctFlowsReport) about(sp string, kinds ...string) []string {
	var out []string
	for _, p := range r.Problems {
		if p.Subject == sp && (len(kinds) == 0 || slices.Contains(kinds, p.Kind)) {
			out = append(out, p.Severity+" "+p.Kind)
		}
	}
	return out
}
