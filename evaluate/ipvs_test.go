package evaluate_test

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/evaluate"
	"github.com/proxyrules/kubectl-proxyrules/inspect"
	"github.com/proxyrules/kubectl-proxyrules/inspect/ifaddr"
	"github.com/proxyrules/kubectl-proxyrules/inspect/input"
	"github.com/proxyrules/kubectl-proxyrules/inspect/ipset"
)

// IPVS mode walked on kube-proxy v1.37.2's own state (its real IPVS
// proxier, hack/fixturegen): the iptables rules, the IPVS table and the
// ipsets it wrote. This machine has no ip_vs: the IPVS step is held to
// the table and to what ip_vs_core.c does (ipvs.go), not to a kernel.

// ipvsRuleset reads a fixture's IPv4 iptables rules, its IPVS table and,
// with sets, its ipsets.
func ipvsRuleset(t testing.TB, dir string, sets bool) *inspect.Ruleset {
	return ipvsRulesetWith(t, dir, sets, nil)
}

// ipvsRulesetWith is ipvsRuleset with the IPv4 iptables rules' text edited.
func ipvsRulesetWith(t testing.TB, dir string, sets bool, edit func(string) string) *inspect.Ruleset {
	t.Helper()
	rs := &inspect.Ruleset{}
	for _, f := range []string{"iptables-save-nft-ipv4.txt", "iptables-save-nft-ipv6.txt", "proc-net-ip_vs.txt"} {
		text, err := os.ReadFile(filepath.Join(dir, "ipvs", f))
		if err != nil {
			t.Fatal(err)
		}
		if edit != nil && f == "iptables-save-nft-ipv4.txt" {
			text = []byte(edit(string(text)))
		}
		in, err := input.Read(strings.NewReader(string(text)), f)
		if err != nil {
			t.Fatal(err)
		}
		rs.Merge(in.Ruleset)
	}
	if !rs.HasIPVS() {
		t.Fatalf("%s: no IPVS table read", dir)
	}
	if sets {
		fh, err := os.Open(filepath.Join(dir, "ipvs", "ipset-save.txt"))
		if err != nil {
			t.Fatal(err)
		}
		defer fh.Close()
		s, err := ipset.Read(fh, ipset.DefaultLimits())
		if err != nil {
			t.Fatal(err)
		}
		rs.IPVS.Sets = s
	}
	return rs
}

// outcomeWords: "dnat 10.244.0.11:8080 1/3 rr masq" per outcome, sorted;
// "?" for a share not predictable.
func outcomeWords(res *evaluate.Result) []string {
	var out []string
	for _, o := range res.Outcomes {
		s := fmt.Sprintf("%s %s", o.Verdict, o.Destination)
		if o.IPVS != nil {
			switch {
			case o.IPVS.RealServer == nil:
			case o.IPVS.Share != nil:
				s += " " + o.IPVS.Share.String()
			default:
				s += " ?"
			}
			s += " " + o.IPVS.Scheduler
		}
		if o.Verdict == evaluate.VerdictReject {
			s += " " + o.Reject
		}
		if o.Masquerade {
			s += " masq"
		}
		if len(o.Assumes) > 0 {
			s += " assuming"
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

func TestIPVSTrace(t *testing.T) {
	small, drain := "../testdata/fixtures/small-v1.37", "../testdata/fixtures/ipvs-drain-v1.37"
	nodeIP := netip.MustParseAddr("10.0.0.10")
	pod := netip.MustParseAddrPort("10.244.0.250:40000")
	node := netip.AddrPortFrom(nodeIP, 40000)
	outside := netip.MustParseAddrPort("203.0.113.1:40000")
	web := []string{"10.244.0.11:8080", "10.244.1.11:8080", "10.244.2.11:8080"}
	each := func(share, sched, masq string, eps ...string) []string {
		var out []string
		for _, ep := range eps {
			out = append(out, strings.TrimSpace("dnat "+ep+" "+share+" "+sched+" "+masq))
		}
		return out
	}
	// scheduler rewrites the virtual service's scheduler (and weights).
	scheduler := func(vs, sched string, weights ...int32) func(*inspect.Ruleset) {
		return func(rs *inspect.Ruleset) {
			for i := range rs.IPVS.Table.Services {
				s := &rs.IPVS.Table.Services[i]
				if s.Addr.String() != vs || s.Protocol != "TCP" {
					continue
				}
				s.Scheduler = sched
				for j := range weights {
					s.RealServers[j].Weight = weights[j]
				}
			}
		}
	}
	// bound says kube-ipvs0 was read, with these addresses.
	bound := func(addrs ...string) func(*inspect.Ruleset) {
		return func(rs *inspect.Ruleset) {
			ifc := &ifaddr.Interface{Name: ifaddr.KubeIPVS0}
			for _, a := range addrs {
				ifc.Addrs = append(ifc.Addrs, netip.MustParsePrefix(a))
			}
			rs.IPVS.Interface = ifc
		}
	}
	tests := []struct {
		name     string
		dir      string
		sets     bool
		edit     func(*inspect.Ruleset)
		origin   evaluate.Origin
		src      netip.AddrPort
		dst      string
		proto    string
		want     []string
		draining []string // real servers listed as draining
		// persistent: the virtual server's persistence timeout
		persistent uint32
	}{
		// shop/web, 3 endpoints, rr: a third each; a pod's connection is
		// not masqueraded (its source is in the cluster CIDR), the node's is
		{name: "pod to shop/web", dir: small, sets: true, origin: evaluate.FromPod, src: pod, dst: "10.96.10.1:80",
			want: each("1/3", "rr", "", web...)},
		{name: "node to shop/web", dir: small, sets: true, origin: evaluate.FromNode, src: node, dst: "10.96.10.1:80",
			want: each("1/3", "rr", "masq", web...)},
		// its node port from outside: KUBE-NODE-PORT-TCP marks it
		{name: "outside to shop/web's node port", dir: small, sets: true, origin: evaluate.FromOutside, src: outside, dst: "10.0.0.10:30080",
			want: each("1/2", "rr", "masq", "10.244.1.21:8080", "10.244.2.21:8080")},
		// lc: the real servers, no share
		{name: "lc", dir: small, sets: true, edit: scheduler("10.96.10.1:80", "lc"), origin: evaluate.FromPod, src: pod, dst: "10.96.10.1:80",
			want: each("?", "lc", "", web...)},
		// wrr: in proportion to the weights; rr ignores them
		{name: "wrr", dir: small, sets: true, edit: scheduler("10.96.10.1:80", "wrr", 2, 1, 1), origin: evaluate.FromPod, src: pod, dst: "10.96.10.1:80",
			want: append(each("1/2", "wrr", "", web[0]), each("1/4", "wrr", "", web[1:]...)...)},
		{name: "rr ignores weights", dir: small, sets: true, edit: scheduler("10.96.10.1:80", "rr", 2, 1, 1), origin: evaluate.FromPod, src: pod, dst: "10.96.10.1:80",
			want: each("1/3", "rr", "", web...)},
		// drain/dns over TCP: one real server at weight 0 gets nothing
		{name: "draining", dir: drain, sets: true, origin: evaluate.FromPod, src: pod, dst: "10.96.60.10:53",
			want: each("1/2", "rr", "", "10.244.0.60:5353", "10.244.2.60:5353"), draining: []string{"10.244.1.60:5353"}},
		{name: "every real server draining", dir: drain, sets: true, edit: scheduler("10.96.60.10:53", "rr", 0, 0, 0), origin: evaluate.FromPod, src: pod, dst: "10.96.60.10:53",
			want: []string{"reject 10.96.60.10:53 rr icmp-port-unreachable"}, draining: []string{"10.244.0.60:5353", "10.244.1.60:5353", "10.244.2.60:5353"}},
		// shop/empty: a virtual server with no real server
		{name: "no real server", dir: small, sets: true, origin: evaluate.FromNode, src: node, dst: "10.96.10.9:80",
			want: []string{"reject 10.96.10.9:80 rr icmp-port-unreachable"}},
		// no virtual server on a Service address: kube-proxy's filter
		// rejects it before IPVS could
		{name: "no virtual server", dir: small, sets: true, origin: evaluate.FromPod, src: pod, dst: "10.96.10.1:81",
			want: []string{"reject 10.96.10.1:81 icmp-port-unreachable"}},
		// kube-ipvs0 read, 10.96.10.1 missing there: not the node's, the
		// packet is routed on and IPVS never sees it
		{name: "address missing on kube-ipvs0", dir: small, sets: true, edit: bound("10.96.0.1/32"), origin: evaluate.FromPod, src: pod, dst: "10.96.10.1:80",
			want: []string{"accept 10.96.10.1:80"}},
		{name: "address bound on kube-ipvs0", dir: small, sets: true, edit: bound("10.96.0.1/32", "10.96.10.1/32"), origin: evaluate.FromPod, src: pod, dst: "10.96.10.1:80",
			want: each("1/3", "rr", "", web...)},
		// shop/cart: persistent 10800 (ClientIP affinity); a new client's shares
		{name: "persistent", dir: small, sets: true, origin: evaluate.FromPod, src: pod, dst: "10.96.10.7:80",
			want: each("1/2", "rr", "", "10.244.0.81:8080", "10.244.2.81:8080"), persistent: 10800},
		// IPv6: the KUBE-6- sets, ICMPv6 for no virtual server
		{name: "ipv6 pod to shop/web", dir: small, sets: true, origin: evaluate.FromPod, src: netip.MustParseAddrPort("[fd00:10:244::fa]:40000"), dst: "[fd00:10:96::b]:80",
			want: each("1/2", "rr", "", "[fd00:10:244:1::141]:8080", "[fd00:10:244::141]:8080")},
		{name: "ipv6 no virtual server", dir: small, sets: true, origin: evaluate.FromPod, src: netip.MustParseAddrPort("[fd00:10:244::fa]:40000"), dst: "[fd00:10:96::b]:81",
			want: []string{"reject [fd00:10:96::b]:81 icmp6-port-unreachable"}},
		// UDP: the TCP virtual server is not the UDP one
		{name: "udp dns", dir: small, sets: true, origin: evaluate.FromPod, src: pod, dst: "10.96.0.10:53", proto: "udp",
			want: each("1/2", "rr", "", "10.244.0.2:53", "10.244.1.2:53")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rs := ipvsRuleset(t, tc.dir, tc.sets)
			if tc.edit != nil {
				tc.edit(rs)
			}
			proto := tc.proto
			if proto == "" {
				proto = "tcp"
			}
			ev := evaluate.New(rs, evaluate.Node{Addresses: []netip.Addr{nodeIP, netip.MustParseAddr("fd00::10")}, IPVS: true})
			res := ev.Walk(evaluate.Packet{Protocol: proto, Src: tc.src, Dst: netip.MustParseAddrPort(tc.dst), Origin: tc.origin}, evaluate.Options{})
			got := outcomeWords(res)
			if !slices.Equal(got, tc.want) {
				t.Errorf("outcomes\n  %s\nwant\n  %s\nnot modelled: %+v", strings.Join(got, "\n  "), strings.Join(tc.want, "\n  "), res.NotModelled)
			}
			// with the ipsets, nothing is followed both ways; and the IPVS
			// proxier writes no mangle chain, so none is missing
			if len(res.NotModelled) > 0 {
				t.Errorf("not modelled: %+v", res.NotModelled)
			}
			var draining []string
			for _, vs := range res.IPVS {
				for _, r := range vs.RealServers {
					if r.Draining {
						draining = append(draining, r.Address.String())
						if r.Share != nil {
							t.Errorf("draining %s has a share %s", r.Address, r.Share)
						}
					}
				}
			}
			for _, vs := range res.IPVS {
				if vs.Persistent != (tc.persistent > 0) || vs.TimeoutSeconds != tc.persistent {
					t.Errorf("%s: persistent %v %d s, want %d s", vs.Address, vs.Persistent, vs.TimeoutSeconds, tc.persistent)
				}
			}
			if !slices.Equal(draining, tc.draining) {
				t.Errorf("draining %v, want %v", draining, tc.draining)
			}
		})
	}
}

// TestIPVSPath: the hooks a scheduled connection goes through: the nat
// rules in prerouting (or output), filter INPUT's IPVS filter, IPVS at
// input (or output), then output and postrouting again.
func TestIPVSPath(t *testing.T) {
	rs := ipvsRuleset(t, "../testdata/fixtures/small-v1.37", true)
	ev := evaluate.New(rs, evaluate.Node{Addresses: []netip.Addr{netip.MustParseAddr("10.0.0.10")}, IPVS: true})
	for _, tc := range []struct {
		origin evaluate.Origin
		src    string
		want   string
	}{
		{evaluate.FromPod, "10.244.0.250:40000", "prerouting nat KUBE-SERVICES accept, input filter KUBE-IPVS-FILTER return, input ipvs TCP 10.96.10.1:80 dnat, postrouting nat KUBE-POSTROUTING return"},
		{evaluate.FromNode, "10.0.0.10:40000", "output nat KUBE-MARK-MASQ set, output nat KUBE-SERVICES accept, output ipvs TCP 10.96.10.1:80 dnat, postrouting nat KUBE-POSTROUTING set, postrouting nat KUBE-POSTROUTING masquerade"},
	} {
		res := ev.Walk(evaluate.Packet{Protocol: "tcp", Src: netip.MustParseAddrPort(tc.src), Dst: netip.MustParseAddrPort("10.96.10.1:80"), Origin: tc.origin}, evaluate.Options{})
		if len(res.Outcomes) == 0 {
			t.Fatalf("%s: no outcome", tc.origin)
		}
		var acted []string
		for _, h := range res.Outcomes[0].Path {
			switch h.Verb {
			case "accept", "return", "dnat", "masquerade", "set", "reject", "drop":
				if h.Verb == "return" && h.Rule < 0 || h.Verb == "set" && !strings.HasPrefix(h.Action, "mark") {
					continue
				}
				w := fmt.Sprintf("%s %s %s %s", h.Hook, h.Table, h.Chain, h.Verb)
				if len(acted) == 0 || acted[len(acted)-1] != w {
					acted = append(acted, w)
				}
			}
		}
		if got := strings.Join(acted, ", "); got != tc.want {
			t.Errorf("%s: path\n  %s\nwant\n  %s", tc.origin, got, tc.want)
		}
	}
}

// TestIPVSWithoutSets: without the ipsets, a set match is followed both
// ways, each outcome saying what it assumed; the case where the
// destination is in KUBE-CLUSTER-IP and no other set still gives the
// real servers at a third each.
func TestIPVSWithoutSets(t *testing.T) {
	rs := ipvsRuleset(t, "../testdata/fixtures/small-v1.37", false)
	ev := evaluate.New(rs, evaluate.Node{Addresses: []netip.Addr{netip.MustParseAddr("10.0.0.10")}, IPVS: true})
	res := ev.Walk(evaluate.Packet{Protocol: "tcp", Src: netip.MustParseAddrPort("10.244.0.250:40000"), Dst: netip.MustParseAddrPort("10.96.10.1:80"), Origin: evaluate.FromPod}, evaluate.Options{})
	const clusterIP = "-m set --match-set KUBE-CLUSTER-IP dst,dst"
	reached := map[string]string{}
	for _, o := range res.Outcomes {
		usual := true
		for _, a := range o.Assumes {
			if strings.HasPrefix(a.What, "-m set --match-set") && a.Holds != (a.What == clusterIP) {
				usual = false
			}
		}
		if usual && o.IPVS != nil && o.IPVS.Share != nil {
			reached[o.Destination.String()] = o.IPVS.Share.String()
		}
	}
	want := map[string]string{"10.244.0.11:8080": "1/3", "10.244.1.11:8080": "1/3", "10.244.2.11:8080": "1/3"}
	if fmt.Sprint(reached) != fmt.Sprint(want) {
		t.Errorf("the usual case reaches %v, want %v", reached, want)
	}
	assumed := false
	for _, n := range res.NotModelled {
		assumed = assumed || n.What == clusterIP
	}
	if !assumed {
		t.Errorf("the KUBE-CLUSTER-IP match is not listed as followed both ways: %+v", res.NotModelled)
	}
}

// TestIPVSOutFilter: kube-proxy's rule that keeps the node from a load
// balancer it must not reach (pkg/proxy/ipvs/proxier.go, lbNoNodeAccess:
// `-s LB -m ipvs --vaddr LB --vproto P --vport N -j DROP` in
// KUBE-IPVS-OUT-FILTER, as iptables-save prints xt_ipvs), put into
// small-v1.37's rules for 198.51.100.11:80: it drops the node's own
// connection, which leaves from the LB address once IPVS sent it on,
// and no pod's.
func TestIPVSOutFilter(t *testing.T) {
	const rule = "-A KUBE-IPVS-OUT-FILTER -s 198.51.100.11/32 -m ipvs --vproto 6 --vaddr 198.51.100.11/32 --vport 80 -j DROP\n"
	inject := func(text string) string {
		const at = "-A KUBE-IPVS-FILTER -m set --match-set KUBE-LOAD-BALANCER dst,dst -j RETURN\n"
		if !strings.Contains(text, at) {
			t.Fatal("the fixture no longer has KUBE-IPVS-FILTER's first rule")
		}
		return strings.Replace(text, at, rule+at, 1)
	}
	for _, tc := range []struct {
		name   string
		edit   func(string) string
		origin evaluate.Origin
		src    string
		want   string
	}{
		{"node, rule", inject, evaluate.FromNode, "198.51.100.11:40000", "drop 10.244.0.51:8080 1 rr"},
		{"node, no rule", nil, evaluate.FromNode, "198.51.100.11:40000", "dnat 10.244.0.51:8080 1 rr"},
		{"pod, rule", inject, evaluate.FromPod, "10.244.0.250:40000", "dnat 10.244.0.51:8080 1 rr"},
		{"node's own address, rule", inject, evaluate.FromNode, "10.0.0.10:40000", "dnat 10.244.0.51:8080 1 rr"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := ipvsRulesetWith(t, "../testdata/fixtures/small-v1.37", true, tc.edit)
			ev := evaluate.New(rs, evaluate.Node{Addresses: []netip.Addr{netip.MustParseAddr("10.0.0.10")}, IPVS: true})
			res := ev.Walk(evaluate.Packet{Protocol: "tcp", Src: netip.MustParseAddrPort(tc.src), Dst: netip.MustParseAddrPort("198.51.100.11:80"), Origin: tc.origin}, evaluate.Options{})
			if got := strings.Join(outcomeWords(res), "; "); got != tc.want {
				t.Errorf("outcomes %s, want %s; not modelled %+v", got, tc.want, res.NotModelled)
			}
		})
	}
}
