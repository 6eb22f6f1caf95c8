package nft

import (
	"bytes"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"unsafe"
)

// Most of a big nft -j listing is rules, and a rule's text depends on its
// object alone. So the "nftables" array is cut into segments that workers
// parse on every core, and the builder takes the segments in order.
//
// Finding where each object ends means reading every byte, which one
// goroutine cannot do as fast as the workers parse. So the cutter does
// not frame objects: it cuts where an object of a listed kind seems to
// start (`, {"rule": {`), looking only at the bytes near the cut, and a
// worker parses a segment's objects one after the other from its start.
// A cut is proven when the segment before it, parsed from a proven start,
// ends exactly there; the first segment starts where the array does. A
// cut that falls inside an object (such text nested in it, which nft does
// not write; a string cannot hold it, its '"' would end the string) or input
// that is not well-formed leaves a segment that does not end cleanly:
// from its first object that did not parse, the rest of the array is read
// one object at a time (jsonArray), so errors and warnings are those of
// the one-at-a-time reader (a test compares them).
//
// Rules, chains, sets and maps are prepared by the workers; everything
// else (tables, elements) is built in order by jsonObject as before.

// jsonSegmentSize is the least input a segment holds: a cut is looked for
// only once that much is read past the last one (readOptions.jsonSegmentMin
// changes it: tests cut at every object).
const jsonSegmentSize = 128 << 10

// jsonCutLookMax bounds what is read looking for a cut: past it (tens of
// MB of objects of other kinds) the rest is read one object at a time,
// which holds no more than an object in memory.
const jsonCutLookMax = 32 << 20

type jsonSegment struct {
	text string // the segment's bytes, in place in a read buffer
	base int64  // input offset of text[0]
	// set by the worker: the objects parsed whole, in order, and for
	// each a prepared rule, chain, set or map, or nothing (built in order
	// by jsonObject); read is the offset in text after the last of them
	objs     []string
	prepared []prepared
	read     int
	clean    bool // every byte read: objects, each followed by a ','
	done     chan struct{}
}

// Segments and parsers are reused from read to read: a segment's arrays
// and a parser's tape are big, and fresh ones cost memory to clear and
// to collect.
var (
	jsonSegments = sync.Pool{New: func() any {
		// room for objects of 1 KiB (a rule with a map of endpoints):
		// smaller ones grow it once or twice
		n := jsonSegmentSize>>9 + 16
		return &jsonSegment{objs: make([]string, 0, n), prepared: make([]prepared, 0, n)}
	}}
	jsonParsers = sync.Pool{New: func() any { return &jsonParser{} }}
)

// putParser returns a parser to the pool, without the strings of the
// input its tape points into.
func putParser(p *jsonParser) {
	clear(p.tape[:cap(p.tape)])
	p.s, p.err = "", nil
	jsonParsers.Put(p)
}

// reset empties a segment the builder is done with, for use again.
func (sg *jsonSegment) reset() {
	clear(sg.objs)
	clear(sg.prepared) // drop what the builder took
	sg.objs, sg.prepared = sg.objs[:0], sg.prepared[:0]
	sg.text, sg.read, sg.clean = "", 0, false
}

// arrayEnd is how the parallel reader stopped: the rest of the array is
// to be read one object at a time from st, starting with object count,
// whose ',' is consumed when commaTaken.
type arrayEnd struct {
	count      int
	commaTaken bool
	segments   int  // segments read in parallel
	rewound    bool // a segment did not end cleanly
}

// jsonArrayParallel reads the array's objects in segments (see above) of
// segmentMin bytes at least.
func jsonArrayParallel(st *jsonStream, p *jsonParser, b *builder, w *renderer, segmentMin int) (end arrayEnd, err error) {
	workers := runtime.GOMAXPROCS(0)
	work := make(chan *jsonSegment, workers)
	order := make(chan *jsonSegment, 2*workers)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the cutter: st is its own until order is closed
		defer wg.Done()
		defer close(order)
		defer close(work)
		cutJSONSegments(st, work, order, stop, segmentMin)
	}()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wp := jsonParsers.Get().(*jsonParser)
			defer putParser(wp)
			wr := &renderer{}
			for sg := range work {
				parseJSONSegment(sg, wp, wr)
				close(sg.done)
			}
		}()
	}
	// However the builder stops, the cutter and workers are told to stop
	// and waited for, so nothing outlives the call.
	stopped := false
	halt := func() []*jsonSegment {
		if stopped {
			return nil
		}
		stopped = true
		close(stop)
		var rest []*jsonSegment
		for sg := range order {
			<-sg.done
			rest = append(rest, sg)
		}
		wg.Wait()
		return rest
	}
	defer halt()
	for sg := range order {
		<-sg.done
		end.segments++
		for k, raw := range sg.objs {
			i := end.count
			end.count++
			if b.addPrepared(&sg.prepared[k], i) {
				continue
			}
			v, perr := p.parse(raw)
			if perr != nil { // parsed by the worker: cannot happen
				return end, fmt.Errorf("nft JSON: offset %d: %w", sg.base, fmt.Errorf("object %d: %w", i, perr))
			}
			b.jsonObject(v, w, i)
		}
		if !sg.clean {
			// the rest from sg's first object not read: it, what was cut
			// after it, and what st has not handed out yet
			end.commaTaken = len(sg.objs) == 0 && end.count > 0
			rest := halt()
			st.rewind(sg, sg.read, rest)
			end.rewound = true
			return end, nil
		}
		end.commaTaken = end.count > 0 // a clean segment ends after a ','
		sg.reset()
		jsonSegments.Put(sg)
	}
	// the cutter stopped before a segment it could not cut (at the end of
	// the input, or of a read error): st is at the last cut
	wg.Wait()
	return end, nil
}

// rewind puts st back at offset from of segment sg, with the segments cut
// after it (in order) and what st holds after them still to be read.
func (st *jsonStream) rewind(sg *jsonSegment, from int, after []*jsonSegment) {
	n := len(sg.text) - from + len(st.buf) - st.pos
	for _, s := range after {
		n += len(s.text)
	}
	buf := make([]byte, 0, n+jsonReadSize)
	buf = append(buf, sg.text[from:]...)
	for _, s := range after {
		buf = append(buf, s.text...)
	}
	buf = append(buf, st.buf[st.pos:]...)
	st.buf, st.pos, st.base = buf, 0, sg.base+int64(from)
}

// cutJSONSegments cuts the array into segments, handing each to the workers
// and, in order, to the builder. It stops where it finds no cut before
// the input ends (st is left at the last cut), or when told to. A segment
// holds segmentMin bytes at least.
func cutJSONSegments(st *jsonStream, work, order chan<- *jsonSegment, stop <-chan struct{}, segmentMin int) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		// bytes read past the last cut, at least the segment's worth
		for len(st.buf)-st.pos <= segmentMin && st.fill(st.pos) {
		}
		cut, searched := -1, segmentMin
		for len(st.buf)-st.pos > segmentMin && len(st.buf)-st.pos <= jsonCutLookMax {
			avail := st.buf[st.pos:]
			if cut = lastCut(avail, searched); cut >= 0 {
				break
			}
			// no cut in what is read (an object bigger than that): read
			// on, and look only at what is new, a cut's length before it
			searched = max(segmentMin, len(avail)-32)
			if !st.fill(st.pos) {
				break
			}
		}
		if cut < 0 {
			return
		}
		sg := jsonSegments.Get().(*jsonSegment)
		sg.text = unsafe.String(&st.buf[st.pos], cut)
		sg.base = st.base + int64(st.pos)
		sg.done = make(chan struct{})
		select {
		case order <- sg:
		case <-stop:
			return // st is still at the segment not handed on
		}
		st.pos += cut
		select {
		case work <- sg:
		case <-stop:
			close(sg.done) // never parsed; the builder has stopped
			return
		}
	}
}

// cutKinds are the kinds of object a cut may be put before: those a big
// listing is made of, and whose names no expression has, so that a cut
// falls inside an object only where something nft does not write nests
// such an object in it.
var cutKinds = []string{"rule", "chain"}

// lastCut returns the offset in b, at least from, of the last place that
// looks like the start of an array element: `{"<kind>":` after a ',', white
// space aside; -1 when there is none. It is a guess, proven by the parse.
func lastCut(b []byte, from int) int {
	for end := len(b); end > from; {
		i := bytes.LastIndexByte(b[from:end], '{')
		if i < 0 {
			return -1
		}
		i += from
		end = i
		if i+1 < len(b) && b[i+1] == '"' && looksLikeElement(b, i) {
			return i
		}
	}
	return -1
}

// looksLikeElement reports whether b[i:] starts `{"<kind>"` followed by
// ':', after a ',' (white space aside).
func looksLikeElement(b []byte, i int) bool {
	j := i - 1
	for j >= 0 && isJSONSpace(b[j]) {
		j--
	}
	if j < 0 || b[j] != ',' {
		return false
	}
	rest := b[i+2:]
	q := bytes.IndexByte(rest[:min(len(rest), 16)], '"')
	if q < 0 {
		return false
	}
	if !slices.Contains(cutKinds, unsafe.String(unsafe.SliceData(rest), q)) {
		return false
	}
	k := q + 1
	for k < len(rest) && isJSONSpace(rest[k]) {
		k++
	}
	return k < len(rest) && rest[k] == ':'
}

func isJSONSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// parseJSONSegment parses a segment's objects one after the other from its
// start, preparing its rules, chains, sets and maps and rendering the
// rules, until it ends or holds something else than objects separated by
// commas.
func parseJSONSegment(sg *jsonSegment, p *jsonParser, w *renderer) {
	s := sg.text
	pos := 0
	for pos < len(s) && isJSONSpace(s[pos]) {
		pos++ // before the array's first object
	}
	for pos < len(s) && s[pos] == '{' {
		kind := firstKey(s[pos:])
		if (kind == "set" || kind == "map" || kind == "element") && len(s)-pos >= bigJSONObject {
			// perhaps thousands of elements: the tape sized once for the
			// rest of the segment (which holds the whole object)
			p.sizeTape(s[pos:])
		}
		v, n, _, err := p.parsePrefix(s[pos:])
		if err != nil {
			return // short (a cut inside it) or bad: read one at a time
		}
		raw := s[pos : pos+n]
		pos += n
		sg.objs = append(sg.objs, raw)
		sg.read = pos
		var pr prepared
		if kind == "rule" || kind == "set" || kind == "map" || kind == "chain" {
			// kind 0 when it lacks a name or table: jsonObject warns, in order
			pr = prepareObject(kind, v.kid(0), w)
		}
		sg.prepared = append(sg.prepared, pr)
		for pos < len(s) && isJSONSpace(s[pos]) {
			pos++
		}
		if pos >= len(s) || s[pos] != ',' {
			return
		}
		pos++
		for pos < len(s) && isJSONSpace(s[pos]) {
			pos++
		}
		if pos == len(s) {
			sg.clean = true
			return
		}
	}
}

// firstKey returns an object's first member name when it is plain (no
// escapes): the kind jsonObject reads the object as.
func firstKey(obj string) string {
	i := 1
	for i < len(obj) && isJSONSpace(obj[i]) {
		i++
	}
	if i >= len(obj) || obj[i] != '"' {
		return ""
	}
	end := strings.IndexAny(obj[i+1:], "\"\\")
	if end < 0 {
		return ""
	}
	return obj[i+1 : i+1+end]
}
