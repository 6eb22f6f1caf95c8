package nft

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
)

// This file reads one nftables rule into its statements, for the packet
// evaluator (package evaluate): what each statement matches or does, in
// the spellings nft lists (`meta mark set meta mark | 0x00004000`) and
// kube-proxy writes (`mark set mark or 0x4000`). The readers' fast
// analysis (NFTRuleInfo) stays what attribution needs; this is the whole
// rule, read on demand for the few rules a walk visits.
//
// Values stay words: what "tcp", "new" or "0x4000" means depends on the
// expression they are compared with, which the evaluator knows.

// StmtKind is what a statement does.
type StmtKind uint8

const (
	// StmtMatch compares an expression: Left Op Right.
	StmtMatch StmtKind = iota + 1
	// StmtVerdict is accept, drop, continue, return, jump, goto, queue.
	StmtVerdict
	// StmtVmap looks Left up in a verdict map (Right: a named map or an
	// anonymous one) and applies the verdict found.
	StmtVmap
	// StmtNAT is dnat, snat, masquerade or redirect.
	StmtNAT
	// StmtSet is `meta mark set EXPR`, `ct mark set EXPR`, `meta nftrace
	// set 1` …: Left is what is set, Right the value.
	StmtSet
	// StmtReject is reject [with …].
	StmtReject
	// StmtSetUpdate is `update|add|delete @set { EXPR [timeout T] }`.
	StmtSetUpdate
	// StmtNoOp changes nothing a walk looks at: counter, log, comment.
	StmtNoOp
	// StmtXT is iptables-nft's compat expression `xt match|target NAME`,
	// whose arguments nft does not show.
	StmtXT
	// StmtNotrack is notrack.
	StmtNotrack
	// StmtUnknown is text the reader does not understand; Text holds it.
	StmtUnknown
)

// Statement is one statement of a rule.
type Statement struct {
	Kind StmtKind
	// Text is the statement as written.
	Text string

	// StmtMatch: Left Op Right (Op "==" when implicit; for a set or
	// named set, "==" means "is in"). StmtVmap: Left and Right (the
	// map). StmtSet: Left (a selector) and Right.
	Left  *Expr
	Op    string
	Right *Expr

	// StmtVerdict: Verdict (accept, drop, continue, return, jump, goto,
	// queue), Target the chain of jump/goto.
	Verdict, Target string

	// StmtNAT: NAT (dnat, snat, masquerade, redirect); Family "ip", "ip6"
	// or ""; AddrPort: the `addr . port to` form, where To yields an
	// (address, port) pair; To the address (literal, map lookup); Port a
	// separate port (`to :80`, `to 10.0.0.1:80` splits into To and
	// Port); Flags (fully-random, random, persistent).
	NAT      string
	Family   string
	AddrPort bool
	To, Port *Expr
	Flags    []string

	// StmtReject: RejectWith is the reject type as nft prints it after
	// "with" ("icmp port-unreachable", "tcp reset"), "" for the default.
	RejectWith string

	// StmtSetUpdate: SetOp (update, add, delete), SetName, Key.
	SetOp, SetName string
	Key            *Expr

	// StmtXT: XT is "match" or "target", XTName the extension's name.
	XT, XTName string
}

// ExprKind is the kind of an expression.
type ExprKind uint8

const (
	// ExprSelector reads a field of the packet or its connection: Name is
	// "ip daddr", "meta l4proto", "th dport", "ct state", "fib daddr type",
	// "meta mark", …
	ExprSelector ExprKind = iota + 1
	// ExprLiteral is a value as written: an address, a prefix
	// ("10.0.0.0/8"), a range ("30000-32767"), a number, a name ("tcp").
	ExprLiteral
	// ExprConcat is Args joined by " . ".
	ExprConcat
	// ExprBinop is Args[0] Name Args[1], Name one of & | ^ << >>.
	ExprBinop
	// ExprSet is an anonymous set or map: Elems.
	ExprSet
	// ExprSetRef is a named set or map: Name without the "@".
	ExprSetRef
	// ExprNumgen is `numgen random|inc mod Mod [offset Offset]`; Name is
	// the mode.
	ExprNumgen
	// ExprMap is Args[0] looked up in the map Args[1] (`EXPR map {…}`).
	ExprMap
	// ExprList is a comma list of flags (`established,related`).
	ExprList
)

// Expr is an expression of a statement.
type Expr struct {
	Kind ExprKind
	Name string
	Args []*Expr
	// Elems are the elements of an anonymous set or map.
	Elems []Elem
	// Mod and Offset are numgen's.
	Mod, Offset uint64
}

// Elem is an element of an anonymous set (Value nil) or map.
type Elem struct {
	Key *Expr
	// Value is a map element's value: data (an address, "addr . port")
	// or a verdict ("goto chain", "drop"), as an expression of literals.
	Value *Expr
}

// String renders e as nft would (near enough for messages).
func (e *Expr) String() string {
	if e == nil {
		return ""
	}
	switch e.Kind {
	case ExprSelector, ExprLiteral:
		return e.Name
	case ExprSetRef:
		return "@" + e.Name
	case ExprConcat:
		parts := make([]string, len(e.Args))
		for i, a := range e.Args {
			parts[i] = a.String()
		}
		return strings.Join(parts, " . ")
	case ExprBinop:
		return e.Args[0].String() + " " + e.Name + " " + e.Args[1].String()
	case ExprList:
		parts := make([]string, len(e.Args))
		for i, a := range e.Args {
			parts[i] = a.String()
		}
		return strings.Join(parts, ",")
	case ExprNumgen:
		s := "numgen " + e.Name + " mod " + strconv.FormatUint(e.Mod, 10)
		if e.Offset != 0 {
			s += " offset " + strconv.FormatUint(e.Offset, 10)
		}
		return s
	case ExprMap:
		return e.Args[0].String() + " map " + e.Args[1].String()
	case ExprSet:
		parts := make([]string, len(e.Elems))
		for i, el := range e.Elems {
			parts[i] = el.Key.String()
			if el.Value != nil {
				parts[i] += " : " + el.Value.String()
			}
		}
		return "{ " + strings.Join(parts, ", ") + " }"
	}
	return "?"
}

// maxRuleTokens bounds the work ParseStatements does on one rule: a rule
// longer than this is one unknown statement.
const maxRuleTokens = 1 << 20

// ParseStatements reads the statements of one rule's text. It never
// fails: what it cannot read becomes StmtUnknown statements, each as
// short as the reader can make it, so that a walk knows exactly which
// parts it could not evaluate.
func ParseStatements(text string) []Statement {
	p := &stmtParser{text: text}
	// The tokens are scratch (statements keep substrings of text, not
	// tokens): an evaluator parses a rule per rule it visits, and growing
	// a fresh token list each time was most of what parsing allocated.
	buf := tokPool.Get().(*[]ruleTok)
	p.toks = lexRule((*buf)[:0], text)
	defer func() {
		if cap(p.toks) <= pooledTokens {
			*buf = p.toks[:0]
			tokPool.Put(buf)
		}
	}()
	if len(p.toks) > maxRuleTokens {
		return []Statement{{Kind: StmtUnknown, Text: text}}
	}
	var out []Statement
	for p.i < len(p.toks) {
		start := p.i
		st, ok := p.statement()
		if !ok || p.i == start {
			// Skip to the next word that starts a statement we know.
			p.i = start + 1
			for p.i < len(p.toks) && !startsStatement(p, p.i) {
				p.i++
			}
			st = Statement{Kind: StmtUnknown}
		}
		st.Text = p.span(start, p.i)
		out = append(out, st)
	}
	return out
}

type ruleTok struct {
	s        string
	from, to int
}

type stmtParser struct {
	text string
	toks []ruleTok
	i    int
	// exprs is where the rule's expressions are cut from: a Service's
	// numgen map has a few per endpoint, and an allocation each was most
	// of what an evaluator's parsing allocated.
	exprs []Expr
}

// newExpr is e in the parser's slab; a full slab is left to the
// expressions it holds (their pointers stay good) for a new one.
func (p *stmtParser) newExpr(e Expr) *Expr {
	if len(p.exprs) == cap(p.exprs) {
		// A rule has about an expression per two tokens.
		p.exprs = make([]Expr, 0, max(8, (len(p.toks)-p.i)/2+1))
	}
	p.exprs = append(p.exprs, e)
	return &p.exprs[len(p.exprs)-1]
}

// lexRule splits rule text into words, quoted strings (quotes kept) and
// the punctuation `{ } , ( )`; a ',' or '}' that ends a word is a token of
// its own.
// pooledTokens: a token list longer than a large rule's is not kept.
const pooledTokens = 4096

var tokPool = sync.Pool{New: func() any { return new([]ruleTok) }}

// lexRule appends the tokens of s to out.
func lexRule(out []ruleTok, s string) []ruleTok {
	i := 0
	for i < len(s) {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '{' || c == '}' || c == ',' || c == '(' || c == ')':
			out = append(out, ruleTok{s[i : i+1], i, i + 1})
			i++
		case c == '"':
			j := i + 1
			for j < len(s) && s[j] != '"' {
				if s[j] == '\\' && j+1 < len(s) {
					j++
				}
				j++
			}
			if j < len(s) {
				j++
			}
			out = append(out, ruleTok{s[i:j], i, j})
			i = j
		default:
			j := i
			for j < len(s) {
				d := s[j]
				if d == ' ' || d == '\t' || d == '\n' || d == '\r' || d == '{' || d == '}' || d == ',' || d == '(' || d == ')' || d == '"' {
					break
				}
				j++
			}
			out = append(out, ruleTok{s[i:j], i, j})
			i = j
		}
	}
	return out
}

func (p *stmtParser) tok(i int) string {
	if i >= 0 && i < len(p.toks) {
		return p.toks[i].s
	}
	return ""
}

func (p *stmtParser) peek() string { return p.tok(p.i) }

func (p *stmtParser) next() string {
	t := p.tok(p.i)
	p.i++
	return t
}

func (p *stmtParser) span(from, to int) string {
	if from >= to || from >= len(p.toks) {
		return ""
	}
	to = min(to, len(p.toks))
	return p.text[p.toks[from].from:p.toks[to-1].to]
}

// statementWords start a statement that is not a match.
var statementWords = map[string]bool{
	"accept": true, "drop": true, "continue": true, "return": true, "jump": true, "goto": true, "queue": true,
	"dnat": true, "snat": true, "masquerade": true, "redirect": true, "reject": true,
	"counter": true, "log": true, "comment": true, "limit": true, "quota": true,
	"update": true, "add": true, "delete": true, "notrack": true, "xt": true, "XT": true,
}

// selectorWords start an expression (and so a match, or `… set`).
var selectorWords = map[string]bool{
	"ip": true, "ip6": true, "tcp": true, "udp": true, "sctp": true, "udplite": true, "dccp": true, "th": true,
	"icmp": true, "icmpv6": true, "meta": true, "ct": true, "fib": true, "numgen": true,
	"mark": true, "iif": true, "oif": true, "iifname": true, "oifname": true, "l4proto": true, "nfproto": true,
	"iiftype": true, "oiftype": true, "skuid": true, "skgid": true, "pkttype": true, "ether": true, "vlan": true,
	"socket": true, "rt": true, "ipsec": true, "exthdr": true, "tcpopt": true, "osf": true, "symhash": true, "jhash": true,
}

func startsStatement(p *stmtParser, i int) bool {
	t := p.tok(i)
	return statementWords[t] || selectorWords[t] && !isValueContext(p, i)
}

// isValueContext: the word at i follows a comparison (so "tcp" is a value
// there, not a selector).
func isValueContext(p *stmtParser, i int) bool {
	prev := p.tok(i - 1)
	return isCmpOp(prev) || prev == "l4proto" || prev == "protocol" || prev == "nexthdr" || prev == "."
}

func (p *stmtParser) statement() (Statement, bool) {
	switch t := p.peek(); t {
	case "accept", "drop", "continue", "return":
		p.i++
		return Statement{Kind: StmtVerdict, Verdict: t}, true
	case "jump", "goto":
		p.i++
		target := unquote(p.next())
		if target == "" {
			return Statement{}, false
		}
		return Statement{Kind: StmtVerdict, Verdict: t, Target: target}, true
	case "queue":
		p.i++
		for p.i < len(p.toks) && !startsStatement(p, p.i) {
			p.i++
		}
		return Statement{Kind: StmtVerdict, Verdict: "queue"}, true
	case "counter":
		p.i++
		switch p.peek() {
		case "packets":
			p.i += 4 // packets N bytes M
		case "name":
			p.i += 2
		}
		return Statement{Kind: StmtNoOp}, true
	case "log":
		p.i++
		for p.i < len(p.toks) {
			switch p.peek() {
			case "prefix", "level", "group", "snaplen", "queue-threshold", "flags":
				p.i += 2
				for p.peek() == "," { // flags tcp sequence,options
					p.i += 2
				}
				continue
			}
			break
		}
		return Statement{Kind: StmtNoOp}, true
	case "comment":
		p.i += 2
		return Statement{Kind: StmtNoOp}, true
	case "notrack":
		p.i++
		return Statement{Kind: StmtNotrack}, true
	case "xt", "XT":
		kind := p.tok(p.i + 1)
		if kind != "match" && kind != "target" {
			return Statement{}, false
		}
		name := unquote(p.tok(p.i + 2))
		p.i += 3
		if p.peek() == "not" && p.tok(p.i+1) == "found" {
			p.i += 2
		}
		return Statement{Kind: StmtXT, XT: kind, XTName: name}, true
	case "reject":
		p.i++
		st := Statement{Kind: StmtReject}
		if p.peek() == "with" {
			p.i++
			kind := p.next()
			what := p.next()
			if what == "type" {
				what = p.next()
			}
			st.RejectWith = kind + " " + what
		}
		return st, true
	case "dnat", "snat", "masquerade", "redirect":
		return p.nat()
	case "update", "add", "delete":
		return p.setUpdate()
	case "limit", "quota":
		return Statement{}, false // a match the evaluator does not model
	}
	return p.matchOrSet()
}

// nat reads dnat/snat/masquerade/redirect.
func (p *stmtParser) nat() (Statement, bool) {
	st := Statement{Kind: StmtNAT, NAT: p.next()}
	if t := p.peek(); t == "ip" || t == "ip6" {
		st.Family = t
		p.i++
	}
	if p.peek() == "addr" && p.tok(p.i+1) == "." && p.tok(p.i+2) == "port" {
		st.AddrPort = true
		p.i += 3
	}
	if p.peek() == "to" {
		p.i++
		if strings.HasPrefix(p.peek(), ":") { // redirect to :8080, masquerade to :1000-2000
			st.Port = p.newExpr(Expr{Kind: ExprLiteral, Name: p.next()[1:]})
		} else {
			e, ok := p.expr()
			if !ok {
				return Statement{}, false
			}
			if e.Kind == ExprLiteral && !st.AddrPort {
				st.To, st.Port = splitHostPort(e.Name)
			} else {
				st.To = e
			}
		}
	}
	for {
		switch t := p.peek(); t {
		case "fully-random", "random", "persistent", "netmap":
			st.Flags = append(st.Flags, t)
			p.i++
			for p.peek() == "," {
				p.i++
				st.Flags = append(st.Flags, p.next())
			}
			continue
		}
		break
	}
	return st, true
}

// splitHostPort splits "10.0.0.1:80", "[fd00::1]:80", "10.0.0.1" and
// "fd00::1" into an address and a port (nil when none).
func splitHostPort(s string) (*Expr, *Expr) {
	if strings.HasPrefix(s, "[") {
		if i := strings.Index(s, "]"); i > 0 {
			host := &Expr{Kind: ExprLiteral, Name: s[1:i]}
			if rest := s[i+1:]; strings.HasPrefix(rest, ":") && len(rest) > 1 {
				return host, &Expr{Kind: ExprLiteral, Name: rest[1:]}
			}
			return host, nil
		}
	}
	if strings.Count(s, ":") == 1 {
		host, port, _ := strings.Cut(s, ":")
		if host == "" {
			return nil, &Expr{Kind: ExprLiteral, Name: port}
		}
		return &Expr{Kind: ExprLiteral, Name: host}, &Expr{Kind: ExprLiteral, Name: port}
	}
	return &Expr{Kind: ExprLiteral, Name: s}, nil
}

// setUpdate reads `update @set { ip saddr [timeout 3h] }`.
func (p *stmtParser) setUpdate() (Statement, bool) {
	st := Statement{Kind: StmtSetUpdate, SetOp: p.next()}
	name := p.next()
	if !strings.HasPrefix(name, "@") || p.next() != "{" {
		return Statement{}, false
	}
	st.SetName = name[1:]
	key, ok := p.expr()
	if !ok {
		return Statement{}, false
	}
	st.Key = key
	for p.i < len(p.toks) && p.peek() != "}" {
		p.i++ // timeout 3h, counter …
	}
	if p.next() != "}" {
		return Statement{}, false
	}
	return st, true
}

// matchOrSet reads `EXPR [op] RHS`, `EXPR vmap MAP` or `SELECTOR set
// EXPR`.
func (p *stmtParser) matchOrSet() (Statement, bool) {
	left, ok := p.expr()
	if !ok {
		return Statement{}, false
	}
	switch t := p.peek(); {
	case t == "set" && left.Kind == ExprSelector:
		p.i++
		right, ok := p.expr()
		if !ok {
			return Statement{}, false
		}
		return Statement{Kind: StmtSet, Left: left, Right: right}, true
	case t == "vmap":
		p.i++
		right, ok := p.primary()
		if !ok || right.Kind != ExprSetRef && right.Kind != ExprSet {
			return Statement{}, false
		}
		return Statement{Kind: StmtVmap, Left: left, Right: right}, true
	}
	// A match: whatever follows the expression is its value, also a word
	// that elsewhere starts a statement (`ct status dnat`, `meta l4proto
	// tcp`).
	op := "=="
	if isCmpOp(p.peek()) {
		op = cmpOp(p.next())
	}
	if p.i >= len(p.toks) {
		return Statement{}, false // an expression with nothing to compare
	}
	right, ok := p.rhs()
	if !ok {
		return Statement{}, false
	}
	return Statement{Kind: StmtMatch, Left: left, Op: op, Right: right}, true
}

// rhs reads the right side of a match: a value, a comma list of flags, a
// set, a named set, or a concatenation of values.
func (p *stmtParser) rhs() (*Expr, bool) {
	e, ok := p.value()
	if !ok {
		return nil, false
	}
	if p.peek() == "." {
		parts := []*Expr{e}
		for p.peek() == "." {
			p.i++
			v, ok := p.value()
			if !ok {
				return nil, false
			}
			parts = append(parts, v)
		}
		e = p.newExpr(Expr{Kind: ExprConcat, Args: parts})
	}
	if p.peek() == "," && e.Kind == ExprLiteral { // ct state established,related
		list := p.newExpr(Expr{Kind: ExprList, Args: []*Expr{e}})
		for p.peek() == "," {
			p.i++
			v, ok := p.value()
			if !ok {
				return nil, false
			}
			list.Args = append(list.Args, v)
		}
		return list, true
	}
	return e, true
}

// value reads one value: a literal, a set, a named set.
func (p *stmtParser) value() (*Expr, bool) {
	switch t := p.peek(); {
	case t == "{":
		return p.set()
	case strings.HasPrefix(t, "@") && len(t) > 1:
		p.i++
		return p.newExpr(Expr{Kind: ExprSetRef, Name: t[1:]}), true
	case t == "" || t == "}" || t == "," || t == "(" || t == ")":
		return nil, false
	}
	p.i++
	return p.newExpr(Expr{Kind: ExprLiteral, Name: unquote(p.tok(p.i - 1))}), true
}

// set reads `{ a, b }` or `{ k : v, … }` (elements may be concatenations
// and carry `comment "…"`, `timeout …`, `expires …`).
func (p *stmtParser) set() (*Expr, bool) {
	if p.next() != "{" {
		return nil, false
	}
	s := p.newExpr(Expr{Kind: ExprSet})
	for p.i < len(p.toks) {
		if p.peek() == "}" {
			p.i++
			return s, true
		}
		key, ok := p.rhsNoList()
		if !ok {
			return nil, false
		}
		el := Elem{Key: key}
		p.skipElementOptions()
		if p.peek() == ":" {
			p.i++
			v, ok := p.elementValue()
			if !ok {
				return nil, false
			}
			el.Value = v
		}
		p.skipElementOptions()
		s.Elems = append(s.Elems, el)
		switch p.peek() {
		case ",":
			p.i++
		case "}":
		default:
			return nil, false
		}
	}
	return nil, false
}

func (p *stmtParser) skipElementOptions() {
	for {
		switch p.peek() {
		case "comment", "timeout", "expires":
			p.i += 2
			continue
		case "counter":
			p.i++
			if p.peek() == "packets" {
				p.i += 4
			}
			continue
		}
		return
	}
}

// rhsNoList reads a set element's key: a value or concatenation.
func (p *stmtParser) rhsNoList() (*Expr, bool) {
	e, ok := p.value()
	if !ok {
		return nil, false
	}
	if p.peek() != "." {
		return e, true
	}
	parts := []*Expr{e}
	for p.peek() == "." {
		p.i++
		v, ok := p.value()
		if !ok {
			return nil, false
		}
		parts = append(parts, v)
	}
	return p.newExpr(Expr{Kind: ExprConcat, Args: parts}), true
}

// elementValue reads a map element's value: a verdict (`goto chain`,
// `drop`) or data (`10.0.0.1 . 80`).
func (p *stmtParser) elementValue() (*Expr, bool) {
	switch t := p.peek(); t {
	case "jump", "goto":
		p.i += 2
		return p.newExpr(Expr{Kind: ExprLiteral, Name: t + " " + unquote(p.tok(p.i-1))}), true
	case "accept", "drop", "continue", "return":
		p.i++
		return p.newExpr(Expr{Kind: ExprLiteral, Name: t}), true
	}
	return p.rhsNoList()
}

// expr reads an expression: primaries joined by "." (a concatenation),
// with binary operators (& | ^ and or xor << >>), and `EXPR map {…}`.
func (p *stmtParser) expr() (*Expr, bool) {
	first, ok := p.operand()
	if !ok {
		return nil, false
	}
	if p.peek() != "." {
		return p.mapLookup(first)
	}
	parts := []*Expr{first}
	for p.peek() == "." {
		p.i++
		e, ok := p.operand()
		if !ok {
			return nil, false
		}
		parts = append(parts, e)
	}
	return p.mapLookup(p.newExpr(Expr{Kind: ExprConcat, Args: parts}))
}

func (p *stmtParser) mapLookup(e *Expr) (*Expr, bool) {
	if p.peek() != "map" {
		return e, true
	}
	p.i++
	m, ok := p.primary()
	if !ok || m.Kind != ExprSet && m.Kind != ExprSetRef {
		return nil, false
	}
	return p.newExpr(Expr{Kind: ExprMap, Args: []*Expr{e, m}}), true
}

// operand reads a primary with binary operators applied.
func (p *stmtParser) operand() (*Expr, bool) {
	e, ok := p.primary()
	if !ok {
		return nil, false
	}
	for {
		op := p.peek()
		switch op {
		case "and":
			op = "&"
		case "or":
			op = "|"
		case "xor":
			op = "^"
		case "&", "|", "^", "<<", ">>":
		default:
			return e, true
		}
		p.i++
		r, ok := p.primary()
		if !ok {
			return nil, false
		}
		e = p.newExpr(Expr{Kind: ExprBinop, Name: op, Args: []*Expr{e, r}})
	}
}

// primary reads a selector, numgen, a set, a parenthesised flag list or a
// literal.
func (p *stmtParser) primary() (*Expr, bool) {
	t := p.peek()
	switch t {
	case "ip", "ip6", "tcp", "udp", "sctp", "udplite", "dccp", "th", "icmp", "icmpv6":
		field := p.tok(p.i + 1)
		if field == "" || statementWords[field] || isCmpOp(field) || field == "." || field == "{" {
			return nil, false
		}
		p.i += 2
		return p.newExpr(Expr{Kind: ExprSelector, Name: t + " " + field}), true
	case "meta":
		key := p.tok(p.i + 1)
		if key == "" {
			return nil, false
		}
		p.i += 2
		return p.newExpr(Expr{Kind: ExprSelector, Name: "meta " + key}), true
	case "mark", "iif", "oif", "iifname", "oifname", "l4proto", "nfproto", "iiftype", "oiftype", "skuid", "skgid", "pkttype":
		p.i++
		return p.newExpr(Expr{Kind: ExprSelector, Name: "meta " + t}), true
	case "ct":
		return p.ctSelector()
	case "fib":
		return p.fib()
	case "numgen":
		return p.numgen()
	case "{":
		return p.set()
	case "(":
		return p.flagList()
	case "", "}", ",", ")":
		return nil, false
	}
	if strings.HasPrefix(t, "@") {
		p.i++
		return p.newExpr(Expr{Kind: ExprSetRef, Name: t[1:]}), true
	}
	if statementWords[t] || selectorWords[t] {
		return nil, false
	}
	p.i++
	return p.newExpr(Expr{Kind: ExprLiteral, Name: unquote(t)}), true
}

// ctSelector reads `ct KEY` at p.i, `ct original|reply [ip|ip6] KEY` too.
func (p *stmtParser) ctSelector() (*Expr, bool) {
	key := p.tok(p.i + 1)
	if key == "" {
		return nil, false
	}
	p.i += 2
	switch key {
	case "original", "reply": // ct original saddr, ct original ip saddr
		sub := p.next()
		if sub == "ip" || sub == "ip6" {
			sub = p.next()
		}
		key += " " + sub
	}
	return p.newExpr(Expr{Kind: ExprSelector, Name: "ct " + key}), true
}

// fib reads `fib daddr [. iif|. oif|. mark] type|oif|oifname` at p.i.
func (p *stmtParser) fib() (*Expr, bool) {
	j := p.i + 1
	var parts []string
	for {
		w := p.tok(j)
		if w != "saddr" && w != "daddr" && w != "iif" && w != "oif" && w != "mark" {
			break
		}
		parts = append(parts, w)
		j++
		if p.tok(j) != "." {
			break
		}
		j++
	}
	result := p.tok(j)
	if len(parts) == 0 || result != "type" && result != "oif" && result != "oifname" {
		return nil, false
	}
	p.i = j + 1
	return p.newExpr(Expr{Kind: ExprSelector, Name: "fib " + strings.Join(parts, " . ") + " " + result}), true
}

// numgen reads `numgen MODE mod N [offset O]` at p.i.
func (p *stmtParser) numgen() (*Expr, bool) {
	mode := p.tok(p.i + 1)
	if p.tok(p.i+2) != "mod" {
		return nil, false
	}
	mod, err := strconv.ParseUint(p.tok(p.i+3), 10, 32)
	if err != nil || mod == 0 {
		return nil, false
	}
	p.i += 4
	e := p.newExpr(Expr{Kind: ExprNumgen, Name: mode, Mod: mod})
	if p.peek() == "offset" {
		off, err := strconv.ParseUint(p.tok(p.i+1), 10, 32)
		if err != nil {
			return nil, false
		}
		e.Offset = off
		p.i += 2
	}
	return e, true
}

// flagList reads `(fin|syn|rst|ack)` at p.i: a flag expression, kept as
// one literal.
func (p *stmtParser) flagList() (*Expr, bool) {
	p.i++
	var b strings.Builder
	for p.i < len(p.toks) && p.peek() != ")" {
		b.WriteString(p.next())
	}
	if p.next() != ")" {
		return nil, false
	}
	return p.newExpr(Expr{Kind: ExprLiteral, Name: b.String()}), true
}

// DescribeStatement is a short description of st for messages.
func DescribeStatement(st Statement) string {
	if st.Text != "" {
		return st.Text
	}
	return fmt.Sprintf("statement of kind %d", st.Kind)
}
