// Package inspect is the model of what a node holds: iptables tables
// (per family and backend) and nftables tables, with their chains, rules,
// sets and maps, in plain types the readers fill (inspect/iptables,
// inspect/nft; inspect/input detects an input's format and picks one).
//
// It knows rulesets, not Kubernetes objects: attributing a chain to a Service
// is the job of package correlate, judging it that of package diagnose.
package inspect

import (
	"sigs.k8s.io/knftables"

	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// Format names an input format. Formats are detected, never declared.
type Format string

const (
	// FormatIPTablesSave is what iptables-save / ip6tables-save print.
	FormatIPTablesSave Format = "iptables-save"
	// FormatIPTablesRestore is kube-proxy's own iptables-restore input
	// (unquoted comments, --or-mark, -X lines, no built-in policies).
	FormatIPTablesRestore Format = "iptables-restore"
	// FormatIPTablesRules is `iptables -S` / `ip6tables -S` output (also
	// `-t TABLE -S [CHAIN]`, `--list-rules`, `-v` counters): -P, -N and -A
	// lines with no *table header and no COMMIT. The table is inferred.
	FormatIPTablesRules Format = "iptables-S"
	// FormatIPTablesExcerpt is rule lines without their table: what
	// `iptables-save | grep KUBE` leaves (-A lines, :CHAIN declarations).
	FormatIPTablesExcerpt Format = "iptables-excerpt"
	// FormatIPTablesList is `iptables -L -n [-v] [-x] [--line-numbers]`
	// (whole table or one chain).
	FormatIPTablesList Format = "iptables-L"
	// FormatIPTablesMixed is one input holding several iptables forms (a
	// paste of several commands' output).
	FormatIPTablesMixed Format = "iptables-mixed"
	// FormatNFTJSON is `nft -j list ruleset` (or `list table …`).
	FormatNFTJSON Format = "nft-json"
	// FormatNFTText is `nft list ruleset` text.
	FormatNFTText Format = "nft-text"
	// FormatKnftablesDump is knftables' `add table|chain|rule …` syntax, as
	// printed by knftables.Fake.Dump() and logged by kube-proxy.
	FormatKnftablesDump Format = "knftables-dump"
	// FormatMetrics is Prometheus text exposition (kube-proxy's /metrics).
	FormatMetrics Format = "prometheus"
)

// Ruleset is everything read from one node: any number of iptables tables
// (per family and backend) and nftables tables.
type Ruleset struct {
	Dumps    []Dump
	IPTables []*IPTable
	NFTables []*NFTTable
	// IPVS is what was read of IPVS mode's own state (ipvsstate.go); nil
	// when nothing was.
	IPVS *IPVSState
}

// Dump describes one input that was read.
type Dump struct {
	Source   string            `json:"source"`
	Format   Format            `json:"format"`
	Backend  kubeproxy.Backend `json:"backend,omitempty"`
	Version  string            `json:"version,omitempty"` // iptables or nft version from the header
	Tables   int               `json:"tables"`
	Rules    int               `json:"rules"`
	Warnings []string          `json:"warnings,omitempty"`
	// LegacyTablesPresent is set when iptables-nft-save printed
	// "# Warning: iptables-legacy tables present": the node has rules in
	// both backends.
	LegacyTablesPresent bool `json:"legacyTablesPresent,omitempty"`
}

// Merge adds the tables of other to r.
func (r *Ruleset) Merge(other *Ruleset) {
	if other == nil {
		return
	}
	r.Dumps = append(r.Dumps, other.Dumps...)
	r.IPTables = append(r.IPTables, other.IPTables...)
	r.NFTables = append(r.NFTables, other.NFTables...)
	r.mergeIPVS(other.IPVS)
}

// IPTable returns the first iptables table with that family and name.
func (r *Ruleset) IPTable(family kubeproxy.Family, name string) *IPTable {
	for _, t := range r.IPTables {
		if t.Family == family && t.Name == name {
			return t
		}
	}
	return nil
}

// NFTTable returns the first nftables table with that family and name.
func (r *Ruleset) NFTTable(family knftables.Family, name string) *NFTTable {
	for _, t := range r.NFTables {
		if t.Family == family && t.Name == name {
			return t
		}
	}
	return nil
}

// IPTable is one iptables table ("nat", "filter", …) of one family.
type IPTable struct {
	Family  kubeproxy.Family
	Name    string
	Backend kubeproxy.Backend
	Source  string
	Format  Format
	// FromNFT is set when the table was read from `nft list` output of an
	// iptables-nft node: it has no comments and some matches lack arguments.
	FromNFT bool
	// Partial is set when the input showed only some of the table's chains
	// (an excerpt, or `iptables -S CHAIN` / `-L CHAIN`): a chain missing
	// from it may well exist on the node.
	Partial bool

	Chains []*IPChain
	byName map[string]*IPChain
}

// NewIPTable returns an empty table.
func NewIPTable(family kubeproxy.Family, name string) *IPTable {
	return &IPTable{Family: family, Name: name}
}

// Chain returns the chain with that name, or nil.
func (t *IPTable) Chain(name string) *IPChain {
	t.index()
	return t.byName[name]
}

// Index builds every table's name indexes now (Chain, Set and Map build
// them on first use), so that several goroutines can read the ruleset at
// once. Nothing writes to it afterwards unless the ruleset is changed.
func (r *Ruleset) Index() {
	for _, t := range r.IPTables {
		t.index()
	}
	for _, t := range r.NFTables {
		t.index()
	}
}

// Reindex builds the name index now (Chain builds it on first use),
// merging chains a garbled dump declared twice.
func (t *IPTable) Reindex() { t.index() }

// index builds the name index on first use, sized exactly: a big table
// has 100k chains and a growing map would cost more than the chains.
func (t *IPTable) index() {
	if t.byName != nil && len(t.byName) == len(t.Chains) {
		return
	}
	t.byName = make(map[string]*IPChain, len(t.Chains))
	kept := t.Chains[:0]
	for _, c := range t.Chains {
		if first := t.byName[c.Name]; first != nil {
			// A garbled dump declared the chain twice: keep one.
			first.Rules = append(first.Rules, c.Rules...)
			continue
		}
		t.byName[c.Name] = c
		c.idx = int32(len(kept))
		kept = append(kept, c)
	}
	t.Chains = kept
}

// EnsureChain returns the chain with that name, adding it (as a user chain
// with policy "-") when it is missing.
func (t *IPTable) EnsureChain(name string) *IPChain {
	if c := t.Chain(name); c != nil {
		return c
	}
	c := &IPChain{Name: name, Policy: "-"}
	t.AddChain(c)
	return c
}

// AddChain appends a chain the caller knows to be new.
func (t *IPTable) AddChain(c *IPChain) {
	if t.byName != nil && len(t.byName) == len(t.Chains) {
		t.byName[c.Name] = c
	}
	c.idx = int32(len(t.Chains))
	t.Chains = append(t.Chains, c)
}

// RuleCount is the number of rules in the table.
func (t *IPTable) RuleCount() int {
	n := 0
	for _, c := range t.Chains {
		n += len(c.Rules)
	}
	return n
}

// IPChain is a chain of an iptables table.
type IPChain struct {
	Name string
	// Policy is ACCEPT/DROP for built-in chains and "-" for user chains.
	Policy  string
	Rules   []*IPRule
	Packets uint64
	Bytes   uint64
	Line    int32
	// Deleted is set when kube-proxy's restore input deletes the chain (-X).
	Deleted bool
	// OnlyReferenced is set when the input never showed the chain itself,
	// only rules jumping to it (an excerpt: `iptables -S KUBE-SVC-…` names
	// its KUBE-SEP- chains). It has no rules because they were not shown,
	// not because it is empty.
	OnlyReferenced bool

	idx int32 // position in the table's Chains
}

// Pos is the chain's position in its table's Chains.
func (c *IPChain) Pos() int { return int(c.idx) }

// Addr is an address match, possibly negated (`! -s 10.0.0.0/8`).
type Addr struct {
	Value string `json:"value"`
	Not   bool   `json:"not,omitempty"`
}

// Set reports whether the match is present.
func (a Addr) Set() bool { return a.Value != "" }

// MarkMatch is `-m mark [!] --mark value[/mask]`, or the same test of the
// connection mark (`-m connmark --mark`).
type MarkMatch struct {
	Value uint32
	Mask  uint32
	Not   bool
	// Module is "mark" (the packet mark) or "connmark" (the connection
	// mark); "" when unknown (iptables-nft read through nft).
	Module string
}

// MarkSet is a `-j MARK` target normalised to iptables-save's
// --set-xmark value/mask semantics: mark = (mark AND NOT mask) XOR value.
// --or-mark X is {X, X}; --xor-mark X is {X, 0}; --and-mark X is {0, ^X};
// --set-mark X[/M] is {X, M or 0xffffffff}.
type MarkSet struct {
	Value uint32
	Mask  uint32
	// Op is the spelling found in the dump: or-mark, xor-mark, and-mark,
	// set-mark, set-xmark (iptables); or, xor, and, set (iptables-nft read
	// through nft). Compare Value and Mask, not Op.
	Op string
}

// Recent is the `-m recent` match used for session affinity.
type Recent struct {
	Name    string
	Set     bool
	Rcheck  bool
	Seconds int
	Reap    bool
}

// IPRule is one `-A CHAIN …` line. String fields are substrings of the
// input (the parser converts the input to strings in large blocks), so a
// rule costs one struct and no per-field copies. Text is the rule after
// "-A CHAIN ". Matches that few rules use live in Extra, allocated on demand.
type IPRule struct {
	Text   string
	Line   int32
	Goto   bool // -g instead of -j
	Random bool // -m statistic --mode random

	Protocol string
	Source   Addr
	Comment  string
	// Target is the -j (or -g) target; empty for rules without a target
	// (kube-proxy's deliberate no-op KUBE-FW rule).
	Target string
	// ToDestination is DNAT's --to-destination.
	ToDestination string
	Probability   float64 // 0 when absent

	More *IPRuleMore
}

// IPRuleMore holds what fewer rules use. Keeping it out of IPRule halves
// the memory of a 300k-rule dump, where most rules are SEP and SVC jumps.
type IPRuleMore struct {
	Destination Addr
	DPort       Addr
	Packets     uint64 // from iptables-save -c
	Bytes       uint64
	InIface     Addr
	OutIface    Addr
	SrcType     Addr // -m addrtype --src-type
	DstType     Addr // -m addrtype --dst-type
	CTState     Addr
	MatchSet    Addr
	Mark        *MarkMatch
	SetMark     *MarkSet
	Recent      *Recent
	RandomFully bool
	// RestoreMark is `-j CONNMARK --restore-mark`: the packet mark is set
	// from the connection mark, in the bits of RestoreMarkMask (--nfmask
	// or --mask; all bits by default).
	RestoreMark     bool
	RestoreMarkMask uint32
	RejectWith      string
	// Unparsed holds arguments the parser kept but did not interpret.
	Unparsed []string
}

// Destination is the -d match.
func (r *IPRule) Destination() Addr {
	if r.More == nil {
		return Addr{}
	}
	return r.More.Destination
}

// DPort is the --dport (or --dports) match.
func (r *IPRule) DPort() Addr {
	if r.More == nil {
		return Addr{}
	}
	return r.More.DPort
}

// Extra returns r.More, allocating it when nil.
func (r *IPRule) Extra() *IPRuleMore {
	if r.More == nil {
		r.More = &IPRuleMore{}
	}
	return r.More
}

// RandomFully reports MASQUERADE/SNAT --random-fully.
func (r *IPRule) RandomFully() bool { return r.More != nil && r.More.RandomFully }

// MarkMatch returns the -m mark match, or nil.
func (r *IPRule) MarkMatch() *MarkMatch {
	if r.More == nil {
		return nil
	}
	return r.More.Mark
}

// SetMark returns the MARK target's operation, or nil.
func (r *IPRule) SetMark() *MarkSet {
	if r.More == nil {
		return nil
	}
	return r.More.SetMark
}

// NFTTable is one nftables table, in knftables' own types.
type NFTTable struct {
	knftables.Table
	Source string
	Format Format

	Chains []*NFTChain
	Sets   []*NFTSet
	Maps   []*NFTMap

	chainByName map[string]*NFTChain
	setByName   map[string]*NFTSet
	mapByName   map[string]*NFTMap
}

// NewNFTTable returns an empty table.
func NewNFTTable(family knftables.Family, name string) *NFTTable {
	return &NFTTable{Table: knftables.Table{Family: family, Name: name}}
}

// IsKubeProxy reports whether the table is kube-proxy's nftables-mode table.
func (t *NFTTable) IsKubeProxy() bool { return t.Name == kubeproxy.NFTTable }

// IPFamily is the table's IP family: IPv4 for ip, IPv6 for ip6, and the
// nftables family itself (inet, bridge, …) for the others.
func (t *NFTTable) IPFamily() kubeproxy.Family {
	switch t.Family {
	case knftables.IPv4Family:
		return kubeproxy.IPv4
	case knftables.IPv6Family:
		return kubeproxy.IPv6
	}
	return kubeproxy.Family(t.Family)
}

// Chain returns the chain with that name, or nil.
func (t *NFTTable) Chain(name string) *NFTChain {
	t.index()
	return t.chainByName[name]
}

// Set returns the set with that name, or nil.
func (t *NFTTable) Set(name string) *NFTSet {
	t.index()
	return t.setByName[name]
}

// Map returns the map with that name, or nil.
func (t *NFTTable) Map(name string) *NFTMap {
	t.index()
	return t.mapByName[name]
}

// EnsureChain returns the named chain, adding it when missing.
func (t *NFTTable) EnsureChain(name string) *NFTChain {
	if c := t.Chain(name); c != nil {
		return c
	}
	c := &NFTChain{Chain: knftables.Chain{Family: t.Family, Table: t.Name, Name: name}}
	t.Chains = append(t.Chains, c)
	t.chainByName[name] = c
	return c
}

// AddSet adds a set, replacing one of the same name.
func (t *NFTTable) AddSet(s *NFTSet) {
	t.index()
	if old := t.setByName[s.Name]; old != nil {
		*old = *s
		return
	}
	t.Sets = append(t.Sets, s)
	t.setByName[s.Name] = s
}

// AddMap adds a map, replacing one of the same name.
func (t *NFTTable) AddMap(m *NFTMap) {
	t.index()
	if old := t.mapByName[m.Name]; old != nil {
		*old = *m
		return
	}
	t.Maps = append(t.Maps, m)
	t.mapByName[m.Name] = m
}

// DistinctChains builds the name index now and reports whether no two
// of t.Chains share a name (a reader that appended chains itself checks
// it so).
func (t *NFTTable) DistinctChains() bool {
	t.index()
	return len(t.chainByName) == len(t.Chains)
}

func (t *NFTTable) index() {
	if t.chainByName != nil && len(t.chainByName) == len(t.Chains) &&
		len(t.setByName) == len(t.Sets) && len(t.mapByName) == len(t.Maps) {
		return
	}
	t.chainByName = make(map[string]*NFTChain, len(t.Chains))
	for _, c := range t.Chains {
		t.chainByName[c.Name] = c
	}
	t.setByName = make(map[string]*NFTSet, len(t.Sets))
	for _, s := range t.Sets {
		t.setByName[s.Name] = s
	}
	t.mapByName = make(map[string]*NFTMap, len(t.Maps))
	for _, m := range t.Maps {
		t.mapByName[m.Name] = m
	}
}

// RuleCount is the number of rules in the table.
func (t *NFTTable) RuleCount() int {
	n := 0
	for _, c := range t.Chains {
		n += len(c.Rules)
	}
	return n
}

// NFTChain is a chain with its rules.
type NFTChain struct {
	knftables.Chain
	Rules []*NFTRule
}

// IsBase reports whether the chain is a base chain (has a hook).
func (c *NFTChain) IsBase() bool { return c.Hook != nil }

// NFTRule is a rule, with the parts a diagnosis needs pulled out of its
// text by the nft reader (inspect/nft).
type NFTRule struct {
	knftables.Rule
	Info NFTRuleInfo
	// Line is the 1-based line of the input the rule was read from (text
	// and knftables dump input); 0 when unknown (JSON).
	Line int
}

// NFTSet is a set with its elements.
type NFTSet struct {
	knftables.Set
	Elements []*knftables.Element
}

// NFTMap is a map (or verdict map) with its elements.
type NFTMap struct {
	knftables.Map
	Elements []*knftables.Element
}

// NFTRuleInfo is what a diagnosis needs from one nftables rule.
type NFTRuleInfo struct {
	// Jumps and Gotos are chains reached directly or through an inline
	// verdict map (`numgen random mod 2 vmap { 0 : goto endpoint-… }`).
	Jumps []string
	Gotos []string
	// VMaps and Maps are named maps looked up (`vmap @service-ips`).
	VMaps []string
	Maps  []string
	// Sets are named sets referenced (`ip daddr @cluster-ips`,
	// `update @affinity-…`).
	Sets []string
	// DNAT holds the DNAT destinations as "ip:port" (IPv6 "[ip]:port"),
	// including every entry of a numgen map, in numgen index order.
	DNAT []string
	// Numgen is N of `numgen random mod N`, 0 when absent.
	Numgen int
	// NumgenTargets holds the target of each numgen index ("ip:port" for
	// DNAT maps, chain name for verdict maps), "" for an index with none.
	NumgenTargets []string
	// MarkSetOp/MarkSetValue: `meta mark set meta mark | 0x4000` is
	// {"or", 0x4000}; `^` is "xor"; a plain `mark set 0x4000` is "set".
	MarkSetOp    string
	MarkSetValue uint32
	HasMarkSet   bool
	// MarkFromCT is `meta mark set ct mark [and MASK]`: the packet mark
	// restored from the connection mark, in the bits of MarkFromCTMask.
	MarkFromCT     bool
	MarkFromCTMask uint32
	// MarkTest: `meta mark & 0x4000 != 0` is {Mask 0x4000, Value 0, Op "!="}.
	HasMarkTest   bool
	MarkTestMask  uint32
	MarkTestValue uint32
	MarkTestOp    string
	Masquerade    bool
	FullyRandom   bool
	// Saddr is the first `ip saddr` / `ip6 saddr` match's addresses or
	// prefixes (an anonymous set's elements); SaddrNot when it is `!=`.
	Saddr    []string
	SaddrNot bool
	// Verdict is a terminal verdict statement: accept, drop, reject, return.
	Verdict string
	// Random is `meta random & 2147483647 < N` (iptables-nft's --probability)
	// converted back to a probability; 0 when absent.
	Probability float64
	// XT lists iptables-nft `xt match|target NAME` extensions the rule uses.
	XT []string
}
