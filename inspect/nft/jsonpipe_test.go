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

// parseBothWays parses data with the batched reader and with the
// one-at-a-time reader.
func parseBothWays(data []byte) (batched, alone *inspect.Ruleset, errB, errA error) {
	batched, errB = ParseJSON(bytes.NewReader(data), "in")
	jsonPipeline = false
	defer func() { jsonPipeline = true }()
	alone, errA = ParseJSON(bytes.NewReader(data), "in")
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

// The batched reader reads what the one-at-a-time reader reads, on big
// rulesets of every shape (many batches) and on them damaged: cut short
// anywhere, with a bad object, a bad handle or a missing comma in a later
// batch, and with a non-object element.
func TestJSONBatchesAgree(t *testing.T) {
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

// A big array parsed in batches keeps every rule in its chain and order.
func TestJSONBatchesKeepOrder(t *testing.T) {
	var sb strings.Builder
	sb.WriteString(`{"nftables": [{"table": {"family": "ip", "name": "t"}}, {"chain": {"family": "ip", "table": "t", "name": "c"}}`)
	const n = 3 * batchObjects
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
