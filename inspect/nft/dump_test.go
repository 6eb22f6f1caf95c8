package nft

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/knftables"

	"github.com/proxyrules/kubectl-proxyrules/inspect"
)

func TestParseKnftablesDumpReal(t *testing.T) {
	rs := parseFiles(t, "testdata/kp137-ipv4.knft", "testdata/kp137-ipv6.knft")
	if len(rs.NFTables) != 2 || len(rs.Dumps) != 2 {
		t.Fatalf("%d tables, %d dumps", len(rs.NFTables), len(rs.Dumps))
	}
	d := rs.Dumps[0]
	if d.Format != inspect.FormatKnftablesDump || d.Tables != 1 || d.Rules != 44 {
		t.Errorf("dump %+v", d)
	}
	// the "# svc1" comment lines of kube-proxy's expectations
	if len(d.Warnings) != 1 || !strings.HasPrefix(d.Warnings[0], "skipped 8 # comment line(s)") {
		t.Errorf("warnings %q", d.Warnings)
	}
	kp := rs.NFTTable(knftables.IPv4Family, "kube-proxy")
	if kp.Comment == nil || *kp.Comment != "rules for kube-proxy" || kp.Handle != nil {
		t.Errorf("table %+v", kp.Table)
	}
	// chains keep the order of their `add chain` lines
	if kp.Chains[0].Name != "cluster-ips-check" || kp.Chains[1].Name != "filter-prerouting-pre-dnat" {
		t.Errorf("chain order %q %q", kp.Chains[0].Name, kp.Chains[1].Name)
	}
	c := kp.Chain("nat-output")
	if !c.IsBase() || *c.Priority != "-100" || c.Handle != nil || c.Family != knftables.IPv4Family || c.Table != "kube-proxy" {
		t.Errorf("chain %+v", c.Chain)
	}
	r := kp.Chain("masquerading").Rules[0]
	if r.Rule.Rule != "mark and 0x4000 != 0 mark set mark xor 0x4000 masquerade fully-random" || r.Line != 40 || r.Handle != nil {
		t.Errorf("rule %+v line %d", r.Rule, r.Line)
	}
	if !r.Info.HasMarkTest || !r.Info.HasMarkSet || !r.Info.FullyRandom {
		t.Errorf("info %+v", r.Info)
	}
	// rules with a double quote outside their comment (ParseDump's regexp
	// cannot read them) are still there, in their chain
	lr := kp.Chain("localhost-nodeport-reject-tcp")
	if lr == nil || len(lr.Rules) != 1 || lr.Rules[0].Rule.Rule != `counter name "localhost-nodeport-rejected-tcp" reject` || lr.Rules[0].Line != 138 {
		t.Errorf("localhost-nodeport-reject-tcp %+v", lr)
	}
	r = kp.Chain("service-LAUZTJTB-ns4/svc4/tcp/p80").Rules[0]
	if !reflect.DeepEqual(r.Info.DNAT, []string{"10.180.0.4:80", "10.180.0.5:80"}) {
		t.Errorf("DNAT %q", r.Info.DNAT)
	}
	e := kp.Map("no-endpoint-nodeports").Elements[0]
	if !reflect.DeepEqual(e.Key, []string{"tcp", "3001"}) || !reflect.DeepEqual(e.Value, []string{"drop"}) || *e.Comment != "ns2/svc2:p80" ||
		e.Family != knftables.IPv4Family || e.Table != "kube-proxy" {
		t.Errorf("element %+v", e)
	}
	aff := kp.Set("affinity-GTK6MW7G-ns5/svc5/tcp/p80__10.180.0.3/80")
	if aff.Timeout.Hours() != 3 || !reflect.DeepEqual(aff.Flags, []knftables.SetFlag{"dynamic", "timeout"}) {
		t.Errorf("affinity %+v", aff.Set)
	}
	v6 := rs.NFTTable(knftables.IPv6Family, "kube-proxy")
	if r := v6.Chain("service-ULMVA6XW-ns1/svc1/tcp/p80").Rules[0]; !reflect.DeepEqual(r.Info.DNAT, []string{"[fd00:10:180::1]:80"}) {
		t.Errorf("IPv6 DNAT %q", r.Info.DNAT)
	}
}

func TestParseKnftablesDumpLines(t *testing.T) {
	in := `# ---- transaction (result: <nil>)
add table ip kube-proxy { comment "rules for kube-proxy" ; }
add table ip6 kube-proxy { comment "rules for kube-proxy" ; }
flush chain ip kube-proxy services
delete chain ip kube-proxy service-OLD
add rule ip kube-proxy services ip daddr . meta l4proto . th dport vmap @service-ips
add chain ip kube-proxy services
add map ip kube-proxy service-ips { type ipv4_addr . inet_proto . inet_service : verdict ; }
add element ip kube-proxy service-ips { 172.30.0.41 . tcp . 80 : goto service-X }
add chain ip kube-proxy service-X
add rule ip kube-proxy service-X meta l4proto tcp dnat to 10.180.0.1:80
add rule ip kube-proxy service-X jump no-such-chain
add rule ip kube-proxy service-X meta l4proto udp dnat to 10.180.0.2:53
add chain ip6 kube-proxy c6
add rule ip6 kube-proxy c6 iifname "eth0" accept comment "quoted"
add set ip6 kube-proxy ifs { type ifname ; }
add element ip6 kube-proxy ifs { "eth1" comment "x" }
add rule ip nat KUBE-X jump Y
add quota ip kube-proxy q { 10 mbytes }
add rule bogus t c accept
insert rule ip kube-proxy services drop
this is not a dump line
`
	rs, err := ParseKnftablesDump(strings.NewReader(in), "log")
	if err != nil {
		t.Fatal(err)
	}
	d := rs.Dumps[0]
	if d.Tables != 2 || d.Rules != 4 {
		t.Errorf("dump %+v", d)
	}
	wantWarn := []string{
		`line 12: knftables rejected it: no such chain "no-such-chain"`,
		`line 20: bad family or table`,
		`line 22: not knftables dump syntax`,
		`line 19: unsupported object "quota"`,
		`skipped 1 # comment line(s), the first at line 1`,
		`skipped 1 flush line(s), the first at line 4`,
		`skipped 1 delete line(s), the first at line 5`,
		`skipped 1 insert line(s), the first at line 21`,
		`1 line(s) for table ip nat skipped: no ` + "`add table ip nat`",
	}
	for _, w := range wantWarn {
		found := false
		for _, got := range d.Warnings {
			if strings.HasPrefix(got, w) {
				found = true
			}
		}
		if !found {
			t.Errorf("missing warning %q in %q", w, d.Warnings)
		}
	}
	if len(d.Warnings) != len(wantWarn) {
		t.Errorf("%d warnings, want %d: %q", len(d.Warnings), len(wantWarn), d.Warnings)
	}
	kp := rs.NFTTable(knftables.IPv4Family, "kube-proxy")
	// a rule written before its chain still lands in it; the bad rule is
	// dropped and the rest of the chain kept in order
	svcX := kp.Chain("service-X")
	if len(svcX.Rules) != 2 || svcX.Rules[1].Info.DNAT[0] != "10.180.0.2:53" {
		t.Errorf("service-X %+v", svcX.Rules)
	}
	if svcX.Rules[0].Line != 0 {
		t.Errorf("line numbers are unknown once a rule of the chain was rejected, got %d", svcX.Rules[0].Line)
	}
	if r := kp.Chain("services").Rules; len(r) != 1 || r[0].Line != 6 || r[0].Info.VMaps[0] != "service-ips" {
		t.Errorf("services %+v line %d", r[0].Rule, r[0].Line)
	}
	v6 := rs.NFTTable(knftables.IPv6Family, "kube-proxy")
	if r := v6.Chain("c6").Rules[0]; r.Rule.Rule != `iifname "eth0" accept` || *r.Comment != "quoted" {
		t.Errorf("quoted rule %+v", r.Rule)
	}
	if s := v6.Set("ifs"); s == nil || len(s.Elements) != 1 || s.Elements[0].Key[0] != "eth1" || *s.Elements[0].Comment != "x" {
		t.Errorf("quoted element %+v", s)
	}
}

// Elements go to knftables' Fake in batches; the result must be what one
// ParseDump of everything gives: keys replaced in place, order kept.
func TestParseKnftablesDumpManyElements(t *testing.T) {
	var b strings.Builder
	b.WriteString("add table ip kube-proxy\nadd chain ip kube-proxy c\nadd set ip kube-proxy s { type ipv4_addr ; }\n")
	b.WriteString("add map ip kube-proxy m { type ipv4_addr : verdict ; }\n")
	for i := 0; i < 1000; i++ {
		fmt.Fprintf(&b, "add element ip kube-proxy s { 10.0.%d.%d }\n", i/256, i%256)
		fmt.Fprintf(&b, "add element ip kube-proxy m { 10.0.%d.%d : goto c }\n", i/256, i%256)
	}
	b.WriteString("add element ip kube-proxy m { 10.0.0.1 comment \"again\" : drop }\n")
	b.WriteString("add element ip kube-proxy m { 10.9.9.9 : goto no-such-chain }\n")
	b.WriteString("add element ip kube-proxy s { 10.0.0.0 }\n")
	in := b.String()
	rs, err := ParseKnftablesDump(strings.NewReader(in), "x")
	if err != nil {
		t.Fatal(err)
	}
	if w := rs.Dumps[0].Warnings; len(w) != 1 || !strings.Contains(w[0], `no such chain "no-such-chain"`) {
		t.Errorf("warnings %q", w)
	}
	// the same lines through one ParseDump, minus the rejected one
	fake := knftables.NewFake(knftables.IPv4Family, "kube-proxy")
	if err := fake.ParseDump(strings.Replace(in, "add element ip kube-proxy m { 10.9.9.9 : goto no-such-chain }\n", "", 1)); err != nil {
		t.Fatal(err)
	}
	tb := rs.NFTables[0]
	for _, c := range []struct {
		got  []*knftables.Element
		want []*knftables.Element
	}{{tb.Set("s").Elements, fake.Table.Sets["s"].Elements}, {tb.Map("m").Elements, fake.Table.Maps["m"].Elements}} {
		if len(c.got) != len(c.want) {
			t.Fatalf("%d elements, want %d", len(c.got), len(c.want))
		}
		for i := range c.got {
			g, w := *c.got[i], *c.want[i]
			g.Family, g.Table = "", ""
			if !reflect.DeepEqual(g, w) {
				t.Fatalf("element %d: %+v, want %+v", i, g, w)
			}
		}
	}
	if e := tb.Map("m").Elements[1]; e.Key[0] != "10.0.0.1" || e.Value[0] != "drop" || *e.Comment != "again" {
		t.Errorf("replaced element %+v", e)
	}
}

func TestParseKnftablesDumpCRLF(t *testing.T) {
	lf := readAll(t, "testdata/kp137-ipv4.knft")
	a, err := ParseKnftablesDump(bytes.NewReader(lf), "x")
	if err != nil {
		t.Fatal(err)
	}
	b, err := ParseKnftablesDump(bytes.NewReader(bytes.ReplaceAll(lf, []byte("\n"), []byte("\r\n"))), "x")
	if err != nil {
		t.Fatal(err)
	}
	sameContent(t, a, b)
}

// A dump printed by knftables.Fake.Dump() reads back into the same objects.
func TestParseKnftablesDumpRoundTrip(t *testing.T) {
	// objects first: Fake checks references
	var sorted []string
	for _, kinds := range []string{"table", "chain set map", "rule", "element"} {
		for _, l := range strings.Split(string(readAll(t, "testdata/kp134-ipv4.knft")), "\n") {
			if f := strings.Fields(l); len(f) > 1 && f[0] == "add" && strings.Contains(" "+kinds+" ", " "+f[1]+" ") {
				sorted = append(sorted, l)
			}
		}
	}
	fake := knftables.NewFake(knftables.IPv4Family, "kube-proxy")
	if err := fake.ParseDump(strings.Join(sorted, "\n")); err != nil {
		t.Fatal(err)
	}
	dump := fake.Dump()
	rs, err := ParseKnftablesDump(strings.NewReader(dump), "fake")
	if err != nil {
		t.Fatal(err)
	}
	if len(rs.Dumps[0].Warnings) != 0 {
		t.Errorf("warnings %q", rs.Dumps[0].Warnings)
	}
	orig := parseFile(t, "testdata/kp134-ipv4.knft")
	a := viewOf(orig.NFTTable(knftables.IPv4Family, "kube-proxy"))
	b := viewOf(rs.NFTTable(knftables.IPv4Family, "kube-proxy"))
	if !reflect.DeepEqual(a, b) {
		t.Errorf("round trip differs:\n%+v\n%+v", a, b)
	}
}

func FuzzParseKnftablesDump(f *testing.F) {
	for _, p := range seedFiles(f) {
		if strings.HasSuffix(p, ".knft") {
			b := readAll(f, p)
			f.Add(b)
			f.Add(bytes.ReplaceAll(b, []byte("\n"), []byte("\r\n")))
			f.Add(b[:len(b)/2])
		}
	}
	f.Add([]byte("add table ip t\nadd rule ip t c \"\nadd element ip t s { \" }\nadd chain ip t c { type nat hook x priority y ; }\n"))
	f.Add([]byte("add table ip t\nadd rule ip t c index 99999999999999999999 accept\nadd rule ip t c handle 1 x\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rs, err := ParseKnftablesDump(bytes.NewReader(data), "fuzz")
		if rs == nil {
			t.Fatalf("nil result (err %v)", err)
		}
		if len(rs.Dumps) != 1 || rs.Dumps[0].Tables != len(rs.NFTables) || len(rs.IPTables) != 0 {
			t.Fatalf("bad dump %+v", rs.Dumps)
		}
	})
}
