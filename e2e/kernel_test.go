//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/proxyrules/kubectl-proxyrules/internal/kernelprobe"
)

// Ground truth from the real kernel (issue 27): `kubectl proxyrules trace`
// run live against the cluster, held against what the node's kernel does
// to real new connections under kube-proxy's real rules.
//
// A kernelprobe Lab is attached to each node namespace (node-a: iptables
// mode, iptables-nft, large-cluster mode; node-b: nftables mode): a sink
// behind routes for the Service CIDR, the cluster CIDR, the load-balancer
// and external IPs and the outside clients' network, which swallows what
// the rules route away so that its conntrack entry is confirmed; a pod on
// the node's podCIDR that is no endpoint (x.x.x.250); an outside client on
// a veth of its own, inside the lb Service's source range (203.0.113.7) or,
// in a lab of its own, outside it (203.0.113.200). The node's own
// interfaces, addresses and routes (kwok's and kube-proxy's) are left
// alone; everything the lab adds goes at the end of the test, its sysctls
// are put back, and the harness checks no lab namespace is left.
//
// For each Service shape of the scenario (scenario_test.go) and each way it
// is reached (from the node, a pod on it, a client outside), trace's
// outcomes of a new client (no assumption that holds: no affinity record)
// are compared with what conntrack says of a few hundred real SYNs or
// datagrams: the same verdicts, every endpoint the kernel used among
// trace's, none trace gives a share to unseen, the shares by chi-square
// (p ≥ 0.001, one retry on fresh flows), the same masquerade (the node's
// own flows show only random-fully's new source port). Then one more flow
// is traced with nft monitor trace, and the chains in which a rule matched
// are compared with trace's path for that outcome (see kernelRuleChains).
//
// TestKernelFaults changes the live rules as another writer would (iptables
// or nft in the node), probes, reads the rules again, and holds `trace
// --from-dump` of what the node had while probing against the kernel (and
// the live trace, once per fault, when kube-proxy did not re-sync in
// between); the rules are put back after each fault, a failed test
// included.

// kernelScenario makes sure the scenario's Services exist: TestMapLiveNodes
// creates them (and leaves them changed: a Service deleted, two scaled
// down); run alone, the kernel tests create them as its first two steps do.
func kernelScenario(t *testing.T) {
	t.Helper()
	if _, err := run(nil, "kubectl", "get", "namespace", nsScenario); err == nil {
		return
	}
	t.Logf("namespace %s missing (TestMapLiveNodes did not run): creating the scenario's Services", nsScenario)
	createScenario(t)
}

// kSvc is a Service of the scenario as the API server has it.
type kSvc struct {
	name        string
	clusterIP   netip.Addr
	ports       map[string]kPort // by port name ("" for an unnamed port)
	externalIPs []netip.Addr
	lbIP        netip.Addr
	v6          bool
}

type kPort struct {
	port, nodePort uint16
	proto          string // tcp, udp
}

func readKServices(t *testing.T) map[string]kSvc {
	t.Helper()
	var list struct {
		Items []struct {
			Metadata struct{ Name string }
			Spec     struct {
				ClusterIP   string   `json:"clusterIP"`
				ClusterIPs  []string `json:"clusterIPs"`
				ExternalIPs []string `json:"externalIPs"`
				Ports       []struct {
					Name     string
					Port     uint16
					NodePort uint16 `json:"nodePort"`
					Protocol string
				}
			}
			Status struct {
				LoadBalancer struct {
					Ingress []struct{ IP string }
				} `json:"loadBalancer"`
			}
		}
	}
	if err := json.Unmarshal(kubectl(t, "-n", nsScenario, "get", "services", "-o", "json"), &list); err != nil {
		t.Fatal(err)
	}
	out := map[string]kSvc{}
	for _, it := range list.Items {
		s := kSvc{name: it.Metadata.Name, ports: map[string]kPort{}}
		if a, err := netip.ParseAddr(it.Spec.ClusterIP); err == nil {
			s.clusterIP = a
		}
		for _, ip := range it.Spec.ClusterIPs {
			if a, err := netip.ParseAddr(ip); err == nil && a.Is6() {
				s.v6 = true
			}
		}
		for _, ip := range it.Spec.ExternalIPs {
			s.externalIPs = append(s.externalIPs, netip.MustParseAddr(ip))
		}
		if ing := it.Status.LoadBalancer.Ingress; len(ing) > 0 && ing[0].IP != "" {
			s.lbIP = netip.MustParseAddr(ing[0].IP)
		}
		for _, p := range it.Spec.Ports {
			s.ports[p.Name] = kPort{port: p.Port, nodePort: p.NodePort, proto: strings.ToLower(p.Protocol)}
		}
		out[s.name] = s
	}
	return out
}

// kCase is one Service entry reached one way.
type kCase struct {
	name  string
	from  kernelprobe.From
	proto string
	dst   netip.AddrPort
	want  string // the verdict every kernel flow should have: the premise of the case
	alt   bool   // from the outside client outside lb's source ranges (a lab of its own)
}

const (
	kPod     = kernelprobe.FromPod
	kNodeF   = kernelprobe.FromNode
	kOutside = kernelprobe.FromOutside
)

// kernelCases are the Service shapes of the scenario, reached from the
// node, a pod on it and outside, with what the kernel must do (the
// premise; the outcomes and their shares are trace's to say).
func kernelCases(t *testing.T, n kNode, svcs map[string]kSvc) []kCase {
	t.Helper()
	get := func(name, port string) (kSvc, kPort) {
		s, ok := svcs[name]
		if !ok {
			t.Fatalf("no Service %s/%s", nsScenario, name)
		}
		p, ok := s.ports[port]
		if !ok {
			t.Fatalf("Service %s/%s has no port %q", nsScenario, name, port)
		}
		return s, p
	}
	cip := func(name, port string) (string, netip.AddrPort) {
		s, p := get(name, port)
		return p.proto, netip.AddrPortFrom(s.clusterIP, p.port)
	}
	np := func(name, port string) (string, netip.AddrPort) {
		_, p := get(name, port)
		if p.nodePort == 0 {
			t.Fatalf("%s has no node port", name)
		}
		return p.proto, netip.AddrPortFrom(n.ip, p.nodePort)
	}
	lb := func(name, port string) (string, netip.AddrPort) {
		s, p := get(name, port)
		if !s.lbIP.IsValid() {
			t.Fatalf("%s has no load-balancer IP", name)
		}
		return p.proto, netip.AddrPortFrom(s.lbIP, p.port)
	}
	ext := func(name, port string) (string, netip.AddrPort) {
		s, p := get(name, port)
		if len(s.externalIPs) == 0 {
			t.Fatalf("%s has no external IP", name)
		}
		return p.proto, netip.AddrPortFrom(s.externalIPs[0], p.port)
	}
	c := func(name string, from kernelprobe.From, entry func(string, string) (string, netip.AddrPort), svc, port, want string) kCase {
		proto, dst := entry(svc, port)
		return kCase{name: name, from: from, proto: proto, dst: dst, want: want}
	}
	const dnat, drop, reject = kernelprobe.DNAT, kernelprobe.Drop, kernelprobe.Reject
	// Where a Service with a Local policy has no endpoint on this node.
	remote := map[string]string{"node-a": drop, "node-b": dnat}[n.name]
	cases := []kCase{
		c("clusterip cluster IP (3 endpoints) from a pod", kPod, cip, "clusterip", "http", dnat),
		c("clusterip cluster IP (3 endpoints) from the node", kNodeF, cip, "clusterip", "http", dnat),
		c("clusterip dns (udp) cluster IP from a pod", kPod, cip, "clusterip", "dns", dnat),
		c("clusterip dns (udp) cluster IP from the node", kNodeF, cip, "clusterip", "dns", dnat),
		c("unnamed port cluster IP from a pod", kPod, cip, "unnamed", "", dnat),
		c("nodeport node port from outside", kOutside, np, "nodeport", "http", dnat),
		c("nodeport node port from a pod", kPod, np, "nodeport", "http", dnat),
		c("nodeport node port from the node", kNodeF, np, "nodeport", "http", dnat),
		c("lb load-balancer IP from outside inside the source ranges", kOutside, lb, "lb", "https", dnat),
		c("lb load-balancer IP from a pod (outside the source ranges)", kPod, lb, "lb", "https", drop),
		c("lb load-balancer IP from the node (outside the source ranges)", kNodeF, lb, "lb", "https", drop),
		c("externalip external IP from outside", kOutside, ext, "externalip", "http", dnat),
		c("externalip external IP from a pod", kPod, ext, "externalip", "http", dnat),
		c("externalip external IP from the node", kNodeF, ext, "externalip", "http", dnat),
		c("etp-local load-balancer IP (eTP Local) from outside", kOutside, lb, "etp-local", "http", dnat),
		c("etp-local load-balancer IP (eTP Local) from a pod", kPod, lb, "etp-local", "http", dnat),
		c("etp-local load-balancer IP (eTP Local) from the node", kNodeF, lb, "etp-local", "http", dnat),
		c("etp-local node port (eTP Local) from outside", kOutside, np, "etp-local", "http", dnat),
		c("etp-local node port (eTP Local) from a pod", kPod, np, "etp-local", "http", dnat),
		c("etp-local node port (eTP Local) from the node", kNodeF, np, "etp-local", "http", dnat),
		c("etp-local-remote node port (eTP Local, endpoint on node-b) from outside", kOutside, np, "etp-local-remote", "http", remote),
		c("etp-local-remote node port (eTP Local, endpoint on node-b) from a pod", kPod, np, "etp-local-remote", "http", dnat),
		c("etp-local-remote node port (eTP Local, endpoint on node-b) from the node", kNodeF, np, "etp-local-remote", "http", dnat),
		c("itp-local cluster IP (iTP Local) from a pod", kPod, cip, "itp-local", "http", dnat),
		c("itp-local cluster IP (iTP Local) from the node", kNodeF, cip, "itp-local", "http", dnat),
		c("itp-local-remote cluster IP (iTP Local, endpoint on node-b) from a pod", kPod, cip, "itp-local-remote", "http", remote),
		c("itp-local-remote cluster IP (iTP Local, endpoint on node-b) from the node", kNodeF, cip, "itp-local-remote", "http", remote),
		c("no-endpoints cluster IP from a pod", kPod, cip, "no-endpoints", "http", reject),
		c("no-endpoints cluster IP from the node", kNodeF, cip, "no-endpoints", "http", reject),
		c("scaled cluster IP (scaled down) from a pod", kPod, cip, "scaled", "http", dnat),
	}
	s, _ := get("clusterip", "http")
	cases = append(cases, strayCases(t, n, s)...)
	// Node ports on 127.0.0.1, iptables mode only (kube-proxy's
	// localhost node ports, route_localnet=1); nftables mode has none, and
	// TCP to a node port nothing listens on would be reset.
	if n.mode == "iptables" {
		_, p := get("nodeport", "http")
		cases = append(cases, kCase{name: "nodeport node port on 127.0.0.1 from the node", from: kNodeF, proto: "tcp",
			dst: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), p.nodePort), want: dnat})
	}
	// kube-proxy applies the source ranges to the load-balancer IP only.
	alt := []kCase{
		c("lb load-balancer IP from outside outside the source ranges", kOutside, lb, "lb", "https", drop),
		c("lb node port from outside outside the source ranges", kOutside, np, "lb", "https", dnat),
	}
	for _, a := range alt {
		a.alt = true
		cases = append(cases, a)
	}
	return cases
}

// strayCases are flows no Service port takes: a cluster IP on a port it
// does not serve and an address of the Service CIDR no Service has
// (iptables mode lets both through un-DNATed, into the sink; nftables mode
// rejects the one and drops the other: cluster-ips-check), and a datagram
// of the node's own to a loopback port nothing listens on: delivered (UDP
// keeps its entry), not a Service at all; in iptables mode past
// KUBE-FIREWALL's "block incoming localnet connections", which only a
// source off 127.0.0.0/8 meets.
func strayCases(t *testing.T, n kNode, clusterip kSvc) []kCase {
	t.Helper()
	notServed := map[string]string{"iptables": kernelprobe.Accept, "nftables": kernelprobe.Reject}[n.mode]
	unallocated := map[string]string{"iptables": kernelprobe.Accept, "nftables": kernelprobe.Drop}[n.mode]
	if n.mode == "nftables" && !unallocatedDropWritten(t, n.name) {
		unallocated = kernelprobe.Accept // trace and kernel must still agree on it
	}
	return []kCase{
		{name: "clusterip cluster IP on a port it does not serve, from a pod", from: kPod, proto: "tcp", dst: netip.AddrPortFrom(clusterip.clusterIP, 81), want: notServed},
		{name: "an unallocated address of the Service CIDR, from a pod", from: kPod, proto: "tcp", dst: netip.AddrPortFrom(unallocatedIP(t), 80), want: unallocated},
		{name: "udp to 127.0.0.1, no Service, from the node", from: kNodeF, proto: "udp", dst: netip.MustParseAddrPort("127.0.0.1:9"), want: kernelprobe.Accept},
	}
}

// unallocatedDropWritten says whether kube-proxy's cluster-ips-check chain
// on node drops the Service CIDR's unallocated addresses. kube-proxy
// v1.37 writes that rule only in a full sync, and learning the
// ServiceCIDRs does not start one (OnServiceCIDRsChanged): when its first
// full sync came before its ServiceCIDR informer did, the rule is missing
// until the next, an hour later. So the case's premise is read from the
// node, after a while to let a sync under way land.
func unallocatedDropWritten(t *testing.T, node string) bool {
	t.Helper()
	const rule = "Drop traffic to unallocated ClusterIPs"
	var out []byte
	for begun := time.Now(); time.Since(begun) < 20*time.Second; time.Sleep(time.Second) {
		var err error
		if out, err = inNode(node, "nft", "list", "chain", "ip", "kube-proxy", "cluster-ips-check"); err == nil && strings.Contains(string(out), rule) {
			return true
		}
	}
	t.Logf("kube-proxy on %s has not written %q in cluster-ips-check (it does so only in a full sync): the unallocated address is expected to pass un-DNATed\n%s", node, rule, out)
	return false
}

// unallocatedIP is an address of the Service CIDR (10.96.0.0/16) that no
// Service of the cluster has.
func unallocatedIP(t *testing.T) netip.Addr {
	t.Helper()
	taken := map[string]bool{}
	for _, ip := range strings.Fields(string(kubectl(t, "get", "services", "-A", "-o", `jsonpath={range .items[*]}{.spec.clusterIP}{" "}{end}`))) {
		taken[ip] = true
	}
	for i := 254; i > 0; i-- {
		if a := fmt.Sprintf("10.96.255.%d", i); !taken[a] {
			return netip.MustParseAddr(a)
		}
	}
	t.Fatal("no unallocated address in 10.96.255.0/24")
	return netip.Addr{}
}

// src is where a case's flows come from.
func (l *kLab) src(from kernelprobe.From) netip.Addr {
	switch from {
	case kPod:
		return l.PodIP
	case kOutside:
		return l.OutsideIP
	}
	return l.n.ip
}

// caseTraceArgs are trace's arguments for a case's flows: their source as
// the kernel picks it. A flow of the node's own is traced --from node, so
// that trace picks its source as the kernel does (127.0.0.1 to a loopback
// address); loopbackFromNode holds --from 127.0.0.1 to the kernel too.
func (l *kLab) caseTraceArgs(c kCase) []string {
	if c.from == kNodeF && c.dst.Addr().IsLoopback() {
		to := c.dst.String()
		if c.proto != "tcp" {
			to += "/" + c.proto
		}
		return []string{"--to", to, "--from", "node"}
	}
	return traceArgs(c.from, c.proto, c.dst, l.src(c.from), false)
}

func (l *kLab) send(t *testing.T, c kCase, srcIP netip.Addr, n int) []kernelprobe.Observation {
	t.Helper()
	return l.Send(t, kernelprobe.Probe{From: c.from, Proto: c.proto, Dst: c.dst, SrcIP: srcIP, Flows: n})
}

// runCases probes every case in l against its live trace (taken
// beforehand, four at a time), then traces one flow of it.
func runCases(t *testing.T, l *kLab, cases []kCase) {
	t.Helper()
	args := map[string][]string{}
	for _, c := range cases {
		args[c.name] = append([]string{"--node", l.n.name}, l.caseTraceArgs(c)...)
	}
	start := time.Now()
	traces := liveTraces(t, args)
	t.Logf("%d live traces of %s in %s", len(traces), l.n.name, time.Since(start).Round(10*time.Millisecond))
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l.forget(c.proto, c.dst)
			defer l.forget(c.proto, c.dst)
			pt := traces[c.name]
			src, _ := netip.ParseAddrPort(pt.Packet.Source)
			what := fmt.Sprintf("%s %s → %s (%s)", c.proto, src.Addr(), c.dst, c.from)
			ex := expectTrace(t, what, pt, c.from == kNodeF, "")
			obs := compare(t, what, ex, c.from == kNodeF, 0, func(n int) []kernelprobe.Observation { return l.send(t, c, netip.Addr{}, n) })
			premise(t, what, c.want, obs)
			l.checkPath(t, what, c.from, c.proto, c.dst, netip.Addr{}, ex)
			if t.Failed() {
				reproduce(t, l.n, c.name, nodeDump(t, l.n), l.caseTraceArgs(c))
			}
			if c.from == kNodeF && c.dst.Addr().IsLoopback() {
				loopbackFromNode(t, l, c, obs)
			}
		})
	}
}

// loopbackFromNode: the node's own flows to a loopback address leave from
// 127.0.0.1, and a packet from 127.0.0.1 can only be the node's: `trace
// --from 127.0.0.1` must walk it as the node's and agree with the kernel
// as --from node does (KUBE-FIREWALL's "block incoming localnet
// connections" tests the source).
func loopbackFromNode(t *testing.T, l *kLab, c kCase, obs []kernelprobe.Observation) {
	t.Helper()
	to := c.dst.String()
	if c.proto != "tcp" {
		to += "/" + c.proto
	}
	pt := mustTrace(t, "--node", l.n.name, "--to", to, "--from", "127.0.0.1")
	if pt.Packet.From != "node" || !strings.HasPrefix(pt.Packet.Source, "127.0.0.1:") {
		t.Errorf("trace --from 127.0.0.1 walked a flow from %s, source %s; want the node's, from 127.0.0.1", pt.Packet.From, pt.Packet.Source)
	}
	ex := expectTrace(t, "trace --from 127.0.0.1", pt, true, "")
	if ok, _, msg := fit(obs, ex, false); !ok {
		t.Errorf("trace --from 127.0.0.1 disagrees with the kernel: %s", msg)
	}
}

// reproduce keeps the node's rules and the cluster's objects where the
// report can point to them (the e2e logs directory, kept after teardown)
// and logs the offline trace command that gives trace's answer on them.
func reproduce(t *testing.T, n kNode, what string, dump []byte, args []string) {
	t.Helper()
	d := saveDump(t, n, what, dump)
	objs := saveFile(t, n, what+"-objects.json", kubectl(t, "get", "services,endpointslices,nodes", "-A", "-o", "json"))
	t.Logf("offline: kubectl proxyrules trace --from-dump %s --from-objects %s --node %s --node-ip %s %s",
		d, objs, n.name, n.ip, strings.Join(args, " "))
}

// kernelPrecheck skips a kernel test with one line when the machine cannot
// run it (kernelprobe.NewLab would skip each lab on its own).
func kernelPrecheck(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"ip", "nft", "conntrack", "sysctl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("kernel tests skipped: %s not installed (hack/e2e/deps.sh, make test-deps)", tool)
		}
	}
	for _, n := range nodes {
		if _, err := inNode(n, "cat", "/proc/net/nf_conntrack"); err != nil {
			t.Skipf("kernel tests skipped: cannot read %s's conntrack table (a kernel without CONFIG_NF_CONNTRACK_PROCFS?): %v", n, err)
		}
	}
}

// TestKernel: every Service shape of the scenario on both nodes, as the
// file comment says; ClientIP affinity first, over two endpoints.
func TestKernel(t *testing.T) {
	kernelPrecheck(t)
	start := time.Now()
	defer func() { t.Logf("TestKernel took %s", time.Since(start).Round(100*time.Millisecond)) }()
	kernelScenario(t)
	svcs := readKServices(t)
	v6 := 0
	for _, s := range svcs {
		if s.v6 {
			v6++
		}
	}
	if v6 == 0 {
		t.Log("no IPv6 flows: the cluster is IPv4 only (service CIDR 10.96.0.0/16)")
	} else {
		t.Logf("%d Services have an IPv6 cluster IP: not probed (the labs are IPv4)", v6)
	}
	defer noDebugPods(t)

	// ClientIP affinity over two endpoints (TestMapLiveNodes leaves one).
	top := t
	t.Run("affinity", func(t *testing.T) {
		affinityEndpoints(t, top, 2)
		for _, name := range nodes {
			t.Run(name, func(t *testing.T) {
				n := kernelNode(t, name)
				l := newKLab(t, n, kInRange)
				forgetRecords(t, n)
				t.Cleanup(func() { forgetRecords(t, n) })
				affinityOneClient(t, l, svcs["affinity"])
				affinityDistinct(t, l, svcs["affinity"])
			})
		}
	})

	for _, name := range nodes {
		t.Run(name, func(t *testing.T) {
			n := kernelNode(t, name)
			cases := kernelCases(t, n, svcs)
			var main, alt []kCase
			for _, c := range cases {
				if c.alt {
					alt = append(alt, c)
				} else {
					main = append(main, c)
				}
			}
			t.Run("client inside the source ranges", func(t *testing.T) {
				l := newKLab(t, n, kInRange)
				checkCluster(t, n)
				runCases(t, l, main)
			})
			t.Run("client outside the source ranges", func(t *testing.T) {
				runCases(t, newKLab(t, n, kOutRange), alt)
			})
		})
	}
}

// affinityEndpoints gives the affinity Service its scenario endpoints
// again when it has fewer than want (TestMapLiveNodes' last step took one
// away), and puts the EndpointSlice back as it was at the end of the
// subtest t. kube-proxy then takes the endpoint away as it did the first
// time: node-a (large-cluster mode) keeps its chains, stale, as
// TestMapLiveNodes left them; node-b flushes its endpoint chain and deletes
// it on its next sync (kube-proxy 1.37 syncs on a change, and hourly: with
// no further change the flushed chain stays, as TestMapLiveNodes left it).
// The end of top checks node-b has no affinity endpoint chain it did not
// have before.
func affinityEndpoints(t, top *testing.T, want int) {
	t.Helper()
	var slice struct {
		Endpoints []json.RawMessage
	}
	name := sliceName(svcDef{name: "affinity"})
	if err := json.Unmarshal(kubectl(t, "-n", nsScenario, "get", "endpointslice", name, "-o", "json"), &slice); err != nil {
		t.Fatal(err)
	}
	if len(slice.Endpoints) >= want {
		return
	}
	var d svcDef
	for _, s := range scenarioServices() {
		if s.name == "affinity" {
			d = s
		}
	}
	chains := func() (map[string]bool, error) {
		out, err := inNode("node-b", "nft", "list", "table", "ip", "kube-proxy")
		m := map[string]bool{}
		for _, c := range regexp.MustCompile(`(?m)^\s*chain (endpoint-\S+/affinity/\S+) \{`).FindAllStringSubmatch(string(out), -1) {
			m[c[1]] = true
		}
		return m, err
	}
	before, err := chains()
	if err != nil {
		t.Fatal(err)
	}
	patch := func(eps any) {
		p, _ := json.Marshal([]any{map[string]any{"op": "replace", "path": "/endpoints", "value": eps}})
		marks := markAll(t)
		kubectl(t, "-n", nsScenario, "patch", "endpointslice", name, "--type=json", "-p", string(p))
		waitAll(t, marks, 0, 1)
	}
	patch(endpointObjects(d.eps))
	t.Logf("affinity: %d endpoints again for the test (it had %d)", len(d.eps), len(slice.Endpoints))
	t.Cleanup(func() { patch(slice.Endpoints) })
	top.Cleanup(func() {
		// kube-proxy's nftables mode deletes a stale chain only at a sync a
		// second or more after it went stale (proxier.go, staleChains), and
		// without a change its next sync is an hour away: an EndpointSlice
		// of no Service is such a change, and makes no chain.
		time.Sleep(1100 * time.Millisecond)
		nudge := svcDef{ns: nsScenario, name: "e2e-nudge", ports: d.ports, eps: []endpoint{{ip: "10.244.9.250"}}}
		marks := markAll(top)
		createObjects(top, sliceObject(nudge))
		waitAll(top, marks, 0, 1)
		marks = markAll(top)
		kubectl(top, "-n", nsScenario, "delete", "endpointslice", sliceName(nudge))
		waitAll(top, marks, 0, 1)
		waitFor(top, 10*time.Second, "node-b has the affinity endpoint chains it had before the test", func() error {
			now, err := chains()
			if err != nil {
				return err
			}
			for c := range now {
				if !before[c] {
					return fmt.Errorf("%s still there", c)
				}
			}
			return nil
		})
	})
}

// affinityOneClient: ClientIP affinity, many flows from one client (the
// pod). Its first flow goes where a new client's may (trace's outcomes
// for a client without a record); then the kernel holds its record
// (iptables: an xt_recent list; nftables: the affinity set, which the
// rules list), and trace, for a client with that record, must send every
// later flow to the same endpoint, as the kernel does.
func affinityOneClient(t *testing.T, l *kLab, s kSvc) {
	c := kCase{name: "affinity cluster IP, one client", from: kPod, proto: "tcp", dst: netip.AddrPortFrom(s.clusterIP, s.ports["http"].port), want: kernelprobe.DNAT}
	t.Run("many flows from one pod", func(t *testing.T) {
		l.forget(c.proto, c.dst)
		defer l.forget(c.proto, c.dst)
		what := fmt.Sprintf("%s %s → %s (%s)", c.proto, l.PodIP, c.dst, c.from)
		args := append([]string{"--node", l.n.name}, traceArgs(c.from, c.proto, c.dst, l.PodIP, false)...)
		pt := mustTrace(t, args...)
		if pt.Affinity == nil {
			t.Errorf("%s: trace does not say ClientIP affinity applies: %s", what, pt.Summary)
		}
		ex := expectTrace(t, what+" (a new client)", pt, false, "")
		first := compare(t, what+" (a new client, its first flow)", ex, false, 1, func(n int) []kernelprobe.Observation { return l.send(t, c, netip.Addr{}, n) })
		premise(t, what, kernelprobe.DNAT, first)
		if t.Failed() {
			return
		}
		ep := first[0].Endpoint
		var back kExpect
		if l.n.mode == "iptables" {
			recs := recordsOf(t, l.n, l.PodIP)
			if len(recs) != 1 {
				t.Fatalf("%s: after its first flow the client has records in %v, want one", what, recs)
			}
			back = expectTrace(t, what+" (a client with a record in "+recs[0]+")", pt, false, recs[0])
		} else {
			// The affinity set now lists the client: trace reads it.
			pt2 := mustTrace(t, args...)
			if pt2.Affinity == nil || !pt2.Affinity.Known {
				t.Errorf("%s: trace does not say the rules list the client's record: %+v", what, pt2.Affinity)
			}
			back = expectTrace(t, what+" (a client the affinity set lists)", pt2, false, "")
		}
		want := kernelprobe.Outcome{Verdict: kernelprobe.DNAT, Endpoint: ep}.String()
		if len(back.shares) != 1 || back.shares[want] != 1 {
			t.Errorf("%s: after its first flow went to %v the kernel holds the client's record; trace says for such a client:\n  %s", what, ep, back.summary)
		}
		obs := compare(t, what+" (a returning client)", back, false, 100, func(n int) []kernelprobe.Observation { return l.send(t, c, netip.Addr{}, n) })
		t.Logf("%s: first flow to %v, then %s", what, ep, summarize(obs))
		l.checkPath(t, what+" (a returning client)", c.from, c.proto, c.dst, netip.Addr{}, back)
	})
}

// affinityDistinct: ClientIP affinity over many clients, one flow each
// (the node's own flows, from 100 client addresses of its own): they split
// as trace's shares for a new client say; then a few of them come back,
// each to its own endpoint.
func affinityDistinct(t *testing.T, l *kLab, s kSvc) {
	c := kCase{name: "affinity cluster IP, distinct clients", from: kNodeF, proto: "tcp", dst: netip.AddrPortFrom(s.clusterIP, s.ports["http"].port), want: kernelprobe.DNAT}
	t.Run("one flow from each of 100 clients", func(t *testing.T) {
		l.forget(c.proto, c.dst)
		defer l.forget(c.proto, c.dst)
		var srcs []netip.Addr
		var obs []kernelprobe.Observation
		var ex kExpect
		for try := 1; ; try++ {
			srcs = l.clients(t, 100)
			what := fmt.Sprintf("%s %s… → %s (node, 100 clients)", c.proto, srcs[0], c.dst)
			pt := mustTrace(t, append([]string{"--node", l.n.name}, traceArgs(c.from, c.proto, c.dst, srcs[0], true)...)...)
			ex = expectTrace(t, what, pt, true, "")
			obs = nil
			for i, src := range srcs {
				o := l.send(t, c, src, 1)
				o[0].Flow = i
				obs = append(obs, o...)
			}
			ok, fatal, msg := fit(obs, ex, false)
			t.Logf("%s: try %d: %s", what, try, msg)
			if ok {
				break
			}
			if fatal || try == 2 {
				t.Errorf("%s: the kernel disagrees with trace: %s\ntrace (a new client):\n  %s", what, msg, ex.summary)
				break
			}
		}
		checkNodeMasq(t, "distinct clients", ex, obs)
		premise(t, "distinct clients", c.want, obs)
		for i, src := range srcs[:5] {
			for _, o := range l.send(t, c, src, 3) {
				if o.Endpoint != obs[i].Endpoint {
					t.Errorf("client %v: first flow to %v, a later one to %v", src, obs[i].Endpoint, o.Endpoint)
				}
			}
		}
	})
}

// --- faults ----------------------------------------------------------------------

// A kFault is a change another writer makes to a node's live rules, with
// the probes that show it.
type kFault struct {
	node string
	name string
	// chains are the chains the fault changes (saved first, put back
	// after, and before each new attempt).
	chains func(t *testing.T, f *faultEnv) []chainSnap
	inject func(t *testing.T, f *faultEnv)
	probes []kProbe
	noMasq bool // premise: no flow is masqueraded under the fault
}

// kProbe is one set of flows under a fault: a case of kernelCases, or
// one node flow from each of clients fresh client addresses (ClientIP
// affinity), those given a record first in the affinity set record.
type kProbe struct {
	c       kCase
	clients int
	record  func(t *testing.T, f *faultEnv) string // nftables affinity set to put the clients in first
	want    string                                 // premise: every flow's verdict
}

// faultEnv is what a fault's functions see.
type faultEnv struct {
	n     kNode
	l     *kLab
	svcs  map[string]kSvc
	cases map[string]kCase
}

func (f *faultEnv) ipt(t *testing.T, args ...string) {
	t.Helper()
	mustRun(t, nil, "ip", append([]string{"netns", "exec", f.n.name, "iptables"}, args...)...)
}

func (f *faultEnv) nft(t *testing.T, args ...string) {
	t.Helper()
	mustRun(t, nil, "ip", append([]string{"netns", "exec", f.n.name, "nft"}, args...)...)
}

// svcChainJumps are the KUBE-SEP chains a KUBE-SVC chain jumps to, in
// order, with each rule's number in the chain (1-based, for iptables -D).
func (f *faultEnv) svcChainJumps(t *testing.T, svc string) (seps []string, nums []int) {
	t.Helper()
	out := mustRun(t, nil, "ip", "netns", "exec", f.n.name, "iptables-save", "-t", "nat")
	i := 0
	for _, line := range strings.Split(string(out), "\n") {
		if !strings.HasPrefix(line, "-A "+svc+" ") {
			continue
		}
		i++
		if m := regexp.MustCompile(`-j (KUBE-SEP-\S+)`).FindStringSubmatch(line); m != nil {
			seps, nums = append(seps, m[1]), append(nums, i)
		}
	}
	if len(seps) == 0 {
		t.Fatalf("%s: no jump to an endpoint chain in %s", f.n.name, svc)
	}
	return seps, nums
}

// iptSvc is the KUBE-SVC chain of a scenario service port (the oracle's name).
func iptSvc(t *testing.T, svc, port string) string {
	t.Helper()
	for _, d := range withNamespace(scenarioServices(), nsScenario) {
		if d.name != svc {
			continue
		}
		for name, o := range iptablesNames(d) {
			if o.kind == "service" && o.servicePort == nsScenario+"/"+svc+":"+port {
				return name
			}
		}
	}
	t.Fatalf("no KUBE-SVC chain for %s:%s", svc, port)
	return ""
}

// nftServiceChain is node-b's service chain of a scenario service port,
// and the endpoint chains it jumps to.
func (f *faultEnv) nftServiceChain(t *testing.T, svc, proto, port string) (chain string, endpoints []string) {
	t.Helper()
	for _, d := range withNamespace(scenarioServices(), nsScenario) {
		if d.name != svc {
			continue
		}
		for name, o := range nftablesNames(d) {
			if o.kind == "service" && o.servicePort == nsScenario+"/"+svc+":"+port && strings.EqualFold(o.protocol, proto) {
				chain = name
			}
		}
	}
	if chain == "" {
		t.Fatalf("no service chain for %s:%s", svc, port)
	}
	out := mustRun(t, nil, "ip", "netns", "exec", f.n.name, "nft", "list", "chain", "ip", "kube-proxy", chain)
	seen := map[string]bool{}
	for _, m := range regexp.MustCompile(`goto (endpoint-[^\s,}]+)`).FindAllStringSubmatch(string(out), -1) {
		if !seen[m[1]] {
			seen[m[1]] = true
			endpoints = append(endpoints, m[1])
		}
	}
	return chain, endpoints
}

// nftHandle is the handle of the rule of chain whose text contains what.
func (f *faultEnv) nftHandle(t *testing.T, chain, what string) string {
	t.Helper()
	out := mustRun(t, nil, "ip", "netns", "exec", f.n.name, "nft", "-a", "list", "chain", "ip", "kube-proxy", chain)
	for _, line := range strings.Split(string(out), "\n") {
		if i := strings.Index(line, "# handle "); i > 0 && strings.Contains(line[:i], what) && !strings.Contains(line[:i], "chain ") {
			return strings.TrimSpace(line[i+len("# handle "):])
		}
	}
	t.Fatalf("no rule with %q in chain %s:\n%s", what, chain, out)
	return ""
}

func kFaults() []kFault {
	const (
		cipPod  = "clusterip cluster IP (3 endpoints) from a pod"
		cipNode = "clusterip cluster IP (3 endpoints) from the node"
		noEPPod = "no-endpoints cluster IP from a pod"
		npOut   = "nodeport node port from outside"
		extOut  = "externalip external IP from outside"
	)
	probe := func(name, want string) kProbe { return kProbe{c: kCase{name: name}, want: want} }
	const dnat, drop, reject = kernelprobe.DNAT, kernelprobe.Drop, kernelprobe.Reject
	affinityNew := func(want string) kProbe {
		return kProbe{c: kCase{name: "affinity cluster IP from new clients", from: kNodeF}, clients: 40, want: want}
	}
	return []kFault{
		// (a) An endpoint chain emptied but still jumped to: it returns and
		// its share goes down the rest of the cascade (the middle one of
		// three: the first keeps 1/3, the last gets 2/3).
		{node: "node-a", name: "emptied endpoint chain",
			chains: func(t *testing.T, f *faultEnv) []chainSnap {
				seps, _ := f.svcChainJumps(t, iptSvc(t, "clusterip", "http"))
				return []chainSnap{snapChain(t, f.n, "nat", seps[1])}
			},
			inject: func(t *testing.T, f *faultEnv) {
				seps, _ := f.svcChainJumps(t, iptSvc(t, "clusterip", "http"))
				f.ipt(t, "-t", "nat", "-F", seps[1])
			},
			probes: []kProbe{probe(cipPod, dnat), probe(cipNode, dnat)}},
		// (b) The jump to the first of three endpoint chains deleted: the
		// other two split 1/2, 1/2.
		{node: "node-a", name: "jump to an endpoint chain deleted",
			chains: func(t *testing.T, f *faultEnv) []chainSnap {
				return []chainSnap{snapChain(t, f.n, "nat", iptSvc(t, "clusterip", "http"))}
			},
			inject: func(t *testing.T, f *faultEnv) {
				svc := iptSvc(t, "clusterip", "http")
				_, nums := f.svcChainJumps(t, svc)
				f.ipt(t, "-t", "nat", "-D", svc, strconv.Itoa(nums[0]))
			},
			probes: []kProbe{probe(cipPod, dnat)}},
		// (c) A DROP at the top of a kube-proxy chain. iptables refuses DROP
		// in nat, so it goes into filter's KUBE-SERVICES: for the cluster
		// IP it does nothing (filter runs after DNAT and sees the
		// endpoint); for a Service without endpoints it turns the reject
		// into a drop; for the original destination it stops every flow.
		{node: "node-a", name: "DROP for the cluster IP at the top of filter KUBE-SERVICES",
			chains: func(t *testing.T, f *faultEnv) []chainSnap {
				return []chainSnap{snapChain(t, f.n, "filter", "KUBE-SERVICES"), snapChain(t, f.n, "nat", iptSvc(t, "clusterip", "http"))}
			},
			inject: func(t *testing.T, f *faultEnv) {
				svc := iptSvc(t, "clusterip", "http")
				if out, err := inNode(f.n.name, "iptables", "-t", "nat", "-I", svc, "1", "-j", "DROP"); err == nil {
					t.Logf("iptables took DROP in nat %s (%s): taken out again", svc, out)
					f.ipt(t, "-t", "nat", "-D", svc, "1")
				} else {
					t.Logf("iptables -t nat -I %s 1 -j DROP is refused, as expected: %s", svc, firstLine(err.Error()))
				}
				f.ipt(t, "-t", "filter", "-I", "KUBE-SERVICES", "1", "-d", f.cases[cipPod].dst.Addr().String()+"/32", "-j", "DROP")
			},
			probes: []kProbe{probe(cipPod, dnat), probe(cipNode, dnat)}},
		{node: "node-a", name: "DROP for a Service without endpoints at the top of filter KUBE-SERVICES",
			chains: func(t *testing.T, f *faultEnv) []chainSnap {
				return []chainSnap{snapChain(t, f.n, "filter", "KUBE-SERVICES")}
			},
			inject: func(t *testing.T, f *faultEnv) {
				f.ipt(t, "-t", "filter", "-I", "KUBE-SERVICES", "1", "-d", f.cases[noEPPod].dst.Addr().String()+"/32", "-j", "DROP")
			},
			probes: []kProbe{probe(noEPPod, drop)}},
		{node: "node-a", name: "DROP for the original destination at the top of filter KUBE-SERVICES",
			chains: func(t *testing.T, f *faultEnv) []chainSnap {
				return []chainSnap{snapChain(t, f.n, "filter", "KUBE-SERVICES")}
			},
			inject: func(t *testing.T, f *faultEnv) {
				f.ipt(t, "-t", "filter", "-I", "KUBE-SERVICES", "1", "-m", "conntrack", "--ctorigdst", f.cases[cipPod].dst.Addr().String()+"/32", "-j", "DROP")
			},
			probes: []kProbe{probe(cipPod, drop), probe(cipNode, drop)}},
		// (d) The masquerade mark changed on one side: KUBE-MARK-MASQ sets
		// 0x8000 while KUBE-POSTROUTING still tests 0x4000: nothing is
		// masqueraded.
		{node: "node-a", name: "masquerade mark changed", noMasq: true,
			chains: func(t *testing.T, f *faultEnv) []chainSnap {
				return []chainSnap{snapChain(t, f.n, "nat", "KUBE-MARK-MASQ")}
			},
			inject: func(t *testing.T, f *faultEnv) {
				f.ipt(t, "-t", "nat", "-R", "KUBE-MARK-MASQ", "1", "-j", "MARK", "--set-xmark", "0x8000/0x8000")
			},
			probes: []kProbe{probe(npOut, dnat), probe(extOut, dnat), probe(cipNode, dnat)}},

		// node-b, nftables. (a) In nftables mode kube-proxy has endpoint
		// chains only for ClientIP affinity: the affinity Service's first
		// one emptied, new clients that go there fall off the service
		// chain un-DNATed, into cluster-ips-check's reject.
		{node: "node-b", name: "emptied affinity endpoint chain",
			chains: func(t *testing.T, f *faultEnv) []chainSnap {
				_, eps := f.nftServiceChain(t, "affinity", "tcp", "http")
				return []chainSnap{snapChain(t, f.n, "", eps[0])}
			},
			inject: func(t *testing.T, f *faultEnv) {
				_, eps := f.nftServiceChain(t, "affinity", "tcp", "http")
				f.nft(t, "flush", "chain", "ip", "kube-proxy", eps[0])
			},
			probes: []kProbe{affinityNew("")}},
		// (b) The service chain's jump to its endpoint chains for new
		// clients (the numgen vmap) deleted: new clients fall off into the
		// reject; clients with a record (given one with nft add element, as
		// their earlier flows would have) still go to their endpoint.
		{node: "node-b", name: "jump to the endpoint chains deleted",
			chains: func(t *testing.T, f *faultEnv) []chainSnap {
				svc, _ := f.nftServiceChain(t, "affinity", "tcp", "http")
				return []chainSnap{snapChain(t, f.n, "", svc)}
			},
			inject: func(t *testing.T, f *faultEnv) {
				svc, _ := f.nftServiceChain(t, "affinity", "tcp", "http")
				f.nft(t, "delete", "rule", "ip", "kube-proxy", svc, "handle", f.nftHandle(t, svc, "numgen"))
			},
			probes: []kProbe{affinityNew(reject), {c: kCase{name: "affinity cluster IP from clients with a record", from: kNodeF}, clients: 20, want: dnat,
				record: func(t *testing.T, f *faultEnv) string {
					_, eps := f.nftServiceChain(t, "affinity", "tcp", "http")
					return "affinity-" + strings.TrimPrefix(eps[0], "endpoint-")
				}}}},
		// (c) nft takes a drop in a nat chain: before any DNAT.
		{node: "node-b", name: "drop for the cluster IP at the top of services",
			chains: func(t *testing.T, f *faultEnv) []chainSnap {
				return []chainSnap{snapChain(t, f.n, "", "services")}
			},
			inject: func(t *testing.T, f *faultEnv) {
				f.nft(t, "insert", "rule", "ip", "kube-proxy", "services", "ip", "daddr", f.cases[cipPod].dst.Addr().String(), "drop")
			},
			probes: []kProbe{probe(cipPod, drop), probe(cipNode, drop)}},
		// (d) masquerading tests 0x8000 while the rules still set 0x4000.
		{node: "node-b", name: "masquerade mark changed", noMasq: true,
			chains: func(t *testing.T, f *faultEnv) []chainSnap {
				return []chainSnap{snapChain(t, f.n, "", "masquerading")}
			},
			inject: func(t *testing.T, f *faultEnv) {
				h := f.nftHandle(t, "masquerading", "meta mark & 0x00004000")
				f.nft(t, "replace", "rule", "ip", "kube-proxy", "masquerading", "handle", h,
					"meta", "mark", "&", "0x8000", "!=", "0", "meta", "mark", "set", "meta", "mark", "^", "0x8000", "masquerade", "fully-random")
			},
			probes: []kProbe{probe(npOut, dnat), probe(extOut, dnat), probe(cipNode, dnat)}},
	}
}

func firstLine(s string) string {
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			return l
		}
	}
	return s
}

// TestKernelFaults: each fault on the live rules of its node, made with the
// real tool in the node's namespace. kube-proxy may repair its rules on a
// later sync (on any Service or EndpointSlice change, and hourly): the
// rules are read right before and right after probing, and an attempt
// whose two readings differ is made again. trace --from-dump is run on the text read (with the cluster's
// objects, --node, --node-ip), and the live trace once per fault.
func TestKernelFaults(t *testing.T) {
	kernelPrecheck(t)
	start := time.Now()
	defer func() { t.Logf("TestKernelFaults took %s", time.Since(start).Round(100*time.Millisecond)) }()
	kernelScenario(t)
	svcs := readKServices(t)
	defer noDebugPods(t)
	objects := writeTemp(t, "objects.json", kubectl(t, "get", "services,endpointslices,nodes", "-A", "-o", "json"))
	byNode := map[string][]kFault{}
	for _, f := range kFaults() {
		byNode[f.node] = append(byNode[f.node], f)
	}
	for _, name := range nodes {
		t.Run(name, func(t *testing.T) {
			n := kernelNode(t, name)
			l := newKLab(t, n, kInRange)
			forgetRecords(t, n)
			t.Cleanup(func() { forgetRecords(t, n) })
			env := &faultEnv{n: n, l: l, svcs: svcs, cases: map[string]kCase{}}
			for _, c := range kernelCases(t, n, svcs) {
				env.cases[c.name] = c
			}
			for _, f := range byNode[name] {
				t.Run(f.name, func(t *testing.T) { runFault(t, env, f, objects) })
			}
		})
	}
}

// probeResult is what one probe of a fault saw.
type probeResult struct {
	p    kProbe
	c    kCase
	srcs []netip.Addr // the clients (clients probes), or the flows' one source
	obs  []kernelprobe.Observation
}

func runFault(t *testing.T, f *faultEnv, fault kFault, objects string) {
	n, l := f.n, f.l
	snaps := fault.chains(t, f)
	t.Cleanup(func() { restoreChecked(t, snaps) })
	healthy := normDump(n, nodeDump(t, n))
	f.checkProbeCases(t, fault)
	const flows = 300
	dir := t.TempDir()
	resyncs, unlucky := 0, 0
	for attempt := 1; ; attempt++ {
		if attempt > 1 {
			restoreChecked(t, snaps)
		}
		fault.inject(t, f)
		beforeRaw := nodeDump(t, n)
		before := normDump(n, beforeRaw)
		if before == healthy {
			t.Fatalf("the fault changed nothing in the node's rules")
		}
		// The probes; records first, then the rules read right before.
		results := f.startProbes(t, fault)
		beforeRaw = nodeDump(t, n)
		// The live trace, once, of the first probe: before its flows (a
		// client probe's flows give its clients affinity records), judged
		// when the rules read after probing are still those read here.
		r0 := results[0]
		live := mustTrace(t, append([]string{"--node", n.name}, traceArgs(r0.c.from, r0.c.proto, r0.c.dst, r0.srcs[0], r0.p.clients > 0)...)...)
		f.sendProbes(t, results, flows)
		afterRaw := nodeDump(t, n)
		if after := normDump(n, afterRaw); after != normDump(n, beforeRaw) {
			resyncs++
			t.Logf("attempt %d: the rules changed while probing (kube-proxy re-synced?):\n%s", attempt, dumpDiff(normDump(n, beforeRaw), after))
			if resyncs == 3 {
				t.Fatalf("the rules changed while probing in %d attempts", resyncs)
			}
			continue
		}
		// trace on what the node had while probing: the text read right
		// after, the same as right before but for the members of
		// nftables' affinity sets, which the flows themselves add (a
		// client probe is traced on the text read before: its clients
		// are new there).
		afterFile := writeTempIn(t, dir, fmt.Sprintf("after-%d.txt", attempt), afterRaw)
		beforeFile := writeTempIn(t, dir, fmt.Sprintf("before-%d.txt", attempt), beforeRaw)
		dumps := map[string][]byte{afterFile: afterRaw, beforeFile: beforeRaw}
		j := f.judgeProbes(t, results, objects, afterFile, beforeFile)
		if !j.allOK && !j.fatal && unlucky == 0 {
			unlucky++
			t.Logf("attempt %d: a split did not fit; once more on fresh flows:\n%s", attempt, strings.Join(j.msgs, "\n"))
			continue
		}
		f.reportProbes(t, fault, attempt, results, j, dumps)
		f.checkLiveTrace(t, fault, r0, live, beforeRaw)
		// One flow of each probe traced (nft monitor trace), under the
		// same rules; a client probe's from one more client in the same
		// state (its own clients have records now).
		f.traceProbePaths(t, results, j.exps)
		if normDump(n, nodeDump(t, n)) != normDump(n, afterRaw) {
			t.Errorf("the rules changed while the paths were traced: the paths may not be the fault's")
		}
		for _, r := range results {
			l.forget(r.c.proto, r.c.dst)
		}
		return
	}
}

// checkProbeCases fails t unless every case a fault's probes name exists.
func (f *faultEnv) checkProbeCases(t *testing.T, fault kFault) {
	for _, p := range fault.probes {
		if p.clients == 0 {
			if _, ok := f.cases[p.c.name]; !ok {
				t.Fatalf("no case %q", p.c.name)
			}
		}
	}
}

// startProbes readies each probe of a fault: its case and its sources (a
// client probe's fresh clients, put in its affinity set first when it
// names one).
func (f *faultEnv) startProbes(t *testing.T, fault kFault) []*probeResult {
	l := f.l
	var results []*probeResult
	for _, p := range fault.probes {
		r := &probeResult{p: p, c: f.cases[p.c.name]}
		if p.clients > 0 {
			r.c = kCase{name: p.c.name, from: kNodeF, proto: "tcp", dst: netip.AddrPortFrom(f.svcs["affinity"].clusterIP, f.svcs["affinity"].ports["http"].port)}
			r.srcs = l.clients(t, p.clients)
			if p.record != nil {
				var els []string
				for _, s := range r.srcs {
					els = append(els, s.String())
				}
				f.nft(t, "add", "element", "ip", "kube-proxy", p.record(t, f), "{ "+strings.Join(els, ", ")+" }")
			}
		} else {
			r.srcs = []netip.Addr{l.src(r.c.from)}
		}
		results = append(results, r)
	}
	return results
}

// sendProbes sends each probe's flows: one from each client of a client
// probe, flows from the case's source otherwise.
func (f *faultEnv) sendProbes(t *testing.T, results []*probeResult, flows int) {
	l := f.l
	for _, r := range results {
		l.forget(r.c.proto, r.c.dst)
		if r.p.clients > 0 {
			for i, s := range r.srcs {
				o := l.send(t, r.c, s, 1)
				o[0].Flow = i
				r.obs = append(r.obs, o...)
			}
		} else {
			r.obs = l.send(t, r.c, netip.Addr{}, flows)
		}
	}
}

// probeJudgement is trace --from-dump's expectation for each probe and
// how the kernel's flows fit it.
type probeJudgement struct {
	exps         []kExpect
	msgs         []string
	used         []string // the dump file each probe was traced on
	allOK, fatal bool
}

// judgeProbes traces each probe on the dump read after probing (a client
// probe on the one read before) and fits its flows to the trace.
func (f *faultEnv) judgeProbes(t *testing.T, results []*probeResult, objects, afterFile, beforeFile string) *probeJudgement {
	n := f.n
	j := &probeJudgement{allOK: true}
	for _, r := range results {
		dump := afterFile
		if r.p.clients > 0 {
			dump = beforeFile
		}
		j.used = append(j.used, dump)
		args := append([]string{"--from-dump", dump, "--from-objects", objects, "--node", n.name, "--node-ip", n.ip.String()},
			traceArgs(r.c.from, r.c.proto, r.c.dst, r.srcs[0], r.p.clients > 0)...)
		what := fmt.Sprintf("%s: %s %s → %s (%s)", r.c.name, r.c.proto, r.srcs[0], r.c.dst, r.c.from)
		ex := expectTrace(t, what, mustTrace(t, args...), r.c.from == kNodeF, "")
		j.exps = append(j.exps, ex)
		ok, fat, msg := fit(r.obs, ex, r.c.from != kNodeF)
		j.msgs = append(j.msgs, what+": "+msg)
		j.allOK, j.fatal = j.allOK && ok, j.fatal || fat
	}
	return j
}

// reportProbes fails t where the kernel's flows do not fit trace
// --from-dump, a node flow's masquerade disagrees, or a premise of the
// fault does not hold.
func (f *faultEnv) reportProbes(t *testing.T, fault kFault, attempt int, results []*probeResult, j *probeJudgement, dumps map[string][]byte) {
	n := f.n
	for i, r := range results {
		t.Logf("attempt %d: %s", attempt, j.msgs[i])
		if ok, _, _ := fit(r.obs, j.exps[i], r.c.from != kNodeF); !ok {
			t.Errorf("the kernel disagrees with trace --from-dump: %s\ntrace:\n  %s\ndump: %s", j.msgs[i], j.exps[i].summary, saveDump(t, n, fault.name, dumps[j.used[i]]))
		}
		if r.c.from == kNodeF {
			checkNodeMasq(t, r.c.name, j.exps[i], r.obs)
		}
		premise(t, r.c.name, r.p.want, r.obs)
		if fault.noMasq {
			for _, o := range r.obs {
				if o.Masqueraded {
					t.Errorf("%s: premise: nothing masqueraded under the fault; flow %v was: %s", r.c.name, o.Src, o.Raw)
					break
				}
			}
		}
	}
}

// checkLiveTrace fails t unless the live trace of the first probe, taken
// before its flows, fits them.
func (f *faultEnv) checkLiveTrace(t *testing.T, fault kFault, r0 *probeResult, live tTrace, beforeRaw []byte) {
	n := f.n
	ex := expectTrace(t, "live "+r0.c.name, live, r0.c.from == kNodeF, "")
	if ok, _, msg := fit(r0.obs, ex, r0.c.from != kNodeF); !ok {
		t.Errorf("the live trace --node %s disagrees with the kernel: %s\ntrace:\n  %s\ndump: %s", n.name, msg, ex.summary, saveDump(t, n, fault.name+"-live", beforeRaw))
	} else {
		t.Logf("live trace --node %s: %s", n.name, msg)
	}
}

// traceProbePaths traces one more flow of each probe in the kernel and
// checks its path against the probe's expectation.
func (f *faultEnv) traceProbePaths(t *testing.T, results []*probeResult, exps []kExpect) {
	l := f.l
	for i, r := range results {
		src := netip.Addr{}
		if r.p.clients > 0 {
			src = l.clients(t, 1)[0]
			if r.p.record != nil {
				f.nft(t, "add", "element", "ip", "kube-proxy", r.p.record(t, f), "{ "+src.String()+" }")
			}
		}
		what := fmt.Sprintf("%s: %s %s → %s (%s)", r.c.name, r.c.proto, l.src(r.c.from), r.c.dst, r.c.from)
		if src.IsValid() {
			what = fmt.Sprintf("%s: %s %s → %s (%s)", r.c.name, r.c.proto, src, r.c.dst, r.c.from)
		}
		l.checkPath(t, what, r.c.from, r.c.proto, r.c.dst, src, exps[i])
	}
}

func writeTempIn(t *testing.T, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// saveDump keeps the dump of a disagreement where the report can point to
// it (the e2e logs directory, kept after teardown), for trace --from-dump
// offline.
func saveDump(t *testing.T, n kNode, what string, b []byte) string {
	return saveFile(t, n, what+".txt", b)
}

func saveFile(t *testing.T, n kNode, name string, b []byte) string {
	dir := clusterEnv["E2E_LOGS"]
	if dir == "" {
		dir = os.TempDir()
	}
	ext := filepath.Ext(name)
	base := regexp.MustCompile(`[^a-zA-Z0-9]+`).ReplaceAllString(strings.TrimSuffix(name, ext), "-")
	p := filepath.Join(dir, "kernel-"+n.name+"-"+strings.Trim(base, "-")+ext)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		return err.Error()
	}
	return p
}
