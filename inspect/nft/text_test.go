package nft

import (
	"bytes"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/knftables"

	"github.com/proxyrules/kubectl-proxyrules/inspect"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

func TestParseNFTTextReal(t *testing.T) {
	rs := parseFile(t, "testdata/kp137.nft.txt")
	d := rs.Dumps[0]
	if d.Format != inspect.FormatNFTText || d.Tables != 6 || d.Rules != 99 || len(d.Warnings) != 0 || d.Backend != kubeproxy.BackendUnknown {
		t.Errorf("dump %+v", d)
	}
	if len(rs.IPTables) != 0 {
		t.Errorf("%d iptables tables", len(rs.IPTables))
	}
	var names []string
	for _, tb := range rs.NFTables {
		names = append(names, string(tb.Family)+" "+tb.Name)
		if tb.Source != "testdata/kp137.nft.txt" || tb.Format != inspect.FormatNFTText {
			t.Errorf("table %s: source %q format %q", tb.Name, tb.Source, tb.Format)
		}
	}
	// other CNIs' and firewalls' tables are kept as they are
	want := []string{"ip kube-proxy", "ip6 kube-proxy", "inet cilium_test", "inet firewalld", "ip filter", "netdev ingressfilter"}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("tables %q, want %q", names, want)
	}
	kp := rs.NFTTable(knftables.IPv4Family, "kube-proxy")
	if !kp.IsKubeProxy() || kp.Comment == nil || *kp.Comment != "rules for kube-proxy" {
		t.Errorf("table comment %v", kp.Comment)
	}
	c := kp.Chain("filter-prerouting-pre-dnat")
	if !c.IsBase() || *c.Type != "filter" || *c.Hook != "prerouting" || *c.Priority != "-110" || *c.Policy != "accept" {
		t.Errorf("base chain %+v", c.Chain)
	}
	if c.Family != knftables.IPv4Family || c.Table != "kube-proxy" {
		t.Errorf("chain family/table %q %q", c.Family, c.Table)
	}
	if p := *kp.Chain("nat-postrouting").Priority; p != "100" {
		t.Errorf("srcnat priority %q", p)
	}
	if rc := kp.Chain("reject-chain"); rc.Comment == nil || *rc.Comment != "helper for @no-endpoint-services / @no-endpoint-nodeports" || len(rc.Rules) != 1 {
		t.Errorf("reject-chain %+v", rc)
	}
	r := kp.Chain("services").Rules[0]
	if r.Comment == nil || *r.Comment != "masquerade clusterIP traffic from outside cluster" ||
		r.Rule.Rule != "ip daddr @cluster-ips ip saddr != 10.0.0.0/8 meta mark set meta mark | 0x00004000" ||
		r.Chain != "services" || r.Family != knftables.IPv4Family || r.Table != "kube-proxy" || r.Line == 0 || r.Handle != nil {
		t.Errorf("services rule %+v", r)
	}
	if !r.Info.HasMarkSet || r.Info.MarkSetValue != 0x4000 {
		t.Errorf("rule info %+v", r.Info)
	}
	aff := kp.Set("affinity-GTK6MW7G-ns5/svc5/tcp/p80__10.180.0.3/80")
	if aff == nil || aff.Timeout == nil || aff.Timeout.Hours() != 3 || *aff.Size != 65535 ||
		!reflect.DeepEqual(aff.Flags, []knftables.SetFlag{"dynamic", "timeout"}) || aff.Type != "ipv4_addr" {
		t.Errorf("affinity set %+v", aff)
	}
	nes := kp.Map("no-endpoint-services")
	if nes.Type != "ipv4_addr . inet_proto . inet_service : verdict" || len(nes.Elements) != 3 {
		t.Fatalf("no-endpoint-services %+v", nes.Map)
	}
	e := nes.Elements[2]
	if !reflect.DeepEqual(e.Key, []string{"172.30.0.46", "tcp", "80"}) || !reflect.DeepEqual(e.Value, []string{"goto reject-chain"}) ||
		e.Comment == nil || *e.Comment != "ns6/svc6:p80" || e.Map != "no-endpoint-services" || e.Set != "" {
		t.Errorf("element %+v", e)
	}
	hp := kp.Set("hairpin-connections")
	if len(hp.Elements) != 3 || !reflect.DeepEqual(hp.Elements[0].Key, []string{"10.180.0.1", "10.180.0.1", "tcp", "80"}) || hp.Elements[0].Value != nil {
		t.Errorf("hairpin set %+v", hp.Elements)
	}
	fw := rs.NFTTable(knftables.InetFamily, "firewalld")
	in := fw.Chain("filter_INPUT")
	if *in.Priority != "10" || len(in.Rules) != 7 || in.Rules[1].Rule.Rule != `iifname "lo" accept` {
		t.Errorf("firewalld chain %+v", in)
	}
	if s := fw.Set("allowed"); len(s.Elements) != 2 || s.Elements[1].Key[0] != "192.168.0.0/16" {
		t.Errorf("interval set %+v", s.Elements)
	}
	nd := rs.NFTTable(knftables.NetDevFamily, "ingressfilter").Chain("ingress")
	if nd.Device == nil || *nd.Device != "lo" || *nd.Priority != "-500" {
		t.Errorf("netdev chain %+v", nd.Chain)
	}
}

func TestParseNFTTextHandles(t *testing.T) {
	rs := parseFile(t, "testdata/kp137-handles.nft.txt")
	kp := rs.NFTTable(knftables.IPv4Family, "kube-proxy")
	if kp == nil || kp.Handle == nil || *kp.Handle != 1 {
		t.Fatalf("table handle %+v", kp)
	}
	n := 0
	for _, c := range kp.Chains {
		if c.Handle == nil {
			t.Errorf("chain %s has no handle", c.Name)
		}
		for _, r := range c.Rules {
			if r.Handle == nil || *r.Handle == 0 {
				t.Errorf("rule %q has no handle", r.Rule.Rule)
			}
			n++
		}
	}
	if n == 0 || kp.Set("cluster-ips").Handle == nil {
		t.Errorf("%d rules; set handle %v", n, kp.Set("cluster-ips").Handle)
	}
	// the same rules as without -a
	plain := parseFile(t, "testdata/kp137.nft.txt")
	a, b := viewOf(kp), viewOf(plain.NFTTable(knftables.IPv4Family, "kube-proxy"))
	if !reflect.DeepEqual(a, b) {
		t.Errorf("-a listing differs from plain listing")
	}
}

// stripVolatile clears what legitimately differs between two reads of the
// same content (line numbers).
func stripLines(rs *inspect.Ruleset) {
	for _, tb := range rs.NFTables {
		for _, c := range tb.Chains {
			for _, r := range c.Rules {
				r.Line = 0
			}
		}
	}
	for _, it := range rs.IPTables {
		for _, c := range it.Chains {
			for _, r := range c.Rules {
				r.Line = 0
			}
		}
	}
}

// sameContent compares two results table by table, ignoring the lazily
// built name indexes.
func sameContent(t *testing.T, a, b *inspect.Ruleset) {
	t.Helper()
	if !reflect.DeepEqual(a.Dumps, b.Dumps) {
		t.Errorf("dumps differ:\n%+v\n%+v", a.Dumps, b.Dumps)
	}
	if len(a.NFTables) != len(b.NFTables) || len(a.IPTables) != len(b.IPTables) {
		t.Fatalf("table counts differ")
	}
	for i := range a.NFTables {
		x, y := a.NFTables[i], b.NFTables[i]
		if !reflect.DeepEqual(x.Table, y.Table) || !reflect.DeepEqual(x.Chains, y.Chains) ||
			!reflect.DeepEqual(x.Sets, y.Sets) || !reflect.DeepEqual(x.Maps, y.Maps) {
			t.Errorf("table %s %s differs", x.Family, x.Name)
		}
	}
	for i := range a.IPTables {
		x, y := a.IPTables[i], b.IPTables[i]
		if !reflect.DeepEqual(x.Chains, y.Chains) {
			t.Errorf("iptables table %s %s differs", x.Family, x.Name)
		}
	}
}

// `nft list table ip6 kube-proxy` reads as the same table of `nft list
// ruleset`.
func TestParseNFTTextOneTable(t *testing.T) {
	one := parseFile(t, "testdata/kp137-ipv6-table.nft.txt")
	all := parseFile(t, "testdata/kp137.nft.txt")
	if len(one.NFTables) != 1 {
		t.Fatalf("%d tables", len(one.NFTables))
	}
	a := viewOf(one.NFTables[0])
	b := viewOf(all.NFTTable(knftables.IPv6Family, "kube-proxy"))
	if !reflect.DeepEqual(a, b) || len(a.DNAT) == 0 {
		t.Errorf("single-table listing differs")
	}
}

func TestParseNFTTextCRLF(t *testing.T) {
	for _, f := range []string{"kp137.nft.txt", "iptables-nft.nft.txt", "kp137-handles.nft.txt"} {
		t.Run(f, func(t *testing.T) {
			lf := readAll(t, "testdata/"+f)
			crlf := bytes.ReplaceAll(lf, []byte("\n"), []byte("\r\n"))
			a, err := ParseText(bytes.NewReader(lf), "x")
			if err != nil {
				t.Fatal(err)
			}
			b, err := ParseText(bytes.NewReader(crlf), "x")
			if err != nil {
				t.Fatal(err)
			}
			sameContent(t, a, b)
		})
	}
}

func TestParseNFTTextEdgeCases(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		tables   int
		rules    int
		warnings int
		err      bool
		check    func(t *testing.T, rs *inspect.Ruleset)
	}{
		{name: "empty", in: ""},
		{name: "empty table", in: "table ip x {\n}\n", tables: 1},
		{name: "byte order mark", in: "\ufefftable ip x {\n}\n", tables: 1},
		{name: "one-line table", in: "table ip x { }\n", tables: 1},
		{name: "table without family", in: "table x {\n chain c {\n accept\n }\n}\n", tables: 1, rules: 1,
			check: func(t *testing.T, rs *inspect.Ruleset) {
				if rs.NFTTable(knftables.IPv4Family, "x") == nil {
					t.Error("family should default to ip")
				}
			}},
		{name: "nft list chain output", in: "table ip kube-proxy {\n\tchain services {\n\t\tip daddr . meta l4proto . th dport vmap @service-ips\n\t}\n}\n", tables: 1, rules: 1},
		{name: "truncated", in: "table ip x {\n chain c {\n jump d\n", tables: 1, rules: 1, warnings: 1},
		{name: "garbage lines", in: "hello\ntable ip x {\n what is this\n chain c {\n accept\n }\n}\n}\n", tables: 1, rules: 1, warnings: 3},
		{name: "binary", in: "table ip x {\n\x00\x01\n}\n", tables: 1, warnings: 1, err: true},
		{name: "rule continued on the next line", in: "table ip x {\n chain c {\n ip daddr { 1.2.3.4,\n 5.6.7.8 } drop\n }\n}\n", tables: 1, rules: 1,
			check: func(t *testing.T, rs *inspect.Ruleset) {
				r := rs.NFTables[0].Chains[0].Rules[0]
				if r.Rule.Rule != "ip daddr { 1.2.3.4, 5.6.7.8 } drop" || r.Info.Verdict != "drop" {
					t.Errorf("rule %q", r.Rule.Rule)
				}
			}},
		{name: "unmodelled objects are skipped", in: "table inet f {\n\tflowtable ft {\n\t\thook ingress priority filter\n\t\tdevices = { lo }\n\t}\n\tct helper ftp {\n\t\ttype \"ftp\" protocol tcp\n\t}\n\tquota q {\n\t\t10 mbytes\n\t}\n\tchain c {\n\t\tflow add @ft\n\t}\n}\n", tables: 1, rules: 1},
		{name: "set with element attributes", in: "table ip x {\n set s {\n type ipv4_addr\n flags dynamic,timeout\n timeout 1d2h3m4s5ms\n elements = { 10.0.0.1 timeout 3h expires 2h59m58s counter packets 1 bytes 2 comment \"a, b\", 10.0.0.2 }\n }\n}\n", tables: 1,
			check: func(t *testing.T, rs *inspect.Ruleset) {
				s := rs.NFTables[0].Sets[0]
				if len(s.Elements) != 2 || s.Elements[0].Key[0] != "10.0.0.1" || *s.Elements[0].Comment != "a, b" || s.Elements[1].Key[0] != "10.0.0.2" {
					t.Errorf("elements %+v", s.Elements)
				}
				if s.Timeout.String() != "26h3m4.005s" {
					t.Errorf("timeout %v", s.Timeout)
				}
			}},
		{name: "iptables-legacy warning", in: "# Warning: iptables-legacy tables present, use iptables-legacy to see them\ntable ip x {\n}\n", tables: 1, warnings: 1},
		{name: "quoted chain name", in: "table ip x {\n chain \"a b\" {\n accept\n }\n}\n", tables: 1, rules: 1,
			check: func(t *testing.T, rs *inspect.Ruleset) {
				if rs.NFTables[0].Chain("a b") == nil {
					t.Error("quoted chain name")
				}
			}},
		{name: "comment containing a hash", in: "table ip x {\n chain c {\n accept comment \"# not a comment\" # handle 4\n }\n}\n", tables: 1, rules: 1,
			check: func(t *testing.T, rs *inspect.Ruleset) {
				r := rs.NFTables[0].Chains[0].Rules[0]
				if *r.Comment != "# not a comment" || *r.Handle != 4 {
					t.Errorf("rule %+v", r.Rule)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs, err := ParseText(strings.NewReader(tt.in), "t")
			if (err != nil) != tt.err {
				t.Fatalf("err %v", err)
			}
			d := rs.Dumps[0]
			if d.Tables != tt.tables || d.Rules != tt.rules || len(d.Warnings) != tt.warnings {
				t.Errorf("tables %d rules %d warnings %q; want %d %d %d", d.Tables, d.Rules, d.Warnings, tt.tables, tt.rules, tt.warnings)
			}
			if tt.check != nil {
				tt.check(t, rs)
			}
		})
	}
}

func TestParseNFTTextTruncatedEverywhere(t *testing.T) {
	data := readAll(t, "testdata/kp137.nft.txt")
	for n := 0; n < len(data); n += 97 {
		rs, err := ParseText(bytes.NewReader(data[:n]), "t")
		if err != nil || rs == nil || len(rs.Dumps) != 1 {
			t.Fatalf("cut at %d: %v", n, err)
		}
	}
}

func TestParseNFTTextHugeLine(t *testing.T) {
	var b strings.Builder
	b.WriteString("table ip x {\n chain c {\n ip daddr { ")
	for i := 0; i < 200000; i++ {
		fmt.Fprintf(&b, "10.%d.%d.%d, ", i>>16&255, i>>8&255, i&255)
	}
	b.WriteString("10.255.255.255 } drop\n }\n}\n")
	rs, err := ParseText(strings.NewReader(b.String()), "t")
	if err != nil {
		t.Fatal(err)
	}
	if rs.Dumps[0].Rules != 1 || rs.NFTables[0].Chains[0].Rules[0].Info.Verdict != "drop" {
		t.Errorf("huge rule not read")
	}
}

type errReader struct{ n int }

func (r *errReader) Read(p []byte) (int, error) {
	if r.n <= 0 {
		return 0, io.ErrUnexpectedEOF
	}
	s := "table ip x {\n chain c {\n accept\n"
	n := copy(p, s)
	r.n--
	return n, nil
}

func TestParseNFTTextReadError(t *testing.T) {
	rs, err := ParseText(&errReader{n: 1}, "t")
	if err == nil || rs == nil || rs.Dumps[0].Tables != 1 {
		t.Errorf("err %v rs %+v", err, rs)
	}
}

func FuzzParseNFTText(f *testing.F) {
	for _, p := range seedFiles(f) {
		if strings.HasSuffix(p, ".json") {
			continue
		}
		b := readAll(f, p)
		f.Add(b)
		f.Add(bytes.ReplaceAll(b, []byte("\n"), []byte("\r\n")))
		if len(b) > 100 {
			f.Add(b[:len(b)/3])
		}
	}
	f.Add([]byte("table ip x {\n chain c {\n ip daddr { 1,\n"))
	f.Add([]byte("}}}}\n{{{{\ntable\ntable ip\ntable ip x\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rs, err := ParseText(bytes.NewReader(data), "fuzz")
		if rs == nil {
			t.Fatalf("nil result (err %v)", err)
		}
		if len(rs.Dumps) != 1 || rs.Dumps[0].Tables != len(rs.NFTables)+len(rs.IPTables) {
			t.Fatalf("bad dump %+v", rs.Dumps)
		}
		// read in segments (whatever its size), when the checks let it,
		// it is what the one-piece reader reads
		if seg, ok := parseTextSegments(string(data), "fuzz"); ok {
			whole, err := parseText(&lineReader{block: string(data), eof: true}, "fuzz")
			if err != nil || !reflect.DeepEqual(indexed(seg), indexed(whole)) {
				t.Fatalf("the readers disagree (%v):\n%+v\n%+v", err, seg.Dumps, whole.Dumps)
			}
		}
	})
}

// A chain listed again: a `comment` line opening the second listing is the
// chain's comment only while the chain has no rules yet, as when it is
// listed once.
func TestParseNFTTextChainListedAgain(t *testing.T) {
	in := `table ip t {
	chain empty {
	}
	chain full {
		drop
	}
	chain other {
		accept
	}
	chain empty {
		comment "first words"
		accept
	}
	chain full {
		comment "too late"
	}
}
`
	rs, err := ParseText(strings.NewReader(in), "in")
	if err != nil {
		t.Fatal(err)
	}
	tb := rs.NFTables[0]
	if len(tb.Chains) != 3 {
		t.Fatalf("%d chains, want 3", len(tb.Chains))
	}
	empty, full := tb.Chain("empty"), tb.Chain("full")
	if empty.Comment == nil || *empty.Comment != "first words" || len(empty.Rules) != 1 {
		t.Errorf("empty: comment %v, %d rules; want its comment and one rule", empty.Comment, len(empty.Rules))
	}
	if full.Comment != nil || len(full.Rules) != 2 || full.Rules[1].Comment == nil || *full.Rules[1].Comment != "too late" {
		t.Errorf("full: comment %v, rules %d; want no chain comment and the comment line as its second rule", full.Comment, len(full.Rules))
	}
}

// A chain's rules keep their order when they are more than a block of the
// rule store holds, and when the chain is listed again after another
// (then its rules come in several runs), in nftables tables and in
// iptables-nft's.
func TestParseNFTTextLongChainsKeepOrder(t *testing.T) {
	n := 3*maxRuleBlock + 5
	for _, table := range []string{"ip kube-proxy", "ip nat"} {
		var b strings.Builder
		fmt.Fprintf(&b, "table %s {\n\tchain KUBE-LONG {\n", table)
		for i := range n {
			fmt.Fprintf(&b, "\t\tip daddr 10.0.%d.%d counter packets 0 bytes 0 jump KUBE-SEP-%d\n", i/256, i%256, i)
		}
		fmt.Fprintf(&b, "\t}\n\tchain KUBE-OTHER {\n\t\tcounter packets 0 bytes 0 accept\n\t}\n\tchain KUBE-LONG {\n")
		for i := n; i < n+10; i++ {
			fmt.Fprintf(&b, "\t\tip daddr 10.0.%d.%d counter packets 0 bytes 0 jump KUBE-SEP-%d\n", i/256, i%256, i)
		}
		b.WriteString("\t}\n}\n")
		rs, err := ParseText(strings.NewReader(b.String()), "in")
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		switch {
		case len(rs.NFTables) == 1:
			for _, r := range rs.NFTables[0].Chain("KUBE-LONG").Rules {
				got = append(got, r.Info.Jumps[0])
			}
		case len(rs.IPTables) == 1:
			for _, r := range rs.IPTables[0].Chain("KUBE-LONG").Rules {
				got = append(got, r.Target)
			}
		default:
			t.Fatalf("%s: %d nft tables, %d iptables tables", table, len(rs.NFTables), len(rs.IPTables))
		}
		if len(got) != n+10 {
			t.Fatalf("%s: %d rules, want %d", table, len(got), n+10)
		}
		for i, j := range got {
			if want := fmt.Sprintf("KUBE-SEP-%d", i); j != want {
				t.Fatalf("%s: rule %d jumps to %s, want %s", table, i, j, want)
			}
		}
	}
}
