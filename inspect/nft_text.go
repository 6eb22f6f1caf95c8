package inspect

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/knftables"
)

// This file reads `nft list ruleset` / `nft list table …` text and holds the
// builder the three nftables readers share.

// nftMaxWarnings bounds the warnings one nftables input records.
const nftMaxWarnings = 50

type nftTableKey struct {
	family knftables.Family
	name   string
}

// nftBuilder collects the tables of one nftables input.
type nftBuilder struct {
	dump      Dump
	tables    []*NFTTable
	byKey     map[nftTableKey]*NFTTable
	iptWarned map[nftTableKey]bool
	nwarn     int
	// noIPTables keeps every table an NFTTable (knftables dumps are never
	// iptables-nft's).
	noIPTables bool
	// raw holds the rules read so far, per chain; finish turns them into
	// NFTRules or IPRules.
	raw      map[*NFTChain][]nftRawRule
	curChain *NFTChain
	curRules []nftRawRule
	toks     []string // token buffer reused by materialize
}

func newNFTBuilder(source string, format Format) *nftBuilder {
	return &nftBuilder{
		dump:      Dump{Source: source, Format: format},
		byKey:     map[nftTableKey]*NFTTable{},
		iptWarned: map[nftTableKey]bool{},
	}
}

func (b *nftBuilder) warn(format string, args ...any) {
	b.nwarn++
	switch {
	case b.nwarn <= nftMaxWarnings:
		b.dump.Warnings = append(b.dump.Warnings, fmt.Sprintf(format, args...))
	case b.nwarn == nftMaxWarnings+1:
		b.dump.Warnings = append(b.dump.Warnings, "further warnings suppressed")
	}
}

// table returns the table with that family and name, adding it when missing.
func (b *nftBuilder) table(family knftables.Family, name string) *NFTTable {
	k := nftTableKey{family, name}
	if t := b.byKey[k]; t != nil {
		return t
	}
	t := NewNFTTable(family, name)
	t.Source = b.dump.Source
	t.Format = b.dump.Format
	b.byKey[k] = t
	b.tables = append(b.tables, t)
	return t
}

// chain returns the named chain of t, adding it when missing.
func (b *nftBuilder) chain(t *NFTTable, name string) *NFTChain {
	return t.EnsureChain(name)
}

// nftRawRule is a rule as read, before it becomes an NFTRule (or, in an
// iptables-nft table, an IPRule).
type nftRawRule struct {
	text    string
	comment *string
	handle  *int
	line    int
}

// addRule records a rule of chain c; with split, a trailing `comment "…"`
// is taken off the text into the comment.
func (b *nftBuilder) addRule(c *NFTChain, text string, comment *string, split bool, handle *int, line int) {
	text = nftNormalizeRule(text)
	if split {
		text, comment = nftSplitComment(text)
	}
	if b.raw == nil {
		b.raw = map[*NFTChain][]nftRawRule{}
	}
	// rules of one chain come one after the other: keep the current
	// chain's list at hand and store it in the map when the chain changes
	if c != b.curChain {
		b.flushCur()
		b.curChain, b.curRules = c, b.raw[c]
	}
	b.curRules = append(b.curRules, nftRawRule{text: text, comment: comment, handle: handle, line: line})
}

func (b *nftBuilder) flushCur() {
	if b.curChain != nil {
		b.raw[b.curChain] = b.curRules
		b.curChain, b.curRules = nil, nil
	}
}

// rulesOf returns the rules recorded for c so far.
func (b *nftBuilder) rulesOf(c *NFTChain) []nftRawRule {
	if c == b.curChain {
		return b.curRules
	}
	return b.raw[c]
}

// materialize turns the rules recorded for t into NFTRules with their Info.
func (b *nftBuilder) materialize(t *NFTTable) {
	for _, c := range t.Chains {
		raw := b.raw[c]
		if len(raw) == 0 {
			continue
		}
		rules := make([]NFTRule, len(raw))
		ptrs := make([]*NFTRule, len(raw))
		for i, rr := range raw {
			r := &rules[i]
			r.Rule = knftables.Rule{Family: t.Family, Table: t.Name, Chain: c.Name, Rule: rr.text, Comment: rr.comment, Handle: rr.handle}
			r.Line = rr.line
			b.toks = nftAnalyze(&r.Info, rr.text, b.toks)
			ptrs[i] = r
		}
		c.Rules = append(c.Rules, ptrs...)
		delete(b.raw, c)
	}
}

// finish converts iptables-nft tables and returns the result.
func (b *nftBuilder) finish() *Ruleset {
	if b.raw != nil {
		b.flushCur()
	}
	rs := &Ruleset{}
	d := b.dump
	for _, t := range b.tables {
		k := nftTableKey{t.Family, t.Name}
		if !b.noIPTables && nftIsIPTablesNFT(t, b.raw, b.iptWarned[k]) {
			it := nftToIPTable(t, b.raw)
			rs.IPTables = append(rs.IPTables, it)
			d.Backend = BackendNFT
			d.Rules += it.RuleCount()
			if b.dump.Format == FormatNFTJSON && nftHasXT(t, b.raw) {
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
	rs.Dumps = []Dump{d}
	return rs
}

// nftLineReader yields the lines of r (without "\n" or "\r\n") as
// substrings of one string per block of about 1 MB of input, so that the
// rule text the parsers keep costs no copy per line.
type nftLineReader struct {
	r     io.Reader
	buf   []byte
	block string // the current block: complete lines only
	pos   int
	line  int
	eof   bool
	err   error
}

const nftBlockSize = 1 << 20

func newNFTLineReader(r io.Reader) *nftLineReader {
	return &nftLineReader{r: r}
}

var errNFTBinary = errBinary

// next returns the next line; ok is false at the end of the input or on a
// read error (then lr.err is set).
func (lr *nftLineReader) next() (string, bool) {
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
func (lr *nftLineReader) fill() {
	for {
		start := len(lr.buf)
		if cap(lr.buf)-start < nftBlockSize/2 {
			nb := make([]byte, start, 2*start+nftBlockSize)
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
		if i := bytes.LastIndexByte(lr.buf, '\n'); i >= 0 && len(lr.buf) >= nftBlockSize/2 {
			lr.block, lr.pos = string(lr.buf[:i+1]), 0
			rest := copy(lr.buf, lr.buf[i+1:])
			lr.buf = lr.buf[:rest]
			return
		}
	}
}

func (lr *nftLineReader) failure() error {
	if lr.err == nil {
		return nil
	}
	return fmt.Errorf("line %d: %w", lr.line+1, lr.err)
}

// ParseNFTText reads `nft list ruleset` / `nft list table …` text (also with
// -a handles, -n numeric output, and the `# Warning: table ip nat is managed
// by iptables-nft` lines nft prints). Every table becomes an NFTTable, except
// the tables of an iptables-nft node, which become IPTables (see
// nft_xtables.go). Unexpected lines are skipped with a warning; a read error
// or binary input returns what was read so far together with the error.
func ParseNFTText(r io.Reader, source string) (*Ruleset, error) {
	p := &nftTextParser{b: newNFTBuilder(source, FormatNFTText), lr: newNFTLineReader(r)}
	p.parse()
	rs := p.b.finish()
	return rs, p.lr.failure()
}

type nftTextState int

const (
	nftTop nftTextState = iota
	nftInTable
	nftInChain
	nftInSet
	nftInSkip
)

type nftTextParser struct {
	b  *nftBuilder
	lr *nftLineReader

	state nftTextState
	table *NFTTable
	chain *NFTChain
	set   *nftSetBlock
	// skipDepth counts open braces of an object the parser does not model
	// (counter, quota, flowtable, ct helper …).
	skipDepth int
	skipFrom  nftTextState
}

// nftSetBlock is a set or map being read.
type nftSetBlock struct {
	isMap bool
	set   knftables.Set
	mp    knftables.Map
	elems []*knftables.Element
}

// nftMaxContinuation bounds how many lines one statement (a rule or an
// elements list with an unclosed '{') may span.
const nftMaxContinuation = 1 << 20

var iptNFTWarning = "# Warning: table "

func (p *nftTextParser) parse() {
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
		if bal := nftBraceBalance(line); bal > 0 && p.state != nftInSkip && !p.opensBlock(line) {
			line, handle = p.continuation(line, handle, bal)
		}
		p.statement(line, handle)
	}
	if p.state != nftTop {
		p.b.warn("input ends inside a block (truncated?)")
		p.closeAll()
	}
}

// preprocess strips a line's `# …` comment (keeping a `# handle N`) and the
// iptables-nft warning nft prints to stderr, which can be glued to any line.
func (p *nftTextParser) preprocess(raw string) (string, *int) {
	if i := strings.Index(raw, iptNFTWarning); i >= 0 {
		p.iptWarning(raw[i:])
		raw = raw[:i]
	}
	var handle *int
	if i := nftCommentStart(raw); i >= 0 {
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
func (p *nftTextParser) iptWarning(s string) {
	f := strings.Fields(strings.TrimPrefix(s, iptNFTWarning))
	if len(f) >= 6 && f[2] == "is" && f[3] == "managed" && f[4] == "by" && strings.HasPrefix(f[5], "iptables-nft") {
		p.b.iptWarned[nftTableKey{knftables.Family(f[0]), f[1]}] = true
	}
}

// nftCommentStart returns the index of a '#' that starts a comment (outside
// double quotes), or -1.
func nftCommentStart(s string) int {
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

// nftBraceBalance counts '{' minus '}' outside double quotes.
func nftBraceBalance(s string) int {
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
func (p *nftTextParser) continuation(line string, handle *int, bal int) (string, *int) {
	var sb strings.Builder
	sb.WriteString(line)
	for n := 0; bal > 0 && n < nftMaxContinuation; n++ {
		raw, ok := p.lr.next()
		if !ok {
			break
		}
		next, h := p.preprocess(raw)
		if h != nil {
			handle = h
		}
		if next == "" {
			continue
		}
		sb.WriteByte(' ')
		sb.WriteString(next)
		bal += nftBraceBalance(next)
	}
	return sb.String(), handle
}

// opensBlock reports whether line opens a table/chain/set/map/object block
// in the current state.
func (p *nftTextParser) opensBlock(line string) bool {
	if !strings.HasSuffix(line, "{") {
		return false
	}
	switch p.state {
	case nftTop, nftInTable:
		return true
	}
	return false
}

func (p *nftTextParser) statement(line string, handle *int) {
	switch p.state {
	case nftTop:
		p.top(line, handle)
	case nftInTable:
		p.inTable(line, handle)
	case nftInChain:
		p.inChain(line, handle)
	case nftInSet:
		p.inSet(line)
	case nftInSkip:
		p.skipDepth += nftBraceBalance(line)
		if p.skipDepth <= 0 {
			p.state = p.skipFrom
		}
	}
}

var nftFamilies = map[string]bool{"ip": true, "ip6": true, "inet": true, "arp": true, "bridge": true, "netdev": true}

func (p *nftTextParser) top(line string, handle *int) {
	toks := nftTokens(line)
	if len(toks) >= 3 && toks[0] == "table" {
		family, name := "ip", ""
		rest := toks[1:]
		if nftFamilies[rest[0]] && len(rest) >= 2 && rest[1] != "{" {
			family, name = rest[0], nftUnquote(rest[1])
			rest = rest[2:]
		} else {
			name = nftUnquote(rest[0])
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
		p.state = nftInTable
		if len(rest) > 1 && rest[len(rest)-1] == "}" {
			p.state = nftTop
		}
		return
	}
	if strings.HasPrefix(line, "}") {
		p.b.warn("line %d: unbalanced '}'", p.lr.line)
		return
	}
	p.b.warn("line %d: not nft list output: %q", p.lr.line, trimForWarning(line))
	if nftBraceBalance(line) > 0 {
		p.skip(nftTop, nftBraceBalance(line))
	}
}

func trimForWarning(s string) string {
	if len(s) > 120 {
		return s[:117] + "..."
	}
	return s
}

func (p *nftTextParser) skip(from nftTextState, depth int) {
	p.skipFrom = from
	p.skipDepth = depth
	p.state = nftInSkip
}

func (p *nftTextParser) inTable(line string, handle *int) {
	t := p.table
	if line == "}" || strings.HasPrefix(line, "}") {
		p.state = nftTop
		p.table = nil
		return
	}
	toks := nftTokens(line)
	switch toks[0] {
	case "chain":
		if len(toks) >= 3 && toks[2] == "{" {
			c := p.b.chain(t, nftUnquote(toks[1]))
			if handle != nil {
				c.Handle = handle
			}
			p.chain = c
			p.state = nftInChain
			if toks[len(toks)-1] == "}" && len(toks) > 3 {
				p.state = nftInTable
				p.chain = nil
			}
			return
		}
	case "set", "map":
		if len(toks) >= 3 && toks[2] == "{" {
			sb := &nftSetBlock{isMap: toks[0] == "map"}
			name := nftUnquote(toks[1])
			if sb.isMap {
				sb.mp = knftables.Map{Family: t.Family, Table: t.Name, Name: name, Handle: handle}
			} else {
				sb.set = knftables.Set{Family: t.Family, Table: t.Name, Name: name, Handle: handle}
			}
			p.set = sb
			p.state = nftInSet
			return
		}
	case "comment":
		if len(toks) == 2 {
			c := nftUnquote(toks[1])
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
	if bal := nftBraceBalance(line); bal > 0 {
		// counter, quota, limit, flowtable, ct helper/timeout/expectation,
		// secmark, synproxy …: objects the model has no place for.
		p.skip(nftInTable, bal)
		return
	}
	p.b.warn("line %d: unexpected line in table %s %s: %q", p.lr.line, t.Family, t.Name, trimForWarning(line))
}

func (p *nftTextParser) inChain(line string, handle *int) {
	c := p.chain
	if line == "}" {
		p.state = nftInTable
		p.chain = nil
		return
	}
	if len(p.b.rulesOf(c)) == 0 && (strings.HasPrefix(line, "type ") || strings.HasPrefix(line, "comment ") ||
		strings.HasPrefix(line, "policy ") || strings.HasPrefix(line, "devices ")) {
		toks := nftTokens(line)
		if toks[0] == "type" && nftContains(toks, "hook") {
			p.baseChain(c, line)
			return
		}
		if toks[0] == "comment" && len(toks) == 2 {
			s := nftUnquote(toks[1])
			c.Comment = &s
			return
		}
		if toks[0] == "policy" || toks[0] == "devices" {
			p.baseChain(c, line)
			return
		}
	}
	p.b.addRule(c, line, nil, true, handle, p.lr.line)
}

func nftContains(toks []string, s string) bool {
	for _, t := range toks {
		if t == s {
			return true
		}
	}
	return false
}

// baseChain reads `type filter hook prerouting [device "x"] priority dstnat - 10; policy accept;`.
func (p *nftTextParser) baseChain(c *NFTChain, line string) {
	line = strings.ReplaceAll(line, ";", " ; ")
	toks := nftTokens(line)
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
				v := nftUnquote(toks[i+1])
				c.Device = &v
				i++
			}
		case "priority":
			j := i + 1
			var parts []string
			for ; j < len(toks) && toks[j] != ";" && toks[j] != "policy"; j++ {
				parts = append(parts, toks[j])
			}
			pr := nftPriority(c.Family, strings.Join(parts, " "))
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

// nftPriority normalises a chain priority to a number when it can
// (`dstnat - 10`, `dstnat-10` and -110 all give "-110"), else returns it
// with white space removed.
func nftPriority(family knftables.Family, s string) knftables.BaseChainPriority {
	compact := strings.Join(strings.Fields(s), "")
	if n, err := knftables.ParsePriority(family, compact); err == nil {
		return knftables.BaseChainPriority(strconv.Itoa(n))
	}
	return knftables.BaseChainPriority(compact)
}

func (p *nftTextParser) inSet(line string) {
	sb := p.set
	if line == "}" {
		p.finishSet()
		p.state = nftInTable
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
		c := nftUnquote(rest)
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
func (p *nftTextParser) elements(line string) {
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
	for _, part := range nftSplitTop(body, ',') {
		if strings.TrimSpace(part) == "" {
			continue
		}
		e := nftParseElementText(part)
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
	}
}

// nftSplitTop splits s on sep outside double quotes, braces and brackets.
func nftSplitTop(s string, sep byte) []string {
	var out []string
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
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

// nftParseElementText parses one element of an `elements = { … }` list:
// `KEY [timeout T] [expires T] [counter packets N bytes M] [comment "C"] [: VALUE]`.
func nftParseElementText(s string) *knftables.Element {
	e := &knftables.Element{}
	toks := nftTokens(s)
	var key, val []string
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
					c := nftUnquote(toks[i+1])
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
	e.Key = nftSplitConcat(key)
	if inVal {
		e.Value = nftSplitConcat(val)
	}
	return e
}

// nftSplitConcat groups tokens separated by "." tokens:
// [a . b . c] → ["a", "b", "c"], [goto x] → ["goto x"].
func nftSplitConcat(toks []string) []string {
	if len(toks) == 0 {
		return nil
	}
	var out []string
	start := 0
	for i, t := range toks {
		if t == "." {
			out = append(out, nftUnquote(strings.Join(toks[start:i], " ")))
			start = i + 1
		}
	}
	return append(out, nftUnquote(strings.Join(toks[start:], " ")))
}

func (p *nftTextParser) finishSet() {
	sb := p.set
	p.set = nil
	if sb == nil || p.table == nil {
		return
	}
	if sb.isMap {
		p.table.AddMap(&NFTMap{Map: sb.mp, Elements: sb.elems})
	} else {
		p.table.AddSet(&NFTSet{Set: sb.set, Elements: sb.elems})
	}
}

func (p *nftTextParser) closeAll() {
	if p.state == nftInSet {
		p.finishSet()
	}
	p.state = nftTop
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
