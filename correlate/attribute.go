package correlate

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/proxyrules/kubectl-proxyrules/inspect"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// Evidence says how an owner was established: a set of reasons, which
// JSON renders as a list of names ("hash", "comment", …).
type Evidence uint16

const (
	// EvidenceHash: the chain name equals the one recomputed from a current
	// Service port (and endpoint) in the API objects.
	EvidenceHash Evidence = 1 << iota
	// EvidenceLegacyHash: the same, with the pre-1.19 unnamed-port form.
	EvidenceLegacyHash
	// EvidenceComment: a kube-proxy comment names the service port, and the
	// chain name recomputed from it matches.
	EvidenceComment
	// EvidenceDNAT: the chain's DNAT target, hashed with the service port,
	// reproduces the chain name.
	EvidenceDNAT
	// EvidenceJump: the service port comes from a chain that jumps here.
	EvidenceJump
	// EvidenceName: an nftables name whose readable part matches its hash.
	EvidenceName
	// EvidenceTruncatedName: a truncated nftables name; its readable part
	// names the service port but cannot be verified by its hash.
	EvidenceTruncatedName
	// EvidenceFixed: one of the chains kube-proxy (or the kubelet) always
	// writes.
	EvidenceFixed
)

var evidenceNames = []string{"hash", "hash-pre-1.19", "comment", "dnat", "jump", "name", "truncated-name", "fixed"}

// Names lists the reasons in a fixed order.
func (e Evidence) Names() []string {
	out := []string{}
	for i, n := range evidenceNames {
		if e&(1<<i) != 0 {
			out = append(out, n)
		}
	}
	return out
}

// String joins the names with "+".
func (e Evidence) String() string { return strings.Join(e.Names(), "+") }

// MarshalJSON writes the list of names.
func (e Evidence) MarshalJSON() ([]byte, error) { return json.Marshal(e.Names()) }

// UnmarshalJSON reads a list of names.
func (e *Evidence) UnmarshalJSON(b []byte) error {
	var names []string
	if err := json.Unmarshal(b, &names); err != nil {
		return err
	}
	*e = 0
	for _, n := range names {
		i := slices.Index(evidenceNames, n)
		if i < 0 {
			return fmt.Errorf("unknown evidence %q", n)
		}
		*e |= 1 << i
	}
	return nil
}

// TableRef names the table a chain is in. Chains share one TableRef per
// table: a big node has 100k chains in one table.
type TableRef struct {
	Mode    string `json:"mode"` // iptables or nftables
	Family  string `json:"family"`
	Table   string `json:"table"`
	Backend string `json:"backend,omitempty"`
}

// ChainOwner is one kube-proxy chain with its owner. Its JSON form is the
// stable schema of `map -o json` (TableRef's fields appear inline).
type ChainOwner struct {
	*TableRef
	Chain       string              `json:"chain"`
	Kind        kubeproxy.ChainKind `json:"kind"`
	ServicePort string              `json:"servicePort"`
	Protocol    string              `json:"protocol,omitempty"`
	Endpoint    string              `json:"endpoint,omitempty"`
	Evidence    Evidence            `json:"evidence"`
	Rules       int32               `json:"rules"`
	Stale       bool                `json:"stale"`
	Note        string              `json:"note,omitempty"`
	// OnlyReferenced: the input showed only jumps to the chain, not the
	// chain (inspect.IPChain.OnlyReferenced).
	OnlyReferenced bool `json:"onlyReferenced,omitempty"`
}

// Result is the attribution of every kube-proxy chain of a ruleset.
type Result struct {
	Chains []ChainOwner
	// HaveObjects is set when API objects were given: only then can a
	// chain be called stale.
	HaveObjects  bool
	ServicePorts []*ServicePort
}

// Attribute joins the kube-proxy chains of rs with the service ports of
// objs (which may be nil: comments, DNAT targets and nftables names still
// attribute most chains).
func Attribute(rs *inspect.Ruleset, objs *Objects) *Result {
	res := &Result{}
	var sps []*ServicePort
	if objs != nil {
		sps = objs.ServicePorts()
		res.HaveObjects = true
	}
	res.ServicePorts = sps
	idx := newIndex(sps)
	n := 0
	for _, t := range rs.IPTables {
		n += len(t.Chains)
	}
	for _, t := range rs.NFTables {
		n += len(t.Chains)
	}
	res.Chains = make([]ChainOwner, 0, n)
	for _, t := range rs.IPTables {
		res.Chains = idx.iptables(res.Chains, t, res.HaveObjects)
	}
	for _, t := range rs.NFTables {
		if !t.IsKubeProxy() {
			continue // foreign tables are kept in the model, not attributed
		}
		res.Chains = idx.nftables(res.Chains, t, res.HaveObjects)
	}
	sortChains(res.Chains)
	return res
}

// sortChains orders chains by mode, family, table and name. It sorts
// small keys (the table's rank among the tables, the name and the index),
// then applies the permutation in place, so each (large) entry moves once
// and nothing is copied wholesale: comparing through the entries cost
// map -o json 5% of its CPU on 105k chains.
func sortChains(chains []ChainOwner) {
	type key struct {
		chain string
		table int32 // rank of (mode, family, table)
		i     int32
	}
	keys := make([]key, len(chains))
	var refs []*TableRef // one of each (mode, family, table)
	var last *TableRef
	at := int32(-1)
	for i := range chains {
		if r := chains[i].TableRef; r != last {
			last, at = r, -1
			for k, o := range refs {
				if o.Mode == r.Mode && o.Family == r.Family && o.Table == r.Table {
					at = int32(k)
					break
				}
			}
			if at < 0 {
				at = int32(len(refs))
				refs = append(refs, r)
			}
		}
		keys[i] = key{chains[i].Chain, at, int32(i)}
	}
	rank := tableRanks(refs)
	for i := range keys {
		keys[i].table = rank[keys[i].table]
	}
	slices.SortFunc(keys, func(a, b key) int {
		if c := cmp.Compare(a.table, b.table); c != 0 {
			return c
		}
		if c := strings.Compare(a.chain, b.chain); c != 0 {
			return c
		}
		return cmp.Compare(a.i, b.i)
	})
	order := make([]int32, len(chains))
	for k := range keys {
		order[k] = keys[k].i
	}
	applyOrder(chains, order)
}

// applyOrder moves chains[order[k]] to k, for every k (order is spent).
func applyOrder(chains []ChainOwner, order []int32) {
	// order[k] is the index of the entry that belongs at k: follow cycles.
	for start := range order {
		if order[start] < 0 || int(order[start]) == start {
			continue
		}
		tmp := chains[start]
		k := start
		for {
			next := int(order[k])
			order[k] = -1
			if next == start {
				chains[k] = tmp
				break
			}
			chains[k] = chains[next]
			k = next
		}
	}
}

// tableRanks is each table's rank by mode, family and name.
func tableRanks(refs []*TableRef) []int32 {
	byKey := make([]int32, len(refs))
	for i := range byKey {
		byKey[i] = int32(i)
	}
	slices.SortFunc(byKey, func(i, j int32) int {
		a, b := refs[i], refs[j]
		if c := cmp.Compare(a.Mode, b.Mode); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Family, b.Family); c != 0 {
			return c
		}
		return cmp.Compare(a.Table, b.Table)
	})
	rank := make([]int32, len(refs))
	for r, i := range byKey {
		rank[i] = int32(r)
	}
	return rank
}

type endpointRef struct {
	sp       *ServicePort
	endpoint string
}

// index maps the names kube-proxy would write back to service ports.
type index struct {
	sps        []*ServicePort
	byHash     map[string]*ServicePort // 16-char port/proto hash
	byLegacy   map[string]*ServicePort
	byEndpoint map[string]endpointRef // 16-char endpoint hash
	byNFTBase  map[string]endpointRef // nftables name base, built on first need
}

func newIndex(sps []*ServicePort) *index {
	n := 0
	for _, sp := range sps {
		n += len(sp.Endpoints)
	}
	idx := &index{
		sps:        sps,
		byHash:     make(map[string]*ServicePort, len(sps)),
		byLegacy:   map[string]*ServicePort{},
		byEndpoint: make(map[string]endpointRef, n),
	}
	for _, sp := range sps {
		if !sp.Proxied {
			continue
		}
		spn, proto := sp.String(), sp.Proto()
		idx.byHash[PortProtoHash(spn, proto)] = sp
		if sp.PortName == "" {
			idx.byLegacy[LegacyPortProtoHash(sp.Namespace, sp.Name, proto)] = sp
		}
		for _, ep := range sp.Endpoints {
			s := ep.String()
			idx.byEndpoint[EndpointHash(spn, proto, s)] = endpointRef{sp, s}
		}
	}
	return idx
}

func (idx *index) nftBases() map[string]endpointRef {
	if idx.byNFTBase != nil {
		return idx.byNFTBase
	}
	idx.byNFTBase = make(map[string]endpointRef, len(idx.byHash)+len(idx.byEndpoint))
	for _, sp := range idx.sps {
		if !sp.Proxied {
			continue
		}
		proto := sp.Proto()
		idx.byNFTBase[NFTServiceBase(sp.Namespace, sp.Name, proto, sp.PortName)] = endpointRef{sp: sp}
		for _, ep := range sp.Endpoints {
			s := ep.String()
			idx.byNFTBase[NFTEndpointBase(sp.Namespace, sp.Name, proto, sp.PortName, s)] = endpointRef{sp, s}
		}
	}
	return idx.byNFTBase
}

var iptablesPrefixKinds = []struct {
	prefix string
	kind   kubeproxy.ChainKind
}{
	{kubeproxy.PrefixService, kubeproxy.KindService},
	{kubeproxy.PrefixLocal, kubeproxy.KindLocal},
	{kubeproxy.PrefixExternal, kubeproxy.KindExternal},
	{kubeproxy.PrefixFirewall, kubeproxy.KindFirewall},
	{kubeproxy.PrefixEndpoint, kubeproxy.KindEndpoint},
	{kubeproxy.PrefixXLB, kubeproxy.KindLocal},
}

// iptables appends the chains of t to all. Service-level chains (SVC,
// SVL, EXT, FW, XLB) are attributed first, by hash, by comment, or through
// a sibling with the same hash; endpoint chains then by hash, or by hashing
// their DNAT target with a candidate service port.
func (idx *index) iptables(all []ChainOwner, t *inspect.IPTable, haveObjects bool) []ChainOwner {
	first := len(all)
	out := all
	ref := &TableRef{Mode: string(kubeproxy.ModeIPTables), Family: string(t.Family), Table: t.Name, Backend: string(t.Backend)}
	type pending struct {
		out   int32
		chain *inspect.IPChain
	}
	var serviceChains, endpointChains []pending
	var legacy []*ServicePort // whose service chains have the pre-1.19 names
	// The rules that jump to each chain, built only when a chain cannot be
	// attributed by its hash alone.
	var parents map[string][]jumpRef
	parentsOf := func(chain string) []jumpRef {
		if parents == nil {
			parents = map[string][]jumpRef{}
			for _, c := range t.Chains {
				for _, r := range c.Rules {
					if strings.HasPrefix(r.Target, kubeproxy.PrefixKube) {
						parents[r.Target] = append(parents[r.Target], jumpRef{c.Name, r})
					}
				}
			}
		}
		return parents[chain]
	}
	for _, c := range t.Chains {
		if !strings.HasPrefix(c.Name, kubeproxy.PrefixKube) {
			continue
		}
		o := ChainOwner{TableRef: ref, Chain: c.Name, Kind: kubeproxy.KindUnknown, Rules: int32(len(c.Rules)), OnlyReferenced: c.OnlyReferenced}
		// kube-proxy's fixed chains, and the kubelet's and IPVS mode's, so
		// that they are not mistaken for unknown ones.
		if f := kubeproxy.Fixed(c.Name); f != nil {
			o.Kind, o.Note, o.Evidence = kubeproxy.KindFixed, f.Owner, EvidenceFixed
			out = append(out, o)
			continue
		}
		var hash string
		for _, pk := range iptablesPrefixKinds {
			if strings.HasPrefix(c.Name, pk.prefix) {
				o.Kind, hash = pk.kind, c.Name[len(pk.prefix):]
				break
			}
		}
		switch {
		case o.Kind == kubeproxy.KindUnknown:
			o.Note = "not a chain kube-proxy writes"
			out = append(out, o)
			continue
		case strings.HasPrefix(c.Name, kubeproxy.PrefixXLB):
			o.Note = "pre-1.24 KUBE-XLB chain: kube-proxy ≥1.24 never deletes it"
		}
		if o.Kind == kubeproxy.KindEndpoint {
			o.Endpoint = dnatTarget(c)
			out = append(out, o)
			if endpointChains == nil {
				endpointChains = make([]pending, 0, len(t.Chains))
			}
			endpointChains = append(endpointChains, pending{int32(len(out) - 1), c})
			continue
		}
		if sp := idx.serviceOwner(&o, c, hash, haveObjects, parentsOf); sp != nil {
			legacy = append(legacy, sp)
		}
		out = append(out, o)
		serviceChains = append(serviceChains, pending{int32(len(out) - 1), c})
	}

	// The SVC, SVL, EXT and FW chains of a service port share one hash: a
	// chain without a comment of its own (SVL in large-cluster mode) takes
	// the owner its siblings proved.
	byHash := map[string]owner{}
	for _, pc := range serviceChains {
		if o := &out[pc.out]; o.ServicePort != "" {
			byHash[chainHash(pc.chain.Name)] = owner{o.ServicePort, o.Protocol, o.Evidence}
		}
	}
	for _, pc := range serviceChains {
		if o := &out[pc.out]; o.ServicePort == "" {
			if ow, ok := byHash[chainHash(pc.chain.Name)]; ok {
				o.ServicePort, o.Protocol, o.Evidence = ow.servicePort, ow.protocol, ow.evidence
			} else if o.Protocol == "" {
				o.Protocol = strings.ToUpper(ruleProtocol(pc.chain))
			}
		}
	}

	ownerOf := ownersOf(out[first:])
	candidateList := idx.candidateOwners(byHash)
	lk := endpointLookups{parentsOf: parentsOf, ownerOf: ownerOf, candidates: candidateList, legacy: idx.legacyEndpoints(legacy), pre119: len(legacy) > 0}
	for _, pc := range endpointChains {
		idx.endpointOwner(&out[pc.out], pc.chain, haveObjects, lk)
	}
	return out
}

// serviceOwner attributes a per-service-port chain (SVC, SVL, EXT, FW,
// XLB) by its hash, its pre-1.19 hash (the service port is returned), or
// a comment on it or on a jump to it (stale).
func (idx *index) serviceOwner(o *ChainOwner, c *inspect.IPChain, hash string, haveObjects bool, parentsOf func(string) []jumpRef) (legacy *ServicePort) {
	if sp := idx.byHash[hash]; sp != nil {
		o.ServicePort, o.Protocol, o.Evidence = sp.String(), string(sp.Protocol), EvidenceHash
		// kube-proxy ≥1.24 never writes KUBE-XLB-: whatever its hash
		// says, no current kube-proxy owns it.
		o.Stale = haveObjects && strings.HasPrefix(c.Name, kubeproxy.PrefixXLB)
		return nil
	}
	if sp := idx.byLegacy[hash]; sp != nil {
		o.ServicePort, o.Protocol, o.Evidence = sp.String(), string(sp.Protocol), EvidenceLegacyHash
		return sp
	}
	o.Stale = haveObjects
	o.ServicePort, o.Protocol = commentedOwner(c.Rules, hash)
	if o.ServicePort == "" {
		for _, j := range parentsOf(c.Name) {
			if o.ServicePort, o.Protocol = commentedOwner([]*inspect.IPRule{j.rule}, hash); o.ServicePort != "" {
				break
			}
		}
	}
	if o.ServicePort != "" {
		o.Evidence = EvidenceComment
	}
	return nil
}

// ownersOf finds a chain's entry among chains, indexing them on first need.
func ownersOf(chains []ChainOwner) func(chain string) *ChainOwner {
	var owners map[string]*ChainOwner
	return func(chain string) *ChainOwner {
		if owners == nil {
			owners = make(map[string]*ChainOwner, len(chains))
			for i := range chains {
				owners[chains[i].Chain] = &chains[i]
			}
		}
		return owners[chain]
	}
}

// candidateOwners lists, on first need, the service ports an orphaned
// endpoint chain may have belonged to: the current ones and those the
// table's service chains still name (byHash).
func (idx *index) candidateOwners(byHash map[string]owner) func() []owner {
	var candidates []owner
	return func() []owner {
		if candidates != nil {
			return candidates
		}
		seen := map[owner]bool{}
		for _, sp := range idx.sps {
			ow := owner{servicePort: sp.String(), protocol: string(sp.Protocol)}
			if sp.Proxied && !seen[ow] {
				seen[ow] = true
				candidates = append(candidates, ow)
			}
		}
		for _, ow := range byHash {
			ow.evidence = 0
			if !seen[ow] {
				seen[ow] = true
				candidates = append(candidates, ow)
			}
		}
		return candidates
	}
}

// chainHash is the 16-character hash at the end of a per-service chain
// name (every prefix ends in "-").
func chainHash(name string) string {
	if len(name) < 16 {
		return name
	}
	return name[len(name)-16:]
}

// commentedOwner finds a rule comment naming the service port whose hash
// is hash, and returns that port and its protocol.
func commentedOwner(rules []*inspect.IPRule, hash string) (servicePort, protocol string) {
	for _, r := range rules {
		if spn, proto, ok := commentOwner(r.Comment, r.Protocol, hash); ok {
			return spn, proto
		}
	}
	return "", ""
}

// jumpRef is a rule that jumps to a chain, and the chain it is in.
type jumpRef struct {
	chain string
	rule  *inspect.IPRule
}

func tryProtocols(spn, proto string, try func(spn, proto string) bool) bool {
	if proto != "" {
		return try(spn, proto)
	}
	for _, p := range []string{"tcp", "udp", "sctp"} {
		if try(spn, p) {
			return true
		}
	}
	return false
}

// commentOwner finds the service port named in a comment whose hash (with
// the rule's protocol, or any protocol) equals hash.
func commentOwner(comment, proto, hash string) (spn, protocol string, ok bool) {
	spn, ok = commentServicePort(comment)
	if !ok {
		return "", "", false
	}
	found := tryProtocols(spn, strings.ToLower(proto), func(s, p string) bool {
		if hash16(s, p, "") == hash {
			protocol = strings.ToUpper(p)
			return true
		}
		return false
	})
	if !found {
		return "", "", false
	}
	return strings.TrimSuffix(spn, ":"), protocol, true
}

// commentServicePort returns the "ns/name[:port]" word of a kube-proxy
// comment ("ns/svc:p80 cluster IP", "masquerade traffic for ns/svc:p80
// external destinations", "ns/svc:p80 -> 10.0.0.1:80", the pre-1.19
// "ns/svc: cluster IP").
func commentServicePort(comment string) (string, bool) {
	for comment != "" {
		var word string
		word, comment, _ = strings.Cut(comment, " ")
		if isServicePortName(word) {
			return word, true
		}
	}
	return "", false
}

func isServicePortName(w string) bool {
	ns, rest, ok := strings.Cut(w, "/")
	if !ok || ns == "" || rest == "" || strings.Contains(rest, "/") {
		return false
	}
	name, _, _ := strings.Cut(rest, ":")
	return isDNSish(ns) && isDNSish(name)
}

func isDNSish(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// dnatTarget is the --to-destination of the chain's DNAT rule.
func dnatTarget(c *inspect.IPChain) string {
	for _, r := range c.Rules {
		if r.Target == "DNAT" && r.ToDestination != "" {
			return r.ToDestination
		}
	}
	return ""
}

// ruleProtocol is the lower-case protocol the chain's rules match.
func ruleProtocol(c *inspect.IPChain) string {
	for _, r := range c.Rules {
		if r.Protocol != "" {
			return strings.ToLower(r.Protocol)
		}
	}
	return ""
}

var nftKinds = map[string]kubeproxy.ChainKind{
	kubeproxy.NFTPrefixService:  kubeproxy.KindService,
	kubeproxy.NFTPrefixLocal:    kubeproxy.KindLocal,
	kubeproxy.NFTPrefixExternal: kubeproxy.KindExternal,
	kubeproxy.NFTPrefixFirewall: kubeproxy.KindFirewall,
	kubeproxy.NFTPrefixEndpoint: kubeproxy.KindEndpoint,
}

// nftReferenced is the set of t's chains a rule or verdict-map element
// jumps or goes to.
func nftReferenced(t *inspect.NFTTable) map[string]bool {
	ref := map[string]bool{}
	for _, c := range t.Chains {
		for _, r := range c.Rules {
			for _, to := range r.Info.Jumps {
				ref[to] = true
			}
			for _, to := range r.Info.Gotos {
				ref[to] = true
			}
		}
	}
	for _, m := range t.Maps {
		for _, el := range m.Elements {
			if to := verdictTarget(el); to != "" {
				ref[to] = true
			}
		}
	}
	return ref
}

// nftables appends the chains of t to out.
func (idx *index) nftables(out []ChainOwner, t *inspect.NFTTable, haveObjects bool) []ChainOwner {
	ref := &TableRef{Mode: string(kubeproxy.ModeNFTables), Family: string(t.IPFamily()), Table: t.Name}
	var referenced map[string]bool // computed when an empty chain needs it
	for _, c := range t.Chains {
		o := ChainOwner{TableRef: ref, Chain: c.Name, Kind: kubeproxy.KindFixed, Rules: int32(len(c.Rules)), Evidence: EvidenceFixed}
		n, ok := ParseNFTName(c.Name)
		if !ok || nftKinds[n.Prefix] == "" {
			out = append(out, o)
			continue
		}
		o.Kind = nftKinds[n.Prefix]
		base := c.Name[len(n.Prefix):]
		if ref, ok := idx.nftBases()[base]; ok && (o.Kind == kubeproxy.KindEndpoint) == (ref.endpoint != "") {
			o.ServicePort, o.Protocol, o.Endpoint = ref.sp.String(), string(ref.sp.Protocol), ref.endpoint
			o.Evidence = EvidenceHash
			if n.HashOK {
				o.Evidence = EvidenceHash | EvidenceName
			}
			// kube-proxy flushes a chain it no longer uses (a Service port
			// whose endpoints all went unready keeps its name but loses its
			// service chain) and deletes it a sync later: empty and
			// unreferenced, it is stale though its owner is current. An
			// emptied chain something still jumps to is not: explain
			// judges that one.
			if haveObjects && len(c.Rules) == 0 {
				if referenced == nil {
					referenced = nftReferenced(t)
				}
				o.Stale = !referenced[c.Name]
			}
			out = append(out, o)
			continue
		}
		o.Stale = haveObjects
		o.Protocol = strings.ToUpper(n.Protocol)
		o.ServicePort = n.ServicePortName()
		o.Endpoint = n.Endpoint
		switch {
		case n.HashOK:
			o.Evidence = EvidenceName
		case n.Truncated:
			o.Evidence = EvidenceTruncatedName
		default:
			o.Evidence = 0 // no evidence
			o.Note = "the name's hash does not match its readable part"
		}
		out = append(out, o)
	}
	return out
}
