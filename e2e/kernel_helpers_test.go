//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/netip"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/proxyrules/kubectl-proxyrules/internal/kernelprobe"
)

// The kernel tests' plumbing (kernel_test.go says what they check): a
// kernelprobe Lab attached to a live node namespace, the plugin's trace
// report, the kernel's flows held against it, the node's rules dumped,
// changed and restored.

// --- the nodes and their labs --------------------------------------------------

// The addresses the labs use around a node. The outside client inside the
// lb Service's source range 203.0.113.0/25 and the one outside it; the
// node's extra client addresses for ClientIP affinity over many clients
// (on its veth into the sink, deleted with it).
var (
	kInRange   = netip.MustParseAddr("203.0.113.7")
	kOutRange  = netip.MustParseAddr("203.0.113.200")
	kClientNet = netip.MustParsePrefix("10.0.1.0/24")
)

// kSinkCIDRs are routed from the node into the lab's sink: the Service
// CIDR, the cluster (pod) CIDR, the load-balancer and external IPs of the
// scenario (198.51.100.0/24) and the outside clients' network. A node
// namespace has no default route: without these, a packet the rules let
// through un-DNATed would meet "network unreachable", which reads as a
// reject.
var kSinkCIDRs = []netip.Prefix{
	netip.MustParsePrefix("10.96.0.0/16"),
	netip.MustParsePrefix("10.244.0.0/16"),
	netip.MustParsePrefix("198.51.100.0/24"),
	netip.MustParsePrefix("203.0.113.0/24"),
}

// The node-side names of the lab's veths (internal/kernelprobe).
const (
	kIfSink    = "kp-sink"
	kIfPod     = "kp-pod"
	kIfOutside = "kp-out"
)

// kNode is a node of the cluster as the kernel tests use it.
type kNode struct {
	name, mode string // node-a iptables, node-b nftables
	ip         netip.Addr
	podIP      netip.Addr // on the node's podCIDR, no endpoint's
	// nftTrace: `nft monitor trace` shows the node's rules (nftables
	// mode, or iptables-nft); legacy iptables rules never appear there.
	nftTrace bool
}

func kernelNode(t *testing.T, name string) kNode {
	t.Helper()
	var obj struct {
		Spec   struct{ PodCIDR string }
		Status struct {
			Addresses []struct{ Type, Address string }
		}
	}
	if err := json.Unmarshal(kubectl(t, "get", "node", name, "-o", "json"), &obj); err != nil {
		t.Fatal(err)
	}
	n := kNode{name: name, mode: nodeMode[name]}
	for _, a := range obj.Status.Addresses {
		if a.Type == "InternalIP" {
			n.ip = netip.MustParseAddr(a.Address)
		}
	}
	cidr, err := netip.ParsePrefix(obj.Spec.PodCIDR)
	if err != nil || !n.ip.IsValid() {
		t.Fatalf("node %s: InternalIP %v, podCIDR %q", name, n.ip, obj.Spec.PodCIDR)
	}
	a := cidr.Masked().Addr().As4()
	a[3] = 250
	n.podIP = netip.AddrFrom4(a)
	if n.mode == "nftables" {
		n.nftTrace = true
	} else {
		out, _ := inNode(name, "iptables", "-V")
		n.nftTrace = bytes.Contains(out, []byte("nf_tables"))
	}
	return n
}

// kLab is a kernelprobe lab around a live node.
type kLab struct {
	*kernelprobe.Lab
	n          kNode
	nextClient int    // the next host number in kClientNet
	tracePort  uint16 // the next source port of a traced flow (above the Lab's own range)
}

// labSysctls are the node sysctls kernelprobe.NewLab sets; they are put
// back when the lab goes.
var labSysctls = []string{
	"net.ipv4.ip_forward",
	"net.ipv4.conf.all.rp_filter",
	"net.ipv4.conf.default.rp_filter",
	"net.ipv4.icmp_ratelimit",
	"net.ipv4.icmp_msgs_per_sec",
	"net.ipv4.icmp_msgs_burst",
}

// labNamespaces are the namespaces a lab around node makes.
func labNamespaces(node string) []string {
	return []string{node + "-sink", node + "-pod", node + "-out"}
}

// newKLab attaches a lab to the node's namespace: a sink for kSinkCIDRs, a
// pod on the node's pod CIDR, an outside client at outside. Everything it
// adds to the node (veths, routes, neighbour entries, the conntrack table,
// the client addresses) goes at the end of the test, and its sysctls are
// put back; the node's own interfaces, addresses and routes, which kwok
// and kube-proxy use, are not touched.
func newKLab(t *testing.T, n kNode, outside netip.Addr) *kLab {
	t.Helper()
	clearStaleLab(t, n.name)
	saved := map[string]string{}
	for _, k := range labSysctls {
		out, err := inNode(n.name, "sysctl", "-n", k)
		if err != nil {
			t.Fatal(err)
		}
		saved[k] = strings.TrimSpace(string(out))
	}
	net0 := nodeNet(t, n.name)
	// Cleanups run last-registered first: the lab's own (NewLab's), then
	// these, the checks last.
	t.Cleanup(func() {
		checkLabGone(t, n.name)
		if now := nodeNet(t, n.name); now != net0 {
			t.Errorf("%s's addresses and routes after the lab:\n%s\nbefore:\n%s", n.name, now, net0)
		}
	})
	t.Cleanup(func() {
		args := []string{"-q", "-w"}
		for _, k := range labSysctls {
			args = append(args, k+"="+saved[k])
		}
		if _, err := inNode(n.name, "sysctl", args...); err != nil {
			t.Errorf("putting back the sysctls of %s: %v", n.name, err)
		}
	})
	t.Cleanup(func() {
		if _, err := inNode(n.name, "nft", "delete", "table", "inet", kernelprobe.ConntrackTable); err != nil {
			t.Errorf("deleting the lab's conntrack table from %s: %v", n.name, err)
		}
	})
	lab := kernelprobe.NewLab(t, kernelprobe.LabConfig{
		Node:      n.name,
		NodeIPs:   []netip.Addr{n.ip},
		SinkCIDRs: kSinkCIDRs,
		PodIP:     n.podIP,
		OutsideIP: outside,
	})
	return &kLab{Lab: lab, n: n, nextClient: 2, tracePort: 61000}
}

// nodeNet is the node's IPv4 addresses and routes (every table), which a
// lab must leave as it found them.
func nodeNet(t *testing.T, node string) string {
	t.Helper()
	addrs := mustRun(t, nil, "ip", "-n", node, "-4", "-o", "addr", "show")
	routes := mustRun(t, nil, "ip", "-n", node, "-4", "route", "show", "table", "all")
	return string(addrs) + string(routes)
}

// checkCluster: with the lab attached, the cluster still reaches the node
// as before: kube-proxy's metrics on the node's loopback, port-forward to
// its pod through kwok (live traces, run meanwhile, exec through kwok).
func checkCluster(t *testing.T, n kNode) {
	t.Helper()
	if _, err := readMetrics(n.name); err != nil {
		t.Errorf("with the lab attached, kube-proxy's metrics on %s: %v", n.name, err)
	}
	if mode := strings.TrimSpace(portForwardGet(t, "kube-system", kubeProxyPod(t, n.name), 10249, "/proxyMode")); mode != n.mode {
		t.Errorf("with the lab attached, port-forward to %s's kube-proxy says mode %q, want %s", n.name, mode, n.mode)
	}
}

// clearStaleLab removes what a lab of a killed run left around the node.
func clearStaleLab(t *testing.T, node string) {
	t.Helper()
	out, _ := run(nil, "ip", "netns", "list")
	have := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			have[f[0]] = true
		}
	}
	for _, dev := range []string{kIfSink, kIfPod, kIfOutside} {
		if _, err := run(nil, "ip", "-n", node, "link", "show", dev); err == nil {
			t.Logf("removing %s from %s, left by an earlier run", dev, node)
			run(nil, "ip", "-n", node, "link", "del", dev)
		}
	}
	for _, ns := range labNamespaces(node) {
		if have[ns] {
			t.Logf("removing namespace %s, left by an earlier run", ns)
			run(nil, "ip", "netns", "del", ns)
		}
	}
	for _, table := range []string{"inet " + kernelprobe.ConntrackTable, "ip " + kernelprobe.TraceTable} {
		fam, name, _ := strings.Cut(table, " ")
		if _, err := inNode(node, "nft", "list", "table", fam, name); err == nil {
			t.Logf("removing table %s from %s, left by an earlier run", table, node)
			inNode(node, "nft", "delete", "table", fam, name)
		}
	}
}

// checkLabGone: nothing of the lab is left in or around the node.
func checkLabGone(t *testing.T, node string) {
	out, _ := run(nil, "ip", "netns", "list")
	for _, ns := range labNamespaces(node) {
		if regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(ns) + `\b`).Match(out) {
			t.Errorf("the lab left namespace %s", ns)
		}
	}
	for _, dev := range []string{kIfSink, kIfPod, kIfOutside} {
		if _, err := run(nil, "ip", "-n", node, "link", "show", dev); err == nil {
			t.Errorf("the lab left %s in %s", dev, node)
		}
	}
	if _, err := inNode(node, "nft", "list", "table", "inet", kernelprobe.ConntrackTable); err == nil {
		t.Errorf("the lab left table inet %s in %s", kernelprobe.ConntrackTable, node)
	}
	if _, err := inNode(node, "nft", "list", "table", "ip", kernelprobe.TraceTable); err == nil {
		t.Errorf("the lab left table ip %s in %s", kernelprobe.TraceTable, node)
	}
}

// clients gives the node n more addresses (kClientNet, on its veth into
// the sink) for flows from distinct clients: ClientIP affinity is per
// client address, and the lab's pod and outside client have one each.
// They stay until the lab's veth goes: deleting the last IPv4 address of
// a device makes the kernel drop every route through it, the lab's sink
// routes too (fib_inetaddr_event, "Last address was deleted from this
// interface"), and every later flow would meet "network unreachable".
func (l *kLab) clients(t *testing.T, n int) []netip.Addr {
	t.Helper()
	var out []netip.Addr
	var add []string
	for range n {
		if l.nextClient > 254 {
			t.Fatalf("out of client addresses in %v", kClientNet)
		}
		a := kClientNet.Addr().As4()
		a[3] = byte(l.nextClient)
		l.nextClient++
		ip := netip.AddrFrom4(a)
		out = append(out, ip)
		add = append(add, "addr add "+ip.String()+"/32 dev "+kIfSink)
	}
	mustRun(t, []byte(strings.Join(add, "\n")+"\n"), "ip", "-n", l.n.name, "-batch", "-")
	return out
}

// forget deletes the node's conntrack entries of flows to dst: the flows
// of one case, before and after it (Send picks fresh source ports within
// a lab, but a later lab starts again from the same ones). Only the test
// sends to these destinations.
func (l *kLab) forget(proto string, dst netip.AddrPort) {
	run(nil, "ip", "netns", "exec", l.n.name, "conntrack", "-D", "-f", "ipv4", "-p", proto,
		"-d", dst.Addr().String(), "--dport", strconv.Itoa(int(dst.Port())))
}

// ctReply is the reply tuple of the node's conntrack entry for one flow.
func (l *kLab) ctReply(t *testing.T, proto string, sport uint16, dst netip.AddrPort) (src, rdst netip.AddrPort, ok bool) {
	t.Helper()
	out, _ := run(nil, "ip", "netns", "exec", l.n.name, "conntrack", "-L", "-f", "ipv4", "-p", proto,
		"--sport", strconv.Itoa(int(sport)), "-d", dst.Addr().String(), "--dport", strconv.Itoa(int(dst.Port())))
	for _, line := range strings.Split(string(out), "\n") {
		var addrs []string
		var ports []string
		for _, f := range strings.Fields(line) {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "src", "dst":
				addrs = append(addrs, v)
			case "sport", "dport":
				ports = append(ports, v)
			}
		}
		if len(addrs) < 4 || len(ports) < 4 {
			continue
		}
		s, err1 := netip.ParseAddrPort(addrs[2] + ":" + ports[2])
		d, err2 := netip.ParseAddrPort(addrs[3] + ":" + ports[3])
		if err1 == nil && err2 == nil {
			return s, d, true
		}
	}
	return netip.AddrPort{}, netip.AddrPort{}, false
}

// --- the plugin's trace ----------------------------------------------------------

// tReport is `trace -o json` (diagnose.TraceReport), the parts compared.
type tReport struct {
	Kind, Node, Status string
	Traces             []tTrace
}

type tTrace struct {
	Entry, ServicePort, Summary string
	Packet                      struct{ Protocol, Source, Destination, From, InInterface string }
	Outcomes                    []tOutcome
	Affinity                    *struct {
		TimeoutSeconds int
		Known          bool
	}
	Truncated bool
}

type tOutcome struct {
	Endpoint    *string
	Exact       string `json:"exactProbability"`
	Verdict     string
	Masquerade  bool
	Reject      string
	Destination string
	Assumes     []struct {
		Table, Family, Chain string
		Rule                 int
		What                 string
		Holds                bool
	}
	Path []tHop
}

type tHop struct {
	Hook, Table, Family, Backend, Chain string
	Rule                                int
	Text, Action                        string
}

// traceArgs are the arguments of `trace` for flows from src (--in the
// lab's veth for a pod or outside client; a node flow from an address
// not the Node object's is told apart by --node-ip).
func traceArgs(from kernelprobe.From, proto string, dst netip.AddrPort, src netip.Addr, extraNodeIP bool) []string {
	to := dst.String()
	if proto != "tcp" {
		to += "/" + proto
	}
	args := []string{"--to", to, "--from", src.String()}
	switch from {
	case kernelprobe.FromPod:
		args = append(args, "--in", kIfPod)
	case kernelprobe.FromOutside:
		args = append(args, "--in", kIfOutside)
	default:
		if extraNodeIP {
			args = append(args, "--node-ip", src.String())
		}
	}
	return args
}

// runTrace runs `kubectl proxyrules trace ARGS -o json` (live with --node
// alone, offline with --from-dump). Exit 0, 2 (some flows dropped or
// rejected) and 3 (some outcome not known) all give a report.
func runTrace(args ...string) (tTrace, string, error) {
	cmd := exec.Command("kubectl", append([]string{"proxyrules", "trace", "-o", "json"}, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exitErr *exec.ExitError
	if err != nil && !(errors.As(err, &exitErr) && (exitErr.ExitCode() == 2 || exitErr.ExitCode() == 3)) {
		return tTrace{}, "", fmt.Errorf("kubectl proxyrules trace %s: %v\n%s", strings.Join(args, " "), err, errOut.String())
	}
	var rep tReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		return tTrace{}, "", fmt.Errorf("trace %s -o json: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	if rep.Kind != "Trace" || len(rep.Traces) != 1 {
		return tTrace{}, "", fmt.Errorf("trace %s: kind %q, %d traces, want one Trace", strings.Join(args, " "), rep.Kind, len(rep.Traces))
	}
	return rep.Traces[0], "trace " + strings.Join(args, " "), nil
}

func mustTrace(t *testing.T, args ...string) tTrace {
	t.Helper()
	pt, _, err := runTrace(args...)
	if err != nil {
		t.Fatal(err)
	}
	return pt
}

// liveTraces runs several live traces at once (each its own debug pod).
func liveTraces(t *testing.T, argss map[string][]string) map[string]tTrace {
	t.Helper()
	type res struct {
		name string
		pt   tTrace
		err  error
	}
	names := sortedKeys(argss)
	ch := make(chan res, len(names))
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for _, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			pt, _, err := runTrace(argss[name]...)
			ch <- res{name, pt, err}
		}()
	}
	wg.Wait()
	close(ch)
	out := map[string]tTrace{}
	for r := range ch {
		if r.err != nil {
			t.Fatal(r.err)
		}
		out[r.name] = r.pt
	}
	return out
}

// --- what trace expects, in the kernel's terms ---------------------------------------

// kExpect is trace's answer for one new connection of a client in a given
// state, in the kernel's terms (kernelprobe.Outcome strings).
type kExpect struct {
	// shares of each outcome key (with masquerade for pod and outside
	// flows: their masquerade shows in the reply tuple).
	shares map[string]float64
	probs  map[string]*big.Rat
	// masq: per DNAT/accept key of a node flow, the share of it trace
	// masquerades; showable: random-fully, the one masquerade a node
	// flow shows (a new source port).
	masq     map[string]float64
	showable map[string]bool
	kept     []tOutcome // the outcomes of a client in this state
	summary  string
}

var affinityRecordRE = regexp.MustCompile(`affinity record in (\S+)`)

func isAffinity(what string) bool { return strings.Contains(what, "affinity record") }

// outcomeKey is an outcome's key as the kernel's flows are counted.
func outcomeKey(o tOutcome, withMasq bool) (string, error) {
	k := kernelprobe.Outcome{Verdict: o.Verdict}
	var ep string
	switch o.Verdict {
	case kernelprobe.DNAT:
		if o.Endpoint == nil {
			return "", fmt.Errorf("a dnat outcome without endpoint")
		}
		ep = *o.Endpoint
	case kernelprobe.Accept:
		ep = o.Destination
	}
	if ep != "" {
		a, err := netip.ParseAddrPort(ep)
		if err != nil {
			return "", err
		}
		k.Endpoint = a
	}
	k.Masqueraded = withMasq && o.Masquerade
	return k.String(), nil
}

// expectTrace keeps the outcomes of a client whose ClientIP-affinity
// record is record ("": a new client, holding none): those whose affinity
// assumptions say so. Any other assumption (with --in given, none should
// be left: these are kube-proxy's rules and every fact of the flow is
// known) and an unknown verdict fail the test.
func expectTrace(t *testing.T, what string, pt tTrace, nodeFlow bool, record string) kExpect {
	t.Helper()
	ex := kExpect{shares: map[string]float64{}, probs: map[string]*big.Rat{}, masq: map[string]float64{}, showable: map[string]bool{}}
	if pt.Truncated {
		t.Errorf("%s: trace's walk was truncated", what)
	}
	total := new(big.Rat)
	masqP := map[string]*big.Rat{}
	var lines []string
outcomes:
	for _, o := range pt.Outcomes {
		line := fmt.Sprintf("%s %s %v masq=%v", o.Exact, o.Verdict, o.Destination, o.Masquerade)
		for _, a := range o.Assumes {
			line += fmt.Sprintf(" [%s=%v]", a.What, a.Holds)
		}
		lines = append(lines, line)
		for _, a := range o.Assumes {
			if !isAffinity(a.What) {
				t.Errorf("%s: trace assumed %q (%s %s rule %d) for a flow whose facts are all known: %s", what, a.What, a.Table, a.Chain, a.Rule+1, line)
				continue outcomes
			}
			m := affinityRecordRE.FindStringSubmatch(a.What)
			if m == nil {
				t.Errorf("%s: cannot read the record of assumption %q", what, a.What)
				continue outcomes
			}
			if a.Holds != (m[1] == record) {
				continue outcomes
			}
		}
		if o.Verdict == "unknown" {
			t.Errorf("%s: trace's outcome is unknown: %s", what, line)
		}
		p, ok := new(big.Rat).SetString(o.Exact)
		if !ok {
			t.Fatalf("%s: exactProbability %q", what, o.Exact)
		}
		key, err := outcomeKey(o, !nodeFlow)
		if err != nil {
			t.Fatalf("%s: %v: %s", what, err, line)
		}
		ex.kept = append(ex.kept, o)
		total.Add(total, p)
		if ex.probs[key] == nil {
			ex.probs[key], masqP[key] = new(big.Rat), new(big.Rat)
		}
		ex.probs[key].Add(ex.probs[key], p)
		if o.Masquerade {
			masqP[key].Add(masqP[key], p)
			if randomFully(o) {
				ex.showable[key] = true
			}
		}
	}
	sort.Strings(lines)
	ex.summary = strings.Join(lines, "\n  ")
	if total.Cmp(big.NewRat(1, 1)) != 0 {
		t.Errorf("%s: the outcomes of this client add up to %s, not 1:\n  %s", what, total.RatString(), ex.summary)
	}
	for k, p := range ex.probs {
		f, _ := p.Float64()
		ex.shares[k] = f
		m, _ := new(big.Rat).Quo(masqP[k], p).Float64()
		ex.masq[k] = m
	}
	return ex
}

// randomFully: the outcome's masquerade is random-fully (iptables) or
// fully-random (nft): it picks a new source port.
func randomFully(o tOutcome) bool {
	for _, h := range o.Path {
		if strings.Contains(strings.ToLower(h.Action), "masquerade") && (strings.Contains(h.Text, "random-fully") || strings.Contains(h.Text, "fully-random")) {
			return true
		}
	}
	return false
}

func (ex kExpect) String() string { return ex.probe().String() }

// --- the kernel against trace ----------------------------------------------------------

// premise: every flow has the verdict the case is about (a lab artefact,
// a missing route, shows here first).
func premise(t *testing.T, what, want string, obs []kernelprobe.Observation) {
	t.Helper()
	if want == "" {
		return
	}
	for _, o := range obs {
		if o.Verdict != want {
			t.Errorf("%s: premise: every flow %s, the kernel did %s (%s): a lab artefact or a wrong premise", what, want, kernelprobe.Key(o, true), o.Raw)
			return
		}
	}
}

// summarize is a short account of observations for logs.
func summarize(obs []kernelprobe.Observation) string {
	sum := kernelprobe.Summarize(obs)
	var parts []string
	for o, n := range sum {
		parts = append(parts, fmt.Sprintf("%s: %d", o, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// --- the path: nft monitor trace against trace's path[] -----------------------------------

// chainRef is a step of a path through kube-proxy's rules: a chain in
// which a rule matched (its nftables table, or its iptables table:
// iptables-nft keeps each iptables table as an nftables table of family
// ip of that name, its chains named as iptables names them), or, with
// jump set, a jump or goto to the chain named.
type chainRef struct {
	table, chain string
	jump         bool
}

func (c chainRef) String() string {
	if c.jump {
		return "(" + c.chain + ")"
	}
	return c.table + " " + c.chain
}

// kubeProxyTable: the table is kube-proxy's (the lab's own, and the trace
// table, are not).
func kubeProxyTable(family, table string) bool {
	if family != "ip" && family != "IPv4" {
		return false
	}
	switch table {
	case "kube-proxy", "nat", "filter", "mangle", "raw", "security":
		return true
	}
	return false
}

func appendChain(list []chainRef, c chainRef) []chainRef {
	if n := len(list); n > 0 && list[n-1] == c && !c.jump {
		return list
	}
	return append(list, c)
}

var kernelJump = regexp.MustCompile(`\(verdict (jump|goto) (\S+)\)$`)

// kernelRuleChains is the path the kernel's trace shows: the chains, in
// order, in which a rule matched ("trace id ID ip TABLE CHAIN rule …
// (verdict …)"; consecutive repeats collapsed), each jump or goto with
// its target. The kernel shows nothing of a chain jumped to where no rule
// matched but the jump itself, and a base chain's "packet:" and "policy"
// lines say nothing of its rules: those are left out, and so are trace's
// "return (end of chain)" and "policy" hops.
func kernelRuleChains(lines []string) []chainRef {
	var out []chainRef
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) < 7 || f[0] != "trace" || f[1] != "id" || f[6] != "rule" || !kubeProxyTable(f[3], f[4]) {
			continue
		}
		out = appendChain(out, chainRef{table: f[4], chain: f[5]})
		if m := kernelJump.FindStringSubmatch(strings.TrimSpace(l)); m != nil {
			out = append(out, chainRef{table: f[4], chain: m[2], jump: true})
		}
	}
	return out
}

// pluginRuleChains: the same of an outcome's path (its hops that are a
// rule, rule ≥ 0, in kube-proxy's tables; their "jump X" and "goto X").
func pluginRuleChains(o tOutcome) []chainRef {
	var out []chainRef
	for _, h := range o.Path {
		if h.Rule < 0 || !kubeProxyTable(h.Family, h.Table) {
			continue
		}
		out = appendChain(out, chainRef{table: h.Table, chain: h.Chain})
		if verb, target, ok := strings.Cut(h.Action, " "); ok && (verb == "jump" || verb == "goto") {
			out = append(out, chainRef{table: h.Table, chain: strings.Fields(target)[0], jump: true})
		}
	}
	return out
}

func chainsString(cs []chainRef) string {
	var s []string
	for _, c := range cs {
		s = append(s, c.String())
	}
	return strings.Join(s, " ")
}

// checkPath traces one more flow of the case with nft monitor trace and
// holds the kernel's chains against the path of trace's outcome that
// matches what the kernel did to that flow (among ex.kept: the outcomes of
// this client). The chains must be the same, in the same order.
func (l *kLab) checkPath(t *testing.T, what string, from kernelprobe.From, proto string, dst netip.AddrPort, srcIP netip.Addr, ex kExpect) {
	t.Helper()
	if !l.n.nftTrace {
		t.Logf("%s: path not checked: %s's iptables is not iptables-nft, nft monitor trace does not show its rules", what, l.n.name)
		return
	}
	port := l.tracePort
	l.tracePort++
	lines := l.Trace(t, kernelprobe.Probe{From: from, Proto: proto, Dst: dst, SrcIP: srcIP, SrcPort0: port})
	reply, _, ok := l.ctReply(t, proto, port, dst)
	var verdicts []string
	var endpoint string
	switch {
	case !ok:
		verdicts = []string{kernelprobe.Reject, kernelprobe.Drop}
	case reply == dst:
		verdicts, endpoint = []string{kernelprobe.Accept}, dst.String()
	default:
		verdicts, endpoint = []string{kernelprobe.DNAT}, reply.String()
	}
	kc := kernelRuleChains(lines)
	var tried []string
	for _, o := range ex.kept {
		if !contains(verdicts, o.Verdict) {
			continue
		}
		if endpoint != "" {
			ep := o.Destination
			if o.Endpoint != nil {
				ep = *o.Endpoint
			}
			if ep != endpoint {
				continue
			}
		}
		pc := pluginRuleChains(o)
		if chainsString(pc) == chainsString(kc) {
			t.Logf("%s: path of the traced flow (%s %s): %s", what, strings.Join(verdicts, "/"), endpoint, chainsString(kc))
			return
		}
		tried = append(tried, chainsString(pc))
	}
	if len(tried) == 0 {
		t.Errorf("%s: the traced flow went %s %s; trace has no such outcome for this client:\n  %s", what, strings.Join(verdicts, "/"), endpoint, ex.summary)
		return
	}
	t.Errorf("%s: the traced flow (%s %s) went through the kernel's chains\n  %s\nbut trace's path for that outcome is\n  %s\nnft monitor trace:\n  %s",
		what, strings.Join(verdicts, "/"), endpoint, chainsString(kc), strings.Join(tried, "\n  or "), strings.Join(lines, "\n  "))
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// --- ClientIP-affinity records the test's clients leave in the kernel ---------------------

// forgetRecords deletes the affinity records of the test's own clients
// (the pod, the outside clients, kClientNet): iptables' xt_recent lists,
// nftables' affinity sets. No one else sends to the Services.
func forgetRecords(t *testing.T, n kNode) {
	t.Helper()
	mine := func(a netip.Addr) bool {
		return a == n.podIP || a == kInRange || a == kOutRange || kClientNet.Contains(a)
	}
	addrRE := regexp.MustCompile(`\b\d+\.\d+\.\d+\.\d+\b`)
	if n.mode == "iptables" {
		out, _ := inNode(n.name, "sh", "-c", `for f in /proc/net/xt_recent/*; do [ -e "$f" ] && sed "s|^|$f |" "$f"; done; true`)
		var script []string
		for _, line := range strings.Split(string(out), "\n") {
			f := strings.Fields(line)
			if len(f) < 2 || !strings.HasPrefix(f[1], "src=") {
				continue
			}
			a, err := netip.ParseAddr(strings.TrimPrefix(f[1], "src="))
			if err == nil && mine(a) {
				script = append(script, fmt.Sprintf("echo -%s > %s", a, f[0]))
			}
		}
		if len(script) > 0 {
			if _, err := inNode(n.name, "sh", "-c", strings.Join(script, "; ")); err != nil {
				t.Errorf("deleting the test's affinity records on %s: %v", n.name, err)
			}
		}
		return
	}
	out, err := inNode(n.name, "nft", "list", "table", "ip", "kube-proxy")
	if err != nil {
		t.Errorf("listing kube-proxy's table on %s: %v", n.name, err)
		return
	}
	var set string
	var cmds []string
	for _, line := range strings.Split(string(out), "\n") {
		tr := strings.TrimSpace(line)
		if strings.HasPrefix(tr, "set ") {
			set = strings.TrimSuffix(strings.TrimPrefix(tr, "set "), " {")
			continue
		}
		if !strings.HasPrefix(set, "affinity-") {
			continue
		}
		if tr == "}" {
			set = ""
			continue
		}
		for _, s := range addrRE.FindAllString(tr, -1) {
			if a, err := netip.ParseAddr(s); err == nil && mine(a) && !strings.HasPrefix(tr, "type") {
				cmds = append(cmds, fmt.Sprintf("delete element ip kube-proxy %s { %s }", set, a))
			}
		}
	}
	if len(cmds) > 0 {
		if _, err := run([]byte(strings.Join(cmds, "\n")+"\n"), "ip", "netns", "exec", n.name, "nft", "-f", "-"); err != nil {
			t.Errorf("deleting the test's affinity records on %s: %v", n.name, err)
		}
	}
}

// recordsOf are the xt_recent lists (iptables) that hold a record of src.
func recordsOf(t *testing.T, n kNode, src netip.Addr) []string {
	t.Helper()
	out, _ := inNode(n.name, "sh", "-c", `grep -l -w "src=`+src.String()+`" /proc/net/xt_recent/* 2>/dev/null; true`)
	var lists []string
	for _, f := range strings.Fields(string(out)) {
		lists = append(lists, strings.TrimPrefix(f, "/proc/net/xt_recent/"))
	}
	return lists
}

// --- the node's rules: dumps, chains saved and put back ----------------------------------

// nodeDump is the node's rules as root on the node reads them: iptables-save
// (IPv4: the flows are) or nft list ruleset.
func nodeDump(t *testing.T, n kNode) []byte {
	t.Helper()
	if n.mode == "nftables" {
		return mustRun(t, nil, "ip", "netns", "exec", n.name, "nft", "list", "ruleset")
	}
	return mustRun(t, nil, "ip", "netns", "exec", n.name, "iptables-save")
}

var nftExpires = regexp.MustCompile(` expires [0-9a-z.]+`)

// normDump: a dump without what changes by itself: iptables-save's
// comments and counters; nftables' timers and the members of kube-proxy's
// affinity sets, which the probes' own flows add.
func normDump(n kNode, b []byte) string {
	if n.mode != "nftables" {
		return normalizeSave(b)
	}
	var out []string
	inAffinity, inElements := false, false
	for _, line := range strings.Split(string(b), "\n") {
		tr := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(tr, "set affinity-"):
			inAffinity = true
		case inAffinity && !inElements && tr == "}":
			inAffinity = false
		case inAffinity && strings.HasPrefix(tr, "elements = {"):
			inElements = true
		}
		if inElements {
			if strings.HasSuffix(tr, "}") {
				inElements = false
			}
			continue
		}
		out = append(out, nftExpires.ReplaceAllString(line, ""))
	}
	return strings.Join(out, "\n")
}

// dumpDiff is a short account of how two normalised dumps differ.
func dumpDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	in := func(list []string) map[string]int {
		m := map[string]int{}
		for _, l := range list {
			m[l]++
		}
		return m
	}
	am, bm := in(al), in(bl)
	var d []string
	for _, l := range al {
		if bm[l] == 0 {
			d = append(d, "- "+l)
		}
	}
	for _, l := range bl {
		if am[l] == 0 {
			d = append(d, "+ "+l)
		}
	}
	if len(d) > 8 {
		d = append(d[:8], fmt.Sprintf("… %d more", len(d)-8))
	}
	if len(d) == 0 {
		return "(the same lines, in another order)"
	}
	return strings.Join(d, "\n")
}

// chainSnap is one chain of kube-proxy's rules as it was, to put back.
type chainSnap struct {
	n            kNode
	table, chain string // iptables table (nat, filter); nftables: the chain of ip kube-proxy
	text         string
}

func (s chainSnap) String() string { return s.table + " " + s.chain }

// snapChain saves a chain: iptables, its lines of iptables-save (restored
// with iptables-restore --noflush, which flushes a chain it declares);
// nftables, nft list chain (restored after a flush of the chain).
func snapChain(t *testing.T, n kNode, table, chain string) chainSnap {
	t.Helper()
	s := chainSnap{n: n, table: table, chain: chain}
	text, err := s.current()
	if err != nil {
		t.Fatal(err)
	}
	s.text = text
	return s
}

func (s chainSnap) current() (string, error) {
	if s.n.mode == "nftables" {
		out, err := inNode(s.n.name, "nft", "list", "chain", "ip", "kube-proxy", s.chain)
		return string(out), err
	}
	out, err := inNode(s.n.name, "iptables-save", "-t", s.table)
	if err != nil {
		return "", err
	}
	var head string
	var rules []string
	for _, line := range strings.Split(string(out), "\n") {
		switch {
		case strings.HasPrefix(line, ":"+s.chain+" "):
			head = saveCounters.ReplaceAllString(line, "[0:0]")
		case strings.HasPrefix(line, "-A "+s.chain+" "):
			rules = append(rules, line)
		}
	}
	if head == "" {
		return "", fmt.Errorf("%s: no chain %s in table %s", s.n.name, s.chain, s.table)
	}
	return "*" + s.table + "\n" + head + "\n" + strings.Join(append(rules, "COMMIT"), "\n") + "\n", nil
}

func (s chainSnap) restore() error {
	if s.n.mode == "nftables" {
		_, err := run([]byte("flush chain ip kube-proxy "+s.chain+"\n"+s.text), "ip", "netns", "exec", s.n.name, "nft", "-f", "-")
		return err
	}
	_, err := run([]byte(s.text), "ip", "netns", "exec", s.n.name, "iptables-restore", "--noflush")
	return err
}

// restoreChecked puts the chains back and checks they read as saved.
func restoreChecked(t *testing.T, snaps []chainSnap) {
	t.Helper()
	for _, s := range snaps {
		if err := s.restore(); err != nil {
			t.Errorf("putting back %s on %s: %v", s, s.n.name, err)
			continue
		}
		if now, err := s.current(); err != nil || now != s.text {
			t.Errorf("%s on %s after putting it back:\n%s\nwant:\n%s (%v)", s, s.n.name, now, s.text, err)
		}
	}
}

// waitFor retries check every 500 ms for up to d.
func waitFor(t *testing.T, d time.Duration, what string, check func() error) {
	t.Helper()
	var err error
	for start := time.Now(); time.Since(start) < d; time.Sleep(500 * time.Millisecond) {
		if err = check(); err == nil {
			return
		}
	}
	t.Errorf("%s: %v", what, err)
}

// kernelLabNamespace: name is a namespace a kernel test's lab makes around
// a node (the harness checks none is left).
func kernelLabNamespace(name string) bool {
	for _, n := range nodes {
		for _, ns := range labNamespaces(n) {
			if name == ns {
				return true
			}
		}
	}
	return false
}

// probe is the expectation as kernelprobe holds it to the kernel.
func (ex kExpect) probe() kernelprobe.Expect {
	exact := map[string]string{}
	for k := range ex.probs {
		exact[k] = ex.probs[k].RatString()
	}
	return kernelprobe.Expect{Model: "trace", Shares: ex.shares, Masq: ex.masq, Showable: ex.showable, Exact: exact, Summary: ex.summary}
}

// compare, fit and checkNodeMasq are kernelprobe's, on a kExpect.
func compare(t *testing.T, what string, ex kExpect, nodeFlow bool, n int, send func(n int) []kernelprobe.Observation) []kernelprobe.Observation {
	t.Helper()
	return kernelprobe.Compare(t, what, ex.probe(), nodeFlow, n, send)
}

func fit(obs []kernelprobe.Observation, ex kExpect, withMasq bool) (ok, fatal bool, msg string) {
	return kernelprobe.Fit(obs, ex.probe(), withMasq)
}

func checkNodeMasq(t *testing.T, what string, ex kExpect, obs []kernelprobe.Observation) {
	t.Helper()
	kernelprobe.CheckNodeMasq(t, what, ex.probe(), obs)
}
