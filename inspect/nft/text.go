package nft

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"runtime"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"sigs.k8s.io/knftables"

	"github.com/proxyrules/kubectl-proxyrules/inspect"
	"github.com/proxyrules/kubectl-proxyrules/inspect/internal/scan"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// This file reads `nft list ruleset` / `nft list table …` text and holds the
// builder the three nftables readers share.

// maxWarnings bounds the warnings one nftables input records.
const maxWarnings = 50

type tableKey struct {
	family knftables.Family
	name   string
}

// builder collects the tables of one nftables input.
type builder struct {
	dump      inspect.Dump
	tables    []*inspect.NFTTable
	byKey     map[tableKey]*inspect.NFTTable
	iptWarned map[tableKey]bool
	nwarn     int
	// noIPTables keeps every table an NFTTable (knftables dumps are never
	// iptables-nft's).
	noIPTables bool
	// raw holds the rules read so far; finish turns them into NFTRules or
	// IPRules.
	raw ruleStore
	// lastTable/lastChain cache the chain the last rule went to (JSON
	// names it with every rule).
	lastTable *inspect.NFTTable
	lastChain *inspect.NFTChain
	// cursor is where in cursorTable.Chains the last JSON rule's chain is
	cursorTable *inspect.NFTTable
	cursor      int
	lastKey     tableKey // of lastTable
	// appendChains: chain appends without a name lookup (segments)
	appendChains bool
	chains       blockOf[inspect.NFTChain] // for chain
	elems        elementCount              // of the sets and maps (setcap.go)
}

func newNFTBuilder(source string, format inspect.Format) *builder {
	return &builder{
		dump:      inspect.Dump{Source: source, Format: format},
		byKey:     map[tableKey]*inspect.NFTTable{},
		iptWarned: map[tableKey]bool{},
	}
}

func (b *builder) warn(format string, args ...any) {
	b.nwarn++
	switch {
	case b.nwarn <= maxWarnings:
		b.dump.Warnings = append(b.dump.Warnings, fmt.Sprintf(format, args...))
	case b.nwarn == maxWarnings+1:
		b.dump.Warnings = append(b.dump.Warnings, "further warnings suppressed")
	}
}

// table returns the table with that family and name, adding it when missing.
func (b *builder) table(family knftables.Family, name string) *inspect.NFTTable {
	k := tableKey{family, name}
	if b.lastTable != nil && b.lastKey == k {
		return b.lastTable
	}
	if t := b.byKey[k]; t != nil {
		b.lastTable, b.lastKey, b.lastChain = t, k, nil
		return t
	}
	t := inspect.NewNFTTable(family, name)
	t.Source = b.dump.Source
	t.Format = b.dump.Format
	b.byKey[k] = t
	b.tables = append(b.tables, t)
	b.lastTable, b.lastKey, b.lastChain = t, k, nil
	return t
}

// chain returns the named chain of t, adding it when missing; a segment's
// builder (appendChains) adds it without looking (a chain listed twice is
// found when the segments are joined).
func (b *builder) chain(t *inspect.NFTTable, name string) *inspect.NFTChain {
	if !b.appendChains {
		return t.EnsureChain(name)
	}
	c := b.chains.next()
	c.Chain = knftables.Chain{Family: t.Family, Table: t.Name, Name: name}
	t.Chains = append(t.Chains, c)
	return c
}

// rawRule is a rule as read, before it becomes an NFTRule (or, in an
// iptables-nft table, an IPRule).
type rawRule struct {
	text    string
	comment *string
	handle  *int
	line    int
	// as read: the text is to be normalised (and, with split, its
	// trailing `comment "…"` taken off into the comment) by finish, on
	// every core
	asRead, split bool
}

// addRule records a rule of chain c; with split, a trailing `comment "…"`
// is taken off the text into the comment.
func (b *builder) addRule(c *inspect.NFTChain, text string, comment *string, split bool, handle *int, line int) {
	b.raw.add(c, rawRule{text: text, comment: comment, handle: handle, line: line, asRead: true, split: split})
}

// normalize normalises the text of the rules recorded as read; in
// parallel a block at a time, unless the rules are few (or the caller is
// one of several workers already).
func (s *ruleStore) normalize(parallel bool) {
	if s.asRead == 0 {
		return
	}
	s.asRead = 0
	serialBelow := 2
	if s.n < parallelMin || !parallel {
		serialBelow = math.MaxInt
	}
	runChunks(len(s.blocks), serialBelow, 1, func(_, from, to int) {
		var tb textBlock
		for _, blk := range s.blocks[from:to] {
			for i := range blk {
				r := &blk[i]
				if !r.asRead {
					continue
				}
				r.text = tb.normalized(r.text)
				if r.split {
					r.text, r.comment = splitComment(r.text)
				}
				r.asRead, r.split = false, false
			}
		}
	})
}

// ruleStore holds the rules read, in order, as runs of one chain's rules:
// every format lists a chain's rules one after the other, so a rule costs
// an append, not a map update. The rules are kept in blocks that are
// never copied (a full one is followed by a new one), so the store costs
// its size once, and joining stores (segments) copies no rule.
type ruleStore struct {
	blocks [][]rawRule
	runs   []ruleRun
	n      int // rules in all
	asRead int // rules whose text is not normalised yet
	// counted holds the rules of each chain in runs[:countedRuns], for
	// count (built when first asked)
	counted     map[*inspect.NFTChain]int
	countedRuns int
}

// A block holds up to maxRuleBlock rules; the first ones are smaller, so
// that a small input costs little.
const (
	minRuleBlock = 16
	maxRuleBlock = 2048 // ruleRun counts in uint16
)

type ruleRun struct {
	chain    *inspect.NFTChain
	block    int32
	from, to uint16 // blocks[block][from:to]
}

func (s *ruleStore) add(c *inspect.NFTChain, r rawRule) {
	nb := len(s.blocks)
	if nb == 0 || len(s.blocks[nb-1]) == cap(s.blocks[nb-1]) {
		s.blocks = append(s.blocks, make([]rawRule, 0, min(max(s.n, minRuleBlock), maxRuleBlock)))
		nb++
	}
	blk := &s.blocks[nb-1]
	if n := len(s.runs); n == 0 || s.runs[n-1].chain != c || int(s.runs[n-1].block) != nb-1 {
		s.runs = append(s.runs, ruleRun{c, int32(nb - 1), uint16(len(*blk)), uint16(len(*blk))})
	}
	*blk = append(*blk, r)
	s.runs[len(s.runs)-1].to++
	s.n++
	if r.asRead {
		s.asRead++
	}
}

// join adds the rules of o after those of s, without copying them.
func (s *ruleStore) join(o *ruleStore) {
	off := len(s.blocks)
	s.blocks = append(s.blocks, o.blocks...)
	for _, r := range o.runs {
		r.block += int32(off)
		s.runs = append(s.runs, r)
	}
	s.n += o.n
	s.asRead += o.asRead
}

// count is how many rules c has so far. It is asked for a chain listed
// again, which is rare: the counts are taken from the runs ended since
// the last time it was asked (the last run may still grow).
func (s *ruleStore) count(c *inspect.NFTChain) int {
	if s.counted == nil {
		s.counted = map[*inspect.NFTChain]int{}
	}
	ended := max(len(s.runs)-1, 0)
	for _, run := range s.runs[s.countedRuns:ended] {
		s.counted[run.chain] += int(run.to - run.from)
	}
	s.countedRuns = ended
	n := s.counted[c]
	if k := len(s.runs); k > 0 && s.runs[k-1].chain == c {
		n += int(s.runs[k-1].to - s.runs[k-1].from)
	}
	return n
}

// of calls fn with the runs of t's chains, in the order read.
func (s *ruleStore) of(t *inspect.NFTTable, fn func(c *inspect.NFTChain, rules []rawRule)) {
	for _, run := range s.runs {
		if run.chain.Table == t.Name && run.chain.Family == t.Family {
			fn(run.chain, s.blocks[run.block][run.from:run.to])
		}
	}
}

// materialize turns the rules recorded for t into NFTRules with their Info,
// all in one array.
func (b *builder) materialize(t *inspect.NFTTable) {
	n := 0
	b.raw.of(t, func(_ *inspect.NFTChain, rules []rawRule) { n += len(rules) })
	if n == 0 {
		return
	}
	rules := make([]inspect.NFTRule, n)
	ptrs := make([]*inspect.NFTRule, n)
	k := 0
	b.raw.of(t, func(c *inspect.NFTChain, raw []rawRule) {
		from := k
		for i := range raw {
			rr := &raw[i]
			// The first write to each rule, on one goroutine: the array
			// is fresh memory, and page faults taken on both cores at
			// once in one address space cost ten times more on a VM
			// with shadow page tables (4.7 s instead of 0.36 s for the
			// ≤ 1.35 shape's 210,000 rules, measured).
			r := &rules[k]
			r.Rule = knftables.Rule{Family: t.Family, Table: t.Name, Chain: c.Name, Rule: rr.text, Comment: rr.comment, Handle: rr.handle}
			r.Line = rr.line
			ptrs[k] = r
			k++
		}
		if c.Rules == nil {
			c.Rules = ptrs[from:k:k]
		} else {
			c.Rules = append(c.Rules, ptrs[from:k]...)
		}
	})
	scratch := make([]ruleScratch, runtime.GOMAXPROCS(0))
	forChunks(n, func(w, from, to int) {
		sc := &scratch[w]
		for i := from; i < to; i++ {
			r := &rules[i]
			sc.analyze(&r.Info, r.Rule.Rule)
		}
	})
}

// finish converts iptables-nft tables and returns the result.
func (b *builder) finish() *inspect.Ruleset {
	rs := &inspect.Ruleset{}
	d := b.dump
	b.raw.normalize(true)
	for _, t := range b.tables {
		k := tableKey{t.Family, t.Name}
		if !b.noIPTables && isIPTablesNFT(t, &b.raw, b.iptWarned[k]) {
			it := toIPTable(t, &b.raw)
			rs.IPTables = append(rs.IPTables, it)
			d.Backend = kubeproxy.BackendNFT
			d.Rules += it.RuleCount()
			if b.dump.Format == inspect.FormatNFTJSON && hasXT(t, &b.raw) {
				d.Warnings = append(d.Warnings, fmt.Sprintf(
					"table %s %s is managed by iptables-nft: nft -j shows its xtables matches and targets without arguments (probabilities, DNAT destinations, marks are unknown); read it with iptables-nft-save or `nft list table %s %s` instead",
					t.Family, t.Name, t.Family, t.Name))
			}
			continue
		}
		b.materialize(t)
		rs.NFTables = append(rs.NFTables, t)
		d.Rules += t.RuleCount()
	}
	d.Tables = len(rs.IPTables) + len(rs.NFTables)
	rs.Dumps = []inspect.Dump{d}
	return rs
}

// lineReader yields the lines of r (without "\n" or "\r\n") as
// substrings of one string per block of about 1 MB of input, so that the
// rule text the parsers keep costs no copy per line.
type lineReader struct {
	r     io.Reader
	buf   []byte
	block string // the current block: complete lines only
	pos   int
	line  int
	eof   bool
	err   error
}

const blockSize = 1 << 20

func newNFTLineReader(r io.Reader) *lineReader {
	return &lineReader{r: r}
}

var errNFTBinary = scan.ErrBinary

// next returns the next line; ok is false at the end of the input or on a
// read error (then lr.err is set).
func (lr *lineReader) next() (string, bool) {
	for {
		if lr.pos < len(lr.block) {
			rest := lr.block[lr.pos:]
			line := rest
			if i := strings.IndexByte(rest, '\n'); i >= 0 {
				line = rest[:i]
				lr.pos += i + 1
			} else {
				lr.pos = len(lr.block)
			}
			lr.line++
			if lr.line == 1 {
				line = strings.TrimPrefix(line, "\ufeff") // a byte order mark
			}
			if n := len(line); n > 0 && line[n-1] == '\r' {
				line = line[:n-1]
			}
			if strings.IndexByte(line, 0) >= 0 {
				lr.err = errNFTBinary
				return "", false
			}
			return line, true
		}
		if lr.eof || lr.err != nil {
			return "", false
		}
		lr.fill()
	}
}

// fill reads the next block: everything up to the last newline read (the
// whole rest at the end of the input).
func (lr *lineReader) fill() {
	for {
		start := len(lr.buf)
		if cap(lr.buf)-start < blockSize/2 {
			nb := make([]byte, start, 2*start+blockSize)
			copy(nb, lr.buf)
			lr.buf = nb
		}
		n, err := lr.r.Read(lr.buf[start:cap(lr.buf)])
		lr.buf = lr.buf[:start+n]
		if err == io.EOF || err != nil && len(lr.buf) > 0 {
			if err != io.EOF {
				lr.err = err
			}
			lr.eof = true
			lr.block, lr.pos = string(lr.buf), 0
			lr.buf = lr.buf[:0]
			return
		}
		if err != nil {
			lr.err = err
			return
		}
		if i := bytes.LastIndexByte(lr.buf, '\n'); i >= 0 && len(lr.buf) >= blockSize/2 {
			lr.block, lr.pos = string(lr.buf[:i+1]), 0
			rest := copy(lr.buf, lr.buf[i+1:])
			lr.buf = lr.buf[:rest]
			return
		}
	}
}

func (lr *lineReader) failure() error {
	if lr.err == nil {
		return nil
	}
	return fmt.Errorf("line %d: %w", lr.line+1, lr.err)
}

// ParseText reads `nft list ruleset` / `nft list table …` text (also with
// -a handles, -n numeric output, and the `# Warning: table ip nat is managed
// by iptables-nft` lines nft prints). Every table becomes an NFTTable, except
// the tables of an iptables-nft node, which become IPTables (see
// xtables.go). Unexpected lines are skipped with a warning; a read error
// or binary input returns what was read so far together with the error.
func ParseText(r io.Reader, source string) (*inspect.Ruleset, error) {
	return parseTextWith(r, source, readOptions{})
}

// parseTextWith is ParseText, in segments unless opt says in one piece.
func parseTextWith(r io.Reader, source string, opt readOptions) (*inspect.Ruleset, error) {
	if opt.textWhole || runtime.GOMAXPROCS(0) < 2 {
		return parseText(newNFTLineReader(r), source)
	}
	if size := inspect.InputSize(r); size >= textParallelMin && size < 1<<40 {
		return parseTextStreamed(r, int(size), source)
	}
	data, err := inspect.ReadAll(r)
	if err != nil {
		// what was read, then the error, as when reading line by line
		return parseText(newNFTLineReader(io.MultiReader(bytes.NewReader(data), errorReader{err})), source)
	}
	if len(data) == 0 {
		return parseText(newNFTLineReader(bytes.NewReader(nil)), source)
	}
	s := unsafe.String(&data[0], len(data)) // data is never written again
	if len(s) >= textParallelMin {
		if rs, ok := parseTextSegments(s, source); ok {
			return rs, nil
		}
	}
	return parseText(&lineReader{block: s, eof: true}, source)
}

func parseText(lr *lineReader, source string) (*inspect.Ruleset, error) {
	p := &textParser{b: newNFTBuilder(source, inspect.FormatNFTText), lr: lr}
	p.parse()
	rs := p.b.finish()
	return rs, p.lr.failure()
}

type errorReader struct{ err error }

func (e errorReader) Read([]byte) (int, error) { return 0, e.err }

type textState int

const (
	stateTop textState = iota
	stateInTable
	stateInChain
	stateInSet
	stateInSkip
)

type textParser struct {
	b  *builder
	lr *lineReader

	state textState
	table *inspect.NFTTable
	chain *inspect.NFTChain
	set   *setBlock
	// skipDepth counts open braces of an object the parser does not model
	// (counter, quota, flowtable, ct helper …).
	skipDepth int
	skipFrom  textState
	// cutShort: a statement's lines went on past the end of the input
	cutShort bool
	// chainRules counts the rules of chain so far
	chainRules int
	// joined holds statements of several lines, joined
	joined textBlock
	// reused from one elements statement to the next
	parts []string
	es    elementScratch
}

// setBlock is a set or map being read.
type setBlock struct {
	isMap bool
	set   knftables.Set
	mp    knftables.Map
	elems []*knftables.Element
	full  bool // MaxSetElements read: the rest is not
}

// maxContinuation bounds how many lines one statement (a rule or an
// elements list with an unclosed '{') may span.
const maxContinuation = 1 << 20

var iptNFTWarning = "# Warning: table "

func (p *textParser) parse() {
	p.lines()
	p.end()
}

// lines parses the lines of p.lr.
func (p *textParser) lines() {
	for {
		raw, ok := p.lr.next()
		if !ok {
			break
		}
		line, handle := p.preprocess(raw)
		if line == "" {
			continue
		}
		// statements with an unclosed '{' continue on the next lines
		if bal := braceBalance(line); bal > 0 && p.state != stateInSkip && !p.opensBlock(line) {
			line, handle = p.continuation(line, handle, bal)
		}
		p.statement(line, handle)
	}
}

// end closes what the input left open.
func (p *textParser) end() {
	if p.state != stateTop {
		p.b.warn("input ends inside a block (truncated?)")
		p.closeAll()
	}
}

// preprocess strips a line's `# …` comment (keeping a `# handle N`) and the
// iptables-nft warning nft prints to stderr, which can be glued to any line.
func (p *textParser) preprocess(raw string) (string, *int) {
	if i := strings.Index(raw, iptNFTWarning); i >= 0 {
		p.iptWarning(raw[i:])
		raw = raw[:i]
	}
	var handle *int
	if i := commentStart(raw); i >= 0 {
		c := strings.TrimSpace(raw[i+1:])
		if h, ok := strings.CutPrefix(c, "handle "); ok {
			if n, err := strconv.Atoi(strings.TrimSpace(h)); err == nil {
				handle = &n
			}
		} else if strings.HasPrefix(c, "Warning:") {
			p.b.warn("line %d: nft warning: %s", p.lr.line, c)
		}
		raw = raw[:i]
	}
	return strings.TrimSpace(raw), handle
}

// iptWarning records `# Warning: table ip nat is managed by iptables-nft, do
// not touch!`.
func (p *textParser) iptWarning(s string) {
	f := strings.Fields(strings.TrimPrefix(s, iptNFTWarning))
	if len(f) >= 6 && f[2] == "is" && f[3] == "managed" && f[4] == "by" && strings.HasPrefix(f[5], "iptables-nft") {
		p.b.iptWarned[tableKey{knftables.Family(f[0]), f[1]}] = true
	}
}

// commentStart returns the index of a '#' that starts a comment (outside
// double quotes), or -1.
func commentStart(s string) int {
	if strings.IndexByte(s, '#') < 0 {
		return -1
	}
	inQ := false
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '"':
			inQ = !inQ
		case '#':
			if !inQ {
				return i
			}
		}
	}
	return -1
}

// braceBalance counts '{' minus '}' outside double quotes.
func braceBalance(s string) int {
	if strings.IndexByte(s, '"') < 0 {
		// most lines: no quotes, so count fast
		return strings.Count(s, "{") - strings.Count(s, "}")
	}
	n := 0
	inQ := false
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '"':
			inQ = !inQ
		case '{':
			if !inQ {
				n++
			}
		case '}':
			if !inQ {
				n--
			}
		}
	}
	return n
}

// continuation joins the following lines to line until its braces balance.
func (p *textParser) continuation(line string, handle *int, bal int) (string, *int) {
	// joined into the parser's text block: appends past its capacity move
	// it, and the strings handed out keep the old array
	tb := &p.joined
	tb.room(len(line) + 4<<10)
	from := len(tb.b)
	b := tb.b // a local: each store of tb.b is a write barrier
	b = append(b, line...)
	for n := 0; bal > 0 && n < maxContinuation; n++ {
		raw, ok := p.lr.next()
		if !ok {
			p.cutShort = true
			break
		}
		next, h := p.preprocess(raw)
		if h != nil {
			handle = h
		}
		if next == "" {
			continue
		}
		b = append(b, ' ')
		b = append(b, next...)
		bal += braceBalance(next)
	}
	tb.b = b
	if bal > 0 && !p.cutShort {
		p.skipStatement(bal)
	}
	return tb.since(from), handle
}

// skipStatement drops the rest of a statement longer than maxContinuation
// lines, up to where its braces balance, with one warning: read as
// statements of their own, its lines gave one warning each (1.5 million
// for a set of 10 million elements, four a line).
func (p *textParser) skipStatement(bal int) {
	from := p.lr.line + 1
	for bal > 0 {
		raw, ok := p.lr.next()
		if !ok {
			p.cutShort = true
			break
		}
		next, _ := p.preprocess(raw)
		bal += braceBalance(next)
	}
	p.b.warn("line %d: a statement goes on for more than %d lines: lines %d to %d are not read", from-maxContinuation-1, maxContinuation, from, p.lr.line)
}

// opensBlock reports whether line opens a table/chain/set/map/object block
// in the current state.
func (p *textParser) opensBlock(line string) bool {
	if !strings.HasSuffix(line, "{") {
		return false
	}
	switch p.state {
	case stateTop, stateInTable:
		return true
	}
	return false
}

func (p *textParser) statement(line string, handle *int) {
	switch p.state {
	case stateTop:
		p.top(line, handle)
	case stateInTable:
		p.inTable(line, handle)
	case stateInChain:
		p.inChain(line, handle)
	case stateInSet:
		p.inSet(line)
	case stateInSkip:
		p.skipDepth += braceBalance(line)
		if p.skipDepth <= 0 {
			p.state = p.skipFrom
		}
	}
}

var families = map[string]bool{"ip": true, "ip6": true, "inet": true, "arp": true, "bridge": true, "netdev": true}

func (p *textParser) top(line string, handle *int) {
	toks := tokenize(line)
	if len(toks) >= 3 && toks[0] == "table" {
		family, name := "ip", ""
		rest := toks[1:]
		if families[rest[0]] && len(rest) >= 2 && rest[1] != "{" {
			family, name = rest[0], unquote(rest[1])
			rest = rest[2:]
		} else {
			name = unquote(rest[0])
			rest = rest[1:]
		}
		if len(rest) == 0 || rest[0] != "{" || name == "" {
			p.b.warn("line %d: unexpected table line %q", p.lr.line, trimForWarning(line))
			return
		}
		t := p.b.table(knftables.Family(family), name)
		if handle != nil {
			t.Handle = handle
		}
		p.table = t
		p.state = stateInTable
		if len(rest) > 1 && rest[len(rest)-1] == "}" {
			p.state = stateTop
		}
		return
	}
	if strings.HasPrefix(line, "}") {
		p.b.warn("line %d: unbalanced '}'", p.lr.line)
		return
	}
	p.b.warn("line %d: not nft list output: %q", p.lr.line, trimForWarning(line))
	if braceBalance(line) > 0 {
		p.skip(stateTop, braceBalance(line))
	}
}

func trimForWarning(s string) string {
	if len(s) > 120 {
		return s[:117] + "..."
	}
	return s
}

func (p *textParser) skip(from textState, depth int) {
	p.skipFrom = from
	p.skipDepth = depth
	p.state = stateInSkip
}

func (p *textParser) inTable(line string, handle *int) {
	t := p.table
	if line == "}" || strings.HasPrefix(line, "}") {
		p.state = stateTop
		p.table = nil
		return
	}
	if name, ok := plainChainLine(line); ok {
		p.openChain(t, name, handle, false)
		return
	}
	toks := tokenize(line)
	switch toks[0] {
	case "chain":
		if len(toks) >= 3 && toks[2] == "{" {
			p.openChain(t, unquote(toks[1]), handle, toks[len(toks)-1] == "}" && len(toks) > 3)
			return
		}
	case "set", "map":
		if len(toks) >= 3 && toks[2] == "{" {
			sb := &setBlock{isMap: toks[0] == "map"}
			name := unquote(toks[1])
			if sb.isMap {
				sb.mp = knftables.Map{Family: t.Family, Table: t.Name, Name: name, Handle: handle}
			} else {
				sb.set = knftables.Set{Family: t.Family, Table: t.Name, Name: name, Handle: handle}
			}
			p.set = sb
			p.state = stateInSet
			return
		}
	case "comment":
		if len(toks) == 2 {
			c := unquote(toks[1])
			t.Comment = &c
			return
		}
	case "flags":
		for _, f := range strings.Split(strings.TrimSpace(strings.TrimPrefix(line, "flags")), ",") {
			if f = strings.TrimSpace(f); f != "" {
				t.Flags = append(t.Flags, knftables.TableFlag(f))
			}
		}
		return
	}
	if bal := braceBalance(line); bal > 0 {
		// counter, quota, limit, flowtable, ct helper/timeout/expectation,
		// secmark, synproxy …: objects the model has no place for.
		p.skip(stateInTable, bal)
		return
	}
	p.b.warn("line %d: unexpected line in table %s %s: %q", p.lr.line, t.Family, t.Name, trimForWarning(line))
}

// plainChainLine returns the name in `chain NAME {` when NAME is one
// plain token (what tokenize would find, without tokenizing).
func plainChainLine(line string) (string, bool) {
	name, ok := strings.CutPrefix(line, "chain ")
	if !ok {
		return "", false
	}
	if name, ok = strings.CutSuffix(name, " {"); !ok || name == "" || name[len(name)-1] == ',' {
		return "", false
	}
	for i := 0; i < len(name); i++ {
		switch name[i] {
		case ' ', '\t', '\n', '\r', '{', '}', '"':
			return "", false
		}
	}
	return name, true
}

// openChain starts chain name of t (closed at once for `chain x { … }` on
// one line).
func (p *textParser) openChain(t *inspect.NFTTable, name string, handle *int, closed bool) {
	n := len(t.Chains)
	c := p.b.chain(t, name)
	p.chainRules = 0
	if len(t.Chains) == n {
		p.chainRules = p.b.raw.count(c) // listed again
	}
	if handle != nil {
		c.Handle = handle
	}
	p.chain = c
	p.state = stateInChain
	if closed {
		p.state = stateInTable
		p.chain = nil
	}
}

func (p *textParser) inChain(line string, handle *int) {
	c := p.chain
	if line == "}" {
		p.state = stateInTable
		p.chain = nil
		return
	}
	if p.chainRules == 0 && (strings.HasPrefix(line, "type ") || strings.HasPrefix(line, "comment ") ||
		strings.HasPrefix(line, "policy ") || strings.HasPrefix(line, "devices ")) {
		toks := tokenize(line)
		if toks[0] == "type" && containsToken(toks, "hook") {
			p.baseChain(c, line)
			return
		}
		if toks[0] == "comment" && len(toks) == 2 {
			s := unquote(toks[1])
			c.Comment = &s
			return
		}
		if toks[0] == "policy" || toks[0] == "devices" {
			p.baseChain(c, line)
			return
		}
	}
	p.b.addRule(c, line, nil, true, handle, p.lr.line)
	p.chainRules++
}

func containsToken(toks []string, s string) bool {
	for _, t := range toks {
		if t == s {
			return true
		}
	}
	return false
}

// baseChain reads `type filter hook prerouting [device "x"] priority dstnat - 10; policy accept;`.
func (p *textParser) baseChain(c *inspect.NFTChain, line string) {
	line = strings.ReplaceAll(line, ";", " ; ")
	toks := tokenize(line)
	for i := 0; i < len(toks); i++ {
		switch toks[i] {
		case "type":
			if i+1 < len(toks) {
				v := knftables.BaseChainType(toks[i+1])
				c.Type = &v
				i++
			}
		case "hook":
			if i+1 < len(toks) {
				v := knftables.BaseChainHook(toks[i+1])
				c.Hook = &v
				i++
			}
		case "device":
			if i+1 < len(toks) {
				v := unquote(toks[i+1])
				c.Device = &v
				i++
			}
		case "priority":
			j := i + 1
			var parts []string
			for ; j < len(toks) && toks[j] != ";" && toks[j] != "policy"; j++ {
				parts = append(parts, toks[j])
			}
			pr := basePriority(c.Family, strings.Join(parts, " "))
			c.Priority = &pr
			i = j - 1
		case "policy":
			if i+1 < len(toks) && toks[i+1] != ";" {
				v := knftables.BaseChainPolicy(toks[i+1])
				c.Policy = &v
				i++
			}
		}
	}
}

// basePriority normalises a chain priority to a number when it can
// (`dstnat - 10`, `dstnat-10` and -110 all give "-110"), else returns it
// with white space removed.
func basePriority(family knftables.Family, s string) knftables.BaseChainPriority {
	compact := strings.Join(strings.Fields(s), "")
	if n, err := knftables.ParsePriority(family, compact); err == nil {
		return knftables.BaseChainPriority(strconv.Itoa(n))
	}
	return knftables.BaseChainPriority(compact)
}

func (p *textParser) inSet(line string) {
	sb := p.set
	if line == "}" {
		p.finishSet()
		p.state = stateInTable
		return
	}
	key, rest, _ := strings.Cut(line, " ")
	rest = strings.TrimSpace(rest)
	switch key {
	case "type":
		t := strings.Join(strings.Fields(rest), " ")
		if sb.isMap {
			sb.mp.Type = t
		} else {
			sb.set.Type = t
		}
	case "typeof":
		t := strings.Join(strings.Fields(rest), " ")
		if sb.isMap {
			sb.mp.TypeOf = t
		} else {
			sb.set.TypeOf = t
		}
	case "flags":
		var flags []knftables.SetFlag
		for _, f := range strings.Split(rest, ",") {
			if f = strings.TrimSpace(f); f != "" {
				flags = append(flags, knftables.SetFlag(f))
			}
		}
		if sb.isMap {
			sb.mp.Flags = flags
		} else {
			sb.set.Flags = flags
		}
	case "timeout", "gc-interval":
		d, ok := parseNFTDuration(rest)
		if !ok {
			p.b.warn("line %d: bad %s %q", p.lr.line, key, rest)
			return
		}
		switch {
		case key == "timeout" && sb.isMap:
			sb.mp.Timeout = &d
		case key == "timeout":
			sb.set.Timeout = &d
		case sb.isMap:
			sb.mp.GCInterval = &d
		default:
			sb.set.GCInterval = &d
		}
	case "size":
		if n, err := strconv.ParseUint(rest, 10, 64); err == nil {
			if sb.isMap {
				sb.mp.Size = &n
			} else {
				sb.set.Size = &n
			}
		}
	case "policy":
		pol := knftables.SetPolicy(rest)
		if sb.isMap {
			sb.mp.Policy = &pol
		} else {
			sb.set.Policy = &pol
		}
	case "auto-merge":
		if !sb.isMap {
			t := true
			sb.set.AutoMerge = &t
		}
	case "comment":
		c := unquote(rest)
		if sb.isMap {
			sb.mp.Comment = &c
		} else {
			sb.set.Comment = &c
		}
	case "elements":
		p.elements(line)
	case "counter", "quota":
		// per-element counters are not modelled
	default:
		p.b.warn("line %d: unexpected line in set/map: %q", p.lr.line, trimForWarning(line))
	}
}

// elements reads `elements = { a, b . c comment "x" : goto y, … }`.
func (p *textParser) elements(line string) {
	open := strings.IndexByte(line, '{')
	if open < 0 {
		p.b.warn("line %d: elements without '{'", p.lr.line)
		return
	}
	body := line[open+1:]
	if i := strings.LastIndexByte(body, '}'); i >= 0 {
		body = body[:i]
	}
	sb := p.set
	// No more parts than the set has room for (and one to tell it is full).
	room := min(MaxSetElements-len(sb.elems), p.b.elementRoom())
	p.parts = appendSplitTop(p.parts[:0], body, ',', room+1)
	kept := 0
	for _, part := range p.parts {
		if strings.TrimSpace(part) == "" {
			continue
		}
		if kept >= room {
			p.setFull(sb)
			break
		}
		e := p.es.parse(part)
		if len(e.Key) == 0 {
			continue
		}
		if sb.isMap {
			e.Family, e.Table, e.Map = sb.mp.Family, sb.mp.Table, sb.mp.Name
		} else {
			e.Family, e.Table, e.Set = sb.set.Family, sb.set.Table, sb.set.Name
			e.Value = nil
		}
		sb.elems = append(sb.elems, e)
		kept++
	}
	p.b.keepElements(kept)
}

// setFull warns, once per set, that the rest of its elements are not
// read: the set's cap, or the ruleset's, is met.
func (p *textParser) setFull(sb *setBlock) {
	if sb.full {
		return
	}
	sb.full = true
	name, family, table := sb.set.Name, sb.set.Family, sb.set.Table
	if sb.isMap {
		name, family, table = sb.mp.Name, sb.mp.Family, sb.mp.Table
	}
	where := fmt.Sprintf("line %d", p.lr.line)
	if len(sb.elems) >= MaxSetElements {
		p.b.setFullWarning(where, family, table, name)
		return
	}
	p.b.rulesetFullWarning(where, family, table, name)
}

// appendSplitTop appends to out the parts of s split on sep outside double
// quotes, braces and brackets: at most n parts (the rest is dropped).
func appendSplitTop(out []string, s string, sep byte, n int) []string {
	depth := 0
	inQ := false
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"':
			inQ = !inQ
		case inQ:
		case c == '{' || c == '[' || c == '(':
			depth++
		case c == '}' || c == ']' || c == ')':
			if depth > 0 {
				depth--
			}
		case c == sep && depth == 0:
			if out = append(out, s[start:i]); len(out) >= n {
				return out
			}
			start = i + 1
		}
	}
	return append(out, s[start:])
}

// parseElementText parses one element of an `elements = { … }` list:
// `KEY [timeout T] [expires T] [counter packets N bytes M] [comment "C"] [: VALUE]`.
func parseElementText(s string) *knftables.Element {
	return new(elementScratch).parse(s)
}

// elementScratch is what a reader reuses from one set element to the next:
// token lists, and blocks the elements, their keys and values are carved
// from.
type elementScratch struct {
	toks, key, val []string
	spans          []token  // of toks
	parts          []string // of a key or value being split
	strs           []string // block of keys and values
	elems          blockOf[knftables.Element]
	text           textBlock // of values of several tokens
}

func (es *elementScratch) parse(s string) *knftables.Element {
	e := es.elems.next()
	es.toks = appendTokens(es.toks[:0], s, &es.spans)
	toks := es.toks
	key, val := es.key[:0], es.val[:0]
	inVal := false
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		if !inVal {
			switch t {
			case ":":
				inVal = true
				continue
			case "timeout", "expires":
				i++
				continue
			case "counter":
				if i+4 < len(toks) && toks[i+1] == "packets" && toks[i+3] == "bytes" {
					i += 4
				}
				continue
			case "comment":
				if i+1 < len(toks) {
					c := unquote(toks[i+1])
					e.Comment = &c
					i++
				}
				continue
			}
			key = append(key, t)
		} else {
			val = append(val, t)
		}
	}
	es.key, es.val = key, val
	e.Key = es.splitConcat(key)
	if inVal {
		e.Value = es.splitConcat(val)
	}
	return e
}

// splitConcat groups tokens separated by "." tokens:
// [a . b . c] → ["a", "b", "c"], [goto x] → ["goto x"].
func (es *elementScratch) splitConcat(toks []string) []string {
	if len(toks) == 0 {
		return nil
	}
	out := es.parts[:0]
	start := 0
	for i, t := range toks {
		if t == "." {
			out = append(out, unquote(es.text.join(toks[start:i])))
			start = i + 1
		}
	}
	out = append(out, unquote(es.text.join(toks[start:])))
	es.parts = out
	return keepStrings(&es.strs, out)
}

func (p *textParser) finishSet() {
	sb := p.set
	p.set = nil
	if sb == nil || p.table == nil {
		return
	}
	if sb.isMap {
		p.table.AddMap(&inspect.NFTMap{Map: sb.mp, Elements: sb.elems})
	} else {
		p.table.AddSet(&inspect.NFTSet{Set: sb.set, Elements: sb.elems})
	}
}

func (p *textParser) closeAll() {
	if p.state == stateInSet {
		p.finishSet()
	}
	p.state = stateTop
	p.table = nil
	p.chain = nil
}

// parseNFTDuration parses nft time values: "3h", "10800s", "1d2h3m4s5ms",
// or a bare number of seconds.
func parseNFTDuration(s string) (time.Duration, bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, false
	}
	if n, err := strconv.ParseUint(s, 10, 32); err == nil {
		return time.Duration(n) * time.Second, true
	}
	var total time.Duration
	for s != "" {
		i := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == 0 || i > 12 {
			return 0, false
		}
		n, _ := strconv.ParseInt(s[:i], 10, 64)
		s = s[i:]
		j := 0
		for j < len(s) && (s[j] < '0' || s[j] > '9') {
			j++
		}
		unit := s[:j]
		s = s[j:]
		var u time.Duration
		switch unit {
		case "d":
			u = 24 * time.Hour
		case "h":
			u = time.Hour
		case "m":
			u = time.Minute
		case "s":
			u = time.Second
		case "ms":
			u = time.Millisecond
		default:
			return 0, false
		}
		total += time.Duration(n) * u
	}
	return total, true
}
