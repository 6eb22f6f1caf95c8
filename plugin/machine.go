package plugin

import (
	"bufio"
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"runtime"
	"strings"
	"sync"

	"sigs.k8s.io/yaml"
)

// Streamed JSON and YAML: the reports are written as they are encoded,
// part by part, instead of encoding the whole report, indenting it into a
// second buffer and copying that (40 MB for map on 5,000 Services). The
// bytes are exactly those of json.MarshalIndent(report, "", "  ") (and of
// sigs.k8s.io/yaml.JSONToYAML of that): the top-level object is walked
// here, its values are written indented as they are walked by encoders
// built per type (machine_direct.go), and what those do not write plainly
// is encoded by encoding/json itself (json.Encoder with the indentation of
// its depth), which indents a value the same wherever it stands.

// jsonStream writes one report.
type jsonStream struct {
	w *bufio.Writer
	// encs[d] encodes a whole value standing at depth d.
	encs    []*json.Encoder
	keys    map[string][]byte // quoted member names
	scratch directScratch
}

func newJSONStream(w *bufio.Writer) *jsonStream {
	return &jsonStream{w: w, keys: map[string][]byte{}}
}

// stdValue writes v encoded by encoding/json, indented for depth.
func (s *jsonStream) stdValue(v reflect.Value, depth int) error {
	for len(s.encs) <= depth {
		d := len(s.encs)
		enc := json.NewEncoder(dropNewline{s.w})
		enc.SetIndent(strings.Repeat("  ", d), "  ")
		s.encs = append(s.encs, enc)
	}
	if v.IsValid() && v.CanAddr() {
		// encoding/json calls pointer-receiver MarshalJSON methods on
		// addressable values: keep them addressable.
		return s.encs[depth].Encode(v.Addr().Interface())
	}
	if !v.IsValid() {
		return s.encs[depth].Encode(nil)
	}
	return s.encs[depth].Encode(v.Interface())
}

// dropNewline drops the newline json.Encoder ends each value with (it
// writes a value in one Write).
type dropNewline struct{ w io.Writer }

func (d dropNewline) Write(p []byte) (int, error) {
	if n := len(p); n > 0 && p[n-1] == '\n' {
		_, err := d.w.Write(p[:n-1])
		return n, err
	}
	return d.w.Write(p)
}

func (s *jsonStream) newline(depth int) {
	if 1+2*depth <= len(spaces) {
		s.w.WriteString(spaces[:1+2*depth])
		return
	}
	s.w.WriteByte('\n')
	for i := 0; i < depth; i++ {
		s.w.WriteString("  ")
	}
}

func (s *jsonStream) key(name string) {
	q, ok := s.keys[name]
	if !ok {
		q, _ = json.Marshal(name)
		s.keys[name] = q
	}
	s.w.Write(q)
	s.w.WriteString(": ")
}

var (
	marshalerType     = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
)

// value writes v at depth: every value below the top-level object is
// written by the direct encoders (machine_direct.go).
func (s *jsonStream) value(v reflect.Value, depth int) error {
	return s.direct(v, depth)
}

// member is one member of an object: its name and value.
type member struct {
	name  string
	value reflect.Value
}

func (s *jsonStream) object(ms []member, extra *member, depth int) error {
	if extra != nil {
		ms = append(ms, *extra)
	}
	if len(ms) == 0 {
		s.w.WriteString("{}")
		return nil
	}
	s.w.WriteByte('{')
	for i, m := range ms {
		if i > 0 {
			s.w.WriteByte(',')
		}
		s.newline(depth + 1)
		s.key(m.name)
		if err := s.value(m.value, depth+1); err != nil {
			return err
		}
	}
	s.newline(depth)
	s.w.WriteByte('}')
	return nil
}

// field is a struct field as encoding/json writes it.
type field struct {
	index     int
	name      string
	omitEmpty bool
}

var fieldCache sync.Map // reflect.Type → []field, or nil when not simple

// simpleFields lists the fields of t when encoding/json's rules for it
// are the plain ones walked here: exported fields, no embedded structs, no
// options but omitempty. Other structs are encoded whole.
func simpleFields(t reflect.Type) ([]field, bool) {
	if c, ok := fieldCache.Load(t); ok {
		fs, _ := c.([]field)
		return fs, fs != nil
	}
	fs := []field{}
	names := map[string]bool{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Anonymous {
			fs = nil
			break
		}
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if opts != "" && opts != "omitempty" || !plainName(name) {
			fs = nil
			break
		}
		if name == "" {
			name = f.Name
		}
		if names[name] {
			fs = nil // encoding/json's rules for clashing names
			break
		}
		names[name] = true
		fs = append(fs, field{i, name, opts == "omitempty"})
	}
	fieldCache.Store(t, fs)
	return fs, fs != nil
}

// plainName: a tag name encoding/json takes as it is.
func plainName(name string) bool {
	for _, c := range name {
		if !(c == '_' || c == '-' || c == '.' || c == '/' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

func members(v reflect.Value, fields []field) []member {
	ms := make([]member, 0, len(fields))
	for _, f := range fields {
		fv := v.Field(f.index)
		if f.omitEmpty && isEmptyValue(fv) {
			continue
		}
		ms = append(ms, member{f.name, fv})
	}
	return ms
}

// isEmptyValue is encoding/json's test for omitempty.
func isEmptyValue(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool, reflect.Float32, reflect.Float64, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return v.IsZero()
	case reflect.Interface, reflect.Pointer:
		return v.IsNil()
	}
	return false
}

// topMembers are the members of a report's top-level object (with the
// collection last, as withCollection writes it); ok is false when the
// report is not a struct walked here.
func topMembers(report any) (ms []member, ok bool) {
	var collection *member
	if wc, isWC := report.(withCollection); isWC {
		report = wc.report
		if wc.collection != nil {
			collection = &member{"collection", reflect.ValueOf(wc.collection)}
		}
	}
	v := reflect.ValueOf(report)
	for v.IsValid() && (v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface) && !v.IsNil() {
		if v.Type().Implements(marshalerType) || v.Type().Implements(textMarshalerType) {
			return nil, false
		}
		v = v.Elem()
	}
	if !v.IsValid() || v.Kind() != reflect.Struct || v.Type().Implements(marshalerType) || v.Type().Implements(textMarshalerType) {
		return nil, false
	}
	fields, simple := simpleFields(v.Type())
	if !simple {
		return nil, false
	}
	ms = members(v, fields)
	if len(ms) == 0 {
		return nil, false // withCollection would not add to "{}"
	}
	if collection != nil {
		ms = append(ms, *collection)
	}
	return ms, true
}

// streamJSON writes report as json.MarshalIndent(report, "", "  ") and a
// newline.
func streamJSON(out io.Writer, report any) error {
	w := bufio.NewWriterSize(out, 64<<10)
	ms, ok := topMembers(report)
	if !ok {
		data, err := json.MarshalIndent(report, "", "  ")
		if err != nil {
			return err
		}
		w.Write(data)
	} else if err := newJSONStream(w).object(ms, nil, 0); err != nil {
		return err
	}
	w.WriteByte('\n')
	return w.Flush()
}

// streamYAML writes report as yaml.JSONToYAML of its JSON: the top-level
// keys in YAML's order, each written by the YAML encoder on its own, and
// the elements of a long list one by one in the same context (so the
// same columns), converted on every core.
func streamYAML(out io.Writer, report any) error {
	ms, ok := topMembers(report)
	if !ok {
		data, err := json.Marshal(report)
		if err != nil {
			return err
		}
		if data, err = yaml.JSONToYAML(data); err != nil {
			return err
		}
		_, err = out.Write(data)
		return err
	}
	order, err := yamlKeyOrder(ms)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(out, 64<<10)
	for _, m := range order {
		if err := yamlMember(w, m); err != nil {
			return err
		}
	}
	return w.Flush()
}

// yamlKeyOrder sorts the members as the YAML encoder sorts map keys.
func yamlKeyOrder(ms []member) ([]member, error) {
	keys := map[string]int{}
	byName := map[string]member{}
	for _, m := range ms {
		keys[m.name] = 0
		byName[m.name] = m
	}
	data, err := yaml.Marshal(keys)
	if err != nil {
		return nil, err
	}
	var out []member
	for _, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		var one map[string]int
		if err := yaml.Unmarshal([]byte(line), &one); err != nil || len(one) != 1 {
			return nil, fmt.Errorf("yaml key order: %q", line)
		}
		for k := range one {
			m, ok := byName[k]
			if !ok {
				return nil, fmt.Errorf("yaml key order: %q", k)
			}
			out = append(out, m)
		}
	}
	if len(out) != len(ms) {
		return nil, fmt.Errorf("yaml key order: %d of %d keys", len(out), len(ms))
	}
	return out, nil
}

// yamlOf is JSONToYAML of {name: value}.
func yamlOf(name string, value any) ([]byte, error) {
	data, err := json.Marshal(map[string]any{name: value})
	if err != nil {
		return nil, err
	}
	return yaml.JSONToYAML(data)
}

// yamlChunk is how many elements of a list one conversion takes: the YAML
// encoder costs much per call.
const yamlChunk = 256

// yamlMember writes one top-level key. A long list is written in chunks:
// "name:" and then, for each chunk, yamlOf(name, chunk) without its first
// line, which is exactly those elements' lines in the whole document (the
// same context, so the same columns).
func yamlMember(w *bufio.Writer, m member) error {
	v := m.value
	for v.Kind() == reflect.Interface && !v.IsNil() {
		v = v.Elem()
	}
	if v.Kind() != reflect.Slice || v.Len() < 2*yamlChunk || v.Type().Elem().Kind() == reflect.Uint8 {
		data, err := yamlOf(m.name, v.Interface())
		if err != nil {
			return err
		}
		_, err = w.Write(data)
		return err
	}
	head := []byte(m.name + ":\n")
	chunks := (v.Len() + yamlChunk - 1) / yamlChunk
	type result struct {
		data []byte
		err  error
	}
	results := make([]chan result, chunks)
	for i := range results {
		results[i] = make(chan result, 1)
	}
	convert := func(c int) {
		elems := make([]any, 0, yamlChunk)
		for i := c * yamlChunk; i < min((c+1)*yamlChunk, v.Len()); i++ {
			elems = append(elems, v.Index(i).Interface())
		}
		data, err := yamlOf(m.name, elems)
		if err == nil && !bytes.HasPrefix(data, head) {
			err = fmt.Errorf("unexpected %q", data[:min(len(data), 40)])
		}
		if err != nil {
			results[c] <- result{nil, fmt.Errorf("yaml of %s[%d:]: %v", m.name, c*yamlChunk, err)}
			return
		}
		results[c] <- result{data[len(head):], nil}
	}
	// Workers take chunks in order; the writer waits for each in turn, and
	// the chunks converted ahead of it are bounded by window.
	next := make(chan int)
	workers := max(1, runtime.GOMAXPROCS(0))
	window := make(chan struct{}, 2*workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range next {
				convert(c)
			}
		}()
	}
	go func() {
		for c := 0; c < chunks; c++ {
			window <- struct{}{}
			next <- c
		}
		close(next)
	}()
	w.Write(head)
	var firstErr error
	for c := 0; c < chunks; c++ {
		r := <-results[c]
		if r.err != nil && firstErr == nil {
			firstErr = r.err
		}
		if firstErr == nil {
			w.Write(r.data)
		}
		<-window
	}
	wg.Wait()
	return firstErr
}
