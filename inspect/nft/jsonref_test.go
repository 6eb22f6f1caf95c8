package nft

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// refJSONParser is the recursive descent jsonParser was before it became
// one loop over locals: the reference the loop is compared with
// (FuzzJSONParserAgainstRef). It shares the parser's fields, its fail and
// its white space, string and number scanners; what it checks is the
// structure. encoding/json is the oracle for what is JSON (jsonValid).
type refJSONParser struct {
	jsonParser
	depth int
}

func (p *refJSONParser) parsePrefix(s string) (v *jsonValue, n int, short bool, err error) {
	p.s, p.i, p.depth, p.err, p.short = s, 0, 0, nil, false
	p.tape = p.tape[:0]
	p.value("")
	if p.err != nil {
		return nil, p.i, p.short, p.err
	}
	return &p.tape[0], p.i, false, nil
}

// value parses the value at p.i onto the tape, as a member named key.
func (p *refJSONParser) value(key string) {
	p.space()
	if p.i >= len(p.s) {
		p.fail("unexpected end")
		return
	}
	c := p.s[p.i]
	switch {
	case c == '{' || c == '[':
		p.container(c, key)
		return
	case c == '"':
		s := p.string()
		p.tape = append(p.tape, jsonValue{kind: 's', span: 1, key: key, str: s})
		return
	case c == 't':
		p.literal("true", 't', key)
		return
	case c == 'f':
		p.literal("false", 'f', key)
		return
	case c == 'n':
		p.literal("null", 'z', key)
		return
	case c == '-' || c >= '0' && c <= '9':
		j, what := jsonNumber(p.s, p.i)
		if what != "" {
			p.i = j
			p.fail(what)
			return
		}
		p.tape = append(p.tape, jsonValue{kind: '#', span: 1, key: key, str: p.s[p.i:j]})
		p.i = j
		return
	}
	p.fail("unexpected character")
}

func (p *refJSONParser) literal(word string, kind byte, key string) {
	if !strings.HasPrefix(p.s[p.i:], word) {
		p.fail("bad literal")
		return
	}
	p.i += len(word)
	p.tape = append(p.tape, jsonValue{kind: kind, span: 1, key: key})
}

// container parses an object or an array: its entry, then its members
// after it; span and n are set once they are all read.
func (p *refJSONParser) container(open byte, key string) {
	if p.depth >= jsonMaxDepth {
		p.fail("nesting too deep")
		return
	}
	p.depth++
	p.members(open, key)
	p.depth--
}

// members parses the container opening at p.i.
func (p *refJSONParser) members(open byte, key string) {
	isObj := open == '{'
	closer, kind := byte(']'), byte('a')
	if isObj {
		closer, kind = '}', 'o'
	}
	at := len(p.tape)
	p.tape = append(p.tape, jsonValue{kind: kind, key: key})
	p.i++
	n := int32(0)
	p.space()
	if p.i < len(p.s) && p.s[p.i] == closer {
		p.i++
		p.tape[at].span = 1
		return
	}
	for {
		var name string
		if isObj {
			p.space()
			if p.i >= len(p.s) || p.s[p.i] != '"' {
				p.fail("expected a member name")
				return
			}
			name = p.string()
			p.space()
			if p.i >= len(p.s) || p.s[p.i] != ':' {
				p.fail("expected ':'")
				return
			}
			p.i++
		}
		p.value(name)
		if p.err != nil {
			return
		}
		n++
		p.space()
		if p.i >= len(p.s) {
			p.fail("unexpected end")
			return
		}
		switch p.s[p.i] {
		case ',':
			p.i++
			continue
		case closer:
			p.i++
		default:
			p.fail("expected ',' or a closing bracket")
			return
		}
		break
	}
	if len(p.tape)-at > math.MaxInt32 {
		p.fail("value too large")
		return
	}
	p.tape[at].span = int32(len(p.tape) - at)
	p.tape[at].n = n
}

// string reads a JSON string at p.s[p.i] == '"'. Without escapes it is a
// substring of the input.
// string reads a string with the loop's own scanner: what the reference
// checks is the structure around it.
func (p *refJSONParser) string() string {
	str, next, what := jsonString(p.s, p.i)
	p.i = next
	if what != "" {
		p.fail(what)
		return ""
	}
	return str
}

// FuzzJSONParserAgainstRef: the parser's loop takes what the recursive
// descent takes, onto the same tape, and refuses what it refuses with the
// same error at the same offset.
func FuzzJSONParserAgainstRef(f *testing.F) {
	for _, p := range seedFiles(f) {
		if strings.HasSuffix(p, ".json") {
			b := readAll(f, p)
			f.Add(string(b))
			f.Add(string(b[:len(b)/3]))
		}
	}
	for _, s := range jsonParserCases {
		f.Add(s)
	}
	for _, c := range notJSONCases {
		f.Add(c.in)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if d := againstRef(s); d != "" {
			t.Fatal(d)
		}
		if d := againstEncodingJSON(s); d != "" {
			t.Fatal(d)
		}
	})
}

// againstEncodingJSON holds the parser to encoding/json, which shares
// nothing with it: it takes what json.Valid takes and refuses what it
// refuses (the nesting limit is the same), and what it takes it reads
// as encoding/json does. "" when they agree.
func againstEncodingJSON(s string) string {
	var p jsonParser
	v, err := p.parse(s)
	if valid := json.Valid([]byte(s)); valid != (err == nil) {
		return fmt.Sprintf("%q: json.Valid %v, the parser's error %v", s, valid, err)
	}
	if err != nil {
		return ""
	}
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var want any
	if err := d.Decode(&want); err != nil {
		return fmt.Sprintf("%q: valid, but encoding/json: %v", s, err)
	}
	if got := tapeValue(v); !reflect.DeepEqual(got, want) {
		return fmt.Sprintf("%q: the parser read %#v, encoding/json %#v", s, got, want)
	}
	return ""
}

// tapeValue is v as encoding/json decodes JSON into an any (numbers as
// json.Number): its strings with each byte of invalid UTF-8 replaced, an
// object's last member of a name the one kept.
func tapeValue(v *jsonValue) any {
	text := func(s string) string { return string([]rune(s)) }
	switch v.kind {
	case 'z':
		return nil
	case 't', 'f':
		return v.kind == 't'
	case '#':
		return json.Number(v.str)
	case 's':
		return text(v.str)
	case 'a':
		out := []any{}
		v.items(func(_ int, c *jsonValue) bool {
			out = append(out, tapeValue(c))
			return true
		})
		return out
	}
	out := map[string]any{}
	for i := range int(v.n) {
		c := v.kid(i)
		out[text(c.key)] = tapeValue(c)
	}
	return out
}

// notJSONCases are inputs encoding/json refuses that the parser took
// before it held numbers to RFC 8259's grammar and refused control
// characters in strings, and some it always took.
var notJSONCases = []struct{ in, err string }{
	{`[-]`, "offset 2: bad number"},
	{`[--1]`, "offset 2: bad number"},
	{`[01]`, "offset 2: expected ',' or a closing bracket"},
	{`[-01]`, "offset 3: expected ',' or a closing bracket"},
	{`[1.]`, "offset 3: bad number"},
	{`[1.e5]`, "offset 3: bad number"},
	{`[.5]`, "offset 1: unexpected character"},
	{`[1e5e5]`, "offset 4: expected ',' or a closing bracket"},
	{`[1e]`, "offset 3: bad number"},
	{`[1e+]`, "offset 4: bad number"},
	{`[1E-x]`, "offset 4: bad number"},
	{`[1.5.5]`, "offset 4: expected ',' or a closing bracket"},
	{`[1-2]`, "offset 2: expected ',' or a closing bracket"},
	{`[+1]`, "offset 1: unexpected character"},
	{"[\"a\tb\"]", "offset 3: control character in string"},
	{"{\"k\x01\":1}", "offset 3: control character in string"},
	{"[\"\\u0041\n\"]", "offset 8: control character in string"},
	{"[\"\x1f\"]", "offset 2: control character in string"},
	{"-", "offset 1: bad number"},
	// and what is JSON, still taken
	{`[0, -0, 1.5, -0.5e+3, 1E5, 10e-2, 123456789012345678901234567890]`, ""},
	{"[\"a\\tb\\u001f\x7f\"]", ""},
}

// The parser refuses what encoding/json refuses, with an error that says
// where, and takes the JSON beside it as encoding/json reads it.
func TestJSONParserRefusesNotJSON(t *testing.T) {
	for _, c := range notJSONCases {
		if json.Valid([]byte(c.in)) != (c.err == "") {
			t.Fatalf("%q: the case is wrong: json.Valid says %v", c.in, json.Valid([]byte(c.in)))
		}
		var p jsonParser
		_, err := p.parse(c.in)
		if fmt.Sprint(err) != c.err && !(err == nil && c.err == "") {
			t.Errorf("%q: error %v, want %q", c.in, err, c.err)
		}
		if d := againstEncodingJSON(c.in); d != "" {
			t.Error(d)
		}
		if d := againstRef(c.in); d != "" {
			t.Error(d)
		}
	}
}

// jsonParserCases are inputs good and bad at every place the parser can
// fail.
var jsonParserCases = []string{
	`"a\"b\u00e9"`, `  -1.5e3 `, `{"a": [true, false, null]}`, `[]`, `{}`, "{\"k\":\r\n\t{\"x\":1}}",
	"", "{", `{"a":`, `{"a" 1}`, `"\u12"`, `[1,]`, `[1 2]`, `tru`, `fals`, `nul`, `{1:2}`, `"abc`, `[1]x`, `@`,
	`{"a":1,}`, `{"a":1 "b":2}`, `{"a":1,"b"`, `[[[]],[{}],{"x":[{"y":"z"}]}]`, `{"a\u0041":"\n"}`,
	`{"a":"\q"}`, `[1,2`, `[`, `{"`, `{"a`, `{"a"`, `[-]`, `[1e5,-0.5,+1]`, `{ "a" : [ 1 , { } ] }`,
	strings.Repeat("[", jsonMaxDepth) + strings.Repeat("]", jsonMaxDepth),
	strings.Repeat("[", jsonMaxDepth+1) + strings.Repeat("]", jsonMaxDepth+1),
	strings.Repeat(`{"a":`, 50) + "1" + strings.Repeat("}", 50),
}

// againstRef parses s with both parsers and reports the first difference
// ("" when none).
func againstRef(s string) string {
	var p jsonParser
	var ref refJSONParser
	v, n, short, err := p.parsePrefix(s)
	rv, rn, rshort, rerr := ref.parsePrefix(s)
	if fmt.Sprint(err) != fmt.Sprint(rerr) || n != rn || short != rshort {
		return fmt.Sprintf("%q: loop %v %d %v, recursive descent %v %d %v", s, err, n, short, rerr, rn, rshort)
	}
	if err == nil && !slices.Equal(v.subtree(), rv.subtree()) {
		return fmt.Sprintf("%q: loop %+v\nrecursive descent %+v", s, v.subtree(), rv.subtree())
	}
	return ""
}

func TestJSONParserAgainstRef(t *testing.T) {
	for _, s := range jsonParserCases {
		if d := againstRef(s); d != "" {
			t.Error(d)
		}
	}
	// a second parse on the same parser, after a deep one that failed
	var p jsonParser
	p.parsePrefix(strings.Repeat("[", jsonMaxDepth+1))
	if v, _, _, err := p.parsePrefix(`[1,[2]]`); err != nil || v.span != 4 || v.n != 2 {
		t.Errorf("after a failed parse: %+v %v", v, err)
	}
}
