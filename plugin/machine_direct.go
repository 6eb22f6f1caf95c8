package plugin

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"sync"
)

// Direct JSON: the values below the walked top (map's 105k chains) are
// written indented as they are walked, by encoders built once per type,
// where encoding/json marshals each value compact and then indents it in
// a second pass (appendIndent: 6% of map -o json's CPU as a process, and
// a copy of every byte). Only what encoding/json writes plainly is written
// here: booleans, integers, strings, slices, pointers, interfaces, structs
// whose fields it takes as they are (omitempty at most, embedded structs
// inlined, no names that clash) and value-receiver json.Marshalers (whose
// output is compacted, escaped and indented as encoding/json does it);
// floats, maps, arrays, []byte, text marshalers, pointer-receiver
// marshalers and other tag options go to encoding/json (stdValue), so the
// bytes stay those of json.MarshalIndent (TestStreamedOutputIsByteIdentical).

// encodeFn writes v, standing at depth.
type encodeFn func(s *jsonStream, v reflect.Value, depth int) error

var directCache sync.Map // reflect.Type → encodeFn

// maxDirectDepth bounds the direct walk; deeper values (a cycle, which
// encoding/json reports as an error) go to encoding/json.
const maxDirectDepth = 64

// direct writes v at depth.
func (s *jsonStream) direct(v reflect.Value, depth int) error {
	if !v.IsValid() || depth > maxDirectDepth {
		return s.stdValue(v, depth)
	}
	return directEncoder(v.Type())(s, v, depth)
}

// directEncoder is the encoder of t, built once (a recursive type gets a
// forwarding one while its own is built, as in encoding/json).
func directEncoder(t reflect.Type) encodeFn {
	if f, ok := directCache.Load(t); ok {
		return f.(encodeFn)
	}
	var (
		wg sync.WaitGroup
		f  encodeFn
	)
	wg.Add(1)
	fi, loaded := directCache.LoadOrStore(t, encodeFn(func(s *jsonStream, v reflect.Value, depth int) error {
		wg.Wait()
		return f(s, v, depth)
	}))
	if loaded {
		return fi.(encodeFn)
	}
	f = newDirectEncoder(t)
	wg.Done()
	directCache.Store(t, f)
	return f
}

// stdEncode hands a value to encoding/json.
func stdEncode(s *jsonStream, v reflect.Value, depth int) error { return s.stdValue(v, depth) }

func newDirectEncoder(t reflect.Type) encodeFn {
	switch t.Kind() {
	case reflect.Pointer:
		elem := directEncoder(t.Elem())
		return func(s *jsonStream, v reflect.Value, depth int) error {
			if v.IsNil() {
				s.w.WriteString("null")
				return nil
			}
			return elem(s, v.Elem(), depth)
		}
	case reflect.Interface:
		return encodeInterface
	}
	pt := reflect.PointerTo(t)
	switch {
	case t.Implements(marshalerType):
		return encodeMarshaler
	case pt.Implements(marshalerType), t.Implements(textMarshalerType), pt.Implements(textMarshalerType):
		return stdEncode
	}
	switch t.Kind() {
	case reflect.Bool:
		return encodeBool
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return encodeInt
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return encodeUint
	case reflect.String:
		return encodeString
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return stdEncode
		}
		return sliceEncoder(directEncoder(t.Elem()))
	case reflect.Struct:
		if fields, ok := directFields(t); ok {
			return fields.encode
		}
	}
	return stdEncode
}

func encodeInterface(s *jsonStream, v reflect.Value, depth int) error {
	if v.IsNil() {
		s.w.WriteString("null")
		return nil
	}
	return s.direct(v.Elem(), depth)
}

func encodeBool(s *jsonStream, v reflect.Value, _ int) error {
	if v.Bool() {
		s.w.WriteString("true")
	} else {
		s.w.WriteString("false")
	}
	return nil
}

func encodeInt(s *jsonStream, v reflect.Value, _ int) error {
	s.scratch.num = strconv.AppendInt(s.scratch.num[:0], v.Int(), 10)
	s.w.Write(s.scratch.num)
	return nil
}

func encodeUint(s *jsonStream, v reflect.Value, _ int) error {
	s.scratch.num = strconv.AppendUint(s.scratch.num[:0], v.Uint(), 10)
	s.w.Write(s.scratch.num)
	return nil
}

// encodeString writes a string that needs no escape as it is, and hands
// any other to encoding/json (HTML-safe escapes, \ufffd for invalid UTF-8).
func encodeString(s *jsonStream, v reflect.Value, _ int) error {
	str := v.String()
	for i := 0; i < len(str); i++ {
		if c := str[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, err := json.Marshal(str)
			s.w.Write(q)
			return err
		}
	}
	s.w.WriteByte('"')
	s.w.WriteString(str)
	s.w.WriteByte('"')
	return nil
}

func sliceEncoder(elem encodeFn) encodeFn {
	return func(s *jsonStream, v reflect.Value, depth int) error {
		if v.IsNil() {
			s.w.WriteString("null")
			return nil
		}
		n := v.Len()
		if n == 0 {
			s.w.WriteString("[]")
			return nil
		}
		s.w.WriteByte('[')
		for i := 0; i < n; i++ {
			if i > 0 {
				s.w.WriteByte(',')
			}
			s.newline(depth + 1)
			if err := elem(s, v.Index(i), depth+1); err != nil {
				return err
			}
		}
		s.newline(depth)
		s.w.WriteByte(']')
		return nil
	}
}

// encodeMarshaler writes a value-receiver MarshalJSON's output as
// encoding/json does: compacted with HTML escapes, then indented. An error
// (or output that is no JSON) goes to encoding/json for its own error.
func encodeMarshaler(s *jsonStream, v reflect.Value, depth int) error {
	m, ok := reflect.TypeAssert[json.Marshaler](v)
	if !ok {
		return s.stdValue(v, depth)
	}
	b, err := m.MarshalJSON()
	if err != nil {
		return s.stdValue(v, depth)
	}
	a, b2 := &s.scratch.buf[0], &s.scratch.buf[1]
	a.Reset()
	b2.Reset()
	if json.Compact(a, b) != nil {
		return s.stdValue(v, depth)
	}
	json.HTMLEscape(b2, a.Bytes())
	a.Reset()
	if json.Indent(a, b2.Bytes(), indentOf(depth), "  ") != nil {
		return s.stdValue(v, depth)
	}
	s.w.Write(a.Bytes())
	return nil
}

// directField is one member of a struct as encoding/json writes it.
type directField struct {
	index     []int  // through inlined embedded structs
	key       string // the quoted name and ": "
	omitEmpty bool
	enc       encodeFn
}

type directStruct []directField

// directFields lists t's members in encoding/json's order (the order of
// the fields, embedded structs' fields in their place); ok is false where
// its rules are not the plain ones.
func directFields(t reflect.Type) (directStruct, bool) {
	var fs directStruct
	names := map[string]bool{}
	if !addDirectFields(t, nil, &fs, names, map[reflect.Type]bool{}) {
		return nil, false
	}
	return fs, true
}

func addDirectFields(t reflect.Type, index []int, fs *directStruct, names map[string]bool, seen map[reflect.Type]bool) bool {
	if seen[t] {
		return false
	}
	seen[t] = true
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag, tagged := f.Tag.Lookup("json")
		if tag == "-" {
			continue
		}
		at := append(index[:len(index):len(index)], i)
		if f.Anonymous {
			et := f.Type
			if et.Kind() == reflect.Pointer && et.Name() == "" {
				et = et.Elem()
			}
			if tagged || !f.IsExported() || et.Kind() != reflect.Struct || !addDirectFields(et, at, fs, names, seen) {
				return false
			}
			continue
		}
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if opts != "" && opts != "omitempty" || !plainName(name) {
			return false
		}
		if name == "" {
			name = f.Name
		}
		if names[name] {
			return false // encoding/json's rules for clashing names
		}
		names[name] = true
		*fs = append(*fs, directField{index: at, key: strconv.Quote(name) + ": ", omitEmpty: opts == "omitempty", enc: directEncoder(f.Type)})
	}
	return true
}

func (fs directStruct) encode(s *jsonStream, v reflect.Value, depth int) error {
	first := true
fields:
	for i := range fs {
		f := &fs[i]
		fv := v
		for _, x := range f.index {
			if fv.Kind() == reflect.Pointer {
				if fv.IsNil() {
					continue fields
				}
				fv = fv.Elem()
			}
			fv = fv.Field(x)
		}
		if f.omitEmpty && isEmptyValue(fv) {
			continue
		}
		if first {
			s.w.WriteByte('{')
			first = false
		} else {
			s.w.WriteByte(',')
		}
		s.newline(depth + 1)
		s.w.WriteString(f.key)
		if err := f.enc(s, fv, depth+1); err != nil {
			return err
		}
	}
	if first {
		s.w.WriteString("{}")
		return nil
	}
	s.newline(depth)
	s.w.WriteByte('}')
	return nil
}

// directScratch is what the encoders reuse: a number's digits, and
// encodeMarshaler's buffers.
type directScratch struct {
	num []byte
	buf [2]bytes.Buffer
}

// spaces indents up to maxDirectDepth+1 levels, after a newline.
var spaces = "\n" + strings.Repeat("  ", maxDirectDepth+2)

// indentOf is the indentation of depth.
func indentOf(depth int) string {
	if 1+2*depth <= len(spaces) {
		return spaces[1 : 1+2*depth]
	}
	return strings.Repeat("  ", depth)
}
