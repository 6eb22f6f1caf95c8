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
	a := analyzer{text: text, toks: toks, info: tmp}
	var unparsed []string
	flushFrom := -1
	flush := func(i int) {
		if flushFrom >= 0 && flushFrom < i {
			unparsed = append(unparsed, joinTokens(text, toks[flushFrom:i]))
		}
		flushFrom = -1
	}
	unknown := func(i int) {
		if flushFrom < 0 {
			flushFrom = i
		}
	}
	// operand reads `[!=] VALUE` at a.tok(i) and returns the value, whether it
	// was negated, and the index of the value.
	operand := func(i int) (string, bool, int) {
		not := false
		if t := a.tok(i); t == "!=" || t == "ne" {
			not = true
			i++
		} else if t == "==" || t == "eq" {
			i++
		}
		return a.tok(i), not, i
	}
	hostMask := "/32"
	if fam == kubeproxy.IPv6 {
		hostMask = "/128"
	}
	for i := 0; i < len(toks); i++ {
		t := a.tok(i)
		next := a.tok(i + 1)
		switch {
		case t == "meta" && next == "l4proto", t == "ip" && next == "protocol", t == "ip6" && next == "nexthdr":
			v, not, j := operand(i + 2)
			if v == "" || v == "{" || not {
				unknown(i)
				continue
			}
			flush(i)
			r.Protocol = protoName(v)
			i = j
		case (t == "ip" || t == "ip6") && (next == "saddr" || next == "daddr"):
			v, not, j := operand(i + 2)
			if v == "" || v == "{" || v[0] == '@' {
				unknown(i)
				continue
			}
			flush(i)
			if !strings.Contains(v, "/") && !strings.Contains(v, "-") {
				v += hostMask
			}
			if next == "saddr" {
				r.Source = inspect.Addr{Value: v, Not: not}
			} else {
				r.Extra().Destination = inspect.Addr{Value: v, Not: not}
			}
			i = j
		case (t == "tcp" || t == "udp" || t == "sctp" || t == "th" || t == "udplite" || t == "dccp") && (next == "dport" || next == "sport"):
			v, not, j := operand(i + 2)
			if v == "" || v == "{" || v[0] == '@' || next == "sport" {
				unknown(i)
				continue
			}
			flush(i)
			r.Extra().DPort = inspect.Addr{Value: strings.Replace(v, "-", ":", 1), Not: not}
			if r.Protocol == "" && t != "th" {
				r.Protocol = t
			}
			i = j
		case t == "iifname" || t == "oifname" || t == "iif" || t == "oif" ||
			t == "meta" && (next == "iifname" || next == "oifname"):
			k := i
			if t == "meta" {
				k++
			}
			v, not, j := operand(k + 1)
			if v == "" || v == "{" {
				unknown(i)
				continue
			}
			flush(i)
			v = unquote(v)
			if strings.HasSuffix(v, "*") {
				v = strings.TrimSuffix(v, "*") + "+"
			}
			if a.tok(k)[0] == 'i' {
				r.Extra().InIface = inspect.Addr{Value: v, Not: not}
			} else {
				r.Extra().OutIface = inspect.Addr{Value: v, Not: not}
			}
			i = j
		case t == "ct" && next == "state":
			j := i + 2
			not := false
			if a.tok(j) == "!=" {
				not = true
				j++
			}
			var states []string
			if a.tok(j) == "{" {
				for j++; j < len(toks) && a.tok(j) != "}"; j++ {
					if a.tok(j) != "," {
						states = append(states, strings.ToUpper(a.tok(j)))
					}
				}
			} else if v := a.tok(j); v != "" {
				states = append(states, strings.ToUpper(v))
			}
			flush(i)
			r.Extra().CTState = inspect.Addr{Value: strings.Join(states, ","), Not: not}
			i = j
		case t == "ct" && next != "" && next != "state":
			// ct status dnat, ct mark 0x1, ct direction original …: kept
			// as one unparsed fragment so that its value is not read as a
			// statement (`ct status dnat` is no DNAT target)
			flush(i)
			j := i + 2
			if isCmpOp(a.tok(j)) {
				j++
			}
			if a.tok(j) == "{" {
				for j < len(toks) && a.tok(j) != "}" {
					j++
				}
			}
			if j >= len(toks) {
				j = len(toks) - 1
			}
			unparsed = append(unparsed, joinTokens(text, toks[i:j+1]))
			i = j
		case t == "fib" && (next == "daddr" || next == "saddr") && a.tok(i+2) == "type":
			v, not, j := operand(i + 3)
			if v == "" || v == "{" {
				unknown(i)
				continue
			}
			flush(i)
			if next == "daddr" {
				r.Extra().DstType = inspect.Addr{Value: strings.ToUpper(v), Not: not}
			} else {
				r.Extra().SrcType = inspect.Addr{Value: strings.ToUpper(v), Not: not}
			}
			i = j
		case t == "mark" || t == "meta" && next == "mark":
			k := i
			if t == "meta" {
				k++
			}
			*tmp = inspect.NFTRuleInfo{}
			j := a.mark(k)
			if j == k {
				unknown(i)
				continue
			}
			flush(i)
			if tmp.HasMarkSet {
				v := tmp.MarkSetValue
				switch tmp.MarkSetOp {
				case "or":
					r.Extra().SetMark = &inspect.MarkSet{Value: v, Mask: v, Op: "or"}
				case "xor":
					r.Extra().SetMark = &inspect.MarkSet{Value: v, Mask: 0, Op: "xor"}
				case "and":
					r.Extra().SetMark = &inspect.MarkSet{Value: 0, Mask: ^v, Op: "and"}
				default:
					r.Extra().SetMark = &inspect.MarkSet{Value: v, Mask: 0xffffffff, Op: "set"}
				}
				r.Target = "MARK"
			} else if tmp.HasMarkTest {
				switch tmp.MarkTestOp {
				case "==", "!=":
					r.Extra().Mark = &inspect.MarkMatch{Value: tmp.MarkTestValue, Mask: tmp.MarkTestMask, Not: tmp.MarkTestOp == "!=", Module: "mark"}
				default:
					unparsed = append(unparsed, joinTokens(text, toks[i:j+1]))
				}
			} else {
				unparsed = append(unparsed, joinTokens(text, toks[i:j+1]))
			}
			i = j
		case t == "meta" && next == "random":
			*tmp = inspect.NFTRuleInfo{}
			j := a.random(i + 1)
			if j == i+1 {
				unknown(i)
				continue
			}
			flush(i)
			r.Random = true
			r.Probability = tmp.Probability
			i = j
		case t == "counter":
			flush(i)
			if next == "packets" && a.tok(i+3) == "bytes" {
				p, _ := strconv.ParseUint(a.tok(i+2), 10, 64)
				b, _ := strconv.ParseUint(a.tok(i+4), 10, 64)
				if p != 0 || b != 0 {
					r.Extra().Packets, r.Extra().Bytes = p, b
				}
				i += 4
			} else if next == "name" {
				i += 2
			}
		case t == "jump" || t == "goto":
			flush(i)
			r.Target = unquote(next)
			r.Goto = t == "goto"
			i++
		case t == "dnat":
			flush(i)
			*tmp = inspect.NFTRuleInfo{}
			j := a.dnat(i)
			r.Target = "DNAT"
			if len(tmp.DNAT) > 0 {
				r.ToDestination = tmp.DNAT[0]
			}
			i = j
		case t == "snat":
			flush(i)
			r.Target = "SNAT"
			unknown(i)
		case t == "masquerade":
			flush(i)
			r.Target = "MASQUERADE"
			for j := i + 1; j < len(toks) && j <= i+3; j++ {
				if strings.Contains(a.tok(j), "fully-random") {
					r.Extra().RandomFully = true
					i = j
				}
			}
		case t == "redirect":
			flush(i)
			r.Target = "REDIRECT"
			unknown(i)
		case t == "reject":
			flush(i)
			r.Target = "REJECT"
			r.Extra().RejectWith = "icmp-port-unreachable"
			if fam == kubeproxy.IPv6 {
				r.Extra().RejectWith = "icmp6-port-unreachable"
			}
			if next == "with" {
				kind, what := a.tok(i+2), a.tok(i+3)
				j := i + 3
				if what == "type" {
					what = a.tok(i + 4)
					j++
				}
				switch kind {
				case "tcp":
					r.Extra().RejectWith = "tcp-reset"
				case "icmp":
					r.Extra().RejectWith = "icmp-" + what
				case "icmpv6":
					r.Extra().RejectWith = "icmp6-" + what
				case "icmpx":
					r.Extra().RejectWith = "icmpx-" + what
				}
				i = j
			}
		case t == "accept" || t == "drop" || t == "return":
			flush(i)
			r.Target = strings.ToUpper(t)
		case t == "notrack":
			flush(i)
			r.Target = "CT"
			unparsed = append(unparsed, "notrack")
		case (t == "xt" || t == "XT") && (next == "match" || next == "target") && i+2 < len(toks):
			flush(i)
			name := unquote(a.tok(i + 2))
			end := i + 2
			if a.tok(i+3) == "not" && a.tok(i+4) == "found" {
				end = i + 4
			}
			unparsed = append(unparsed, "xt "+next+" "+name)
			if next == "target" {
				if r.Target == "" {
					r.Target = name
				}
			} else {
				switch name {
				case "recent":
					if r.More == nil || r.More.Recent == nil {
						r.Extra().Recent = &inspect.Recent{}
					}
				case "statistic":
					r.Random = true
				}
			}
			i = end
		default:
			unknown(i)
		}
	}
	flush(len(toks))
	if len(unparsed) > 0 {
		r.Extra().Unparsed = unparsed
	}
}
