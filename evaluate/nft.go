package evaluate

import (
	"math/bits"
	"net/netip"
	"strings"

	"sigs.k8s.io/knftables"

	"github.com/proxyrules/kubectl-proxyrules/inspect/nft"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// evalNFT evaluates an nftables rule (or an iptables-nft rule read
// through nft) statement by statement: a match that fails ends the rule;
// a random match, numgen and what is not modelled fork.
func (w *walk) evalNFT(t *thread, ch chainRef, i int, stmts []nft.Statement) []branch {
	r := nftRuleWalk{w: w, t: t, ch: ch, i: i}
	for k, st := range stmts {
		switch st.Kind {
		case nft.StmtMatch:
			if !r.match(w.nftMatch(t, ch, st)) {
				return r.done(effect{act: actNext})
			}
		case nft.StmtVerdict:
			return r.done(verdictEffect(st.Verdict, st.Target))
		case nft.StmtVmap:
			return r.vmap(st)
		case nft.StmtNAT:
			return w.nftNAT(t, ch, st, r.others, r.share)
		case nft.StmtSet:
			if eff, ok := w.nftSet(t, st); !ok {
				return r.done(eff)
			}
		case nft.StmtReject:
			t.reject = rejectName(st.RejectWith, w.pkt.Family)
			return r.done(effect{act: actReject})
		case nft.StmtNotrack:
			t.untracked = true
			t.ctstate = ctUntracked
		case nft.StmtNoOp, nft.StmtSetUpdate:
		case nft.StmtXT:
			if end, ok := r.xt(st, stmts[k+1:]); ok {
				return end
			}
		case nft.StmtUnknown:
			if !r.match(unknown("rule text not read: %s", st.Text)) {
				return r.done(effect{act: actNext})
			}
		}
	}
	if ch.ipt != nil && !hasAction(stmts) {
		// nft 1.0.6 lists iptables-nft's IPv6 DNAT and MASQUERADE as nothing
		// at all: a kube-proxy rule that only counts is one of those.
		switch {
		case strings.HasPrefix(ch.name(), kubeproxy.PrefixEndpoint):
			return r.done(effect{act: actUnknown, what: "a rule whose target nft does not show (iptables-nft's DNAT of IPv6, as nft 1.0 lists it)"})
		case ch.name() == kubeproxy.ChainPostrouting:
			return r.done(effect{act: actUnknown, what: "a rule whose target nft does not show (iptables-nft's MASQUERADE of IPv6, as nft 1.0 lists it)"})
		}
	}
	return r.done(effect{act: actNext, what: ruleSideEffects(stmts)})
}

// nftRuleWalk is one thread's walk through rule i of ch: the branches
// forked so far and the share of the thread that goes on.
type nftRuleWalk struct {
	w      *walk
	t      *thread
	ch     chainRef
	i      int
	others []branch
	share  *Prob
}

// done ends the rule for the thread with eff, next to the forks.
func (r *nftRuleWalk) done(eff effect) []branch {
	if eff.share == nil {
		eff.share = r.share
	}
	return r.w.result(r.t, eff, r.others)
}

// match applies a condition; false when the rule ends for the thread.
func (r *nftRuleWalk) match(c cond) bool {
	ok, miss := r.w.decide(r.t, r.ch, r.i, c, &r.share)
	if miss != nil {
		r.others = append(r.others, branch{t: miss})
	}
	return ok
}

// vmap is a verdict map: by numgen a fork to each element, else the
// verdict of the element the packet's key finds.
func (r *nftRuleWalk) vmap(st nft.Statement) []branch {
	if st.Left.Kind == nft.ExprNumgen {
		return r.w.numgenFork(r.t, r.ch, st.Left, st.Right, r.others, func(th *thread, el *knftables.Element, value *nft.Expr) effect {
			if el != nil {
				return verdictEffect(verdictWords(el.Value))
			}
			if value != nil {
				return verdictEffect(verdictWords(strings.Fields(value.Name)))
			}
			return effect{act: actNext, what: "no element: rule ends"}
		})
	}
	vals, c := r.w.nftKey(r.t, r.ch, st.Left)
	if c.kind != condTrue {
		if c.kind == condFalse {
			return r.done(effect{act: actNext})
		}
		return r.done(effect{act: actUnknown, what: c.what})
	}
	el, value, ok := r.w.mapLookup(r.ch, st.Right, vals)
	if !ok {
		return r.done(effect{act: actUnknown, what: "the map " + st.Right.String() + " (not in the input, or keys not read)"})
	}
	switch {
	case el != nil:
		return r.done(verdictEffect(verdictWords(el.Value)))
	case value != nil:
		return r.done(verdictEffect(verdictWords(strings.Fields(value.Name))))
	}
	return r.done(effect{act: actNext})
}

// xt is an xtables match or target nft shows without its options (rest:
// the statements after it). ok is true when it ends the rule: a match
// that fails, a target that does more than log or mangle.
func (r *nftRuleWalk) xt(st nft.Statement, rest []nft.Statement) (end []branch, ok bool) {
	if st.XT == "match" {
		c := r.w.xtMatch(r.t, rest, st)
		if c.kind == condAffinity {
			tb, fam, _ := r.ch.tableLabel()
			r.w.note(NotModelled{Table: tb, Family: fam, Chain: r.ch.name(), Rule: r.i,
				What: "xt match recent (nft does not show its options)",
				Why:  "taken as kube-proxy's ClientIP affinity check (--rcheck): it stands before a jump, not before a DNAT"})
		}
		if !r.match(c) {
			return r.done(effect{act: actNext}), true
		}
		return nil, false
	}
	switch st.XTName {
	case "LOG", "NFLOG", "TRACE", "AUDIT", "TCPMSS", "CHECKSUM", "TOS", "DSCP", "TTL", "HL", "CLASSIFY":
		return nil, false
	}
	return r.done(effect{act: actUnknown, what: "xt target " + st.XTName + " (nft does not show its options)"}), true
}

// hasAction: the rule does something beyond matching and counting.
func hasAction(stmts []nft.Statement) bool {
	for _, st := range stmts {
		switch st.Kind {
		case nft.StmtMatch, nft.StmtNoOp:
		case nft.StmtXT:
			if st.XT == "target" {
				return true
			}
		default:
			return true
		}
	}
	return false
}

// ruleSideEffects names what a rule that ends without a verdict did, for
// its hop ("" when nothing worth a hop).
func ruleSideEffects(stmts []nft.Statement) string {
	var parts []string
	for _, st := range stmts {
		switch st.Kind {
		case nft.StmtSet:
			parts = append(parts, st.Text)
		case nft.StmtSetUpdate:
			parts = append(parts, st.SetOp+" @"+st.SetName)
		case nft.StmtNotrack:
			parts = append(parts, "notrack")
		}
	}
	return strings.Join(parts, "; ")
}

func verdictWords(ws []string) (string, string) {
	s := strings.Join(ws, " ")
	v, target, _ := strings.Cut(s, " ")
	return v, unquoteWord(strings.TrimSpace(target))
}

func verdictEffect(v, target string) effect {
	switch v {
	case "accept":
		return effect{act: actAccept}
	case "drop":
		return effect{act: actDrop}
	case "return":
		return effect{act: actReturn}
	case "continue":
		return effect{act: actNext}
	case "jump":
		return effect{act: actJump, target: target}
	case "goto":
		return effect{act: actGoto, target: target}
	case "queue":
		return effect{act: actUnknown, what: "queue (a userspace program decides)"}
	}
	return effect{act: actUnknown, what: "verdict " + strings.TrimSpace(v+" "+target)}
}

func rejectName(with string, fam kubeproxy.Family) string {
	kind, what, _ := strings.Cut(with, " ")
	switch kind {
	case "":
		if fam == kubeproxy.IPv6 {
			return "icmp6-port-unreachable"
		}
		return "icmp-port-unreachable"
	case "tcp":
		return "tcp-reset"
	case "icmp":
		return "icmp-" + what
	case "icmpv6":
		return "icmp6-" + what
	}
	return kind + "-" + what
}

// selector status.
type selStatus uint8

const (
	selOK      selStatus = iota
	selAbsent            // the packet has no such field (ip daddr of an IPv6 packet): no match
	selUnknown           // not known here
)

// selector reads one field of the packet.
func (w *walk) selector(t *thread, name string) (value, selStatus) {
	v4 := w.pkt.Family != kubeproxy.IPv6
	proto, _ := protoNumber(w.pkt.Protocol)
	hook := ""
	if len(t.hooks) > 0 {
		hook = t.hooks[0]
	}
	addr := func(a netip.Addr, want4 bool) (value, selStatus) {
		if v4 != want4 {
			return value{}, selAbsent
		}
		return value{t: tAddr, addr: a.Unmap()}, selOK
	}
	switch name {
	case "ip saddr":
		return addr(t.src.Addr(), true)
	case "ip daddr":
		return addr(t.dst.Addr(), true)
	case "ip6 saddr":
		return addr(t.src.Addr(), false)
	case "ip6 daddr":
		return addr(t.dst.Addr(), false)
	case "ip protocol":
		if !v4 {
			return value{}, selAbsent
		}
		return value{t: tProto, num: proto}, selOK
	case "ip6 nexthdr":
		if v4 {
			return value{}, selAbsent
		}
		return value{t: tProto, num: proto}, selOK
	case "meta l4proto":
		return value{t: tProto, num: proto}, selOK
	case "meta nfproto":
		if v4 {
			return value{t: tNfproto, str: "ipv4"}, selOK
		}
		return value{t: tNfproto, str: "ipv6"}, selOK
	case "th dport", "th sport":
		if proto != 6 && proto != 17 && proto != 132 && proto != 136 && proto != 33 {
			return value{}, selAbsent
		}
		return portOf(t, name == "th dport"), selOK
	case "tcp dport", "tcp sport", "udp dport", "udp sport", "sctp dport", "sctp sport", "udplite dport", "udplite sport", "dccp dport", "dccp sport":
		p, field, _ := strings.Cut(name, " ")
		if !strings.EqualFold(p, w.pkt.Protocol) {
			return value{}, selAbsent
		}
		return portOf(t, field == "dport"), selOK
	case "tcp flags":
		if proto != 6 {
			return value{}, selAbsent
		}
		return value{t: tNum, num: tcpSYN}, selOK
	case "meta mark":
		return value{t: tNum, num: uint64(t.mark)}, selOK
	case "ct mark":
		if t.untracked {
			return value{}, selAbsent
		}
		return value{t: tNum, num: uint64(t.ctmark)}, selOK
	case "meta iifname", "meta iif":
		return w.iifSelector(t, hook)
	case "meta oifname", "meta oif":
		return w.oifSelector(hook)
	case "meta pkttype":
		return value{t: tPkttype, str: "host"}, selOK
	case "ct state":
		return value{t: tCTState, num: t.ctstate}, selOK
	case "ct status":
		if t.untracked || t.ctstate&ctNew == 0 {
			return value{}, selAbsent
		}
		return value{t: tCTStatus, num: t.ctstatus}, selOK
	case "ct direction":
		return value{t: tCTDir, str: "original"}, selOK
	case "ct original saddr", "ct original ip saddr", "ct original ip6 saddr":
		return value{t: tAddr, addr: t.origSrc.Addr().Unmap()}, selOK
	case "ct original daddr", "ct original ip daddr", "ct original ip6 daddr":
		return value{t: tAddr, addr: t.origDst.Addr().Unmap()}, selOK
	case "ct zone":
		return value{t: tNum, num: 0}, selOK
	case "fib daddr type", "fib daddr . iif type":
		return w.fibType(t.dst.Addr()), selOK
	case "fib saddr type", "fib saddr . iif type":
		return w.fibType(t.src.Addr()), selOK
	}
	return value{}, selUnknown
}

// portOf is the packet's destination port, or its source port.
func portOf(t *thread, dport bool) value {
	if dport {
		return value{t: tPort, num: uint64(t.dst.Port())}
	}
	return value{t: tPort, num: uint64(t.src.Port())}
}

// iifSelector is the interface the packet came in on: none for a packet
// the node sends, until it is routed.
func (w *walk) iifSelector(t *thread, hook string) (value, selStatus) {
	if hook == hookOutput || hook == hookPostrouting && !t.routed && w.pkt.Origin == FromNode {
		return value{t: tIface, str: ""}, selOK
	}
	if !t.iifKnown {
		return value{}, selUnknown
	}
	return value{t: tIface, str: t.iif}, selOK
}

// oifSelector is the interface the packet goes out on: none before routing.
func (w *walk) oifSelector(hook string) (value, selStatus) {
	if hook == hookPrerouting || hook == hookInput {
		return value{t: tIface, str: ""}, selOK
	}
	if w.pkt.OutIface == "" {
		return value{}, selUnknown
	}
	return value{t: tIface, str: w.pkt.OutIface}, selOK
}

func (w *walk) fibType(a netip.Addr) value {
	switch {
	case w.e.isLocal(a):
		return value{t: tFibType, str: "local"}
	case a.IsMulticast():
		return value{t: tFibType, str: "multicast"}
	}
	return value{t: tFibType, str: "unicast"}
}

// nftKey evaluates the key of a lookup: one selector or a concatenation.
//
// The values are scratch, valid until the next key is evaluated.
func (w *walk) nftKey(t *thread, ch chainRef, e *nft.Expr) ([]value, cond) {
	vals := w.vals[:0]
	if e.Kind != nft.ExprConcat {
		v, c := w.nftValue(t, e)
		if c.kind != condTrue {
			return nil, c
		}
		w.vals = append(vals, v)
		return w.vals, yes
	}
	for _, p := range e.Args {
		v, c := w.nftValue(t, p)
		if c.kind != condTrue {
			return nil, c
		}
		vals = append(vals, v)
	}
	w.vals = vals
	return vals, yes
}

// nftValue evaluates a selector or a numeric expression over selectors.
func (w *walk) nftValue(t *thread, e *nft.Expr) (value, cond) {
	switch e.Kind {
	case nft.ExprSelector:
		v, st := w.selector(t, e.Name)
		switch st {
		case selAbsent:
			return value{}, no
		case selUnknown:
			return value{}, unknown("%s (not known here)", e.Name)
		}
		return v, yes
	case nft.ExprBinop:
		l, c := w.nftValue(t, e.Args[0])
		if c.kind != condTrue {
			return value{}, c
		}
		if e.Args[1].Kind != nft.ExprLiteral {
			return value{}, unknown("%s", e.String())
		}
		r, ok := literalNum(l.t, e.Args[1].Name)
		if !ok {
			return value{}, unknown("%s", e.String())
		}
		n := l.num
		switch e.Name {
		case "&":
			n &= r
		case "|":
			n |= r
		case "^":
			n ^= r
		case "<<":
			n <<= r
		case ">>":
			n >>= r
		}
		if l.t == tNum || l.t == tCTState || l.t == tCTStatus {
			n &= 0xffffffffffffffff
		}
		return value{t: l.t, num: n}, yes
	}
	return value{}, unknown("%s", e.String())
}

// literalNum reads a number, or flags of the type t (tcp flags, ct state).
func literalNum(t fieldType, s string) (uint64, bool) {
	if n, ok := parseUint(s); ok {
		return n, true
	}
	var n uint64
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == '|' || r == ',' }) {
		switch t {
		case tCTState:
			b, ok := ctStateBits[f]
			if !ok {
				return 0, false
			}
			n |= b
		case tCTStatus:
			b, ok := ctStatusBits[f]
			if !ok {
				return 0, false
			}
			n |= b
		default:
			b, ok := tcpFlagBits[strings.ToUpper(f)]
			if !ok {
				return 0, false
			}
			n |= uint64(b)
		}
	}
	return n, true
}

// nftMatch evaluates a match statement.
func (w *walk) nftMatch(t *thread, ch chainRef, st nft.Statement) cond {
	if c, ok := w.randomMatch(st); ok {
		return c
	}
	if st.Left.Kind == nft.ExprNumgen {
		return unknown("%s", st.Text)
	}
	vals, c := w.nftKey(t, ch, st.Left)
	if c.kind == condUnknown {
		// an interface not known, against one name: the statement is the
		// same as iptables' -i/-o
		if sel := st.Left.Name; (sel == "meta iifname" || sel == "meta oifname") && st.Right.Kind == nft.ExprLiteral && (st.Op == "==" || st.Op == "!=") {
			c = inIface(st.Right.Name)
			if sel == "meta oifname" {
				c = outIface(st.Right.Name)
			}
			return not(c, st.Op == "!=")
		}
		return unknown("%s", st.Text)
	}
	if c.kind != condTrue {
		return c
	}
	negate := false
	switch st.Op {
	case "==":
	case "!=":
		negate = true
	case "<", ">", "<=", ">=":
		if len(vals) != 1 || st.Right.Kind != nft.ExprLiteral {
			return unknown("%s", st.Text)
		}
		r, ok := literalNum(vals[0].t, st.Right.Name)
		if !ok || vals[0].t == tAddr {
			return unknown("%s", st.Text)
		}
		l := vals[0].num
		switch st.Op {
		case "<":
			return truth(l < r)
		case ">":
			return truth(l > r)
		case "<=":
			return truth(l <= r)
		}
		return truth(l >= r)
	default:
		return unknown("%s", st.Text)
	}
	var m bool
	switch st.Right.Kind {
	case nft.ExprSetRef:
		set, ok := w.namedSet(ch, st.Right.Name)
		if !ok {
			return unknown("set @%s (not in the input)", st.Right.Name)
		}
		el, ok := w.e.lookup(set.elements, vals)
		if !ok {
			return unknown("set @%s (its elements could not be read as %s)", st.Right.Name, st.Left.String())
		}
		m = el != nil
		if set.affinity {
			t.aff = &Affinity{Record: set.name, Seconds: set.timeout, Known: true, Pinned: m}
		}
	default:
		words, ok := w.e.alternatives(st.Right)
		if !ok {
			return unknown("%s", st.Text)
		}
		for _, key := range words {
			if len(key) != len(vals) {
				return unknown("%s", st.Text)
			}
			mm, ok := keyMatchesMasked(key, vals)
			if !ok {
				return unknown("%s", st.Text)
			}
			if mm {
				m = true
				break
			}
		}
	}
	return truth(m != negate)
}

// keyMatchesMasked is keyMatches, where a flag value (ct state, tcp
// flags) matches when any of its bits is set.
func keyMatchesMasked(key []string, vals []value) (bool, bool) {
	for j, w := range key {
		v := vals[j]
		if v.t == tNum && strings.ContainsAny(w, "|,") || v.t == tNum && !isNumberWord(w) {
			n, ok := literalNum(v.t, w)
			if !ok {
				return false, false
			}
			if v.num&n == 0 {
				return false, true
			}
			continue
		}
		m, ok := matchLiteral(v, w)
		if !ok {
			return false, false
		}
		if !m {
			return false, true
		}
	}
	return true, true
}

func isNumberWord(s string) bool {
	_, ok := parseUint(s)
	if ok {
		return true
	}
	if lo, hi, ok := strings.Cut(s, "-"); ok {
		_, a := parseUint(lo)
		_, b := parseUint(hi)
		return a && b
	}
	return false
}

// alternatives are rhsAlternatives of e, worked out once.
func (e *Evaluator) alternatives(x *nft.Expr) ([][]string, bool) {
	if a, ok := e.alts[x]; ok {
		return a.words, a.ok
	}
	words, ok := rhsAlternatives(x)
	e.alts[x] = alternativeWords{words, ok}
	return words, ok
}

type alternativeWords struct {
	words [][]string
	ok    bool
}

// rhsAlternatives are the keys a match's right side allows, as words: one
// literal or concatenation, a flag list, or an anonymous set.
func rhsAlternatives(e *nft.Expr) ([][]string, bool) {
	switch e.Kind {
	case nft.ExprLiteral:
		return [][]string{{e.Name}}, true
	case nft.ExprConcat:
		ws, ok := exprWords(e)
		return [][]string{ws}, ok
	case nft.ExprList:
		var out [][]string
		for _, a := range e.Args {
			out = append(out, []string{a.Name})
		}
		return out, true
	case nft.ExprSet:
		var out [][]string
		for _, el := range e.Elems {
			ws, ok := exprWords(el.Key)
			if !ok {
				return nil, false
			}
			out = append(out, ws)
		}
		return out, true
	}
	return nil, false
}

// exprWords are the literal words of a literal or a concatenation.
func exprWords(e *nft.Expr) ([]string, bool) {
	switch e.Kind {
	case nft.ExprLiteral:
		return []string{e.Name}, true
	case nft.ExprConcat:
		var ws []string
		for _, a := range e.Args {
			if a.Kind != nft.ExprLiteral {
				return nil, false
			}
			ws = append(ws, a.Name)
		}
		return ws, true
	}
	return nil, false
}

// randomMatch is iptables-nft's statistic: `meta random & 2147483647 <
// N` matches with probability N/2^31.
func (w *walk) randomMatch(st nft.Statement) (cond, bool) {
	l := st.Left
	if l.Kind != nft.ExprBinop || l.Name != "&" || l.Args[0].Kind != nft.ExprSelector || l.Args[0].Name != "meta random" {
		if l.Kind == nft.ExprSelector && l.Name == "meta random" {
			return unknown("%s", st.Text), true
		}
		return cond{}, false
	}
	mask, ok1 := parseUint(l.Args[1].Name)
	n, ok2 := uint64(0), false
	if st.Right.Kind == nft.ExprLiteral {
		n, ok2 = parseUint(st.Right.Name)
	}
	if !ok1 || !ok2 || st.Op != "<" || mask == 0 || bits.OnesCount64(mask+1) != 1 {
		return unknown("%s", st.Text), true
	}
	if n > mask+1 {
		n = mask + 1
	}
	return cond{kind: condRandom, p: Fraction(n, mask+1)}, true
}

// namedSet is a set (or map) of ch's table, as a lookup sees it.
type namedSet struct {
	name     string
	elements *[]*knftables.Element
	timeout  int  // seconds; 0 when none
	affinity bool // a ClientIP-affinity set: dynamic, with a timeout
}

func (w *walk) namedSet(ch chainRef, name string) (namedSet, bool) {
	if ch.nt == nil {
		return namedSet{}, false
	}
	if s := ch.nt.Set(name); s != nil {
		ns := namedSet{name: s.Name, elements: &s.Elements}
		if s.Timeout != nil {
			ns.timeout = int(s.Timeout.Seconds())
		}
		ns.affinity = s.Timeout != nil || strings.HasPrefix(s.Name, kubeproxy.NFTPrefixAffinity)
		return ns, true
	}
	if m := ch.nt.Map(name); m != nil {
		return namedSet{name: m.Name, elements: &m.Elements}, true
	}
	return namedSet{}, false
}

// mapLookup finds vals in the map m (a named one or an anonymous one):
// the element of a named map, or the value of an anonymous one; ok false
// when the map cannot be read.
func (w *walk) mapLookup(ch chainRef, m *nft.Expr, vals []value) (*knftables.Element, *nft.Expr, bool) {
	if m.Kind == nft.ExprSetRef {
		if ch.nt == nil {
			return nil, nil, false
		}
		mp := ch.nt.Map(m.Name)
		if mp == nil {
			return nil, nil, false
		}
		el, ok := w.e.lookup(&mp.Elements, vals)
		return el, nil, ok
	}
	for _, el := range m.Elems {
		ws, ok := exprWords(el.Key)
		if !ok {
			return nil, nil, false
		}
		mm, ok := keyMatches(ws, vals)
		if !ok {
			return nil, nil, false
		}
		if mm {
			return nil, el.Value, true
		}
	}
	return nil, nil, true
}

// numgenFork forks t over the N values of `numgen random mod N`, each
// with probability 1/N, looking each up in m; apply says what the
// element found (or none) does.
func (w *walk) numgenFork(t *thread, ch chainRef, ng, m *nft.Expr, others []branch,
	apply func(th *thread, el *knftables.Element, value *nft.Expr) effect) []branch {
	n := ng.Mod
	if ng.Name != "random" && ng.Name != "inc" || n == 0 || n > 1<<16 {
		return w.result(t, effect{act: actUnknown, what: ng.String()}, others)
	}
	share := Fraction(1, n)
	each := t.prob.Mul(share)
	out := make([]branch, 0, int(n)+len(others))
	for k := uint64(0); k < n; k++ {
		th := t
		if k > 0 {
			th = w.clone(t)
		}
		th.prob = each
		el, value, ok := w.mapLookup(ch, m, []value{{t: tNum, num: k + ng.Offset}})
		var eff effect
		if !ok {
			eff = effect{act: actUnknown, what: "the map of " + ng.String()}
		} else {
			eff = apply(th, el, value)
		}
		eff.share = &share // read only: every branch's share is the same
		out = append(out, branch{t: th, eff: eff})
	}
	return append(out, others...)
}

// nftNAT applies dnat, snat, masquerade, redirect.
func (w *walk) nftNAT(t *thread, ch chainRef, st nft.Statement, others []branch, share *Prob) []branch {
	done := func(eff effect) []branch {
		if eff.share == nil {
			eff.share = share
		}
		return w.result(t, eff, others)
	}
	switch st.NAT {
	case "masquerade":
		t.masq, t.natSrc = true, true
		t.ctstatus |= ctsSNAT
		return done(effect{act: actNAT, verb: "masquerade", what: "masquerade"})
	case "snat":
		t.masq, t.natSrc = true, true
		t.ctstatus |= ctsSNAT
		t.snatTo = st.To.String()
		return done(effect{act: actNAT, verb: "snat", what: "SNAT to " + st.To.String()})
	case "redirect":
		port := ""
		if st.Port != nil {
			port = st.Port.Name
		}
		return done(w.redirect(t, port))
	}
	// dnat
	if st.To == nil {
		return done(effect{act: actUnknown, what: st.Text})
	}
	if st.To.Kind == nft.ExprMap {
		key, m := st.To.Args[0], st.To.Args[1]
		target := func(th *thread, value *nft.Expr, el *knftables.Element) effect {
			var ws []string
			switch {
			case value != nil:
				ws, _ = exprWords(value)
			case el != nil:
				ws = el.Value
			default:
				return effect{act: actUnknown, what: "dnat: no map element for this packet (the kernel drops it)"}
			}
			return w.dnatWords(th, ws, st.AddrPort)
		}
		if key.Kind == nft.ExprNumgen {
			res := w.numgenFork(t, ch, key, m, nil, func(th *thread, el *knftables.Element, value *nft.Expr) effect {
				return target(th, value, el)
			})
			return append(res, others...)
		}
		vals, c := w.nftKey(t, ch, key)
		if c.kind != condTrue {
			return done(effect{act: actUnknown, what: st.Text})
		}
		el, value, ok := w.mapLookup(ch, m, vals)
		if !ok {
			return done(effect{act: actUnknown, what: st.Text})
		}
		return done(target(t, value, el))
	}
	ws, ok := exprWords(st.To)
	if !ok {
		return done(effect{act: actUnknown, what: st.Text})
	}
	if st.Port != nil && !st.AddrPort {
		ws = append(ws, st.Port.Name)
		return done(w.dnatWords(t, ws, true))
	}
	return done(w.dnatWords(t, ws, st.AddrPort))
}

// dnatWords DNATs to an address (and port): ["10.0.0.1", "80"] with
// addrPort, ["10.0.0.1:80"] or ["10.0.0.1"] without.
func (w *walk) dnatWords(t *thread, ws []string, addrPort bool) effect {
	switch {
	case len(ws) == 2:
		a, err := netip.ParseAddr(strings.Trim(ws[0], "[]"))
		p, ok := parsePort(ws[1])
		if err != nil || !ok {
			return effect{act: actUnknown, what: "dnat to " + strings.Join(ws, " . ")}
		}
		return w.dnatAddr(t, netip.AddrPortFrom(a, p))
	case len(ws) == 1:
		return w.dnatTo(t, ws[0])
	}
	return effect{act: actUnknown, what: "dnat to " + strings.Join(ws, " . ")}
}

// nftSet applies `meta mark set …`, `ct mark set …`; false (with the
// effect) when it ends the rule.
func (w *walk) nftSet(t *thread, st nft.Statement) (effect, bool) {
	switch st.Left.Name {
	case "meta mark", "ct mark":
		v, c := w.nftSetValue(t, st.Right)
		if c.kind != condTrue {
			return effect{act: actUnknown, what: st.Text}, false
		}
		if st.Left.Name == "meta mark" {
			t.mark = uint32(v)
		} else {
			t.ctmark = uint32(v)
		}
		return effect{}, true
	}
	return effect{}, true // nftrace, priority, dscp …: nothing a walk looks at
}

func (w *walk) nftSetValue(t *thread, e *nft.Expr) (uint64, cond) {
	if e.Kind == nft.ExprLiteral {
		n, ok := parseUint(e.Name)
		if !ok {
			return 0, unknown("%s", e.Name)
		}
		return n, yes
	}
	v, c := w.nftValue(t, e)
	return v.num, c
}

// xtMatch is an iptables-nft compat match, whose options nft does not
// show: those that match any packet, recent by its place (before a DNAT in
// the same rule: kube-proxy's --set; else its --rcheck), the rest not
// modelled.
func (w *walk) xtMatch(t *thread, rest []nft.Statement, st nft.Statement) cond {
	switch st.XTName {
	case "comment", "nfacct", "tcp", "udp", "conntrack":
		return yes
	case "recent":
		// kube-proxy names a recent list after the endpoint chain it
		// jumps to: so does the walk.
		rec := ""
		for _, s := range rest {
			switch {
			case s.Kind == nft.StmtNAT:
				return yes // --set, then DNAT: always matches
			case s.Kind == nft.StmtVerdict && (s.Verdict == "jump" || s.Verdict == "goto"):
				rec = s.Target
			}
		}
		if rec == "" {
			return unknown("xt match recent (nft does not show its options)")
		}
		if pinned, ok := w.opts.Pinned[rec]; ok {
			return cond{kind: condAffinity, aff: Affinity{Record: rec, Known: true, Pinned: pinned}}
		}
		return cond{kind: condAffinity, aff: Affinity{Record: rec}}
	}
	return unknown("xt match %s (nft does not show its options)", st.XTName)
}
