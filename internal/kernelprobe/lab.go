// Package kernelprobe asks the real kernel what it does to a new connection
// under a ruleset, so tests can hold a computed answer (the evaluate package)
// against the kernel's own.
//
// A Lab is a node network namespace with neighbours, all joined to it by
// veth pairs and none to the root namespace:
//
//	outside ns ──veth── node ns ──veth── sink ns
//	    pod ns ──veth──┘
//
// The node holds the rules (LoadIPTables, LoadNFT). A Probe starts a number
// of flows (TCP SYNs or UDP datagrams, one source port each) from the node
// itself (its OUTPUT path), from a pod namespace (the node's PREROUTING and
// FORWARD) or from an outside client (to a NodePort on a node IP). Whatever
// the rules let through and route away goes into the sink: a namespace
// with one address, no routes and forwarding off, which swallows every
// packet without an answer. The packet has then left the node's
// POSTROUTING, so its conntrack entry is confirmed, and the entry's reply
// tuple says what NAT the kernel chose: the reply source is the endpoint
// the connection was DNATed to, the reply destination what it was
// masqueraded to. A flow without an entry got an error (reject) or nothing
// (drop). Typical use:
//
//	lab := kernelprobe.NewLab(t, kernelprobe.LabConfig{
//		NodeIPs:   []netip.Addr{netip.MustParseAddr("10.0.0.10")},
//		SinkCIDRs: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/16"), netip.MustParsePrefix("10.244.0.0/16")},
//		PodIP:     netip.MustParseAddr("10.244.0.5"),
//	})
//	lab.LoadIPTables(t, "ipv4", "nft", restoreText)
//	obs := lab.Send(t, kernelprobe.Probe{From: kernelprobe.FromPod, Proto: "tcp",
//		Dst: netip.MustParseAddrPort("10.96.0.1:80"), Flows: 300})
//	sum := kernelprobe.Summarize(obs) // map[Outcome]int: "dnat 10.244.0.11:8080" → 151, …
//	_, p := kernelprobe.ChiSquare(kernelprobe.Counts(sum, kernelprobe.Outcome.String), expected)
//
// What the kernel does, as seen here (Linux 6.18; kernelprobe_test.go
// holds each):
//
//   - DNAT: the entry's reply source is the endpoint; iptables' statistic
//     cascade and nft's numgen split as their probabilities say; a KUBE-SEP
//     chain emptied but still jumped to returns, and its share goes down
//     the rest of the cascade (1/3, 1/2, rest with the first emptied:
//     50/50 over the other two).
//   - Masquerade shows only as a changed reply destination. The node's own
//     traffic already leaves from the egress address, so only
//     random-fully (a random port) shows, and then the port is the
//     original one once in 64512; a plain masquerade of the node's own
//     traffic leaves the tuple unchanged and reads as not masqueraded.
//   - REJECT: no entry (the packet is dropped before conntrack confirms
//     it). icmp-port-unreachable and tcp-reset give ECONNREFUSED,
//     icmp-host-unreachable and icmp-admin-prohibited EHOSTUNREACH, for
//     TCP and UDP (tcp-reset: TCP only), from the node and from a pod. Over veth and loopback the
//     ICMP error comes back inside the sender's connect(), which holds the
//     socket, so TCP records it only as a soft error: SO_ERROR returns it
//     at once, but a blocking connect fails only after the SYN is resent
//     (~1 s). Send reads SO_ERROR.
//   - DROP: no entry and no error; but the node's own UDP datagram dropped
//     in OUTPUT fails write() with EPERM (TCP's connect still says
//     EINPROGRESS).
//   - A TCP reset from where the flow went (a node port nothing listens on)
//     deletes the entry (conntrack drops an entry whose only reply is a
//     reset): it reads as a reject. UDP to a closed port keeps its entry
//     (accept, with ECONNREFUSED from the ICMP port unreachable).
//   - Conntrack runs in a namespace only while some rule needs it (NAT, a
//     conntrack match, a ct expression); the Lab keeps a ct rule of its own
//     (ConntrackTable) so a filter-only ruleset still leaves entries.
//
// Sockets are opened in a probe's namespace by a goroutine locked to an OS
// thread that has setns(2)-ed into it (the thread is thrown away after);
// conntrack entries are read from the node namespace the same way, from
// /proc/thread-self/net/nf_conntrack. That needs no helper process and no
// re-executed test binary (which would need a TestMain in every package
// that imports this one), and sending 400 flows takes milliseconds.
//
// Trace runs nft monitor trace for one flow. All of it needs root, ip, nft
// and conntrack (make test-deps installs them); without them a test is
// skipped with one line saying why, as internal/netnstest does. It is a
// test-only library: nothing outside _test.go files should import it.
package kernelprobe

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// Interface names in the node namespace (the peers are all eth0 in their
// own namespaces), the sink's and the gateways' addresses and the MACs
// the permanent neighbour entries point at. Every link is a point-to-point
// veth, so fixed MACs and link-local next hops never meet each other.
const (
	ifSink    = "kp-sink"
	ifPod     = "kp-pod"
	ifOutside = "kp-out"
	peerIf    = "eth0"

	sinkGW4    = "169.254.100.2" // the sink's one address, the node's next hop into it
	sinkGW6    = "fe80::2"
	podGW4     = "169.254.1.1" // the pod's and the outside client's next hops: the node's side of their veths
	podGW6     = "fe80::1"
	outsideGW4 = "169.254.2.1"
	outsideGW6 = "fe80::1"

	macNodeSink    = "02:6b:70:00:00:01"
	macSink        = "02:6b:70:00:00:02"
	macNodePod     = "02:6b:70:00:00:03"
	macPod         = "02:6b:70:00:00:04"
	macNodeOutside = "02:6b:70:00:00:05"
	macOutside     = "02:6b:70:00:00:06"
)

// forbidden is the machine's real uplink network: nothing here may use it.
var forbidden = netip.MustParsePrefix("192.0.2.0/24")

var counter atomic.Int32

// LabConfig says what a Lab is made of.
type LabConfig struct {
	// Node is an existing network namespace (a name under /run/netns) to
	// use as the node; "" creates a fresh one, deleted at cleanup. An
	// existing node keeps the sysctls NewLab sets (forwarding on, rp_filter
	// off, ICMP rate limits off) and must not already have interfaces
	// named kp-sink, kp-pod or kp-out.
	Node string
	// NodeIPs are the node's addresses (IPv4 and optionally IPv6). Those
	// the node does not have yet are put on its veth into the sink, the
	// device its routes leave by, so MASQUERADE picks them as a real node's
	// eth0 address. Each family used by SinkCIDRs, PodIP or OutsideIP needs
	// one.
	NodeIPs []netip.Addr
	// SinkCIDRs are the destinations routed from the node into the sink:
	// service CIDR, pod/cluster CIDR, external or load-balancer test IPs.
	// Each route has `src` the first node IP of its family, so packets the
	// node sends carry the node IP.
	SinkCIDRs []netip.Prefix
	// PodIP, when valid, makes a pod namespace on the node with this /32
	// (or /128) and a default route via the node, and gives the node a
	// host route back to it.
	PodIP netip.Addr
	// OutsideIP, when valid, makes an "outside client" namespace with this
	// address on its own veth to the node, default route via the node, and
	// gives the node a host route back to it: traffic from outside to a
	// NodePort on a node IP.
	OutsideIP netip.Addr
}

// A Lab is a node network namespace with what a probe needs around it: a
// sink for what the node routes away and optionally a pod and an outside
// client. All of it is deleted when the test ends (an existing Node is kept,
// only what NewLab added to it removed).
type Lab struct {
	// Node, Sink, Pod and Outside are the namespaces' names (under
	// /run/netns); Pod and Outside are "" when the config asked for none.
	Node, Sink, Pod, Outside string
	NodeIPs                  []netip.Addr
	PodIP, OutsideIP         netip.Addr

	nextPort atomic.Uint32 // the next source port Send picks itself
	mu       sync.Mutex    // one Trace at a time (one trace table)
}

// FromNode, FromPod and FromOutside are where a probe's flows start.
const (
	FromNode    From = "node"
	FromPod     From = "pod"
	FromOutside From = "outside"
)

// From says where a probe's flows start: "node" (a process in the node
// namespace), "pod" (the pod namespace) or "outside" (the outside client).
type From string

// NewLab builds the namespaces and links cfg asks for, or skips the test
// when that is impossible (not root; ip, nft, conntrack or sysctl missing;
// no /proc/net/nf_conntrack). A config that
// cannot work (an address of a family without a node IP, the forbidden
// uplink network) fails the test.
func NewLab(t testing.TB, cfg LabConfig) *Lab {
	t.Helper()
	skipWithoutTools(t)
	checkConfig(t, cfg)

	l := &Lab{NodeIPs: cfg.NodeIPs, PodIP: cfg.PodIP, OutsideIP: cfg.OutsideIP}
	l.nextPort.Store(firstAutoPort)
	l.openNode(t, cfg.Node)
	var has6 bool
	for _, a := range cfg.NodeIPs {
		has6 = has6 || a.Is6()
	}
	l.setUpNode(t, has6)
	l.addSink(t, cfg, has6)
	if cfg.PodIP.IsValid() {
		l.Pod = l.Node + "-pod"
		l.client(t, &l.Pod, ifPod, macNodePod, macPod, cfg.PodIP, podGW4, podGW6)
	}
	if cfg.OutsideIP.IsValid() {
		l.Outside = l.Node + "-out"
		l.client(t, &l.Outside, ifOutside, macNodeOutside, macOutside, cfg.OutsideIP, outsideGW4, outsideGW6)
	}
	// Devices made after the sysctls: their own rp_filter copies default,
	// set above; set it again per device for an existing node whose
	// default was not 0 when they were made.
	var devs []string
	for _, d := range []struct{ ns, dev string }{{l.Sink, ifSink}, {l.Pod, ifPod}, {l.Outside, ifOutside}} {
		if d.ns != "" {
			devs = append(devs, "net.ipv4.conf."+d.dev+".rp_filter=0")
		}
	}
	sysctl(t, l.Node, devs...)
	return l
}

// skipWithoutTools skips the test unless it runs as root with the tools
// the lab needs.
func skipWithoutTools(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("kernel probe skipped: needs root to create network namespaces")
	}
	for _, tool := range []string{"ip", "conntrack", "nft", "sysctl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("kernel probe skipped: %s not installed (make test-deps installs it)", tool)
		}
	}
}

// openNode creates a fresh node namespace (deleted when the test ends),
// or takes the caller's node.
func (l *Lab) openNode(t testing.TB, node string) {
	t.Helper()
	fresh := node == ""
	if fresh {
		l.Node = fmt.Sprintf("kprobe-%d-%d", os.Getpid(), counter.Add(1))
		if out, err := exec.Command("ip", "netns", "add", l.Node).CombinedOutput(); err != nil {
			t.Skipf("kernel probe skipped: cannot create a network namespace: %v: %s", err, out)
		}
	} else {
		l.Node = node
		if _, err := os.Stat("/run/netns/" + l.Node); err != nil {
			t.Fatalf("kernel probe: node namespace %s: %v", l.Node, err)
		}
	}
	// Cleanup runs last-registered first: the neighbours go before the
	// node. Node-side veth ends are deleted explicitly: a deleted
	// namespace's devices go only when the kernel gets round to it.
	t.Cleanup(func() {
		if fresh {
			delNS(t, l.Node)
		}
	})
}

// setUpNode sets the node's sysctls, brings up loopback and turns
// conntrack on (skipping the test when its table cannot be read).
func (l *Lab) setUpNode(t testing.TB, has6 bool) {
	t.Helper()
	// Forwarding on (a fresh namespace copies IPv4 conf/all from the
	// host, which may have it off). rp_filter off: every source here
	// has a host route back through the veth it arrives on, so strict
	// mode would pass as built, but a caller's own routes or Node must not
	// see probes dropped by a reverse-path check, which is routing, not
	// the rules under test (kube-proxy's nodes mostly run loose or off).
	// ICMP rate limits off: a burst of REJECTed flows from a pod or the
	// outside gets one ICMP error each (the node's own sockets get theirs
	// over loopback, which is never limited). route_localnet stays 0:
	// DNAT of 127.0.0.0/8 destinations needs it; set it with Run(sysctl)
	// for such a test.
	sysctls := []string{
		"net.ipv4.ip_forward=1",
		"net.ipv4.conf.all.rp_filter=0",
		"net.ipv4.conf.default.rp_filter=0",
		"net.ipv4.icmp_ratelimit=0",
		"net.ipv4.icmp_msgs_per_sec=1000000",
		"net.ipv4.icmp_msgs_burst=1000000",
	}
	if has6 {
		sysctls = append(sysctls,
			"net.ipv6.conf.all.forwarding=1",
			"net.ipv6.conf.default.accept_dad=0",
			"net.ipv6.icmp.ratelimit=0")
	}
	sysctl(t, l.Node, sysctls...)
	l.nodeBatch(t, "link set lo up")
	l.conntrackOn(t)
	if _, err := l.conntrack(false); err != nil {
		t.Skipf("kernel probe skipped: cannot read the node's conntrack table (kernel without CONFIG_NF_CONNTRACK_PROCFS?): %v", err)
	}
}

// addSink makes the sink namespace and, on the node, the node IPs and the
// routes of SinkCIDRs through it.
func (l *Lab) addSink(t testing.TB, cfg LabConfig, has6 bool) {
	t.Helper()
	// The sink: one address, no routes but the local one, forwarding off.
	// What it receives is not for it and goes nowhere; any ICMP error it
	// would send has no route back.
	l.Sink = l.Node + "-sink"
	l.addNeighbour(t, &l.Sink, ifSink, macNodeSink, macSink)
	sysctl(t, l.Sink, "net.ipv4.ip_forward=0", "net.ipv6.conf.all.forwarding=0", "net.ipv6.conf.default.accept_dad=0")
	batch(t, l.Sink,
		"addr add "+sinkGW4+"/32 dev "+peerIf,
		"link set "+peerIf+" up")

	var cmds []string
	existing := nodeAddrs(t, l.Node)
	for _, a := range cfg.NodeIPs {
		if existing[a] {
			continue
		}
		if a.Is4() {
			cmds = append(cmds, "addr add "+a.String()+"/32 dev "+ifSink)
		} else {
			cmds = append(cmds, "addr add "+a.String()+"/128 dev "+ifSink+" nodad")
		}
	}
	cmds = append(cmds, "link set "+ifSink+" up",
		"neigh replace "+sinkGW4+" lladdr "+macSink+" dev "+ifSink+" nud permanent")
	if has6 {
		cmds = append(cmds, "neigh replace "+sinkGW6+" lladdr "+macSink+" dev "+ifSink+" nud permanent")
	}
	for _, p := range cfg.SinkCIDRs {
		src := l.nodeIP(p.Addr().Is6())
		if p.Addr().Is4() {
			cmds = append(cmds, fmt.Sprintf("route add %s via %s dev %s onlink src %s", p.Masked(), sinkGW4, ifSink, src))
		} else {
			cmds = append(cmds, fmt.Sprintf("route add %s via %s dev %s src %s", p.Masked(), sinkGW6, ifSink, src))
		}
	}
	l.nodeBatch(t, cmds...)
}

// firstAutoPort and lastAutoPort bound the source ports Send picks when a
// probe names none: successive probes in a Lab never reuse a port, so an
// entry left by one probe cannot capture a flow of the next.
const (
	firstAutoPort = 20000
	lastAutoPort  = 60000
)

func checkConfig(t testing.TB, cfg LabConfig) {
	t.Helper()
	bad := func(a netip.Addr) bool { return a.IsValid() && forbidden.Contains(a.Unmap()) }
	fam := map[bool]bool{}
	for _, a := range cfg.NodeIPs {
		if !a.IsValid() || bad(a) {
			t.Fatalf("kernel probe: node IP %v not usable", a)
		}
		fam[a.Is6()] = true
	}
	need := func(what string, a netip.Addr) {
		if bad(a) {
			t.Fatalf("kernel probe: %s %v is in %v, the machine's real uplink", what, a, forbidden)
		}
		if a.IsValid() && !fam[a.Is6()] {
			t.Fatalf("kernel probe: %s %v needs a node IP of its family", what, a)
		}
	}
	for _, p := range cfg.SinkCIDRs {
		if p.Overlaps(forbidden) {
			t.Fatalf("kernel probe: sink CIDR %v overlaps %v, the machine's real uplink", p, forbidden)
		}
		need("sink CIDR", p.Addr())
	}
	need("pod IP", cfg.PodIP)
	need("outside IP", cfg.OutsideIP)
}

// nodeIP is the first node IP of a family.
func (l *Lab) nodeIP(v6 bool) netip.Addr {
	for _, a := range l.NodeIPs {
		if a.Is6() == v6 {
			return a
		}
	}
	return netip.Addr{}
}

// addNeighbour creates the namespace *ns (deleted at cleanup, the node's
// end of the veth first) joined to the node by a veth: nodeDev in the
// node, eth0 in *ns.
func (l *Lab) addNeighbour(t testing.TB, ns *string, nodeDev, nodeMAC, peerMAC string) {
	t.Helper()
	if out, err := exec.Command("ip", "netns", "add", *ns).CombinedOutput(); err != nil {
		t.Fatalf("kernel probe: creating namespace %s: %v: %s", *ns, err, out)
	}
	name := *ns
	t.Cleanup(func() {
		_ = exec.Command("ip", "-n", l.Node, "link", "del", nodeDev).Run()
		delNS(t, name)
	})
	batch(t, name, "link set lo up")
	l.nodeBatch(t, fmt.Sprintf("link add %s address %s type veth peer name %s address %s netns %s",
		nodeDev, nodeMAC, peerIf, peerMAC, name))
}

// client makes a pod or outside namespace: addr/32 (or /128) on eth0, a
// default route via a link-local next hop that is the node's side of the
// veth (a permanent neighbour entry: no ARP or NDP to go wrong), and the
// node's host route back with its own permanent neighbour entry.
func (l *Lab) client(t testing.TB, ns *string, nodeDev, nodeMAC, peerMAC string, addr netip.Addr, gw4, gw6 string) {
	t.Helper()
	l.addNeighbour(t, ns, nodeDev, nodeMAC, peerMAC)
	if addr.Is4() {
		batch(t, *ns,
			"addr add "+addr.String()+"/32 dev "+peerIf,
			"link set "+peerIf+" up",
			"neigh replace "+gw4+" lladdr "+nodeMAC+" dev "+peerIf+" nud permanent",
			"route add default via "+gw4+" dev "+peerIf+" onlink")
	} else {
		sysctl(t, *ns, "net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0")
		batch(t, *ns,
			"addr add "+addr.String()+"/128 dev "+peerIf+" nodad",
			"link set "+peerIf+" up",
			"neigh replace "+gw6+" lladdr "+nodeMAC+" dev "+peerIf+" nud permanent",
			"route add ::/0 via "+gw6+" dev "+peerIf)
	}
	bits := "/32"
	if addr.Is6() {
		bits = "/128"
	}
	l.nodeBatch(t,
		"link set "+nodeDev+" up",
		"neigh replace "+addr.String()+" lladdr "+peerMAC+" dev "+nodeDev+" nud permanent",
		"route add "+addr.String()+bits+" dev "+nodeDev)
}

func (l *Lab) nodeBatch(t testing.TB, cmds ...string) {
	t.Helper()
	batch(t, l.Node, cmds...)
}

// batch runs ip commands in a namespace (one `ip -batch` per call).
func batch(t testing.TB, ns string, cmds ...string) {
	t.Helper()
	if len(cmds) == 0 {
		return
	}
	cmd := exec.Command("ip", "-n", ns, "-batch", "-")
	cmd.Stdin = strings.NewReader(strings.Join(cmds, "\n") + "\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kernel probe: ip -n %s -batch:\n%s\n: %v: %s", ns, strings.Join(cmds, "\n"), err, out)
	}
}

func sysctl(t testing.TB, ns string, settings ...string) {
	t.Helper()
	if len(settings) == 0 {
		return
	}
	args := append([]string{"netns", "exec", ns, "sysctl", "-q", "-w"}, settings...)
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("kernel probe: sysctl in %s: %v: %s", ns, err, out)
	}
}

func delNS(t testing.TB, name string) {
	if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
		t.Errorf("kernel probe: deleting network namespace %s: %v: %s", name, err, out)
	}
}

// nodeAddrs are the addresses the namespace has now.
func nodeAddrs(t testing.TB, ns string) map[netip.Addr]bool {
	t.Helper()
	out, err := exec.Command("ip", "-n", ns, "-j", "addr", "show").Output()
	if err != nil {
		t.Fatalf("kernel probe: ip -n %s addr: %v", ns, err)
	}
	var links []struct {
		AddrInfo []struct {
			Local string `json:"local"`
		} `json:"addr_info"`
	}
	if err := json.Unmarshal(out, &links); err != nil {
		t.Fatalf("kernel probe: ip -n %s -j addr: %v", ns, err)
	}
	have := map[netip.Addr]bool{}
	for _, l := range links {
		for _, a := range l.AddrInfo {
			if ip, err := netip.ParseAddr(a.Local); err == nil {
				have[ip] = true
			}
		}
	}
	return have
}

// Run runs a command in the node namespace with stdin and returns its
// stdout; a failure fails the test. For what the loaders do not cover, e.g.
// `iptables -t nat -F KUBE-SEP-X` between two probes.
func (l *Lab) Run(t testing.TB, stdin []byte, name string, args ...string) []byte {
	t.Helper()
	out, err := l.run(stdin, name, args...)
	if err != nil {
		t.Fatalf("kernel probe: in node %s: %v", l.Node, err)
	}
	return out
}

func (l *Lab) run(stdin []byte, name string, args ...string) ([]byte, error) {
	cmd := exec.Command("ip", append([]string{"netns", "exec", l.Node, name}, args...)...)
	cmd.Stdin = bytes.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return out.Bytes(), fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(errOut.Bytes()))
	}
	return out.Bytes(), nil
}

// LoadIPTables loads iptables-save / iptables-restore text into the node
// with the real iptables-restore: family "ipv4" or "ipv6" (iptables- or
// ip6tables-), backend "nft" or "legacy" (…-nft-restore, …-legacy-restore).
// The tables the text names are replaced, others kept. The test is skipped
// when the restore binary is missing.
func (l *Lab) LoadIPTables(t testing.TB, family, backend string, text []byte) {
	t.Helper()
	var prefix string
	switch family {
	case "ipv4", "ip", "4":
		prefix = "iptables"
	case "ipv6", "ip6", "6":
		prefix = "ip6tables"
	default:
		t.Fatalf("kernel probe: LoadIPTables: family %q, want ipv4 or ipv6", family)
	}
	if backend != "nft" && backend != "legacy" {
		t.Fatalf("kernel probe: LoadIPTables: backend %q, want nft or legacy", backend)
	}
	tool := prefix + "-" + backend + "-restore"
	if _, err := exec.LookPath(tool); err != nil {
		t.Skipf("kernel probe skipped: %s not installed (make test-deps installs it)", tool)
	}
	l.Run(t, text, tool)
}

// LoadNFT loads `nft -f` text into the node (skipping the test when nft is
// missing).
func (l *Lab) LoadNFT(t testing.TB, text []byte) {
	t.Helper()
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("kernel probe skipped: nft not installed (make test-deps installs it)")
	}
	l.Run(t, text, "nft", "-f", "-")
	l.conntrackOn(t)
}

// ConntrackTable is the nftables table (family inet) NewLab adds to the
// node, and LoadNFT adds again after text that may have flushed the
// ruleset: a chain no packet reaches, with one `ct state` rule. A rule
// that uses conntrack is what turns conntrack on in a namespace (since
// Linux 4.10 its hooks are registered per namespace only when a NAT
// table, -m conntrack, a ct expression… needs them); every kube-proxy node
// has it on (NAT needs it), but a ruleset without NAT or ct matches would
// leave it off here, and every flow would look dropped.
const ConntrackTable = "kernelprobe"

func (l *Lab) conntrackOn(t testing.TB) {
	t.Helper()
	l.Run(t, []byte(`table inet `+ConntrackTable+` {
	chain conntrack {
		comment "never jumped to: its ct expression keeps conntrack on in this namespace"
	}
}
flush chain inet `+ConntrackTable+` conntrack
add rule inet `+ConntrackTable+` conntrack ct state new
`), "nft", "-f", "-")
}

// FlushConntrack empties the node's conntrack table (both families), so the
// next probe's flows cannot meet entries of an earlier one. Probes that let
// Send pick their source ports do not need it; probes that reuse
// SrcPort0 do.
func (l *Lab) FlushConntrack(t testing.TB) {
	t.Helper()
	for _, fam := range []string{"ipv4", "ipv6"} {
		l.Run(t, nil, "conntrack", "-F", "-f", fam)
	}
}

// inNetns runs fn on an OS thread that has joined the named namespace. The
// thread stays locked and is terminated when fn returns (a goroutine that
// exits locked takes its thread with it), so no other goroutine ever runs
// in the namespace. Sockets fn opens stay in the namespace whichever thread
// uses them later.
func inNetns(ns string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		fd, err := unix.Open("/run/netns/"+ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- fmt.Errorf("opening namespace %s: %w", ns, err)
			return
		}
		err = unix.Setns(fd, unix.CLONE_NEWNET)
		unix.Close(fd)
		if err != nil {
			errc <- fmt.Errorf("joining namespace %s: %w", ns, err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}
