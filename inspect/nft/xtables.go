package nft

import (
	"runtime"
	"strconv"
	"strings"

	"sigs.k8s.io/knftables"

	"github.com/proxyrules/kubectl-proxyrules/inspect"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// On an iptables-nft node, `nft list ruleset` shows the iptables tables
// (`table ip nat`, `table ip filter`, …) with kube-proxy's KUBE-* chains
// translated to nft syntax: no comments, `meta random & 2147483647 <
// 107374182` for `--probability 0.05`, `dnat to ip:port`, and some matches
// only as `xt match recent` without arguments (in `nft -j` JSON every
// xtables match and target loses its arguments). Such tables are converted
// into the iptables model here instead of being returned as NFTTables.

// builtinChainsOf are the built-in chains of each iptables table, in
// iptables-save's order.
var builtinChainsOf = map[string][]string{
	"nat":      {"PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"},
	"filter":   {"INPUT", "FORWARD", "OUTPUT"},
	"mangle":   {"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"},
	"raw":      {"PREROUTING", "OUTPUT"},
	"security": {"INPUT", "FORWARD", "OUTPUT"},
}

// iptablesTableNames are the tables iptables-nft creates.
var iptablesTableNames = map[string]bool{"nat": true, "filter": true, "mangle": true, "raw": true, "security": true}

// isIPTablesNFT reports whether t is a table of iptables-nft: family ip
// or ip6, an iptables table name, and either nft's "managed by iptables-nft"
// warning, a KUBE-* chain, or an xtables expression.
func isIPTablesNFT(t *inspect.NFTTable, raw *ruleStore, warned bool) bool {
	if t.Family != knftables.IPv4Family && t.Family != knftables.IPv6Family {
		return false
	}
	if !iptablesTableNames[t.Name] {
		return false
	}
	if warned {
		return true
	}
	for _, c := range t.Chains {
		if strings.HasPrefix(c.Name, kubeproxy.PrefixKube) {
			return true
		}
	}
	return hasXT(t, raw)
}

// hasXT reports whether any rule of t uses an xtables expression.
func hasXT(t *inspect.NFTTable, raw *ruleStore) bool {
	found := false
	raw.of(t, func(_ *inspect.NFTChain, rules []rawRule) {
		for _, r := range rules {
			found = found || ruleHasXT(r.text)
		}
	})
	return found
}

// ruleHasXT reports whether rule text holds an xtables expression
// (`xt match recent`, `xt target "DNAT"`, `XT target DNAT not found`).
func ruleHasXT(text string) bool {
	for _, p := range []string{"xt match ", "xt target ", "XT match ", "XT target "} {
		if i := strings.Index(text, p); i == 0 || i > 0 && text[i-1] == ' ' {
			return true
		}
	}
	return false
}

// toIPTable converts an iptables-nft table read through nft into the
// iptables model.
func toIPTable(t *inspect.NFTTable, raw *ruleStore) *inspect.IPTable {
	fam := kubeproxy.IPv4
	if t.Family == knftables.IPv6Family {
		fam = kubeproxy.IPv6
	}
	it := inspect.NewIPTable(fam, t.Name)
	it.Backend = kubeproxy.BackendNFT
	it.Source = t.Source
	it.Format = t.Format
	it.FromNFT = true
	// iptables-save lists every built-in chain of the table, first, even
	// those iptables-nft never created in the kernel
	// (AddChain, not EnsureChain: the table's name index is then built
	// once, at its size, when first used)
	builtin := map[string]*inspect.IPChain{}
	for _, name := range builtinChainsOf[t.Name] {
		ic := &inspect.IPChain{Name: name, Policy: "ACCEPT"}
		it.AddChain(ic)
		builtin[name] = ic
	}
	ipChains := make([]*inspect.IPChain, len(t.Chains))
	for i, c := range t.Chains {
		// chain names are unique within an nft table: only the built-in
		// chains added above can already exist
		ic := builtin[c.Name]
		if ic == nil {
			ic = &inspect.IPChain{Name: c.Name, Policy: "-"}
			it.AddChain(ic)
		}
		if c.IsBase() {
			ic.Policy = "ACCEPT"
			if c.Policy != nil {
				ic.Policy = strings.ToUpper(string(*c.Policy))
			}
		}
		ipChains[i] = ic
	}
	// The runs of rules come in the order of t.Chains (every reader adds
	// a chain when it first meets it): follow both, and look a chain up
	// only when they part.
	var byChain map[*inspect.NFTChain]*inspect.IPChain
	next := 0
	ipChainOf := func(c *inspect.NFTChain) *inspect.IPChain {
		for j := next; j < len(t.Chains) && j < next+16; j++ {
			if t.Chains[j] == c {
				next = j
				return ipChains[j]
			}
		}
		if byChain == nil {
			byChain = make(map[*inspect.NFTChain]*inspect.IPChain, len(t.Chains))
			for i, c := range t.Chains {
				byChain[c] = ipChains[i]
			}
		}
		return byChain[c]
	}
	n := 0
	raw.of(t, func(_ *inspect.NFTChain, rr []rawRule) { n += len(rr) })
	rules := make([]inspect.IPRule, n)
	ptrs := make([]*inspect.IPRule, n)
	src := make([]*rawRule, 0, n)
	k := 0
	raw.of(t, func(c *inspect.NFTChain, rr []rawRule) {
		ic := ipChainOf(c)
		from := k
		for i := range rr {
			src = append(src, &rr[i])
			// the first write to each rule here, on one goroutine (see
			// materialize)
			rules[k].Line, rules[k].Text = int32(rr[i].line), rr[i].text
			ptrs[k] = &rules[k]
			k++
		}
		if ic.Rules == nil {
			ic.Rules = ptrs[from:k:k]
		} else {
			ic.Rules = append(ic.Rules, ptrs[from:k]...)
		}
	})
	type scratch struct {
		toks []token
		info inspect.NFTRuleInfo
	}
	scr := make([]scratch, runtime.GOMAXPROCS(0))
	forChunks(n, func(w, from, to int) {
		sc := &scr[w]
		for i := from; i < to; i++ {
			r := src[i]
			sc.toks = appendTokenSpans(sc.toks[:0], r.text)
			fillIPRule(&rules[i], r.text, sc.toks, fam, r.line, &sc.info)
			if r.comment != nil {
				// iptables-nft keeps comments out of nft's view; one nft
				// shows belongs to the rule all the same.
				rules[i].Comment = *r.comment
			}
		}
	})
	return it
}

var protoNumbers = map[string]string{
	"1": "icmp", "6": "tcp", "17": "udp", "33": "dccp", "58": "ipv6-icmp", "132": "sctp", "136": "udplite",
	"icmpv6": "ipv6-icmp",
}

func protoName(s string) string {
	if n, ok := protoNumbers[s]; ok {
		return n
	}
	return s
}

// ruleToIPRule converts one rule of an iptables-nft table, in the nft
// spelling, into an IPRule filled as iptables-save would have it.
func ruleToIPRule(text string, fam kubeproxy.Family, line int) *inspect.IPRule {
	r := &inspect.IPRule{}
	fillIPRule(r, text, appendTokenSpans(nil, text), fam, line, new(inspect.NFTRuleInfo))
	return r
}

// fillIPRule fills r from the rule text and its tokens; tmp is scratch for
// the parts read by the nftables analyzer.
func fillIPRule(r *inspect.IPRule, text string, toks []token, fam kubeproxy.Family, line int, tmp *inspect.NFTRuleInfo) {
	r.Line, r.Text = int32(line), text
	*tmp = inspect.NFTRuleInfo{}
	x := ipRuleReader{r: r, text: text, toks: toks, fam: fam, tmp: tmp, flushFrom: -1, hostMask: "/32",
		a: analyzer{text: text, toks: toks, info: tmp}}
	if fam == kubeproxy.IPv6 {
		x.hostMask = "/128"
	}
	for i := 0; i < len(toks); i++ {
		i = x.step(i)
	}
	x.flush(len(toks))
	if len(x.unparsed) > 0 {
		r.Extra().Unparsed = x.unparsed
	}
}

// ipRuleReader is the state fillIPRule's steps share: the rule being
// filled, the tokens, and the run of tokens not understood so far, kept
// as one unparsed fragment.
type ipRuleReader struct {
	r         *inspect.IPRule
	text      string
	toks      []token
	fam       kubeproxy.Family
	a         analyzer // reads marks, probabilities and DNAT into tmp
	tmp       *inspect.NFTRuleInfo
	unparsed  []string
	flushFrom int    // first token not understood, -1 when none is pending
	hostMask  string // of an address without a prefix length
}

// step reads what starts at token i and returns the index of the last
// token it took (i itself when it took only that one, or none). A flat
// dispatch: each case names what it matches, a method reads it.
func (x *ipRuleReader) step(i int) int {
	t, next := x.a.tok(i), x.a.tok(i+1)
	switch {
	case t == "meta" && next == "l4proto", t == "ip" && next == "protocol", t == "ip6" && next == "nexthdr":
		return x.protocol(i)
	case (t == "ip" || t == "ip6") && (next == "saddr" || next == "daddr"):
		return x.address(i, next)
	case (t == "tcp" || t == "udp" || t == "sctp" || t == "th" || t == "udplite" || t == "dccp") && (next == "dport" || next == "sport"):
		return x.port(i, t, next)
	case t == "iifname" || t == "oifname" || t == "iif" || t == "oif" ||
		t == "meta" && (next == "iifname" || next == "oifname"):
		return x.iface(i, t)
	case t == "ct" && next == "state":
		return x.ctState(i)
	case t == "ct" && next != "":
		return x.ctOther(i)
	case t == "fib" && (next == "daddr" || next == "saddr") && x.a.tok(i+2) == "type":
		return x.fibType(i, next)
	case t == "mark" || t == "meta" && next == "mark":
		return x.mark(i, t)
	case t == "meta" && next == "random":
		return x.random(i)
	case t == "counter":
		return x.counter(i, next)
	case t == "jump" || t == "goto":
		x.flush(i)
		x.r.Target, x.r.Goto = unquote(next), t == "goto"
		return i + 1
	case t == "dnat":
		return x.dnat(i)
	case t == "snat" || t == "redirect":
		x.flush(i)
		x.r.Target = strings.ToUpper(t)
		x.unknown(i) // its arguments: not read
	case t == "masquerade":
		return x.masquerade(i)
	case t == "reject":
		return x.reject(i, next)
	case t == "accept" || t == "drop" || t == "return":
		x.flush(i)
		x.r.Target = strings.ToUpper(t)
	case t == "notrack":
		x.flush(i)
		x.r.Target = "CT"
		x.unparsed = append(x.unparsed, "notrack")
	case (t == "xt" || t == "XT") && (next == "match" || next == "target") && i+2 < len(x.toks):
		return x.xt(i, next)
	default:
		x.unknown(i)
	}
	return i
}

// flush ends the run of tokens not understood before token i.
func (x *ipRuleReader) flush(i int) {
	if x.flushFrom >= 0 && x.flushFrom < i {
		x.unparsed = append(x.unparsed, joinTokens(x.text, x.toks[x.flushFrom:i]))
	}
	x.flushFrom = -1
}

// unknown adds token i to the run of tokens not understood.
func (x *ipRuleReader) unknown(i int) int {
	if x.flushFrom < 0 {
		x.flushFrom = i
	}
	return i
}

// keep records tokens i..j as one unparsed fragment.
func (x *ipRuleReader) keep(i, j int) {
	x.unparsed = append(x.unparsed, joinTokens(x.text, x.toks[i:j+1]))
}

// operand reads `[!=] VALUE` at token i and returns the value, whether it
// was negated, and the index of the value.
func (x *ipRuleReader) operand(i int) (string, bool, int) {
	not := false
	if t := x.a.tok(i); t == "!=" || t == "ne" {
		not = true
		i++
	} else if t == "==" || t == "eq" {
		i++
	}
	return x.a.tok(i), not, i
}

// protocol reads `meta l4proto tcp` (ip protocol, ip6 nexthdr): -p.
func (x *ipRuleReader) protocol(i int) int {
	v, not, j := x.operand(i + 2)
	if v == "" || v == "{" || not {
		return x.unknown(i)
	}
	x.flush(i)
	x.r.Protocol = protoName(v)
	return j
}

// address reads `ip saddr|daddr [!=] ADDR`: -s, -d.
func (x *ipRuleReader) address(i int, dir string) int {
	v, not, j := x.operand(i + 2)
	if v == "" || v == "{" || v[0] == '@' {
		return x.unknown(i)
	}
	x.flush(i)
	if !strings.Contains(v, "/") && !strings.Contains(v, "-") {
		v += x.hostMask
	}
	if dir == "saddr" {
		x.r.Source = inspect.Addr{Value: v, Not: not}
	} else {
		x.r.Extra().Destination = inspect.Addr{Value: v, Not: not}
	}
	return j
}

// port reads `tcp dport [!=] PORT[-PORT]`: --dport (a source port is
// left unparsed).
func (x *ipRuleReader) port(i int, proto, dir string) int {
	v, not, j := x.operand(i + 2)
	if v == "" || v == "{" || v[0] == '@' || dir == "sport" {
		return x.unknown(i)
	}
	x.flush(i)
	x.r.Extra().DPort = inspect.Addr{Value: strings.Replace(v, "-", ":", 1), Not: not}
	if x.r.Protocol == "" && proto != "th" {
		x.r.Protocol = proto
	}
	return j
}

// iface reads `[meta] iifname|oifname [!=] "NAME"` (iif, oif): -i, -o,
// nft's `*` wildcard spelt as iptables' `+`.
func (x *ipRuleReader) iface(i int, t string) int {
	k := i
	if t == "meta" {
		k++
	}
	v, not, j := x.operand(k + 1)
	if v == "" || v == "{" {
		return x.unknown(i)
	}
	x.flush(i)
	v = unquote(v)
	if strings.HasSuffix(v, "*") {
		v = strings.TrimSuffix(v, "*") + "+"
	}
	if x.a.tok(k)[0] == 'i' {
		x.r.Extra().InIface = inspect.Addr{Value: v, Not: not}
	} else {
		x.r.Extra().OutIface = inspect.Addr{Value: v, Not: not}
	}
	return j
}

// ctState reads `ct state [!=] STATE` or `ct state { A, B }`: --ctstate.
func (x *ipRuleReader) ctState(i int) int {
	j := i + 2
	not := false
	if x.a.tok(j) == "!=" {
		not = true
		j++
	}
	var states []string
	if x.a.tok(j) == "{" {
		for j++; j < len(x.toks) && x.a.tok(j) != "}"; j++ {
			if x.a.tok(j) != "," {
				states = append(states, strings.ToUpper(x.a.tok(j)))
			}
		}
	} else if v := x.a.tok(j); v != "" {
		states = append(states, strings.ToUpper(v))
	}
	x.flush(i)
	x.r.Extra().CTState = inspect.Addr{Value: strings.Join(states, ","), Not: not}
	return j
}

// ctOther keeps `ct status dnat`, `ct mark 0x1`, `ct direction original`
// … as one unparsed fragment, so that its value is not read as a
// statement (`ct status dnat` is no DNAT target).
func (x *ipRuleReader) ctOther(i int) int {
	x.flush(i)
	j := i + 2
	if isCmpOp(x.a.tok(j)) {
		j++
	}
	if x.a.tok(j) == "{" {
		for j < len(x.toks) && x.a.tok(j) != "}" {
			j++
		}
	}
	if j >= len(x.toks) {
		j = len(x.toks) - 1
	}
	x.keep(i, j)
	return j
}

// fibType reads `fib daddr|saddr type [!=] TYPE`: addrtype --dst-type,
// --src-type.
func (x *ipRuleReader) fibType(i int, dir string) int {
	v, not, j := x.operand(i + 3)
	if v == "" || v == "{" {
		return x.unknown(i)
	}
	x.flush(i)
	if dir == "daddr" {
		x.r.Extra().DstType = inspect.Addr{Value: strings.ToUpper(v), Not: not}
	} else {
		x.r.Extra().SrcType = inspect.Addr{Value: strings.ToUpper(v), Not: not}
	}
	return j
}

// mark reads a mark set (MARK --set-xmark and its kin) or test (-m mark)
// through the analyzer; a test it cannot say as -m mark is kept unparsed.
func (x *ipRuleReader) mark(i int, t string) int {
	k := i
	if t == "meta" {
		k++
	}
	*x.tmp = inspect.NFTRuleInfo{}
	j := x.a.mark(k)
	if j == k {
		return x.unknown(i)
	}
	x.flush(i)
	tmp := x.tmp
	switch {
	case tmp.HasMarkSet:
		x.r.Extra().SetMark = markSet(tmp.MarkSetOp, tmp.MarkSetValue)
		x.r.Target = "MARK"
	case tmp.HasMarkTest && (tmp.MarkTestOp == "==" || tmp.MarkTestOp == "!="):
		x.r.Extra().Mark = &inspect.MarkMatch{Value: tmp.MarkTestValue, Mask: tmp.MarkTestMask, Not: tmp.MarkTestOp == "!=", Module: "mark"}
	default:
		x.keep(i, j)
	}
	return j
}

// markSet is MARK's --set-xmark for nft's `mark set` of op with value v.
func markSet(op string, v uint32) *inspect.MarkSet {
	switch op {
	case "or":
		return &inspect.MarkSet{Value: v, Mask: v, Op: "or"}
	case "xor":
		return &inspect.MarkSet{Value: v, Mask: 0, Op: "xor"}
	case "and":
		return &inspect.MarkSet{Value: 0, Mask: ^v, Op: "and"}
	}
	return &inspect.MarkSet{Value: v, Mask: 0xffffffff, Op: "set"}
}

// random reads `meta random & 2147483647 < N`: -m statistic
// --probability.
func (x *ipRuleReader) random(i int) int {
	*x.tmp = inspect.NFTRuleInfo{}
	j := x.a.random(i + 1)
	if j == i+1 {
		return x.unknown(i)
	}
	x.flush(i)
	x.r.Random = true
	x.r.Probability = x.tmp.Probability
	return j
}

// counter reads `counter [packets P bytes B | name N]`.
func (x *ipRuleReader) counter(i int, next string) int {
	x.flush(i)
	switch {
	case next == "packets" && x.a.tok(i+3) == "bytes":
		p, _ := strconv.ParseUint(x.a.tok(i+2), 10, 64)
		b, _ := strconv.ParseUint(x.a.tok(i+4), 10, 64)
		if p != 0 || b != 0 {
			x.r.Extra().Packets, x.r.Extra().Bytes = p, b
		}
		return i + 4
	case next == "name":
		return i + 2
	}
	return i
}

// dnat reads `dnat to ADDR:PORT` through the analyzer: DNAT
// --to-destination.
func (x *ipRuleReader) dnat(i int) int {
	x.flush(i)
	*x.tmp = inspect.NFTRuleInfo{}
	j := x.a.dnat(i)
	x.r.Target = "DNAT"
	if len(x.tmp.DNAT) > 0 {
		x.r.ToDestination = x.tmp.DNAT[0]
	}
	return j
}

// masquerade reads `masquerade [fully-random]`.
func (x *ipRuleReader) masquerade(i int) int {
	x.flush(i)
	x.r.Target = "MASQUERADE"
	for j := i + 1; j < len(x.toks) && j <= i+3; j++ {
		if strings.Contains(x.a.tok(j), "fully-random") {
			x.r.Extra().RandomFully = true
			i = j
		}
	}
	return i
}

// reject reads `reject [with KIND [type] WHAT]`: REJECT --reject-with,
// iptables' default when nft prints none.
func (x *ipRuleReader) reject(i int, next string) int {
	x.flush(i)
	x.r.Target = "REJECT"
	x.r.Extra().RejectWith = "icmp-port-unreachable"
	if x.fam == kubeproxy.IPv6 {
		x.r.Extra().RejectWith = "icmp6-port-unreachable"
	}
	if next != "with" {
		return i
	}
	kind, what := x.a.tok(i+2), x.a.tok(i+3)
	j := i + 3
	if what == "type" {
		what = x.a.tok(i + 4)
		j++
	}
	switch kind {
	case "tcp":
		x.r.Extra().RejectWith = "tcp-reset"
	case "icmp":
		x.r.Extra().RejectWith = "icmp-" + what
	case "icmpv6":
		x.r.Extra().RejectWith = "icmp6-" + what
	case "icmpx":
		x.r.Extra().RejectWith = "icmpx-" + what
	}
	return j
}

// xt reads `xt match|target NAME [not found]`, which nft prints for an
// extension it cannot translate: kept unparsed, a target taken as the
// rule's, a recent or statistic match noted.
func (x *ipRuleReader) xt(i int, kind string) int {
	x.flush(i)
	name := unquote(x.a.tok(i + 2))
	end := i + 2
	if x.a.tok(i+3) == "not" && x.a.tok(i+4) == "found" {
		end = i + 4
	}
	x.unparsed = append(x.unparsed, "xt "+kind+" "+name)
	switch {
	case kind == "target":
		if x.r.Target == "" {
			x.r.Target = name
		}
	case name == "recent":
		if x.r.More == nil || x.r.More.Recent == nil {
			x.r.Extra().Recent = &inspect.Recent{}
		}
	case name == "statistic":
		x.r.Random = true
	}
	return end
}
