package iptables

import (
	"fmt"
	"strings"

	"github.com/proxyrules/kubectl-proxyrules/inspect"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// Rules printed without their table (`iptables -S`, `-A` excerpts,
// `iptables -L`) are collected as items in sections, in input order. A
// section ends where the output of another command must begin: a pasted
// command line, a chain declared again, a declaration after rules (the next
// table of a grep'd iptables-save, the next chain of several -S outputs), a
// built-in chain after user chains. At the end each section is cut where its
// evidence changes table, and each piece is placed in the table its chains
// and targets say.

type itemKind uint8

const (
	itemChain  itemKind = iota // -N CHAIN, :CHAIN -, Chain CHAIN (N references)
	itemPolicy                 // -P CHAIN POLICY, :CHAIN POLICY, Chain CHAIN (policy …)
	itemRule
)

// item is one line's chain, policy or rule: small, as an -S of a big node
// has 300k of them.
type item struct {
	chain string
	rule  *inspect.IPRule
	pol   *policy // itemPolicy
	line  int32
	kind  itemKind
	// v6: the listing's address columns show IPv6 ("::/0") where the rule
	// itself has no address; v4 likewise.
	v4, v6 bool
}

type policy struct {
	policy         string
	packets, bytes uint64
}

func policyItem(chain, pol string, packets, bytes uint64) item {
	return item{kind: itemPolicy, chain: chain, pol: &policy{pol, packets, bytes}}
}

type section struct {
	id    int
	form  inspect.Format
	ctx   command
	items []item
	// declared: chains declared or listed in this section.
	declared map[string]bool
	sawRule  bool
	sawUser  bool // a user chain was declared or listed
	cut      bool // a "...." line: the poster left rules out
}

// hlSection returns the section an item of that kind for chain joins,
// starting a new one at a boundary.
func (p *parser) hlSection(form inspect.Format, kind itemKind, chain string) *section {
	s := p.hl
	if s != nil && (s.form != form && !(isRulesForm(s.form) && isRulesForm(form)) || p.sectionEnds(s, kind, chain)) {
		s = nil
	}
	if s == nil {
		s = &section{id: len(p.sections) + 1, form: form, ctx: p.ctx, declared: map[string]bool{}}
		p.sections = append(p.sections, s)
		p.hl = s
	}
	if form == inspect.FormatIPTablesRules {
		s.form = form // -N / -P lines make an excerpt -S output
	}
	return s
}

func isRulesForm(f inspect.Format) bool {
	return f == inspect.FormatIPTablesRules || f == inspect.FormatIPTablesExcerpt
}

func (p *parser) sectionEnds(s *section, kind itemKind, chain string) bool {
	switch kind {
	case itemRule:
		return false
	case itemPolicy:
		if s.form == inspect.FormatIPTablesList {
			return s.sawUser || s.declared[chain] // the next table's built-in chains
		}
		return s.sawRule || s.sawUser || s.declared[chain] // -S prints policies first
	}
	if s.form == inspect.FormatIPTablesList {
		return s.declared[chain]
	}
	return s.sawRule || s.declared[chain]
}

func (p *parser) addItem(form inspect.Format, it item) {
	s := p.hlSection(form, it.kind, it.chain)
	switch it.kind {
	case itemRule:
		s.sawRule = true
	case itemPolicy:
		s.declared[it.chain] = true
	case itemChain:
		s.sawUser = true
		s.declared[it.chain] = true
	}
	it.line = int32(p.lr.Line())
	if len(s.items) == cap(s.items) {
		// Double: append grows large slices by a quarter, which for the
		// 400k items of a big node's -S allocates five times their size.
		grown := make([]item, len(s.items), max(64, 2*cap(s.items)))
		copy(grown, s.items)
		s.items = grown
	}
	s.items = append(s.items, it)
}

// segment is a run of a section's items that goes to one table.
type segment struct {
	items  []item // a window of the section's items
	tables tableSet
}

// segments cuts a section's items where the evidence changes table: the
// greedy cut keeps ambiguous items (canaries, empty KUBE-SERVICES) with the
// run before them, as tables come whole in any real output.
func segments(items []item) []segment {
	var out []segment
	start, cur := 0, anyTable
	for i := range items {
		it := &items[i]
		var ev tableSet
		if it.kind == itemRule {
			ev = ruleEvidence(it.chain, it.rule)
		} else {
			ev = chainEvidence(it.chain)
		}
		if cur&ev == 0 {
			out = append(out, segment{items[start:i:i], cur})
			start, cur = i, anyTable
		}
		cur &= ev
	}
	if start < len(items) {
		out = append(out, segment{items[start:], cur})
	}
	return out
}

// sectionSegments: the pieces of a section and their tables. A section
// that lists a whole table (the policies of exactly its built-in chains, as
// -S, -L and iptables-save print them) is that table, whatever foreign
// chains and targets it holds, unless what iptables or kube-proxy's names
// fix says otherwise (two tables' outputs run together).
func sectionSegments(items []item, fixed string) []segment {
	if fixed != "" {
		return []segment{{items: items, tables: tableBits[fixed]}}
	}
	policies := map[string]bool{}
	for i := range items {
		if items[i].kind == itemPolicy {
			policies[items[i].chain] = true
		}
	}
	whole, ok := wholeTable(policies)
	if !ok {
		return segments(items)
	}
	bit := tableBits[whole]
	for i := range items {
		it := &items[i]
		ev := kubeChainEvidence(it.chain)
		if it.kind == itemRule {
			ev = kubeRuleEvidence(it.chain, it.rule)
		}
		if ev&bit == 0 {
			return segments(items)
		}
	}
	return []segment{{items: items, tables: bit}}
}

// placeHeaderless puts every section's items into tables.
func (p *parser) placeHeaderless() {
	for _, s := range p.sections {
		p.placeSection(s)
	}
	p.addReferencedChains()
}

func (p *parser) placeSection(s *section) {
	fixed := ""
	if s.ctx.iptables && !s.ctx.save {
		fixed = s.ctx.tableOrDefault()
	} else if p.opts.Table != "" {
		fixed = p.opts.Table
	}
	if p.formTables == nil {
		p.formTables = map[inspect.Format]bool{}
	}
	p.formTables[s.form] = p.formTables[s.form] || fixed == ""
	segs := sectionSegments(s.items, fixed)
	sectionFamily := itemsFamily(s.items)
	for _, seg := range segs {
		policies := map[string]bool{}
		for i := range seg.items {
			if it := &seg.items[i]; it.kind == itemPolicy {
				policies[it.chain] = true
			}
		}
		whole, isWhole := wholeTable(policies)
		name := fixed
		switch {
		case name != "":
		case isWhole && seg.tables&tableBits[whole] != 0:
			name = whole
		case seg.tables.single():
			name = seg.tables.one()
		default:
			name = seg.tables.one()
			p.note(fmt.Sprintf("lines %d-%d: no table is named and the chains (%s) do not tell which; read as %s — pass the table (--table) to say",
				seg.items[0].line, seg.items[len(seg.items)-1].line, chainList(seg.items), name))
		}
		fam := p.segmentFamily(s, seg, sectionFamily)
		t := p.headerlessTable(fam, name, s)
		if isWhole && whole == name && !s.cut {
			t.Partial = false
		}
		p.fill(t, s, seg.items)
	}
}

// segmentFamily: the family the rules' addresses show, else the pasted
// command's (ip6tables), else the section's, else Options.Family, else
// the input's, else IPv4.
func (p *parser) segmentFamily(s *section, seg segment, sectionFamily kubeproxy.Family) kubeproxy.Family {
	if f := itemsFamily(seg.items); f != "" {
		return f
	}
	if s.ctx.iptables && s.ctx.family != "" {
		return s.ctx.family
	}
	if sectionFamily != "" {
		return sectionFamily
	}
	if p.opts.Family != "" {
		return p.opts.Family
	}
	if p.inputFamily != "" {
		return p.inputFamily
	}
	if p.familyDefaulted == nil {
		p.familyDefaulted = map[inspect.Format]bool{}
	}
	p.familyDefaulted[s.form] = true
	return kubeproxy.IPv4
}

func itemsFamily(items []item) kubeproxy.Family {
	fam := kubeproxy.Family("")
	for i := range items {
		it := &items[i]
		if it.kind != itemRule {
			continue
		}
		f := ruleFamily(it.rule)
		if f == "" && it.v6 {
			f = kubeproxy.IPv6
		} else if f == "" && it.v4 {
			f = kubeproxy.IPv4
		}
		switch f {
		case kubeproxy.IPv6:
			return kubeproxy.IPv6
		case kubeproxy.IPv4:
			fam = kubeproxy.IPv4
		}
	}
	return fam
}

func chainList(items []item) string {
	seen := map[string]bool{}
	var names []string
	for _, it := range items {
		if !seen[it.chain] {
			seen[it.chain] = true
			names = append(names, it.chain)
		}
	}
	if len(names) > 3 {
		return strings.Join(names[:3], ", ") + fmt.Sprintf(" and %d more", len(names)-3)
	}
	return strings.Join(names, ", ")
}

// headerlessTable returns the table rules of that family and name join:
// one this input already has (from a *table section or an earlier paste),
// else a new partial one.
func (p *parser) headerlessTable(fam kubeproxy.Family, name string, s *section) *inspect.IPTable {
	for _, t := range p.rs.IPTables {
		if t.Family == fam && t.Name == name {
			if p.built[t] && t.Format != s.form {
				t.Format = inspect.FormatIPTablesMixed
			}
			if t.Backend == kubeproxy.BackendUnknown {
				t.Backend = s.ctx.backend
			}
			return t
		}
	}
	t := inspect.NewIPTable(fam, name)
	t.Source, t.Format, t.Backend, t.Partial = p.source, s.form, s.ctx.backend, true
	p.rs.IPTables = append(p.rs.IPTables, t)
	if p.built == nil {
		p.built = map[*inspect.IPTable]bool{}
	}
	p.built[t] = true
	return t
}

// fill adds a segment's chains and rules to t. A chain whose rules another
// section (or a *table section) already gave keeps those: the same chain
// pasted twice must not double its rules.
func (p *parser) fill(t *inspect.IPTable, s *section, items []item) {
	if p.filledBy == nil {
		p.filledBy = map[*inspect.IPChain]int{}
	}
	warned := map[*inspect.IPChain]bool{}
	var c *inspect.IPChain
	for i := range items {
		it := &items[i]
		if c == nil || c.Name != it.chain {
			if c = t.Chain(it.chain); c == nil {
				c = p.newChain(it.chain, it.line)
				t.AddChain(c)
			}
		}
		switch it.kind {
		case itemPolicy:
			c.Policy, c.Packets, c.Bytes = it.pol.policy, it.pol.packets, it.pol.bytes
		case itemRule:
			if by := p.filledBy[c]; len(c.Rules) > 0 && by != s.id {
				if !warned[c] {
					warned[c] = true
					p.warnAt(int(it.line), "chain %s is listed again; its rules from line %d are kept", c.Name, c.Rules[0].Line)
				}
				continue
			}
			p.filledBy[c] = s.id
			p.appendRule(c, it.rule)
			p.rules++
		}
	}
}

// standardTargets are targets that are not chains: the verdicts and the
// target extensions of iptables 1.8.
var standardTargets = map[string]bool{
	"ACCEPT": true, "DROP": true, "RETURN": true, "QUEUE": true, "REJECT": true,
	"DNAT": true, "SNAT": true, "MASQUERADE": true, "REDIRECT": true, "NETMAP": true,
	"MARK": true, "CONNMARK": true, "LOG": true, "NFLOG": true, "ULOG": true, "NFQUEUE": true,
	"NOTRACK": true, "CT": true, "TPROXY": true, "TCPMSS": true, "CHECKSUM": true, "CLASSIFY": true,
	"DSCP": true, "TOS": true, "TTL": true, "HL": true, "AUDIT": true, "IDLETIMER": true,
	"LED": true, "RATEEST": true, "SECMARK": true, "CONNSECMARK": true, "SET": true,
	"SYNPROXY": true, "TEE": true, "TRACE": true, "HMARK": true, "CLUSTERIP": true, "ECN": true,
	"TCPOPTSTRIP": true, "NPT": true, "DNPT": true, "SNPT": true,
}

// addReferencedChains adds, to the tables built from headerless input,
// the chains their rules jump to that the input did not show, marked
// OnlyReferenced, so that an excerpt's jump targets are attributed too.
func (p *parser) addReferencedChains() {
	n := 0
	for _, t := range p.rs.IPTables {
		if !p.built[t] {
			continue
		}
		for _, c := range t.Chains { // (the chains added below are not visited)
			for _, r := range c.Rules {
				if r.Target != "" && !standardTargets[r.Target] && t.Chain(r.Target) == nil {
					ref := p.newChain(r.Target, r.Line)
					ref.OnlyReferenced = true
					t.AddChain(ref)
					t.Partial = true // a whole-table listing cut short
					n++
				}
			}
		}
	}
	switch {
	case n == 1:
		p.dump.Warnings = append(p.dump.Warnings, "1 chain appears only as a jump target (referenced, not in the dump): its rules are not known")
	case n > 1:
		p.dump.Warnings = append(p.dump.Warnings, fmt.Sprintf("%d chains appear only as jump targets (referenced, not in the dump): their rules are not known", n))
	}
}
