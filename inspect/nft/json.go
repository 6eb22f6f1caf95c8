package nft

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"sigs.k8s.io/knftables"

	"github.com/proxyrules/kubectl-proxyrules/inspect"
)

// This file reads `nft -j list ruleset` (libnftables JSON schema v1) and
// renders each rule's expression list into the text nft itself would list,
// so that analyzeRule sees one syntax whatever the input format.
//
// encoding/json's Decoder is not used: the input is framed by jsonStream
// (the outer object and the "nftables" array, one element at a time) and
// each element is parsed by jsonParser in one pass into a tape: its values
// in document order, each followed by the values it contains, with strings
// that are substrings of the input. The tape is reused from object to
// object, so a parse costs no allocation once it has grown; the renderer
// reads it in place.

// jsonValue is one value on a tape. A nil *jsonValue is an absent value.
// The values inside a container follow it on the tape; span counts the
// container's whole subtree, so the next sibling of a value v is span
// entries after v.
type jsonValue struct {
	kind byte  // 'z' null, 't' true, 'f' false, '#' number, 's' string, 'a' array, 'o' object
	span int32 // tape entries of this value, those inside it included
	n    int32 // members of an object, items of an array
	key  string
	str  string // string value, or the text of a number
}

func (v *jsonValue) isNull() bool { return v != nil && v.kind == 'z' }
func (v *jsonValue) isStr() bool  { return v != nil && v.kind == 's' }
func (v *jsonValue) isNum() bool  { return v != nil && v.kind == '#' }
func (v *jsonValue) isArr() bool  { return v != nil && v.kind == 'a' }
func (v *jsonValue) isTrue() bool { return v != nil && v.kind == 't' }

// subtree is v and the values inside it, as the slice of the tape they
// occupy (the parser puts them there: span entries from v).
func (v *jsonValue) subtree() []jsonValue { return unsafe.Slice(v, int(v.span)) }

// items calls fn with the items of an array, in order, until fn returns
// false (never, for anything but an array).
func (v *jsonValue) items(fn func(i int, c *jsonValue) bool) {
	if v == nil || v.kind != 'a' || v.n == 0 {
		return
	}
	sub := v.subtree()
	for i, j := 0, 1; j < len(sub); i++ {
		c := &sub[j]
		if !fn(i, c) {
			return
		}
		j += int(c.span)
	}
}

// kid returns item (or member) i of a container, or nil.
func (v *jsonValue) kid(i int) *jsonValue {
	if v == nil || v.kind != 'a' && v.kind != 'o' || i < 0 || i >= int(v.n) {
		return nil
	}
	sub := v.subtree()
	j := 1
	for ; i > 0; i-- {
		j += int(sub[j].span)
	}
	return &sub[j]
}

// get returns the member key of an object, or nil.
func (v *jsonValue) get(key string) *jsonValue {
	if v == nil || v.kind != 'o' {
		return nil
	}
	sub := v.subtree()
	for j := 1; j < len(sub); j += int(sub[j].span) {
		if sub[j].key == key {
			return &sub[j]
		}
	}
	return nil
}

// length is the number of items of an array (0 for anything else).
func (v *jsonValue) length() int {
	if v == nil || v.kind != 'a' {
		return 0
	}
	return int(v.n)
}

// single returns the only member of an object.
func (v *jsonValue) single() (string, *jsonValue, bool) {
	if v == nil || v.kind != 'o' || v.n != 1 {
		return "", nil, false
	}
	c := v.kid(0)
	return c.key, c, true
}

// scalar returns a string, the text of a number, or "true"/"false".
func (v *jsonValue) scalar() string {
	if v == nil {
		return ""
	}
	switch v.kind {
	case 's', '#':
		return v.str
	case 't':
		return "true"
	case 'f':
		return "false"
	}
	return ""
}

// fieldStr returns the scalar member key of an object.
func (v *jsonValue) fieldStr(key string) string { return v.get(key).scalar() }

// strs reads a string or a list of strings.
func (v *jsonValue) strs() []string {
	if v == nil {
		return nil
	}
	if v.kind == 'a' {
		out := make([]string, 0, v.n)
		v.items(func(_ int, c *jsonValue) bool {
			if s := c.scalar(); s != "" {
				out = append(out, s)
			}
			return true
		})
		return out
	}
	if s := v.scalar(); s != "" {
		return []string{s}
	}
	return nil
}

// jsonMaxDepth bounds the nesting the parser accepts (encoding/json's
// own limit).
const jsonMaxDepth = 10000

// bigJSONObject is the size from which jsonParser sizes the tape ahead.
const bigJSONObject = 64 << 10

// jsonParser parses one JSON value held in a string onto its tape.
type jsonParser struct {
	s     string
	i     int
	stack []openValue // of value, kept for the next parse
	// tape holds the values of the value being parsed; it lives only
	// until the next parse, so it is reused
	tape  []jsonValue
	err   error
	short bool
}

func (p *jsonParser) parse(s string) (*jsonValue, error) {
	if len(s) >= bigJSONObject {
		p.sizeTape(s)
	}
	v, _, _, err := p.parsePrefix(s)
	p.space()
	if err == nil && p.i != len(p.s) {
		p.fail("trailing data")
		return v, p.err
	}
	return v, err
}

// sizeTape makes room on the tape for the values of s at most: for a
// set of thousands of elements, the tape it needs at once rather than
// grown (and copied) a dozen times. Every value but the first follows a
// ',' or opens a container's contents; the count is capped for input of
// mostly commas.
func (p *jsonParser) sizeTape(s string) {
	n := strings.Count(s, ",") + strings.Count(s, "[") + strings.Count(s, "{") + 1
	if n = min(n, len(s)/8); cap(p.tape) < n {
		p.tape = make([]jsonValue, 0, n)
	}
}

func (p *jsonParser) fail(what string) {
	if p.err == nil {
		p.err = fmt.Errorf("offset %d: %s", p.i, what)
		// short: the value may just go on past the data at hand
		p.short = p.i >= len(p.s) || what == "bad literal" && len(p.s)-p.i < len("false")
	}
	p.i = len(p.s)
}

// parsePrefix parses the value at the start of s, which may go on after
// it: the value and the bytes it took, or short when s ends inside it.
// The value is valid until the next parse. (Its tape grows as it goes:
// the size of the value is not known ahead.)
func (p *jsonParser) parsePrefix(s string) (v *jsonValue, n int, short bool, err error) {
	p.s, p.i, p.err, p.short = s, 0, nil, false
	// The last value's entries are overwritten, not cleared first: the
	// strings left beyond the new value's end keep at most the read
	// buffers of the values before alive, for as long as the parser.
	p.tape = p.tape[:0]
	p.value()
	if p.err != nil {
		return nil, p.i, p.short, p.err
	}
	return &p.tape[0], p.i, false, nil
}

// space skips white space at p.i.
func (p *jsonParser) space() { p.i = skipSpace(p.s, p.i) }

// skipSpace returns the offset of the first byte at or after i in s that
// is no white space. nft writes none inside an object, so the first byte
// most often ends it: one comparison.
func skipSpace(s string, i int) int {
	for i < len(s) && s[i] <= ' ' && isJSONSpace(s[i]) {
		i++
	}
	return i
}

// openValue is a container being parsed: its tape entry, its members so
// far, whether it is an object.
type openValue struct {
	at  int
	n   int32
	obj bool
}

// value parses the value at p.i onto the tape. It is one loop over
// locals, with the open containers on a stack of its own: the recursive
// descent it replaced spent a third of its time loading and storing the
// parser's fields and calling itself. What it accepts and the errors it
// gives (message and offset) are the recursive descent's, kept in
// jsonref_test.go to be compared with.
func (p *jsonParser) value() {
	s, i, tape := p.s, p.i, p.tape
	stack := p.stack[:0]
	key := ""
	var what string // why it failed, at i
	defer func() {
		p.tape, p.stack, p.i = tape, stack[:0], i
		if what != "" {
			p.fail(what)
		}
	}()
	for {
		// a value, named key, at i
		i = skipSpace(s, i)
		if i >= len(s) {
			what = "unexpected end"
			return
		}
		switch c := s[i]; {
		case c == '{' || c == '[':
			if len(stack) >= jsonMaxDepth {
				what = "nesting too deep"
				return
			}
			obj, closer, kind := c == '{', byte(']'), byte('a')
			if obj {
				closer, kind = '}', 'o'
			}
			stack = append(stack, openValue{at: len(tape), obj: obj})
			tape = append(tape, jsonValue{kind: kind, key: key})
			i++
			i = skipSpace(s, i)
			if i < len(s) && s[i] == closer {
				i++
				tape[len(tape)-1].span = 1
				stack = stack[:len(stack)-1]
				break // an empty container: a value read
			}
			key = ""
			if obj {
				if key, i, what = memberName(s, i); what != "" {
					return
				}
			}
			continue
		case c == '"':
			var str string
			if str, i, what = jsonString(s, i); what != "" {
				return
			}
			tape = append(tape, jsonValue{kind: 's', span: 1, key: key, str: str})
		case c == 't' || c == 'f' || c == 'n':
			word, kind := "null", byte('z')
			if c == 't' {
				word, kind = "true", 't'
			} else if c == 'f' {
				word, kind = "false", 'f'
			}
			if !strings.HasPrefix(s[i:], word) {
				what = "bad literal"
				return
			}
			i += len(word)
			tape = append(tape, jsonValue{kind: kind, span: 1, key: key})
		case c == '-' || c >= '0' && c <= '9':
			j := i + 1
			for j < len(s) && inNumber[s[j]] {
				j++
			}
			tape = append(tape, jsonValue{kind: '#', span: 1, key: key, str: s[i:j]})
			i = j
		default:
			what = "unexpected character"
			return
		}
		// a value read: it is the whole, or a member of the innermost
		// open container, which goes on or closes (and is a value read)
		for {
			if len(stack) == 0 {
				return
			}
			top := &stack[len(stack)-1]
			top.n++
			i = skipSpace(s, i)
			if i >= len(s) {
				what = "unexpected end"
				return
			}
			closer := byte(']')
			if top.obj {
				closer = '}'
			}
			if c := s[i]; c == ',' {
				i++
				key = ""
				if top.obj {
					if key, i, what = memberName(s, i); what != "" {
						return
					}
				}
				break
			} else if c != closer {
				what = "expected ',' or a closing bracket"
				return
			}
			i++
			if len(tape)-top.at > math.MaxInt32 {
				what = "value too large"
				return
			}
			tape[top.at].span = int32(len(tape) - top.at)
			tape[top.at].n = top.n
			stack = stack[:len(stack)-1]
		}
	}
}

// memberName reads `"name":` at s[i] (after white space) and returns the
// name and where the member's value starts, or why it failed and where.
func memberName(s string, i int) (name string, next int, what string) {
	i = skipSpace(s, i)
	if i >= len(s) || s[i] != '"' {
		return "", i, "expected a member name"
	}
	if name, i, what = jsonString(s, i); what != "" {
		return "", i, what
	}
	i = skipSpace(s, i)
	if i >= len(s) || s[i] != ':' {
		return "", i, "expected ':'"
	}
	return name, i + 1, ""
}

// jsonString reads the JSON string at s[i] == '"' and returns it and the
// offset after it, or why it failed and where: at the end of s when it
// ends inside the string (which may go on past the data at hand). Without
// escapes it is a substring of s.
func jsonString(s string, i int) (str string, next int, what string) {
	start := i + 1
	j := start
	for j < len(s) && !inString[s[j]] {
		j++ // the plain part, in a tight loop
	}
	esc := false
	for j < len(s) {
		c := s[j]
		if c == '"' {
			break
		}
		if c == '\\' {
			esc = true
			j += 2
			continue
		}
		j++
	}
	if j >= len(s) {
		return "", len(s), "unterminated string"
	}
	if !esc {
		return s[start:j], j + 1, ""
	}
	var out string
	if err := json.Unmarshal([]byte(s[start-1:j+1]), &out); err != nil {
		return "", j + 1, "bad string escape"
	}
	return out, j + 1, ""
}

// ParseJSON reads `nft -j list ruleset` (or `nft -j list table …`)
// output. It streams: the "nftables" array is decoded one object at a time,
// so the input is never held in memory as a whole. Tables of an
// iptables-nft node become IPTables (see nft_xtables.go); every other table
// becomes an NFTTable. On malformed input it returns what was read before
// the error together with the error.
func ParseJSON(r io.Reader, source string) (*inspect.Ruleset, error) {
	b := newNFTBuilder(source, inspect.FormatNFTJSON)
	err := parseNFTJSON(r, b)
	return b.finish(), err
}

func parseNFTJSON(r io.Reader, b *builder) error {
	st := &jsonStream{r: r}
	for len(st.buf)-st.pos < 3 && st.fill(st.pos) {
	}
	if len(st.buf)-st.pos >= 3 && string(st.buf[st.pos:st.pos+3]) == "\ufeff" {
		st.pos += 3 // a byte order mark
	}
	c, err := st.peek()
	if err != nil {
		return fmt.Errorf("nft JSON: %w", err)
	}
	if c != '{' {
		return fmt.Errorf("nft JSON: expected an object, found %q", c)
	}
	st.pos++
	seen := false
	p := &jsonParser{}
	for first := true; ; first = false {
		c, err := st.peek()
		if err != nil {
			return st.wrap(err)
		}
		if c == '}' {
			st.pos++
			break
		}
		if !first {
			if c != ',' {
				return st.wrap(errors.New("expected ',' or '}'"))
			}
			st.pos++
		}
		raw, err := st.value()
		if err != nil {
			return st.wrap(err)
		}
		kv, err := p.parse(string(raw))
		if err != nil || kv.kind != 's' {
			return st.wrap(errors.New("expected a member name"))
		}
		key := kv.str
		if c, err := st.peek(); err != nil || c != ':' {
			return st.wrap(errors.New("expected ':'"))
		}
		st.pos++
		if key != "nftables" {
			if _, err := st.value(); err != nil {
				return st.wrap(err)
			}
			b.warn("ignored top-level key %q", key)
			continue
		}
		seen = true
		if err := jsonArray(st, p, b); err != nil {
			return err
		}
	}
	if c, err := st.peek(); err == nil {
		return st.wrap(fmt.Errorf("unexpected %q after the top-level object", c))
	}
	if !seen {
		return errors.New(`nft JSON: no "nftables" array`)
	}
	return nil
}

// jsonPipeline reads big arrays in segments on every core (jsonpipe.go);
// tests turn it off to compare with the one-at-a-time reader.
var jsonPipeline = true

func jsonArray(st *jsonStream, p *jsonParser, b *builder) error {
	c, err := st.peek()
	if err != nil {
		return st.wrap(err)
	}
	if c != '[' {
		return fmt.Errorf(`nft JSON: "nftables" is not an array`)
	}
	st.pos++
	w := &renderer{}
	start, commaTaken := 0, false
	if jsonPipeline && runtime.GOMAXPROCS(0) > 1 {
		end, err := jsonArrayParallel(st, p, b, w)
		if err != nil {
			return err
		}
		start, commaTaken = end.count, end.commaTaken
	}
	for i := start; ; i++ {
		if i != start || !commaTaken { // else the ',' before it is read
			c, err := st.peek()
			if err != nil {
				return st.wrap(err)
			}
			if c == ']' {
				st.pos++
				return nil
			}
			if i > 0 {
				if c != ',' {
					return st.wrap(errors.New("expected ',' or ']'"))
				}
				st.pos++
			}
		}
		if v, ok := st.object(p); ok {
			b.jsonObject(v, w, i)
			continue
		}
		// Not a whole object: frame it on its own, for the error it has.
		raw, err := st.value()
		if err == nil && len(raw) == 0 {
			err = errors.New("expected a value")
		}
		if err != nil {
			return st.wrap(fmt.Errorf("object %d: %w", i, err))
		}
		// raw is a fresh copy that is never written again: the strings of
		// the parsed tree point into it
		v, err := p.parse(unsafe.String(&raw[0], len(raw)))
		if err != nil {
			return st.wrap(fmt.Errorf("object %d: %w", i, err))
		}
		b.jsonObject(v, w, i)
	}
}

// object parses the object at pos straight from the read buffer, in one
// pass (the strings of the tree point into the buffer, which is never
// written again once read: fill moves on to a new one). ok is false, and
// nothing consumed, when it is not a well-formed object.
func (st *jsonStream) object(p *jsonParser) (*jsonValue, bool) {
	if c, err := st.peek(); err != nil || c != '{' {
		return nil, false
	}
	for {
		v, n, short, err := p.parsePrefix(unsafe.String(&st.buf[st.pos], len(st.buf)-st.pos))
		if err == nil {
			st.pos += n
			return v, true
		}
		if !short || !st.fill(st.pos) {
			return nil, false
		}
	}
}

// jsonStream frames a JSON stream: it returns each value as a fresh
// byte slice, reading r as needed, without holding more than the current
// value (and a read buffer) in memory.
type jsonStream struct {
	r    io.Reader
	buf  []byte
	pos  int   // next unread byte in buf
	base int64 // input offset of buf[0]
	eof  bool
	err  error
}

const jsonReadSize = 256 << 10

// fill reads more input, keeping buf[keep:]. What was read is never
// written again (strings point into it): the input is read into the room
// after it, and when that is short the rest moves to a new buffer. (A
// pipe's reads are short: moving at every read would cost a buffer each.)
func (st *jsonStream) fill(keep int) bool {
	if st.eof {
		return false
	}
	if rest := len(st.buf) - keep; cap(st.buf)-len(st.buf) < jsonReadSize/2 {
		nb := make([]byte, rest, max(2*rest, jsonReadSize)+jsonReadSize)
		copy(nb, st.buf[keep:])
		st.buf = nb
		st.pos -= keep
		st.base += int64(keep)
	}
	n, err := st.r.Read(st.buf[len(st.buf):cap(st.buf)])
	st.buf = st.buf[:len(st.buf)+n]
	if err != nil {
		st.eof = true
		if err != io.EOF {
			st.err = err
		}
	}
	return n > 0 || !st.eof
}

var errNFTJSONEOF = errors.New("unexpected end of input")

// peek skips white space and returns the next byte.
func (st *jsonStream) peek() (byte, error) {
	for {
		for st.pos < len(st.buf) {
			switch c := st.buf[st.pos]; c {
			case ' ', '\t', '\n', '\r':
				st.pos++
			default:
				return c, nil
			}
		}
		if !st.fill(st.pos) {
			if st.err != nil {
				return 0, st.err
			}
			return 0, errNFTJSONEOF
		}
	}
}

// value returns a copy of the next JSON value's bytes. It finds the end of
// the value only (strings, nesting); the tree parser checks the rest.
func (st *jsonStream) value() ([]byte, error) {
	from, to, err := st.extent()
	if err != nil {
		return nil, err
	}
	return st.take(from, to), nil
}

// extent finds the next JSON value, st.buf[from:to], reading as needed.
func (st *jsonStream) extent() (from, to int, err error) {
	c, err := st.peek()
	if err != nil {
		return 0, 0, err
	}
	switch c {
	case ',', ':', '}', ']':
		return 0, 0, fmt.Errorf("expected a value, found %q", c)
	}
	start := st.pos
	i := st.pos
	depth := 0
	inStr, esc := false, false
	for {
		for ; i < len(st.buf); i++ {
			c := st.buf[i]
			if inStr {
				if !esc {
					// a tight loop to the next quote or backslash
					for c != '"' && c != '\\' && i+1 < len(st.buf) {
						i++
						c = st.buf[i]
					}
				}
				switch {
				case esc:
					esc = false
				case c == '\\':
					esc = true
				case c == '"':
					inStr = false
					if depth == 0 {
						return start, i + 1, nil
					}
				}
				continue
			}
			switch c {
			case '"':
				inStr = true
			case '{', '[':
				depth++
			case '}', ']':
				if depth == 0 {
					// the end of an enclosing container ends a scalar
					return start, i, nil
				}
				depth--
				if depth == 0 {
					return start, i + 1, nil
				}
			case ',', ' ', '\t', '\n', '\r', ':':
				if depth == 0 {
					return start, i, nil
				}
			}
		}
		off := i - start
		if !st.fill(start) {
			if depth == 0 && !inStr && off > 0 {
				return st.pos, st.pos + off, nil
			}
			if st.err != nil {
				return 0, 0, st.err
			}
			return 0, 0, errNFTJSONEOF
		}
		start = st.pos
		i = start + off
	}
}

// inString marks the bytes that end the plain part of a string.
var inString [256]bool

func init() { inString['"'], inString['\\'] = true, true }

// inNumber marks the bytes a number's text runs over.
var inNumber = [256]bool{'0': true, '1': true, '2': true, '3': true, '4': true, '5': true, '6': true,
	'7': true, '8': true, '9': true, '.': true, 'e': true, 'E': true, '+': true, '-': true}

func (st *jsonStream) take(from, to int) []byte {
	out := make([]byte, to-from)
	copy(out, st.buf[from:to])
	st.pos = to
	return out
}

func (st *jsonStream) wrap(err error) error {
	return fmt.Errorf("nft JSON: offset %d: %w", st.base+int64(st.pos), err)
}

// ruleChain returns chain name of t for a JSON rule. nft lists a table's
// chains, then their rules chain by chain in the same order: the chain of
// the last rule, or one of the next few chains, is looked for first.
func (b *builder) ruleChain(t *inspect.NFTTable, name string) *inspect.NFTChain {
	if c := b.lastChain; c != nil && c.Name == name { // b.table keeps it for the same table
		return c
	}
	if b.cursorTable != t {
		b.cursorTable, b.cursor = t, -1
	}
	for j := b.cursor + 1; j < len(t.Chains) && j <= b.cursor+8; j++ {
		if t.Chains[j].Name == name {
			b.cursor, b.lastChain = j, t.Chains[j]
			return b.lastChain
		}
	}
	c := t.Chain(name)
	if c == nil {
		c = t.EnsureChain(strings.Clone(name))
	}
	for j := b.cursor + 1; j < len(t.Chains) && j <= b.cursor+64; j++ {
		if t.Chains[j] == c {
			b.cursor = j
			break
		}
	}
	b.lastChain = c
	return c
}

func (b *builder) jsonTable(family, name string) *inspect.NFTTable {
	if family == "" {
		family = "ip"
	}
	return b.table(knftables.Family(family), name)
}

// jsonHandle reads a "handle" member; a present but malformed one is
// reported.
func (b *builder) jsonHandle(o *jsonValue, i int) *int {
	h := readHandle(o)
	b.handleWarning(h, i)
	return h.n
}

// handle is a "handle" member as read: its number, or the text of a
// malformed one.
type handle struct {
	n   *int
	bad *string
}

func readHandle(o *jsonValue) handle {
	h := o.get("handle")
	if h == nil {
		return handle{}
	}
	n, err := strconv.Atoi(h.scalar())
	if err != nil || !h.isNum() {
		s := h.scalar()
		return handle{bad: &s}
	}
	return handle{n: &n}
}

func (b *builder) handleWarning(h handle, i int) {
	if h.bad != nil {
		b.warn("object %d: bad handle %q", i, *h.bad)
	}
}

// jsonComment returns a copy of a comment (it would otherwise keep the
// whole object's bytes alive), or nil.
func jsonComment(v *jsonValue) *string {
	if v == nil || v.kind != 's' {
		return nil
	}
	c := strings.Clone(v.str)
	return &c
}

func (b *builder) jsonObject(o *jsonValue, w *renderer, i int) {
	kind, v, ok := o.single()
	if !ok {
		if o.kind == 'o' && o.n > 0 {
			v = o.kid(0)
			kind = v.key
		} else {
			b.warn("object %d: not an object", i)
			return
		}
	}
	switch kind {
	case "metainfo":
		b.dump.Version = strings.Clone(v.fieldStr("version"))
	case "table":
		name := v.fieldStr("name")
		if name == "" {
			b.warn("object %d: table without a name", i)
			return
		}
		t := b.jsonTable(v.fieldStr("family"), strings.Clone(name))
		t.Handle = b.jsonHandle(v, i)
		if c := jsonComment(v.get("comment")); c != nil {
			t.Comment = c
		}
		for _, f := range v.get("flags").strs() {
			t.Flags = append(t.Flags, knftables.TableFlag(f))
		}
	case "chain", "rule", "set", "map":
		pr := prepareObject(kind, v, w)
		if !b.addPrepared(&pr, i) {
			what := "set/map without a name or table"
			switch kind {
			case "chain":
				what = "chain without a name or table"
			case "rule":
				what = "rule without a chain or table"
			}
			b.warn("object %d: %s", i, what)
		}
	case "element":
		t := b.jsonTable(v.fieldStr("family"), v.fieldStr("table"))
		name := v.fieldStr("name")
		if s := t.Set(name); s != nil {
			s.Elements = append(s.Elements, w.elements(v.get("elem"), false, t.Family, t.Name, s.Name)...)
		} else if m := t.Map(name); m != nil {
			m.Elements = append(m.Elements, w.elements(v.get("elem"), true, t.Family, t.Name, m.Name)...)
		} else {
			b.warn("object %d: elements of unknown set %q", i, name)
		}
	}
}

// prepared is an object of a kind the builder adds from what it read
// (on a worker, for the parallel reader): a rule, chain, set or map.
type prepared struct {
	kind  byte // 0: not prepared (no name or table), 'r' a rule, 's' a set or map, 'c' a chain
	rule  preparedRule
	set   preparedSet
	chain preparedChain
}

// prepareObject reads an object of kind rule, chain, set or map.
func prepareObject(kind string, v *jsonValue, w *renderer) (pr prepared) {
	var ok bool
	switch kind {
	case "rule":
		pr.rule, ok = prepareRule(v, w)
		pr.kind = 'r'
	case "chain":
		pr.chain, ok = prepareChain(v)
		pr.kind = 'c'
	case "set", "map":
		pr.set, ok = prepareSet(v, kind == "map", w)
		pr.kind = 's'
	}
	if !ok {
		pr.kind = 0
	}
	return pr
}

// addPrepared adds what prepareObject read, as object i; false when it
// read nothing.
func (b *builder) addPrepared(pr *prepared, i int) bool {
	switch pr.kind {
	case 'r':
		r := &pr.rule
		c := b.ruleChain(b.jsonTable(r.family, r.table), r.chain)
		b.handleWarning(r.handle, i)
		b.raw.add(c, rawRule{text: r.text, comment: r.comment, handle: r.handle.n})
	case 'c':
		b.addChain(&pr.chain, i)
	case 's':
		b.addSet(pr.set, i)
	default:
		return false
	}
	return true
}

// preparedRule is a rule object, read and rendered.
type preparedRule struct {
	family, table, chain string
	text                 string
	comment              *string
	handle               handle
}

// prepareRule reads a rule object and renders its text (ok false without
// a chain or table).
func prepareRule(v *jsonValue, w *renderer) (r preparedRule, ok bool) {
	r.chain, r.table = v.fieldStr("chain"), v.fieldStr("table")
	if r.chain == "" || r.table == "" {
		return r, false
	}
	r.family = v.fieldStr("family")
	if r.family == "" {
		r.family = "ip"
	}
	w.family = r.family
	r.text = w.ruleText(v.get("expr"))
	r.comment = jsonComment(v.get("comment"))
	r.handle = readHandle(v)
	return r, true
}

// preparedChain is a chain object, read.
type preparedChain struct {
	family, table, name string
	handle              handle
	comment             *string
	// a base chain's
	typ      *knftables.BaseChainType
	hook     *knftables.BaseChainHook
	priority *knftables.BaseChainPriority
	policy   *knftables.BaseChainPolicy
	device   *string
}

// prepareChain reads a chain object (ok false without a name or table).
func prepareChain(v *jsonValue) (pc preparedChain, ok bool) {
	name, table := v.fieldStr("name"), v.fieldStr("table")
	if name == "" || table == "" {
		return pc, false
	}
	pc.name, pc.table, pc.family = strings.Clone(name), table, v.fieldStr("family")
	if pc.family == "" {
		pc.family = "ip"
	}
	pc.handle = readHandle(v)
	pc.comment = jsonComment(v.get("comment"))
	if hook := v.fieldStr("hook"); hook != "" {
		typ := knftables.BaseChainType(v.fieldStr("type"))
		hk := knftables.BaseChainHook(hook)
		pr := basePriority(knftables.Family(pc.family), v.fieldStr("prio"))
		pc.typ, pc.hook, pc.priority = &typ, &hk, &pr
		if pol := v.fieldStr("policy"); pol != "" {
			p := knftables.BaseChainPolicy(pol)
			pc.policy = &p
		}
		if devs := v.get("dev").strs(); len(devs) > 0 {
			d := strings.Join(devs, ",")
			pc.device = &d
		}
	}
	return pc, true
}

// addChain adds a chain read by prepareChain, as object i.
func (b *builder) addChain(pc *preparedChain, i int) {
	c := b.jsonTable(pc.family, pc.table).EnsureChain(pc.name)
	c.Handle = pc.handle.n
	b.handleWarning(pc.handle, i)
	c.Comment = pc.comment
	if pc.hook != nil {
		c.Type, c.Hook, c.Priority = pc.typ, pc.hook, pc.priority
		if pc.policy != nil {
			c.Policy = pc.policy
		}
		if pc.device != nil {
			c.Device = pc.device
		}
	}
}

// preparedSet is a set or map object, read.
type preparedSet struct {
	family, table string
	set           *inspect.NFTSet // or
	mp            *inspect.NFTMap
	handle        handle
}

// prepareSet reads a set or map object (ok false without a name or table).
func prepareSet(js *jsonValue, isMap bool, w *renderer) (ps preparedSet, ok bool) {
	name, table := js.fieldStr("name"), js.fieldStr("table")
	if name == "" || table == "" {
		return ps, false
	}
	name = strings.Clone(name)
	ps.table, ps.family = table, js.fieldStr("family")
	if ps.family == "" {
		ps.family = "ip"
	}
	family := knftables.Family(ps.family)
	w.family = ps.family
	typ := strings.Join(js.get("type").strs(), " . ")
	var flags []knftables.SetFlag
	for _, f := range js.get("flags").strs() {
		flags = append(flags, knftables.SetFlag(f))
	}
	timeout := jsonDuration(js.get("timeout"))
	gc := jsonDuration(js.get("gc-interval"))
	var size *uint64
	if s := js.fieldStr("size"); s != "" {
		if n, err := strconv.ParseUint(s, 10, 64); err == nil {
			size = &n
		}
	}
	var policy *knftables.SetPolicy
	if p := js.fieldStr("policy"); p != "" {
		pol := knftables.SetPolicy(p)
		policy = &pol
	}
	ps.handle = readHandle(js)
	comment := jsonComment(js.get("comment"))
	if isMap {
		if data := js.get("map").strs(); len(data) > 0 {
			typ += " : " + strings.Join(data, " . ")
		}
		ps.mp = &inspect.NFTMap{Map: knftables.Map{
			Family: family, Table: table, Name: name, Type: typ, Flags: flags,
			Timeout: timeout, GCInterval: gc, Size: size, Policy: policy, Comment: comment, Handle: ps.handle.n,
		}}
		ps.mp.Elements = w.elements(js.get("elem"), true, family, table, name)
		return ps, true
	}
	ps.set = &inspect.NFTSet{Set: knftables.Set{
		Family: family, Table: table, Name: name, Type: typ, Flags: flags,
		Timeout: timeout, GCInterval: gc, Size: size, Policy: policy, Comment: comment, Handle: ps.handle.n,
	}}
	if js.get("auto-merge").isTrue() {
		v := true
		ps.set.AutoMerge = &v
	}
	ps.set.Elements = w.elements(js.get("elem"), false, family, table, name)
	return ps, true
}

// addSet adds a set or map read by prepareSet, as object i.
func (b *builder) addSet(ps preparedSet, i int) {
	t := b.jsonTable(ps.family, ps.table)
	b.handleWarning(ps.handle, i)
	if ps.mp != nil {
		t.AddMap(ps.mp)
		return
	}
	t.AddSet(ps.set)
}

func jsonDuration(v *jsonValue) *time.Duration {
	s := v.scalar()
	if s == "" || !v.isNum() {
		return nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || f > math.MaxInt64/float64(time.Second) {
		return nil
	}
	d := time.Duration(f * float64(time.Second))
	return &d
}

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

func (w *renderer) stmt(e *jsonValue) {
	k, v, ok := e.single()
	if !ok {
		w.unknown("statement")
		return
	}
	switch k {
	case "match":
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
	case "counter":
		switch {
		case v.isStr():
			w.ws(`counter name "`, v.str, `"`)
		default:
			w.ws("counter")
			if p := v.fieldStr("packets"); p != "" {
				w.ws(" packets ", p, " bytes ", v.fieldStr("bytes"))
			}
		}
	case "mangle":
		key := v.get("key")
		ctx := ctxOfExpr(key)
		w.expr(key, exprCtx{})
		w.ws(" set ")
		w.expr(v.get("value"), ctx)
	case "accept", "drop", "continue", "return":
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
	case "xt":
		w.ws("xt ", v.fieldStr("type"), " ", v.fieldStr("name"))
	case "log":
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
	case "limit":
		w.limit(v)
	case "quota":
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
	case "notrack", "synproxy", "last":
		w.ws(k)
	case "queue":
		w.ws("queue")
		if fl := v.get("flags").strs(); len(fl) > 0 {
			w.ws(" flags ", strings.Join(fl, ","))
		}
		if n := v.get("num"); n != nil {
			w.ws(" to ")
			w.expr(n, exprCtx{})
		}
	case "ct helper", "ct timeout", "ct expectation":
		w.ws(k, ` set "`, v.scalar(), `"`)
	case "ct count":
		w.ws("ct count ")
		if v.get("inv").isTrue() {
			w.ws("over ")
		}
		w.ws(v.fieldStr("val"))
	case "dup":
		w.ws("dup to ")
		w.expr(v.get("addr"), exprCtx{})
		if d := v.get("dev"); d != nil {
			w.ws(" device ")
			w.expr(d, exprCtx{quote: true})
		}
	case "fwd":
		w.ws("fwd to ")
		w.expr(v.get("dev"), exprCtx{quote: true})
	case "flow":
		w.ws("flow ", orDefault(v.fieldStr("op"), "add"), " ", v.fieldStr("flowtable"))
	case "meter":
		w.ws("meter ", v.fieldStr("name"), " { ")
		w.expr(v.get("key"), exprCtx{})
		if st := v.get("stmt"); st != nil {
			w.ws(" ")
			w.stmt(st)
		}
		w.ws(" }")
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

func (w *renderer) expr(e *jsonValue, ctx exprCtx) {
	w.depth++
	defer func() { w.depth-- }()
	if w.depth > maxExprDepth {
		w.unknown("too-deep")
		return
	}
	if e == nil {
		return
	}
	switch e.kind {
	case 'z':
		return
	case 's':
		if ctx.quote && !strings.HasPrefix(e.str, "@") {
			w.ws(`"`, e.str, `"`)
		} else {
			w.ws(e.str)
		}
		return
	case '#':
		if ctx.hex {
			if n, err := strconv.ParseUint(e.str, 10, 32); err == nil {
				w.buf = fmt.Appendf(w.buf, "0x%08x", n)
				return
			}
		}
		w.ws(e.str)
		return
	case 't':
		w.ws("exists")
		return
	case 'f':
		w.ws("missing")
		return
	case 'a':
		w.setLiteral(e, ctx)
		return
	}
	k, v, ok := e.single()
	if !ok {
		w.unknown("expression")
		return
	}
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
	case "ct":
		w.ws("ct ")
		if d := v.fieldStr("dir"); d != "" {
			w.ws(d, " ")
		}
		if f := v.fieldStr("family"); f != "" {
			w.ws(f, " ")
		}
		w.ws(v.fieldStr("key"))
	case "fib":
		w.ws("fib ", strings.Join(v.get("flags").strs(), " . "), " ", v.fieldStr("result"))
	case "numgen":
		w.ws("numgen ", v.fieldStr("mode"), " mod ", v.fieldStr("mod"))
		if o := v.fieldStr("offset"); o != "" && o != "0" {
			w.ws(" offset ", o)
		}
	case "jhash":
		w.ws("jhash ")
		w.expr(v.get("expr"), exprCtx{})
		w.ws(" mod ", v.fieldStr("mod"))
		if s := v.fieldStr("seed"); s != "" {
			if n, err := strconv.ParseUint(s, 10, 32); err == nil {
				w.buf = fmt.Appendf(w.buf, " seed 0x%x", n)
			}
		}
		if o := v.fieldStr("offset"); o != "" && o != "0" {
			w.ws(" offset ", o)
		}
	case "symhash":
		w.ws("symhash mod ", v.fieldStr("mod"))
		if o := v.fieldStr("offset"); o != "" && o != "0" {
			w.ws(" offset ", o)
		}
	case "rt":
		w.ws("rt ")
		if f := v.fieldStr("family"); f != "" {
			w.ws(f, " ")
		}
		w.ws(v.fieldStr("key"))
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
	case "&", "|", "^", "<<", ">>":
		if !v.isArr() {
			break
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
	case "accept", "drop", "continue", "return":
		w.ws(k)
	case "jump", "goto":
		w.ws(k, " ", v.fieldStr("target"))
	default:
		w.unknown(k)
	}
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
