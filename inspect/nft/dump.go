package nft

import (
	"context"
	"io"
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
	fake := knftables.NewFake(g.family, g.table)
	var pending []dumpLine
	flush := func() {
		if len(pending) > 0 {
			b.dumpParse(fake, g, pending)
			pending = nil
		}
	}
	special := func(l dumpLine) {
		flush()
		tx := fake.NewTransaction()
		tx.Add(l.special)
		if err := fake.Run(context.Background(), tx); err != nil {
			b.warn("line %d: knftables rejected it: %v", l.n, err)
		}
	}
	for _, phase := range g.lines[:dumpPhaseElement] {
		for _, l := range phase {
			if l.special == nil {
				pending = append(pending, l)
				continue
			}
			special(l)
		}
	}
	flush()
	// Fake looks an element up among all those of its set before adding
	// it, which is quadratic: elements go in batches, and each batch is
	// moved out of the Fake (and the set flushed) before the next one.
	elems := dumpElemStore{}
	touched := map[string]bool{}
	harvest := func() {
		flush()
		if fake.Table == nil || len(touched) == 0 {
			return
		}
		tx := fake.NewTransaction()
		for name := range touched {
			if s := fake.Table.Sets[name]; s != nil {
				elems.add(name, s.Elements)
				tx.Flush(&knftables.Set{Name: name})
			} else if m := fake.Table.Maps[name]; m != nil {
				elems.add(name, m.Elements)
				tx.Flush(&knftables.Map{Name: name})
			}
		}
		clear(touched)
		if err := fake.Run(context.Background(), tx); err != nil {
			b.warn("table %s %s: %v", g.family, g.table, err)
		}
	}
	for i, l := range g.lines[dumpPhaseElement] {
		_, rest := dumpWord(l.text) // add
		_, rest = dumpWord(rest)    // element
		_, rest = dumpWord(rest)    // family
		_, rest = dumpWord(rest)    // table
		name, _ := dumpWord(rest)
		touched[name] = true
		if l.special != nil {
			special(l)
		} else {
			pending = append(pending, l)
		}
		if (i+1)%dumpElemBatch == 0 {
			harvest()
		}
	}
	harvest()
	ft := fake.Table
	if ft == nil {
		b.warn("table %s %s: its `add table` line was rejected", g.family, g.table)
		return
	}
	t := b.table(g.family, g.table)
	t.Comment = ft.Comment
	t.Flags = ft.Flags
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

// dumpElemBatch is how many element lines go to the Fake at a time.
const dumpElemBatch = 256

// dumpElemStore collects the elements of each set and map, replacing an
// element of the same key in place, as knftables' Fake does.
type dumpElemStore map[string]*dumpElemList

type dumpElemList struct {
	list  []*knftables.Element
	index map[string]int
}

func (st dumpElemStore) add(name string, in []*knftables.Element) {
	l := st[name]
	if l == nil {
		l = &dumpElemList{index: map[string]int{}}
		st[name] = l
	}
	for _, e := range in {
		k := strings.Join(e.Key, " . ")
		if i, ok := l.index[k]; ok {
			l.list[i] = e
			continue
		}
		l.index[k] = len(l.list)
		l.list = append(l.list, e)
	}
}

func (st dumpElemStore) get(name string) []*knftables.Element {
	if l := st[name]; l != nil {
		return l.list
	}
	return nil
}

func dumpElements(in []*knftables.Element, t *inspect.NFTTable) []*knftables.Element {
	out := make([]*knftables.Element, 0, len(in))
	for _, e := range in {
		c := *e
		c.Family, c.Table = t.Family, t.Name
		out = append(out, &c)
	}
	return out
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
