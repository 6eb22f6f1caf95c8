package nft

import (
	"io"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/proxyrules/kubectl-proxyrules/inspect"
)

// A big `nft list` text is parsed in segments on every core. nft lists a
// table's chains one after the other, each starting with a `\tchain NAME {`
// line, so the input is cut before such lines; a segment that starts
// there is parsed as if inside the table whose `table …` line last
// preceded it. That guess is checked: the segment before must end inside
// that same table, between chains, with no statement cut short, and no
// chain may be listed in two segments. When any check fails the whole
// input is parsed in one piece instead, so the result is always that of
// the one-piece reader (a test compares them).

// textParallelMin is the input size from which the text is segmented.
const textParallelMin = 2 << 20

type textSegment struct {
	text      string
	startLine int       // lines before it
	table     *tableKey // the table it starts in (nil: at the top)
	b         *builder  // what it holds, once parsed
	endTable  *tableKey // the table it ends in, between chains
	last      bool      // the last of the input
	ok        bool
}

// parseTextSegments parses s in segments; ok is false when it could not
// (then nothing of it is to be used).
func parseTextSegments(s, source string) (*inspect.Ruleset, bool) {
	workers := runtime.GOMAXPROCS(0)
	segs := cutSegments(s, 4*workers)
	if len(segs) < 2 {
		return nil, false
	}
	next := make(chan *textSegment, len(segs))
	for _, sg := range segs {
		next <- sg
	}
	close(next)
	parseSegments(next, workers, source)
	return joinSegments(segs, source)
}

// parseSegments parses the segments sent on next, on workers goroutines,
// until next is closed.
func parseSegments(next <-chan *textSegment, workers int, source string) {
	var wg sync.WaitGroup
	elems := new(atomic.Int64) // the input's set elements, all segments'
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for sg := range next {
				parseSegment(sg, source, elems)
			}
		}()
	}
	wg.Wait()
}

// joinSegments checks the parsed segments against each other and joins
// them; ok is false when a check fails.
func joinSegments(segs []*textSegment, source string) (*inspect.Ruleset, bool) {
	for k, sg := range segs {
		if !sg.ok || k+1 < len(segs) && *sg.endTable != *segs[k+1].table {
			return nil, false
		}
	}
	if segmentsOverCap(segs) {
		return nil, false
	}
	b := newNFTBuilder(source, inspect.FormatNFTText)
	nblocks, nruns := 0, 0
	for _, sg := range segs {
		nblocks += len(sg.b.raw.blocks)
		nruns += len(sg.b.raw.runs)
	}
	b.raw.blocks = make([][]rawRule, 0, nblocks)
	b.raw.runs = make([]ruleRun, 0, nruns)
	for _, sg := range segs {
		b.absorb(sg.b)
	}
	for _, t := range b.tables {
		if !t.DistinctChains() {
			return nil, false // a chain listed in two segments
		}
	}
	return b.finish(), true
}

// readStep is how much readInSegments reads at a time.
const readStep = 256 << 10

// parseTextStreamed reads r, which says it holds about size bytes, and
// parses it in segments while it reads: a segment is cut, and parsed on
// another core, as soon as the text after it is read, so reading (page
// faults on fresh memory, on this project's VM the dearest part) and
// parsing overlap. With the size right the segments are those of
// cutSegments on the whole text; what is read is kept as one string, and
// the result, a failed check or a read error included, is that of
// ParseText reading the whole text first.
func parseTextStreamed(r io.Reader, size int, source string) (*inspect.Ruleset, error) {
	s, segs, err := readInSegments(r, size, source)
	if err != nil {
		// what was read, then the error, as when reading line by line
		return parseText(newNFTLineReader(io.MultiReader(strings.NewReader(s), errorReader{err})), source)
	}
	if len(segs) >= 2 {
		if rs, ok := joinSegments(segs, source); ok {
			return rs, nil
		}
	}
	return parseText(&lineReader{block: s, eof: true}, source)
}

// readInSegments reads r to its end and returns the text, and the segments
// cut and parsed while it read (none when it could not cut two).
func readInSegments(r io.Reader, size int, source string) (string, []*textSegment, error) {
	workers := runtime.GOMAXPROCS(0)
	next := make(chan *textSegment, 4*workers)
	done := make(chan struct{})
	go func() {
		parseSegments(next, workers, source)
		close(done)
	}()
	c := segmentCutter{size: size, n: 4 * workers}
	// A Builder grows without zeroing: the copy is the first write to the
	// text's memory, so its page faults are taken as it is read.
	var text strings.Builder
	text.Grow(size + 1)
	chunk := make([]byte, readStep)
	var err error
	for empty := 0; err == nil; {
		var n int
		n, err = r.Read(chunk)
		text.Write(chunk[:n])
		switch {
		case n > 0 && err == nil:
			c.cut(text.String(), false, next)
			empty = 0
		case n == 0 && err == nil:
			if empty++; empty == 100 {
				err = io.ErrNoProgress
			}
		}
	}
	s := text.String()
	if err == io.EOF {
		err = nil
		c.cut(s, true, next)
	}
	close(next)
	<-done
	return s, c.segs, err
}

// segmentCutter cuts a text as it is read into the segments cutSegments
// would cut it into, given its size.
type segmentCutter struct {
	size, n int
	k       int // cuts made: the next is looked for from (k+1)*size/n
	from    int // where the next segment starts
	lines   int // lines before from
	table   *tableKey
	// searched is where the search for the next cut goes on: no "\n\tchain "
	// starts between its target and searched.
	searched int
	stopped  bool // no more cuts: the last segment is the rest
	failed   bool // no table known at the first cut: no segments
	segs     []*textSegment
}

// cut sends on next the segments that s, the text read so far (all of it
// with eof), completes; with eof, the last one too, unless fewer than two.
func (c *segmentCutter) cut(s string, eof bool, next chan<- *textSegment) {
	const chainLine = "\n\tchain "
	for !c.stopped && !c.failed && c.k+1 < c.n {
		target := max((c.k+1)*c.size/c.n, c.from)
		start := max(target, c.searched)
		if start > len(s) {
			c.stopped = eof
			break
		}
		i := strings.Index(s[start:], chainLine)
		if i < 0 {
			c.stopped = eof
			c.searched = max(start, len(s)-len(chainLine)+1)
			break
		}
		cut := start + i + 1
		tk, ok := tableBefore(s[:cut], c.from)
		if !ok {
			if c.table == nil {
				c.failed = true
				break
			}
			tk = *c.table
		}
		text := s[c.from:cut]
		sg := &textSegment{text: text, startLine: c.lines, table: c.table}
		c.segs = append(c.segs, sg)
		next <- sg
		c.lines += strings.Count(text, "\n")
		c.from, c.table = cut, &tk
		c.k++
	}
	if eof && !c.failed && len(c.segs) > 0 {
		sg := &textSegment{text: s[c.from:], startLine: c.lines, table: c.table, last: true}
		c.segs = append(c.segs, sg)
		next <- sg
	}
}

// cutSegments cuts s before `\tchain ` lines into about n segments, each
// knowing the table it starts in; nil when it cannot tell one.
func cutSegments(s string, n int) []*textSegment {
	c := segmentCutter{size: len(s), n: n}
	next := make(chan *textSegment, n+1)
	c.cut(s, true, next)
	if c.failed {
		return nil
	}
	return c.segs
}

// tableBefore reads the last `table …` line of s that starts at or after
// from, as the parser would.
func tableBefore(s string, from int) (tableKey, bool) {
	line := ""
	if from == 0 {
		if t := strings.TrimPrefix(s, "\ufeff"); strings.HasPrefix(t, "table ") {
			line = t
		}
	}
	for i := max(from-1, 0); ; {
		j := strings.Index(s[i:], "\ntable ") // forward: Index is fast
		if j < 0 {
			break
		}
		line = s[i+j+1:]
		i += j + 1
	}
	if line == "" {
		return tableKey{}, false
	}
	if e := strings.IndexByte(line, '\n'); e >= 0 {
		line = line[:e]
	}
	p := &textParser{b: newNFTBuilder("", inspect.FormatNFTText), lr: &lineReader{}}
	text, handle := p.preprocess(line)
	p.top(text, handle)
	if p.state != stateInTable {
		return tableKey{}, false
	}
	return tableKey{p.table.Family, p.table.Name}, true
}

// parseSegment parses one segment with a builder of its own, counting
// its set elements in elems too.
func parseSegment(sg *textSegment, source string, elems *atomic.Int64) {
	b := newNFTBuilder(source, inspect.FormatNFTText)
	b.appendChains = true
	b.shareElementCount(elems)
	p := &textParser{b: b, lr: &lineReader{block: sg.text, eof: true, line: sg.startLine}}
	if sg.table != nil {
		p.table, p.state = b.table(sg.table.family, sg.table.name), stateInTable
	}
	p.lines()
	sg.b = b
	defer b.raw.normalize(false) // here, while the input is still being read
	switch {
	case p.lr.err != nil:
	case sg.last:
		p.end()
		sg.ok = true
	case p.state == stateInTable && !p.cutShort:
		sg.endTable = &tableKey{p.table.Family, p.table.Name}
		sg.ok = true
	}
}

// absorb adds what a segment's builder read, after what b holds.
func (b *builder) absorb(sb *builder) {
	for _, st := range sb.tables {
		t := b.table(st.Family, st.Name)
		if st.Handle != nil {
			t.Handle = st.Handle
		}
		if st.Comment != nil {
			t.Comment = st.Comment
		}
		t.Flags = append(t.Flags, st.Flags...)
		t.Chains = append(t.Chains, st.Chains...)
		for _, s := range st.Sets {
			t.AddSet(s)
		}
		for _, m := range st.Maps {
			t.AddMap(m)
		}
	}
	b.raw.join(&sb.raw)
	for k, v := range sb.iptWarned {
		b.iptWarned[k] = b.iptWarned[k] || v
	}
	kept := sb.dump.Warnings
	if len(kept) > maxWarnings {
		kept = kept[:maxWarnings] // without "further warnings suppressed"
	}
	for _, w := range kept {
		b.warn("%s", w)
	}
	for range sb.nwarn - len(kept) {
		b.nwarn++
		if b.nwarn == maxWarnings+1 {
			b.dump.Warnings = append(b.dump.Warnings, "further warnings suppressed")
		}
	}
}
