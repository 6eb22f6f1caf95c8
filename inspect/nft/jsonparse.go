package nft

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"unsafe"
)

// The JSON scanner and parser: one value onto a tape (see json.go).

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

// cut reports whether an array of a set's elements held more items than
// it keeps (jsonMaxItems): the parser read the rest and dropped them.
func (v *jsonValue) cut() bool { return v != nil && v.kind == 'a' && v.str == cutItems }

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
	// cutAt: the parse ran out of input among the items an array of set
	// elements drops (past jsonMaxItems); cutAt is the offset after the
	// last it keeps (0: not so)
	cutAt int
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
	// no more than a set at the cap needs, the tape grows past it if need be
	if n = min(n, len(s)/8, jsonTapeAhead); cap(p.tape) < n {
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
	p.s, p.i, p.err, p.short, p.cutAt = s, 0, nil, false, 0
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
	// end is the tape's length at an array of elements' jsonMaxItems'th
	// item: the items after it are parsed and dropped
	end int
	// endAt is the offset in the input after that item
	endAt int
}

// jsonMaxItems bounds the items kept of an array of set or map elements
// ("elem"): a set of 10 million elements took 3.4 GB to read.
const jsonMaxItems = MaxSetElements

// jsonTapeAhead bounds the tape sizeTape makes: for a set at the cap of
// elements of one value each.
const jsonTapeAhead = 2 * jsonMaxItems

// cutItems is the str of an array whose items past jsonMaxItems were
// dropped (see cut).
const cutItems = "\x00cut"

// value parses the value at p.i onto the tape. It is one loop over
// locals, with the open containers on a stack of its own: the recursive
// descent it replaced spent a third of its time loading and storing the
// parser's fields and calling itself. (Its helpers are small enough to be
// inlined, or are the scanners of a whole string or number.) What it
// accepts and the errors it gives (message and offset) are the recursive
// descent's, kept in jsonref_test.go to be compared with.
func (p *jsonParser) value() {
	s, i, tape := p.s, p.i, p.tape
	stack := p.stack[:0]
	key := ""
	var what string // why it failed, at i
	defer func() {
		if what != "" {
			p.cutAt = cutOpen(stack)
		}
		p.tape, p.stack, p.i = tape, stack[:0], i
		if what != "" {
			p.fail(what)
		}
	}()
	for {
		// a value, named key, at i
		if i = skipSpace(s, i); i >= len(s) {
			what = "unexpected end"
			return
		}
		switch c := s[i]; {
		case c == '{' || c == '[':
			if len(stack) >= jsonMaxDepth {
				what = "nesting too deep"
				return
			}
			obj, kind := c == '{', byte('a')
			if obj {
				kind = 'o'
			}
			stack = append(stack, openValue{at: len(tape), obj: obj})
			tape = append(tape, jsonValue{kind: kind, key: key})
			if i = skipSpace(s, i+1); i < len(s) && s[i] == c+2 { // c+2: ']' or '}'
				i++
				tape[len(tape)-1].span = 1
				stack = stack[:len(stack)-1]
				break // an empty container: a value read
			}
			if key = ""; obj {
				key, i, what = memberName(s, i)
			}
			if what != "" {
				return
			}
			continue
		default:
			var v jsonValue
			if v, i, what = jsonScalar(s, i); what != "" {
				return
			}
			v.key = key
			tape = append(tape, v)
		}
		// a value read: it is the whole, or a member of the innermost
		// open container, which goes on or closes (and is a value read)
		for {
			if len(stack) == 0 {
				return
			}
			top := &stack[len(stack)-1]
			if top.n++; top.n >= jsonMaxItems {
				tape = capItems(top, tape, i)
			}
			if i = skipSpace(s, i); i >= len(s) {
				what = "unexpected end"
				return
			}
			if s[i] == ',' {
				if i, key = i+1, ""; top.obj {
					key, i, what = memberName(s, i)
				}
				if what != "" {
					return
				}
				break
			} else if s[i] != closerOf(top.obj) {
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
			if top.n > jsonMaxItems && top.end > 0 {
				tape[top.at].n, tape[top.at].str = jsonMaxItems, cutItems
			}
			stack = stack[:len(stack)-1]
		}
	}
}

// jsonScalar reads the string, literal or number at i (a value of span 1).
func jsonScalar(s string, i int) (v jsonValue, next int, what string) {
	switch c := s[i]; {
	case c == '"':
		var str string
		if str, i, what = jsonString(s, i); what != "" {
			return v, i, what
		}
		return jsonValue{kind: 's', span: 1, str: str}, i, ""
	case c == 't' || c == 'f' || c == 'n':
		var kind byte
		if kind, i, what = jsonLiteral(s, i); what != "" {
			return v, i, what
		}
		return jsonValue{kind: kind, span: 1}, i, ""
	case c == '-' || c >= '0' && c <= '9':
		from := i
		if i, what = jsonNumber(s, i); what != "" {
			return v, i, what
		}
		return jsonValue{kind: '#', span: 1, str: s[from:i]}, i, ""
	}
	return v, i, "unexpected character"
}

// capItems keeps no more than jsonMaxItems items of an array of set or map
// elements (named "elem"): at the last it marks the tape's end, after it
// drops the item just read (its syntax checked all the same). i is the
// offset after that item.
func capItems(top *openValue, tape []jsonValue, i int) []jsonValue {
	switch {
	case top.n == jsonMaxItems:
		if !top.obj && tape[top.at].key == "elem" {
			top.end, top.endAt = len(tape), i
		}
	case top.end > 0:
		tape = tape[:top.end]
	}
	return tape
}

// cutOpen is the offset after the kept items of the innermost array
// still open that drops items past jsonMaxItems, or 0.
func cutOpen(stack []openValue) int {
	for k := len(stack) - 1; k >= 0; k-- {
		if stack[k].end > 0 {
			return stack[k].endAt
		}
	}
	return 0
}

// closerOf is the byte that closes an object or an array.
func closerOf(obj bool) byte {
	if obj {
		return '}'
	}
	return ']'
}

// jsonLiteral reads true, false or null at s[i]: its kind and the offset
// after it, or why it is none of them (at i).
func jsonLiteral(s string, i int) (kind byte, next int, what string) {
	word, kind := "null", byte('z')
	if s[i] == 't' {
		word, kind = "true", 't'
	} else if s[i] == 'f' {
		word, kind = "false", 'f'
	}
	if !strings.HasPrefix(s[i:], word) {
		return 0, i, "bad literal"
	}
	return kind, i + len(word), ""
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
		if c < ' ' {
			return "", j, "control character in string"
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

// inString marks the bytes that end the plain part of a string: its
// quote, a backslash, and the control characters a string may not hold
// (RFC 8259, section 7).
var inString = func() (t [256]bool) {
	for c := range ' ' {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

// jsonNumber returns the end of the number at s[i] ('-' or a digit), by
// RFC 8259's grammar: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?; or
// why it is none and where (at the end of s when s ends inside it, which
// may go on past the data at hand). What follows it is the caller's to
// check: in `01` the number is `0`.
func jsonNumber(s string, i int) (next int, what string) {
	if s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] > '0' && s[i] <= '9':
		i = digits(s, i+1)
	default:
		return i, "bad number"
	}
	if i < len(s) && s[i] == '.' {
		if i = digits(s, i+1); s[i-1] == '.' {
			return i, "bad number"
		}
	}
	if i < len(s) && s[i]|0x20 == 'e' {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		from := i
		if i = digits(s, i); i == from {
			return i, "bad number"
		}
	}
	return i, ""
}

// digits returns the end of the run of decimal digits at s[i].
func digits(s string, i int) int {
	for i < len(s) && s[i]-'0' < 10 {
		i++
	}
	return i
}
