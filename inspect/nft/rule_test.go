package nft

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/inspect"
)

// chain and set names of analyzeNFTRuleCases
const (
	ep0 = "endpoint-UNZV3OEC-ns4/svc4/tcp/p80__10.180.0.4/80"
	ep1 = "endpoint-5RFCDDV7-ns4/svc4/tcp/p80__10.180.0.5/80"
	aff = "affinity-GTK6MW7G-ns5/svc5/tcp/p80__10.180.0.3/80"
	epA = "endpoint-GTK6MW7G-ns5/svc5/tcp/p80__10.180.0.3/80"
	ep6 = "endpoint-5HFFSBBM-ns5/svc5/tcp/p80__fd00.10.180..3/80"
	af6 = "affinity-5HFFSBBM-ns5/svc5/tcp/p80__fd00.10.180..3/80"
)

// analyzeNFTRuleCases are rules and what analyzeRule reads in them, in
// kube-proxy's source spelling and nft's listing: a flat table, kept out
// of the test function.
var analyzeNFTRuleCases = []struct {
	name string
	text string
	want inspect.NFTRuleInfo
}{
	// masquerade marks, kube-proxy source spelling and nft's listing
	{"mark set or (source)", `mark set mark or 0x4000`,
		inspect.NFTRuleInfo{HasMarkSet: true, MarkSetOp: "or", MarkSetValue: 0x4000}},
	{"mark set or (source, %#08x)", `ip daddr @cluster-ips ip saddr != 10.0.0.0/8 mark set mark or 0x00004000`,
		inspect.NFTRuleInfo{Sets: []string{"cluster-ips"}, HasMarkSet: true, MarkSetOp: "or", MarkSetValue: 0x4000, Saddr: []string{"10.0.0.0/8"}, SaddrNot: true}},
	{"mark set or (nft)", `ip daddr @cluster-ips ip saddr != 10.0.0.0/8 meta mark set meta mark | 0x00004000`,
		inspect.NFTRuleInfo{Sets: []string{"cluster-ips"}, HasMarkSet: true, MarkSetOp: "or", MarkSetValue: 0x4000, Saddr: []string{"10.0.0.0/8"}, SaddrNot: true}},
	{"mark set or (iptables-nft xlate)", `counter packets 0 bytes 0 meta mark set mark or 0x4000`,
		inspect.NFTRuleInfo{HasMarkSet: true, MarkSetOp: "or", MarkSetValue: 0x4000}},
	{"mark set plain", `meta mark set 0x00008000`,
		inspect.NFTRuleInfo{HasMarkSet: true, MarkSetOp: "set", MarkSetValue: 0x8000}},
	{"mark set and", `meta mark set meta mark & 0xffffbfff`,
		inspect.NFTRuleInfo{HasMarkSet: true, MarkSetOp: "and", MarkSetValue: 0xffffbfff}},
	// loadBalancerSourceRanges: the firewall chain's source match
	{"firewall, several ranges (nft)", `ip saddr != { 10.0.0.0/8, 198.51.100.10, 203.0.113.0/25 } drop`,
		inspect.NFTRuleInfo{Saddr: []string{"10.0.0.0/8", "198.51.100.10", "203.0.113.0/25"}, SaddrNot: true, Verdict: "drop"}},
	{"firewall single range (nft prints no braces)", `ip6 saddr != 2001:db8::/64 drop`,
		inspect.NFTRuleInfo{Saddr: []string{"2001:db8::/64"}, SaddrNot: true, Verdict: "drop"}},
	{"saddr set reference", `ip saddr @allowed accept`,
		inspect.NFTRuleInfo{Sets: []string{"allowed"}, Verdict: "accept"}},
	// the packet mark restored from the connection mark (CNIs)
	{"mark set ct mark", `meta mark set ct mark`,
		inspect.NFTRuleInfo{MarkFromCT: true, MarkFromCTMask: 0xffffffff}},
	{"mark set ct mark and mask", `meta mark set ct mark & 0x0000ff00 accept`,
		inspect.NFTRuleInfo{MarkFromCT: true, MarkFromCTMask: 0xff00, Verdict: "accept"}},
	{"ct mark is not the packet mark", `ct mark set mark`, inspect.NFTRuleInfo{}},
	{"masquerading ≥1.36 (source)", `mark and 0x4000 != 0 mark set mark xor 0x4000 masquerade fully-random`,
		inspect.NFTRuleInfo{HasMarkTest: true, MarkTestMask: 0x4000, MarkTestValue: 0, MarkTestOp: "!=",
			HasMarkSet: true, MarkSetOp: "xor", MarkSetValue: 0x4000, Masquerade: true, FullyRandom: true}},
	{"masquerading ≥1.36 (nft)", `meta mark & 0x00004000 != 0x00000000 meta mark set meta mark ^ 0x00004000 masquerade fully-random`,
		inspect.NFTRuleInfo{HasMarkTest: true, MarkTestMask: 0x4000, MarkTestValue: 0, MarkTestOp: "!=",
			HasMarkSet: true, MarkSetOp: "xor", MarkSetValue: 0x4000, Masquerade: true, FullyRandom: true}},
	{"hairpin set", `ct status dnat ip saddr . ip daddr . meta l4proto . th dport @hairpin-connections masquerade fully-random`,
		inspect.NFTRuleInfo{Sets: []string{"hairpin-connections"}, Masquerade: true, FullyRandom: true}},
	{"masquerading ≤1.35 return (source)", `mark and 0x4000 == 0 return`,
		inspect.NFTRuleInfo{HasMarkTest: true, MarkTestMask: 0x4000, MarkTestOp: "==", Verdict: "return"}},
	{"masquerading ≤1.35 return (nft)", `meta mark & 0x00004000 == 0x00000000 return`,
		inspect.NFTRuleInfo{HasMarkTest: true, MarkTestMask: 0x4000, MarkTestOp: "==", Verdict: "return"}},
	{"masquerading ≤1.35 xor", `mark set mark xor 0x4000`,
		inspect.NFTRuleInfo{HasMarkSet: true, MarkSetOp: "xor", MarkSetValue: 0x4000}},
	{"masquerade without flags", `masquerade`, inspect.NFTRuleInfo{Masquerade: true}},
	{"masquerade with flag list", `masquerade random,fully-random`, inspect.NFTRuleInfo{Masquerade: true, FullyRandom: true}},
	{"mark test plain", `meta mark 0x00004000 accept`,
		inspect.NFTRuleInfo{HasMarkTest: true, MarkTestMask: 0xffffffff, MarkTestValue: 0x4000, MarkTestOp: "==", Verdict: "accept"}},
	{"iptables-nft mark test", `meta mark & 0x00004000 != 0x00004000 counter packets 0 bytes 0 return`,
		inspect.NFTRuleInfo{HasMarkTest: true, MarkTestMask: 0x4000, MarkTestValue: 0x4000, MarkTestOp: "!=", Verdict: "return"}},
	{"≤1.35 jump mark-for-masquerade", `ip daddr 172.30.0.41 tcp dport 80 ip saddr != 10.0.0.0/8 jump mark-for-masquerade`,
		inspect.NFTRuleInfo{Jumps: []string{"mark-for-masquerade"}, Saddr: []string{"10.0.0.0/8"}, SaddrNot: true}},

	// service dispatch
	{"≤1.35 numgen vmap (source)", `numgen random mod 2 vmap { 0 : goto ` + ep0 + ` , 1 : goto ` + ep1 + ` }`,
		inspect.NFTRuleInfo{Gotos: []string{ep0, ep1}, Numgen: 2, NumgenTargets: []string{ep0, ep1}}},
	{"≤1.35 numgen vmap (nft)", `numgen random mod 2 vmap { 0 : goto ` + ep0 + `, 1 : goto ` + ep1 + ` }`,
		inspect.NFTRuleInfo{Gotos: []string{ep0, ep1}, Numgen: 2, NumgenTargets: []string{ep0, ep1}}},
	{"numgen vmap with jump", `numgen inc mod 2 offset 0 vmap { 0 : jump a, 1 : jump b }`,
		inspect.NFTRuleInfo{Jumps: []string{"a", "b"}, Numgen: 2, NumgenTargets: []string{"a", "b"}}},
	{"≥1.36 dnat map (source)", `meta l4proto tcp dnat ip addr . port to numgen random mod 2 map { 0 : 10.180.0.4 . 80 , 1 : 10.180.0.5 . 80 }`,
		inspect.NFTRuleInfo{DNAT: []string{"10.180.0.4:80", "10.180.0.5:80"}, Numgen: 2,
			NumgenTargets: []string{"10.180.0.4:80", "10.180.0.5:80"}}},
	{"≥1.36 dnat map (nft)", `meta l4proto tcp dnat ip to numgen random mod 2 map { 0 : 10.180.0.4 . 80, 1 : 10.180.0.5 . 80 }`,
		inspect.NFTRuleInfo{DNAT: []string{"10.180.0.4:80", "10.180.0.5:80"}, Numgen: 2,
			NumgenTargets: []string{"10.180.0.4:80", "10.180.0.5:80"}}},
	{"1.36 single-endpoint map", `meta l4proto tcp dnat ip addr . port to numgen random mod 1 map { 0 : 10.180.0.1 . 80 }`,
		inspect.NFTRuleInfo{DNAT: []string{"10.180.0.1:80"}, Numgen: 1, NumgenTargets: []string{"10.180.0.1:80"}}},
	{"dnat map, elements out of order", `dnat ip to numgen random mod 3 map { 2 : 10.0.0.3 . 80, 0 : 10.0.0.1 . 80, 1 : 10.0.0.2 . 80 }`,
		inspect.NFTRuleInfo{DNAT: []string{"10.0.0.3:80", "10.0.0.1:80", "10.0.0.2:80"}, Numgen: 3,
			NumgenTargets: []string{"10.0.0.1:80", "10.0.0.2:80", "10.0.0.3:80"}}},
	{"1.37 single dnat", `meta l4proto tcp dnat to 10.180.0.1:80`, inspect.NFTRuleInfo{DNAT: []string{"10.180.0.1:80"}}},
	{"dnat without port", `dnat to 10.180.0.1`, inspect.NFTRuleInfo{DNAT: []string{"10.180.0.1"}}},
	{"dnat addr . port", `dnat ip addr . port to 10.0.0.1 . 8080`, inspect.NFTRuleInfo{DNAT: []string{"10.0.0.1:8080"}}},
	{"dnat from a named map", `dnat ip to ip daddr . tcp dport map @svc`, inspect.NFTRuleInfo{Maps: []string{"svc"}}},
	{"dnat with flags", `dnat to 10.0.0.1:80 persistent`, inspect.NFTRuleInfo{DNAT: []string{"10.0.0.1:80"}}},

	// IPv6
	{"IPv6 single dnat", `meta l4proto tcp dnat to [fd00:10:180::1]:80`, inspect.NFTRuleInfo{DNAT: []string{"[fd00:10:180::1]:80"}}},
	{"IPv6 single dnat, family", `dnat ip6 to [fd00::1]:80`, inspect.NFTRuleInfo{DNAT: []string{"[fd00::1]:80"}}},
	{"IPv6 dnat map (source)", `meta l4proto tcp dnat ip6 addr . port to numgen random mod 2 map { 0 : fd00:10:180::4 . 80 , 1 : fd00:10:180::5 . 80 }`,
		inspect.NFTRuleInfo{DNAT: []string{"[fd00:10:180::4]:80", "[fd00:10:180::5]:80"}, Numgen: 2,
			NumgenTargets: []string{"[fd00:10:180::4]:80", "[fd00:10:180::5]:80"}}},
	{"IPv6 dnat map (nft)", `meta l4proto tcp dnat ip6 to numgen random mod 2 map { 0 : fd00:10:180::4 . 80, 1 : fd00:10:180::5 . 80 }`,
		inspect.NFTRuleInfo{DNAT: []string{"[fd00:10:180::4]:80", "[fd00:10:180::5]:80"}, Numgen: 2,
			NumgenTargets: []string{"[fd00:10:180::4]:80", "[fd00:10:180::5]:80"}}},
	{"IPv6 dnat without port", `dnat ip6 to fd00::1`, inspect.NFTRuleInfo{DNAT: []string{"fd00::1"}}},
	{"IPv6 affinity check", `ip6 saddr @` + af6 + ` goto ` + ep6,
		inspect.NFTRuleInfo{Gotos: []string{ep6}, Sets: []string{af6}}},
	{"IPv6 affinity update", `update @` + af6 + ` { ip6 saddr }`, inspect.NFTRuleInfo{Sets: []string{af6}}},
	{"IPv6 firewall", `ip6 saddr != 2001:db8:203::/64 drop`, inspect.NFTRuleInfo{Verdict: "drop", Saddr: []string{"2001:db8:203::/64"}, SaddrNot: true}},

	// ClientIP affinity
	{"affinity check", `ip saddr @` + aff + ` goto ` + epA, inspect.NFTRuleInfo{Gotos: []string{epA}, Sets: []string{aff}}},
	{"affinity update", `update @` + aff + ` { ip saddr }`, inspect.NFTRuleInfo{Sets: []string{aff}}},
	{"affinity numgen mod 1", `numgen random mod 1 vmap { 0 : goto ` + epA + ` }`,
		inspect.NFTRuleInfo{Gotos: []string{epA}, Numgen: 1, NumgenTargets: []string{epA}}},

	// fixed chains
	{"vmap service-ips", `ip daddr . meta l4proto . th dport vmap @service-ips`, inspect.NFTRuleInfo{VMaps: []string{"service-ips"}}},
	{"vmap nodeports", `fib daddr type local ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap @service-nodeports`,
		inspect.NFTRuleInfo{VMaps: []string{"service-nodeports"}}},
	{"vmap with set", `ip daddr @nodeport-ips meta l4proto . th dport vmap @service-nodeports`,
		inspect.NFTRuleInfo{VMaps: []string{"service-nodeports"}, Sets: []string{"nodeport-ips"}}},
	{"inline verdict map", `meta l4proto . th dport vmap { tcp . 3001 : drop, udp . 53 : goto reject-chain }`,
		inspect.NFTRuleInfo{Gotos: []string{"reject-chain"}}},
	{"jump", `ct state new jump firewall-check`, inspect.NFTRuleInfo{Jumps: []string{"firewall-check"}}},
	{"goto", `goto service-ULMVA6XW-ns1/svc1/tcp/p80`, inspect.NFTRuleInfo{Gotos: []string{"service-ULMVA6XW-ns1/svc1/tcp/p80"}}},
	{"reject", `ip daddr @cluster-ips reject`, inspect.NFTRuleInfo{Sets: []string{"cluster-ips"}, Verdict: "reject"}},
	{"reject with", `reject with icmpx admin-prohibited`, inspect.NFTRuleInfo{Verdict: "reject"}},
	{"firewall (source)", `ip saddr != { 203.0.113.0/25 } drop`, inspect.NFTRuleInfo{Verdict: "drop", Saddr: []string{"203.0.113.0/25"}, SaddrNot: true}},
	{"firewall (nft)", `ip saddr != 203.0.113.0/25 drop`, inspect.NFTRuleInfo{Verdict: "drop", Saddr: []string{"203.0.113.0/25"}, SaddrNot: true}},
	{"drop unallocated", `ip daddr { 172.30.0.0/16 } drop`, inspect.NFTRuleInfo{Verdict: "drop"}},
	{"counter name", `counter name "localhost-nodeport-rejected-tcp" reject`, inspect.NFTRuleInfo{Verdict: "reject"}},
	{"external local", `fib saddr type local mark set mark or 0x4000`,
		inspect.NFTRuleInfo{HasMarkSet: true, MarkSetOp: "or", MarkSetValue: 0x4000}},
	{"trailing comment ignored", `meta mark set meta mark | 0x00004000 comment "drop it"`,
		inspect.NFTRuleInfo{HasMarkSet: true, MarkSetOp: "or", MarkSetValue: 0x4000}},
	{"policy is no verdict", `type filter hook input priority 0; policy drop;`, inspect.NFTRuleInfo{}},

	// iptables-nft seen through nft
	{"probability 0.05", `meta random & 2147483647 < 107374182 counter packets 0 bytes 0 jump KUBE-SEP-X`,
		inspect.NFTRuleInfo{Jumps: []string{"KUBE-SEP-X"}, Probability: 107374182.0 / (1 << 31)}},
	{"xt match recent", `meta l4proto tcp xt match recent counter packets 0 bytes 0 dnat to 10.180.0.3:80`,
		inspect.NFTRuleInfo{DNAT: []string{"10.180.0.3:80"}, XT: []string{"recent"}}},
	{"xt quoted", `xt match "sctp" xt target "MASQUERADE"`, inspect.NFTRuleInfo{XT: []string{"sctp", "MASQUERADE"}}},
	{"XT not found", `counter packets 0 bytes 0 XT target DNAT not found`, inspect.NFTRuleInfo{XT: []string{"DNAT"}}},
	{"empty", ``, inspect.NFTRuleInfo{}},
}

func TestAnalyzeNFTRule(t *testing.T) {
	tests := analyzeNFTRuleCases
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := analyzeRule(tt.text)
			if math.Abs(got.Probability-tt.want.Probability) < 1e-12 {
				got.Probability = tt.want.Probability
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("AnalyzeNFTRule(%q)\n got %+v\nwant %+v", tt.text, got, tt.want)
			}
		})
	}
}

// Both spellings of the same kube-proxy rule must analyse the same way.
func TestAnalyzeNFTRuleSpellingsAgree(t *testing.T) {
	pairs := [][2]string{
		{`mark set mark or 0x4000`, `meta mark set meta mark | 0x00004000`},
		{`mark and 0x4000 != 0 mark set mark xor 0x4000 masquerade fully-random`,
			`meta mark & 0x00004000 != 0x00000000 meta mark set meta mark ^ 0x00004000 masquerade fully-random`},
		{`mark and 0x4000 == 0 return`, `meta mark & 0x00004000 == 0x00000000 return`},
		{`meta l4proto tcp dnat ip addr . port to numgen random mod 2 map { 0 : 10.180.0.4 . 80 , 1 : 10.180.0.5 . 80 }`,
			`meta l4proto tcp dnat ip to numgen random mod 2 map { 0 : 10.180.0.4 . 80, 1 : 10.180.0.5 . 80 }`},
		{`ip saddr != { 203.0.113.0/25 } drop`, `ip saddr != 203.0.113.0/25 drop`},
		{`numgen random mod 2 vmap { 0 : goto a , 1 : goto b }`, `numgen random mod 2 vmap { 0 : goto a, 1 : goto b }`},
	}
	for _, p := range pairs {
		a, b := analyzeRule(p[0]), analyzeRule(p[1])
		if !reflect.DeepEqual(a, b) {
			t.Errorf("spellings disagree:\n %q → %+v\n %q → %+v", p[0], a, p[1], b)
		}
	}
}

// analyzePlain is analyzeRule on every token, no map body read ahead:
// the reference the read-ahead path must agree with.
func analyzePlain(text string) inspect.NFTRuleInfo {
	var info inspect.NFTRuleInfo
	new(ruleScratch).analyzeTokens(&info, text, false)
	return info
}

// readBodyBothWays reads the map body at every '{' of s (the first 16)
// with nft's spelling of entries read at once and word by word, and
// reports the first difference ("" when none).
func readBodyBothWays(s string) string {
	opens := 0
	for i := 0; i < len(s) && opens < 16; i++ {
		if s[i] != '{' {
			continue
		}
		opens++
		fast, words := new(ruleScratch), &ruleScratch{wordsOnly: true}
		fe, fok := fast.readBody(s, i)
		we, wok := words.readBody(s, i)
		for k := range fast.bodies {
			// known only to the fast reader, and then right
			e := &fast.bodies[k]
			if a := s[e.vals[0].from:e.vals[0].to]; e.plainAddr && strings.ContainsAny(a, ":[]") {
				return fmt.Sprintf("body at %d: %q taken for a plain address", i, a)
			}
			e.plainAddr = false
		}
		if fe != we || fok != wok || !slices.Equal(fast.bodies, words.bodies) || !slices.Equal(fast.spans, words.spans) {
			return fmt.Sprintf("body at %d: at once %d %v %v, word by word %d %v %v", i, fe, fok, fast.bodies, we, wok, words.bodies)
		}
	}
	return ""
}

// TestCanonicalEntries: entries in nft's spelling are read at once, into
// what the word path reads; every other spelling is left to that path.
func TestCanonicalEntries(t *testing.T) {
	tests := []struct {
		body string
		fast int // entries read at once
	}{
		{"{ 0 : 10.180.0.4 . 80, 1 : 10.180.0.5 . 80 }", 2},
		{"{ 0 : fd00::4 . 80, 1 : [fd00::5] . 80 }", 2},
		{"{ 0 : 10.0.0.1 . 80 , 1 : 10.0.0.2 . 80 }", 1}, // ' , ': word by word
		{"{ 0 : 10.0.0.1 . 80,}", 1},
		{"{ 0 : 10.0.0.1 . 80 . 1, 1 : 10.0.0.2 . 80 }", 1},
		{"{ 0 :  10.0.0.1 . 80 }", 0},
		{"{ 0 : 10.0.0.1, . 80 }", 0},
		{"{ 0 : 10.0.0.1 . ,}", 0},
		{"{ 0 : 10.0.0.1 . 80\"x\" }", 0},
		{"{ 0 : @set . 80 }", 0},
		{"{ 0 : mark . 80 }", 0},
		{"{ 0 : a . numgen }", 0},
		{"{ 0 : a . 80 x }", 0},
		{"{ 0x1 : a . 80 }", 0},
		{"{ 0 : a . 80", 0},
		{"{ 0 : a . 80,", 1},
		{`{ 0 : a . 80,"x" }`, 1}, // readBody gives up at the quote either way
		{"{ 00 : a . b:c, 1 : a . : }", 2},
	}
	for _, tt := range tests {
		rule := "dnat ip to numgen random mod 2 map " + tt.body
		if d := readBodyBothWays(rule); d != "" {
			t.Errorf("%q: %s", tt.body, d)
		}
		n := 0
		for i := 1; i < len(tt.body); i++ {
			if _, _, ok := canonicalEntry(tt.body, i); ok && (tt.body[i-1] == ' ' || tt.body[i-1] == '{') {
				n++
			}
		}
		if n != tt.fast {
			t.Errorf("%q: %d entries read at once, want %d", tt.body, n, tt.fast)
		}
		if want, got := analyzePlain(rule), analyzeRule(rule); !reflect.DeepEqual(got, want) {
			t.Errorf("%q:\n read ahead %+v\n token path %+v", rule, got, want)
		}
	}
}

// TestMapBodiesReadAhead: the bodies of the common shape are read ahead
// (and a numgen DNAT map in kube-proxy's order straight into the block),
// other bodies and analyses that look into one go the token way; the
// answer is the same either way.
func TestMapBodiesReadAhead(t *testing.T) {
	tests := []struct {
		text   string
		bodies int  // read ahead
		again  bool // the read-ahead analysis gives up
		inline bool // DNAT and NumgenTargets one list in the block
	}{
		{`dnat ip to numgen random mod 2 map { 0 : 10.180.0.4 . 80, 1 : 10.180.0.5 . 80 }`, 1, false, true},
		{`dnat ip6 addr . port to numgen random mod 2 map { 0 : fd00::4 . 80 , 1 : [fd00::5] . 80 }`, 1, false, true},
		{`dnat ip to numgen random mod 2 map { 1 : 10.180.0.4 . 80, 0 : 10.180.0.5 . 80 }`, 1, false, false},
		{`dnat ip to numgen random mod 3 map { 0 : 10.180.0.4 . 80, 2 : 10.180.0.5 . 80 }`, 1, false, false},
		{`dnat ip to numgen random mod 2 map { 0 : 10.180.0.4 . 80, 1 : 10.180.0.5 . 80 } dnat to 10.0.0.1:80`, 1, true, true},
		{`dnat ip to numgen random mod 1 map { 0 : 10.180.0.4 . 80 } numgen inc mod 1 vmap { 0 : goto a }`, 2, true, true},
		{`numgen random mod 2 vmap { 0 : goto a, 1 : goto b }`, 1, false, false},
		{`numgen random mod 2 vmap { 0 : goto "a b", 1 : goto b }`, 0, false, false},
		{`ip daddr . tcp dport vmap { 10.0.0.1 . 80 : goto svc-a, 10.0.0.2 . 443 : goto svc-b }`, 1, false, false},
		{`meta mark map { 1 : 0x10, 2 : @x }`, 0, false, false},
		{`vmap { 0 : { goto a } }`, 0, false, false},
		{`vmap { 0 : mark }`, 0, false, false},
		{`vmap { 0 : goto a`, 0, false, false},
		{`jump map { 0 : goto a }`, 1, true, false},
		{`map { 0 : 1.2.3.4 . 80 } mark set 0x1`, 1, true, false}, // mark looks back at the body
		{`vmap {0:goto a}`, 1, false, false},
		{`dnat ip to numgen random mod 1 map { 0 : 10.0.0.1 . 80 . 1, 1 : 10.0.0.2 . 80 }`, 1, false, false},
		{`vmap { a,b, : goto x,, }`, 1, false, false},
	}
	for _, tt := range tests {
		sc := new(ruleScratch)
		var got inspect.NFTRuleInfo
		ok := sc.analyzeTokens(&got, tt.text, true)
		if ok == tt.again || len(sc.spans) != tt.bodies {
			t.Errorf("%q: read ahead %d bodies (want %d), gave up %v (want %v)", tt.text, len(sc.spans), tt.bodies, !ok, tt.again)
		}
		oneList := len(got.DNAT) > 0 && len(got.NumgenTargets) > 0 && &got.DNAT[0] == &got.NumgenTargets[0]
		if !tt.again && tt.inline != oneList {
			t.Errorf("%q: DNAT and numgen targets one list: %v, want %v", tt.text, !tt.inline, tt.inline)
		}
		if want, got := analyzePlain(tt.text), analyzeRule(tt.text); !reflect.DeepEqual(got, want) {
			t.Errorf("%q:\n read ahead %+v\n token path %+v", tt.text, got, want)
		}
	}
}

func TestNFTTokens(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{`a b`, []string{"a", "b"}},
		{`{ 0 : a . 80, 1 : b . 80 }`, []string{"{", "0", ":", "a", ".", "80", ",", "1", ":", "b", ".", "80", "}"}},
		{`{0:x}`, []string{"{", "0:x", "}"}},
		{`ct state related,established accept`, []string{"ct", "state", "related,established", "accept"}},
		{`log prefix "a b" drop`, []string{"log", "prefix", `"a b"`, "drop"}},
		{`comment "unterminated`, []string{"comment", `"unterminated`}},
		{"\ttabs\r\nand  spaces ", []string{"tabs", "and", "spaces"}},
		{`x,`, []string{"x", ","}},
	}
	for _, tt := range tests {
		if got := tokenize(tt.in); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("tokenize(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestNeedsNormalize: white space to collapse is found before, between and
// after quoted strings, and not inside them.
func TestNeedsNormalize(t *testing.T) {
	for in, want := range map[string]bool{
		"meta l4proto tcp dnat to 10.1.2.3:80": false,
		"meta l4proto  tcp":                    true,
		"a\tb":                                 true,
		"a\rb":                                 true,
		"a\nb":                                 true,
		"log prefix \"a  b\tc\" drop":          false,
		"log  prefix \"a b\" drop":             true,
		"log prefix \"a\" \"b\"  drop":         true,
		"log prefix \"a\"  \"b\" drop":         true,
		"log prefix \"a\" \"b\" drop":          false,
		"a \"b\" c\td":                         true,
		"\"only  quoted\"":                     false,
		" lead":                                true,
		"trail ":                               true,
		"":                                     false,
	} {
		if got := needsNormalize(in); got != want {
			t.Errorf("needsNormalize(%q) = %v, want %v", in, got, want)
		}
		var tb textBlock
		if changes := tb.collapse(in) != in; changes != want {
			t.Errorf("collapse(%q) changes it: %v, needsNormalize says %v", in, changes, want)
		}
	}
}

func TestNFTNormalizeAndComment(t *testing.T) {
	for in, want := range map[string]string{
		"  counter packets 0 bytes 0 jump X": "counter packets 0 bytes 0 jump X",
		"meta l4proto tcp   counter":         "meta l4proto tcp counter",
		`log prefix "a  b"  drop`:            `log prefix "a  b" drop`,
		"already clean":                      "already clean",
		"tab\there\r":                        "tab here",
		"":                                   "",
	} {
		var tb textBlock
		if got := tb.normalized(in); got != want {
			t.Errorf("normalized(%q) = %q, want %q", in, got, want)
		}
	}
	type split struct {
		rule    string
		comment string
		has     bool
	}
	for in, want := range map[string]split{
		`goto x comment "short-circuit pod traffic"`: {"goto x", "short-circuit pod traffic", true},
		`comment "only"`:                 {"", "only", true},
		`log prefix "x"`:                 {`log prefix "x"`, "", false},
		`jump y`:                         {"jump y", "", false},
		`drop comment "with \"quotes\""`: {"drop", `with "quotes"`, true},
		`"`:                              {`"`, "", false},
	} {
		r, c := splitComment(in)
		got := split{rule: r, has: c != nil}
		if c != nil {
			got.comment = *c
		}
		if got != want {
			t.Errorf("splitComment(%q) = %+v, want %+v", in, got, want)
		}
	}
}

func FuzzAnalyzeNFTRule(f *testing.F) {
	for _, s := range []string{
		`meta mark set meta mark | 0x00004000`,
		`mark and 0x4000 != 0 mark set mark xor 0x4000 masquerade fully-random`,
		`meta l4proto tcp dnat ip to numgen random mod 2 map { 0 : 10.180.0.4 . 80, 1 : 10.180.0.5 . 80 }`,
		`numgen random mod 2 vmap { 0 : goto a, 1 : goto b }`,
		`dnat ip6 to [fd00::1]:80`,
		`meta random & 2147483647 < 107374182 jump KUBE-SEP-X`,
		`xt match "recent" XT target DNAT not found`,
		`mark set`, `dnat to`, `numgen random mod`, `vmap {`, `map { 0 :`, `}}}{{{`, `meta random &`,
	} {
		f.Add(s)
	}
	// every rule line of the test inputs
	for _, path := range seedFiles(f) {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if len(line) < 300 {
				f.Add(line)
			}
		}
	}
	f.Fuzz(func(t *testing.T, s string) {
		info := analyzeRule(s)
		if plain := analyzePlain(s); !reflect.DeepEqual(info, plain) {
			t.Fatalf("%q: the map bodies read ahead give %+v, the token path %+v", s, info, plain)
		}
		if d := readBodyBothWays(s); d != "" {
			t.Fatalf("%q: %s", s, d)
		}
		if info.Numgen < 0 {
			t.Fatalf("negative numgen %d", info.Numgen)
		}
		if len(info.NumgenTargets) > maxNumgenIndex {
			t.Fatalf("%d numgen targets", len(info.NumgenTargets))
		}
		for k, to := range info.NumgenTargets {
			if to != "" && !slices.Contains(info.DNAT, to) && !slices.Contains(info.Gotos, to) && !slices.Contains(info.Jumps, to) {
				t.Fatalf("numgen target %d %q is no DNAT destination, goto or jump of %+v", k, to, info)
			}
		}
		if info.Probability < 0 || math.IsNaN(info.Probability) {
			t.Fatalf("bad probability %v", info.Probability)
		}
		// normalising is idempotent, and text needsNormalize finds clean
		// is kept as it is (it may ask for needless work: a space after an
		// unclosed quote)
		var tb textBlock
		if n := tb.normalized(s); tb.normalized(n) != n {
			t.Fatalf("normalized(%q) = %q, which normalises further", s, n)
		}
		if !needsNormalize(s) && tb.collapse(s) != s {
			t.Fatalf("needsNormalize found %q clean, yet collapsing changes it", s)
		}
		_, _ = splitComment(s)
	})
}

// seedFiles lists the small nft test inputs.
func seedFiles(tb testing.TB) []string {
	var files []string
	for _, pat := range []string{"testdata/*.txt", "testdata/*.json", "testdata/*.knft", "testdata/*.nft"} {
		m, err := filepath.Glob(pat)
		if err != nil {
			tb.Fatal(err)
		}
		files = append(files, m...)
	}
	return files
}
