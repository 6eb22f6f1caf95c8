package correlate

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// jsonScanner reads JSON values straight from the input bytes, without
// building a tree: the fast objects decoder (objects_fast.go) pulls the
// fields it wants and skips the rest. What it skips it still validates as
// encoding/json does (strings, escapes, numbers, literals, nesting depth),
// so that malformed input is never taken for good input.
//
// Two kinds of trouble are sticky:
//   - bad: the input is not well-formed JSON. The caller gives up and lets
//     the generic decoder produce its error.
//   - odd: a well-formed value the typed fields would not take as they are
//     (a number where a string is due, a duplicate key, a float port). The
//     caller hands that object to the generic decoder, which knows the
//     exact rules.
type jsonScanner struct {
	data  []byte
	pos   int
	depth int
	bad   bool
	odd   bool
}

// maxJSONDepth is encoding/json's nesting limit.
const maxJSONDepth = 10000

func (s *jsonScanner) fail() {
	s.bad = true
	s.pos = len(s.data) // every loop ends at once
}

func (s *jsonScanner) ws() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// peek returns the next byte after white space, 0 at the end.
func (s *jsonScanner) peek() byte {
	s.ws()
	if s.pos < len(s.data) {
		return s.data[s.pos]
	}
	return 0
}

func (s *jsonScanner) literal(lit string) {
	if !bytes.HasPrefix(s.data[s.pos:], []byte(lit)) {
		s.fail()
		return
	}
	s.pos += len(lit)
}

// null consumes a null if one comes next.
func (s *jsonScanner) null() bool {
	if s.peek() == 'n' {
		s.literal("null")
		return true
	}
	return false
}

// enterObject starts reading an object: true when it has a first member
// (read it with key). null, and an empty object, give false (emptyOK
// tells the two apart); another value is odd and skipped.
func (s *jsonScanner) enterObject() (more, present bool) { return s.enter('{', '}') }

// nextMember moves past a member's value: true when another follows.
func (s *jsonScanner) nextMember() bool { return s.next('}') }

// enterArray starts reading an array: true when it has a first element.
// present is false for null; another value is odd and skipped.
func (s *jsonScanner) enterArray() (more, present bool) { return s.enter('[', ']') }

// nextElement moves past an element: true when another follows.
func (s *jsonScanner) nextElement() bool { return s.next(']') }

// enter starts reading a container that opens with open.
func (s *jsonScanner) enter(open, close byte) (more, present bool) {
	switch s.peek() {
	case open:
		s.pos++
		if s.depth++; s.depth > maxJSONDepth {
			s.fail()
			return false, false
		}
		if s.peek() == close {
			s.pos++
			s.depth--
			return false, true
		}
		return true, true
	case 'n':
		s.literal("null")
		return false, false
	}
	s.odd = true
	s.skip()
	return false, false
}

// next moves past a container's item: true when another follows, false at
// close (or on a syntax error).
func (s *jsonScanner) next(close byte) bool {
	switch s.peek() {
	case ',':
		s.pos++
		return true
	case close:
		s.pos++
		s.depth--
		return false
	}
	s.fail()
	return false
}

// key reads a member's name and the colon after it. Escaped names are
// unescaped, as encoding/json matches them.
func (s *jsonScanner) key() []byte {
	if s.peek() != '"' {
		s.fail()
		return nil
	}
	raw, plain := s.scanString()
	if s.peek() != ':' {
		s.fail()
		return nil
	}
	s.pos++
	if plain {
		return raw[1 : len(raw)-1]
	}
	var k string
	if err := json.Unmarshal(raw, &k); err != nil {
		s.fail()
		return nil
	}
	return []byte(k)
}

// scanString reads a string token at pos (which holds '"'): the token with
// its quotes, and whether its content is plain (no escapes, valid UTF-8),
// that is, equal to the decoded string.
func (s *jsonScanner) scanString() (raw []byte, plain bool) {
	start := s.pos
	plain = true
	ascii := true
	i := s.pos + 1
	for i < len(s.data) {
		c := s.data[i]
		switch {
		case c == '"':
			s.pos = i + 1
			raw = s.data[start:s.pos]
			if !ascii && plain && !utf8.Valid(raw) {
				plain = false // encoding/json replaces invalid UTF-8
			}
			return raw, plain
		case c == '\\':
			plain = false
			i++
			if i >= len(s.data) {
				s.fail()
				return nil, false
			}
			switch s.data[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				if i+4 >= len(s.data) {
					s.fail()
					return nil, false
				}
				for _, h := range s.data[i+1 : i+5] {
					if !isHex(h) {
						s.fail()
						return nil, false
					}
				}
				i += 5
			default:
				s.fail()
				return nil, false
			}
		case c < 0x20:
			s.fail()
			return nil, false
		default:
			if c >= 0x80 {
				ascii = false
			}
			i++
		}
	}
	s.fail()
	return nil, false
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

// str reads a string value; null is "" (encoding/json leaves a string
// untouched on null); another value is odd. intern, when set, shares
// repeated short strings (protocols, namespaces, node names).
func (s *jsonScanner) str(intern *interner) string {
	switch s.peek() {
	case '"':
		raw, plain := s.scanString()
		if s.bad {
			return ""
		}
		if !plain {
			var v string
			if err := json.Unmarshal(raw, &v); err != nil {
				s.fail()
			}
			return v
		}
		if intern != nil {
			return intern.get(raw[1 : len(raw)-1])
		}
		return string(raw[1 : len(raw)-1])
	case 'n':
		s.literal("null")
		return ""
	}
	s.odd = true
	s.skip()
	return ""
}

// strPtr reads a *string: nil for null.
func (s *jsonScanner) strPtr(intern *interner, slab *stringSlab) *string {
	if s.null() {
		return nil
	}
	v := s.str(intern)
	return slab.ptr(v)
}

// strings reads a []string: nil for null, empty for [] (as encoding/json).
func (s *jsonScanner) strings(intern *interner) []string {
	more, present := s.enterArray()
	if !present {
		return nil
	}
	out := []string{}
	for ; more; more = s.nextElement() {
		out = append(out, s.str(intern))
	}
	return out
}

// int32 reads an integer; null is 0. Fractions, exponents and values out
// of range are odd: encoding/json refuses them for an int32.
func (s *jsonScanner) int32() int32 {
	c := s.peek()
	if c == 'n' {
		s.literal("null")
		return 0
	}
	if c != '-' && (c < '0' || c > '9') {
		s.odd = true
		s.skip()
		return 0
	}
	start := s.pos
	s.skipNumber()
	if s.bad {
		return 0
	}
	v, err := strconv.ParseInt(string(s.data[start:s.pos]), 10, 32)
	if err != nil {
		s.odd = true
		return 0
	}
	return int32(v)
}

// int32Ptr reads a *int32: nil for null.
func (s *jsonScanner) int32Ptr() *int32 {
	if s.null() {
		return nil
	}
	v := s.int32()
	return &v
}

var (
	jsonTrue, jsonFalse = true, false
)

// boolPtr reads a *bool: nil for null. The pointers are shared (the
// objects are read, never written).
func (s *jsonScanner) boolPtr() *bool {
	switch s.peek() {
	case 't':
		s.literal("true")
		return &jsonTrue
	case 'f':
		s.literal("false")
		return &jsonFalse
	case 'n':
		s.literal("null")
		return nil
	}
	s.odd = true
	s.skip()
	return nil
}

// skip validates and skips one value.
func (s *jsonScanner) skip() {
	switch s.peek() {
	case '{':
		for more, _ := s.enterObject(); more; more = s.nextMember() {
			s.key()
			s.skip()
		}
	case '[':
		for more, _ := s.enterArray(); more; more = s.nextElement() {
			s.skip()
		}
	case '"':
		s.scanString()
	case 't':
		s.literal("true")
	case 'f':
		s.literal("false")
	case 'n':
		s.literal("null")
	default:
		s.skipNumber()
	}
}

// skipNumber validates a number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *jsonScanner) skipNumber() {
	d, i := s.data, s.pos
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && '1' <= d[i] && d[i] <= '9':
		for i < len(d) && '0' <= d[i] && d[i] <= '9' {
			i++
		}
	default:
		s.fail()
		return
	}
	if i < len(d) && d[i] == '.' {
		i++
		if i >= len(d) || d[i] < '0' || d[i] > '9' {
			s.fail()
			return
		}
		for i < len(d) && '0' <= d[i] && d[i] <= '9' {
			i++
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if i >= len(d) || d[i] < '0' || d[i] > '9' {
			s.fail()
			return
		}
		for i < len(d) && '0' <= d[i] && d[i] <= '9' {
			i++
		}
	}
	s.pos = i
}

// interner shares the strings that repeat across objects. It stops
// growing at a bound, so that hostile input cannot make it large.
type interner struct{ m map[string]string }

const maxInterned = 1 << 12

func (in *interner) get(b []byte) string {
	if v, ok := in.m[string(b)]; ok {
		return v
	}
	v := string(b)
	if len(in.m) < maxInterned && len(b) <= 64 {
		if in.m == nil {
			in.m = map[string]string{}
		}
		in.m[v] = v
	}
	return v
}

// stringSlab hands out *string from large chunks instead of one
// allocation each.
type stringSlab struct{ chunk []string }

func (sl *stringSlab) ptr(v string) *string {
	if len(sl.chunk) == cap(sl.chunk) {
		sl.chunk = make([]string, 0, 1024)
	}
	sl.chunk = append(sl.chunk, v)
	return &sl.chunk[len(sl.chunk)-1]
}
