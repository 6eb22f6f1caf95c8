package nft

import (
	"strings"
	"testing"
)

// stmtShape is a statement in one line: its kind and parts, to compare.
func stmtShape(st Statement) string {
	switch st.Kind {
	case StmtMatch:
		return "match " + st.Left.String() + " " + st.Op + " " + st.Right.String()
	case StmtVerdict:
		return strings.TrimSpace("verdict " + st.Verdict + " " + st.Target)
	case StmtVmap:
		return "vmap " + st.Left.String() + " " + st.Right.String()
	case StmtNAT:
		s := "nat " + st.NAT
		if st.Family != "" {
			s += " " + st.Family
		}
		if st.AddrPort {
			s += " addr.port"
		}
		if st.To != nil {
			s += " to " + st.To.String()
		}
		if st.Port != nil {
			s += " port " + st.Port.String()
		}
		if len(st.Flags) > 0 {
			s += " " + strings.Join(st.Flags, ",")
		}
		return s
	case StmtSet:
		return "set " + st.Left.String() + " = " + st.Right.String()
	case StmtReject:
		return strings.TrimSpace("reject " + st.RejectWith)
	case StmtSetUpdate:
		return st.SetOp + " @" + st.SetName + " " + st.Key.String()
	case StmtNoOp:
		return "noop"
	case StmtXT:
		return "xt " + st.XT + " " + st.XTName
	case StmtNotrack:
		return "notrack"
	}
	return "unknown " + st.Text
}

func TestParseStatements(t *testing.T) {
	for _, tc := range []struct {
		rule string
		want []string
	}{
		// nft's listing of kube-proxy 1.37's rules
		{`ct state new jump firewall-check`, []string{"match ct state == new", "verdict jump firewall-check"}},
		{`ip daddr . meta l4proto . th dport vmap @service-ips`, []string{"vmap ip daddr . meta l4proto . th dport @service-ips"}},
		{`fib daddr type local ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap @service-nodeports`,
			[]string{"match fib daddr type == local", "match ip daddr != 127.0.0.0/8", "vmap meta l4proto . th dport @service-nodeports"}},
		{`ip daddr @cluster-ips ip saddr != 10.244.0.0/16 meta mark set meta mark | 0x00004000`,
			[]string{"match ip daddr == @cluster-ips", "match ip saddr != 10.244.0.0/16", "set meta mark = meta mark | 0x00004000"}},
		{`meta mark & 0x00004000 != 0x00000000 meta mark set meta mark ^ 0x00004000 masquerade fully-random`,
			[]string{"match meta mark & 0x00004000 != 0x00000000", "set meta mark = meta mark ^ 0x00004000", "nat masquerade fully-random"}},
		{`ct status dnat ip saddr . ip daddr . meta l4proto . th dport @hairpin-connections masquerade fully-random`,
			[]string{"match ct status == dnat", "match ip saddr . ip daddr . meta l4proto . th dport == @hairpin-connections", "nat masquerade fully-random"}},
		{`ip saddr != { 10.0.0.0/8, 198.51.100.10, 203.0.113.0/25 } drop`,
			[]string{"match ip saddr != { 10.0.0.0/8, 198.51.100.10, 203.0.113.0/25 }", "verdict drop"}},
		{`meta l4proto tcp dnat ip to numgen random mod 2 map { 0 : 10.244.0.51 . 8080, 1 : 10.244.1.51 . 8080 }`,
			[]string{"match meta l4proto == tcp", "nat dnat ip to numgen random mod 2 map { 0 : 10.244.0.51 . 8080, 1 : 10.244.1.51 . 8080 }"}},
		{`meta l4proto tcp dnat to 10.244.0.51:8080`, []string{"match meta l4proto == tcp", "nat dnat to 10.244.0.51 port 8080"}},
		{`meta l4proto tcp dnat ip6 to [fd00:10:244::1]:8080`, []string{"match meta l4proto == tcp", "nat dnat ip6 to fd00:10:244::1 port 8080"}},
		{`numgen random mod 2 vmap { 0 : goto endpoint-A, 1 : goto endpoint-B }`, []string{"vmap numgen random mod 2 { 0 : goto endpoint-A, 1 : goto endpoint-B }"}},
		{`update @affinity-X { ip saddr }`, []string{"update @affinity-X ip saddr"}},
		{`ip saddr @affinity-X goto endpoint-X`, []string{"match ip saddr == @affinity-X", "verdict goto endpoint-X"}},
		{`ip daddr @cluster-ips reject`, []string{"match ip daddr == @cluster-ips", "reject"}},
		// kube-proxy's own spelling (knftables dumps)
		{`mark set mark or 0x4000 comment "masquerade"`, []string{"set meta mark = meta mark | 0x4000", "noop"}},
		{`mark and 0x00004000 == 0 return`, []string{"match meta mark & 0x00004000 == 0", "verdict return"}},
		{`meta l4proto tcp dnat ip addr . port to numgen random mod 2 map { 0 : 10.0.0.1 . 53 , 1 : 10.0.0.2 . 53 }`,
			[]string{"match meta l4proto == tcp", "nat dnat ip addr.port to numgen random mod 2 map { 0 : 10.0.0.1 . 53, 1 : 10.0.0.2 . 53 }"}},
		// iptables-nft through nft
		{`meta l4proto tcp ip daddr 10.96.10.7 tcp dport 80 counter packets 0 bytes 0 jump KUBE-SVC-I5LIAMPLWKMBJ54B`,
			[]string{"match meta l4proto == tcp", "match ip daddr == 10.96.10.7", "match tcp dport == 80", "noop", "verdict jump KUBE-SVC-I5LIAMPLWKMBJ54B"}},
		{`meta random & 2147483647 < 1073741824 counter packets 0 bytes 0 jump KUBE-SEP-X`,
			[]string{"match meta random & 2147483647 < 1073741824", "noop", "verdict jump KUBE-SEP-X"}},
		{`meta l4proto tcp xt match recent counter packets 0 bytes 0 dnat to 10.244.0.81:8080`,
			[]string{"match meta l4proto == tcp", "xt match recent", "noop", "nat dnat to 10.244.0.81 port 8080"}},
		{`iifname "cali*" meta mark & 0x00004000 == 0x00004000 counter packets 0 bytes 0 accept`,
			[]string{"match meta iifname == cali*", "match meta mark & 0x00004000 == 0x00004000", "noop", "verdict accept"}},
		{`ct state established,related accept`, []string{"match ct state == established,related", "verdict accept"}},
		{`tcp flags & (fin|syn|rst|ack) == syn counter`, []string{"match tcp flags & fin|syn|rst|ack == syn", "noop"}},
		{`reject with icmp type host-unreachable`, []string{"reject icmp host-unreachable"}},
		{`reject with tcp reset`, []string{"reject tcp reset"}},
		{`redirect to :15001`, []string{"nat redirect port 15001"}},
		// not understood: an unknown statement, and on with the next
		{`limit rate 10/second accept`, []string{"unknown limit rate 10/second", "verdict accept"}},
		{`ether saddr aa:bb:cc:dd:ee:ff drop`, []string{"unknown ether saddr aa:bb:cc:dd:ee:ff", "verdict drop"}},
	} {
		var got []string
		for _, st := range ParseStatements(tc.rule) {
			got = append(got, stmtShape(st))
		}
		if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
			t.Errorf("%s:\n got %q\nwant %q", tc.rule, got, tc.want)
		}
	}
}

// FuzzParseStatements: any text gives statements whose texts are parts
// of it, in order, and never a panic.
func FuzzParseStatements(f *testing.F) {
	for _, s := range []string{`ip daddr . meta l4proto . th dport vmap @service-ips`, `meta l4proto tcp dnat ip to numgen random mod 2 map { 0 : 10.0.0.1 . 80, 1 : 10.0.0.2 . 80 }`,
		`ip saddr != { 10.0.0.0/8, 1.2.3.4 } drop`, `xt match "recent" counter packets 1 bytes 2 jump X`, `{ } , ( ) " :`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		rest := s
		for _, st := range ParseStatements(s) {
			i := strings.Index(rest, st.Text)
			if st.Text == "" || i < 0 {
				t.Fatalf("%q: statement %q is not a part of the rest %q", s, st.Text, rest)
			}
			rest = rest[i+len(st.Text):]
		}
	})
}
