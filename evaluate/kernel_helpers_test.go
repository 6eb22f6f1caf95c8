package evaluate_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/evaluate"
	"github.com/proxyrules/kubectl-proxyrules/inspect"
	"github.com/proxyrules/kubectl-proxyrules/internal/fixture"
	"github.com/proxyrules/kubectl-proxyrules/internal/kernelprobe"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// The kernel tests' lab: kube-proxy's own rules (small-v1.37) loaded into a
// kernelprobe node namespace, real flows sent through them, and the
// evaluator's answer for the same packet on the same rules text held
// against what conntrack says the kernel did.

// The lab's addresses. The node has the fixture's node IPs; the pod is on
// the node's pod CIDR (10.244.0.0/24) and is none of the endpoints; the
// outside client 203.0.113.7 is inside shop/frontend's source range
// 203.0.113.0/25, 198.51.100.200 (the second lab's client) outside it.
var (
	kNodeIP4   = netip.MustParseAddr("10.0.0.10")
	kNodeIP6   = netip.MustParseAddr("fd00::10")
	kPodIP4    = netip.MustParseAddr("10.244.0.250")
	kPodIP6    = netip.MustParseAddr("fd00:10:244::250")
	kInRange   = netip.MustParseAddr("203.0.113.7")
	kOutRange  = netip.MustParseAddr("198.51.100.200")
	kClientNet = netip.MustParsePrefix("10.0.1.0/24") // extra client addresses on the node (see addSources)
)

// kSinkCIDRs are routed from the node into the sink: the service CIDRs,
// the cluster (pod) CIDRs, the node network (default/kubernetes' endpoint
// 10.0.0.2:6443 is off the pod network), the load-balancer and
// external-IP test networks, and the IPv6 service and pod networks
// (fd00:10:96::/112, fd00:10:244::/56, both in fd00:10::/32; the node's
// own fd00::10 is not). The pod and outside clients have host routes of
// their own, more specific than these.
var kSinkCIDRs = []netip.Prefix{
	netip.MustParsePrefix("10.96.0.0/16"),
	netip.MustParsePrefix("10.244.0.0/16"),
	netip.MustParsePrefix("10.0.0.0/24"),
	netip.MustParsePrefix("198.51.100.0/24"),
	netip.MustParsePrefix("203.0.113.0/24"),
	netip.MustParsePrefix("fd00:10::/32"),
}

const kScenario = "small-v1.37"

// kMode is a proxy mode and how its rules are loaded.
type kMode struct {
	name string // iptables, iptables-legacy, nftables
	// backend: nft or legacy for iptables mode; "" for nftables mode.
	backend string
	// files are the fixture files loaded (and walked), relative to the
	// scenario directory.
	files []string
	v6    bool // the files include the IPv6 rules
}

var (
	kIPTables       = kMode{"iptables", "nft", []string{"iptables/save-nft-ipv4.txt", "iptables/save-nft-ipv6.txt"}, true}
	kIPTablesLegacy = kMode{"iptables-legacy", "legacy", []string{"iptables/save-legacy-ipv4.txt"}, false}
	kNFTables       = kMode{"nftables", "", []string{"nftables/ruleset.txt"}, true}
)

func (m kMode) iptables() bool { return m.backend != "" }

// kLab is a kernelprobe lab holding one mode's rules.
type kLab struct {
	*kernelprobe.Lab
	mode kMode
	// rules is what the evaluator walks: the fixture text loaded, or the
	// rules read back from the kernel after a fault.
	rules *inspect.Ruleset
	// sources are extra client addresses given to the node (addSources).
	sources  []netip.Addr
	sctpPort atomic.Uint32
}

// newKLab builds a lab and loads the mode's fixture rules into it. The main
// lab has the IPv4 pod and the client inside frontend's source range; the
// second (alt) has the IPv6 pod and the client outside the range.
func newKLab(t *testing.T, mode kMode, alt bool) *kLab {
	t.Helper()
	cfg := kernelprobe.LabConfig{
		NodeIPs:   []netip.Addr{kNodeIP4, kNodeIP6},
		SinkCIDRs: kSinkCIDRs,
		PodIP:     kPodIP4,
		OutsideIP: kInRange,
	}
	if alt {
		cfg.PodIP, cfg.OutsideIP = kPodIP6, kOutRange
	}
	for _, tool := range kTools(mode) {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("kernel test skipped: %s not installed (make test-deps installs it)", tool)
		}
	}
	lab := kernelprobe.NewLab(t, cfg)
	l := &kLab{Lab: lab, mode: mode}
	l.sctpPort.Store(41000)
	dir := fixture.Dir(kScenario)
	l.rules = &inspect.Ruleset{}
	texts := make([][]byte, len(mode.files))
	for i, f := range mode.files {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		texts[i] = data
		l.rules.Merge(fixture.Parse(t, string(data), f))
	}
	if !mode.iptables() {
		l.LoadNFT(t, texts[0])
		return l
	}
	// kube-proxy's -m nfacct counters need their objects, which
	// kube-proxy creates before its first restore.
	l.ensureNFAcct(t, bytes.Join(texts, nil))
	for i, f := range mode.files {
		fam := "ipv4"
		if strings.Contains(f, "ipv6") {
			fam = "ipv6"
		}
		l.LoadIPTables(t, fam, mode.backend, texts[i])
	}
	return l
}

func kTools(m kMode) []string {
	if !m.iptables() {
		return []string{"nft"}
	}
	tools := []string{"iptables-" + m.backend + "-restore", "iptables-" + m.backend + "-save", "iptables-" + m.backend}
	if m.v6 {
		tools = append(tools, "ip6tables-"+m.backend+"-restore", "ip6tables-"+m.backend+"-save")
	}
	return tools
}

// readBack reads the node's rules back from the kernel with the real
// tools: what the evaluator must walk once another writer has changed
// them.
func (l *kLab) readBack(t *testing.T) *inspect.Ruleset {
	t.Helper()
	rs := &inspect.Ruleset{}
	if !l.mode.iptables() {
		rs.Merge(fixture.Parse(t, string(l.Run(t, nil, "nft", "list", "ruleset")), "nft list ruleset"))
		return rs
	}
	progs := []string{"iptables-" + l.mode.backend + "-save"}
	if l.mode.v6 {
		progs = append(progs, "ip6tables-"+l.mode.backend+"-save")
	}
	for _, p := range progs {
		rs.Merge(fixture.Parse(t, string(l.Run(t, nil, p)), p))
	}
	return rs
}

// ipt runs the mode's iptables command in the node.
func (l *kLab) ipt(t *testing.T, args ...string) []byte {
	t.Helper()
	return l.Run(t, nil, "iptables-"+l.mode.backend, args...)
}

// node is the node as the evaluator knows it: the lab's addresses.
func (l *kLab) node() evaluate.Node {
	return evaluate.Node{Addresses: append(append([]netip.Addr{}, l.NodeIPs...), l.sources...)}
}

// addSources gives the node n more addresses (10.0.1.x on lo) for flows
// from distinct clients: the lab's pod and outside clients have one
// address each, and ClientIP affinity is per client address.
func (l *kLab) addSources(t *testing.T, n int) []netip.Addr {
	t.Helper()
	var cmds []string
	var out []netip.Addr
	a := kClientNet.Addr().Next()
	for range len(l.sources) {
		a = a.Next()
	}
	for range n {
		if !kClientNet.Contains(a.Next()) { // the last is the broadcast address
			t.Fatalf("out of client addresses in %v", kClientNet)
		}
		out = append(out, a)
		cmds = append(cmds, "addr add "+a.String()+"/32 dev lo")
		a = a.Next()
	}
	l.Run(t, []byte(strings.Join(cmds, "\n")+"\n"), "ip", "-batch", "-")
	l.sources = append(l.sources, out...)
	return out
}

// pinned is, per iptables ClientIP-affinity record (an xt_recent list in
// the node), whether src has an entry in it: what Options.Pinned tells
// the walk. The lists are the kernel's (/proc/net/xt_recent/NAME).
func (l *kLab) pinned(t *testing.T, src netip.Addr) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	err := inNetns(l.Node, func() error {
		dir := "/proc/thread-self/net/xt_recent"
		ents, err := os.ReadDir(dir)
		if os.IsNotExist(err) {
			return nil
		}
		if err != nil {
			return err
		}
		for _, e := range ents {
			data, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				return err
			}
			out[e.Name()] = false
			for _, line := range strings.Split(string(data), "\n") {
				if f := strings.Fields(line); len(f) > 0 && f[0] == "src="+src.String() {
					out[e.Name()] = true
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("reading the node's xt_recent lists: %v", err)
	}
	return out
}

// state is what the evaluator needs for a flow from src now: the rules
// (for nftables mode read back from the kernel, whose affinity sets hold
// the clients seen so far) and the affinity records src has (iptables).
func (l *kLab) state(t *testing.T, src netip.Addr, affinity bool) (*inspect.Ruleset, evaluate.Options) {
	t.Helper()
	if !affinity {
		return l.rules, evaluate.Options{}
	}
	if l.mode.iptables() {
		return l.rules, evaluate.Options{Pinned: l.pinned(t, src)}
	}
	return l.readBack(t), evaluate.Options{}
}

// nfacctName finds kube-proxy's counter names in iptables-save text.
var nfacctName = regexp.MustCompile(`--nfacct-name +(\S+)`)

// ensureNFAcct creates the nfacct objects the rules name (NFNL_MSG_ACCT_NEW
// over nfnetlink in the node), as kube-proxy does; -m nfacct refuses to
// load without them.
func (l *kLab) ensureNFAcct(t *testing.T, text []byte) {
	t.Helper()
	names := map[string]bool{}
	for _, m := range nfacctName.FindAllSubmatch(text, -1) {
		names[string(m[1])] = true
	}
	if len(names) == 0 {
		return
	}
	err := inNetns(l.Node, func() error {
		fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
			return err
		}
		seq := uint32(1)
		for name := range names {
			const nfnlSubsysAcct, nfnlMsgAcctNew, nfacctName = 7, 0, 1
			attr := append([]byte(name), 0)
			alen := 4 + len(attr)
			msg := make([]byte, 16+4+((alen+3)&^3))
			binary.NativeEndian.PutUint32(msg[0:], uint32(len(msg)))
			binary.NativeEndian.PutUint16(msg[4:], nfnlSubsysAcct<<8|nfnlMsgAcctNew)
			binary.NativeEndian.PutUint16(msg[6:], unix.NLM_F_REQUEST|unix.NLM_F_ACK|unix.NLM_F_CREATE)
			binary.NativeEndian.PutUint32(msg[8:], seq)
			// nfgenmsg: AF_UNSPEC, NFNETLINK_V0, res_id 0.
			binary.NativeEndian.PutUint16(msg[20:], uint16(alen))
			binary.NativeEndian.PutUint16(msg[22:], nfacctName)
			copy(msg[24:], attr)
			if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
				return fmt.Errorf("nfacct %s: %w", name, err)
			}
			buf := make([]byte, 4096)
			n, _, err := unix.Recvfrom(fd, buf, 0)
			if err != nil {
				return fmt.Errorf("nfacct %s: %w", name, err)
			}
			if n >= 20 && binary.NativeEndian.Uint16(buf[4:]) == unix.NLMSG_ERROR {
				if e := int32(binary.NativeEndian.Uint32(buf[16:])); e != 0 {
					return fmt.Errorf("nfacct %s: %w", name, unix.Errno(-e))
				}
			}
			seq++
		}
		return nil
	})
	if err != nil {
		t.Fatalf("creating kube-proxy's nfacct counters in the node: %v", err)
	}
}

// inNetns runs fn on an OS thread that has joined the named namespace and
// is thrown away after (kernelprobe does the same for its sockets).
func inNetns(ns string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		fd, err := unix.Open("/run/netns/"+ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- err
			return
		}
		err = unix.Setns(fd, unix.CLONE_NEWNET)
		unix.Close(fd)
		if err != nil {
			errc <- err
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// sendSCTP sends n SCTP INIT chunks from the pod (a raw socket: a kernel
// may have conntrack and NAT for SCTP and no SCTP sockets, CONFIG_IP_SCTP
// unset, as this one), one source port each, and reads what conntrack
// made of each, as kernelprobe.Send does for TCP and UDP. Without a
// socket of its own a flow cannot see an ICMP error: a reject reads as a
// drop here.
func (l *kLab) sendSCTP(t *testing.T, dst netip.AddrPort, n int) []kernelprobe.Observation {
	t.Helper()
	if l.Pod == "" || !dst.Addr().Is4() {
		t.Fatal("sendSCTP: IPv4 flows from the pod only")
	}
	port0 := uint16(l.sctpPort.Add(uint32(n)) - uint32(n))
	var noSocket error
	err := inNetns(l.Pod, func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_SCTP)
		if err != nil {
			noSocket = err
			return nil
		}
		defer unix.Close(fd)
		for i := range n {
			pkt := sctpInit(port0+uint16(i), dst.Port(), uint32(0x6b700000+i))
			if err := unix.Sendto(fd, pkt, 0, &unix.SockaddrInet4{Addr: dst.Addr().As4()}); err != nil {
				return fmt.Errorf("sendto %v: %w", dst, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("sending SCTP from the pod: %v", err)
	}
	if noSocket != nil {
		t.Skipf("SCTP skipped: no raw SCTP socket in the pod namespace: %v", noSocket)
	}
	obs := make([]kernelprobe.Observation, n)
	found := 0
	deadline := time.Now().Add(400 * time.Millisecond)
	for found < n && time.Now().Before(deadline) {
		var data []byte
		if err := inNetns(l.Node, func() error {
			var err error
			data, err = os.ReadFile("/proc/thread-self/net/nf_conntrack")
			return err
		}); err != nil {
			t.Fatal(err)
		}
		found = 0
		for i := range n {
			src := netip.AddrPortFrom(l.PodIP, port0+uint16(i))
			obs[i] = kernelprobe.Observation{Flow: i, Src: src, Verdict: kernelprobe.Drop}
			for _, line := range strings.Split(string(data), "\n") {
				orig, reply, ok := ctTuples(line, "sctp")
				if !ok || orig[0] != src || orig[1] != dst {
					continue
				}
				obs[i].Raw, obs[i].Endpoint = line, reply[0]
				obs[i].Verdict = kernelprobe.Accept
				if reply[0] != dst {
					obs[i].Verdict = kernelprobe.DNAT
				}
				obs[i].Masqueraded = reply[1] != src
				found++
				break
			}
		}
		if found == 0 && genericSCTP(string(data)) {
			t.Skip("SCTP skipped: this kernel's conntrack tracks SCTP as an unknown protocol (no CONFIG_NF_CT_PROTO_SCTP): no NAT for it")
		}
		if found < n {
			time.Sleep(15 * time.Millisecond)
		}
	}
	return obs
}

// genericSCTP: the conntrack table holds SCTP flows as "unknown 132", a
// protocol it does not track.
func genericSCTP(table string) bool {
	for _, line := range strings.Split(table, "\n") {
		if f := strings.Fields(line); len(f) > 3 && f[2] == "unknown" && f[3] == "132" {
			return true
		}
	}
	return false
}

// sctpInit is an SCTP packet with one INIT chunk (RFC 9260 3, 3.3.2),
// its CRC32c stored as the kernel checks it.
func sctpInit(sport, dport uint16, tag uint32) []byte {
	p := make([]byte, 12+20)
	binary.BigEndian.PutUint16(p[0:], sport)
	binary.BigEndian.PutUint16(p[2:], dport)
	// verification tag 0 (an INIT), checksum filled below
	p[12] = 1 // INIT
	binary.BigEndian.PutUint16(p[14:], 20)
	binary.BigEndian.PutUint32(p[16:], tag)     // initiate tag
	binary.BigEndian.PutUint32(p[20:], 65536)   // a_rwnd
	binary.BigEndian.PutUint16(p[24:], 1)       // outbound streams
	binary.BigEndian.PutUint16(p[26:], 1)       // inbound streams
	binary.BigEndian.PutUint32(p[28:], tag^0xa) // initial TSN
	binary.LittleEndian.PutUint32(p[8:], crc32.Checksum(p, crc32.MakeTable(crc32.Castagnoli)))
	return p
}

// ctTuples reads the original and reply (src, dst) of a
// /proc/net/nf_conntrack line of protocol proto.
func ctTuples(line, proto string) (orig, reply [2]netip.AddrPort, ok bool) {
	f := strings.Fields(line)
	if len(f) < 4 || f[2] != proto {
		return orig, reply, false
	}
	var addrs []netip.Addr
	var ports []uint16
	for _, kv := range f[3:] {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "src", "dst":
			a, err := netip.ParseAddr(v)
			if err != nil {
				return orig, reply, false
			}
			addrs = append(addrs, a)
		case "sport", "dport":
			n, err := strconv.ParseUint(v, 10, 16)
			if err != nil {
				return orig, reply, false
			}
			ports = append(ports, uint16(n))
		}
	}
	if len(addrs) < 4 || len(ports) < 4 {
		return orig, reply, false
	}
	orig = [2]netip.AddrPort{netip.AddrPortFrom(addrs[0], ports[0]), netip.AddrPortFrom(addrs[1], ports[1])}
	reply = [2]netip.AddrPort{netip.AddrPortFrom(addrs[2], ports[2]), netip.AddrPortFrom(addrs[3], ports[3])}
	return orig, reply, true
}

// The Services of the scenario, by kube-proxy's service port name.
type kServices map[string]*correlate.ServicePort

func readKServices(t *testing.T) kServices {
	t.Helper()
	out := kServices{}
	for _, sp := range fixture.Objects(t, fixture.Dir(kScenario)).ServicePorts() {
		out[sp.String()] = sp
	}
	return out
}

func (s kServices) get(t *testing.T, name string) *correlate.ServicePort {
	t.Helper()
	sp := s[name]
	if sp == nil || !sp.Proxied {
		t.Fatalf("objects.json has no proxied service port %s", name)
	}
	return sp
}

// clusterIP is the service port's cluster IP of a family.
func clusterIP(t *testing.T, sp *correlate.ServicePort, v6 bool) netip.AddrPort {
	t.Helper()
	for _, ip := range sp.ClusterIPs {
		if a := netip.MustParseAddr(ip); a.Is6() == v6 {
			return netip.AddrPortFrom(a, uint16(sp.Port))
		}
	}
	t.Fatalf("%s has no cluster IP of that family", sp)
	return netip.AddrPort{}
}

func nodePort(t *testing.T, sp *correlate.ServicePort) netip.AddrPort {
	t.Helper()
	if sp.NodePort == 0 {
		t.Fatalf("%s has no node port", sp)
	}
	return netip.AddrPortFrom(kNodeIP4, uint16(sp.NodePort))
}

func firstIP(t *testing.T, sp *correlate.ServicePort, ips []string) netip.AddrPort {
	t.Helper()
	if len(ips) == 0 {
		t.Fatalf("%s has none", sp)
	}
	return netip.AddrPortFrom(netip.MustParseAddr(ips[0]), uint16(sp.Port))
}

// A kFlow is a set of flows of one kind, as a case sends them.
type kFlow struct {
	from  kernelprobe.From
	proto string
	dst   netip.AddrPort
	// srcIP binds node flows to one of the node's addresses.
	srcIP netip.Addr
	// flows: how many; 0 picks from the evaluator's answer (a few
	// hundred for a split, fewer for one outcome).
	flows int
}

// src is the flows' source address (the route's for the node's own).
func (l *kLab) src(f kFlow) netip.Addr {
	switch f.from {
	case kernelprobe.FromPod:
		return l.PodIP
	case kernelprobe.FromOutside:
		return l.OutsideIP
	}
	if f.srcIP.IsValid() {
		return f.srcIP
	}
	if f.dst.Addr().Is6() {
		return kNodeIP6
	}
	return kNodeIP4
}

// packet is the evaluator's packet for the flows (the source port of a
// flow does not matter to these rules; none tests it).
func (l *kLab) packet(f kFlow) evaluate.Packet {
	fam := kubeproxy.IPv4
	if f.dst.Addr().Is6() {
		fam = kubeproxy.IPv6
	}
	return evaluate.Packet{Family: fam, Protocol: f.proto, Src: netip.AddrPortFrom(l.src(f), 40000), Dst: f.dst,
		Origin: evaluate.Origin(f.from)}
}

// send sends n flows of f and returns what the kernel did.
func (l *kLab) send(t *testing.T, f kFlow, n int) []kernelprobe.Observation {
	t.Helper()
	if f.proto == "sctp" {
		return l.sendSCTP(t, f.dst, n)
	}
	return l.Send(t, kernelprobe.Probe{From: f.from, Proto: f.proto, Dst: f.dst, SrcIP: f.srcIP, Flows: n})
}

// kExpect is the evaluator's answer for a new connection, in the
// kernel's terms.
type kExpect struct {
	// shares of each kernel outcome key (kernelprobe.Outcome.String; with
	// masquerade for pod and outside flows).
	shares map[string]float64
	// masq: per DNAT/accept key of a node flow, whether the evaluator
	// masquerades it (1), not (0), or partly (between); showable: the
	// masquerade is random-fully, the one kind the node's own flows show.
	masq     map[string]float64
	showable map[string]bool
	// probs are the shares as exact fractions, for logs.
	probs   map[string]evaluate.Prob
	summary string
}

// isAffinity: an assumption about a ClientIP-affinity record.
func isAffinity(a evaluate.Assumption) bool { return strings.Contains(a.What, "affinity record") }

// expectFor walks p on rs and keeps the outcomes of a new client: those
// that assumed nothing, or only that the client has no affinity record.
// Any other assumption, and an unknown verdict, fails the test: these
// rules are kube-proxy's, the packet's facts are all known, and the
// evaluator should need neither.
func expectFor(t *testing.T, what string, rs *inspect.Ruleset, node evaluate.Node, p evaluate.Packet, opts evaluate.Options) kExpect {
	t.Helper()
	r := evaluate.New(rs, node).Walk(p, opts)
	ex := kExpect{shares: map[string]float64{}, masq: map[string]float64{}, showable: map[string]bool{}, probs: map[string]evaluate.Prob{}}
	var total evaluate.Prob
	var lines []string
	nodeFlow := p.Origin == evaluate.FromNode
	masqP := map[string]evaluate.Prob{}
	keyP := map[string]evaluate.Prob{}
	if r.Truncated {
		t.Errorf("%s: the walk was truncated", what)
	}
outcomes:
	for _, o := range r.Outcomes {
		line := fmt.Sprintf("%s %s %s masq=%v", o.Probability, o.Verdict, o.Destination, o.Masquerade)
		for _, a := range o.Assumes {
			line += fmt.Sprintf(" [%s=%v]", a.What, a.Holds)
		}
		if o.Affinity != nil {
			line += fmt.Sprintf(" (affinity %s pinned=%v known=%v)", o.Affinity.Record, o.Affinity.Pinned, o.Affinity.Known)
		}
		lines = append(lines, line)
		for _, a := range o.Assumes {
			if !isAffinity(a) {
				t.Errorf("%s: the evaluator assumed %q (%s %s rule %d) for a packet whose facts are all known: %s", what, a.What, a.Table, a.Chain, a.Rule, line)
				continue outcomes
			}
			if a.Holds {
				continue outcomes // a returning client: not what a fresh flow of a new client does
			}
		}
		if o.Affinity != nil && o.Affinity.Pinned && !o.Affinity.Known {
			continue
		}
		if o.Verdict == evaluate.VerdictUnknown {
			t.Errorf("%s: the evaluator's outcome is unknown: %s; not modelled: %+v", what, line, r.NotModelled)
		}
		total = total.Add(o.Probability)
		k := kernelprobe.Outcome{Verdict: string(o.Verdict)}
		if o.Verdict == evaluate.VerdictDNAT || o.Verdict == evaluate.VerdictAccept {
			k.Endpoint = o.Destination
		}
		if !nodeFlow {
			k.Masqueraded = o.Masquerade
		}
		key := k.String()
		keyP[key] = keyP[key].Add(o.Probability)
		if o.Masquerade {
			masqP[key] = masqP[key].Add(o.Probability)
			if randomFully(o) {
				ex.showable[key] = true
			}
		}
	}
	if !total.IsOne() {
		t.Errorf("%s: the outcomes of a new client add up to %s, not 1:\n  %s", what, total, strings.Join(lines, "\n  "))
	}
	for k, p := range keyP {
		ex.probs[k] = p
		ex.shares[k] = p.Float64()
		ex.masq[k] = masqP[k].Float64() / p.Float64()
	}
	sort.Strings(lines)
	ex.summary = strings.Join(lines, "\n  ")
	return ex
}

// randomFully: the outcome's masquerade is random-fully (iptables) or
// fully-random (nft): it picks a random source port.
func randomFully(o evaluate.Outcome) bool {
	for _, h := range o.Path {
		if h.Action == "masquerade" && (strings.Contains(h.Text, "random-fully") || strings.Contains(h.Text, "fully-random")) {
			return true
		}
	}
	return false
}

// kCheck is one probe of a case: the evaluator's answer for f on the lab's
// rules (affinity: the records as the kernel holds them now) against the
// kernel's flows. want, when set, is the verdict every kernel flow should
// have (the scenario's premise: a lab artefact, a missing route or
// listener, shows here first).
func (l *kLab) kCheck(t *testing.T, f kFlow, want string, affinity bool) []kernelprobe.Observation {
	t.Helper()
	rs, opts := l.state(t, l.src(f), affinity)
	p := l.packet(f)
	ex := expectFor(t, p.String(), rs, l.node(), p, opts)
	obs := compare(t, p.String(), ex, f.from == kernelprobe.FromNode, f.flows, func(n int) []kernelprobe.Observation { return l.send(t, f, n) })
	if want != "" {
		for _, o := range obs {
			if o.Verdict != want {
				t.Errorf("%s: premise: every flow %s, the kernel did %s (%s): a lab artefact or a wrong premise", p, want, kernelprobe.Key(o, true), o.Raw)
				break
			}
		}
	}
	return obs
}

// distinct sends one flow from each of n fresh client addresses of the
// node (prepare, if set, gives them affinity records first) and holds the
// split against the evaluator's answer for such a client: under ClientIP
// affinity one flow per client is what "a new connection of a client in
// this state" means. Every client is walked (their states must agree);
// retried once on n more fresh clients.
func (l *kLab) distinct(t *testing.T, what string, f kFlow, n int, prepare func([]netip.Addr)) (srcs []netip.Addr, obs []kernelprobe.Observation) {
	t.Helper()
	var ex kExpect
	for try := 1; ; try++ {
		srcs = l.addSources(t, n)
		if prepare != nil {
			prepare(srcs)
		}
		var rs *inspect.Ruleset
		if !l.mode.iptables() {
			rs = l.readBack(t)
		}
		obs = nil
		for i, s := range srcs {
			g := f
			g.srcIP = s
			var opts evaluate.Options
			if l.mode.iptables() {
				rs, opts = l.rules, evaluate.Options{Pinned: l.pinned(t, s)}
			}
			e := expectFor(t, fmt.Sprintf("%s, client %v", what, s), rs, l.node(), l.packet(g), opts)
			if i == 0 {
				ex = e
			} else if e.summary != ex.summary {
				t.Fatalf("%s: client %v's outcomes differ from %v's:\n  %s\nand\n  %s", what, s, srcs[0], e.summary, ex.summary)
			}
			o := l.send(t, g, 1)
			o[0].Flow = i
			obs = append(obs, o...)
		}
		ok, fatal, msg := fit(obs, ex, false)
		t.Logf("%s: try %d, one flow from each of %d clients: %s", what, try, n, msg)
		if ok {
			break
		}
		if fatal || try == 2 {
			t.Errorf("%s: the kernel disagrees with the evaluator: %s\nevaluator (each client):\n  %s", what, msg, ex.summary)
			break
		}
	}
	checkNodeMasq(t, what, ex, obs)
	return srcs, obs
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

// probe is the expectation as kernelprobe holds it to the kernel.
func (ex kExpect) probe() kernelprobe.Expect {
	exact := map[string]string{}
	for k := range ex.probs {
		exact[k] = ex.probs[k].String()
	}
	return kernelprobe.Expect{Model: "the evaluator", Shares: ex.shares, Masq: ex.masq, Showable: ex.showable, Exact: exact, Summary: ex.summary}
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
