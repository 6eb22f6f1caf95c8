package nft

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/knftables"

	"github.com/proxyrules/kubectl-proxyrules/inspect"
)

func TestParseNFTJSONReal(t *testing.T) {
	rs := parseFile(t, "testdata/kp137.nft.json")
	d := rs.Dumps[0]
	if d.Format != inspect.FormatNFTJSON || d.Version != "1.0.6" || d.Tables != 6 || d.Rules != 99 || len(d.Warnings) != 0 {
		t.Errorf("dump %+v", d)
	}
	kp := rs.NFTTable(knftables.IPv6Family, "kube-proxy")
	r := kp.Chain("service-LAUZTJTB-ns4/svc4/tcp/p80").Rules[0]
	if r.Rule.Rule != "meta l4proto tcp dnat ip6 to numgen random mod 2 map { 0 : fd00:10:180::4 . 80, 1 : fd00:10:180::5 . 80 }" {
		t.Errorf("rendered %q", r.Rule.Rule)
	}
	if r.Handle == nil || r.Line != 0 || r.Family != knftables.IPv6Family || r.Table != "kube-proxy" {
		t.Errorf("rule %+v", r.Rule)
	}
	if got := r.Info.DNAT; len(got) != 2 || got[1] != "[fd00:10:180::5]:80" {
		t.Errorf("DNAT %q", got)
	}
	c := kp.Chain("filter-output-pre-dnat")
	if *c.Priority != "-110" || *c.Policy != "accept" || *c.Hook != "output" || c.Handle == nil {
		t.Errorf("base chain %+v", c.Chain)
	}
	m := kp.Map("no-endpoint-services")
	if m.Type != "ipv6_addr . inet_proto . inet_service : verdict" || len(m.Elements) != 3 || *m.Elements[0].Comment != "ns2/svc2:p80" {
		t.Errorf("map %+v", m)
	}
	aff := kp.Set("affinity-5HFFSBBM-ns5/svc5/tcp/p80__fd00.10.180..3/80")
	if aff == nil || aff.Timeout.Hours() != 3 || *aff.Size != 65535 {
		t.Errorf("affinity set %+v", aff)
	}
}

// renderRule renders one rule's "expr" list given as JSON.
func renderRule(t *testing.T, family, exprJSON string) string {
	t.Helper()
	var p jsonParser
	v, err := p.parse(exprJSON)
	if err != nil {
		t.Fatalf("%s: %v", exprJSON, err)
	}
	w := &renderer{family: family}
	return w.ruleText(v)
}

func TestNFTJSONRender(t *testing.T) {
	tests := []struct{ family, expr, want string }{
		// kube-proxy shapes (from real nft -j output)
		{"ip", `[{"match":{"op":"!=","left":{"&":[{"meta":{"key":"mark"}},16384]},"right":0}},{"mangle":{"key":{"meta":{"key":"mark"}},"value":{"^":[{"meta":{"key":"mark"}},16384]}}},{"masquerade":{"flags":"fully-random"}}]`,
			"meta mark & 0x00004000 != 0x00000000 meta mark set meta mark ^ 0x00004000 masquerade fully-random"},
		{"ip", `[{"match":{"op":"==","left":{"&":[{"meta":{"key":"mark"}},16384]},"right":0}},{"return":null}]`,
			"meta mark & 0x00004000 == 0x00000000 return"},
		{"ip", `[{"match":{"op":"==","left":{"meta":{"key":"l4proto"}},"right":"tcp"}},{"dnat":{"family":"ip","addr":{"map":{"key":{"numgen":{"mode":"random","mod":2,"offset":0}},"data":{"set":[[0,{"concat":["10.180.0.4",80]}],[1,{"concat":["10.180.0.5",80]}]]}}}}}]`,
			"meta l4proto tcp dnat ip to numgen random mod 2 map { 0 : 10.180.0.4 . 80, 1 : 10.180.0.5 . 80 }"},
		{"ip6", `[{"dnat":{"addr":"fd00::1","port":80}}]`, "dnat to [fd00::1]:80"},
		{"ip6", `[{"dnat":{"addr":"fd00::1"}}]`, "dnat to fd00::1"},
		{"ip", `[{"vmap":{"key":{"numgen":{"mode":"random","mod":2,"offset":0}},"data":{"set":[[0,{"goto":{"target":"a"}}],[1,{"jump":{"target":"b"}}]]}}}]`,
			"numgen random mod 2 vmap { 0 : goto a, 1 : jump b }"},
		{"ip", `[{"set":{"op":"update","elem":{"payload":{"protocol":"ip","field":"saddr"}},"set":"@affinity-x"}}]`, "update @affinity-x { ip saddr }"},
		{"ip", `[{"set":{"op":"add","elem":{"elem":{"val":{"payload":{"protocol":"ip","field":"saddr"}},"timeout":10800}},"set":"@s"}}]`, "add @s { ip saddr timeout 3h }"},
		{"ip", `[{"map":{"op":"update","elem":{"payload":{"protocol":"ip","field":"saddr"}},"data":1,"map":"@m"}}]`, "update @m { ip saddr : 1 }"},
		{"ip", `[{"match":{"op":"in","left":{"ct":{"key":"state"}},"right":"new"}},{"jump":{"target":"firewall-check"}}]`, "ct state new jump firewall-check"},
		{"ip", `[{"match":{"op":"==","left":{"ct":{"key":"state"}},"right":"established"}},{"accept":null}]`, "ct state == established accept"},
		{"ip", `[{"match":{"op":"==","left":{"fib":{"result":"type","flags":["daddr"]}},"right":"local"}},{"goto":{"target":"x"}}]`, "fib daddr type local goto x"},
		{"ip", `[{"match":{"op":"==","left":{"fib":{"result":"oif","flags":["saddr","iif"]}},"right":false}},{"drop":null}]`, "fib saddr . iif oif missing drop"},
		{"ip", `[{"match":{"op":"!=","left":{"payload":{"protocol":"ip","field":"saddr"}},"right":{"set":[{"prefix":{"addr":"203.0.113.0","len":25}},"192.0.2.1"]}}},{"drop":null}]`,
			"ip saddr != { 203.0.113.0/25, 192.0.2.1 } drop"},
		{"ip", `[{"match":{"op":"==","left":{"payload":{"protocol":"tcp","field":"dport"}},"right":{"range":[80,90]}}},{"accept":null}]`, "tcp dport 80-90 accept"},
		{"inet", `[{"match":{"op":"==","left":{"meta":{"key":"iifname"}},"right":"eth*"}},{"accept":null}]`, `iifname "eth*" accept`},
		{"inet", `[{"match":{"op":"!=","left":{"meta":{"key":"oifname"}},"right":{"set":["a","b"]}}},{"accept":null}]`, `oifname != { "a", "b" } accept`},
		{"ip", `[{"match":{"op":"==","left":{"meta":{"key":"mark"}},"right":16384}},{"accept":null}]`, "meta mark 0x00004000 accept"},
		{"ip", `[{"mangle":{"key":{"ct":{"key":"mark"}},"value":{"meta":{"key":"mark"}}}}]`, "ct mark set meta mark"},
		{"ip", `[{"match":{"op":"<","left":{"&":[{"meta":{"key":"random"}},2147483647]},"right":107374182}},{"counter":{"packets":0,"bytes":0}},{"jump":{"target":"KUBE-SEP-X"}}]`,
			"meta random & 2147483647 < 107374182 counter packets 0 bytes 0 jump KUBE-SEP-X"},
		{"ip", `[{"xt":{"type":"match","name":"recent"}},{"xt":{"type":"target","name":"DNAT"}}]`, "xt match recent xt target DNAT"},
		// verdicts, reject forms
		{"ip", `[{"reject":{"type":"icmp","expr":"port-unreachable"}}]`, "reject"},
		{"ip6", `[{"reject":{"type":"icmpv6","expr":"port-unreachable"}}]`, "reject"},
		{"inet", `[{"reject":{"type":"icmpx","expr":"admin-prohibited"}}]`, "reject with icmpx admin-prohibited"},
		{"ip", `[{"reject":{"type":"tcp reset"}}]`, "reject with tcp reset"},
		{"ip", `[{"reject":null}]`, "reject"},
		{"ip", `[{"continue":null},{"return":null}]`, "continue return"},
		// NAT variants
		{"ip", `[{"masquerade":null}]`, "masquerade"},
		{"ip", `[{"masquerade":{"port":{"range":[1024,2048]},"flags":["random","persistent"]}}]`, "masquerade to :1024-2048 random,persistent"},
		{"ip", `[{"redirect":{"port":8080}}]`, "redirect to :8080"},
		{"ip", `[{"snat":{"addr":"1.2.3.4"}}]`, "snat to 1.2.3.4"},
		{"inet", `[{"dnat":{"family":"ip","addr":"10.0.0.1","port":80,"flags":"persistent"}}]`, "dnat ip to 10.0.0.1:80 persistent"},
		{"ip", `[{"dnat":{"addr":{"map":{"key":{"concat":[{"payload":{"protocol":"ip","field":"daddr"}},{"payload":{"protocol":"tcp","field":"dport"}}]},"data":"@svc"}}}}]`,
			"dnat to ip daddr . tcp dport map @svc"},
		{"ip", `[{"tproxy":{"family":"ip","addr":"127.0.0.1","port":9000}}]`, "tproxy ip to 127.0.0.1:9000"},
		// other statements
		{"ip", `[{"counter":null},{"counter":"named"}]`, `counter counter name "named"`},
		{"ip", `[{"log":{"prefix":"x: ","level":"warn","group":2,"flags":["tcp sequence","ip options"]}}]`, `log prefix "x: " group 2 level warn flags tcp sequence,ip options`},
		{"ip", `[{"log":null}]`, "log"},
		{"ip", `[{"limit":{"rate":10,"burst":5,"per":"second"}},{"limit":{"rate":1,"rate_unit":"mbytes","per":"minute","burst":3,"burst_unit":"kbytes","inv":true}}]`,
			"limit rate 10/second limit rate over 1 mbytes/minute burst 3 kbytes"},
		{"ip", `[{"quota":{"val":10,"val_unit":"mbytes","inv":true,"used":1,"used_unit":"kbytes"}},{"quota":"q"}]`, `quota over 10 mbytes used 1 kbytes quota name "q"`},
		{"ip", `[{"notrack":null},{"queue":{"num":3,"flags":["bypass"]}}]`, "notrack queue flags bypass to 3"},
		{"ip", `[{"ct helper":"ftp"}]`, `ct helper set "ftp"`},
		{"ip", `[{"ct count":{"val":10,"inv":true}}]`, "ct count over 10"},
		{"netdev", `[{"dup":{"addr":"10.0.0.1","dev":"eth0"}},{"fwd":{"dev":"eth1"}}]`, `dup to 10.0.0.1 device "eth0" fwd to "eth1"`},
		{"inet", `[{"flow":{"op":"add","flowtable":"@ft"}}]`, "flow add @ft"},
		{"ip", `[{"meter":{"name":"m","key":{"payload":{"protocol":"ip","field":"saddr"}},"stmt":{"limit":{"rate":1,"per":"second"}}}}]`, "meter m { ip saddr limit rate 1/second }"},
		// other expressions
		{"ip", `[{"match":{"op":"==","left":{"payload":{"base":"nh","offset":96,"len":32}},"right":1}}]`, "@nh,96,32 1"},
		{"ip", `[{"match":{"op":"==","left":{"jhash":{"expr":{"payload":{"protocol":"ip","field":"saddr"}},"mod":2,"seed":3735928559,"offset":100}},"right":101}}]`,
			"jhash ip saddr mod 2 seed 0xdeadbeef offset 100 101"},
		{"ip", `[{"match":{"op":"==","left":{"symhash":{"mod":2}},"right":0}}]`, "symhash mod 2 0"},
		{"ip", `[{"match":{"op":"==","left":{"rt":{"key":"nexthop","family":"ip"}},"right":"10.0.0.1"}}]`, "rt ip nexthop 10.0.0.1"},
		{"ip", `[{"match":{"op":"==","left":{"socket":{"key":"transparent"}},"right":1}}]`, "socket transparent 1"},
		{"ip", `[{"match":{"op":"==","left":{"ct":{"key":"saddr","dir":"original","family":"ip"}},"right":"1.2.3.4"}}]`, "ct original ip saddr 1.2.3.4"},
		{"ip", `[{"match":{"op":"==","left":{"tcp option":{"name":"maxseg","field":"size"}},"right":1460}}]`, "tcp option maxseg size 1460"},
		{"ip", `[{"match":{"op":"==","left":{"&":[{"payload":{"protocol":"tcp","field":"flags"}},{"|":["fin","syn"]}]},"right":"syn"}}]`, "tcp flags & (fin | syn) == syn"},
		{"ip", `[{"match":{"op":"==","left":{"numgen":{"mode":"inc","mod":4,"offset":1}},"right":2}}]`, "numgen inc mod 4 offset 1 2"},
		// unknown and malformed input renders as a placeholder
		{"ip", `[{"frobnicate":{"x":1}}]`, "<unknown:frobnicate>"},
		{"ip", `[{"match":{"op":"==","left":{"frob":1},"right":1}}]`, "<unknown:frob> 1"},
		{"ip", `[42, "x", null, {"a":1,"b":2}]`, "<unknown:statement> <unknown:statement> <unknown:statement> <unknown:statement>"},
		{"ip", `[{"match":{"left":{"range":[1]},"right":[1,2]}}]`, "<unknown:range> { 1, 2 }"},
	}
	for _, tt := range tests {
		if got := renderRule(t, tt.family, tt.expr); got != tt.want {
			t.Errorf("%s\n got %q\nwant %q", tt.expr, got, tt.want)
		}
	}
}

func TestNFTJSONRenderDeepNesting(t *testing.T) {
	expr := strings.Repeat(`{"&":[`, 500) + "1" + strings.Repeat(`,2]}`, 500)
	got := renderRule(t, "ip", `[{"match":{"op":"==","left":`+expr+`,"right":1}}]`)
	if !strings.Contains(got, "<unknown:too-deep>") {
		t.Errorf("deep nesting not cut: %.100q", got)
	}
}

func TestParseNFTJSONErrors(t *testing.T) {
	good := readAll(t, "testdata/kp137.nft.json")
	tests := []struct {
		name      string
		in        string
		err       bool
		tables    int
		warnings  int
		wantError string
	}{
		{name: "empty", in: "", err: true},
		{name: "not JSON", in: "table ip x {\n}\n", err: true},
		{name: "array", in: "[]", err: true},
		{name: "no nftables key", in: `{"x": 1}`, err: true, warnings: 1},
		{name: "nftables not an array", in: `{"nftables": {}}`, err: true},
		{name: "empty ruleset", in: `{"nftables": [{"metainfo": {"version": "1.0.6", "json_schema_version": 1}}]}`},
		{name: "byte order mark", in: "\ufeff" + `{"nftables": [{"table": {"family": "ip", "name": "t"}}]}`, tables: 1},
		{name: "trailing garbage", in: `{"nftables": []} x`, err: true},
		{name: "empty array element", in: `{"nftables":[,`, err: true},
		{name: "missing value", in: `{"nftables": [{"table": {}}, ]}`, err: true, tables: 0, warnings: 1},
		{name: "missing member value", in: `{"x": , "nftables": []}`, err: true},
		{name: "extra key", in: `{"nftables": [], "other": [1,2]}`, warnings: 1},
		{name: "truncated", in: string(good[:len(good)/2]), err: true, tables: 2},
		{name: "type error is a warning", in: `{"nftables": [{"table": {"family": "ip", "name": "t", "handle": "x"}}, {"chain": {"family": "ip", "table": "t", "name": "c"}}]}`, tables: 1, warnings: 1},
		{name: "objects without names", in: `{"nftables": [{"table": {}}, {"chain": {"name": "c"}}, {"rule": {"chain": "c"}}, {"set": {}}, {"map": {}}, {"element": {"table": "t", "name": "s"}}]}`, tables: 1, warnings: 6},
		{name: "unknown objects", in: `{"nftables": [{"table": {"family": "ip", "name": "t"}}, {"flowtable": {"family": "ip", "table": "t", "name": "f"}}, {"counter": {"name": "c"}}, {"quota": {}}]}`, tables: 1},
		{name: "rule before its table and chain", in: `{"nftables": [{"rule": {"family": "ip6", "table": "t", "chain": "c", "expr": [{"accept": null}]}}]}`, tables: 1},
		{name: "element objects", in: `{"nftables": [{"set": {"family": "ip", "table": "t", "name": "s", "type": "ipv4_addr"}}, {"element": {"family": "ip", "table": "t", "name": "s", "elem": ["1.2.3.4", {"elem": {"val": "5.6.7.8", "comment": "c"}}]}}]}`, tables: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs, err := ParseJSON(strings.NewReader(tt.in), "t")
			if (err != nil) != tt.err {
				t.Fatalf("err = %v", err)
			}
			if rs == nil {
				t.Fatal("nil result")
			}
			d := rs.Dumps[0]
			if d.Tables != tt.tables || len(d.Warnings) != tt.warnings {
				t.Errorf("tables %d warnings %q; want %d, %d", d.Tables, d.Warnings, tt.tables, tt.warnings)
			}
		})
	}
}

func TestParseNFTJSONCRLF(t *testing.T) {
	// nft -j prints one line; a pretty-printed copy with CRLF line endings
	// (an editor on Windows) must read the same.
	raw := readAll(t, "testdata/kp137.nft.json")
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		t.Fatal(err)
	}
	crlf := bytes.ReplaceAll(buf.Bytes(), []byte("\n"), []byte("\r\n"))
	a, err := ParseJSON(bytes.NewReader(raw), "x")
	if err != nil {
		t.Fatal(err)
	}
	b, err := ParseJSON(bytes.NewReader(crlf), "x")
	if err != nil {
		t.Fatal(err)
	}
	sameContent(t, a, b)
}

func TestNFTJSONParser(t *testing.T) {
	good := map[string]string{
		`"a\"b\u00e9"`:               "s:a\"b\u00e9",
		`  -1.5e3 `:                  "#:-1.5e3",
		`{"a": [true, false, null]}`: "o:a",
		`[]`:                         "a:",
		`{}`:                         "o:",
		"{\"k\":\r\n\t{\"x\":1}}":    "o:k",
	}
	for in, want := range good {
		var p jsonParser
		v, err := p.parse(in)
		if err != nil {
			t.Errorf("%q: %v", in, err)
			continue
		}
		got := string(v.kind) + ":"
		switch v.kind {
		case 's', '#':
			got += v.str
		case 'o':
			for i := range int(v.n) {
				got += v.kid(i).key
			}
		}
		if got != want {
			t.Errorf("%q: got %q, want %q", in, got, want)
		}
	}
	for _, in := range []string{"", "{", `{"a":`, `{"a" 1}`, `"\u12"`, `[1,]`, `[1 2]`, `tru`, `{1:2}`, `"abc`, `[1]x`, `@`,
		strings.Repeat("[", jsonMaxDepth+1) + strings.Repeat("]", jsonMaxDepth+1)} {
		var p jsonParser
		if _, err := p.parse(in); err == nil {
			t.Errorf("%q: no error", in)
		}
	}
}

func TestNFTFormatSeconds(t *testing.T) {
	for in, want := range map[string]string{"10800": "3h", "0": "0s", "90061.5": "1d1h1m1s500ms", "x": "xs", "-1": "-1s"} {
		if got := formatSeconds(in); got != want {
			t.Errorf("formatSeconds(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzParseNFTJSON(f *testing.F) {
	for _, p := range seedFiles(f) {
		if !strings.HasSuffix(p, ".json") {
			continue
		}
		b := readAll(f, p)
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	for _, s := range []string{
		`{"nftables": [{"rule": {"family": "ip", "table": "t", "chain": "c", "expr": [{"match": {"left": {"&": [1]}, "right": {"set": [[1], [1, 2, 3]]}}}]}}]}`,
		`{"nftables": [{"map": {"family": "ip", "table": "t", "name": "m", "elem": [[1], 2, [{"elem": 1}, {"concat": 3}]]}}]}`,
		`{"nftables": [{"set": {"table": "t", "name": "s", "timeout": 1e300, "size": -1, "flags": 3, "type": [1, null]}}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// the tree parser on its own (ParseJSON only feeds it
		// well-formed JSON), and the renderer on whatever it returns
		var p jsonParser
		if v, err := p.parse(string(data)); err == nil {
			w := &renderer{family: "ip"}
			_ = w.ruleText(v)
			w.stmt(v)
		}
		rs, alone, err, errAlone := parseBothWays(data)
		if rs == nil {
			t.Fatalf("nil result (err %v)", err)
		}
		// batched on every core or one at a time: the same
		if fmt.Sprint(err) != fmt.Sprint(errAlone) || !reflect.DeepEqual(indexed(rs), indexed(alone)) {
			t.Fatalf("the readers disagree: %v / %v\n%+v\n%+v", err, errAlone, rs.Dumps, alone.Dumps)
		}
		if len(rs.Dumps) != 1 || rs.Dumps[0].Tables != len(rs.NFTables)+len(rs.IPTables) {
			t.Fatalf("bad dump %+v", rs.Dumps)
		}
	})
}

// TestNFTJSONTapeSizedAhead: a big object (a map of thousands of
// elements, commas in its strings too) is parsed onto a tape sized once,
// never grown, holding every value; small objects still reuse it.
func TestNFTJSONTapeSizedAhead(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"map": {"name": "a,b,c", "elem": [`)
	for i := range 5000 {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, `[{"concat": ["10.0.%d.%d", "tcp", %d]}, "goto service-%d,x"]`, i/256, i%256, i%65536, i)
	}
	b.WriteString(`]}}`)
	in := b.String()
	if len(in) < bigJSONObject {
		t.Fatalf("input of %d bytes is no big object", len(in))
	}
	var p jsonParser
	v, err := p.parse(in)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Count(in, ",") + strings.Count(in, "[") + strings.Count(in, "{") + 1
	if cap(p.tape) != want || int(v.span) != len(p.tape) || len(p.tape) != 4+5000*7 {
		t.Errorf("tape of %d values (span %d), capacity %d: want %d values and the capacity sized ahead, %d", len(p.tape), v.span, cap(p.tape), 4+5000*7, want)
	}
	if got := v.get("map").get("elem").kid(4999).kid(1).str; got != "goto service-4999,x" {
		t.Errorf("last element's verdict %q", got)
	}
	tape := &p.tape[:1][0]
	if _, err := p.parse(`{"rule": {}}`); err != nil || &p.tape[0] != tape {
		t.Errorf("a small object after it does not reuse the tape (%v)", err)
	}
}
