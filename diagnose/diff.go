package diagnose

import (
	"fmt"
	"sort"
	"strings"

	discoveryv1 "k8s.io/api/discovery/v1"

	corev1 "k8s.io/api/core/v1"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// NodeDiff is what two nodes (or one node at two times) do differently to
// Service traffic, and what they have programmed differently. Per Service
// port and family: what each route (an entry walked from a pod, the node
// or outside, as explain walks it) does to new connections (the endpoints
// reached and their shares, the verdicts of the rest, masquerade), and by
// ownership the entries (cluster IP, node port, external and load-balancer
// IPs), endpoints, per-service chains and stale chains one has and the
// other lacks. Node-wide: the fixed rules by what they do (the masquerade
// mark; KUBE-FORWARD, KUBE-FIREWALL, filter-forward). Rule order,
// counters, comments (large-cluster mode), the iptables backend, the proxy
// mode's naming and nftables handles do not count.
type NodeDiff struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	A          DiffSide `json:"a"`
	B          DiffSide `json:"b"`
	// ServicePorts are the Service ports (per family) that differ.
	ServicePorts []ServicePortDiff `json:"servicePorts"`
	// Same counts the Service ports (per family) programmed alike.
	Same int `json:"same"`
	// Unowned are kube-proxy chains no Service of either side's objects
	// owns, by name.
	Unowned UnownedDiff `json:"unowned"`
	// FixedRules are the differences of the fixed rules (kube-proxy's
	// chains of no Service), by what they do.
	FixedRules []FixedRuleDiff `json:"fixedRules"`
	// UnownedVirtualServers are the IPVS virtual servers no Service port
	// has (stale, an older version's), by name, on one side only; set when
	// a side is in IPVS mode (ipvs_diff.go).
	UnownedVirtualServers *UnownedDiff `json:"unownedVirtualServers,omitempty"`
	Notes                 []string     `json:"notes"`
	// Status: healthy when nothing differs, problems when something does
	// (a difference is not necessarily a fault: see Expected).
	Status Status `json:"status"`
}

// DiffSide names one side of a diff.
type DiffSide struct {
	// Source is the node or bundle as given.
	Source string `json:"source"`
	Node   string `json:"node,omitempty"`
	Mode   string `json:"mode"`
	// CollectedAt is when the side was read, when known (RFC 3339).
	CollectedAt string `json:"collectedAt,omitempty"`
}

// ServicePortDiff is one Service port's differences in one family.
type ServicePortDiff struct {
	ServicePort string      `json:"servicePort"`
	Protocol    string      `json:"protocol,omitempty"`
	Family      string      `json:"family"`
	OnlyA       []DiffEntry `json:"onlyA"`
	OnlyB       []DiffEntry `json:"onlyB"`
	// Expected says why the two may rightly differ (a Local traffic
	// policy, topology hints: each node uses its own endpoints), or that
	// the Service was deleted or created between the two.
	Expected string `json:"expected,omitempty"`
	// Routes are the routes whose new connections fare otherwise on A
	// than on B: endpoints and shares, verdicts, masquerade.
	Routes []RouteDiff `json:"routes,omitempty"`
	// VirtualServers are the frontends whose IPVS virtual servers differ,
	// when both sides are in IPVS mode (ipvs_diff.go).
	VirtualServers []IPVSVirtualServerDiff `json:"virtualServers,omitempty"`
}

// DiffEntry is one thing one side has programmed.
type DiffEntry struct {
	// What: chain (a per-service chain of that kind), endpoint (reached
	// by some traffic), route (an endpoint the traffic of Kind reaches),
	// entry.
	What string `json:"what"`
	// Kind: the chain kind (service, local, external, firewall) or the
	// entry kind (clusterIP, nodePort, …).
	Kind string `json:"kind,omitempty"`
	// Detail: the endpoint (ip:port) or the entry's address.
	Detail string `json:"detail,omitempty"`
	// Chain is the chain's name on that side.
	Chain string `json:"chain,omitempty"`
}

// UnownedDiff are chains without an owner, present on one side only.
type UnownedDiff struct {
	OnlyA []string `json:"onlyA"`
	OnlyB []string `json:"onlyB"`
}

// DiffSides is the input of Diff: each side's node and how to name it.
type DiffSides struct {
	A, B       *Node
	SourceA    string
	SourceB    string
	CollectedA string
	CollectedB string
}

// Diff compares two nodes by what their rules do to Service traffic and by
// ownership. The chains of both are attributed, and the routes of both
// walked, with the objects of both (B's, the newer, first), so that a
// chain whose Service was deleted between A and B still has its owner's
// name, and both sides walk the same entries.
func Diff(in DiffSides) *NodeDiff {
	objs := mergeObjects(in.B.Objects, in.A.Objects)
	d := &NodeDiff{APIVersion: APIVersion, Kind: "NodeDiff", ServicePorts: []ServicePortDiff{}, Notes: []string{},
		Unowned: UnownedDiff{OnlyA: []string{}, OnlyB: []string{}}, FixedRules: []FixedRuleDiff{}}
	d.A = DiffSide{Source: in.SourceA, Node: in.A.Name, Mode: string(DetectMode(in.A.Ruleset).Detected), CollectedAt: in.CollectedA}
	d.B = DiffSide{Source: in.SourceB, Node: in.B.Name, Mode: string(DetectMode(in.B.Ruleset).Detected), CollectedAt: in.CollectedB}
	if objs == nil {
		d.Notes = append(d.Notes, "no Services and EndpointSlices on either side: chains are compared by their comments and names only; pass --from-objects or bundles that hold them")
	}
	var o ownedSides
	var unownedA, unownedB []string
	o.entries[0], o.routes[0], unownedA = ownedThings(in.A, objs)
	o.entries[1], o.routes[1], unownedB = ownedThings(in.B, objs)
	ipvs := d.compareIPVS(in, objs, &o)
	families := d.comparedFamilies(in, &o)
	sameMode := d.A.Mode == d.B.Mode
	if !sameMode {
		// What only iptables mode writes: node ports on localhost
		// (route_localnet) and the health-check-port accepts.
		d.Notes = append(d.Notes, fmt.Sprintf("A is in %s mode, B in %s mode: what only one mode writes (localhost node ports, health-check accepts; KUBE-FORWARD, KUBE-FIREWALL, filter-forward) is not compared, nor where a verdict was decided", d.A.Mode, d.B.Mode))
		o.dropOneModeEntries()
	}
	why := expectedDifferences(in.A.Objects, in.B.Objects, objs)
	protocols := servicePortProtocols(objs)
	masqA, masqB := AnalyzeMasquerade(in.A.Ruleset, nil), AnalyzeMasquerade(in.B.Ruleset, nil)
	masqHidden := d.hiddenMasquerade(families, masqA, masqB)
	for _, k := range o.keys() {
		a, b := o.entries[0][k], o.entries[1][k]
		onlyA, onlyB := withoutRoutesOfOwnEndpoints(minus(a, b)), withoutRoutesOfOwnEndpoints(minus(b, a))
		routes := diffRoutes(o.routes[0][k], o.routes[1][k], sameMode, !masqHidden[k.family])
		vss := ipvs.of(k)
		if len(onlyA) == 0 && len(onlyB) == 0 && len(routes) == 0 && len(vss) == 0 {
			d.Same++
			continue
		}
		ns, name, _, _ := correlate.ParseServicePortName(k.servicePort)
		sp := ServicePortDiff{ServicePort: k.servicePort, Protocol: protocols[k.servicePort], Family: k.family,
			OnlyA: onlyA, OnlyB: onlyB, Expected: why[ns+"/"+name]}
		if len(routes) > 0 {
			sp.Routes = routes
		}
		sp.VirtualServers = vss
		d.ServicePorts = append(d.ServicePorts, sp)
	}
	d.Unowned.OnlyA = minusNames(unownedA, unownedB)
	d.Unowned.OnlyB = minusNames(unownedB, unownedA)
	d.FixedRules = diffFixedRules(in.A, in.B, masqA, masqB, families)
	d.Status = StatusHealthy
	if len(d.ServicePorts) > 0 || len(d.Unowned.OnlyA) > 0 || len(d.Unowned.OnlyB) > 0 || len(d.FixedRules) > 0 || d.UnownedVirtualServers.differ() {
		d.Status = StatusProblems
	}
	return d
}

// ownedSides is what A (0) and B (1) have programmed, per Service port
// and family (see ownedThings).
type ownedSides struct {
	entries [2]map[spKey]map[string]DiffEntry
	routes  [2]map[spKey]*sideRoutes
}

// dropFamily forgets both sides' Service ports of fam.
func (o *ownedSides) dropFamily(fam kubeproxy.Family) {
	for i := range 2 {
		for k := range o.entries[i] {
			if k.family == string(fam) {
				delete(o.entries[i], k)
			}
		}
		for k := range o.routes[i] {
			if k.family == string(fam) {
				delete(o.routes[i], k)
			}
		}
	}
}

// dropOneModeEntries forgets the entries only iptables mode writes: the
// health-check-port accepts and node ports on localhost.
func (o *ownedSides) dropOneModeEntries() {
	for _, m := range o.entries {
		for _, entries := range m {
			for key, e := range entries {
				if e.What == "entry" && (e.Kind == "healthCheck" || strings.HasPrefix(e.Detail, "127.0.0.0/8:")) {
					delete(entries, key)
				}
			}
		}
	}
}

// keys are the Service ports either side has, by name and family.
func (o *ownedSides) keys() []spKey {
	keys := map[spKey]bool{}
	for i := range 2 {
		for k := range o.entries[i] {
			keys[k] = true
		}
		for k := range o.routes[i] {
			keys[k] = true
		}
	}
	order := make([]spKey, 0, len(keys))
	for k := range keys {
		order = append(order, k)
	}
	sort.Slice(order, func(i, j int) bool {
		if order[i].servicePort != order[j].servicePort {
			return order[i].servicePort < order[j].servicePort
		}
		return order[i].family < order[j].family
	})
	return order
}

// comparedFamilies are the families both sides have rules for. A family
// one side has no rules for at all is a dump missing, not a difference of
// every Service: said once, and its Service ports dropped.
func (d *NodeDiff) comparedFamilies(in DiffSides, o *ownedSides) []kubeproxy.Family {
	var families []kubeproxy.Family
	for _, fam := range []kubeproxy.Family{kubeproxy.IPv4, kubeproxy.IPv6} {
		inA, inB := hasFamily(in.A, fam), hasFamily(in.B, fam)
		if inA && inB {
			families = append(families, fam)
		}
		if inA == inB {
			continue
		}
		side := "A"
		if inA {
			side = "B"
		}
		d.Notes = append(d.Notes, fmt.Sprintf("%s has no %s rules (a dump not given?): %s is not compared", side, fam, fam))
		o.dropFamily(fam)
	}
	return families
}

// servicePortProtocols is each Service port's protocol, by name.
func servicePortProtocols(objs *correlate.Objects) map[string]string {
	protocols := map[string]string{}
	if objs != nil {
		for _, sp := range objs.ServicePorts() {
			protocols[sp.String()] = string(sp.Protocol)
		}
	}
	return protocols
}

// hiddenMasquerade are the families whose masquerading is not compared:
// a masquerade rule nft does not show (iptables-nft read through nft)
// leaves it unknown. Said once per family.
func (d *NodeDiff) hiddenMasquerade(families []kubeproxy.Family, masqA, masqB []MasqReport) map[string]bool {
	masqHidden := map[string]bool{}
	for _, fam := range families {
		for _, side := range []struct {
			name string
			reps []MasqReport
		}{{"A", masqA}, {"B", masqB}} {
			for _, r := range side.reps {
				if r.Family == fam && r.RandomFullyUnknown && !masqHidden[string(fam)] {
					masqHidden[string(fam)] = true
					d.Notes = append(d.Notes, fmt.Sprintf("%s's %s masquerade rule is not visible (iptables-nft read through nft): whether connections are masqueraded is not compared for %s", side.name, fam, fam))
				}
			}
		}
	}
	return masqHidden
}

// diffFixedRules compares the fixed rules of the families both sides
// have: the masquerade facts in any modes, the rules' facts when both
// sides run the same mode.
func diffFixedRules(a, b *Node, masqA, masqB []MasqReport, families []kubeproxy.Family) []FixedRuleDiff {
	out := []FixedRuleDiff{}
	modesA, modesB := fixedModes(a), fixedModes(b)
	if len(modesA) == 0 || len(modesB) == 0 {
		return out
	}
	type pair struct{ a, b kubeproxy.Mode }
	var pairs []pair
	if strings.Join(modeNames(modesA), ",") == strings.Join(modeNames(modesB), ",") {
		for _, m := range modesA {
			pairs = append(pairs, pair{m, m})
		}
	} else {
		pairs = []pair{{modesA[0], modesB[0]}}
	}
	for _, fam := range families {
		for _, p := range pairs {
			same := p.a == p.b
			out = append(out, diffFixed(fam, fixedFacts(a, masqA, p.a, fam, same), fixedFacts(b, masqB, p.b, fam, same))...)
		}
	}
	return out
}

// fixedModes are the modes whose fixed rules a node holds: iptables (for
// ipvs mode too), nftables, or both.
func fixedModes(n *Node) []kubeproxy.Mode {
	switch DetectMode(n.Ruleset).Detected {
	case kubeproxy.ModeIPVS:
		if len(n.Ruleset.IPTables) == 0 {
			return nil // an IPVS table alone: no fixed rules read
		}
		return []kubeproxy.Mode{kubeproxy.ModeIPTables}
	case kubeproxy.ModeIPTables:
		return []kubeproxy.Mode{kubeproxy.ModeIPTables}
	case kubeproxy.ModeNFTables:
		return []kubeproxy.Mode{kubeproxy.ModeNFTables}
	case kubeproxy.ModeBoth:
		return []kubeproxy.Mode{kubeproxy.ModeIPTables, kubeproxy.ModeNFTables}
	}
	return nil
}

func modeNames(ms []kubeproxy.Mode) []string {
	var out []string
	for _, m := range ms {
		out = append(out, string(m))
	}
	return out
}

type spKey struct{ servicePort, family string }

// ownedThings lists, per Service port and family, what the node has
// programmed for it, keyed independently of the proxy mode's names: the
// entries and the endpoints traffic reaches (from the routes explain
// walks), the per-service chains by kind, and the stale chains (judged
// with the node's own objects) by former owner; and the routes, by what
// they do.
func ownedThings(n *Node, objs *correlate.Objects) (map[spKey]map[string]DiffEntry, map[spKey]*sideRoutes, []string) {
	out := map[spKey]map[string]DiffEntry{}
	routes := map[spKey]*sideRoutes{}
	add := func(k spKey, e DiffEntry) {
		if out[k] == nil {
			out[k] = map[string]DiffEntry{}
		}
		out[k][e.What+"|"+e.Kind+"|"+e.Detail] = e
	}
	var unowned []string
	for _, c := range correlate.Attribute(n.Ruleset, objs).Chains {
		switch {
		case c.Kind == kubeproxy.KindFixed || c.Kind == kubeproxy.KindEndpoint:
		case c.Stale && c.ServicePort != "": // listed as a stale chain below
		case c.ServicePort == "":
			unowned = append(unowned, c.Family+" "+c.Chain)
		default:
			add(spKey{c.ServicePort, c.Family}, DiffEntry{What: "chain", Kind: string(c.Kind), Chain: c.Chain})
		}
	}
	if objs != nil {
		for _, ex := range correlate.ExplainAll(n.Ruleset, objs, correlate.NodeView{}) {
			for _, pp := range ex.Ports {
				k := spKey{pp.ServicePort, pp.Family}
				for _, e := range pp.Entries {
					add(k, DiffEntry{What: "entry", Kind: e.Kind, Detail: e.Address})
				}
				chains := map[string]string{}
				if routes[k] == nil {
					routes[k] = &sideRoutes{}
				}
				for _, r := range pp.Routes {
					routes[k].add(r)
					for _, h := range r.Hops {
						if h.Chain != "" {
							chains[h.Endpoint] = h.Chain
						}
						// Which endpoints each kind of traffic reaches:
						// with a Local policy the nodes rightly differ
						// here while all reach every endpoint somehow.
						add(k, DiffEntry{What: "route", Kind: routeKind(r), Detail: h.Endpoint, Chain: h.Chain})
					}
				}
				for _, ep := range pp.Endpoints {
					if ep.InRules {
						add(k, DiffEntry{What: "endpoint", Detail: ep.Endpoint, Chain: chains[ep.Endpoint]})
					}
				}
			}
		}
	}
	if n.Objects != nil {
		found := correlate.FindStale(n.Ruleset, correlate.Attribute(n.Ruleset, n.Objects), n.Objects)
		for _, c := range found.Chains {
			if c.ServicePort == "" {
				unowned = append(unowned, c.Family+" "+c.Chain)
				continue
			}
			if c.Flushed && !c.Referenced {
				// kube-proxy's own cleanup, a sync away: nothing to
				// traffic, and two nodes differ in it by timing alone.
				continue
			}
			add(spKey{c.ServicePort, c.Family}, DiffEntry{What: "stale chain", Kind: string(c.Kind), Detail: c.Endpoint, Chain: c.Chain})
		}
	}
	return out, routes, unowned
}

// routeKind names a route's traffic: internal (from a pod), external
// (from outside), and those walked from elsewhere ("external from pod").
func routeKind(r correlate.Route) string {
	switch {
	case r.From == "" || r.Traffic == "internal" && r.From == "pod" || r.Traffic == "external" && r.From == "outside":
		return r.Traffic
	}
	return r.Traffic + " from " + r.From
}

func minus(a, b map[string]DiffEntry) []DiffEntry {
	out := []DiffEntry{}
	for k, e := range a {
		if _, ok := b[k]; !ok {
			out = append(out, e)
		}
	}
	rank := map[string]int{"entry": 0, "chain": 1, "endpoint": 2, "route": 3, "stale chain": 4}
	sort.Slice(out, func(i, j int) bool {
		if rank[out[i].What] != rank[out[j].What] {
			return rank[out[i].What] < rank[out[j].What]
		}
		if out[i].Kind != out[j].Kind {
			return out[i].Kind < out[j].Kind
		}
		return out[i].Detail < out[j].Detail
	})
	return out
}

// withoutRoutesOfOwnEndpoints drops the routes to an endpoint the same list
// already has as only on that side: the endpoint line says it; routes say
// something only for an endpoint both sides reach, by different traffic.
func withoutRoutesOfOwnEndpoints(entries []DiffEntry) []DiffEntry {
	own := map[string]bool{}
	for _, e := range entries {
		if e.What == "endpoint" {
			own[e.Detail] = true
		}
	}
	out := entries[:0]
	for _, e := range entries {
		if e.What != "route" || !own[e.Detail] {
			out = append(out, e)
		}
	}
	return out
}

func minusNames(a, b []string) []string {
	in := map[string]bool{}
	for _, s := range b {
		in[s] = true
	}
	out := []string{}
	for _, s := range a {
		if !in[s] {
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}

// mergeObjects is newer's objects plus older's Services and slices that
// newer no longer has (by namespace and name): the former owners.
func mergeObjects(newer, older *correlate.Objects) *correlate.Objects {
	switch {
	case newer == nil && older == nil:
		return nil
	case newer == nil:
		return older
	case older == nil:
		return newer
	}
	out := &correlate.Objects{Other: newer.Other}
	seen := map[string]bool{}
	for _, s := range newer.Services {
		seen[s.Namespace+"/"+s.Name] = true
		out.Services = append(out.Services, s)
	}
	for _, s := range older.Services {
		if !seen[s.Namespace+"/"+s.Name] {
			out.Services = append(out.Services, s)
		}
	}
	seenSlice := map[string]bool{}
	for _, es := range newer.EndpointSlices {
		seenSlice[es.Namespace+"/"+es.Name] = true
		out.EndpointSlices = append(out.EndpointSlices, es)
	}
	for _, es := range older.EndpointSlices {
		// A deleted Service's slices only: a live Service's are newer's.
		if !seenSlice[es.Namespace+"/"+es.Name] && !seen[es.Namespace+"/"+sliceService(es)] {
			out.EndpointSlices = append(out.EndpointSlices, es)
		}
	}
	return out
}

func sliceService(es *discoveryv1.EndpointSlice) string {
	return es.Labels[discoveryv1.LabelServiceName]
}

// expectedDifferences says, per Service, why two nodes may rightly
// program it differently.
func expectedDifferences(a, b, merged *correlate.Objects) map[string]string {
	out := map[string]string{}
	if merged == nil {
		return out
	}
	has := func(objs *correlate.Objects, key string) bool {
		if objs == nil {
			return true // unknown: do not claim a deletion
		}
		for _, s := range objs.Services {
			if s.Namespace+"/"+s.Name == key {
				return true
			}
		}
		return false
	}
	for _, s := range merged.Services {
		key := s.Namespace + "/" + s.Name
		switch {
		case !has(b, key):
			out[key] = "the Service is in A's objects only: deleted between the two"
		case !has(a, key):
			out[key] = "the Service is in B's objects only: created between the two"
		case local(s):
			out[key] = "Local traffic policy: each node uses its own endpoints"
		case s.Spec.TrafficDistribution != nil || hinted(merged, s):
			out[key] = "topology hints: each node uses the endpoints hinted for its zone or itself"
		}
	}
	return out
}

func local(s *corev1.Service) bool {
	return s.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal ||
		s.Spec.InternalTrafficPolicy != nil && *s.Spec.InternalTrafficPolicy == corev1.ServiceInternalTrafficPolicyLocal
}

func hinted(objs *correlate.Objects, s *corev1.Service) bool {
	for _, es := range objs.EndpointSlices {
		if es.Namespace != s.Namespace || sliceService(es) != s.Name {
			continue
		}
		for _, ep := range es.Endpoints {
			if ep.Hints != nil && (len(ep.Hints.ForZones) > 0 || len(ep.Hints.ForNodes) > 0) {
				return true
			}
		}
	}
	return false
}

// String is one line for the entry: "endpoint 10.244.0.5:8080 (KUBE-SEP-…)".
func (e DiffEntry) String() string {
	var parts []string
	switch e.What {
	case "chain":
		parts = append(parts, e.Kind+" chain")
	case "stale chain":
		parts = append(parts, "stale "+e.Kind+" chain", e.Detail)
	case "entry":
		parts = append(parts, e.Kind, e.Detail)
	case "route":
		parts = append(parts, e.Kind, "traffic reaches", e.Detail)
	default:
		parts = append(parts, e.What, e.Detail)
	}
	s := strings.Join(strings.Fields(strings.Join(parts, " ")), " ")
	if e.Chain != "" {
		s += fmt.Sprintf(" (%s)", e.Chain)
	}
	return s
}

func hasFamily(n *Node, fam kubeproxy.Family) bool {
	return hasRulesOf(n, kubeproxy.ModeBoth, fam) || ipvsHasFamily(n, fam)
}
