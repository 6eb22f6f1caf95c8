package nft

import (
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/proxyrules/kubectl-proxyrules/inspect"
)

// setShape is one input of the cap tests: sets (or maps) named s0, s1 …
// of table ip t, each of n elements, written in one reader's syntax.
type setShape struct {
	isMap bool
	sets  []int // elements of each
	// asElementObjects: JSON lists the elements in an "element" object
	// after the set's, as `nft -j` does for `add element`
	asElementObjects bool
}

func elemIP(i int) string { return fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255) }

// setJSON writes sh as `nft -j list ruleset`.
func setJSON(sh setShape) string {
	var b strings.Builder
	b.WriteString(`{"nftables": [{"metainfo": {"json_schema_version": 1}}, {"table": {"family": "ip", "name": "t", "handle": 1}}`)
	for k, n := range sh.sets {
		kind, extra := "set", ""
		if sh.isMap {
			kind, extra = "map", `, "map": "verdict"`
		}
		fmt.Fprintf(&b, `, {"%s": {"family": "ip", "name": "s%d", "table": "t", "type": "ipv4_addr"%s, "handle": %d`, kind, k, extra, k+2)
		if sh.asElementObjects {
			fmt.Fprintf(&b, `}}, {"element": {"family": "ip", "table": "t", "name": "s%d"`, k)
		}
		b.WriteString(`, "elem": [`)
		for i := range n {
			if i > 0 {
				b.WriteString(", ")
			}
			if sh.isMap {
				fmt.Fprintf(&b, `["%s", {"goto": {"target": "svc"}}]`, elemIP(i))
			} else {
				fmt.Fprintf(&b, `"%s"`, elemIP(i))
			}
		}
		b.WriteString("]}}")
	}
	b.WriteString(`, {"chain": {"family": "ip", "table": "t", "name": "svc", "handle": 99}}]}`)
	return b.String()
}

// setDump writes sh as a knftables dump, one element a line.
func setDump(sh setShape) string {
	var b strings.Builder
	b.WriteString("add table ip t\nadd chain ip t svc\n")
	for k, n := range sh.sets {
		if sh.isMap {
			fmt.Fprintf(&b, "add map ip t s%d { type ipv4_addr : verdict ; }\n", k)
		} else {
			fmt.Fprintf(&b, "add set ip t s%d { type ipv4_addr ; }\n", k)
		}
		for i := range n {
			if sh.isMap {
				fmt.Fprintf(&b, "add element ip t s%d { %s : goto svc }\n", k, elemIP(i))
			} else {
				fmt.Fprintf(&b, "add element ip t s%d { %s }\n", k, elemIP(i))
			}
		}
	}
	return b.String()
}

// setCapReaders are the readers held to the caps, each with its syntax.
var setCapReaders = []struct {
	name  string
	write func(setShape) string
	parse func(io.Reader) (*inspect.Ruleset, error)
}{
	{"json", setJSON, func(r io.Reader) (*inspect.Ruleset, error) { return ParseJSON(r, "ruleset.json") }},
	{"json one at a time", setJSON, func(r io.Reader) (*inspect.Ruleset, error) {
		return parseJSON(r, "ruleset.json", readOptions{jsonOneAtATime: true})
	}},
	{"knftables dump", setDump, func(r io.Reader) (*inspect.Ruleset, error) { return ParseKnftablesDump(r, "dump.txt") }},
}

// elementCounts are the elements read of each set or map of table ip t.
func elementCounts(rs *inspect.Ruleset, sh setShape) []int {
	var got []int
	tb := rs.NFTables[0]
	for k := range sh.sets {
		name := fmt.Sprintf("s%d", k)
		if sh.isMap {
			got = append(got, len(tb.Map(name).Elements))
		} else {
			got = append(got, len(tb.Set(name).Elements))
		}
	}
	return got
}

// A set or map of more than MaxSetElements is read up to the cap, by
// every reader, with the text reader's warning; at the cap it is read
// whole, without one.
func TestSetElementsCapReaders(t *testing.T) {
	tests := []struct {
		name string
		sh   setShape
		want []int
		warn string
		// dump: the knftables dump reader too (a million element lines
		// take it some 30 s, knftables' own parser: once is enough)
		dump bool
	}{
		{"set at the cap", setShape{sets: []int{MaxSetElements}}, []int{MaxSetElements}, "", false},
		{"set over the cap", setShape{sets: []int{MaxSetElements + 3}}, []int{MaxSetElements}, "ip t s0 holds more than 1048576 elements: only the first 1048576 are read", true},
		{"map over the cap", setShape{isMap: true, sets: []int{MaxSetElements + 1}}, []int{MaxSetElements}, "ip t s0 holds more than 1048576 elements", false},
		{"element objects over the cap", setShape{sets: []int{MaxSetElements + 2}, asElementObjects: true}, []int{MaxSetElements}, "ip t s0 holds more than 1048576 elements", false},
	}
	if raceEnabled {
		t.Skip("a million elements a case: not with -race")
	}
	for _, rd := range setCapReaders {
		for _, tt := range tests {
			if rd.name == "knftables dump" && (!tt.dump || testing.Short()) {
				continue
			}
			t.Run(rd.name+"/"+tt.name, func(t *testing.T) {
				rs, err := rd.parse(strings.NewReader(rd.write(tt.sh)))
				if err != nil {
					t.Fatal(err)
				}
				if got := elementCounts(rs, tt.sh); fmt.Sprint(got) != fmt.Sprint(tt.want) {
					t.Errorf("elements read %v, want %v", got, tt.want)
				}
				checkCapWarning(t, rs, tt.warn)
			})
		}
	}
}

// checkCapWarning checks that rs warns want (none when ""), and nothing
// else about the caps.
func checkCapWarning(t *testing.T, rs *inspect.Ruleset, want string) {
	t.Helper()
	all := strings.Join(rs.Dumps[0].Warnings, "\n")
	if want == "" {
		if strings.Contains(all, "elements") {
			t.Errorf("warned %q, want no warning about elements", rs.Dumps[0].Warnings)
		}
		return
	}
	if !strings.Contains(all, want) {
		t.Errorf("warnings %q, want one saying %q", rs.Dumps[0].Warnings, want)
	}
}

// tablesJSON and tablesText write one table per set, tK with set s of
// sets[K] elements and a chain: a text is cut into segments before its
// chains, so the sets are parsed apart.
func tablesJSON(sets []int) string {
	var b strings.Builder
	b.WriteString(`{"nftables": [`)
	for k, n := range sets {
		if k > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, `{"table": {"family": "ip", "name": "t%d"}}, {"set": {"family": "ip", "name": "s", "table": "t%d", "type": "ipv4_addr", "elem": [`, k, k)
		for i := range n {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, `"%s"`, elemIP(i))
		}
		fmt.Fprintf(&b, `]}}, {"chain": {"family": "ip", "table": "t%d", "name": "c"}}`, k)
	}
	b.WriteString("]}")
	return b.String()
}

func tablesText(sets []int) string {
	var b strings.Builder
	for k, n := range sets {
		b.WriteString(strings.Replace(setText(false, n), "table ip t {", fmt.Sprintf("table ip t%d {", k), 1))
	}
	return b.String()
}

// The sets of one input keep MaxRulesetElements elements in all, whatever
// the reader and its path (the text's segments, parsed apart, together):
// the set that meets the total keeps what is left, those after it none,
// and one warning names it and the total.
func TestRulesetElementsCap(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("some 4 million elements: not with -short or -race")
	}
	sets := []int{MaxSetElements, MaxSetElements, MaxSetElements, MaxSetElements - 10, 20, 5}
	want := fmt.Sprint([]int{MaxSetElements, MaxSetElements, MaxSetElements, MaxSetElements - 10, 10, 0})
	warning := "ip t4 s: the sets and maps of this ruleset hold more than 4194304 elements in all (at most 1048576 each)"
	readers := []struct {
		name  string
		write func([]int) string
		parse func(io.Reader) (*inspect.Ruleset, error)
	}{
		{"json", tablesJSON, func(r io.Reader) (*inspect.Ruleset, error) { return ParseJSON(r, "ruleset.json") }},
		{"text in segments", tablesText, func(r io.Reader) (*inspect.Ruleset, error) { return ParseText(r, "ruleset.txt") }},
		{"text whole", tablesText, func(r io.Reader) (*inspect.Ruleset, error) {
			return parseTextWith(r, "ruleset.txt", readOptions{textWhole: true})
		}},
	}
	for _, rd := range readers {
		t.Run(rd.name, func(t *testing.T) {
			rs, err := rd.parse(strings.NewReader(rd.write(sets)))
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			for k := range sets {
				got = append(got, len(rs.NFTTable("ip", fmt.Sprintf("t%d", k)).Set("s").Elements))
			}
			if fmt.Sprint(got) != want {
				t.Errorf("elements read %v, want %v", got, want)
			}
			checkCapWarning(t, rs, warning)
			if n := strings.Count(strings.Join(rs.Dumps[0].Warnings, "\n"), "in all"); n != 1 {
				t.Errorf("%d warnings about the total, want 1: %q", n, rs.Dumps[0].Warnings)
			}
		})
	}
}

// A knftables dump keeps no more than the total either: with the sets
// read before it holding all but 3 of MaxRulesetElements, 3 lines of the
// next set are kept and the rest dropped before knftables reads them.
func TestRulesetElementsCapDump(t *testing.T) {
	b := newNFTBuilder("dump.txt", inspect.FormatKnftablesDump)
	b.noIPTables = true
	b.keepElements(MaxRulesetElements - 3) // as if read of the sets before
	rs, err := b.knftablesDump(strings.NewReader(setDump(setShape{sets: []int{5, 2}})))
	if err != nil {
		t.Fatal(err)
	}
	if got := elementCounts(rs, setShape{sets: []int{5, 2}}); fmt.Sprint(got) != "[3 0]" {
		t.Errorf("elements read %v, want [3 0]", got)
	}
	checkCapWarning(t, rs, "line 7: ip t s0: the sets and maps of this ruleset hold more than 4194304 elements in all")
}

// allocated is what f allocates, in bytes.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// capAllocPerByte bounds what the elements past the caps cost, per byte of
// input they take: the read buffers (and the tape of one element at a
// time, and the parallel reader's look for a cut), where an element kept
// costs some 200 bytes of 15 of input.
const capAllocPerByte = 10

// The elements past the caps are read and dropped: a set of four times
// MaxSetElements allocates no more than capAllocPerByte times its bytes
// past the cap more than a set at the cap (it took 3.4 GB for 10 million).
func TestSetElementsCapAlloc(t *testing.T) {
	if raceEnabled {
		t.Skip("allocations are measured without the race detector, whose instrumentation allocates too")
	}
	// a dump whose sets are read past the total: its lines are dropped
	// before knftables reads them
	pastTotal := func(r io.Reader) {
		b := newNFTBuilder("dump.txt", inspect.FormatKnftablesDump)
		b.keepElements(MaxRulesetElements)
		b.knftablesDump(r)
	}
	tests := []struct {
		name     string
		parse    func(io.Reader)
		at, over string
	}{
		{"json", func(r io.Reader) { ParseJSON(r, "ruleset.json") }, setJSON(setShape{sets: []int{MaxSetElements}}), setJSON(setShape{sets: []int{4 * MaxSetElements}})},
		{"json one at a time", func(r io.Reader) { parseJSON(r, "ruleset.json", readOptions{jsonOneAtATime: true}) },
			setJSON(setShape{sets: []int{MaxSetElements}}), setJSON(setShape{sets: []int{4 * MaxSetElements}})},
		{"knftables dump past the total", pastTotal, setDump(setShape{sets: []int{0}}), setDump(setShape{sets: []int{MaxSetElements}})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			at := allocated(func() { tt.parse(strings.NewReader(tt.at)) })
			over := allocated(func() { tt.parse(strings.NewReader(tt.over)) })
			past := len(tt.over) - len(tt.at)
			t.Logf("at the cap %d MB, over %d MB, %d MB of input past the cap", at>>20, over>>20, past>>20)
			if over > at+uint64(capAllocPerByte*past) {
				t.Errorf("%d bytes of elements past the cap allocated %d bytes more, want at most %d times their size", past, over-at, capAllocPerByte)
			}
		})
	}
}

// readSizes records the largest read asked of it: the JSON reader's read
// buffer grows with what it holds (a read fills the room after it).
type readSizes struct {
	r   io.Reader
	max int
}

func (rs *readSizes) Read(p []byte) (int, error) {
	rs.max = max(rs.max, len(p))
	return rs.r.Read(p)
}

// The elements a set drops past the cap are read and dropped as they come,
// not held in the read buffer to be parsed again with the rest of the set
// (10 million took 695 MB): reading a set of 8 times MaxSetElements, the
// buffer holds no more than twice the bytes of the elements kept (or what
// the parallel reader looks through for a cut, jsonCutLookMax).
func TestJSONDroppedElementsNotBuffered(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("8 million elements: not with -short or -race")
	}
	for _, tt := range []struct {
		name string
		sh   setShape
	}{
		{"set", setShape{sets: []int{8 * MaxSetElements}}},
		{"map", setShape{isMap: true, sets: []int{8 * MaxSetElements}}},
	} {
		for _, rd := range setCapReaders[:2] {
			t.Run(tt.name+"/"+rd.name, func(t *testing.T) {
				kept := len(setJSON(setShape{isMap: tt.sh.isMap, sets: []int{MaxSetElements}}))
				bound := max(2*kept, jsonCutLookMax+jsonReadSize)
				in := &readSizes{r: strings.NewReader(setJSON(tt.sh))}
				rs, err := rd.parse(in)
				if err != nil {
					t.Fatal(err)
				}
				if got := elementCounts(rs, tt.sh); got[0] != MaxSetElements {
					t.Errorf("elements read %v, want %d", got, MaxSetElements)
				}
				checkCapWarning(t, rs, "ip t s0 holds more than 1048576 elements")
				t.Logf("largest read %d MB, the kept elements' bytes %d MB", in.max>>20, kept>>20)
				if in.max > bound {
					t.Errorf("a read of %d bytes, want at most %d: the buffer held the elements dropped", in.max, bound)
				}
			})
		}
	}
}

// A statement longer than maxContinuation lines (a set of more elements
// than that, four a line) is read up to there, and the rest of it dropped
// with one warning: its lines were read as statements of their own, one
// warning each (1.5 million for 10 million elements).
func TestTextLongStatementDropped(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("4 million elements: not with -short or -race")
	}
	in := setText(false, 4*maxContinuation+400)
	for _, whole := range []bool{true, false} {
		rs, err := parseTextWith(strings.NewReader(in), "ruleset.txt", readOptions{textWhole: whole})
		if err != nil {
			t.Fatal(err)
		}
		w := rs.Dumps[0].Warnings
		if len(w) != 2 || !strings.Contains(w[0], "line 4: a statement goes on for more than 1048576 lines: lines 1048581 to 1048679 are not read") {
			t.Errorf("whole %v: %d warnings %.300q, want the statement's and the set's", whole, len(w), w)
		}
		if n := len(rs.NFTTable("ip", "t").Set("s").Elements); n != MaxSetElements {
			t.Errorf("whole %v: %d elements read, want %d", whole, n, MaxSetElements)
		}
	}
}

// skipItems drops the items after those kept up to the array's closing
// bracket, whatever strings and brackets they hold and however the input
// comes in, leaves a "0" for them (none when there are none), and keeps
// the offsets of what follows those of the input.
func TestJSONSkipItems(t *testing.T) {
	const kept, after = `{"elem": ["a"`, `]}, {"next": 1}`
	for _, tt := range []struct{ name, dropped, want string }{
		{"strings and brackets", `, "b]", ["x", {"y": "]"}], "c\"]"`, `,0`},
		{"one", `,"b"`, `,0`},
		{"none", `  `, ``},
	} {
		for _, oneByte := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/one byte at a time %v", tt.name, oneByte), func(t *testing.T) {
				input := kept + tt.dropped + after
				var r io.Reader = strings.NewReader(input)
				if oneByte {
					r = iotest.OneByteReader(r)
				}
				st := &jsonStream{r: r}
				for len(st.buf) < len(kept) && st.fill(0) {
				}
				if !st.skipItems(len(kept)) {
					t.Fatal("skipItems: end of input")
				}
				for st.fill(st.pos) {
				}
				if got, want := string(st.buf[st.pos:]), kept+tt.want+after; got != want {
					t.Errorf("read %q, want %q", got, want)
				}
				next := strings.Index(string(st.buf), `{"next"`)
				if got, want := st.base+int64(next), int64(strings.Index(input, `{"next"`)); got != want {
					t.Errorf("what follows is at offset %d, want %d", got, want)
				}
			})
		}
	}
}
