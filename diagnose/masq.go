package diagnose

import (
	"fmt"
	"math/bits"
	"sort"

	"sigs.k8s.io/knftables"

	"github.com/proxyrules/kubectl-proxyrules/inspect"
	"github.com/proxyrules/kubectl-proxyrules/inspect/kpconfig"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// Masquerade-mark analysis.
//
// kube-proxy marks packets that need SNAT with one bit of the packet mark
// (1 << masqueradeBit; 14 by default, so 0x4000) and masquerades marked
// packets in postrouting, clearing the bit first. Three things go wrong on
// real nodes: the rules that set, test and clear the bit disagree (a
// half-applied configuration change), the configured bit is not the one
// programmed, and some other component (a CNI, a firewall, the kubelet's
// old KUBE-MARK-DROP) uses an overlapping bit. AnalyzeMasquerade reports
// all three, per proxy mode and IP family.

// Masquerade rule shapes.
const (
	ShapeIPTables     = "iptables"
	ShapeNFTables136  = "nftables-1.36+" // inline `mark set mark or X`, two-rule masquerading chain
	ShapeNFTables135  = "nftables-1.35-" // mark-for-masquerade chain, three-rule masquerading chain
	maxMasqRuleRefs   = 20
	maxOtherMarks     = 50
	markOpSets        = "sets"
	markOpTests       = "tests"
	markOpClears      = "clears"
	OwnerForeign      = "foreign"
	OwnerKubelet      = "kubelet"
	OwnerKubeProxy    = "kube-proxy"
	defaultMasqueMark = uint32(1) << kubeproxy.DefaultMasqueradeBit
)

// MasqReport is the masquerade-mark state of one proxy mode and IP family.
// Its JSON form is stable: fields are only added.
type MasqReport struct {
	// Mode is iptables (also for iptables-nft rules read through nft, and
	// for ipvs mode's iptables rules) or nftables.
	Mode   kubeproxy.Mode   `json:"mode"`
	Family kubeproxy.Family `json:"family"`
	// Backend is the iptables backend (nf_tables or legacy) when the dump
	// says; a node holding kube-proxy rules in both backends gets a report
	// for each.
	Backend kubeproxy.Backend `json:"backend,omitempty"`
	// Source is the input the analysed table came from.
	Source string `json:"source,omitempty"`
	// Shape is iptables, nftables-1.36+ or nftables-1.35-.
	Shape string `json:"shape"`
	// MasqueradeBit is the programmed bit, or -1 when the marks set and
	// tested are not one and the same single bit.
	MasqueradeBit int `json:"masqueradeBit"`
	// Mark is the mark as kube-proxy writes it (fmt "%#08x": 0x00004000);
	// MarkValue is the same number. Both are those of the rules that set
	// the mark, else of those that test it, else of those that clear it.
	Mark      string `json:"mark"`
	MarkValue uint32 `json:"markValue"`
	// RandomFully: every masquerade rule of kube-proxy's postrouting chain
	// has --random-fully (iptables) or fully-random (nftables).
	RandomFully bool `json:"randomFully"`
	// RandomFullyUnknown: the masquerade rule is not visible (iptables-nft
	// read through nft shows some xtables targets as nothing), so
	// RandomFully could not be checked.
	RandomFullyUnknown bool `json:"randomFullyUnknown,omitempty"`
	// SetBy, TestedBy and ClearedBy are kube-proxy's rules that set, test
	// and clear the mark (at most 20 each; SetByTotal counts all: in
	// nftables ≥ 1.36 every external-* chain sets it inline).
	SetBy      []RuleRef `json:"setBy"`
	SetByTotal int       `json:"setByTotal"`
	TestedBy   []RuleRef `json:"testedBy"`
	ClearedBy  []RuleRef `json:"clearedBy"`
	// Agree: the marks set, tested and cleared are numerically equal
	// (0x4000 == 0x00004000), and the mark is both tested and cleared (and,
	// in iptables mode, set: nftables mode has no set rule when no Service
	// needs masquerading).
	Agree bool `json:"agree"`
	// ConfigBit is the masquerade bit of the configuration given for this
	// mode (iptables.masqueradeBit or nftables.masqueradeBit); ConfigAgrees
	// says whether it is the programmed bit. Both are null without a
	// configuration.
	ConfigBit    *int  `json:"configBit"`
	ConfigAgrees *bool `json:"configAgrees"`
	// Conflicts are the other rules of the node that set, test or clear
	// mark bits overlapping kube-proxy's mark; OtherMarks (at most 50) are
	// mark rules that do not overlap, for context.
	Conflicts  []MarkConflict `json:"conflicts"`
	OtherMarks []MarkConflict `json:"otherMarks,omitempty"`
	// Problems are sentences for a person; Notes are context that is not a
	// fault.
	Problems []string `json:"problems"`
	Notes    []string `json:"notes,omitempty"`
	// Findings explain the problems about the mark's value: which of the
	// marks set, tested, cleared and configured differs, what agrees (the
	// evidence) and what to do.
	Findings []MasqFinding `json:"findings,omitempty"`
}

// addFinding records a finding about the mark's value.
func (r *MasqReport) addFinding(f MasqFinding) { r.Findings = append(r.Findings, f) }

// dropProblems leaves out what the report found, for a dump that is only
// an excerpt: what it does not show may hold the missing rule.
func (r *MasqReport) dropProblems() { r.Problems, r.Findings = []string{}, nil }

// RuleRef names one rule. Rule is the rule text: for iptables the part
// after "-A CHAIN ", for nftables the rule as listed.
type RuleRef struct {
	Table string `json:"table"`
	Chain string `json:"chain"`
	Rule  string `json:"rule"`
	// Mark is the mark value the rule sets, tests or clears.
	Mark string `json:"mark,omitempty"`
}

// MarkConflict is a rule outside kube-proxy's masquerade handling that
// touches packet-mark bits.
type MarkConflict struct {
	Mode   kubeproxy.Mode   `json:"mode"`   // iptables or nftables (the rule's table)
	Family kubeproxy.Family `json:"family"` // IPv4, IPv6, or inet for an nftables inet table
	Table  string           `json:"table"`
	Chain  string           `json:"chain"`
	Rule   string           `json:"rule"`
	// Op is sets, tests or clears (an XOR, which flips the bits, is
	// "clears"; the reason says so).
	Op string `json:"op"`
	// Value and Mask as the rule applies them, formatted like kube-proxy's
	// marks (0x00004000): a set is mark = (mark &^ mask) ^ value, a test is
	// mark & mask == value.
	Value string `json:"value"`
	Mask  string `json:"mask"`
	// Owner is foreign, kubelet (KUBE-MARK-DROP, KUBE-FIREWALL) or
	// kube-proxy (its rules in another table: the other proxy mode's or the
	// other iptables backend's leftovers).
	Owner  string `json:"owner"`
	Reason string `json:"reason"`
}

// markOp is one packet-mark operation of a rule.
type markOp struct {
	op      string
	value   uint32
	mask    uint32
	touched uint32 // the bits the operation reads or may change
	how     string // set-mark, or, xor, and, restore, test
}

// masqAnalysis is one report being built.
type masqAnalysis struct {
	rs      *inspect.Ruleset
	cfg     *kpconfig.Config
	r       MasqReport
	own     map[any]bool // kube-proxy's own role rules (*IPRule / *NFTRule)
	skip    map[any]bool // duplicate readings of the analysed tables
	chosen  map[any]bool // the analysed tables
	set     []uint32
	tested  []uint32
	cleared []uint32
	hidden  bool // a masquerade rule nft could not show
	uses    []markUse
}

// AnalyzeMasquerade reports, for each proxy mode and IP family that has
// kube-proxy rules, which mark kube-proxy sets, tests and clears, whether
// they agree with each other and with cfg (may be nil), and which other
// rules of the ruleset use overlapping mark bits. It never fails: a partial
// ruleset gives reports with problems.
func AnalyzeMasquerade(rs *inspect.Ruleset, cfg *kpconfig.Config) []MasqReport {
	if rs == nil {
		return nil
	}
	var out []MasqReport
	// iptables: one report per family and backend.
	groups, order := iptablesGroups(rs)
	for _, k := range order {
		out = append(out, iptablesMasquerade(rs, cfg, k, groups))
	}
	// nftables: one report per kube-proxy table.
	for _, t := range firstKubeProxyNFTables(rs) {
		out = append(out, nftablesMasquerade(rs, cfg, t))
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Mode != b.Mode {
			return a.Mode < b.Mode
		}
		if a.Family != b.Family {
			return a.Family < b.Family
		}
		return a.Backend > b.Backend // nf_tables before legacy
	})
	return out
}

// ipKey is one iptables masquerade report: a family in one backend.
type ipKey struct {
	fam     kubeproxy.Family
	backend kubeproxy.Backend
}

// ipGroup is the nat and filter tables of an ipKey with kube-proxy chains,
// more than one where a table was read more than once.
type ipGroup struct {
	nat, filter []*inspect.IPTable
}

// iptablesGroups groups the nat and filter tables with kube-proxy chains
// by family and backend, in the order first read.
func iptablesGroups(rs *inspect.Ruleset) (map[ipKey]*ipGroup, []ipKey) {
	groups := map[ipKey]*ipGroup{}
	var order []ipKey
	for _, t := range rs.IPTables {
		if t == nil || (t.Name != kubeproxy.TableNAT && t.Name != kubeproxy.TableFilter) || !hasKubeProxyChains(t) {
			continue
		}
		k := ipKey{t.Family, t.Backend}
		g := groups[k]
		if g == nil {
			g = &ipGroup{}
			groups[k] = g
			order = append(order, k)
		}
		if t.Name == kubeproxy.TableNAT {
			g.nat = append(g.nat, t)
		} else {
			g.filter = append(g.filter, t)
		}
	}
	return groups, order
}

// iptablesMasquerade analyses the first nat and filter table of k (a
// duplicate reading is noted and skipped), with a note where another
// backend's rules act on packets too.
func iptablesMasquerade(rs *inspect.Ruleset, cfg *kpconfig.Config, k ipKey, groups map[ipKey]*ipGroup) MasqReport {
	g := groups[k]
	a := newMasqAnalysis(rs, cfg, kubeproxy.ModeIPTables, k.fam)
	a.r.Backend = k.backend
	a.r.Shape = ShapeIPTables
	var nat, filter *inspect.IPTable
	if len(g.nat) > 0 {
		nat = g.nat[0]
		a.r.Source = nat.Source
	}
	if len(g.filter) > 0 {
		filter = g.filter[0]
		if a.r.Source == "" {
			a.r.Source = filter.Source
		}
	}
	for _, dup := range [][]*inspect.IPTable{g.nat, g.filter} {
		for i, t := range dup {
			if i == 0 {
				a.chosen[t] = true
				continue
			}
			a.skip[t] = true
			a.r.Notes = append(a.r.Notes, fmt.Sprintf("%s %s table read more than once (%s and %s): analysed the first", k.fam, t.Name, dup[0].Source, t.Source))
		}
	}
	a.iptables(nat, filter)
	if k.backend == kubeproxy.BackendNFT && legacyTablesWarned(rs, k.fam) && groups[ipKey{k.fam, kubeproxy.BackendLegacy}] == nil {
		a.note("iptables-nft-save warns that iptables-legacy tables are present: rules in the legacy backend (an older kube-proxy's, or a CNI's) act on packets too; dump them with iptables-legacy-save and add them to check their marks")
	}
	if other := otherBackend(k.backend); other != "" && groups[ipKey{k.fam, other}] != nil {
		a.note("kube-proxy chains exist in both iptables backends (nf_tables and legacy) for %s: only one is the running kube-proxy's (iptables-wrapper picks nft when the kubelet's KUBE-IPTABLES-HINT or KUBE-KUBELET-CANARY is in the nft mangle table); the other is leftovers whose rules still act on packets", k.fam)
	}
	a.finish()
	return a.r
}

// firstKubeProxyNFTables is the first kube-proxy table of each nft family.
func firstKubeProxyNFTables(rs *inspect.Ruleset) []*inspect.NFTTable {
	seen := map[knftables.Family]bool{}
	var kps []*inspect.NFTTable
	for _, t := range rs.NFTables {
		if t == nil || !t.IsKubeProxy() || seen[t.Family] {
			continue
		}
		seen[t.Family] = true
		kps = append(kps, t)
	}
	return kps
}

// nftablesMasquerade analyses kube-proxy's table t; another reading of
// the same table is noted and skipped.
func nftablesMasquerade(rs *inspect.Ruleset, cfg *kpconfig.Config, t *inspect.NFTTable) MasqReport {
	a := newMasqAnalysis(rs, cfg, kubeproxy.ModeNFTables, nftFamily(t.Family))
	a.r.Source = t.Source
	a.chosen[t] = true
	for _, o := range rs.NFTables {
		if o != t && o != nil && o.IsKubeProxy() && o.Family == t.Family {
			a.skip[o] = true
			a.r.Notes = append(a.r.Notes, fmt.Sprintf("table %s kube-proxy read more than once (%s and %s): analysed the first", t.Family, t.Source, o.Source))
		}
	}
	a.nftables(t)
	a.finish()
	return a.r
}

// legacyTablesWarned reports whether an iptables-nft-save dump of family
// fam printed "# Warning: iptables-legacy tables present".
func legacyTablesWarned(rs *inspect.Ruleset, fam kubeproxy.Family) bool {
	for _, d := range rs.Dumps {
		if !d.LegacyTablesPresent {
			continue
		}
		for _, t := range rs.IPTables {
			if t != nil && t.Source == d.Source && t.Family == fam {
				return true
			}
		}
	}
	return false
}

func otherBackend(b kubeproxy.Backend) kubeproxy.Backend {
	switch b {
	case kubeproxy.BackendNFT:
		return kubeproxy.BackendLegacy
	case kubeproxy.BackendLegacy:
		return kubeproxy.BackendNFT
	}
	return ""
}

func newMasqAnalysis(rs *inspect.Ruleset, cfg *kpconfig.Config, mode kubeproxy.Mode, fam kubeproxy.Family) *masqAnalysis {
	return &masqAnalysis{
		rs:     rs,
		cfg:    cfg,
		own:    map[any]bool{},
		skip:   map[any]bool{},
		chosen: map[any]bool{},
		r: MasqReport{
			Mode: mode, Family: fam, MasqueradeBit: -1,
			SetBy: []RuleRef{}, TestedBy: []RuleRef{}, ClearedBy: []RuleRef{},
			Conflicts: []MarkConflict{}, Problems: []string{},
		},
	}
}

func nftFamily(f knftables.Family) kubeproxy.Family {
	switch f {
	case knftables.IPv4Family:
		return kubeproxy.IPv4
	case knftables.IPv6Family:
		return kubeproxy.IPv6
	}
	return kubeproxy.Family(f)
}

func (a *masqAnalysis) problem(format string, args ...any) {
	a.r.Problems = append(a.r.Problems, fmt.Sprintf(format, args...))
}

func (a *masqAnalysis) note(format string, args ...any) {
	a.r.Notes = append(a.r.Notes, fmt.Sprintf(format, args...))
}

func addRef(list *[]RuleRef, ref RuleRef) {
	if len(*list) < maxMasqRuleRefs {
		*list = append(*list, ref)
	}
}

// use records one of kube-proxy's rules setting, testing or clearing mark
// v: in the report's lists, and as a use the marks are judged by.
func (a *masqAnalysis) use(op string, v uint32, ref RuleRef) {
	ref.Mark = kubeproxy.FormatMark(v)
	switch op {
	case markOpSets:
		a.set = append(a.set, v)
		addRef(&a.r.SetBy, ref)
	case markOpTests:
		a.tested = append(a.tested, v)
		addRef(&a.r.TestedBy, ref)
	default:
		a.cleared = append(a.cleared, v)
		addRef(&a.r.ClearedBy, ref)
	}
	a.uses = append(a.uses, markUse{op: op, value: v, ref: ref})
}

// iptables analyses kube-proxy's iptables masquerade rules.
func (a *masqAnalysis) iptables(nat, filter *inspect.IPTable) {
	if nat == nil {
		a.problem("no nat table with kube-proxy chains in the dump: the rules that set and test the masquerade mark (KUBE-MARK-MASQ, KUBE-POSTROUTING) cannot be checked")
	} else {
		a.iptMarkMasq(nat)
		a.iptPostrouting(nat)
	}
	if filter != nil {
		if fw := filter.Chain(kubeproxy.ChainForward); fw != nil {
			n := 0
			for _, r := range fw.Rules {
				mm := iptPacketMarkMatch(r)
				if mm == nil || mm.Not {
					continue
				}
				n++
				a.own[r] = true
				a.use(markOpTests, mm.Mask, RuleRef{Table: filter.Name, Chain: fw.Name, Rule: r.Text})
				if mm.Value != mm.Mask {
					a.problem("KUBE-FORWARD tests mark %s under mask %s; kube-proxy tests the bit against itself (%s/%s)", kubeproxy.FormatMark(mm.Value), kubeproxy.FormatMark(mm.Mask), kubeproxy.FormatMark(mm.Mask), kubeproxy.FormatMark(mm.Mask))
				}
			}
			if n == 0 && len(fw.Rules) > 0 {
				a.problem("KUBE-FORWARD has no rule accepting marked packets (`-m mark --mark X/X -j ACCEPT`): forwarded NodePort traffic depends on the FORWARD policy")
			}
		}
	}
}

func (a *masqAnalysis) iptMarkMasq(nat *inspect.IPTable) {
	c := nat.Chain(kubeproxy.ChainMarkMasq)
	if c == nil {
		a.problem("the nat table has no KUBE-MARK-MASQ chain: nothing marks packets for masquerading")
		return
	}
	n := 0
	for _, r := range c.Rules {
		sm := r.SetMark()
		if sm == nil || r.Target != "MARK" && r.Target != "" {
			a.problem("KUBE-MARK-MASQ holds a rule kube-proxy does not write: %s", r.Text)
			continue
		}
		n++
		a.own[r] = true
		a.r.SetByTotal++
		v := sm.Value
		a.use(markOpSets, v, RuleRef{Table: nat.Name, Chain: c.Name, Rule: r.Text})
		switch {
		case sm.Mask == 0xffffffff && sm.Value != 0xffffffff:
			a.problem("KUBE-MARK-MASQ overwrites the whole packet mark (set-mark %s) instead of OR-ing its bit in (kube-proxy writes --or-mark): other components' mark bits are lost", kubeproxy.FormatMark(v))
		case sm.Value != sm.Mask:
			a.problem("KUBE-MARK-MASQ's MARK rule is not an OR of its bit (value %s, mask %s); kube-proxy writes --or-mark X (--set-xmark X/X)", kubeproxy.FormatMark(sm.Value), kubeproxy.FormatMark(sm.Mask))
		}
	}
	switch {
	case n == 0:
		a.problem("KUBE-MARK-MASQ has no MARK rule: packets jumping there are never marked, so Service traffic that needs SNAT is not masqueraded")
	case n > 1:
		a.problem("KUBE-MARK-MASQ has %d MARK rules; kube-proxy writes one", n)
	}
}

func (a *masqAnalysis) iptPostrouting(nat *inspect.IPTable) {
	c := nat.Chain(kubeproxy.ChainPostrouting)
	if c == nil {
		a.problem("the nat table has no KUBE-POSTROUTING chain: marked packets are never masqueraded")
		return
	}
	var masq []*inspect.IPRule
	for _, r := range c.Rules {
		if mm := iptPacketMarkMatch(r); mm != nil {
			a.own[r] = true
			a.use(markOpTests, mm.Mask, RuleRef{Table: nat.Name, Chain: c.Name, Rule: r.Text})
			if !mm.Not || r.Target != "RETURN" {
				a.problem("KUBE-POSTROUTING's mark test is not kube-proxy's `! --mark X/X -j RETURN`: %s", r.Text)
			} else if mm.Value != mm.Mask {
				a.problem("KUBE-POSTROUTING tests mark %s under mask %s; kube-proxy tests the bit against itself", kubeproxy.FormatMark(mm.Value), kubeproxy.FormatMark(mm.Mask))
			}
		}
		if sm := r.SetMark(); sm != nil && (r.Target == "MARK" || r.Target == "") {
			a.own[r] = true
			var v uint32
			switch {
			case sm.Mask == 0: // xor
				v = sm.Value
			case sm.Value == 0: // and-mark, set-xmark 0/X: clears the mask bits
				v = sm.Mask
			default:
				v = sm.Value
				a.problem("KUBE-POSTROUTING's MARK rule does not clear the mark (value %s, mask %s); kube-proxy writes --xor-mark X (--set-xmark X/0x0)", kubeproxy.FormatMark(sm.Value), kubeproxy.FormatMark(sm.Mask))
			}
			a.use(markOpClears, v, RuleRef{Table: nat.Name, Chain: c.Name, Rule: r.Text})
			continue
		}
		switch {
		case r.Target == "MASQUERADE" && (r.More == nil || !r.More.MatchSet.Set()):
			masq = append(masq, r)
		case r.Target == "" && nat.FromNFT && r.MarkMatch() == nil:
			// iptables-nft's xtables MASQUERADE that nft could not show
			// ("XT target MASQUERADE not found").
			a.hidden = true
		}
	}
	if len(a.tested) == 0 {
		a.problem("KUBE-POSTROUTING does not test the mark: every packet through it is masqueraded")
	}
	if len(a.cleared) == 0 {
		a.problem("KUBE-POSTROUTING does not clear the mark before masquerading; kube-proxy XORs it off so that a packet re-entering the stack is not masqueraded twice")
	}
	switch {
	case len(masq) > 0:
		a.r.RandomFully = true
		for _, r := range masq {
			if !r.RandomFully() {
				a.r.RandomFully = false
			}
		}
		if !a.r.RandomFully {
			a.problem("KUBE-POSTROUTING's MASQUERADE has no --random-fully: kube-proxy 1.37 always writes it, so these rules come from an older kube-proxy on an iptables without --random-fully support (1.26–1.36 add it only when supported), or from another writer; without it, SNAT port collisions drop connections under load")
		}
	case a.hidden:
		a.note("KUBE-POSTROUTING's masquerade rule is not visible through nft (iptables-nft xtables target nft could not translate): --random-fully cannot be checked; read the table with iptables-save")
		a.r.RandomFully = false
		a.r.RandomFullyUnknown = true
	default:
		a.problem("KUBE-POSTROUTING has no MASQUERADE rule: marked packets are not masqueraded")
	}
	// The POSTROUTING → KUBE-POSTROUTING jump (EnsureRule, full syncs).
	if pr := nat.Chain("POSTROUTING"); pr != nil && (len(pr.Rules) > 0 || nat.Format != inspect.FormatIPTablesRestore) {
		jumps := false
		for _, r := range pr.Rules {
			if r.Target == kubeproxy.ChainPostrouting {
				jumps = true
				break
			}
		}
		if !jumps {
			a.problem("nat POSTROUTING does not jump to KUBE-POSTROUTING: marked packets are never masqueraded")
		}
	}
}

// nftables analyses a kube-proxy nftables table.
func (a *masqAnalysis) nftables(t *inspect.NFTTable) {
	tname := t.Name
	masqChain := t.Chain("masquerading")
	a.r.Shape = ShapeNFTables136
	if t.Chain("mark-for-masquerade") != nil {
		a.r.Shape = ShapeNFTables135
	} else if masqChain != nil {
		for _, r := range masqChain.Rules {
			if r.Info.HasMarkTest && r.Info.MarkTestOp == "==" && r.Info.Verdict == "return" {
				a.r.Shape = ShapeNFTables135
			}
		}
	}
	for _, c := range t.Chains {
		for _, r := range c.Rules {
			in := &r.Info
			if in.HasMarkSet && in.MarkSetOp == "or" {
				a.own[r] = true
				a.r.SetByTotal++
				a.use(markOpSets, in.MarkSetValue, RuleRef{Table: tname, Chain: c.Name, Rule: r.Rule.Rule})
			}
			if in.HasMarkSet && in.MarkSetOp == "xor" {
				a.own[r] = true
				a.use(markOpClears, in.MarkSetValue, RuleRef{Table: tname, Chain: c.Name, Rule: r.Rule.Rule})
				if c.Name != "masquerading" {
					a.problem("chain %s clears the mark; kube-proxy clears it only in masquerading", c.Name)
				}
			}
			if in.HasMarkTest && c.Name == "masquerading" {
				a.own[r] = true
				a.use(markOpTests, in.MarkTestMask, RuleRef{Table: tname, Chain: c.Name, Rule: r.Rule.Rule})
				if in.MarkTestValue != 0 {
					a.problem("masquerading tests mark %s against %s; kube-proxy tests `mark and X != 0`", kubeproxy.FormatMark(in.MarkTestMask), kubeproxy.FormatMark(in.MarkTestValue))
				}
			}
		}
	}
	if a.r.Shape == ShapeNFTables135 {
		if mfm := t.Chain("mark-for-masquerade"); mfm == nil || len(mfm.Rules) == 0 {
			a.problem("the mark-for-masquerade chain is missing or empty: the jumps to it mark nothing")
		}
	}
	if masqChain == nil {
		a.problem("table %s kube-proxy has no masquerading chain: marked packets are never masqueraded", t.Family)
		return
	}
	var masq []*inspect.NFTRule
	for _, r := range masqChain.Rules {
		if r.Info.Masquerade {
			masq = append(masq, r)
		}
	}
	if len(a.tested) == 0 {
		a.problem("the masquerading chain does not test the mark")
	}
	if len(a.cleared) == 0 {
		a.problem("the masquerading chain does not clear the mark before masquerading")
	}
	if len(a.set) == 0 {
		a.note("nothing in table %s kube-proxy sets the mark: no Service needs masquerading (no clusterCIDR/local-traffic detector, no masqueradeAll, no external traffic)", t.Family)
	}
	if len(masq) == 0 {
		a.problem("the masquerading chain has no masquerade statement: marked packets are not masqueraded")
	} else {
		a.r.RandomFully = true
		for _, r := range masq {
			if !r.Info.FullyRandom {
				a.r.RandomFully = false
			}
		}
		if !a.r.RandomFully {
			a.problem("a masquerade rule of the masquerading chain lacks fully-random: kube-proxy's nftables mode always writes it, so another writer changed the chain")
		}
	}
	if pr := t.Chain("nat-postrouting"); pr == nil {
		a.problem("table %s kube-proxy has no nat-postrouting base chain: the masquerading chain is never reached", t.Family)
	} else {
		jumps := false
		for _, r := range pr.Rules {
			for _, j := range append(append([]string{}, r.Info.Jumps...), r.Info.Gotos...) {
				if j == "masquerading" {
					jumps = true
				}
			}
		}
		if !jumps {
			a.problem("nat-postrouting does not jump to masquerading: marked packets are never masqueraded")
		}
	}
}

// finish computes the mark, agreement, the configuration check and the
// conflicts.
func (a *masqAnalysis) finish() {
	r := &a.r
	switch {
	case len(a.set) > 0:
		r.MarkValue = a.set[0]
	case len(a.tested) > 0:
		r.MarkValue = a.tested[0]
	case len(a.cleared) > 0:
		r.MarkValue = a.cleared[0]
	}
	if r.MarkValue != 0 || len(a.set)+len(a.tested)+len(a.cleared) > 0 {
		r.Mark = kubeproxy.FormatMark(r.MarkValue)
	}
	same := func(vs []uint32) bool {
		for _, v := range vs {
			if v != r.MarkValue {
				return false
			}
		}
		return true
	}
	r.Agree = len(a.tested) > 0 && len(a.cleared) > 0 && (len(a.set) > 0 || r.Mode == kubeproxy.ModeNFTables) &&
		same(a.set) && same(a.tested) && same(a.cleared)
	if same(a.set) && same(a.tested) && r.MarkValue != 0 && bits.OnesCount32(r.MarkValue) == 1 {
		r.MasqueradeBit = bits.TrailingZeros32(r.MarkValue)
	}

	var cfg *configMark
	if a.cfg != nil {
		cfgBitPtr := a.cfg.IPTablesMasqueradeBit
		field := "iptables.masqueradeBit"
		if r.Mode == kubeproxy.ModeNFTables {
			cfgBitPtr, field = a.cfg.NFTablesMasqueradeBit, "nftables.masqueradeBit"
		}
		if cfgBitPtr != nil {
			b := int(*cfgBitPtr)
			r.ConfigBit = &b
			ok := b == r.MasqueradeBit
			r.ConfigAgrees = &ok
			if b >= 0 && b <= 31 {
				cfg = &configMark{field: field, bit: b, source: a.cfg.Source}
			}
		}
		cfgMode := a.cfg.Mode
		if cfgMode == kubeproxy.ModeIPVS {
			cfgMode = kubeproxy.ModeIPTables
		}
		if cfgMode != "" && cfgMode != r.Mode {
			a.note("the configuration is for %s mode: these %s rules may be leftovers of another mode", a.cfg.Mode, r.Mode)
		}
	}
	a.judgeMarks(cfg)

	k := r.MarkValue
	if k == 0 {
		k = defaultMasqueMark
		if r.ConfigBit != nil && *r.ConfigBit >= 0 && *r.ConfigBit <= 31 {
			k = uint32(1) << uint(*r.ConfigBit)
		}
	}
	a.scanConflicts(k)
}

// scanConflicts looks at every other mark rule of the report's family.
func (a *masqAnalysis) scanConflicts(k uint32) {
	fam := a.r.Family
	for _, t := range a.rs.IPTables {
		if t == nil || a.skip[t] || !sameFamily(t.Family, fam) {
			continue
		}
		for _, c := range t.Chains {
			for _, r := range c.Rules {
				if a.own[r] {
					continue
				}
				for _, op := range iptRuleMarkOps(t, r) {
					a.addMark(k, kubeproxy.ModeIPTables, t.Family, t.Name, c.Name, r.Text, op, a.iptOwner(t, c.Name))
				}
			}
		}
	}
	for _, t := range a.rs.NFTables {
		if t == nil || a.skip[t] {
			continue
		}
		tf := nftFamily(t.Family)
		if t.Family != knftables.InetFamily && !sameFamily(tf, fam) {
			continue
		}
		owner := OwnerForeign
		if t.IsKubeProxy() && !a.chosen[t] {
			owner = OwnerKubeProxy
		}
		for _, c := range t.Chains {
			for _, r := range c.Rules {
				if a.own[r] {
					continue
				}
				for _, op := range nftRuleMarkOps(r) {
					a.addMark(k, kubeproxy.ModeNFTables, tf, t.Name, c.Name, r.Rule.Rule, op, owner)
				}
			}
		}
	}
}

func sameFamily(a, b kubeproxy.Family) bool {
	// a family-less table (restore input of unknown family) matches any
	return a == b || a == "" || b == ""
}

// iptOwner says whose a mark rule in chain is.
func (a *masqAnalysis) iptOwner(t *inspect.IPTable, chain string) string {
	switch chain {
	case kubeproxy.ChainMarkDrop, kubeproxy.ChainFirewall, kubeproxy.ChainKubeletCanary:
		return OwnerKubelet
	case kubeproxy.ChainMarkMasq, kubeproxy.ChainPostrouting, kubeproxy.ChainForward:
		// kube-proxy's own mark chains in a table that is not the one
		// analysed: the other backend's, or iptables leftovers seen from
		// nftables mode.
		if !a.chosen[t] {
			return OwnerKubeProxy
		}
	}
	return OwnerForeign
}

func (a *masqAnalysis) addMark(k uint32, mode kubeproxy.Mode, fam kubeproxy.Family, table, chain, rule string, op markOp, owner string) {
	if fam == "" {
		fam = a.r.Family
	}
	mc := MarkConflict{
		Mode: mode, Family: fam, Table: table, Chain: chain, Rule: rule,
		Op: op.op, Value: kubeproxy.FormatMark(op.value), Mask: kubeproxy.FormatMark(op.mask), Owner: owner,
	}
	if op.touched&k == 0 {
		if len(a.r.OtherMarks) < maxOtherMarks {
			mc.Reason = fmt.Sprintf("uses mark bits %s, which do not overlap kube-proxy's %s", kubeproxy.FormatMark(op.touched), kubeproxy.FormatMark(k))
			a.r.OtherMarks = append(a.r.OtherMarks, mc)
		}
		return
	}
	kb := fmt.Sprintf("kube-proxy's masquerade bit %s", kubeproxy.FormatMark(k))
	var why string
	switch {
	case op.how == "restore":
		why = "copies the connection mark into the packet mark over " + kb + ": packets can gain or lose the masquerade mark"
	case op.op == markOpTests:
		why = "tests " + kb + ": it acts on every packet kube-proxy marked for masquerading"
		if op.mask == 0xffffffff {
			why = "compares the whole packet mark, including " + kb + ": packets kube-proxy marked no longer match"
		}
	case op.how == "xor":
		why = "XORs " + kb + ": it sets it on unmarked packets (which kube-proxy then masquerades) and clears it on marked ones (which are then not masqueraded)"
	case op.how == "set-mark":
		why = "overwrites the whole packet mark, including " + kb
	case op.op == markOpSets:
		why = "sets " + kb + ": kube-proxy masquerades every packet marked here"
	default:
		why = "clears " + kb + ": packets kube-proxy marked are not masqueraded"
	}
	switch owner {
	case OwnerKubelet:
		why += "; this is the kubelet's (KUBE-MARK-DROP / iptablesDropBit, unused since 1.28 but left on upgraded nodes): if anything still jumps to KUBE-MARK-DROP, KUBE-FIREWALL drops what kube-proxy marked"
	case OwnerKubeProxy:
		why += "; this is kube-proxy's own rule in another table (the other proxy mode's or the other iptables backend's leftovers): two kube-proxy rule sets act on the node"
	}
	mc.Reason = why
	a.r.Conflicts = append(a.r.Conflicts, mc)
}

// iptPacketMarkMatch returns the rule's -m mark match, or nil when it has
// none or the --mark belongs to -m connmark (the connection mark).
func iptPacketMarkMatch(r *inspect.IPRule) *inspect.MarkMatch {
	mm := r.MarkMatch()
	if mm == nil || mm.Module != "mark" {
		return nil
	}
	return mm
}

// iptRuleMarkOps lists the packet-mark operations of an iptables rule.
func iptRuleMarkOps(t *inspect.IPTable, r *inspect.IPRule) []markOp {
	var ops []markOp
	if mm := iptPacketMarkMatch(r); mm != nil {
		ops = append(ops, markOp{op: markOpTests, value: mm.Value, mask: mm.Mask, touched: mm.Mask, how: "test"})
	}
	switch r.Target {
	case "MARK":
		if sm := r.SetMark(); sm != nil {
			ops = append(ops, classifySet(sm.Value, sm.Mask))
		}
	case "CONNMARK":
		if r.More != nil && r.More.RestoreMark {
			mask := r.More.RestoreMarkMask
			ops = append(ops, markOp{op: markOpSets, value: 0, mask: mask, touched: mask, how: "restore"})
		}
	}
	return ops
}

// classifySet names an iptables-style mark = (mark &^ mask) ^ value.
func classifySet(value, mask uint32) markOp {
	op := markOp{value: value, mask: mask, touched: value | mask}
	switch {
	case mask == 0:
		op.op, op.how = markOpClears, "xor"
	case mask == 0xffffffff && value != 0xffffffff:
		op.op, op.how = markOpSets, "set-mark"
	case value == 0:
		op.op, op.how = markOpClears, "and"
	default:
		op.op, op.how = markOpSets, "or"
	}
	return op
}

// nftRuleMarkOps lists the packet-mark operations of an nftables rule.
func nftRuleMarkOps(r *inspect.NFTRule) []markOp {
	var ops []markOp
	in := &r.Info
	if in.HasMarkTest {
		ops = append(ops, markOp{op: markOpTests, value: in.MarkTestValue, mask: in.MarkTestMask, touched: in.MarkTestMask, how: "test"})
	}
	if in.HasMarkSet {
		v := in.MarkSetValue
		switch in.MarkSetOp {
		case "or":
			ops = append(ops, markOp{op: markOpSets, value: v, mask: v, touched: v, how: "or"})
		case "xor":
			ops = append(ops, markOp{op: markOpClears, value: v, mask: 0, touched: v, how: "xor"})
		case "and":
			ops = append(ops, markOp{op: markOpClears, value: 0, mask: ^v, touched: ^v, how: "and"})
		default:
			ops = append(ops, markOp{op: markOpSets, value: v, mask: 0xffffffff, touched: 0xffffffff, how: "set-mark"})
		}
	}
	if in.MarkFromCT {
		mask := in.MarkFromCTMask
		ops = append(ops, markOp{op: markOpSets, value: 0, mask: mask, touched: mask, how: "restore"})
	}
	return ops
}
