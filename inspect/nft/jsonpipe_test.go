package nft

import (
	"bytes"
	"fmt"
	"io"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/proxyrules/kubectl-proxyrules/inspect"
)

// parseBothWays parses data with the parallel reader and with the
// one-at-a-time reader; the parallel reader, read in small pieces with
// segments of a byte at least, which cuts before about every rule and
// chain of a small input, must give what it gives with segments of its
// usual size.
func parseBothWays(data []byte) (batched, alone *inspect.Ruleset, errB, errA error) {
	batched, errB = ParseJSON(bytes.NewReader(data), "in")
	piece := 1 // a big input in pieces of 4 KiB: a cut every few objects, in bounded time
	if len(data) > 16<<10 {
		piece = 4 << 10
	}
	small, errS := parseJSON(pieceReader{bytes.NewReader(data), piece}, "in", readOptions{jsonSegmentMin: 1})
	if fmt.Sprint(errS) != fmt.Sprint(errB) || !reflect.DeepEqual(indexed(small), indexed(batched)) {
		batched, errB = small, fmt.Errorf("cut at every object: %v", errS)
	}
	alone, errA = parseJSON(bytes.NewReader(data), "in", readOptions{jsonOneAtATime: true})
	return
}

// sameParse fails unless both readers gave the same result and error.
func sameParse(t *testing.T, what string, data []byte) {
	t.Helper()
	b, a, errB, errA := parseBothWays(data)
	sameResult(t, what, "batched", b, a, errB, errA)
}

// sameResult fails unless a fast reader (named fast) and the one-at-a-time
// reader gave the same result and error; the tables' name indexes, a
// cache one may have built and the other not, are built first.
func sameResult(t *testing.T, what, fast string, got, want *inspect.Ruleset, errGot, errWant error) {
	t.Helper()
	if fmt.Sprint(errGot) != fmt.Sprint(errWant) {
		t.Fatalf("%s: %s error %v, one at a time %v", what, fast, errGot, errWant)
	}
	if !reflect.DeepEqual(indexed(got), indexed(want)) {
		t.Fatalf("%s: the readers disagree:\n%s %+v\nalone %+v", what, fast, got.Dumps, want.Dumps)
	}
}

// The parallel reader reads what the one-at-a-time reader reads, on big
// rulesets of every shape (many segments) and on them damaged: cut short
// anywhere, with a bad object, a bad handle or a missing comma in a later
// segment, and with a non-object element.
func TestJSONBatchesAgree(t *testing.T) {
	t.Parallel() // the readers' paths are parameters, not package state
	if testing.Short() {
		t.Skip("-short")
	}
	for _, shape := range []genShape{shape137, shape135, shapeIPTablesNFT} {
		var buf bytes.Buffer
		genJSON(&buf, shape, 300, 20)
		data := buf.Bytes()
		t.Run(string(shape), func(t *testing.T) {
			b, _, err, _ := parseBothWays(data)
			if err != nil || b.Dumps[0].Rules < 300 {
				t.Fatalf("%v, %d rules", err, b.Dumps[0].Rules)
			}
			sameParse(t, "whole", data)
			for _, cut := range []int{len(data) / 7, len(data) / 3, len(data) / 2, len(data) - 3} {
				sameParse(t, fmt.Sprintf("cut at %d", cut), data[:cut])
			}
			// damage the object that starts two thirds in
			at := bytes.Index(data[2*len(data)/3:], []byte(`}, {"`)) + 2*len(data)/3 + 3
			damage := map[string]string{
				"bad object":     `{"rule": {"chain" 1}}, `,
				"not an object":  `17, `,
				"bad handle":     `{"rule": {"family": "ip", "table": "t", "chain": "c", "handle": "x", "expr": []}}, `,
				"no table":       `{"rule": {"chain": "c", "expr": [{"accept": null}]}}, `,
				"missing comma":  `{"table": {"family": "ip", "name": "z"}} `,
				"trailing comma": `{"table": {"family": "ip", "name": "z"}}, ]}`,
			}
			for name, ins := range damage {
				bad := append(append(append([]byte{}, data[:at]...), ins...), data[at:]...)
				sameParse(t, name, bad)
			}
		})
	}
}

// A big array parsed in segments keeps every rule in its chain and order.
func TestJSONBatchesKeepOrder(t *testing.T) {
	var sb strings.Builder
	sb.WriteString(`{"nftables": [{"table": {"family": "ip", "name": "t"}}, {"chain": {"family": "ip", "table": "t", "name": "c"}}`)
	const n = 10000
	for i := range n {
		fmt.Fprintf(&sb, `, {"rule": {"family": "ip", "table": "t", "chain": "c", "handle": %d, "expr": [{"jump": {"target": "j%d"}}]}}`, i+10, i)
	}
	sb.WriteString("]}")
	rs, err := ParseJSON(strings.NewReader(sb.String()), "order")
	if err != nil {
		t.Fatal(err)
	}
	c := rs.NFTables[0].Chain("c")
	if len(c.Rules) != n {
		t.Fatalf("%d rules, want %d", len(c.Rules), n)
	}
	for i, r := range c.Rules {
		if r.Rule.Rule != fmt.Sprintf("jump j%d", i) || *r.Rule.Handle != i+10 {
			t.Fatalf("rule %d: %q handle %d", i, r.Rule.Rule, *r.Rule.Handle)
		}
	}
}

// pipeReader hands out at most 64 KiB per Read, as a pipe from `nft -j`
// or a stream from a node does.
type pipeReader struct{ r *bytes.Reader }

func (p pipeReader) Read(b []byte) (int, error) { return p.r.Read(b[:min(len(b), 64<<10)]) }

// pieceReader hands out at most n bytes per Read.
type pieceReader struct {
	r *bytes.Reader
	n int
}

func (p pieceReader) Read(b []byte) (int, error) { return p.r.Read(b[:min(len(b), p.n)]) }

// Read in short pieces, the JSON reader gives the same result, and its
// read buffers cost about the input's size, as when it is read whole
// (they once cost a new buffer per read: eight times the input).
func TestJSONShortReads(t *testing.T) {
	var buf bytes.Buffer
	genJSON(&buf, shape135, 300, 20)
	data := buf.Bytes()
	whole, err := ParseJSON(bytes.NewReader(data), "in")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		r    func() io.Reader
	}{
		{"pipe", func() io.Reader { return pipeReader{bytes.NewReader(data)} }},
		{"one byte", func() io.Reader { return iotest.OneByteReader(bytes.NewReader(data)) }},
		{"half", func() io.Reader { return iotest.HalfReader(bytes.NewReader(data)) }},
	} {
		got, err := ParseJSON(tc.r(), "in")
		sameResult(t, tc.name, tc.name, got, whole, err, nil)
	}
	allocated := func(r func() io.Reader) uint64 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		if _, err := ParseJSON(r(), "in"); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	w := allocated(func() io.Reader { return bytes.NewReader(data) })
	p := allocated(func() io.Reader { return pipeReader{bytes.NewReader(data)} })
	if float64(p) > 1.25*float64(w) {
		t.Errorf("read through a pipe, the parse of %d bytes allocated %d bytes, against %d read whole", len(data), p, w)
	}
}

// readArray reads the "nftables" array of data with the parallel reader
// alone: how it ended, and the objects read in all.
func readArray(t *testing.T, data []byte) (arrayEnd, *builder) {
	t.Helper()
	st := &jsonStream{r: bytes.NewReader(data)}
	if !st.fill(0) {
		t.Fatal("no input")
	}
	st.pos = bytes.IndexByte(st.buf, '[') + 1
	b := newNFTBuilder("in", inspect.FormatNFTJSON)
	end, err := jsonArrayParallel(st, &jsonParser{}, b, &renderer{}, jsonSegmentSize)
	if err != nil {
		t.Fatal(err)
	}
	return end, b
}

// The cuts of nft's own listings are all proven: the segments end where
// the next one starts, and nothing is read again one object at a time
// but the last segment's worth.
func TestJSONCutsProven(t *testing.T) {
	for _, shape := range []genShape{shape137, shape135, shapeIPTablesNFT} {
		var buf bytes.Buffer
		genJSON(&buf, shape, 1000, 20)
		data := buf.Bytes()
		objects := bytes.Count(data, []byte(`}}, {"`)) + 1
		end, _ := readArray(t, data)
		if end.rewound || end.segments < len(data)/(2*jsonReadSize) || !end.commaTaken || end.count < objects-objects/(end.segments) {
			t.Errorf("%s: %d bytes, %d objects: %+v", shape, len(data), objects, end)
		}
	}
}

// splitReader returns data in pieces that end at the offsets in at.
type splitReader struct {
	data []byte
	pos  int
	at   []int
}

func (r *splitReader) Read(b []byte) (int, error) {
	if r.pos >= len(r.data) {
		return 0, io.EOF
	}
	end := len(r.data)
	for len(r.at) > 0 && r.at[0] <= r.pos {
		r.at = r.at[1:]
	}
	if len(r.at) > 0 {
		end = r.at[0]
	}
	n := copy(b, r.data[r.pos:end])
	r.pos += n
	return n, nil
}

// A JSON string cannot hold a cut (its '"' would end it), but another
// container can: an object's start nested in an array, where nft writes
// none. The segment before such a cut does not end there, and the rest is
// read one object at a time: the same ruleset, and the same warnings, as
// the one-at-a-time reader.
func TestJSONFalseCuts(t *testing.T) {
	t.Parallel() // the readers' paths are parameters, not package state
	var sb strings.Builder
	sb.WriteString(`{"nftables": [{"table": {"family": "ip", "name": "t"}}, {"chain": {"family": "ip", "table": "t", "name": "c"}}`)
	var at []int
	for i := range 2000 {
		nested := ""
		if i%500 == 250 {
			nested = `, "x": [0, {"rule": {"chain": "c"}}, {"rule": {`
			at = append(at, sb.Len()+len(`, {"rule": {"family": "ip", "table": "t", "chain": "c"`)+len(nested))
			nested += `}}]`
		}
		fmt.Fprintf(&sb, `, {"rule": {"family": "ip", "table": "t", "chain": "c"%s, "handle": %d, "expr": [{"jump": {"target": "j%d"}}]}}`, nested, i+10, i)
	}
	sb.WriteString("]}")
	data := []byte(sb.String())
	st := &jsonStream{r: &splitReader{data: data, at: at}}
	for len(st.buf) < len(`{"nftables": [`) && st.fill(0) {
	}
	st.pos = len(`{"nftables": [`)
	b := newNFTBuilder("in", inspect.FormatNFTJSON)
	end, err := jsonArrayParallel(st, &jsonParser{}, b, &renderer{}, 1) // a cut at every object
	if err != nil {
		t.Fatal(err)
	}
	got := b.finish()
	if !end.rewound || end.count < 250 || end.count > 260 || end.commaTaken {
		t.Errorf("%+v: the false cut in rule 250 was not found out", end)
	}
	if got.Dumps[0].Rules != 250 {
		t.Errorf("%d rules read before the false cut, want 250 (rule 250 holds it)", got.Dumps[0].Rules)
	}
	sameParse(t, "nested cuts", data)
	rs, err := ParseJSON(&splitReader{data: data, at: at}, "in")
	if err != nil || rs.Dumps[0].Rules != 2000 || len(rs.NFTables[0].Chain("c").Rules) != 2000 {
		t.Errorf("read in the pieces that end at false cuts: %v, %+v", err, rs.Dumps)
	}
}

func TestJSONLastCut(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int // offset of the cut, -1 for none
	}{
		{`{"a": 1}, {"rule": {"family": "ip"}}`, 10},
		{`{"a": 1},{"chain":{}}`, 9},
		{"{\"a\": 1}\n ,\n  {\n\"rule\"  : {}}", -1}, // white space inside the brace: not the kind nft writes
		{"{\"a\": 1}\n ,\n  {\"rule\"\n: {}}", 14},
		{`{"a": 1}, {"rule": 1}, {"chain": 2}`, 23}, // the last one
		{`{"a": {"rule": {}}}`, -1},                 // after a ':'
		{`[{"match": 1}, {"counter": 2}]`, -1},      // not a kind a cut goes before
		{`{"a": 1}, {"rulez": {}}`, -1},
		{`{"a": 1}, {"rule"`, -1}, // the ':' not read yet
		{`, {"rule": 1}`, 2},
		{`{"rule": 1}`, -1}, // no ',' before it
	} {
		if got := lastCut([]byte(tc.in), 0); got != tc.want {
			t.Errorf("lastCut(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
	if got := lastCut([]byte(`{"a": 1}, {"rule": 1}, {"chain": 2}`), 24); got != -1 {
		t.Errorf("a cut before from: %d", got)
	}
}
