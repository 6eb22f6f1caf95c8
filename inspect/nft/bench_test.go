package nft

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"

	"sigs.k8s.io/knftables"

	"github.com/proxyrules/kubectl-proxyrules/inspect"
	"github.com/proxyrules/kubectl-proxyrules/internal/benchutil"
)

// Generators of large kube-proxy-shaped rulesets, in the text and JSON forms
// nft 1.0.6 lists them, for the benchmarks and the scale tests.

type genShape string

const (
	// shape137: kube-proxy 1.37 nftables mode: one dnat numgen map per
	// service chain, no endpoint chains.
	shape137 genShape = "v1.37"
	// shape135: kube-proxy ≤1.35 nftables mode: a numgen vmap per service
	// and a chain per endpoint.
	shape135 genShape = "v1.35"
	// shapeIPTablesNFT: kube-proxy's iptables mode on an iptables-nft
	// node, seen through nft (statistic → meta random, no comments).
	shapeIPTablesNFT genShape = "iptables-nft"
)

func genNames(i, j int) (svc, ep, ip string) {
	svc = fmt.Sprintf("service-%08X-ns%d/svc-%d/tcp/http", uint32(i*2654435761), i%50, i)
	ip = fmt.Sprintf("10.%d.%d.%d", 64+j/64, i/256%256, i%256)
	ep = fmt.Sprintf("endpoint-%08X-ns%d/svc-%d/tcp/http__%s/8080", uint32((i*31+j)*2654435761), i%50, i, ip)
	return
}

func genClusterIP(i int) string { return fmt.Sprintf("172.30.%d.%d", i/256%256, i%256) }

func genIPTNames(i, j int) (svc, sep, ip string) {
	svc = fmt.Sprintf("KUBE-SVC-%016X", uint64(i)*0x9E3779B97F4A7C15)
	sep = fmt.Sprintf("KUBE-SEP-%016X", uint64(i*64+j)*0x9E3779B97F4A7C15)
	_, _, ip = genNames(i, j)
	return
}

// genText writes `nft list ruleset` text for nsvc services of neps
// endpoints each.
func genText(w io.Writer, shape genShape, nsvc, neps int) {
	bw := bufio.NewWriter(w)
	defer bw.Flush()
	p := func(format string, args ...any) { fmt.Fprintf(bw, format, args...) }
	if shape == shapeIPTablesNFT {
		p("# Warning: table ip nat is managed by iptables-nft, do not touch!\ntable ip nat {\n")
		p("\tchain PREROUTING {\n\t\ttype nat hook prerouting priority dstnat; policy accept;\n\t\t counter packets 0 bytes 0 jump KUBE-SERVICES\n\t}\n\n")
		p("\tchain KUBE-MARK-MASQ {\n\t\tcounter packets 0 bytes 0 meta mark set mark or 0x4000\n\t}\n\n")
		p("\tchain KUBE-SERVICES {\n")
		for i := 0; i < nsvc; i++ {
			svc, _, _ := genIPTNames(i, 0)
			p("\t\tmeta l4proto tcp ip daddr %s  tcp dport 80 counter packets 0 bytes 0 jump %s\n", genClusterIP(i), svc)
		}
		p("\t}\n")
		for i := 0; i < nsvc; i++ {
			svc, _, _ := genIPTNames(i, 0)
			p("\n\tchain %s {\n", svc)
			p("\t\tmeta l4proto tcp ip saddr != 10.0.0.0/8 ip daddr %s  tcp dport 80 counter packets 0 bytes 0 jump KUBE-MARK-MASQ\n", genClusterIP(i))
			for j := 0; j < neps; j++ {
				_, sep, _ := genIPTNames(i, j)
				if j < neps-1 {
					p("\t\t meta random & 2147483647 < %d counter packets 0 bytes 0 jump %s\n", uint32(float64(1<<31)/float64(neps-j)), sep)
				} else {
					p("\t\t counter packets 0 bytes 0 jump %s\n", sep)
				}
			}
			p("\t}\n")
			for j := 0; j < neps; j++ {
				_, sep, ip := genIPTNames(i, j)
				p("\n\tchain %s {\n\t\tip saddr %s  counter packets 0 bytes 0 jump KUBE-MARK-MASQ\n\t\tmeta l4proto tcp   counter packets 0 bytes 0 dnat to %s:8080\n\t}\n", sep, ip, ip)
			}
		}
		p("}\n")
		return
	}
	p("table ip kube-proxy {\n\tcomment \"rules for kube-proxy\"\n\tset cluster-ips {\n\t\ttype ipv4_addr\n\t\tcomment \"Active ClusterIPs\"\n\t\telements = { ")
	for i := 0; i < nsvc; i++ {
		if i > 0 {
			p(",\n\t\t\t     ")
		}
		p("%s", genClusterIP(i))
	}
	p(" }\n\t}\n\n\tmap service-ips {\n\t\ttype ipv4_addr . inet_proto . inet_service : verdict\n\t\tcomment \"ClusterIP, ExternalIP and LoadBalancer IP traffic\"\n\t\telements = { ")
	for i := 0; i < nsvc; i++ {
		svc, _, _ := genNames(i, 0)
		if i > 0 {
			p(",\n\t\t\t     ")
		}
		p("%s . tcp . 80 : goto %s", genClusterIP(i), svc)
	}
	p(" }\n\t}\n\n\tchain nat-prerouting {\n\t\ttype nat hook prerouting priority dstnat; policy accept;\n\t\tjump services\n\t}\n\n")
	p("\tchain services {\n\t\tip daddr . meta l4proto . th dport vmap @service-ips\n\t}\n\n")
	if shape == shape135 {
		p("\tchain mark-for-masquerade {\n\t\tmeta mark set meta mark | 0x00004000\n\t}\n")
	}
	for i := 0; i < nsvc; i++ {
		svc, _, _ := genNames(i, 0)
		p("\n\tchain %s {\n", svc)
		switch shape {
		case shape137:
			p("\t\tmeta l4proto tcp dnat ip to numgen random mod %d map { ", neps)
			for j := 0; j < neps; j++ {
				_, _, ip := genNames(i, j)
				if j > 0 {
					p(", ")
				}
				p("%d : %s . 8080", j, ip)
			}
			p(" }\n\t}\n")
		case shape135:
			p("\t\tip daddr %s ip saddr != 10.0.0.0/8 jump mark-for-masquerade\n", genClusterIP(i))
			p("\t\tnumgen random mod %d vmap { ", neps)
			for j := 0; j < neps; j++ {
				_, ep, _ := genNames(i, j)
				if j > 0 {
					p(", ")
				}
				p("%d : goto %s", j, ep)
			}
			p(" }\n\t}\n")
			for j := 0; j < neps; j++ {
				_, ep, ip := genNames(i, j)
				p("\n\tchain %s {\n\t\tip saddr %s jump mark-for-masquerade\n\t\tmeta l4proto tcp dnat to %s:8080\n\t}\n", ep, ip, ip)
			}
		}
	}
	p("}\n")
}

// genJSON writes the `nft -j list ruleset` form of the same ruleset.
func genJSON(w io.Writer, shape genShape, nsvc, neps int) {
	g := &jsonGen{bw: bufio.NewWriter(w), first: true, handle: 1}
	defer g.bw.Flush()
	g.bw.WriteString(`{"nftables": [`)
	g.obj(jm{"metainfo": jm{"version": "1.0.6", "release_name": "Lester Gooch #5", "json_schema_version": 1}})
	if shape == shapeIPTablesNFT {
		g.iptablesNFT(nsvc, neps)
	} else {
		g.kubeProxy(shape, nsvc, neps)
	}
	g.bw.WriteString("]}\n")
}

// jsonGen writes the objects of an "nftables" array, numbering handles.
type jsonGen struct {
	bw     *bufio.Writer
	first  bool
	handle int
}

type (
	jm = map[string]any
	jl = []any
)

// obj writes v as the array's next object.
func (g *jsonGen) obj(v any) {
	if !g.first {
		g.bw.WriteString(", ")
	}
	g.first = false
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	g.bw.Write(b)
}

// h is the next handle.
func (g *jsonGen) h() int { g.handle++; return g.handle }

func jPayload(proto, field string) jm { return jm{"payload": jm{"protocol": proto, "field": field}} }
func jMatch(op string, left, right any) jm {
	return jm{"match": jm{"op": op, "left": left, "right": right}}
}

var jCounter = jm{"counter": jm{"packets": 0, "bytes": 0}}

// iptablesNFT writes the nat table iptables-nft holds for kube-proxy's
// iptables mode, as nft -j lists it.
func (g *jsonGen) iptablesNFT(nsvc, neps int) {
	tb := func(x jm) jm { x["family"], x["table"] = "ip", "nat"; return x }
	g.obj(jm{"table": jm{"family": "ip", "name": "nat", "handle": 1}})
	g.obj(jm{"chain": tb(jm{"name": "PREROUTING", "handle": g.h(), "type": "nat", "hook": "prerouting", "prio": -100, "policy": "accept"})})
	g.obj(jm{"chain": tb(jm{"name": "KUBE-MARK-MASQ", "handle": g.h()})})
	g.obj(jm{"chain": tb(jm{"name": "KUBE-SERVICES", "handle": g.h()})})
	for i := 0; i < nsvc; i++ {
		svc, _, _ := genIPTNames(i, 0)
		g.obj(jm{"chain": tb(jm{"name": svc, "handle": g.h()})})
		for j := 0; j < neps; j++ {
			_, sep, _ := genIPTNames(i, j)
			g.obj(jm{"chain": tb(jm{"name": sep, "handle": g.h()})})
		}
	}
	rule := func(chain string, expr ...any) {
		g.obj(jm{"rule": tb(jm{"chain": chain, "handle": g.h(), "expr": expr})})
	}
	xt := func(typ, name string) jm { return jm{"xt": jm{"type": typ, "name": name}} }
	rule("PREROUTING", xt("match", "comment"), jCounter, jm{"jump": jm{"target": "KUBE-SERVICES"}})
	rule("KUBE-MARK-MASQ", jCounter, xt("target", "MARK"))
	for i := 0; i < nsvc; i++ {
		svc, _, _ := genIPTNames(i, 0)
		rule("KUBE-SERVICES", jMatch("==", jm{"meta": jm{"key": "l4proto"}}, "tcp"), jMatch("==", jPayload("ip", "daddr"), genClusterIP(i)),
			xt("match", "comment"), jMatch("==", jPayload("tcp", "dport"), 80), jCounter, jm{"jump": jm{"target": svc}})
	}
	for i := 0; i < nsvc; i++ {
		svc, _, _ := genIPTNames(i, 0)
		rule(svc, jMatch("==", jm{"meta": jm{"key": "l4proto"}}, "tcp"), jMatch("!=", jPayload("ip", "saddr"), jm{"prefix": jm{"addr": "10.0.0.0", "len": 8}}),
			jMatch("==", jPayload("ip", "daddr"), genClusterIP(i)), xt("match", "comment"), jMatch("==", jPayload("tcp", "dport"), 80), jCounter, jm{"jump": jm{"target": "KUBE-MARK-MASQ"}})
		for j := 0; j < neps; j++ {
			_, sep, _ := genIPTNames(i, j)
			if j < neps-1 {
				rule(svc, xt("match", "comment"), xt("match", "statistic"), jCounter, jm{"jump": jm{"target": sep}})
			} else {
				rule(svc, xt("match", "comment"), jCounter, jm{"jump": jm{"target": sep}})
			}
		}
		for j := 0; j < neps; j++ {
			_, sep, ip := genIPTNames(i, j)
			rule(sep, jMatch("==", jPayload("ip", "saddr"), ip), xt("match", "comment"), jCounter, jm{"jump": jm{"target": "KUBE-MARK-MASQ"}})
			rule(sep, jMatch("==", jm{"meta": jm{"key": "l4proto"}}, "tcp"), xt("match", "comment"), xt("match", "tcp"), jCounter, xt("target", "DNAT"))
		}
	}
}

// kubeProxy writes kube-proxy's nftables table of shape.
func (g *jsonGen) kubeProxy(shape genShape, nsvc, neps int) {
	tb := func(x jm) jm { x["family"], x["table"] = "ip", "kube-proxy"; return x }
	g.obj(jm{"table": jm{"family": "ip", "name": "kube-proxy", "handle": 1}})
	var cips jl
	var sips jl
	for i := 0; i < nsvc; i++ {
		svc, _, _ := genNames(i, 0)
		cips = append(cips, genClusterIP(i))
		sips = append(sips, jl{jm{"concat": jl{genClusterIP(i), "tcp", 80}}, jm{"goto": jm{"target": svc}}})
	}
	g.obj(jm{"set": tb(jm{"name": "cluster-ips", "type": "ipv4_addr", "handle": g.h(), "comment": "Active ClusterIPs", "elem": cips})})
	g.obj(jm{"map": tb(jm{"name": "service-ips", "type": jl{"ipv4_addr", "inet_proto", "inet_service"}, "handle": g.h(),
		"comment": "ClusterIP, ExternalIP and LoadBalancer IP traffic", "map": "verdict", "elem": sips})})
	g.obj(jm{"chain": tb(jm{"name": "nat-prerouting", "handle": g.h(), "type": "nat", "hook": "prerouting", "prio": -100, "policy": "accept"})})
	g.obj(jm{"chain": tb(jm{"name": "services", "handle": g.h()})})
	if shape == shape135 {
		g.obj(jm{"chain": tb(jm{"name": "mark-for-masquerade", "handle": g.h()})})
	}
	for i := 0; i < nsvc; i++ {
		svc, _, _ := genNames(i, 0)
		g.obj(jm{"chain": tb(jm{"name": svc, "handle": g.h()})})
		if shape == shape135 {
			for j := 0; j < neps; j++ {
				_, ep, _ := genNames(i, j)
				g.obj(jm{"chain": tb(jm{"name": ep, "handle": g.h()})})
			}
		}
	}
	rule := func(chain string, expr ...any) {
		g.obj(jm{"rule": tb(jm{"chain": chain, "handle": g.h(), "expr": expr})})
	}
	rule("nat-prerouting", jm{"jump": jm{"target": "services"}})
	rule("services", jm{"vmap": jm{"key": jm{"concat": jl{jPayload("ip", "daddr"), jm{"meta": jm{"key": "l4proto"}}, jPayload("th", "dport")}}, "data": "@service-ips"}})
	markOr := jm{"mangle": jm{"key": jm{"meta": jm{"key": "mark"}}, "value": jm{"|": jl{jm{"meta": jm{"key": "mark"}}, 16384}}}}
	if shape == shape135 {
		rule("mark-for-masquerade", markOr)
	}
	for i := 0; i < nsvc; i++ {
		svc, _, _ := genNames(i, 0)
		var set jl
		switch shape {
		case shape137:
			for j := 0; j < neps; j++ {
				_, _, ip := genNames(i, j)
				set = append(set, jl{j, jm{"concat": jl{ip, 8080}}})
			}
			rule(svc, jMatch("==", jm{"meta": jm{"key": "l4proto"}}, "tcp"),
				jm{"dnat": jm{"family": "ip", "addr": jm{"map": jm{"key": jm{"numgen": jm{"mode": "random", "mod": neps, "offset": 0}}, "data": jm{"set": set}}}}})
		case shape135:
			for j := 0; j < neps; j++ {
				_, ep, _ := genNames(i, j)
				set = append(set, jl{j, jm{"goto": jm{"target": ep}}})
			}
			rule(svc, jMatch("==", jPayload("ip", "daddr"), genClusterIP(i)),
				jMatch("!=", jPayload("ip", "saddr"), jm{"prefix": jm{"addr": "10.0.0.0", "len": 8}}), jm{"jump": jm{"target": "mark-for-masquerade"}})
			rule(svc, jm{"vmap": jm{"key": jm{"numgen": jm{"mode": "random", "mod": neps, "offset": 0}}, "data": jm{"set": set}}})
			for j := 0; j < neps; j++ {
				_, ep, ip := genNames(i, j)
				rule(ep, jMatch("==", jPayload("ip", "saddr"), ip), jm{"jump": jm{"target": "mark-for-masquerade"}})
				rule(ep, jMatch("==", jm{"meta": jm{"key": "l4proto"}}, "tcp"), jm{"dnat": jm{"addr": ip, "port": 8080}})
			}
		}
	}
}

// TestNFTGeneratorsAgree checks the generators against each other and the
// parsers on a small instance: text and JSON must read the same.
func TestNFTGeneratorsAgree(t *testing.T) {
	for _, shape := range []genShape{shape137, shape135, shapeIPTablesNFT} {
		t.Run(string(shape), func(t *testing.T) {
			var text, js bytes.Buffer
			genText(&text, shape, 30, 7)
			genJSON(&js, shape, 30, 7)
			a, err := ParseText(&text, "text")
			if err != nil {
				t.Fatal(err)
			}
			b, err := ParseJSON(&js, "json")
			if err != nil {
				t.Fatal(err)
			}
			if shape == shapeIPTablesNFT {
				if len(a.IPTables) != 1 || len(b.IPTables) != 1 || a.IPTables[0].RuleCount() != b.IPTables[0].RuleCount() {
					t.Fatalf("iptables tables %d %d", len(a.IPTables), len(b.IPTables))
				}
				if n := a.IPTables[0].RuleCount(); n != 2+30+30*(1+7+14) {
					t.Errorf("%d rules", n)
				}
				return
			}
			if len(a.Dumps[0].Warnings)+len(b.Dumps[0].Warnings) > 0 {
				t.Errorf("warnings %q %q", a.Dumps[0].Warnings, b.Dumps[0].Warnings)
			}
			compareForms(t, map[string]*inspect.Ruleset{"text": a, "json": b})
			compareRuleText(t, a, b)
		})
	}
}

// TestNFTLargeRuleset parses a 5,000 services × 20 endpoints ruleset and
// checks every service's DNAT targets.
func TestNFTLargeRuleset(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	var buf bytes.Buffer
	genText(&buf, shape137, 5000, 20)
	rs, err := ParseText(&buf, "large")
	if err != nil {
		t.Fatal(err)
	}
	kp := rs.NFTables[0]
	if len(kp.Chains) != 5002 || kp.Map("service-ips") == nil || len(kp.Map("service-ips").Elements) != 5000 {
		t.Fatalf("%d chains", len(kp.Chains))
	}
	for i := 0; i < 5000; i += 499 {
		svc, _, _ := genNames(i, 0)
		r := kp.Chain(svc).Rules[0]
		_, _, ip := genNames(i, 19)
		if r.Info.Numgen != 20 || len(r.Info.DNAT) != 20 || r.Info.NumgenTargets[19] != ip+":8080" {
			t.Fatalf("%s: %+v", svc, r.Info)
		}
	}
}

type benchInput struct {
	shape      genShape
	nsvc, neps int
}

var benchInputs = []benchInput{
	{shape137, 5000, 20},
	{shape135, 5000, 20},
	{shapeIPTablesNFT, 5000, 20},
}

func benchmarkNFT(b *testing.B, gen func(io.Writer, genShape, int, int), parse func(io.Reader, string) (*inspect.Ruleset, error)) {
	for _, in := range benchInputs {
		name := fmt.Sprintf("%s-%dx%d", in.shape, in.nsvc, in.neps)
		var data []byte // generated once, not at every round of b.N
		b.Run(name, func(b *testing.B) {
			if data == nil {
				var buf bytes.Buffer
				gen(&buf, in.shape, in.nsvc, in.neps)
				data = buf.Bytes()
				b.ResetTimer()
			}
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			b.ResetTimer()
			var rules int
			cpu0 := benchutil.CPUTime()
			for i := 0; i < b.N; i++ {
				rs, err := parse(bytes.NewReader(data), "bench")
				if err != nil {
					b.Fatal(err)
				}
				rules = rs.Dumps[0].Rules
			}
			// CPU time: what the parse costs on a machine whose wall clock
			// also counts others' work
			b.ReportMetric(float64(benchutil.CPUTime()-cpu0)/1e6/float64(b.N), "cpu-ms/op")
			b.ReportMetric(float64(rules), "rules")
			b.ReportMetric(float64(len(data))/(1<<20), "input-MB")
		})
	}
}

// BenchmarkParseNFTText: `go test ./inspect/ -run '^$' -bench NFT -benchmem`.
func BenchmarkParseNFTText(b *testing.B) { benchmarkNFT(b, genText, ParseText) }

// BenchmarkParseNFTJSON parses the JSON form of the same rulesets.
func BenchmarkParseNFTJSON(b *testing.B) { benchmarkNFT(b, genJSON, ParseJSON) }

// genKnftables writes the knftables dump (Fake.Dump) of a kube-proxy
// 1.37-shaped ruleset, built through knftables' own objects.
func genKnftables(tb testing.TB, w io.Writer, nsvc, neps int) {
	fake := knftables.NewFake(knftables.IPv4Family, "kube-proxy")
	tx := fake.NewTransaction()
	tx.Add(&knftables.Table{Comment: knftables.PtrTo("rules for kube-proxy")})
	tx.Add(&knftables.Set{Name: "cluster-ips", Type: "ipv4_addr", Comment: knftables.PtrTo("Active ClusterIPs")})
	tx.Add(&knftables.Map{Name: "service-ips", Type: "ipv4_addr . inet_proto . inet_service : verdict"})
	tx.Add(&knftables.Chain{Name: "nat-prerouting", Type: knftables.PtrTo(knftables.NATType),
		Hook: knftables.PtrTo(knftables.PreroutingHook), Priority: knftables.PtrTo(knftables.DNATPriority)})
	tx.Add(&knftables.Chain{Name: "services"})
	tx.Add(&knftables.Rule{Chain: "nat-prerouting", Rule: "jump services"})
	tx.Add(&knftables.Rule{Chain: "services", Rule: "ip daddr . meta l4proto . th dport vmap @service-ips"})
	for i := 0; i < nsvc; i++ {
		svc, _, _ := genNames(i, 0)
		tx.Add(&knftables.Chain{Name: svc})
		var m []string
		for j := 0; j < neps; j++ {
			_, _, ip := genNames(i, j)
			m = append(m, fmt.Sprintf("%d : %s . 8080", j, ip))
		}
		tx.Add(&knftables.Rule{Chain: svc, Rule: knftables.Concat("meta l4proto tcp dnat ip addr . port to numgen random mod", neps, "map {", strings.Join(m, " , "), "}")})
		tx.Add(&knftables.Element{Set: "cluster-ips", Key: []string{genClusterIP(i)}})
		tx.Add(&knftables.Element{Map: "service-ips", Key: []string{genClusterIP(i), "tcp", "80"}, Value: []string{"goto " + svc}})
	}
	if err := fake.Run(context.Background(), tx); err != nil {
		tb.Fatal(err)
	}
	io.WriteString(w, fake.Dump())
}

// BenchmarkParseKnftablesDump parses a knftables dump (through
// knftables.Fake.ParseDump, whose element lookups are linear: large maps
// cost quadratic time there).
func BenchmarkParseKnftablesDump(b *testing.B) {
	for _, n := range []int{500, 5000} {
		b.Run(fmt.Sprintf("v1.37-%dx20", n), func(b *testing.B) {
			var buf bytes.Buffer
			genKnftables(b, &buf, n, 20)
			data := buf.Bytes()
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				rs, err := ParseKnftablesDump(bytes.NewReader(data), "bench")
				if err != nil || rs.Dumps[0].Rules != n+2 || len(rs.Dumps[0].Warnings) != 0 {
					b.Fatalf("%v %+v", err, rs.Dumps[0])
				}
			}
		})
	}
}

// BenchmarkAnalyzeNFTRule measures the rule analysis alone.
func BenchmarkAnalyzeNFTRule(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("meta l4proto tcp dnat ip to numgen random mod 20 map { ")
	for j := 0; j < 20; j++ {
		if j > 0 {
			sb.WriteString(", ")
		}
		fmt.Fprintf(&sb, "%d : 10.64.1.%d . 8080", j, j)
	}
	sb.WriteString(" }")
	rules := []string{
		sb.String(),
		"ip daddr @cluster-ips ip saddr != 10.0.0.0/8 meta mark set meta mark | 0x00004000",
		"meta random & 2147483647 < 107374182 counter packets 0 bytes 0 jump KUBE-SEP-ABCDEFGHIJKLMNOP",
	}
	b.ReportAllocs()
	var sc ruleScratch // reused, as the readers do
	for i := 0; i < b.N; i++ {
		var info inspect.NFTRuleInfo
		sc.analyze(&info, rules[i%len(rules)])
	}
}
