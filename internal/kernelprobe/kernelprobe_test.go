package kernelprobe_test

import (
	"fmt"
	"math"
	"net/netip"
	"strings"
	"syscall"
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/internal/kernelprobe"
	"github.com/proxyrules/kubectl-proxyrules/internal/netnstest"
)

var (
	nodeIP    = netip.MustParseAddr("10.0.0.10")
	podIP     = netip.MustParseAddr("10.244.0.5")
	outsideIP = netip.MustParseAddr("203.0.113.7")
	web       = netip.MustParseAddrPort("10.96.0.1:80")
	dns       = netip.MustParseAddrPort("10.96.0.1:53")
	rejected  = netip.MustParseAddr("10.96.0.2")
	dropped   = netip.MustParseAddr("10.96.0.3")
	webA      = netip.MustParseAddrPort("10.244.0.11:8080")
	webB      = netip.MustParseAddrPort("10.244.0.12:8080")
	webC      = netip.MustParseAddrPort("10.244.0.13:8080")
	dnsEP     = netip.MustParseAddrPort("10.244.0.21:53")
	nodePort  = netip.AddrPortFrom(nodeIP, 30080)
)

func newLab(t *testing.T) *kernelprobe.Lab {
	t.Helper()
	return kernelprobe.NewLab(t, kernelprobe.LabConfig{
		NodeIPs:   []netip.Addr{nodeIP},
		SinkCIDRs: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/16"), netip.MustParsePrefix("10.244.0.0/16")},
		PodIP:     podIP,
		OutsideIP: outsideIP,
	})
}

// kube-proxy's shape, by hand: a Service 10.96.0.1 (tcp/80 over two
// endpoints 50/50, udp/53 over one), NodePort 30080 for tcp/80, a Service
// with no endpoints (REJECT) and one dropped in filter; traffic not from
// the pod CIDR, and all NodePort traffic, marked for masquerade.
const iptablesRules = `*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:KUBE-SERVICES - [0:0]
-A INPUT -m conntrack --ctstate NEW -j KUBE-SERVICES
-A FORWARD -m conntrack --ctstate NEW -j KUBE-SERVICES
-A OUTPUT -m conntrack --ctstate NEW -j KUBE-SERVICES
-A KUBE-SERVICES -d 10.96.0.2/32 -p tcp -m tcp --dport 80 -j REJECT --reject-with icmp-port-unreachable
-A KUBE-SERVICES -d 10.96.0.2/32 -p udp -m udp --dport 53 -j REJECT --reject-with icmp-port-unreachable
-A KUBE-SERVICES -d 10.96.0.3/32 -j DROP
COMMIT
*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:KUBE-SERVICES - [0:0]
:KUBE-NODEPORTS - [0:0]
:KUBE-POSTROUTING - [0:0]
:KUBE-MARK-MASQ - [0:0]
:KUBE-SVC-WEB - [0:0]
:KUBE-SEP-A - [0:0]
:KUBE-SEP-B - [0:0]
:KUBE-SVC-DNS - [0:0]
:KUBE-SEP-DNS - [0:0]
-A PREROUTING -j KUBE-SERVICES
-A OUTPUT -j KUBE-SERVICES
-A POSTROUTING -j KUBE-POSTROUTING
-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN
-A KUBE-POSTROUTING -j MARK --set-xmark 0x4000/0x0
-A KUBE-POSTROUTING -j MASQUERADE --random-fully
-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000
-A KUBE-SERVICES -d 10.96.0.1/32 -p tcp -m tcp --dport 80 -j KUBE-SVC-WEB
-A KUBE-SERVICES -d 10.96.0.1/32 -p udp -m udp --dport 53 -j KUBE-SVC-DNS
-A KUBE-SERVICES -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS
-A KUBE-NODEPORTS -p tcp -m tcp --dport 30080 -j KUBE-MARK-MASQ
-A KUBE-NODEPORTS -p tcp -m tcp --dport 30080 -j KUBE-SVC-WEB
-A KUBE-SVC-WEB ! -s 10.244.0.0/16 -d 10.96.0.1/32 -p tcp -m tcp --dport 80 -j KUBE-MARK-MASQ
-A KUBE-SVC-WEB -m statistic --mode random --probability 0.50000000000 -j KUBE-SEP-A
-A KUBE-SVC-WEB -j KUBE-SEP-B
-A KUBE-SEP-A -p tcp -m tcp -j DNAT --to-destination 10.244.0.11:8080
-A KUBE-SEP-B -p tcp -m tcp -j DNAT --to-destination 10.244.0.12:8080
-A KUBE-SVC-DNS -j KUBE-SEP-DNS
-A KUBE-SEP-DNS -p udp -m udp -j DNAT --to-destination 10.244.0.21:53
COMMIT
`

// The same in nftables, kube-proxy's nftables mode's way (numgen map,
// masquerade fully-random).
const nftRules = `table ip t {
	chain prerouting { type nat hook prerouting priority dstnat; policy accept; jump services; }
	chain output { type nat hook output priority -100; policy accept; jump services; }
	chain postrouting {
		type nat hook postrouting priority srcnat; policy accept;
		meta mark & 0x4000 == 0 return
		meta mark set meta mark ^ 0x4000
		masquerade fully-random
	}
	chain filter-input { type filter hook input priority filter; policy accept; ct state new jump filter-services; }
	chain filter-forward { type filter hook forward priority filter; policy accept; ct state new jump filter-services; }
	chain filter-output { type filter hook output priority filter; policy accept; ct state new jump filter-services; }
	chain filter-services {
		ip daddr 10.96.0.2 tcp dport 80 reject
		ip daddr 10.96.0.2 udp dport 53 reject
		ip daddr 10.96.0.3 drop
	}
	chain mark-for-masquerade { meta mark set meta mark | 0x4000; }
	chain services {
		ip daddr 10.96.0.1 tcp dport 80 goto svc-web
		ip daddr 10.96.0.1 udp dport 53 dnat to 10.244.0.21:53
		fib daddr type local tcp dport 30080 goto nodeport-web
	}
	chain nodeport-web { jump mark-for-masquerade; goto svc-web; }
	chain svc-web {
		ip saddr != 10.244.0.0/16 jump mark-for-masquerade
		meta l4proto tcp dnat ip to numgen random mod 2 map { 0 : 10.244.0.11 . 8080, 1 : 10.244.0.12 . 8080 }
	}
}
`

// only fails unless every observation has the outcome.
func only(t *testing.T, what string, obs []kernelprobe.Observation, want kernelprobe.Outcome) {
	t.Helper()
	sum := kernelprobe.Summarize(obs)
	errnos := map[string]int{}
	for _, o := range obs {
		errnos[errnoName(o.Errno)]++
	}
	t.Logf("%s: %v, errno %v", what, sum, errnos)
	if sum[want] != len(obs) {
		t.Errorf("%s: %v, want all %d %v", what, sum, len(obs), want)
		for _, o := range obs[:min(3, len(obs))] {
			t.Logf("  flow %d %v: %s errno=%v %s", o.Flow, o.Src, o.Verdict, o.Errno, o.Raw)
		}
	}
}

// shares fails unless all flows of a probe are DNATs over the endpoints
// (masqueraded as masq says: all, none, or all but one for random-fully)
// and the split fits the expected shares: chi-square p ≥ 0.001, or, when a
// correct kernel was merely unlucky (one run in a thousand), on a second
// probe of fresh flows. A right expectation then fails one run in a
// million; a wrong one (1/3 for 1/2 over 300 flows) nearly always twice.
func shares(t *testing.T, what string, lab *kernelprobe.Lab, p kernelprobe.Probe, expected map[netip.AddrPort]float64, masq string) []kernelprobe.Observation {
	t.Helper()
	exp := map[string]float64{}
	for ep, q := range expected {
		exp[ep.String()] = q
	}
	var obs []kernelprobe.Observation
	for try := 1; ; try++ {
		obs = lab.Send(t, p)
		counts := kernelprobe.Counts(kernelprobe.Summarize(obs), func(o kernelprobe.Outcome) string {
			if o.Verdict == kernelprobe.DNAT {
				return o.Endpoint.String()
			}
			return o.Verdict
		})
		stat, pv := kernelprobe.ChiSquare(counts, exp)
		t.Logf("%s: %d flows %v, chi-square %.2f p=%.3f", what, len(obs), counts, stat, pv)
		if pv >= 0.001 {
			break
		}
		if try == 2 || math.IsInf(stat, 1) {
			t.Errorf("%s: split %v does not fit %v (chi-square %.2f, p=%.5f)", what, counts, exp, stat, pv)
			break
		}
	}
	nMasq := 0
	for _, o := range obs {
		if o.Masqueraded {
			nMasq++
		}
	}
	switch masq {
	case "none":
		if nMasq != 0 {
			t.Errorf("%s: %d of %d flows masqueraded, want none", what, nMasq, len(obs))
		}
	case "all":
		if nMasq != len(obs) {
			t.Errorf("%s: %d of %d flows masqueraded, want all", what, nMasq, len(obs))
		}
	case "random-fully":
		// The node's own traffic leaves from the egress address already;
		// only the random port shows, and it is the original one once in
		// 64512.
		if nMasq < len(obs)-1 {
			t.Errorf("%s: %d of %d flows masqueraded, want all (but one)", what, nMasq, len(obs))
		}
	}
	return obs
}

func half(a, b netip.AddrPort) map[netip.AddrPort]float64 {
	return map[netip.AddrPort]float64{a: 0.5, b: 0.5}
}

// checkServices runs the checks both rulesets must pass from node, pod and
// outside.
func checkServices(t *testing.T, lab *kernelprobe.Lab) {
	tcp := func(from kernelprobe.From, dst netip.AddrPort, n int) []kernelprobe.Observation {
		return lab.Send(t, kernelprobe.Probe{From: from, Proto: "tcp", Dst: dst, Flows: n})
	}
	udp := func(from kernelprobe.From, dst netip.AddrPort, n int) []kernelprobe.Observation {
		return lab.Send(t, kernelprobe.Probe{From: from, Proto: "udp", Dst: dst, Flows: n})
	}
	rejectOutcome := kernelprobe.Outcome{Verdict: kernelprobe.Reject}
	dropOutcome := kernelprobe.Outcome{Verdict: kernelprobe.Drop}
	dnsOutcome := kernelprobe.Outcome{Verdict: kernelprobe.DNAT, Endpoint: dnsEP}

	shares(t, "node tcp web", lab, kernelprobe.Probe{From: kernelprobe.FromNode, Proto: "tcp", Dst: web, Flows: 400}, half(webA, webB), "random-fully")
	shares(t, "pod tcp web", lab, kernelprobe.Probe{From: kernelprobe.FromPod, Proto: "tcp", Dst: web, Flows: 200}, half(webA, webB), "none")
	shares(t, "outside tcp nodeport", lab, kernelprobe.Probe{From: kernelprobe.FromOutside, Proto: "tcp", Dst: nodePort, Flows: 200}, half(webA, webB), "all")
	for _, from := range []kernelprobe.From{kernelprobe.FromNode, kernelprobe.FromPod} {
		only(t, string(from)+" tcp no endpoints", tcp(from, netip.AddrPortFrom(rejected, 80), 10), rejectOutcome)
		only(t, string(from)+" udp no endpoints", udp(from, netip.AddrPortFrom(rejected, 53), 10), rejectOutcome)
		only(t, string(from)+" tcp dropped", tcp(from, netip.AddrPortFrom(dropped, 80), 10), dropOutcome)
		only(t, string(from)+" udp dropped", udp(from, netip.AddrPortFrom(dropped, 53), 10), dropOutcome)
		only(t, string(from)+" udp dns", udp(from, dns, 10), dnsOutcome)
	}
	// A node port nothing serves, not DNATed: delivered to the node. For
	// UDP the node answers ICMP port unreachable and the entry stays: an
	// accept that carries ECONNREFUSED. For TCP the node answers a reset,
	// and conntrack deletes an entry whose only reply is a reset: no entry,
	// the sender refused, a reject.
	closed := netip.AddrPortFrom(nodeIP, 30081)
	obs := udp(kernelprobe.FromOutside, closed, 5)
	only(t, "outside udp closed node port", obs, kernelprobe.Outcome{Verdict: kernelprobe.Accept, Endpoint: closed})
	if obs[0].Errno != syscall.ECONNREFUSED {
		t.Errorf("outside udp closed node port: errno %v, want ECONNREFUSED", obs[0].Errno)
	}
	only(t, "outside tcp closed node port", tcp(kernelprobe.FromOutside, closed, 5), rejectOutcome)
}

func TestIPTablesNFT(t *testing.T) {
	lab := newLab(t)
	lab.LoadIPTables(t, "ipv4", "nft", []byte(iptablesRules))
	checkServices(t, lab)
}

func TestNFTables(t *testing.T) {
	lab := newLab(t)
	lab.LoadNFT(t, []byte(nftRules))
	checkServices(t, lab)
}

// An endpoint chain emptied (`iptables -t nat -F`) but still jumped to
// returns into the Service chain: its share goes down the rest of the
// cascade, and with kube-proxy's probabilities the other two split ~50/50.
func TestIPTablesEmptiedChain(t *testing.T) {
	lab := newLab(t)
	lab.LoadIPTables(t, "ipv4", "nft", []byte(`*nat
:PREROUTING ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:KUBE-SVC-WEB - [0:0]
:KUBE-SEP-A - [0:0]
:KUBE-SEP-B - [0:0]
:KUBE-SEP-C - [0:0]
-A PREROUTING -d 10.96.0.1/32 -p tcp -m tcp --dport 80 -j KUBE-SVC-WEB
-A OUTPUT -d 10.96.0.1/32 -p tcp -m tcp --dport 80 -j KUBE-SVC-WEB
-A KUBE-SVC-WEB -m statistic --mode random --probability 0.33333333349 -j KUBE-SEP-A
-A KUBE-SVC-WEB -m statistic --mode random --probability 0.50000000000 -j KUBE-SEP-B
-A KUBE-SVC-WEB -j KUBE-SEP-C
-A KUBE-SEP-A -p tcp -m tcp -j DNAT --to-destination 10.244.0.11:8080
-A KUBE-SEP-B -p tcp -m tcp -j DNAT --to-destination 10.244.0.12:8080
-A KUBE-SEP-C -p tcp -m tcp -j DNAT --to-destination 10.244.0.13:8080
COMMIT
`))
	third := map[netip.AddrPort]float64{webA: 1. / 3, webB: 1. / 3, webC: 1. / 3}
	shares(t, "three endpoints", lab, kernelprobe.Probe{From: kernelprobe.FromNode, Proto: "tcp", Dst: web, Flows: 300}, third, "none")
	lab.Run(t, nil, "iptables-nft", "-t", "nat", "-F", "KUBE-SEP-A")
	lab.FlushConntrack(t)
	shares(t, "first chain emptied", lab, kernelprobe.Probe{From: kernelprobe.FromNode, Proto: "tcp", Dst: web, Flows: 300}, half(webB, webC), "none")
	shares(t, "first chain emptied, from pod", lab, kernelprobe.Probe{From: kernelprobe.FromPod, Proto: "tcp", Dst: web, Flows: 200}, half(webB, webC), "none")
}

// The legacy backend: the kernel's x_tables, the same answers.
func TestIPTablesLegacy(t *testing.T) {
	lab := newLab(t)
	lab.LoadIPTables(t, "ipv4", "legacy", []byte(iptablesRules))
	shares(t, "node tcp web", lab, kernelprobe.Probe{From: kernelprobe.FromNode, Proto: "tcp", Dst: web, Flows: 200}, half(webA, webB), "random-fully")
	only(t, "pod tcp no endpoints", lab.Send(t, kernelprobe.Probe{From: kernelprobe.FromPod, Proto: "tcp", Dst: netip.AddrPortFrom(rejected, 80), Flows: 5}), kernelprobe.Outcome{Verdict: kernelprobe.Reject})
}

// IPv6: an ip6 table, flows from the node and from a pod.
func TestIPv6(t *testing.T) {
	node6 := netip.MustParseAddr("fd00::10")
	pod6 := netip.MustParseAddr("fd00:244::5")
	lab := kernelprobe.NewLab(t, kernelprobe.LabConfig{
		NodeIPs:   []netip.Addr{nodeIP, node6},
		SinkCIDRs: []netip.Prefix{netip.MustParsePrefix("fd00:96::/112"), netip.MustParsePrefix("fd00:244::/64")},
		PodIP:     pod6,
	})
	lab.LoadNFT(t, []byte(`table ip6 t {
	chain prerouting { type nat hook prerouting priority dstnat; policy accept; jump services; }
	chain output { type nat hook output priority -100; policy accept; jump services; }
	chain postrouting { type nat hook postrouting priority srcnat; policy accept; ip6 saddr != fd00:244::/64 masquerade; }
	chain filter-forward { type filter hook forward priority filter; policy accept; ct state new jump filter-services; }
	chain filter-output { type filter hook output priority filter; policy accept; ct state new jump filter-services; }
	chain filter-services {
		ip6 daddr fd00:96::2 reject
		ip6 daddr fd00:96::3 drop
	}
	chain services {
		ip6 daddr fd00:96::1 tcp dport 80 dnat ip6 to numgen random mod 2 map { 0 : fd00:244::11 . 8080, 1 : fd00:244::12 . 8080 }
	}
}
`))
	a6 := netip.MustParseAddrPort("[fd00:244::11]:8080")
	b6 := netip.MustParseAddrPort("[fd00:244::12]:8080")
	web6 := netip.MustParseAddrPort("[fd00:96::1]:80")
	// The node's own: masquerade without random-fully from the egress
	// address changes nothing the entry shows.
	shares(t, "node6 tcp web", lab, kernelprobe.Probe{From: kernelprobe.FromNode, Proto: "tcp", Dst: web6, Flows: 200}, half(a6, b6), "none")
	obs := shares(t, "pod6 tcp web", lab, kernelprobe.Probe{From: kernelprobe.FromPod, Proto: "tcp", Dst: web6, Flows: 200}, half(a6, b6), "none")
	if src := obs[0].Src.Addr(); src != pod6 {
		t.Errorf("pod flow from %v, want %v", src, pod6)
	}
	for _, from := range []kernelprobe.From{kernelprobe.FromNode, kernelprobe.FromPod} {
		for _, proto := range []string{"tcp", "udp"} {
			only(t, string(from)+" "+proto+" reject6", lab.Send(t, kernelprobe.Probe{From: from, Proto: proto, Dst: netip.MustParseAddrPort("[fd00:96::2]:80"), Flows: 5}), kernelprobe.Outcome{Verdict: kernelprobe.Reject})
			only(t, string(from)+" "+proto+" drop6", lab.Send(t, kernelprobe.Probe{From: from, Proto: proto, Dst: netip.MustParseAddrPort("[fd00:96::3]:80"), Flows: 5}), kernelprobe.Outcome{Verdict: kernelprobe.Drop})
		}
	}
}

func TestTrace(t *testing.T) {
	lab := newLab(t)
	lab.LoadNFT(t, []byte(nftRules))
	for _, tc := range []struct {
		from  kernelprobe.From
		dst   netip.AddrPort
		want  []string
		chain string
	}{
		{kernelprobe.FromNode, web, []string{"ip t output", "ip t services", "ip t svc-web", "ip t mark-for-masquerade", "ip t postrouting"}, "output"},
		{kernelprobe.FromPod, web, []string{"ip t prerouting", "ip t svc-web", "ip t filter-forward"}, "prerouting"},
		{kernelprobe.FromPod, netip.AddrPortFrom(rejected, 80), []string{"ip t filter-services", "reject"}, "prerouting"},
	} {
		t.Run(fmt.Sprintf("%s-%v", tc.from, tc.dst), func(t *testing.T) {
			lines := lab.Trace(t, kernelprobe.Probe{From: tc.from, Proto: "tcp", Dst: tc.dst})
			text := strings.Join(lines, "\n")
			t.Logf("trace:\n%s", text)
			for _, w := range append(tc.want, "ip proxyrules_trace "+tc.chain) {
				if !strings.Contains(text, w) {
					t.Errorf("trace has no %q", w)
				}
			}
			if !strings.Contains(text, "verdict") {
				t.Error("trace has no verdict")
			}
		})
	}
}

func TestChiSquare(t *testing.T) {
	for _, tc := range []struct {
		obs      map[string]int
		exp      map[string]float64
		stat, p  float64
		infinite bool
	}{
		{map[string]int{"a": 50, "b": 50}, map[string]float64{"a": 0.5, "b": 0.5}, 0, 1, false},
		// 3.841 is the 5% point of chi-square with 1 degree of freedom.
		{map[string]int{"a": 60, "b": 40}, map[string]float64{"a": 0.5, "b": 0.5}, 4, 0.0455, false},
		// 13.816: the 0.1% point with 2 degrees of freedom.
		{map[string]int{"a": 100, "b": 100, "c": 100}, map[string]float64{"a": 1, "b": 1, "c": 1}, 0, 1, false},
		{map[string]int{"a": 130, "b": 100, "c": 70}, map[string]float64{"a": 1, "b": 1, "c": 1}, 18, 0.000123, false},
		{map[string]int{"a": 130, "d": 1}, map[string]float64{"a": 1}, 0, 0, true},
		{map[string]int{"a": 10}, map[string]float64{"a": 1}, 0, 1, false},
	} {
		stat, p := kernelprobe.ChiSquare(tc.obs, tc.exp)
		if tc.infinite {
			if !math.IsInf(stat, 1) || p != 0 {
				t.Errorf("%v vs %v: %v %v, want +Inf 0", tc.obs, tc.exp, stat, p)
			}
			continue
		}
		if math.Abs(stat-tc.stat) > 1e-9 || math.Abs(p-tc.p) > tc.p*0.01 {
			t.Errorf("%v vs %v: stat %v p %v, want %v %v", tc.obs, tc.exp, stat, p, tc.stat, tc.p)
		}
	}
	// Check the survival function at known quantiles.
	for _, q := range []struct{ x, df, p float64 }{{3.841, 1, 0.05}, {13.816, 2, 0.001}, {16.266, 3, 0.001}, {0.1, 4, 0.99879}} {
		if got := kernelprobe.ChiSquareP(q.x, int(q.df)); math.Abs(got-q.p) > q.p*0.002+1e-6 {
			t.Errorf("P(chi2(%v) > %v) = %v, want %v", q.df, q.x, got, q.p)
		}
	}
}

func errnoName(e syscall.Errno) string {
	switch e {
	case 0:
		return "none"
	case syscall.ECONNREFUSED:
		return "ECONNREFUSED"
	case syscall.EPERM:
		return "EPERM"
	case syscall.EHOSTUNREACH:
		return "EHOSTUNREACH"
	case syscall.ENETUNREACH:
		return "ENETUNREACH"
	case syscall.EACCES:
		return "EACCES"
	}
	return e.Error()
}

// How each kind of REJECT reaches the sender, from the node (OUTPUT) and a
// pod (FORWARD). The ruleset has no NAT and no conntrack match: the Lab's
// own table keeps conntrack on, so the unmatched destination is an accept
// (without it, an entry-less accept would read as a drop).
func TestRejectKinds(t *testing.T) {
	lab := newLab(t)
	var rules strings.Builder
	rules.WriteString("*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n")
	kinds := []struct {
		dst, with string
		tcp, udp  syscall.Errno // 0: not rejected (tcp-reset is TCP's only)
	}{
		{"10.96.0.2", "icmp-port-unreachable", syscall.ECONNREFUSED, syscall.ECONNREFUSED},
		{"10.96.0.4", "tcp-reset", syscall.ECONNREFUSED, 0},
		{"10.96.0.5", "icmp-host-unreachable", syscall.EHOSTUNREACH, syscall.EHOSTUNREACH},
		{"10.96.0.6", "icmp-admin-prohibited", syscall.EHOSTUNREACH, syscall.EHOSTUNREACH},
	}
	for _, k := range kinds {
		proto := ""
		if k.with == "tcp-reset" {
			proto = " -p tcp"
		}
		for _, chain := range []string{"OUTPUT", "FORWARD"} {
			fmt.Fprintf(&rules, "-A %s -d %s/32%s -j REJECT --reject-with %s\n", chain, k.dst, proto, k.with)
		}
	}
	rules.WriteString("COMMIT\n")
	lab.LoadIPTables(t, "ipv4", "nft", []byte(rules.String()))
	for _, from := range []kernelprobe.From{kernelprobe.FromNode, kernelprobe.FromPod} {
		for _, k := range kinds {
			for _, proto := range []string{"tcp", "udp"} {
				dst := netip.AddrPortFrom(netip.MustParseAddr(k.dst), 80)
				want, errno := kernelprobe.Outcome{Verdict: kernelprobe.Reject}, k.tcp
				if proto == "udp" {
					errno = k.udp
				}
				if errno == 0 {
					want = kernelprobe.Outcome{Verdict: kernelprobe.Accept, Endpoint: dst}
				}
				what := fmt.Sprintf("%s %s %s", from, proto, k.with)
				obs := lab.Send(t, kernelprobe.Probe{From: from, Proto: proto, Dst: dst, Flows: 3})
				only(t, what, obs, want)
				if obs[0].Errno != errno {
					t.Errorf("%s: errno %v, want %v", what, errnoName(obs[0].Errno), errnoName(errno))
				}
			}
		}
		unmatched := netip.MustParseAddrPort("10.96.0.9:80")
		only(t, string(from)+" tcp unmatched", lab.Send(t, kernelprobe.Probe{From: from, Proto: "tcp", Dst: unmatched, Flows: 3}),
			kernelprobe.Outcome{Verdict: kernelprobe.Accept, Endpoint: unmatched})
	}
}

// A Lab around an existing namespace: it is used as the node and left as
// it was found (only lo) when the Lab is cleaned up.
func TestExistingNode(t *testing.T) {
	ns := netnstest.New(t, "nft", "conntrack")
	t.Cleanup(func() {
		out, err := ns.Run(nil, "ip", "-br", "link")
		if err != nil {
			t.Fatal(err)
		}
		if links := strings.Fields(string(out)); len(links) == 0 || links[0] != "lo" || strings.Count(string(out), "\n") != 1 {
			t.Errorf("links left in the node after cleanup:\n%s", out)
		}
	})
	lab := kernelprobe.NewLab(t, kernelprobe.LabConfig{
		Node:      ns.Name,
		NodeIPs:   []netip.Addr{nodeIP},
		SinkCIDRs: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/16"), netip.MustParsePrefix("10.244.0.0/16")},
		PodIP:     podIP,
	})
	if lab.Node != ns.Name {
		t.Fatalf("lab node %s, want %s", lab.Node, ns.Name)
	}
	lab.LoadNFT(t, []byte(nftRules))
	shares(t, "existing node, pod tcp web", lab, kernelprobe.Probe{From: kernelprobe.FromPod, Proto: "tcp", Dst: web, Flows: 100}, half(webA, webB), "none")
}
