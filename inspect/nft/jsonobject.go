package nft

import (
	"math"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/knftables"

	"github.com/proxyrules/kubectl-proxyrules/inspect"
)

// The objects of an nft -j listing, read off a parsed tape: tables and
// elements built in order; rules, chains, sets and maps prepared (on a
// worker, for the parallel reader) and added.

// ruleChain returns chain name of t for a JSON rule. nft lists a table's
// chains, then their rules chain by chain in the same order: the chain of
// the last rule, or one of the next few chains, is looked for first.
func (b *builder) ruleChain(t *inspect.NFTTable, name string) *inspect.NFTChain {
	if c := b.lastChain; c != nil && c.Name == name { // b.table keeps it for the same table
		return c
	}
	if b.cursorTable != t {
		b.cursorTable, b.cursor = t, -1
	}
	for j := b.cursor + 1; j < len(t.Chains) && j <= b.cursor+8; j++ {
		if t.Chains[j].Name == name {
			b.cursor, b.lastChain = j, t.Chains[j]
			return b.lastChain
		}
	}
	c := t.Chain(name)
	if c == nil {
		c = t.EnsureChain(strings.Clone(name))
	}
	for j := b.cursor + 1; j < len(t.Chains) && j <= b.cursor+64; j++ {
		if t.Chains[j] == c {
			b.cursor = j
			break
		}
	}
	b.lastChain = c
	return c
}

func (b *builder) jsonTable(family, name string) *inspect.NFTTable {
	if family == "" {
		family = "ip"
	}
	return b.table(knftables.Family(family), name)
}

// jsonHandle reads a "handle" member; a present but malformed one is
// reported.
func (b *builder) jsonHandle(o *jsonValue, i int) *int {
	h := readHandle(o)
	b.handleWarning(h, i)
	return h.n
}

// handle is a "handle" member as read: its number, or the text of a
// malformed one.
type handle struct {
	n   *int
	bad *string
}

func readHandle(o *jsonValue) handle {
	h := o.get("handle")
	if h == nil {
		return handle{}
	}
	n, err := strconv.Atoi(h.scalar())
	if err != nil || !h.isNum() {
		s := h.scalar()
		return handle{bad: &s}
	}
	return handle{n: &n}
}

func (b *builder) handleWarning(h handle, i int) {
	if h.bad != nil {
		b.warn("object %d: bad handle %q", i, *h.bad)
	}
}

// jsonComment returns a copy of a comment (it would otherwise keep the
// whole object's bytes alive), or nil.
func jsonComment(v *jsonValue) *string {
	if v == nil || v.kind != 's' {
		return nil
	}
	c := strings.Clone(v.str)
	return &c
}

func (b *builder) jsonObject(o *jsonValue, w *renderer, i int) {
	kind, v, ok := o.single()
	if !ok {
		if o.kind == 'o' && o.n > 0 {
			v = o.kid(0)
			kind = v.key
		} else {
			b.warn("object %d: not an object", i)
			return
		}
	}
	switch kind {
	case "metainfo":
		b.dump.Version = strings.Clone(v.fieldStr("version"))
	case "table":
		name := v.fieldStr("name")
		if name == "" {
			b.warn("object %d: table without a name", i)
			return
		}
		t := b.jsonTable(v.fieldStr("family"), strings.Clone(name))
		t.Handle = b.jsonHandle(v, i)
		if c := jsonComment(v.get("comment")); c != nil {
			t.Comment = c
		}
		for _, f := range v.get("flags").strs() {
			t.Flags = append(t.Flags, knftables.TableFlag(f))
		}
	case "chain", "rule", "set", "map":
		pr := prepareObject(kind, v, w)
		if !b.addPrepared(&pr, i) {
			what := "set/map without a name or table"
			switch kind {
			case "chain":
				what = "chain without a name or table"
			case "rule":
				what = "rule without a chain or table"
			}
			b.warn("object %d: %s", i, what)
		}
	case "element":
		t := b.jsonTable(v.fieldStr("family"), v.fieldStr("table"))
		name := v.fieldStr("name")
		elem := v.get("elem")
		if s := t.Set(name); s != nil {
			es := b.capElements(w.elements(elem, false, t.Family, t.Name, s.Name), len(s.Elements), elem.cut(), "object", i, t.Family, t.Name, s.Name)
			s.Elements = append(s.Elements, es...)
		} else if m := t.Map(name); m != nil {
			es := b.capElements(w.elements(elem, true, t.Family, t.Name, m.Name), len(m.Elements), elem.cut(), "object", i, t.Family, t.Name, m.Name)
			m.Elements = append(m.Elements, es...)
		} else {
			b.warn("object %d: elements of unknown set %q", i, name)
		}
	}
}

// prepared is an object of a kind the builder adds from what it read
// (on a worker, for the parallel reader): a rule, chain, set or map.
type prepared struct {
	kind  byte // 0: not prepared (no name or table), 'r' a rule, 's' a set or map, 'c' a chain
	rule  preparedRule
	set   preparedSet
	chain preparedChain
}

// prepareObject reads an object of kind rule, chain, set or map.
func prepareObject(kind string, v *jsonValue, w *renderer) (pr prepared) {
	var ok bool
	switch kind {
	case "rule":
		pr.rule, ok = prepareRule(v, w)
		pr.kind = 'r'
	case "chain":
		pr.chain, ok = prepareChain(v)
		pr.kind = 'c'
	case "set", "map":
		pr.set, ok = prepareSet(v, kind == "map", w)
		pr.kind = 's'
	}
	if !ok {
		pr.kind = 0
	}
	return pr
}

// addPrepared adds what prepareObject read, as object i; false when it
// read nothing.
func (b *builder) addPrepared(pr *prepared, i int) bool {
	switch pr.kind {
	case 'r':
		r := &pr.rule
		c := b.ruleChain(b.jsonTable(r.family, r.table), r.chain)
		b.handleWarning(r.handle, i)
		b.raw.add(c, rawRule{text: r.text, comment: r.comment, handle: r.handle.n})
	case 'c':
		b.addChain(&pr.chain, i)
	case 's':
		b.addSet(pr.set, i)
	default:
		return false
	}
	return true
}

// preparedRule is a rule object, read and rendered.
type preparedRule struct {
	family, table, chain string
	text                 string
	comment              *string
	handle               handle
}

// prepareRule reads a rule object and renders its text (ok false without
// a chain or table).
func prepareRule(v *jsonValue, w *renderer) (r preparedRule, ok bool) {
	r.chain, r.table = v.fieldStr("chain"), v.fieldStr("table")
	if r.chain == "" || r.table == "" {
		return r, false
	}
	r.family = v.fieldStr("family")
	if r.family == "" {
		r.family = "ip"
	}
	w.family = r.family
	r.text = w.ruleText(v.get("expr"))
	r.comment = jsonComment(v.get("comment"))
	r.handle = readHandle(v)
	return r, true
}

// preparedChain is a chain object, read.
type preparedChain struct {
	family, table, name string
	handle              handle
	comment             *string
	// a base chain's
	typ      *knftables.BaseChainType
	hook     *knftables.BaseChainHook
	priority *knftables.BaseChainPriority
	policy   *knftables.BaseChainPolicy
	device   *string
}

// prepareChain reads a chain object (ok false without a name or table).
func prepareChain(v *jsonValue) (pc preparedChain, ok bool) {
	name, table := v.fieldStr("name"), v.fieldStr("table")
	if name == "" || table == "" {
		return pc, false
	}
	pc.name, pc.table, pc.family = strings.Clone(name), table, v.fieldStr("family")
	if pc.family == "" {
		pc.family = "ip"
	}
	pc.handle = readHandle(v)
	pc.comment = jsonComment(v.get("comment"))
	if hook := v.fieldStr("hook"); hook != "" {
		typ := knftables.BaseChainType(v.fieldStr("type"))
		hk := knftables.BaseChainHook(hook)
		pr := basePriority(knftables.Family(pc.family), v.fieldStr("prio"))
		pc.typ, pc.hook, pc.priority = &typ, &hk, &pr
		if pol := v.fieldStr("policy"); pol != "" {
			p := knftables.BaseChainPolicy(pol)
			pc.policy = &p
		}
		if devs := v.get("dev").strs(); len(devs) > 0 {
			d := strings.Join(devs, ",")
			pc.device = &d
		}
	}
	return pc, true
}

// addChain adds a chain read by prepareChain, as object i.
func (b *builder) addChain(pc *preparedChain, i int) {
	c := b.jsonTable(pc.family, pc.table).EnsureChain(pc.name)
	c.Handle = pc.handle.n
	b.handleWarning(pc.handle, i)
	c.Comment = pc.comment
	if pc.hook != nil {
		c.Type, c.Hook, c.Priority = pc.typ, pc.hook, pc.priority
		if pc.policy != nil {
			c.Policy = pc.policy
		}
		if pc.device != nil {
			c.Device = pc.device
		}
	}
}

// preparedSet is a set or map object, read.
type preparedSet struct {
	family, table string
	set           *inspect.NFTSet // or
	mp            *inspect.NFTMap
	handle        handle
	cut           bool // its elements past jsonMaxItems were not read
}

// prepareSet reads a set or map object (ok false without a name or table).
func prepareSet(js *jsonValue, isMap bool, w *renderer) (ps preparedSet, ok bool) {
	name, table := js.fieldStr("name"), js.fieldStr("table")
	if name == "" || table == "" {
		return ps, false
	}
	name = strings.Clone(name)
	ps.table, ps.family = table, js.fieldStr("family")
	if ps.family == "" {
		ps.family = "ip"
	}
	family := knftables.Family(ps.family)
	w.family = ps.family
	typ := strings.Join(js.get("type").strs(), " . ")
	var flags []knftables.SetFlag
	for _, f := range js.get("flags").strs() {
		flags = append(flags, knftables.SetFlag(f))
	}
	timeout := jsonDuration(js.get("timeout"))
	gc := jsonDuration(js.get("gc-interval"))
	var size *uint64
	if s := js.fieldStr("size"); s != "" {
		if n, err := strconv.ParseUint(s, 10, 64); err == nil {
			size = &n
		}
	}
	var policy *knftables.SetPolicy
	if p := js.fieldStr("policy"); p != "" {
		pol := knftables.SetPolicy(p)
		policy = &pol
	}
	ps.handle = readHandle(js)
	comment := jsonComment(js.get("comment"))
	elem := js.get("elem")
	ps.cut = elem.cut()
	if isMap {
		if data := js.get("map").strs(); len(data) > 0 {
			typ += " : " + strings.Join(data, " . ")
		}
		ps.mp = &inspect.NFTMap{Map: knftables.Map{
			Family: family, Table: table, Name: name, Type: typ, Flags: flags,
			Timeout: timeout, GCInterval: gc, Size: size, Policy: policy, Comment: comment, Handle: ps.handle.n,
		}}
		ps.mp.Elements = w.elements(elem, true, family, table, name)
		return ps, true
	}
	ps.set = &inspect.NFTSet{Set: knftables.Set{
		Family: family, Table: table, Name: name, Type: typ, Flags: flags,
		Timeout: timeout, GCInterval: gc, Size: size, Policy: policy, Comment: comment, Handle: ps.handle.n,
	}}
	if js.get("auto-merge").isTrue() {
		v := true
		ps.set.AutoMerge = &v
	}
	ps.set.Elements = w.elements(elem, false, family, table, name)
	return ps, true
}

// addSet adds a set or map read by prepareSet, as object i.
func (b *builder) addSet(ps preparedSet, i int) {
	t := b.jsonTable(ps.family, ps.table)
	b.handleWarning(ps.handle, i)
	if m := ps.mp; m != nil {
		m.Elements = b.capElements(m.Elements, 0, ps.cut, "object", i, t.Family, t.Name, m.Name)
		t.AddMap(m)
		return
	}
	s := ps.set
	s.Elements = b.capElements(s.Elements, 0, ps.cut, "object", i, t.Family, t.Name, s.Name)
	t.AddSet(s)
}

func jsonDuration(v *jsonValue) *time.Duration {
	s := v.scalar()
	if s == "" || !v.isNum() {
		return nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || f > math.MaxInt64/float64(time.Second) {
		return nil
	}
	d := time.Duration(f * float64(time.Second))
	return &d
}
