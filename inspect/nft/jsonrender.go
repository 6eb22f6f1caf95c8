package nft

import (
	"fmt"
	"strconv"
	"strings"
	"unsafe"

	"sigs.k8s.io/knftables"
)

// Rendering a rule's JSON expressions as the text nft lists.

// renderer renders nft JSON expressions as nft prints them.
type renderer struct {
	buf    []byte
	family string
	depth  int
	// text holds the rules' text (ruleText)
	text textBlock
}

// maxExprDepth bounds the nesting the renderer follows (fuzzed input can nest
// arbitrarily; nft's own output never nests deeply).
const maxExprDepth = 64

type exprCtx struct {
	hex   bool // meta/ct mark: numbers print as 0x%08x
	quote bool // interface names and other strings print quoted
}

// ruleText renders a rule's "expr" array, normalised, into the renderer's
// text block.
func (w *renderer) ruleText(exprs *jsonValue) string {
	w.renderExprs(exprs)
	if len(w.buf) == 0 {
		return ""
	}
	s := unsafe.String(&w.buf[0], len(w.buf)) // read before w.buf is written again
	if needsNormalize(s) {
		return w.text.collapse(s)
	}
	return w.text.concat(s) // a copy: w.buf is written again
}

// renderExprs renders a rule's "expr" array into w.buf.
func (w *renderer) renderExprs(exprs *jsonValue) {
	w.buf = w.buf[:0]
	if exprs.isArr() {
		exprs.items(func(_ int, e *jsonValue) bool {
			if len(w.buf) > 0 {
				w.buf = append(w.buf, ' ')
			}
			w.stmt(e)
			return true
		})
	}
}

func (w *renderer) ws(parts ...string) {
	for _, s := range parts {
		w.buf = append(w.buf, s...)
	}
}

func (w *renderer) unknown(what string) {
	w.ws("<unknown:", what, ">")
}

// stmt renders one statement. A flat dispatch: a case of a few lines
// renders in place, a longer one has its method.
func (w *renderer) stmt(e *jsonValue) {
	k, v, ok := e.single()
	if !ok {
		w.unknown("statement")
		return
	}
	switch k {
	case "match":
		w.match(v)
	case "counter":
		w.counter(v)
	case "mangle":
		key := v.get("key")
		ctx := ctxOfExpr(key)
		w.expr(key, exprCtx{})
		w.ws(" set ")
		w.expr(v.get("value"), ctx)
	case "accept", "drop", "continue", "return", "notrack", "synproxy", "last":
		w.ws(k)
	case "jump", "goto":
		w.ws(k, " ", v.fieldStr("target"))
	case "reject":
		w.reject(v)
	case "dnat", "snat":
		w.nat(k, v)
	case "masquerade", "redirect":
		w.ws(k)
		if p := v.get("port"); p != nil {
			w.ws(" to :")
			w.expr(p, exprCtx{})
		}
		w.natFlags(v.get("flags"))
	case "vmap":
		w.expr(v.get("key"), exprCtx{})
		w.ws(" vmap ")
		w.expr(v.get("data"), exprCtx{})
	case "set", "map":
		w.setUpdate(k, v, e)
	case "xt":
		w.ws("xt ", v.fieldStr("type"), " ", v.fieldStr("name"))
	case "log":
		w.log(v)
	case "limit":
		w.limit(v)
	case "quota":
		w.quota(v)
	case "queue":
		w.queue(v)
	case "ct helper", "ct timeout", "ct expectation":
		w.ws(k, ` set "`, v.scalar(), `"`)
	case "ct count":
		w.ws("ct count ")
		if v.get("inv").isTrue() {
			w.ws("over ")
		}
		w.ws(v.fieldStr("val"))
	case "dup":
		w.dup(v)
	case "fwd":
		w.ws("fwd to ")
		w.expr(v.get("dev"), exprCtx{quote: true})
	case "flow":
		w.ws("flow ", orDefault(v.fieldStr("op"), "add"), " ", v.fieldStr("flowtable"))
	case "meter":
		w.meter(v)
	case "tproxy":
		w.ws("tproxy")
		if f := v.fieldStr("family"); f != "" {
			w.ws(" ", f)
		}
		w.ws(" to ")
		w.hostPort(v.get("addr"), v.get("port"))
	case "secmark":
		w.ws(`meta secmark set "`, v.scalar(), `"`)
	default:
		w.unknown(k)
	}
}

// match renders `LEFT [OP] RIGHT`, the right side printed as the left
// side's type prints (a mark in hex, an interface name quoted).
func (w *renderer) match(v *jsonValue) {
	left := v.get("left")
	ctx := ctxOfExpr(left)
	w.expr(left, exprCtx{hex: ctx.hex})
	right := v.get("right")
	switch op := v.fieldStr("op"); op {
	case "in", "":
	case "==":
		// nft prints "==" after a binop and for a single bitmask value
		if isBinop(left) || bitmaskKey(left) && isScalar(right) {
			w.ws(" ==")
		}
	default:
		w.ws(" ", op)
	}
	w.ws(" ")
	w.expr(right, ctx)
}

// counter renders a named counter or an anonymous one with its counts.
func (w *renderer) counter(v *jsonValue) {
	if v.isStr() {
		w.ws(`counter name "`, v.str, `"`)
		return
	}
	w.ws("counter")
	if p := v.fieldStr("packets"); p != "" {
		w.ws(" packets ", p, " bytes ", v.fieldStr("bytes"))
	}
}

// setUpdate renders `add|update @SET { ELEM [: DATA] [STMTS] }`; without
// an op, e is a set or map expression.
func (w *renderer) setUpdate(k string, v, e *jsonValue) {
	op := v.fieldStr("op")
	if op == "" {
		w.expr(e, exprCtx{})
		return
	}
	w.ws(op, " ", v.fieldStr(k), " { ")
	w.expr(v.get("elem"), exprCtx{})
	if k == "map" {
		w.ws(" : ")
		w.expr(v.get("data"), exprCtx{})
	}
	if stmts := v.get("stmt"); stmts.isArr() {
		stmts.items(func(_ int, st *jsonValue) bool {
			w.ws(" ")
			w.stmt(st)
			return true
		})
	}
	w.ws(" }")
}

// log renders `log [prefix "P"] [group N …] [flags F]`.
func (w *renderer) log(v *jsonValue) {
	w.ws("log")
	if s := v.fieldStr("prefix"); s != "" {
		w.ws(` prefix "`, s, `"`)
	}
	for _, f := range []string{"group", "snaplen", "queue-threshold", "level"} {
		if s := v.fieldStr(f); s != "" {
			w.ws(" ", f, " ", s)
		}
	}
	if fl := v.get("flags").strs(); len(fl) > 0 {
		w.ws(" flags ", strings.Join(fl, ","))
	}
}

// quota renders a named quota or `quota [over] N UNIT [used N UNIT]`.
func (w *renderer) quota(v *jsonValue) {
	if v.isStr() {
		w.ws(`quota name "`, v.str, `"`)
		return
	}
	w.ws("quota ")
	if v.get("inv").isTrue() {
		w.ws("over ")
	}
	w.ws(v.fieldStr("val"), " ", orDefault(v.fieldStr("val_unit"), "bytes"))
	if u := v.fieldStr("used"); u != "" && u != "0" {
		w.ws(" used ", u, " ", orDefault(v.fieldStr("used_unit"), "bytes"))
	}
}

// queue renders `queue [flags F] [to N]`.
func (w *renderer) queue(v *jsonValue) {
	w.ws("queue")
	if fl := v.get("flags").strs(); len(fl) > 0 {
		w.ws(" flags ", strings.Join(fl, ","))
	}
	if n := v.get("num"); n != nil {
		w.ws(" to ")
		w.expr(n, exprCtx{})
	}
}

// dup renders `dup to ADDR [device "DEV"]`.
func (w *renderer) dup(v *jsonValue) {
	w.ws("dup to ")
	w.expr(v.get("addr"), exprCtx{})
	if d := v.get("dev"); d != nil {
		w.ws(" device ")
		w.expr(d, exprCtx{quote: true})
	}
}

// meter renders `meter NAME { KEY STMT }`.
func (w *renderer) meter(v *jsonValue) {
	w.ws("meter ", v.fieldStr("name"), " { ")
	w.expr(v.get("key"), exprCtx{})
	if st := v.get("stmt"); st != nil {
		w.ws(" ")
		w.stmt(st)
	}
	w.ws(" }")
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func (w *renderer) reject(v *jsonValue) {
	w.ws("reject")
	typ := v.fieldStr("type")
	what := v.fieldStr("expr")
	if typ == "" {
		return
	}
	if typ == "tcp reset" {
		w.ws(" with tcp reset")
		return
	}
	def := "icmpx"
	switch w.family {
	case "ip":
		def = "icmp"
	case "ip6":
		def = "icmpv6"
	}
	if (what == "" || what == "port-unreachable") && typ == def {
		return
	}
	w.ws(" with ", typ)
	if what != "" {
		w.ws(" ", what)
	}
}

func (w *renderer) nat(k string, v *jsonValue) {
	w.ws(k)
	if f := v.fieldStr("family"); f != "" {
		w.ws(" ", f)
	}
	for _, tf := range v.get("type_flags").strs() {
		w.ws(" ", tf)
	}
	addr, port := v.get("addr"), v.get("port")
	if addr != nil || port != nil {
		w.ws(" to ")
		w.hostPort(addr, port)
	}
	w.natFlags(v.get("flags"))
}

func (w *renderer) hostPort(addr, port *jsonValue) {
	if addr.isStr() && port != nil && strings.Contains(addr.str, ":") {
		w.ws("[", addr.str, "]")
	} else if addr != nil {
		w.expr(addr, exprCtx{})
	}
	if port != nil {
		w.ws(":")
		w.expr(port, exprCtx{})
	}
}

func (w *renderer) natFlags(f *jsonValue) {
	if fl := f.strs(); len(fl) > 0 {
		w.ws(" ", strings.Join(fl, ","))
	}
}

func (w *renderer) limit(v *jsonValue) {
	w.ws("limit rate ")
	if v.get("inv").isTrue() {
		w.ws("over ")
	}
	w.ws(v.fieldStr("rate"))
	unit := v.fieldStr("rate_unit")
	if unit != "" && unit != "packets" {
		w.ws(" ", unit)
	}
	w.ws("/", orDefault(v.fieldStr("per"), "second"))
	burst := v.fieldStr("burst")
	bunit := v.fieldStr("burst_unit")
	if bunit == "" {
		bunit = orDefault(unit, "packets")
	}
	if burst != "" && burst != "0" && !(burst == "5" && bunit == "packets") {
		w.ws(" burst ", burst, " ", bunit)
	}
}

// unqualifiedMeta are the meta keys nft prints without "meta ".
var unqualifiedMeta = map[string]bool{
	"iif": true, "oif": true, "iifname": true, "oifname": true, "iifgroup": true, "oifgroup": true,
}

// quotedMeta are the meta keys whose values are strings nft quotes.
var quotedMeta = map[string]bool{
	"iifname": true, "oifname": true, "ibrname": true, "obrname": true, "iifkind": true,
	"oifkind": true, "sdifname": true, "ibriport": true, "obriport": true,
}

// ctxOfExpr decides how the right-hand side of a match (or the value of a
// mangle) is printed from its left-hand side.
func ctxOfExpr(e *jsonValue) exprCtx {
	for depth := 0; depth < maxExprDepth; depth++ {
		k, v, ok := e.single()
		if !ok {
			return exprCtx{}
		}
		switch k {
		case "meta":
			key := v.fieldStr("key")
			return exprCtx{hex: key == "mark", quote: quotedMeta[key]}
		case "ct":
			return exprCtx{hex: v.fieldStr("key") == "mark"}
		case "&", "|", "^", "<<", ">>":
			if v.isArr() && v.n > 0 {
				e = v.kid(0)
				continue
			}
		case "osf":
			return exprCtx{quote: true}
		}
		return exprCtx{}
	}
	return exprCtx{}
}

// expr renders one expression, printed as ctx says.
func (w *renderer) expr(e *jsonValue, ctx exprCtx) {
	w.depth++
	defer func() { w.depth-- }()
	if w.depth > maxExprDepth {
		w.unknown("too-deep")
		return
	}
	if e == nil || w.literal(e, ctx) {
		return
	}
	k, v, ok := e.single()
	if !ok {
		w.unknown("expression")
		return
	}
	if w.selector(k, v) || w.compound(k, v, ctx) {
		return
	}
	switch k {
	case "accept", "drop", "continue", "return":
		w.ws(k)
	case "jump", "goto":
		w.ws(k, " ", v.fieldStr("target"))
	default:
		w.unknown(k)
	}
}

// literal renders e when it is no object: a string, a number, a boolean
// (exists, missing), an anonymous set; false for an object.
func (w *renderer) literal(e *jsonValue, ctx exprCtx) bool {
	switch e.kind {
	case 'z':
	case 's':
		if ctx.quote && !strings.HasPrefix(e.str, "@") {
			w.ws(`"`, e.str, `"`)
		} else {
			w.ws(e.str)
		}
	case '#':
		if ctx.hex {
			if n, err := strconv.ParseUint(e.str, 10, 32); err == nil {
				w.buf = fmt.Appendf(w.buf, "0x%08x", n)
				return true
			}
		}
		w.ws(e.str)
	case 't':
		w.ws("exists")
	case 'f':
		w.ws("missing")
	case 'a':
		w.setLiteral(e, ctx)
	default:
		return false
	}
	return true
}

// selector renders an expression that reads a packet, connection or
// route field (payload, meta, ct, fib, hashes, …); false for another kind.
// A flat dispatch, each case one field's spelling.
func (w *renderer) selector(k string, v *jsonValue) bool {
	switch k {
	case "payload":
		if p := v.fieldStr("protocol"); p != "" {
			w.ws(p, " ", v.fieldStr("field"))
		} else {
			w.ws("@", v.fieldStr("base"), ",", v.fieldStr("offset"), ",", v.fieldStr("len"))
		}
	case "meta":
		key := v.fieldStr("key")
		if unqualifiedMeta[key] {
			w.ws(key)
		} else {
			w.ws("meta ", key)
		}
	case "ct", "rt":
		w.ws(k, " ")
		if d := v.fieldStr("dir"); d != "" && k == "ct" {
			w.ws(d, " ")
		}
		if f := v.fieldStr("family"); f != "" {
			w.ws(f, " ")
		}
		w.ws(v.fieldStr("key"))
	case "fib":
		w.ws("fib ", strings.Join(v.get("flags").strs(), " . "), " ", v.fieldStr("result"))
	case "numgen", "jhash", "symhash":
		w.hash(k, v)
	case "socket", "osf":
		w.ws(k, " ", v.fieldStr("key"))
	case "ipsec":
		w.ws("ipsec ", v.fieldStr("dir"))
		if s := v.fieldStr("spnum"); s != "" && s != "0" {
			w.ws(" spnum ", s)
		}
		w.ws(" ", v.fieldStr("key"))
	case "exthdr", "tcp option", "ip option", "sctp chunk", "dccp option":
		w.ws(k, " ", v.fieldStr("name"))
		if f := v.fieldStr("field"); f != "" {
			w.ws(" ", f)
		}
	default:
		return false
	}
	return true
}

// hash renders `numgen MODE mod N`, `jhash EXPR mod N [seed S]` and
// `symhash mod N`, each with its offset when not 0.
func (w *renderer) hash(k string, v *jsonValue) {
	switch k {
	case "numgen":
		w.ws("numgen ", v.fieldStr("mode"), " mod ", v.fieldStr("mod"))
	case "jhash":
		w.ws("jhash ")
		w.expr(v.get("expr"), exprCtx{})
		w.ws(" mod ", v.fieldStr("mod"))
		if s := v.fieldStr("seed"); s != "" {
			if n, err := strconv.ParseUint(s, 10, 32); err == nil {
				w.buf = fmt.Appendf(w.buf, " seed 0x%x", n)
			}
		}
	case "symhash":
		w.ws("symhash mod ", v.fieldStr("mod"))
	}
	if o := v.fieldStr("offset"); o != "" && o != "0" {
		w.ws(" offset ", o)
	}
}

// compound renders an expression made of others (prefix, range, set,
// concatenation, map lookup, set element, binary operation); false for
// another kind.
func (w *renderer) compound(k string, v *jsonValue, ctx exprCtx) bool {
	switch k {
	case "prefix":
		w.expr(v.get("addr"), ctx)
		w.ws("/", v.fieldStr("len"))
	case "range":
		if v.length() == 2 {
			w.expr(v.kid(0), ctx)
			w.ws("-")
			w.expr(v.kid(1), ctx)
		} else {
			w.unknown("range")
		}
	case "set":
		switch {
		case v.isArr():
			w.setLiteral(v, ctx)
		case v.isStr():
			w.ws(v.str)
		default:
			w.expr(v, ctx)
		}
	case "concat":
		v.items(func(i int, c *jsonValue) bool {
			if i > 0 {
				w.ws(" . ")
			}
			w.expr(c, exprCtx{})
			return true
		})
	case "map":
		w.expr(v.get("key"), exprCtx{})
		w.ws(" map ")
		w.expr(v.get("data"), exprCtx{})
	case "elem":
		w.elem(v, ctx)
	case "&", "|", "^", "<<", ">>":
		w.binop(k, v, ctx)
	default:
		return false
	}
	return true
}

// elem renders a set element with its options: `VAL [timeout T]
// [expires T] [comment "C"]`.
func (w *renderer) elem(v *jsonValue, ctx exprCtx) {
	w.expr(v.get("val"), ctx)
	if t := v.fieldStr("timeout"); t != "" {
		w.ws(" timeout ", formatSeconds(t))
	}
	if t := v.fieldStr("expires"); t != "" {
		w.ws(" expires ", formatSeconds(t))
	}
	if c := v.fieldStr("comment"); c != "" {
		w.ws(` comment "`, c, `"`)
	}
}

// binop renders `A OP B …`, an operand that is itself a binary operation
// in parentheses.
func (w *renderer) binop(k string, v *jsonValue, ctx exprCtx) {
	if !v.isArr() {
		return
	}
	v.items(func(i int, op *jsonValue) bool {
		if i > 0 {
			w.ws(" ", k, " ")
		}
		if isBinop(op) {
			w.ws("(")
			w.expr(op, ctx)
			w.ws(")")
		} else {
			w.expr(op, ctx)
		}
		return true
	})
}

// bitmaskKey reports whether e is a key of a bitmask type (nft prints an
// explicit "==" before a single value of those).
func bitmaskKey(e *jsonValue) bool {
	k, v, ok := e.single()
	if !ok {
		return false
	}
	switch k {
	case "ct":
		key := v.fieldStr("key")
		return key == "state" || key == "status" || key == "event"
	case "payload":
		return v.fieldStr("field") == "flags"
	}
	return false
}

func isScalar(e *jsonValue) bool {
	if e == nil {
		return false
	}
	switch e.kind {
	case 's', '#', 't', 'f':
		return true
	}
	return false
}

func isBinop(e *jsonValue) bool {
	k, _, ok := e.single()
	if !ok {
		return false
	}
	switch k {
	case "&", "|", "^", "<<", ">>":
		return true
	}
	return false
}

// setLiteral renders an anonymous set or map body: `{ a, b }` or
// `{ k : v, k : v }`.
func (w *renderer) setLiteral(items *jsonValue, ctx exprCtx) {
	w.ws("{ ")
	items.items(func(i int, item *jsonValue) bool {
		if i > 0 {
			w.ws(", ")
		}
		if item.length() == 2 {
			w.expr(item.kid(0), ctx)
			w.ws(" : ")
			w.expr(item.kid(1), exprCtx{})
			return true
		}
		w.expr(item, ctx)
		return true
	})
	w.ws(" }")
}

// formatSeconds prints a number of seconds as nft does ("3h", "1d2h").
func formatSeconds(s string) string {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || f > 1e12 {
		return s + "s"
	}
	ms := int64(f*1000 + 0.5)
	if ms == 0 {
		return "0s"
	}
	var b strings.Builder
	for _, u := range []struct {
		n   int64
		sfx string
	}{{86400000, "d"}, {3600000, "h"}, {60000, "m"}, {1000, "s"}, {1, "ms"}} {
		if ms >= u.n {
			fmt.Fprintf(&b, "%d%s", ms/u.n, u.sfx)
			ms %= u.n
		}
	}
	return b.String()
}

// elements converts the "elem" list of a set or map.
func (w *renderer) elements(items *jsonValue, isMap bool, family knftables.Family, table, name string) []*knftables.Element {
	n := items.length()
	if n == 0 {
		return nil
	}
	store := make([]knftables.Element, n)
	out := make([]*knftables.Element, 0, n)
	items.items(func(i int, item *jsonValue) bool {
		e := &store[i]
		e.Family, e.Table = family, table
		if isMap {
			e.Map = name
			if item.length() != 2 {
				return true
			}
			e.Key, e.Comment = w.elemParts(item.kid(0))
			e.Value, _ = w.elemParts(item.kid(1))
		} else {
			e.Set = name
			e.Key, e.Comment = w.elemParts(item)
		}
		if len(e.Key) > 0 {
			out = append(out, e)
		}
		return true
	})
	return out
}

// elemParts renders an element key or value as the list of its
// concatenated parts, unwrapping {"elem": {...}} (which carries the comment).
func (w *renderer) elemParts(e *jsonValue) ([]string, *string) {
	var comment *string
	if k, v, ok := e.single(); ok && k == "elem" {
		comment = jsonComment(v.get("comment"))
		e = v.get("val")
	}
	if k, v, ok := e.single(); ok && k == "concat" {
		parts := make([]string, 0, v.length())
		v.items(func(_ int, c *jsonValue) bool {
			parts = append(parts, w.render(c))
			return true
		})
		return parts, comment
	}
	s := w.render(e)
	if s == "" {
		return nil, comment
	}
	return []string{s}, comment
}

// render renders one expression on its own.
func (w *renderer) render(e *jsonValue) string {
	if e.isStr() || e.isNum() {
		return e.str
	}
	n := len(w.buf)
	w.expr(e, exprCtx{})
	s := string(w.buf[n:])
	w.buf = w.buf[:n]
	return s
}
