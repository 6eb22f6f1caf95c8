package correlate

import (
	"fmt"
	"net"
	"slices"
	"sort"
	"strings"

	"sigs.k8s.io/knftables"

	"github.com/proxyrules/kubectl-proxyrules/inspect"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// StaleChain is a kube-proxy chain that no current Service or endpoint
// owns, or a leftover of an older version.
type StaleChain struct {
	Mode   string              `json:"mode"`
	Family string              `json:"family"`
	Table  string              `json:"table"`
	Chain  string              `json:"chain"`
	Kind   kubeproxy.ChainKind `json:"kind"`
	// ServicePort is the former owner when it could be recovered;
	// Protocol its protocol, as the chain's name or rules say.
	ServicePort string   `json:"servicePort"`
	Protocol    string   `json:"protocol,omitempty"`
	Endpoint    string   `json:"endpoint,omitempty"`
	Evidence    Evidence `json:"evidence"`
	Rules       int      `json:"rules"`
	// Referenced: a jump, goto or map element that traffic can reach
	// still leads here. Harmful: connections can be sent to a Service or
	// endpoint that is gone. Unreferenced stale chains are harmless.
	Referenced   bool     `json:"referenced"`
	ReferencedBy []string `json:"referencedBy,omitempty"`
	// Entries are the addresses (IP:port, as a dispatch rule or map
	// element matches them) whose new connections are sent here: what a
	// deleted Service is still reached at.
	Entries []string `json:"entries,omitempty"`
	// DNAT are the destinations its own rules DNAT to (nftables' service
	// chains, which hold their endpoints in a numgen map).
	DNAT []string `json:"dnat,omitempty"`
	// Flushed: an nftables chain kube-proxy has emptied and will delete on
	// a later sync.
	Flushed bool `json:"flushed,omitempty"`
	// Leftover: written by an older version that current kube-proxy never
	// cleans up (KUBE-XLB-), or by the kubelet (KUBE-MARK-DROP).
	Leftover bool `json:"leftover,omitempty"`
}

// StaleElement is an nftables map or set element that points at no current
// Service or at a stale chain.
type StaleElement struct {
	Family  string `json:"family"`
	Table   string `json:"table"`
	Map     string `json:"map"`
	Element string `json:"element"`
	Target  string `json:"target,omitempty"`
	// Owner is the Service port the element is for (its comment, or its
	// target chain's former owner), when known.
	Owner      string `json:"owner,omitempty"`
	Referenced bool   `json:"referenced"`
	Reason     string `json:"reason"`
	// More, on the one item that closes a map's list past
	// MaxStaleElementsListed: how many more stale elements it holds,
	// counted but not listed (Element is then empty).
	More int `json:"more,omitempty"`
}

// MaxStaleElementsListed bounds the stale elements listed per map or set:
// a set can hold a million stale cluster IPs, and each listed costs a
// finding; the rest are counted in one closing item.
const MaxStaleElementsListed = 100

// Stale is what FindStale finds.
type Stale struct {
	Chains   []StaleChain
	Elements []StaleElement
	// HaveObjects: API objects were given; without them only leftovers of
	// older versions can be found.
	HaveObjects bool
}

// LargeClusterMode says, per IP family, whether kube-proxy's iptables
// proxier is in large-cluster mode for these objects: more than 1000
// endpoints over all service ports (pkg/proxy/iptables/proxier.go).
func LargeClusterMode(objs *Objects) map[string]bool {
	if objs == nil {
		return nil
	}
	n := map[string]int{}
	for _, sp := range objs.ServicePorts() {
		if !sp.Proxied {
			continue
		}
		for _, ep := range sp.Endpoints {
			if ep.IPv6 {
				n[string(kubeproxy.IPv6)]++
			} else {
				n[string(kubeproxy.IPv4)]++
			}
		}
	}
	return map[string]bool{
		string(kubeproxy.IPv4): n[string(kubeproxy.IPv4)] > kubeproxy.LargeClusterEndpointsThreshold,
		string(kubeproxy.IPv6): n[string(kubeproxy.IPv6)] > kubeproxy.LargeClusterEndpointsThreshold,
	}
}

// FindStale lists stale chains and elements, harmful (still referenced)
// ones first. res must come from Attribute with the same ruleset; without
// API objects only leftovers of older versions can be found.
func FindStale(rs *inspect.Ruleset, res *Result, objs *Objects) *Stale {
	rep := &Stale{Chains: []StaleChain{}, Elements: []StaleElement{}, HaveObjects: res.HaveObjects}
	graphs := map[string]*refGraph{}
	graphOf := func(mode, family, table string) *refGraph {
		k := mode + "/" + family + "/" + table
		if g, ok := graphs[k]; ok {
			return g
		}
		var g *refGraph
		if mode == string(kubeproxy.ModeIPTables) {
			for _, t := range rs.IPTables {
				if string(t.Family) == family && t.Name == table {
					g = iptablesGraph(t)
					break
				}
			}
		} else {
			for _, t := range rs.NFTables {
				if string(t.IPFamily()) == family && t.Name == table {
					g = nftGraph(t)
					break
				}
			}
		}
		graphs[k] = g
		return g
	}
	for _, c := range res.Chains {
		leftover := strings.HasPrefix(c.Chain, kubeproxy.PrefixXLB) || c.Chain == kubeproxy.ChainMarkDrop
		if !c.Stale && !leftover {
			continue
		}
		s := StaleChain{Mode: c.Mode, Family: c.Family, Table: c.Table, Chain: c.Chain, Kind: c.Kind,
			ServicePort: c.ServicePort, Protocol: c.Protocol, Endpoint: c.Endpoint, Evidence: c.Evidence, Rules: int(c.Rules), Leftover: leftover}
		if g := graphOf(c.Mode, c.Family, c.Table); g != nil {
			s.ReferencedBy = g.referrers[c.Chain]
			s.Referenced = g.reachable[c.Chain]
			s.Entries = g.entries[c.Chain]
		}
		s.Flushed = c.Mode == string(kubeproxy.ModeNFTables) && c.Rules == 0
		if c.Mode == string(kubeproxy.ModeNFTables) && c.Kind != kubeproxy.KindEndpoint {
			s.DNAT = nftDNAT(rs, c.Family, c.Table, c.Chain)
		}
		rep.Chains = append(rep.Chains, s)
	}
	if res.HaveObjects {
		for _, t := range rs.NFTables {
			if t.IsKubeProxy() {
				rep.Elements = append(rep.Elements, staleElements(t, res, objs, graphOf(string(kubeproxy.ModeNFTables), string(t.IPFamily()), t.Name))...)
			}
		}
	}
	sort.SliceStable(rep.Chains, func(i, j int) bool {
		a, b := rep.Chains[i], rep.Chains[j]
		if a.Referenced != b.Referenced {
			return a.Referenced // harmful first
		}
		if a.ServicePort != b.ServicePort {
			return a.ServicePort < b.ServicePort
		}
		return a.Chain < b.Chain
	})
	return rep
}

// nftDNAT lists the DNAT destinations of an nftables chain's rules.
func nftDNAT(rs *inspect.Ruleset, family, table, chain string) []string {
	var out []string
	for _, t := range rs.NFTables {
		if string(t.IPFamily()) != family || t.Name != table {
			continue
		}
		if c := t.Chain(chain); c != nil {
			for _, r := range c.Rules {
				out = append(out, r.Info.DNAT...)
			}
		}
	}
	return out
}

// refGraph knows who refers to each chain and what traffic can reach.
type refGraph struct {
	referrers map[string][]string
	reachable map[string]bool
	// entries: the destinations (IP:port) a rule or map element matches
	// before it sends to the chain.
	entries map[string][]string
}

func (g *refGraph) addEntry(to, entry string) {
	if !slices.Contains(g.entries[to], entry) {
		g.entries[to] = append(g.entries[to], entry)
	}
}

func iptablesGraph(t *inspect.IPTable) *refGraph {
	g := &refGraph{referrers: map[string][]string{}, reachable: map[string]bool{}, entries: map[string][]string{}}
	edges := map[string][]string{}
	for _, c := range t.Chains {
		for _, r := range c.Rules {
			if r.Target == "" || t.Chain(r.Target) == nil {
				continue
			}
			edges[c.Name] = append(edges[c.Name], r.Target)
			g.addReferrer(r.Target, c.Name)
			if m := r.More; m != nil && m.Destination.Set() && !m.Destination.Not && m.DPort.Set() && !m.DPort.Not {
				g.addEntry(r.Target, net.JoinHostPort(strings.TrimSuffix(strings.TrimSuffix(m.Destination.Value, "/32"), "/128"), m.DPort.Value))
			}
		}
	}
	var roots []string
	for _, c := range t.Chains {
		if kubeproxy.BuiltinChains[c.Name] {
			roots = append(roots, c.Name)
		}
	}
	g.walk(roots, edges)
	return g
}

func nftGraph(t *inspect.NFTTable) *refGraph {
	g := &refGraph{referrers: map[string][]string{}, reachable: map[string]bool{}, entries: map[string][]string{}}
	edges := map[string][]string{}
	add := func(from, to string) {
		if t.Chain(to) == nil {
			return
		}
		edges[from] = append(edges[from], to)
		g.addReferrer(to, from)
	}
	var roots []string
	for _, c := range t.Chains {
		if c.IsBase() {
			roots = append(roots, c.Name)
		}
		for _, r := range c.Rules {
			for _, to := range append(append([]string{}, r.Info.Jumps...), r.Info.Gotos...) {
				add(c.Name, to)
			}
			for _, mapName := range r.Info.VMaps {
				if m := t.Map(mapName); m != nil {
					for _, el := range m.Elements {
						if to := verdictTarget(el); to != "" {
							add(c.Name, to)
							if e := elementEntry(el); e != "" {
								g.addEntry(to, e)
							}
						}
					}
				}
			}
		}
	}
	g.walk(roots, edges)
	return g
}

// addReferrer records that from refers to to. A chain's rules are read
// together, so a repeat can only be the last one added: checking that is
// enough, and keeps KUBE-MARK-MASQ, which every endpoint chain jumps to,
// linear instead of quadratic (40 s for 120k endpoint chains).
func (g *refGraph) addReferrer(to, from string) {
	list := g.referrers[to]
	if n := len(list); n == 0 || list[n-1] != from {
		g.referrers[to] = append(list, from)
	}
}

func (g *refGraph) walk(roots []string, edges map[string][]string) {
	stack := append([]string{}, roots...)
	for len(stack) > 0 {
		c := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if g.reachable[c] {
			continue
		}
		g.reachable[c] = true
		stack = append(stack, edges[c]...)
	}
}

// elementEntry is the IP:port a service-ips style element matches
// (IP . protocol . port), "" for other keys.
func elementEntry(el *knftables.Element) string {
	if len(el.Key) != 3 || net.ParseIP(el.Key[0]) == nil {
		return ""
	}
	return net.JoinHostPort(el.Key[0], el.Key[2])
}

func verdictTarget(el *knftables.Element) string {
	v := strings.Join(el.Value, " ")
	if to, ok := strings.CutPrefix(v, "goto "); ok {
		return to
	}
	if to, ok := strings.CutPrefix(v, "jump "); ok {
		return to
	}
	return ""
}

// staleElements finds map elements pointing at stale or missing chains,
// and no-endpoint elements naming service ports that are gone.
func staleElements(t *inspect.NFTTable, res *Result, objs *Objects, g *refGraph) []StaleElement {
	fam := string(t.IPFamily())
	stale := map[string]bool{}
	owner := map[string]string{}
	for _, c := range res.Chains {
		if c.Mode == string(kubeproxy.ModeNFTables) && c.Family == fam && c.Table == t.Name {
			stale[c.Chain] = c.Stale
			owner[c.Chain] = c.ServicePort
		}
	}
	current := map[string]bool{}
	ips := map[string]bool{}
	for _, sp := range objs.ServicePorts() {
		current[sp.String()] = true
		for _, ip := range sp.ClusterIPs {
			ips[CanonicalIP(ip)] = true
		}
	}
	var out []StaleElement
	for _, m := range t.Maps {
		list := staleList{out: out}
		used := g != nil && mapUsed(t, m.Name, g)
		for _, el := range m.Elements {
			e := StaleElement{Family: fam, Table: t.Name, Map: m.Name, Referenced: used}
			to := verdictTarget(el)
			e.Owner = owner[to]
			if el.Comment != nil && isServicePortName(*el.Comment) {
				e.Owner = *el.Comment
			}
			switch {
			case to != "" && stale[to]:
				e.Target, e.Reason = to, fmt.Sprintf("points at stale chain %s: traffic for this address still goes to a Service that is gone", to)
			case to != "" && t.Chain(to) == nil:
				e.Target, e.Reason = to, fmt.Sprintf("points at chain %s, which does not exist", to)
			case el.Comment != nil && isServicePortName(*el.Comment) && !current[*el.Comment]:
				e.Reason = fmt.Sprintf("names %s, which no longer exists", *el.Comment)
			default:
				continue
			}
			if list.add() {
				e.Element = elementText(el)
				list.out = append(list.out, e)
			}
		}
		out = list.close(StaleElement{Family: fam, Table: t.Name, Map: m.Name, Referenced: used})
	}
	if s := t.Set("cluster-ips"); s != nil {
		list := staleList{out: out}
		for _, el := range s.Elements {
			if len(el.Key) == 1 && !ips[CanonicalIP(el.Key[0])] && list.add() {
				list.out = append(list.out, StaleElement{Family: fam, Table: t.Name, Map: "cluster-ips", Element: el.Key[0], Referenced: true,
					Reason: "a cluster IP no current Service has"})
			}
		}
		out = list.close(StaleElement{Family: fam, Table: t.Name, Map: "cluster-ips", Referenced: true})
	}
	return out
}

// staleList lists the first MaxStaleElementsListed stale elements of one
// map or set and counts the rest.
type staleList struct {
	out          []StaleElement
	listed, more int
}

// add counts a stale element and says whether to list it.
func (l *staleList) add() bool {
	if l.listed < MaxStaleElementsListed {
		l.listed++
		return true
	}
	l.more++
	return false
}

// close ends the list: past the bound, with one item counting the rest.
func (l *staleList) close(more StaleElement) []StaleElement {
	if l.more > 0 {
		more.More = l.more
		more.Reason = fmt.Sprintf("and %d more stale elements of %s, counted but not listed (the first %d are)", l.more, more.Map, MaxStaleElementsListed)
		l.out = append(l.out, more)
	}
	return l.out
}

// mapUsed reports whether a reachable chain looks the map up.
func mapUsed(t *inspect.NFTTable, name string, g *refGraph) bool {
	for _, c := range t.Chains {
		if !g.reachable[c.Name] {
			continue
		}
		for _, r := range c.Rules {
			for _, v := range r.Info.VMaps {
				if v == name {
					return true
				}
			}
		}
	}
	return false
}
