package evaluate_test

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/evaluate"
	"github.com/proxyrules/kubectl-proxyrules/inspect"
	"github.com/proxyrules/kubectl-proxyrules/internal/kernelprobe"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// The evaluator's answer checked against the real kernel on kube-proxy's
// own rules (testdata/fixtures/small-v1.37, written by kube-proxy v1.37.2's
// code): TestKernel loads them as they are, in iptables mode (both
// backends) and nftables mode, and sends real flows for each Service shape
// the fixture has; TestKernelFaults changes them first as another writer
// would (an on-call engineer with iptables or nft), reads them back from
// the kernel and holds the evaluator's answer on what the kernel has
// against what it does. Each flow is compared on its verdict, the endpoint
// it was DNATed to, the share of each (chi-square against the evaluator's
// exact probabilities) and masquerade. See kernel_helpers_test.go for the
// lab, and internal/kernelprobe for what the kernel's answers look like.

// kernelPrecheck skips a kernel test with one line when it cannot run.
func kernelPrecheck(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("kernel test skipped: needs root to create network namespaces")
	}
	for _, tool := range []string{"ip", "nft", "conntrack", "sysctl", "iptables-nft-restore", "iptables-nft-save", "ip6tables-nft-restore", "ip6tables-nft-save"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("kernel test skipped: %s not installed (make test-deps installs it)", tool)
		}
	}
}

// kCase is one Service shape probed one way.
type kCase struct {
	name string
	flow kFlow
	// want is the verdict every kernel flow should have: the premise of
	// the case (a lab artefact would show here).
	want string
	alt  bool // needs the second lab: IPv6 pod, client outside frontend's range
	v6   bool // needs the mode's IPv6 rules
	// run replaces the plain check (affinity).
	run func(t *testing.T, l *kLab, c kCase)
}

func (c kCase) check(t *testing.T, l *kLab) []kernelprobe.Observation {
	t.Helper()
	// Earlier cases' entries are no use now (every probe has fresh
	// source ports) and make each read of the table slower.
	l.FlushConntrack(t)
	if c.run != nil {
		c.run(t, l, c)
		return nil
	}
	return l.kCheck(t, c.flow, c.want, false)
}

const (
	pod     = kernelprobe.FromPod
	node    = kernelprobe.FromNode
	outside = kernelprobe.FromOutside
	dnat    = kernelprobe.DNAT
)

// premise fails the test when the fixture's objects are not what a case's
// name says.
func premise(t *testing.T, sp *correlate.ServicePort, ok bool, what string) {
	t.Helper()
	if !ok {
		t.Fatalf("objects.json: %s is not %s: %+v", sp, what, *sp)
	}
}

func localEndpoints(sp *correlate.ServicePort) int {
	n := 0
	for _, e := range sp.Endpoints {
		if e.NodeName == "node-a" {
			n++
		}
	}
	return n
}

func inRanges(sp *correlate.ServicePort, a netip.Addr) bool {
	for _, r := range sp.SourceRanges {
		if netip.MustParsePrefix(r).Contains(a) {
			return true
		}
	}
	return false
}

// kCases are the Service shapes of small-v1.37 and the ways they are
// reached, their addresses from objects.json.
func kCases(t *testing.T, s kServices) []kCase {
	web := s.get(t, "shop/web:http")
	premise(t, web, len(web.Endpoints) == 3 && web.Type == "ClusterIP", "a ClusterIP with 3 endpoints")
	dns := s.get(t, "kube-system/kube-dns:dns")
	premise(t, dns, len(dns.Endpoints) == 2 && dns.Protocol == "UDP", "UDP with 2 endpoints")
	dnsTCP := s.get(t, "kube-system/kube-dns:dns-tcp")
	premise(t, dnsTCP, len(dnsTCP.Endpoints) == 2, "2 endpoints")
	kube := s.get(t, "default/kubernetes:https")
	premise(t, kube, len(kube.Endpoints) == 1 && kube.Endpoints[0].String() == "10.0.0.2:6443", "one endpoint 10.0.0.2:6443 off the pod network")
	api := s.get(t, "shop/api:http")
	premise(t, api, api.Type == "NodePort" && !api.ExternalLocal, "NodePort eTP=Cluster")
	ingress := s.get(t, "shop/ingress:http")
	premise(t, ingress, ingress.ExternalLocal && localEndpoints(ingress) == 1 && len(ingress.LoadBalancerIPs) > 0, "eTP=Local with a local endpoint and a load-balancer IP")
	reports := s.get(t, "shop/reports:http")
	premise(t, reports, reports.ExternalLocal && localEndpoints(reports) == 0 && len(reports.Endpoints) > 0, "eTP=Local without a local endpoint")
	front := s.get(t, "shop/frontend:https")
	premise(t, front, front.Type == "LoadBalancer" && inRanges(front, kInRange) && !inRanges(front, kOutRange) && inRanges(front, kPodIP4),
		"a LoadBalancer whose source ranges hold 203.0.113.7 and the pod, not 198.51.100.200")
	gw := s.get(t, "shop/legacy-gw:http")
	premise(t, gw, len(gw.ExternalIPs) == 1 && gw.ExternalIPs[0] == "203.0.113.50", "a Service with external IP 203.0.113.50")
	agent := s.get(t, "monitoring/node-agent:metrics")
	premise(t, agent, agent.InternalLocal && localEndpoints(agent) == 1 && len(agent.Endpoints) == 3, "iTP=Local with one local endpoint of 3")
	cart := s.get(t, "shop/cart:http")
	premise(t, cart, cart.AffinitySeconds > 0 && len(cart.Endpoints) == 2, "ClientIP affinity over 2 endpoints")
	empty := s.get(t, "shop/empty:http")
	premise(t, empty, len(empty.Endpoints) == 0, "without endpoints")
	diameter := s.get(t, "telco/diameter:diameter")
	premise(t, diameter, diameter.Protocol == "SCTP", "SCTP")
	v6only := s.get(t, "shop/v6-only:grpc")
	premise(t, v6only, len(v6only.ClusterIPs) == 1 && strings.Contains(v6only.ClusterIPs[0], ":"), "IPv6 only")

	tcp := func(from kernelprobe.From, dst netip.AddrPort) kFlow {
		return kFlow{from: from, proto: "tcp", dst: dst}
	}
	udp := func(from kernelprobe.From, dst netip.AddrPort) kFlow {
		return kFlow{from: from, proto: "udp", dst: dst}
	}
	return []kCase{
		{name: "shop-web cluster IP from a pod", flow: tcp(pod, clusterIP(t, web, false)), want: dnat},
		{name: "shop-web cluster IP from the node", flow: tcp(node, clusterIP(t, web, false)), want: dnat},
		{name: "kube-dns dns (udp) cluster IP from a pod", flow: udp(pod, clusterIP(t, dns, false)), want: dnat},
		{name: "kube-dns dns (udp) cluster IP from the node", flow: udp(node, clusterIP(t, dns, false)), want: dnat},
		{name: "kube-dns dns-tcp cluster IP from a pod", flow: tcp(pod, clusterIP(t, dnsTCP, false)), want: dnat},
		{name: "kubernetes cluster IP from a pod", flow: tcp(pod, clusterIP(t, kube, false)), want: dnat},
		{name: "kubernetes cluster IP from the node", flow: tcp(node, clusterIP(t, kube, false)), want: dnat},
		{name: "shop-api node port (eTP Cluster) from outside", flow: tcp(outside, nodePort(t, api)), want: dnat},
		{name: "shop-ingress node port (eTP Local, local endpoint) from outside", flow: tcp(outside, nodePort(t, ingress)), want: dnat},
		{name: "shop-ingress load-balancer IP (eTP Local, local endpoint) from outside", flow: tcp(outside, firstIP(t, ingress, ingress.LoadBalancerIPs)), want: dnat},
		{name: "shop-ingress node port (eTP Local) from a pod", flow: tcp(pod, nodePort(t, ingress)), want: dnat},
		// Dropped in filter INPUT before any socket sees it: no reset.
		{name: "shop-reports node port (eTP Local, no local endpoint) from outside", flow: tcp(outside, nodePort(t, reports)), want: kernelprobe.Drop},
		{name: "shop-reports node port (eTP Local, no local endpoint) from a pod", flow: tcp(pod, nodePort(t, reports)), want: dnat},
		{name: "shop-reports node port (eTP Local, no local endpoint) from the node", flow: tcp(node, nodePort(t, reports)), want: dnat},
		{name: "shop-frontend load-balancer IP from outside inside the source ranges", flow: tcp(outside, firstIP(t, front, front.LoadBalancerIPs)), want: dnat},
		{name: "shop-frontend load-balancer IP from outside outside the source ranges", flow: tcp(outside, firstIP(t, front, front.LoadBalancerIPs)), want: kernelprobe.Drop, alt: true},
		{name: "shop-frontend load-balancer IP from a pod (inside the source ranges)", flow: tcp(pod, firstIP(t, front, front.LoadBalancerIPs)), want: dnat},
		// kube-proxy applies the source ranges to the load-balancer IP only.
		{name: "shop-frontend node port from outside outside the source ranges", flow: tcp(outside, nodePort(t, front)), want: dnat, alt: true},
		{name: "shop-legacy-gw external IP from outside", flow: tcp(outside, firstIP(t, gw, gw.ExternalIPs)), want: dnat},
		{name: "monitoring-node-agent cluster IP (iTP Local) from a pod", flow: tcp(pod, clusterIP(t, agent, false)), want: dnat},
		{name: "monitoring-node-agent cluster IP (iTP Local) from the node", flow: tcp(node, clusterIP(t, agent, false)), want: dnat},
		{name: "shop-empty cluster IP (no endpoints) from a pod", flow: tcp(pod, clusterIP(t, empty, false)), want: kernelprobe.Reject},
		{name: "shop-empty cluster IP (no endpoints) from the node", flow: tcp(node, clusterIP(t, empty, false)), want: kernelprobe.Reject},
		{name: "shop-cart cluster IP (ClientIP affinity) many flows from one pod", flow: tcp(pod, clusterIP(t, cart, false)), run: checkOneClient},
		{name: "shop-cart cluster IP (ClientIP affinity) from distinct clients", flow: tcp(node, clusterIP(t, cart, false)), run: checkDistinctClients},
		{name: "telco-diameter cluster IP (sctp) from a pod", flow: kFlow{from: pod, proto: "sctp", dst: clusterIP(t, diameter, false), flows: 10}, want: dnat},
		{name: "shop-v6-only cluster IP from the node", flow: tcp(node, clusterIP(t, v6only, true)), want: dnat, v6: true},
		{name: "shop-v6-only cluster IP from a pod", flow: tcp(pod, clusterIP(t, v6only, true)), want: dnat, v6: true, alt: true},
	}
}

// checkOneClient: ClientIP affinity from one client. Its first flow goes
// where a new client's may: walked on the rules text alone (no cart flow
// has been sent in this lab yet), where iptables' records are not shown
// and the walk follows both ways, the outcomes that assume no record;
// nftables' sets are listed, and empty. Then the kernel holds the
// client's record (iptables: the xt_recent list /proc/net/xt_recent
// shows, passed as Options.Pinned; nftables: the affinity set nft lists
// now), and the evaluator, told so, must send every later flow to the
// same endpoint, as the kernel does.
func checkOneClient(t *testing.T, l *kLab, c kCase) {
	f := c.flow
	f.flows = 1
	first := l.kCheck(t, f, dnat, false)
	if first[0].Verdict != dnat {
		return
	}
	ep := first[0].Endpoint
	src := l.src(f)
	rs, opts := l.state(t, src, true)
	p := l.packet(f)
	ex := expectFor(t, p.String()+" (returning client)", rs, l.node(), p, opts)
	want := kernelprobe.Outcome{Verdict: dnat, Endpoint: ep}.String()
	if len(ex.shares) != 1 || ex.shares[want] != 1 {
		t.Errorf("%s: after its first flow went to %v, the kernel holds the client's record (%v); the evaluator says:\n  %s", p, ep, opts.Pinned, ex.summary)
	}
	obs := compare(t, p.String()+" (returning client)", ex, false, 100, func(n int) []kernelprobe.Observation { return l.send(t, c.flow, n) })
	t.Logf("first flow to %v, then %s", ep, summarize(obs))
}

// checkDistinctClients: ClientIP affinity over many clients, one flow each
// (the node's own flows from 100 addresses of its own: the lab's pod and
// outside client have one address each): they split as the evaluator's
// shares for a new client say; then a few of them come back, each to its
// own endpoint.
func checkDistinctClients(t *testing.T, l *kLab, c kCase) {
	srcs, obs := l.distinct(t, l.packet(c.flow).String(), c.flow, 100, nil)
	for i, s := range srcs[:8] {
		g := c.flow
		g.srcIP, g.flows = s, 3
		back := l.kCheck(t, g, dnat, true)
		for _, o := range back {
			if o.Endpoint != obs[i].Endpoint {
				t.Errorf("client %v: first flow to %v, a later one to %v", s, obs[i].Endpoint, o.Endpoint)
			}
		}
	}
}

// checkReadBack: the rules as the real tools read them back from the
// kernel walk as the fixture text does, for every case's packet.
func checkReadBack(t *testing.T, l *kLab, cases []kCase) {
	t.Helper()
	back := l.readBack(t)
	for _, c := range cases {
		if c.v6 && !l.mode.v6 {
			continue
		}
		p := l.packet(c.flow)
		if c.alt {
			switch c.flow.from {
			case pod:
				p.Src = netip.AddrPortFrom(kPodIP6, 40000)
			case outside:
				p.Src = netip.AddrPortFrom(kOutRange, 40000)
			}
		}
		a := aggregate(evaluate.New(l.rules, l.node()).Walk(p, evaluate.Options{}))
		b := aggregate(evaluate.New(back, l.node()).Walk(p, evaluate.Options{}))
		if a != b {
			t.Errorf("%s: the fixture text gives\n%s\nthe rules read back from the kernel give\n%s", p, a, b)
		}
	}
}

func TestKernel(t *testing.T) {
	kernelPrecheck(t)
	s := readKServices(t)
	for _, mode := range []kMode{kIPTables, kIPTablesLegacy, kNFTables} {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			cases := kCases(t, s)
			main := newKLab(t, mode, false)
			checkReadBack(t, main, cases)
			alt := newKLab(t, mode, true)
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					if c.v6 && !mode.v6 {
						t.Skipf("%s loads %s only", mode.name, strings.Join(mode.files, ", "))
					}
					l := main
					if c.alt {
						l = alt
					}
					c.check(t, l)
				})
			}
		})
	}
}

// A kFault is a change another writer makes to kube-proxy's rules, and
// the cases it is checked with.
type kFault struct {
	mode   kMode
	name   string
	cases  []string // kCase names
	inject func(t *testing.T, l *kLab)
	// run replaces the cases' checks.
	run func(t *testing.T, l *kLab, c kCase)
	// want replaces the cases' premise: the verdict of every flow under
	// the fault; noMasq: no flow is masqueraded (the fault took).
	want   string
	noMasq bool
}

// splitArgs splits an iptables-save rule into arguments (double quotes
// group, as the shell an on-call engineer pastes it into does).
func splitArgs(s string) []string {
	var out []string
	var cur strings.Builder
	quoted, inWord := false, false
	for _, r := range s {
		switch {
		case r == '"':
			quoted, inWord = !quoted, true
		case r == ' ' && !quoted:
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out
}

// sepJump finds, in the IPv4 nat table, the service chain's rule that
// jumps to the endpoint chain of endpoint ep of service port svc
// (kube-proxy's comment "svc -> ep"): the service chain, the endpoint
// chain and the rule's text.
func sepJump(t *testing.T, rs *inspect.Ruleset, svc, ep string) (svcChain, sepChain, rule string) {
	t.Helper()
	nat := rs.IPTable(kubeproxy.IPv4, "nat")
	if nat == nil {
		t.Fatal("no IPv4 nat table")
	}
	for _, c := range nat.Chains {
		if !strings.HasPrefix(c.Name, "KUBE-SVC-") {
			continue
		}
		for _, r := range c.Rules {
			if r.Comment == svc+" -> "+ep && strings.HasPrefix(r.Target, "KUBE-SEP-") {
				return c.Name, r.Target, r.Text
			}
		}
	}
	t.Fatalf("no jump to the endpoint chain of %s -> %s", svc, ep)
	return
}

// nftName finds a chain or set of kube-proxy's ip table by prefix and
// suffix of its name.
func nftName(t *testing.T, rs *inspect.Ruleset, prefix, suffix string) string {
	t.Helper()
	tb := rs.NFTTable("ip", kubeproxy.NFTTable)
	if tb == nil {
		t.Fatal("no ip kube-proxy table")
	}
	for _, c := range tb.Chains {
		if strings.HasPrefix(c.Name, prefix) && strings.HasSuffix(c.Name, suffix) {
			return c.Name
		}
	}
	for _, s := range tb.Sets {
		if strings.HasPrefix(s.Name, prefix) && strings.HasSuffix(s.Name, suffix) {
			return s.Name
		}
	}
	t.Fatalf("no chain or set %s…%s in ip kube-proxy", prefix, suffix)
	return ""
}

// nftHandle is the handle of the rule of chain whose text (nft -a list)
// contains what.
func nftHandle(t *testing.T, l *kLab, chain, what string) string {
	t.Helper()
	out := l.Run(t, nil, "nft", "-a", "list", "chain", "ip", kubeproxy.NFTTable, chain)
	for _, line := range strings.Split(string(out), "\n") {
		if i := strings.Index(line, "# handle "); i > 0 && strings.Contains(line[:i], what) {
			return strings.TrimSpace(line[i+len("# handle "):])
		}
	}
	t.Fatalf("no rule with %q in chain %s:\n%s", what, chain, out)
	return ""
}

func kFaults(t *testing.T) []kFault {
	const (
		webPod   = "shop-web cluster IP from a pod"
		webNode  = "shop-web cluster IP from the node"
		emptyPod = "shop-empty cluster IP (no endpoints) from a pod"
		apiOut   = "shop-api node port (eTP Cluster) from outside"
		gwOut    = "shop-legacy-gw external IP from outside"
		cartDist = "shop-cart cluster IP (ClientIP affinity) from distinct clients"
	)
	cartEP := "10.244.0.81/8080" // the endpoint of shop/cart whose chain the faults touch
	return []kFault{
		// (a) An endpoint chain emptied but still jumped to: it returns,
		// and its share goes down the rest of the cascade (the middle
		// one of three: the first keeps 1/3, the last gets 2/3).
		{mode: kIPTables, name: "emptied endpoint chain", cases: []string{webPod, webNode}, inject: func(t *testing.T, l *kLab) {
			_, sep, _ := sepJump(t, l.rules, "shop/web:http", "10.244.1.11:8080")
			l.ipt(t, "-t", "nat", "-F", sep)
		}},
		// In nftables mode kube-proxy 1.37 has endpoint chains only for
		// affinity: one of shop/cart's emptied, its half of new clients
		// falls off the service chain un-DNATed, into cluster-ips-check's
		// reject.
		{mode: kNFTables, name: "emptied endpoint chain", cases: []string{cartDist}, inject: func(t *testing.T, l *kLab) {
			l.Run(t, nil, "nft", "flush", "chain", "ip", kubeproxy.NFTTable, nftName(t, l.rules, "endpoint-", cartEP))
		}, run: func(t *testing.T, l *kLab, c kCase) {
			l.distinct(t, l.packet(c.flow).String(), c.flow, 100, nil)
		}},
		// (b) The jump from the service chain to one endpoint chain
		// deleted (the first of three: the other two split 1/2, 1/2).
		{mode: kIPTables, name: "jump to an endpoint chain deleted", cases: []string{webPod}, inject: func(t *testing.T, l *kLab) {
			svc, _, rule := sepJump(t, l.rules, "shop/web:http", "10.244.0.11:8080")
			l.ipt(t, append([]string{"-t", "nat", "-D", svc}, splitArgs(rule)...)...)
		}},
		// In nftables mode: shop/cart's affinity jump to one endpoint
		// chain deleted. Clients that hold a record for that endpoint
		// (given one with nft add element, as their earlier flows would
		// have) are no longer kept there: new flows split over both.
		{mode: kNFTables, name: "affinity jump to an endpoint chain deleted", cases: []string{cartDist}, inject: func(t *testing.T, l *kLab) {
			svc := nftName(t, l.rules, "service-", "shop/cart/tcp/http")
			set := nftName(t, l.rules, "affinity-", cartEP)
			l.Run(t, nil, "nft", "delete", "rule", "ip", kubeproxy.NFTTable, svc, "handle", nftHandle(t, l, svc, "@"+set))
		}, run: func(t *testing.T, l *kLab, c kCase) {
			set := nftName(t, l.rules, "affinity-", cartEP)
			l.distinct(t, l.packet(c.flow).String()+" (clients with a record for "+cartEP+")", c.flow, 100, func(srcs []netip.Addr) {
				var els []string
				for _, s := range srcs {
					els = append(els, s.String())
				}
				l.Run(t, nil, "nft", "add", "element", "ip", kubeproxy.NFTTable, set, "{ "+strings.Join(els, ", ")+" }")
			})
		}},
		// (c) A DROP at the top of a kube-proxy chain. iptables refuses
		// DROP in nat ("the nat table is not intended for filtering"),
		// so it goes into filter's KUBE-SERVICES, for the cluster IP: but
		// filter runs after DNAT, and sees the endpoint: the flows still
		// go through. A DROP for the original destination does stop them,
		// and one for a Service without endpoints turns its reject into a
		// drop.
		{mode: kIPTables, name: "DROP for the cluster IP at the top of filter KUBE-SERVICES", cases: []string{webPod, webNode}, inject: func(t *testing.T, l *kLab) {
			svc, _, _ := sepJump(t, l.rules, "shop/web:http", "10.244.0.11:8080")
			if out, err := exec.Command("ip", "netns", "exec", l.Node, "iptables-nft", "-t", "nat", "-I", svc, "1", "-j", "DROP").CombinedOutput(); err == nil {
				t.Logf("iptables accepted DROP in nat %s: checked too", svc)
			} else {
				t.Logf("iptables -t nat -I %s 1 -j DROP is refused: %s", svc, firstLine(out))
			}
			l.ipt(t, "-I", "KUBE-SERVICES", "1", "-d", "10.96.10.1/32", "-j", "DROP")
		}},
		{mode: kIPTables, name: "DROP for the cluster IP at the top of filter KUBE-SERVICES", cases: []string{emptyPod}, want: kernelprobe.Drop, inject: func(t *testing.T, l *kLab) {
			l.ipt(t, "-I", "KUBE-SERVICES", "1", "-d", "10.96.10.9/32", "-j", "DROP")
		}},
		{mode: kIPTables, name: "DROP for the original destination at the top of filter KUBE-SERVICES", cases: []string{webPod, webNode}, want: kernelprobe.Drop, inject: func(t *testing.T, l *kLab) {
			l.ipt(t, "-I", "KUBE-SERVICES", "1", "-m", "conntrack", "--ctorigdst", "10.96.10.1/32", "-j", "DROP")
		}},
		// nft takes a drop in a nat chain: before any DNAT.
		{mode: kNFTables, name: "drop at the top of services", cases: []string{webPod, webNode}, want: kernelprobe.Drop, inject: func(t *testing.T, l *kLab) {
			l.Run(t, nil, "nft", "insert", "rule", "ip", kubeproxy.NFTTable, "services", "ip", "daddr", "10.96.10.1", "drop")
		}},
		// (d) The masquerade mark changed on one side: KUBE-MARK-MASQ sets
		// 0x8000 while KUBE-POSTROUTING still tests 0x4000 (nftables:
		// masquerading tests 0x8000 while the rules still set 0x4000):
		// nothing is masqueraded.
		{mode: kIPTables, name: "masquerade mark changed", cases: []string{apiOut, gwOut, webNode}, noMasq: true, inject: func(t *testing.T, l *kLab) {
			l.ipt(t, "-t", "nat", "-R", "KUBE-MARK-MASQ", "1", "-j", "MARK", "--set-xmark", "0x8000/0x8000")
		}},
		{mode: kNFTables, name: "masquerade mark changed", cases: []string{apiOut, gwOut, webNode}, noMasq: true, inject: func(t *testing.T, l *kLab) {
			h := nftHandle(t, l, "masquerading", "meta mark & 0x00004000")
			l.Run(t, nil, "nft", "replace", "rule", "ip", kubeproxy.NFTTable, "masquerading", "handle", h,
				"meta", "mark", "&", "0x8000", "!=", "0", "meta", "mark", "set", "meta", "mark", "^", "0x8000", "masquerade", "fully-random")
		}},
	}
}

func firstLine(b []byte) string {
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "iptables v") {
			return l
		}
	}
	return strings.TrimSpace(string(b))
}

// TestKernelFaults: each fault in a lab of its own, applied with the real
// tool in the node, the rules read back from the kernel and walked.
func TestKernelFaults(t *testing.T) {
	kernelPrecheck(t)
	s := readKServices(t)
	cases := map[string]kCase{}
	for _, c := range kCases(t, s) {
		cases[c.name] = c
	}
	for _, f := range kFaults(t) {
		for _, name := range f.cases {
			c, ok := cases[name]
			if !ok {
				t.Fatalf("fault %q: no case %q", f.name, name)
			}
			t.Run(fmt.Sprintf("%s/%s/%s", f.mode.name, c.name, f.name), func(t *testing.T) {
				t.Parallel()
				l := newKLab(t, f.mode, false)
				f.inject(t, l)
				l.rules = l.readBack(t)
				if f.run != nil {
					f.run(t, l, c)
					return
				}
				if f.want != "" {
					c.want = f.want
				}
				obs := c.check(t, l)
				if f.noMasq {
					for _, o := range obs {
						if o.Masqueraded {
							t.Errorf("premise: nothing masqueraded under the fault; flow %v was: %s", o.Src, o.Raw)
							break
						}
					}
				}
			})
		}
	}
}
