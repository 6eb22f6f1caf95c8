package nft

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"sigs.k8s.io/knftables"

	"github.com/proxyrules/kubectl-proxyrules/inspect"
)

// This file reads knftables' transaction syntax (`add table|chain|set|map|
// rule|element …`), as knftables.Fake.Dump() prints it and kube-proxy logs
// its transactions, through knftables.Fake.ParseDump.

// dumpPhase orders the lines of one table so that objects exist before the
// rules and elements that refer to them (knftables' Fake checks references).
const (
	dumpPhaseTable = iota
	dumpPhaseObject
	dumpPhaseRule
	dumpPhaseElement
	dumpPhases
)

type dumpLine struct {
	n    int
	text string
	// special is set for lines knftables' ParseDump cannot read (a rule or
	// element whose body holds a double quote outside its comment, such as
	// kube-proxy's `counter name "…" reject`); they are added as objects.
	special knftables.Object
}

type dumpGroup struct {
	family     knftables.Family
	table      string
	hasTable   bool
	lines      [dumpPhases][]dumpLine
	chainOrder []string
	setOrder   []string
	ruleLines  map[string][]int
	seen       map[string]bool
	elements   map[string]int // element lines of each set and map read
}

// ParseKnftablesDump reads knftables' `add …` syntax (what
// knftables.Fake.Dump() prints and what kube-proxy logs as its
// transactions). Each (family, table) is detected from its `add table` line
// and loaded into its own knftables.Fake with Fake.ParseDump. Lines that are
// not `add …` (flush, delete, # comments) are skipped with a warning, and so
// are lines knftables rejects. Rule text stays in kube-proxy's source
// spelling; analyzeRule understands it.
func ParseKnftablesDump(r io.Reader, source string) (*inspect.Ruleset, error) {
	b := newNFTBuilder(source, inspect.FormatKnftablesDump)
	b.noIPTables = true
	return b.knftablesDump(r)
}

// knftablesDump reads a knftables dump into b.
func (b *builder) knftablesDump(r io.Reader) (*inspect.Ruleset, error) {
	lr := newNFTLineReader(r)
	groups := map[tableKey]*dumpGroup{}
	var order []tableKey
	skipped := map[string]int{}
	firstSkipped := map[string]int{}
	var skippedOrder []string
	skip := func(kind string, n int) {
		if skipped[kind] == 0 {
			firstSkipped[kind] = n
			skippedOrder = append(skippedOrder, kind)
		}
		skipped[kind]++
	}
	for {
		raw, ok := lr.next()
		if !ok {
			break
		}
		line := strings.TrimSpace(raw)
		if line == "" {
			continue
		}
		if line[0] == '#' {
			skip("# comment", lr.line)
			continue
		}
		verb, rest := dumpWord(line)
		if verb != "add" {
			switch verb {
			case "flush", "delete", "destroy", "create", "insert", "replace", "reset":
				skip(verb, lr.line)
			default:
				b.warn("line %d: not knftables dump syntax: %q", lr.line, trimForWarning(line))
			}
			continue
		}
		obj, rest := dumpWord(rest)
		fam, rest := dumpWord(rest)
		table, rest := dumpWord(rest)
		if !families[fam] || table == "" {
			b.warn("line %d: bad family or table in %q", lr.line, trimForWarning(line))
			continue
		}
		k := tableKey{knftables.Family(fam), table}
		g := groups[k]
		if g == nil {
			g = &dumpGroup{family: k.family, table: table, ruleLines: map[string][]int{}, seen: map[string]bool{}}
			groups[k] = g
			order = append(order, k)
		}
		l := dumpLine{n: lr.line, text: line}
		switch obj {
		case "table":
			g.hasTable = true
			g.lines[dumpPhaseTable] = append(g.lines[dumpPhaseTable], l)
		case "chain", "set", "map", "counter", "flowtable":
			name, _ := dumpWord(rest)
			if !g.seen[obj+" "+name] {
				g.seen[obj+" "+name] = true
				switch obj {
				case "chain":
					g.chainOrder = append(g.chainOrder, name)
				case "set", "map":
					g.setOrder = append(g.setOrder, name)
				}
			}
			g.lines[dumpPhaseObject] = append(g.lines[dumpPhaseObject], l)
		case "rule":
			chain, body := dumpWord(rest)
			g.ruleLines[chain] = append(g.ruleLines[chain], lr.line)
			l.special = dumpSpecialRule(chain, body)
			g.lines[dumpPhaseRule] = append(g.lines[dumpPhaseRule], l)
		case "element":
			if !b.dumpElementRoom(g, rest, lr.line) {
				continue
			}
			l.special = dumpSpecialElement(rest)
			g.lines[dumpPhaseElement] = append(g.lines[dumpPhaseElement], l)
		default:
			b.warn("line %d: unsupported object %q skipped", lr.line, obj)
		}
	}
	for _, kind := range skippedOrder {
		b.warn("skipped %d %s line(s), the first at line %d", skipped[kind], kind, firstSkipped[kind])
	}
	for _, k := range order {
		g := groups[k]
		if !g.hasTable {
			n := 0
			for _, ls := range g.lines {
				n += len(ls)
			}
			b.warn("%d line(s) for table %s %s skipped: no `add table %s %s` line", n, g.family, g.table, g.family, g.table)
			continue
		}
		b.dumpTable(g)
	}
	return b.finish(), lr.failure()
}

// dumpElementRoom counts the element line n of group g, rest its words
// after the table: false when the caps leave no room for it (it is
// dropped, with a warning). Lines are counted before knftables reads
// them, so that those past the caps cost nothing kept; an element listed
// twice counts twice.
func (b *builder) dumpElementRoom(g *dumpGroup, rest string, n int) bool {
	name, _ := dumpWord(rest)
	have := g.elements[name]
	switch {
	case have >= MaxSetElements:
		b.setFullWarning(fmt.Sprintf("line %d", n), g.family, g.table, name)
		return false
	case b.elementRoom() == 0:
		b.rulesetFullWarning(fmt.Sprintf("line %d", n), g.family, g.table, name)
		return false
	}
	if g.elements == nil {
		g.elements = map[string]int{}
	}
	g.elements[name] = have + 1
	b.keepElements(1)
	return true
}

// dumpWord cuts the first space-separated word off s.
func dumpWord(s string) (string, string) {
	s = strings.TrimLeft(s, " \t")
	i := strings.IndexAny(s, " \t")
	if i < 0 {
		return s, ""
	}
	return s[:i], strings.TrimLeft(s[i:], " \t")
}

// dumpSpecialRule returns a Rule object for a rule line ParseDump would
// misread, or nil.
func dumpSpecialRule(chain, body string) knftables.Object {
	rest := body
	var index, handle *int
	for {
		w, r := dumpWord(rest)
		if (w == "index" || w == "handle") && r != "" {
			num, r2 := dumpWord(r)
			n, ok := parseNFTUint(num)
			if !ok || n > 1<<30 {
				break
			}
			v := int(n)
			if w == "index" {
				index = &v
			} else {
				handle = &v
			}
			rest = r2
			continue
		}
		break
	}
	text, comment := splitComment(rest)
	if !strings.Contains(text, `"`) {
		return nil
	}
	return &knftables.Rule{Chain: chain, Rule: text, Comment: comment, Index: index, Handle: handle}
}

// dumpSpecialElement returns an Element object for an element line whose key
// or value holds a double quote outside the comment (ParseDump's regexp
// cannot read it), or nil.
func dumpSpecialElement(rest string) knftables.Object {
	name, body := dumpWord(rest)
	body = strings.TrimSpace(body)
	if !strings.HasPrefix(body, "{") || !strings.HasSuffix(body, "}") {
		return nil
	}
	inner := strings.TrimSpace(body[1 : len(body)-1])
	e := parseElementText(inner)
	if len(e.Key) == 0 {
		return nil
	}
	quoted := false
	for _, s := range append(append([]string{}, e.Key...), e.Value...) {
		if strings.Contains(s, `"`) {
			quoted = true
		}
	}
	// parseElementText unquotes single tokens: look at the raw text too.
	head := inner
	if i := strings.Index(inner, ` comment "`); i >= 0 {
		head = inner[:i]
		if j := strings.Index(inner[i+10:], `"`); j >= 0 {
			head += inner[i+10+j+1:]
		}
	}
	if strings.Contains(head, `"`) {
		quoted = true
	}
	if !quoted {
		return nil
	}
	if len(e.Value) > 0 {
		e.Map = name
	} else {
		e.Set = name
	}
	return e
}

// dumpTable loads one table's lines into a knftables.Fake and converts it.
func (b *builder) dumpTable(g *dumpGroup) {
	ld := dumpLoader{b: b, g: g, fake: knftables.NewFake(g.family, g.table), elems: dumpElemStore{}, touched: map[string]bool{}}
	ld.loadObjects()
	ld.loadElements()
	ld.elems.dedupe()
	ft := ld.fake.Table
	if ft == nil {
		b.warn("table %s %s: its `add table` line was rejected", g.family, g.table)
		return
	}
	t := b.table(g.family, g.table)
	t.Comment = ft.Comment
	t.Flags = ft.Flags
	b.dumpChains(t, ft, g)
	dumpSets(t, ft, g, ld.elems)
}

// dumpLoader feeds one table's lines to its knftables.Fake: the lines
// Fake.ParseDump reads are gathered and parsed together, the others
// (special) added one by one.
type dumpLoader struct {
	b       *builder
	g       *dumpGroup
	fake    *knftables.Fake
	pending []dumpLine // for ParseDump
	// the elements moved out of the Fake, and the sets and maps that
	// have elements in it
	elems   dumpElemStore
	touched map[string]bool
}

// flush parses the pending lines.
func (ld *dumpLoader) flush() {
	if len(ld.pending) > 0 {
		ld.b.dumpParse(ld.fake, ld.g, ld.pending)
		ld.pending = nil
	}
}

// add adds line l: pending, or at once (after those pending) when it is
// one ParseDump cannot read.
func (ld *dumpLoader) add(l dumpLine) {
	if l.special == nil {
		ld.pending = append(ld.pending, l)
		return
	}
	ld.flush()
	tx := ld.fake.NewTransaction()
	tx.Add(l.special)
	if err := ld.fake.Run(context.Background(), tx); err != nil {
		ld.b.warn("line %d: knftables rejected it: %v", l.n, err)
	}
}

// loadObjects adds the table, its chains, sets, maps and rules.
func (ld *dumpLoader) loadObjects() {
	for _, phase := range ld.g.lines[:dumpPhaseElement] {
		for _, l := range phase {
			ld.add(l)
		}
	}
	ld.flush()
}

// loadElements adds the elements. Fake looks an element up among all
// those of its set before adding it, which is quadratic: elements go in
// batches, and each batch is moved out of the Fake (harvest) before the
// next one.
func (ld *dumpLoader) loadElements() {
	// The lines are let go as they are read, with their blocks of input:
	// the rest moves to a smaller array each time it is half of its own.
	lines := ld.g.lines[dumpPhaseElement]
	ld.g.lines[dumpPhaseElement] = nil
	size := len(lines)
	for i := 0; len(lines) > 0; i++ {
		l := lines[0]
		lines[0] = dumpLine{}
		lines = lines[1:]
		if len(lines) >= 1024 && len(lines) <= size/2 {
			lines = slices.Clone(lines)
			size = len(lines)
		}
		_, rest := dumpWord(l.text) // add
		_, rest = dumpWord(rest)    // element
		_, rest = dumpWord(rest)    // family
		_, rest = dumpWord(rest)    // table
		name, _ := dumpWord(rest)
		ld.touched[name] = true
		ld.add(l)
		if (i+1)%dumpElemBatch == 0 {
			ld.harvest()
		}
	}
	ld.harvest()
}

// harvest moves the elements of the sets and maps touched out of the
// Fake, into ld.elems, and flushes them there.
func (ld *dumpLoader) harvest() {
	ld.flush()
	if ld.fake.Table == nil || len(ld.touched) == 0 {
		return
	}
	tx := ld.fake.NewTransaction()
	for name := range ld.touched {
		if s := ld.fake.Table.Sets[name]; s != nil {
			ld.elems.add(name, s.Elements)
			tx.Flush(&knftables.Set{Name: name})
		} else if m := ld.fake.Table.Maps[name]; m != nil {
			ld.elems.add(name, m.Elements)
			tx.Flush(&knftables.Map{Name: name})
		}
	}
	clear(ld.touched)
	if err := ld.fake.Run(context.Background(), tx); err != nil {
		ld.b.warn("table %s %s: %v", ld.g.family, ld.g.table, err)
	}
}

// dumpChains adds the chains of ft to t with their rules: in the order
// the dump listed them, then those it did not list (sorted).
func (b *builder) dumpChains(t *inspect.NFTTable, ft *knftables.FakeTable, g *dumpGroup) {
	names := g.chainOrder
	for name := range ft.Chains {
		if !g.seen["chain "+name] {
			names = append(names, name)
		}
	}
	sort.Strings(names[len(g.chainOrder):])
	for _, name := range names {
		fc := ft.Chains[name]
		if fc == nil {
			continue
		}
		c := t.EnsureChain(name)
		c.Chain = fc.Chain
		c.Family, c.Table, c.Handle = t.Family, t.Name, nil
		if c.Priority != nil {
			p := basePriority(t.Family, string(*c.Priority))
			c.Priority = &p
		}
		lines := g.ruleLines[name]
		if len(lines) != len(fc.Rules) {
			lines = nil
		}
		for i, fr := range fc.Rules {
			line := 0
			if lines != nil {
				line = lines[i]
			}
			b.addRule(c, fr.Rule, fr.Comment, false, nil, line)
		}
	}
}

// dumpSets adds the sets and maps of ft to t with their elements, in the
// order the dump listed them, then those it did not list (sorted).
func dumpSets(t *inspect.NFTTable, ft *knftables.FakeTable, g *dumpGroup, elems dumpElemStore) {
	setNames := g.setOrder
	for name := range ft.Sets {
		if !g.seen["set "+name] {
			setNames = append(setNames, name)
		}
	}
	for name := range ft.Maps {
		if !g.seen["map "+name] {
			setNames = append(setNames, name)
		}
	}
	sort.Strings(setNames[len(g.setOrder):])
	done := map[string]bool{}
	for _, name := range setNames {
		if done[name] {
			continue
		}
		done[name] = true
		if fs := ft.Sets[name]; fs != nil {
			s := &inspect.NFTSet{Set: fs.Set}
			s.Family, s.Table, s.Handle = t.Family, t.Name, nil
			s.Elements = dumpElements(elems.get(name), t)
			t.AddSet(s)
		}
		if fm := ft.Maps[name]; fm != nil {
			m := &inspect.NFTMap{Map: fm.Map}
			m.Family, m.Table, m.Handle = t.Family, t.Name, nil
			m.Elements = dumpElements(elems.get(name), t)
			t.AddMap(m)
		}
	}
}

// dumpElemBatch is how many element lines go to the Fake at a time: it
// compares each with those of its batch (reflect.DeepEqual), so a set at
// the cap of elements took 47 s in batches of 256, 17 s in batches of 32.
const dumpElemBatch = 32

// dumpElemStore collects the elements of each set and map; dedupe then
// replaces an element of the same key in place, as knftables' Fake does.
type dumpElemStore map[string]*dumpElemList

type dumpElemList struct {
	name string
	list []*knftables.Element
}

func (st dumpElemStore) add(name string, in []*knftables.Element) {
	l := st[name]
	if l == nil {
		name = strings.Clone(name) // not the input's line
		l = &dumpElemList{name: name}
		st[name] = l
	}
	for _, e := range in {
		detachElement(e, l.name)
		l.list = append(l.list, e)
	}
}

// dedupe keeps, of the elements of one key, the last at the place of the
// first. It sorts their places rather than index them by key: a map of a
// set at the cap's keys cost some 40 MB more at the peak.
func (st dumpElemStore) dedupe() {
	for _, l := range st {
		order := make([]int32, len(l.list))
		for i := range order {
			order[i] = int32(i)
		}
		slices.SortFunc(order, func(a, b int32) int {
			if c := slices.Compare(l.list[a].Key, l.list[b].Key); c != 0 {
				return c
			}
			return int(a - b)
		})
		dropped := false
		for i := 0; i < len(order); {
			j := i + 1
			for j < len(order) && slices.Equal(l.list[order[i]].Key, l.list[order[j]].Key) {
				j++
			}
			if j-i > 1 {
				l.list[order[i]] = l.list[order[j-1]]
				for _, k := range order[i+1 : j] {
					l.list[k] = nil
				}
				dropped = true
			}
			i = j
		}
		if dropped {
			l.list = slices.DeleteFunc(l.list, func(e *knftables.Element) bool { return e == nil })
		}
	}
}

// detachElement copies the strings of e that ParseDump cut out of the text
// of e's whole batch, so that the element kept does not keep that text.
func detachElement(e *knftables.Element, name string) {
	for i := range e.Key {
		e.Key[i] = strings.Clone(e.Key[i])
	}
	for i := range e.Value {
		e.Value[i] = strings.Clone(e.Value[i])
	}
	if e.Comment != nil {
		c := strings.Clone(*e.Comment)
		e.Comment = &c
	}
	if e.Set != "" {
		e.Set = name
	} else {
		e.Map = name
	}
}

func (st dumpElemStore) get(name string) []*knftables.Element {
	if l := st[name]; l != nil {
		return l.list
	}
	return nil
}

// dumpElements sets the family and table of the elements, in place: they
// were moved out of the Fake and are the store's alone (a copy of a set at
// the cap cost 1M more elements).
func dumpElements(in []*knftables.Element, t *inspect.NFTTable) []*knftables.Element {
	for _, e := range in {
		e.Family, e.Table = t.Family, t.Name
	}
	return in
}

// dumpParse feeds lines to fake.ParseDump. ParseDump is all or nothing, so
// when it fails the lines are split in halves until the bad ones are found;
// each of those is skipped with a warning.
func (b *builder) dumpParse(fake *knftables.Fake, g *dumpGroup, lines []dumpLine) {
	var sb strings.Builder
	for _, l := range lines {
		sb.WriteString(l.text)
		sb.WriteByte('\n')
	}
	err := fake.ParseDump(sb.String())
	if err == nil {
		return
	}
	if len(lines) == 1 {
		b.warn("line %d: knftables rejected it: %s", lines[0].n, dumpError(err))
		return
	}
	half := len(lines) / 2
	b.dumpParse(fake, g, lines[:half])
	b.dumpParse(fake, g, lines[half:])
}

// dumpError drops the "(at line 1: …" suffix ParseDump adds for one line.
func dumpError(err error) string {
	s := err.Error()
	if i := strings.Index(s, " (at line "); i >= 0 {
		s = s[:i]
	}
	return s
}
