package evaluate

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/inspect"
	"github.com/proxyrules/kubectl-proxyrules/inspect/iptables"
	"github.com/proxyrules/kubectl-proxyrules/inspect/nft"
)

var testNode = Node{Addresses: []netip.Addr{netip.MustParseAddr("10.0.0.10"), netip.MustParseAddr("fd00::10")}}

func ipt(t *testing.T, text string) *inspect.Ruleset {
	t.Helper()
	rs, err := iptables.Parse(strings.NewReader(text), "test")
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func nftText(t *testing.T, text string) *inspect.Ruleset {
	t.Helper()
	rs, err := nft.ParseText(strings.NewReader(text), "test")
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func pkt(origin Origin, proto, src, dst string) Packet {
	return Packet{Protocol: proto, Src: netip.MustParseAddrPort(src), Dst: netip.MustParseAddrPort(dst), Origin: origin}
}

// summary is an outcome in one line: "1/3 dnat 10.244.0.1:80 masq".
func summary(o Outcome) string {
	s := fmt.Sprintf("%s %s", o.Probability, o.Verdict)
	if o.DNAT {
		s += " " + o.Destination.String()
	}
	if o.Masquerade {
		s += " masq"
	}
	if o.Reject != "" {
		s += " " + o.Reject
	}
	for _, a := range o.Assumes {
		s += fmt.Sprintf(" [%s %v]", a.What, a.Holds)
	}
	if o.Affinity != nil && !o.Affinity.Known {
		s += fmt.Sprintf(" [pinned %s %v]", o.Affinity.Record, o.Affinity.Pinned)
	}
	return s
}

// summaries are the outcomes in one line each, those alike (by another
// path) added up.
func summaries(r *Result) []string {
	probs := map[string]Prob{}
	for _, o := range r.Outcomes {
		p := o.Probability
		o.Probability = Prob{}
		k := strings.TrimPrefix(summary(o), "0 ")
		probs[k] = probs[k].Add(p)
	}
	var out []string
	for k, p := range probs {
		out = append(out, p.String()+" "+k)
	}
	sort.Strings(out)
	return out
}

// kubeCascade is kube-proxy's three-endpoint service, with the second
// endpoint chain flushable.
const kubeCascade = `*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:KUBE-MARK-MASQ - [0:0]
:KUBE-POSTROUTING - [0:0]
:KUBE-SERVICES - [0:0]
:KUBE-SVC-A - [0:0]
:KUBE-SEP-1 - [0:0]
:KUBE-SEP-2 - [0:0]
:KUBE-SEP-3 - [0:0]
-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING
-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000
-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN
-A KUBE-POSTROUTING -j MARK --set-xmark 0x4000/0x0
-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully
-A KUBE-SERVICES -d 10.96.0.1/32 -p tcp -m comment --comment "ns/a:http cluster IP" -m tcp --dport 80 -j KUBE-SVC-A
-A KUBE-SVC-A ! -s 10.244.0.0/16 -d 10.96.0.1/32 -p tcp -m comment --comment "ns/a:http cluster IP" -m tcp --dport 80 -j KUBE-MARK-MASQ
-A KUBE-SVC-A -m comment --comment "ns/a:http -> 10.244.0.1:8080" -m statistic --mode random --probability 0.33333333349 -j KUBE-SEP-1
-A KUBE-SVC-A -m comment --comment "ns/a:http -> 10.244.1.1:8080" -m statistic --mode random --probability 0.50000000000 -j KUBE-SEP-2
-A KUBE-SVC-A -m comment --comment "ns/a:http -> 10.244.2.1:8080" -j KUBE-SEP-3
-A KUBE-SEP-1 -s 10.244.0.1/32 -j KUBE-MARK-MASQ
-A KUBE-SEP-1 -p tcp -m tcp -j DNAT --to-destination 10.244.0.1:8080
%s-A KUBE-SEP-3 -s 10.244.2.1/32 -j KUBE-MARK-MASQ
-A KUBE-SEP-3 -p tcp -m tcp -j DNAT --to-destination 10.244.2.1:8080
COMMIT
`

const sep2 = "-A KUBE-SEP-2 -s 10.244.1.1/32 -j KUBE-MARK-MASQ\n-A KUBE-SEP-2 -p tcp -m tcp -j DNAT --to-destination 10.244.1.1:8080\n"

func TestWalkCascade(t *testing.T) {
	// The kernel's values: round(p·2^31)/2^31.
	p1 := Fraction(715827883, 1<<31)
	p2 := Fraction(1, 2)
	s1 := p1
	s2 := p1.Complement().Mul(p2)
	s3 := p1.Complement().Mul(p2.Complement())
	if got := s1.Add(s2).Add(s3); !got.IsOne() {
		t.Fatalf("the shares add up to %s", got)
	}
	for _, tc := range []struct {
		name  string
		rules string
		p     Packet
		want  []string
	}{
		{"pod", fmt.Sprintf(kubeCascade, sep2), pkt(FromPod, "tcp", "10.244.0.200:40000", "10.96.0.1:80"), []string{
			s1.String() + " dnat 10.244.0.1:8080", s2.String() + " dnat 10.244.1.1:8080", s3.String() + " dnat 10.244.2.1:8080"}},
		{"node: masqueraded", fmt.Sprintf(kubeCascade, sep2), pkt(FromNode, "tcp", "10.0.0.10:40000", "10.96.0.1:80"), []string{
			s1.String() + " dnat 10.244.0.1:8080 masq", s2.String() + " dnat 10.244.1.1:8080 masq", s3.String() + " dnat 10.244.2.1:8080 masq"}},
		{"wrong port: not DNATed", fmt.Sprintf(kubeCascade, sep2), pkt(FromPod, "tcp", "10.244.0.200:40000", "10.96.0.1:81"), []string{"1 accept"}},
		{"udp: not DNATed", fmt.Sprintf(kubeCascade, sep2), pkt(FromPod, "udp", "10.244.0.200:40000", "10.96.0.1:80"), []string{"1 accept"}},
		// iptables -t nat -F KUBE-SEP-2: its share falls through to the
		// next rule, which takes it all.
		{"emptied endpoint chain", fmt.Sprintf(kubeCascade, ""), pkt(FromPod, "tcp", "10.244.0.200:40000", "10.96.0.1:80"), []string{
			s1.String() + " dnat 10.244.0.1:8080", p1.Complement().String() + " dnat 10.244.2.1:8080"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := New(ipt(t, tc.rules), testNode).Walk(tc.p, Options{})
			got := summaries(r)
			want := append([]string(nil), tc.want...)
			sort.Strings(want)
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("got\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
			}
		})
	}
}

// walkCase is a packet walked through rules, and the outcomes it must have.
type walkCase struct {
	name  string
	nft   bool
	rules string
	p     Packet
	want  []string
}

// walkIptablesCases are the walk's semantics on iptables-save input.
var walkIptablesCases = []walkCase{
	{name: "goto returns to the caller's caller", rules: `*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:A - [0:0]
:B - [0:0]
-A FORWARD -j A
-A FORWARD -j DROP
-A A -g B
-A A -j ACCEPT
-A B -p udp -j ACCEPT
COMMIT
`, p: pkt(FromPod, "tcp", "10.244.0.2:1000", "10.244.1.2:80"), want: []string{"1 drop"}},
	{name: "RETURN in a built-in chain applies its policy", rules: `*filter
:INPUT ACCEPT [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
-A FORWARD -j RETURN
-A FORWARD -j ACCEPT
COMMIT
`, p: pkt(FromPod, "tcp", "10.244.0.2:1000", "10.244.1.2:80"), want: []string{"1 drop"}},
	{name: "reject with", rules: `*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A OUTPUT -d 10.96.0.9/32 -p tcp -m tcp --dport 80 -j REJECT --reject-with tcp-reset
COMMIT
`, p: pkt(FromNode, "tcp", "10.0.0.10:1000", "10.96.0.9:80"), want: []string{"1 reject tcp-reset"}},
	{name: "an unknown match is followed both ways", rules: `*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A FORWARD -m owner --uid-owner 0 -j DROP
COMMIT
`, p: pkt(FromPod, "tcp", "10.244.0.2:1000", "10.244.1.2:80"),
		want: []string{"1 accept [-m owner --uid-owner 0 false]", "1 drop [-m owner --uid-owner 0 true]"}},
	{name: "a negated unknown option is not read as its positive", rules: `*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A FORWARD -p tcp -m tcp ! --sport 1000 -j DROP
COMMIT
`, p: pkt(FromPod, "tcp", "10.244.0.2:1000", "10.244.1.2:80"), want: []string{"1 accept"}},
	{name: "CONNMARK restore then mark test", rules: `*mangle
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
-A PREROUTING -j CONNMARK --set-xmark 0x80/0x80
-A PREROUTING -j CONNMARK --restore-mark --nfmask 0x80 --ctmask 0x80
COMMIT
*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A FORWARD -m mark --mark 0x80/0x80 -j DROP
COMMIT
`, p: pkt(FromPod, "tcp", "10.244.0.2:1000", "10.244.1.2:80"), want: []string{"1 drop"}},
	{name: "a jump to a chain not in the input is unknown", rules: `-A FORWARD -j CNI-FORWARD
`, p: pkt(FromPod, "tcp", "10.244.0.2:1000", "10.244.1.2:80"), want: []string{"1 unknown"}},
	{name: "a DNAT to the node goes to INPUT", rules: `*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
-A PREROUTING -p tcp -m tcp --dport 80 -j DNAT --to-destination 10.0.0.10:8080
COMMIT
*filter
:INPUT DROP [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
COMMIT
`, p: pkt(FromOutside, "tcp", "203.0.113.7:1000", "198.51.100.1:80"), want: []string{"1 drop 10.0.0.10:8080"}},
	{name: "the node to itself passes INPUT after OUTPUT", rules: `*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:KUBE-FIREWALL - [0:0]
-A INPUT -j KUBE-FIREWALL
-A KUBE-FIREWALL ! -s 127.0.0.0/8 -d 127.0.0.0/8 -m comment --comment "block incoming localnet connections" -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP
COMMIT
`, p: pkt(FromNode, "tcp", "10.0.0.10:1000", "127.0.0.1:30080"), want: []string{"1 drop"}},
}

// walkNFTCases are the walk's semantics on nft list ruleset input.
var walkNFTCases = []walkCase{
	{name: "nat stops at the first binding, across tables", nft: true, rules: `table ip a {
	chain pre {
		type nat hook prerouting priority -110; policy accept;
		tcp dport 80 dnat to 10.244.0.5:8080
	}
}
table ip b {
	chain pre {
		type nat hook prerouting priority -100; policy accept;
		tcp dport 80 dnat to 10.244.0.6:8080
	}
}
`, p: pkt(FromPod, "tcp", "10.244.0.2:1000", "10.96.0.1:80"), want: []string{"1 dnat 10.244.0.5:8080"}},
	{name: "base chains of every table by priority", nft: true, rules: `table inet cni {
	chain fw {
		type filter hook forward priority -5; policy accept;
		tcp dport 8080 drop
	}
}
table ip kube-proxy {
	chain nat-prerouting {
		type nat hook prerouting priority dstnat; policy accept;
		ip daddr 10.96.0.1 tcp dport 80 dnat to 10.244.0.5:8080
	}
	chain filter-forward {
		type filter hook forward priority filter; policy accept;
		accept
	}
}
`, p: pkt(FromPod, "tcp", "10.244.0.2:1000", "10.96.0.1:80"), want: []string{"1 drop 10.244.0.5:8080"}},
	{name: "numgen dnat map", nft: true, rules: `table ip kube-proxy {
	chain nat-output {
		type nat hook output priority -100; policy accept;
		ip daddr 10.96.0.1 tcp dport 80 dnat ip to numgen random mod 3 map { 0 : 10.244.0.1 . 8080, 1 : 10.244.0.2 . 8080, 2 : 10.244.0.3 . 8080 }
	}
}
`, p: pkt(FromNode, "tcp", "10.0.0.10:1000", "10.96.0.1:80"), want: []string{"1/3 dnat 10.244.0.1:8080", "1/3 dnat 10.244.0.2:8080", "1/3 dnat 10.244.0.3:8080"}},
	{name: "iptables-nft's random, masquerade by mark", nft: true, rules: `table ip t {
	chain out {
		type nat hook output priority -100; policy accept;
		meta random & 2147483647 < 536870912 meta mark set meta mark | 0x00004000 dnat to 10.244.0.1:80
		dnat to 10.244.0.2:80
	}
	chain post {
		type nat hook postrouting priority srcnat; policy accept;
		meta mark & 0x00004000 != 0x00000000 meta mark set meta mark ^ 0x00004000 masquerade fully-random
	}
}
`, p: pkt(FromNode, "tcp", "10.0.0.10:1000", "10.96.0.1:80"), want: []string{"1/4 dnat 10.244.0.1:80 masq", "3/4 dnat 10.244.0.2:80"}},
	{name: "verdict maps", nft: true, rules: `table ip kube-proxy {
	map service-ips {
		type ipv4_addr . inet_proto . inet_service : verdict
		elements = { 10.96.0.1 . tcp . 80 : goto svc, 10.96.0.1 . udp . 53 : drop }
	}
	chain nat-prerouting {
		type nat hook prerouting priority dstnat; policy accept;
		ip daddr . meta l4proto . th dport vmap @service-ips
	}
	chain svc {
		dnat to 10.244.0.1:8080
	}
}
`, p: pkt(FromPod, "udp", "10.244.0.2:1000", "10.96.0.1:53"), want: []string{"1 drop"}},
	{name: "ct state before conntrack", nft: true, rules: `table ip raw {
	chain pre {
		type filter hook prerouting priority raw; policy accept;
		ct state new drop
	}
}
`, p: pkt(FromPod, "tcp", "10.244.0.2:1000", "10.244.1.2:80"), want: []string{"1 accept"}},
	{name: "a jump loop is unknown, not a hang", nft: true, rules: `table ip t {
	chain fw {
		type filter hook forward priority 0; policy accept;
		jump a
	}
	chain a {
		goto b
	}
	chain b {
		goto a
	}
}
`, p: pkt(FromPod, "tcp", "10.244.0.2:1000", "10.244.1.2:80"), want: []string{"1 unknown"}},
}

// TestWalkSemantics runs each ruleset (iptables-save or nft list text) on
// a packet.
func TestWalkSemantics(t *testing.T) {
	for _, tc := range append(slices.Clone(walkIptablesCases), walkNFTCases...) {
		t.Run(tc.name, func(t *testing.T) {
			var rs *inspect.Ruleset
			if tc.nft {
				rs = nftText(t, tc.rules)
			} else {
				rs = ipt(t, tc.rules)
			}
			r := New(rs, testNode).Walk(tc.p, Options{})
			got := summaries(r)
			want := append([]string(nil), tc.want...)
			sort.Strings(want)
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("got\n  %s\nwant\n  %s\nnot modelled: %+v", strings.Join(got, "\n  "), strings.Join(want, "\n  "), r.NotModelled)
			}
		})
	}
}

// A built-in chain that a partial input (a paste, a service-scoped read)
// did not show is not an empty one: the walk says it could not see it,
// and a whole table's absent chain says nothing.
func TestWalkPartialBuiltinChain(t *testing.T) {
	p := pkt(FromPod, "tcp", "10.244.0.2:1000", "10.96.0.1:80")
	missing := func(r *Result, chain string) bool {
		for _, nm := range r.NotModelled {
			if nm.Table == "nat" && nm.Chain == chain && strings.Contains(nm.What, "built-in chain "+chain) {
				return true
			}
		}
		return false
	}
	paste := ipt(t, "-A KUBE-SERVICES -d 10.96.0.1/32 -p tcp -m tcp --dport 80 -j KUBE-SVC-X\n-A KUBE-SVC-X -j DNAT --to-destination 10.244.1.2:8080\n")
	if tb := paste.IPTables[0]; !tb.Partial {
		t.Fatalf("a headerless paste read as a whole table")
	}
	if r := New(paste, testNode).Walk(p, Options{}); !missing(r, "PREROUTING") {
		t.Errorf("paste without PREROUTING: not modelled %+v, want its PREROUTING named", r.NotModelled)
	}
	whole := ipt(t, "*nat\n:KUBE-SERVICES - [0:0]\nCOMMIT\n")
	if r := New(whole, testNode).Walk(p, Options{}); missing(r, "PREROUTING") {
		t.Errorf("a whole table without PREROUTING: not modelled %+v, want nothing said of it", r.NotModelled)
	}
}
