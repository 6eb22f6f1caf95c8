package nft

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/inspect"
)

// parseTextBothWays parses data in segments (when it can) and in one piece.
func parseTextBothWays(data string) (segmented, whole *inspect.Ruleset, errS, errW error) {
	segmented, errS = ParseText(strings.NewReader(data), "in")
	whole, errW = parseTextWith(strings.NewReader(data), "in", readOptions{textWhole: true})
	return
}

// indexed builds the tables' name indexes (a cache one reader may have
// built and the other not), so that results compare by content.
func indexed(rs *inspect.Ruleset) *inspect.Ruleset {
	for _, t := range rs.NFTables {
		t.DistinctChains()
	}
	for _, t := range rs.IPTables {
		t.Reindex()
	}
	return rs
}

func sameTextParse(t *testing.T, what, data string) {
	t.Helper()
	s, w, errS, errW := parseTextBothWays(data)
	sameResult(t, what, "segmented", s, w, errS, errW)
}

// The segmented reader reads what the one-piece reader reads, on big
// rulesets of every shape and on them damaged in a later segment; when a
// check fails it falls back to one piece, and when none does it really
// reads in segments.
func TestTextSegmentsAgree(t *testing.T) {
	t.Parallel() // the readers' paths are parameters, not package state
	if testing.Short() {
		t.Skip("-short")
	}
	for _, shape := range []genShape{shape137, shape135, shapeIPTablesNFT} {
		var buf bytes.Buffer
		genText(&buf, shape, 600, 20)
		data := buf.String()
		if shape == shape137 {
			// the v1.37 shape is small: add a second big table
			var more bytes.Buffer
			genText(&more, shape135, 500, 20)
			data += strings.Replace(more.String(), "table ip kube-proxy", "table ip6 kube-proxy", 1)
		}
		t.Run(string(shape), func(t *testing.T) {
			if len(data) < textParallelMin {
				t.Fatalf("%d bytes: too small to segment", len(data))
			}
			rs, ok := parseTextSegments(data, "in")
			if !ok || rs.Dumps[0].Rules < 600 {
				t.Fatalf("not read in segments (ok %v)", ok)
			}
			sameTextParse(t, "whole", data)
			sameTextParse(t, "crlf", strings.ReplaceAll(data, "\n", "\r\n"))
			for _, cut := range []int{len(data) / 5, len(data) / 2, len(data) - 4} {
				sameTextParse(t, fmt.Sprintf("cut at %d", cut), data[:cut])
			}
			// damage the chain that starts two thirds in
			at := strings.Index(data[2*len(data)/3:], "\n\tchain ") + 2*len(data)/3 + 1
			first := data[strings.Index(data, "\n\tchain ")+1:]
			firstChain := first[:strings.Index(first, "\n\t}\n")+4]
			chainAt := data[at:]
			chainAt = chainAt[:strings.Index(chainAt, "\n\t}\n")+4]
			for name, ins := range map[string]string{
				"chain listed again":    firstChain,
				"chain listed twice":    chainAt, // in one segment
				"garbage":               "\tthis is not nft\n",
				"binary":                "\tchain x {\n\t\tdrop \x00\n\t}\n",
				"unclosed chain":        "\tchain open {\n\t\tdrop\n",
				"statement across":      "\tcounter c {\n\t\tpackets 1\n",
				"table closed early":    "}\n",
				"another table":         "}\ntable inet other {\n",
				"warnings":              strings.Repeat("\twhat\n", 2*maxWarnings),
				"rule before its chain": "\t\tjump somewhere\n",
			} {
				sameTextParse(t, name, data[:at]+ins+data[at:])
			}
		})
	}
}

func TestTextCutSegments(t *testing.T) {
	in := "table ip a {\n\tchain x {\n\t\tdrop\n\t}\n\tchain y {\n\t\taccept\n\t}\n}\ntable ip6 b { # handle 4\n\tchain z {\n\t}\n}\n"
	segs := cutSegments(in, 8)
	var got []string
	for _, sg := range segs {
		tb := "top"
		if sg.table != nil {
			tb = fmt.Sprint(*sg.table)
		}
		got = append(got, fmt.Sprintf("%d@%s:%q", sg.startLine, tb, strings.SplitN(sg.text, "\n", 2)[0]))
	}
	want := `[0@top:"table ip a {" 1@{ip a}:"\tchain x {" 4@{ip a}:"\tchain y {" 9@{ip6 b}:"\tchain z {"]`
	if fmt.Sprint(got) != want {
		t.Errorf("segments %s\nwant     %s", got, want)
	}
	if segs := cutSegments("chain x {\n}\n\tchain y {\n", 4); segs != nil {
		t.Errorf("no table line, yet segments: %+v", segs)
	}
}

// hintedReader reads data in steps of step bytes, says it holds hint
// bytes, and fails with err after failAt bytes (when err is set).
type hintedReader struct {
	data         string
	hint, step   int
	failAt       int
	err          error
	empty, reads int // reads returning nothing before each step
}

func (r *hintedReader) SizeHint() int64 { return int64(r.hint) }

func (r *hintedReader) Read(p []byte) (int, error) {
	if r.reads < r.empty {
		r.reads++
		return 0, nil
	}
	r.reads = 0
	if r.err != nil && r.failAt <= 0 {
		return 0, r.err
	}
	if r.data == "" {
		return 0, io.EOF
	}
	n := min(len(p), r.step, len(r.data))
	if r.err != nil {
		n = min(n, r.failAt)
		r.failAt -= n
	}
	n = copy(p, r.data[:n])
	r.data = r.data[n:]
	return n, nil
}

// Cut as the text is read, the segments are those of the whole text,
// whatever the reads' sizes and wherever a `\tchain ` line straddles two.
func TestTextCutWhileReading(t *testing.T) {
	var buf bytes.Buffer
	genText(&buf, shape135, 300, 20)
	data := buf.String()
	want := cutSegments(data, 8)
	if len(want) != 8 {
		t.Fatalf("%d segments of the whole text, want 8", len(want))
	}
	// reads that end inside every `\tchain ` line
	var inChainLines []int
	for at := 0; ; {
		i := strings.Index(data[at:], "\n\tchain ")
		if i < 0 {
			break
		}
		at += i + 4
		inChainLines = append(inChainLines, at)
	}
	for _, step := range []int{0, 1 << 10, 4099, 1 << 16, len(data)} {
		c := segmentCutter{size: len(data), n: 8}
		next := make(chan *textSegment, 9)
		if step == 0 {
			for _, n := range inChainLines {
				c.cut(data[:n], false, next)
			}
		}
		for n := step; step > 0 && n < len(data); n += step {
			c.cut(data[:n], false, next)
		}
		c.cut(data, true, next)
		close(next)
		sent := 0
		for range next {
			sent++
		}
		if sent != len(c.segs) || len(c.segs) != len(want) {
			t.Fatalf("step %d: %d segments, %d sent, want %d", step, len(c.segs), sent, len(want))
		}
		for k, sg := range c.segs {
			w := want[k]
			if sg.text != w.text || sg.startLine != w.startLine || fmt.Sprint(sg.table) != fmt.Sprint(w.table) || sg.last != (k == len(want)-1) {
				t.Fatalf("step %d, segment %d: starts at line %d (%q…), want line %d (%q…)", step, k, sg.startLine, sg.text[:20], w.startLine, w.text[:20])
			}
		}
	}
}

// Read while it is parsed, a text gives what the one-piece reader gives
// even when its size is not what it said, when reads return nothing for a
// while, and when the read fails part way.
func TestTextStreamedAgrees(t *testing.T) {
	t.Parallel() // the readers' paths are parameters, not package state
	if testing.Short() {
		t.Skip("-short")
	}
	var buf bytes.Buffer
	genText(&buf, shape135, 600, 20)
	data := buf.String()
	whole := func(r io.Reader) (*inspect.Ruleset, error) {
		return parseTextWith(r, "in", readOptions{textWhole: true})
	}
	for _, tc := range []struct {
		name string
		r    hintedReader
	}{
		{"size right", hintedReader{hint: len(data), step: 1 << 16}},
		{"says half", hintedReader{hint: len(data) / 2, step: 1 << 16}},
		{"says double", hintedReader{hint: 2 * len(data), step: 1 << 16}},
		{"pauses", hintedReader{hint: len(data), step: 1 << 18, empty: 3}},
		{"fails half way", hintedReader{hint: len(data), step: 1 << 16, failAt: len(data) / 2, err: io.ErrUnexpectedEOF}},
		{"fails at once", hintedReader{hint: len(data), step: 1 << 16, err: io.ErrUnexpectedEOF}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, w, seg := tc.r, tc.r, tc.r
			r.data, w.data, seg.data = data, data, data
			if tc.r.err == nil { // really read in segments
				s, segs, err := readInSegments(&seg, seg.hint, "in")
				if err != nil || s != data || len(segs) < 2 {
					t.Fatalf("read in segments: %v, %d of %d bytes, %d segments", err, len(s), len(data), len(segs))
				}
				for k, sg := range segs {
					if !sg.ok {
						t.Fatalf("segment %d of %d not parsed", k, len(segs))
					}
				}
			}
			got, errGot := ParseText(&r, "in")
			want, errWant := whole(&w)
			if tc.r.err == nil && (errGot != nil || got.Dumps[0].Rules < 600*20) {
				t.Fatalf("%v, %d rules", errGot, got.Dumps[0].Rules)
			}
			sameResult(t, tc.name, "streamed", got, want, errGot, errWant)
		})
	}
	// A reader that never gets anywhere is an error, not a hang.
	stuck := hintedReader{data: data, hint: len(data), step: 1, empty: 1 << 30}
	if _, err := ParseText(&stuck, "in"); !errors.Is(err, io.ErrNoProgress) {
		t.Errorf("a reader returning nothing: %v, want %v", err, io.ErrNoProgress)
	}
}
