package nft

import (
	"runtime"
	"strings"
	"sync"

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

// textParallel segments big texts; tests turn it off to compare.
var textParallel = true

type textSegment struct {
	text      string
	startLine int       // lines before it
	table     *tableKey // the table it starts in (nil: at the top)
	b         *builder  // what it holds, once parsed
	endTable  *tableKey // the table it ends in, between chains
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
	next := make(chan int, len(segs))
	for k := range segs {
		next <- k
	}
	close(next)
	var wg sync.WaitGroup
	for range min(len(segs), workers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range next {
				parseSegment(&segs[k], source, k == len(segs)-1)
			}
		}()
	}
	wg.Wait()
	for k := range segs {
		if !segs[k].ok || k+1 < len(segs) && *segs[k].endTable != *segs[k+1].table {
			return nil, false
		}
	}
	b := newNFTBuilder(source, inspect.FormatNFTText)
	nblocks, nruns := 0, 0
	for k := range segs {
		nblocks += len(segs[k].b.raw.blocks)
		nruns += len(segs[k].b.raw.runs)
	}
	b.raw.blocks = make([][]rawRule, 0, nblocks)
	b.raw.runs = make([]ruleRun, 0, nruns)
	for k := range segs {
		b.absorb(segs[k].b)
	}
	for _, t := range b.tables {
		if !t.DistinctChains() {
			return nil, false // a chain listed in two segments
		}
	}
	return b.finish(), true
}

// cutSegments cuts s before `\tchain ` lines into about n segments, each
// knowing the table it starts in; nil when it cannot tell one.
func cutSegments(s string, n int) []textSegment {
	var segs []textSegment
	from, lines := 0, 0
	var table *tableKey // of the segment starting at from
	for k := 1; k < n; k++ {
		i := strings.Index(s[max(k*len(s)/n, from):], "\n\tchain ")
		if i < 0 {
			break
		}
		cut := max(k*len(s)/n, from) + i + 1
		// the table: the last `table` line since the last cut, or the
		// one the last cut was in
		tk, ok := tableBefore(s[:cut], from)
		if !ok {
			if table == nil {
				return nil
			}
			tk = *table
		}
		text := s[from:cut]
		segs = append(segs, textSegment{text: text, startLine: lines, table: table})
		lines += strings.Count(text, "\n")
		from, table = cut, &tk
	}
	if len(segs) == 0 {
		return nil
	}
	return append(segs, textSegment{text: s[from:], startLine: lines, table: table})
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

// parseSegment parses one segment with a builder of its own.
func parseSegment(sg *textSegment, source string, last bool) {
	b := newNFTBuilder(source, inspect.FormatNFTText)
	b.appendChains = true
	p := &textParser{b: b, lr: &lineReader{block: sg.text, eof: true, line: sg.startLine}}
	if sg.table != nil {
		p.table, p.state = b.table(sg.table.family, sg.table.name), stateInTable
	}
	p.lines()
	sg.b = b
	switch {
	case p.lr.err != nil:
	case last:
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
