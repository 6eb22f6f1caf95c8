package correlate

import (
	"fmt"
	"math"
	"net"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/knftables"

	"github.com/proxyrules/kubectl-proxyrules/inspect"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// Explanation is what `explain` reports for one Service.
type Explanation struct {
	Namespace       string   `json:"namespace"`
	Name            string   `json:"name"`
	Type            string   `json:"type"`
	ClusterIPs      []string `json:"clusterIPs,omitempty"`
	ExternalIPs     []string `json:"externalIPs,omitempty"`
	LoadBalancerIPs []string `json:"loadBalancerIPs,omitempty"`
	SourceRanges    []string `json:"loadBalancerSourceRanges,omitempty"`
	// Selector is the Service's pod selector (kubectl -l form), "" for none.
	Selector              string `json:"selector,omitempty"`
	SessionAffinity       string `json:"sessionAffinity"`
	AffinitySeconds       int32  `json:"affinitySeconds,omitempty"`
	ExternalTrafficPolicy string `json:"externalTrafficPolicy,omitempty"`
	InternalTrafficPolicy string `json:"internalTrafficPolicy"`
	Node                  string `json:"node,omitempty"`
	// Zone is the node's topology.kubernetes.io/zone, when its Node object
	// was given.
	Zone  string     `json:"zone,omitempty"`
	Ports []PortPath `json:"ports"`
}

// PortPath is the path packets for one service port take on the node, in
// one proxy mode and IP family, against what the EndpointSlices say.
type PortPath struct {
	ServicePort string `json:"servicePort"`
	Protocol    string `json:"protocol"`
	Port        int32  `json:"port"`
	NodePort    int32  `json:"nodePort,omitempty"`
	Mode        string `json:"mode"`
	Family      string `json:"family"`
	// Entries are the rules (or map elements) that send traffic for the
	// service to its chains, or reject it.
	Entries []Entry `json:"entries"`
	// Routes are the chains a new connection goes through, per kind of
	// traffic, ending in a DNAT.
	Routes    []Route        `json:"routes"`
	Endpoints []EndpointPath `json:"endpoints"`

	// What package diagnose judges, beyond the above.

	// Missing lists the service's addresses that no entry catches, where
	// kube-proxy writes one (a "no endpoints" reject counts as an entry).
	Missing []MissingEntry `json:"-"`
	// EmptyChains are the port's own chains that exist without rules.
	EmptyChains []string `json:"-"`
	// Misnamed are hops whose chain name belongs to another endpoint or
	// service port than the one it DNATs to.
	Misnamed []MisnamedHop `json:"-"`
	// Firewall is the load balancer's source-range filter, for services
	// with loadBalancerSourceRanges.
	Firewall *Firewall `json:"firewall,omitempty"`
	// Topology is the mode the EndpointSlice hints select for cluster
	// traffic on this node: PreferSameZone, PreferSameNode, unknown (the
	// node or its zone not known), or "" (none).
	Topology string `json:"topology,omitempty"`

	// LocalPolicy: a Local traffic policy applies to some of its traffic;
	// NodeKnown: the node is known, so local endpoints could be told.
	LocalPolicy, NodeKnown bool `json:"-"`
	// InternalExpected counts the endpoints kube-proxy should program for
	// cluster-IP traffic on this node.
	InternalExpected int `json:"-"`
	// LocalHops are the endpoints the rules reach through a Local-policy
	// chain: kube-proxy wrote them as this node's own.
	LocalHops []string `json:"-"`
	// OrphanChains maps expected endpoints no rule reaches to their
	// endpoint chain, where that chain is still in the dump with its
	// rules: the jump (nftables: the numgen map entry) to it was removed.
	OrphanChains map[string]string `json:"-"`
	// EmptyEndpointChains maps expected endpoints no rule reaches to
	// their endpoint chain, where the chain is jumped to but empty
	// (flushed): the kernel goes on to the next endpoint.
	EmptyEndpointChains map[string]string `json:"-"`
	// AffinityUnkept maps endpoints whose chain records ClientIP affinity
	// to the service chain that has no rule sending a client with that
	// record back to it (deleted): returning clients are spread again.
	AffinityUnkept map[string]string `json:"-"`
	// StandIns are what the walks had to make up, as the node's address
	// for its node port, when the input does not say it.
	StandIns []string `json:"-"`

	exp expectation // what kube-proxy should program here, for the walks' join
}

// MissingEntry is an address of the service no rule or element catches.
type MissingEntry struct {
	// Kind: clusterIP, nodePort, or external (external and load-balancer
	// IPs).
	Kind    string
	Address string
}

// MisnamedHop is a route hop whose chain name does not match its DNAT.
type MisnamedHop struct {
	Chain, Endpoint string
	// NameSays is the endpoint the (nftables) name spells; "" in iptables,
	// whose names are hashes.
	NameSays string
}

// Entry is a rule or map element that matches the service's traffic.
type Entry struct {
	// Kind: clusterIP, externalIP, loadBalancerIP, nodePort, noEndpoints,
	// noLocalEndpoints, firewall, healthCheck.
	Kind    string `json:"kind"`
	Address string `json:"address,omitempty"` // ip:port or port
	Table   string `json:"table"`
	Chain   string `json:"chain"` // chain (or map) holding the rule
	Target  string `json:"target"`
	Rule    string `json:"rule"`
}

// Route is one way into the service, walked through the node's rules for
// a new connection (package evaluate): the chains it goes through, the
// DNAT share of each endpoint, and what else happens to it.
type Route struct {
	// Traffic: internal (cluster IP) or external (NodePort, external and
	// load-balancer IPs).
	Traffic string `json:"traffic"`
	// Entry and Address are what was walked: clusterIP, nodePort,
	// externalIP, loadBalancerIP, at IP:PORT; From where the connection
	// started: pod (a pod on the node), node (a process on it), outside.
	Entry   string `json:"entry,omitempty"`
	Address string `json:"address,omitempty"`
	From    string `json:"from,omitempty"`
	// Source is the client address walked.
	Source string     `json:"source,omitempty"`
	Chains []string   `json:"chains"`
	Hops   []RouteHop `json:"hops"`
	// ShareSum is the sum of the endpoint shares: 1 when every new
	// connection is DNATed to an endpoint.
	ShareSum float64 `json:"shareSum"`
	// Other are the shares that are not DNATed: dropped, rejected, or
	// accepted as they are.
	Other []RouteOutcome `json:"otherOutcomes,omitempty"`
	// Masquerade: the DNATed connections are masqueraded.
	Masquerade bool `json:"masquerade"`
	// Affinity: rules that keep a client on its endpoint (ClientIP).
	AffinitySeconds int `json:"affinitySeconds,omitempty"`
	// Assumed are what the walk could not evaluate and took as not
	// holding (the route is that of a new client, of a packet no foreign
	// match caught). Hidden are the parts of kube-proxy's own rules that
	// nft does not show (iptables-nft read through nft), taken as
	// kube-proxy writes them.
	Assumed []string `json:"assumed,omitempty"`
	Hidden  []string `json:"hidden,omitempty"`
	// Truncated: the walk had more branches than it follows; the hops
	// and outcomes are the first ones only.
	Truncated bool `json:"truncated,omitempty"`
	// Note says in words what the route means for its clients, where
	// that takes more than its endpoints (a Local traffic policy).
	Note string `json:"note,omitempty"`
}

// RouteHop is one endpoint reached by a route.
type RouteHop struct {
	Chain    string  `json:"chain,omitempty"` // KUBE-SEP-…, endpoint-…; empty for an inline DNAT
	Endpoint string  `json:"endpoint"`
	Share    float64 `json:"share"`
	// Rule is the rule that picks the endpoint; of an nftables numgen
	// map, with only this endpoint's entry (the whole map, once per hop,
	// would make the output grow with the square of the endpoints).
	Rule string `json:"rule"`
	// ByName: the endpoint is what the chain's name says; its DNAT rule
	// was not seen (nft does not show iptables-nft's IPv6 DNAT).
	ByName bool `json:"byName,omitempty"`
}

// EndpointPath is one endpoint, in the rules and/or the EndpointSlices.
type EndpointPath struct {
	Endpoint string `json:"endpoint"`
	InRules  bool   `json:"inRules"`
	InSlices bool   `json:"inSlices"`
	// Expected: kube-proxy should have programmed it on this node, given
	// its conditions, its topology hints and the traffic policies; Why
	// says why it is or is not. ExpectedUnknown: the input cannot tell
	// (topology hints, and the node or its zone not known).
	Expected        bool   `json:"expected"`
	ExpectedUnknown bool   `json:"expectedUnknown,omitempty"`
	Why             string `json:"why,omitempty"`
	// Share is the fraction of new internal (cluster IP) connections it
	// gets; ExternalShare the same for external traffic when that differs.
	Share         float64  `json:"share"`
	ExternalShare *float64 `json:"externalShare,omitempty"`
	Chain         string   `json:"chain,omitempty"`
	Ready         *bool    `json:"ready,omitempty"`
	Serving       *bool    `json:"serving,omitempty"`
	Terminating   *bool    `json:"terminating,omitempty"`
	NodeName      string   `json:"nodeName,omitempty"`
	Local         bool     `json:"local,omitempty"`
}

// ExplainOptions selects what to explain.
type ExplainOptions struct {
	Namespace string
	Name      string
	// Port is a port name or number; empty for every port.
	Port string
	// Node is the node the dump comes from; local endpoints, Local
	// traffic policies and topology hints need it.
	Node NodeView
}

// Explain joins one Service's ports with the rules in rs.
func Explain(rs *inspect.Ruleset, objs *Objects, opts ExplainOptions) (*Explanation, error) {
	if objs == nil {
		return nil, fmt.Errorf("explain needs the Services and EndpointSlices (--from-objects, or a cluster)")
	}
	return newExplainer(rs, objs).explain(opts)
}

// ExplainAll explains every Service that kube-proxy writes rules for.
// Services are walked on every core: on a node of thousands of Services
// walking their routes is most of triage's time. Each worker has its own
// walkers (an evaluator caches what it reads); the shared indexes are
// built before they start and only read after.
func ExplainAll(rs *inspect.Ruleset, objs *Objects, node NodeView) []*Explanation {
	if objs == nil {
		return nil
	}
	objs.Warm()
	rs.Index()
	x := newExplainer(rs, objs)
	var names []ExplainOptions
	seen := map[string]bool{}
	for _, sp := range x.sps {
		k := sp.Namespace + "/" + sp.Name
		if seen[k] || !sp.Proxied {
			continue
		}
		seen[k] = true
		names = append(names, ExplainOptions{Namespace: sp.Namespace, Name: sp.Name, Node: node})
	}
	out := make([]*Explanation, len(names))
	workers := min(runtime.GOMAXPROCS(0), len(names)/explainPerWorker+1)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		own := *x
		own.walkers = map[string]*walker{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(names) {
					return
				}
				if ex, err := own.explain(names[i]); err == nil {
					out[i] = ex
				}
			}
		}()
	}
	wg.Wait()
	return slices.DeleteFunc(out, func(ex *Explanation) bool { return ex == nil })
}

// explainPerWorker: fewer Services than this are not worth a goroutine
// (each worker's evaluator reads the shared chains once more).
var explainPerWorker = 200

// explainer holds what explaining many Services shares, built once so that
// explaining every Service (triage) stays linear in the cluster: the
// service ports by Service, per nat table the rules of KUBE-SERVICES and
// KUBE-NODEPORTS by target chain, per filter table the rules that can
// name a service port, per nftables table the map elements by target and
// key.
type explainer struct {
	rs        *inspect.Ruleset
	objs      *Objects
	byName    map[string][]*corev1.Service
	sps       []*ServicePort
	byService map[string][]*ServicePort // "ns/name" → its ports, in sps order
	entries   map[*inspect.IPTable]map[string][]entryRule
	filters   map[*inspect.IPTable]*filterIndex
	nft       map[*inspect.NFTTable]*nftIndex
	walkers   map[string]*walker
}

type entryRule struct {
	chain string
	rule  *inspect.IPRule
}

func newExplainer(rs *inspect.Ruleset, objs *Objects) *explainer {
	sps := objs.ServicePorts()
	x := &explainer{rs: rs, objs: objs, byName: servicesByName(objs), sps: sps, byService: map[string][]*ServicePort{}, entries: map[*inspect.IPTable]map[string][]entryRule{},
		filters: map[*inspect.IPTable]*filterIndex{}, nft: map[*inspect.NFTTable]*nftIndex{}, walkers: map[string]*walker{}}
	for _, sp := range sps {
		k := sp.Namespace + "/" + sp.Name
		x.byService[k] = append(x.byService[k], sp)
	}
	for _, t := range rs.IPTables {
		switch t.Name {
		case kubeproxy.TableNAT:
			idx := map[string][]entryRule{}
			for _, chainName := range []string{kubeproxy.ChainServices, kubeproxy.ChainNodePorts} {
				if c := t.Chain(chainName); c != nil {
					for _, r := range c.Rules {
						idx[r.Target] = append(idx[r.Target], entryRule{chainName, r})
					}
				}
			}
			x.entries[t] = idx
		case kubeproxy.TableFilter:
			x.filters[t] = newFilterIndex(t)
		}
	}
	for _, t := range rs.NFTables {
		if t.IsKubeProxy() {
			x.nft[t] = newNFTIndex(t)
		}
	}
	return x
}

// filterChains are the filter chains whose rules can name a service port,
// in the order explain lists them.
var filterChains = []string{kubeproxy.ChainServices, kubeproxy.ChainExternalServices, kubeproxy.ChainNodePorts, kubeproxy.ChainProxyFirewall}

// filterIndex finds the filter rules that may concern a service port: by
// the service port name their comment starts with, and (read through nft,
// without comments) REJECT and DROP rules by destination address or, for
// node ports, destination port.
type filterIndex struct {
	byComment, byAddress, byPort map[string][]filterRule
}

type filterRule struct {
	chain, pos int // filterChains index, rule index: the order of the chains' rules
	rule       *inspect.IPRule
}

func newFilterIndex(t *inspect.IPTable) *filterIndex {
	fi := &filterIndex{byComment: map[string][]filterRule{}, byAddress: map[string][]filterRule{}, byPort: map[string][]filterRule{}}
	for ci, chainName := range filterChains {
		c := t.Chain(chainName)
		if c == nil {
			continue
		}
		for ri, r := range c.Rules {
			fr := filterRule{ci, ri, r}
			switch {
			case r.Comment != "":
				spn, _, _ := strings.Cut(r.Comment, " ")
				fi.byComment[spn] = append(fi.byComment[spn], fr)
			case r.Target == "REJECT" || r.Target == "DROP":
				if ip := stripPrefixLen(r.Destination().Value); ip != "" {
					fi.byAddress[CanonicalIP(ip)] = append(fi.byAddress[CanonicalIP(ip)], fr)
				} else {
					fi.byPort[r.DPort().Value] = append(fi.byPort[r.DPort().Value], fr)
				}
			}
		}
	}
	return fi
}

// candidates are the rules that may concern sp, in chain and rule order.
func (fi *filterIndex) candidates(sp *ServicePort) []filterRule {
	out := append([]filterRule{}, fi.byComment[sp.String()]...)
	for _, list := range [][]string{sp.ClusterIPs, sp.ExternalIPs, sp.LoadBalancerIPs} {
		for _, ip := range list {
			out = append(out, fi.byAddress[CanonicalIP(ip)]...)
		}
	}
	if sp.NodePort > 0 {
		out = append(out, fi.byPort[strconv.Itoa(int(sp.NodePort))]...)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].chain != out[j].chain {
			return out[i].chain < out[j].chain
		}
		return out[i].pos < out[j].pos
	})
	return slices.CompactFunc(out, func(a, b filterRule) bool { return a.rule == b.rule })
}

// nftEntryMaps are the verdict maps whose elements are a service port's
// entries, in the order explain lists them.
var nftEntryMaps = []string{"service-ips", "service-nodeports", "firewall-ips", "no-endpoint-services", "no-endpoint-nodeports"}

// nftIndex finds the map elements that may concern a service port: by
// the chain they jump to (service-ips, service-nodeports, firewall-ips),
// by address (no-endpoint-services) and by node port
// (no-endpoint-nodeports).
type nftIndex struct {
	byTarget, byAddress, byPort map[string][]nftElement
}

type nftElement struct {
	mapIdx, pos     int
	el              *knftables.Element
	verdict, target string
}

func newNFTIndex(t *inspect.NFTTable) *nftIndex {
	ni := &nftIndex{byTarget: map[string][]nftElement{}, byAddress: map[string][]nftElement{}, byPort: map[string][]nftElement{}}
	for mi, mapName := range nftEntryMaps {
		m := t.Map(mapName)
		if m == nil {
			continue
		}
		for ei, el := range m.Elements {
			verdict := strings.Join(el.Value, " ")
			ne := nftElement{mi, ei, el, verdict, strings.TrimPrefix(strings.TrimPrefix(verdict, "goto "), "jump ")}
			switch mapName {
			case "service-ips", "service-nodeports", "firewall-ips":
				ni.byTarget[ne.target] = append(ni.byTarget[ne.target], ne)
			case "no-endpoint-services":
				if len(el.Key) > 0 {
					ni.byAddress[CanonicalIP(el.Key[0])] = append(ni.byAddress[CanonicalIP(el.Key[0])], ne)
				}
			case "no-endpoint-nodeports":
				if len(el.Key) > 1 {
					ni.byPort[el.Key[1]] = append(ni.byPort[el.Key[1]], ne)
				}
			}
		}
	}
	return ni
}

// candidates are the elements that may concern a service port whose own
// chains are own, in map and element order.
func (ni *nftIndex) candidates(sp *ServicePort, own []string) []nftElement {
	var out []nftElement
	for _, c := range own {
		out = append(out, ni.byTarget[c]...)
	}
	for _, list := range [][]string{sp.ClusterIPs, sp.ExternalIPs, sp.LoadBalancerIPs} {
		for _, ip := range list {
			out = append(out, ni.byAddress[CanonicalIP(ip)]...)
		}
	}
	if sp.NodePort > 0 {
		out = append(out, ni.byPort[strconv.Itoa(int(sp.NodePort))]...)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].mapIdx != out[j].mapIdx {
			return out[i].mapIdx < out[j].mapIdx
		}
		return out[i].pos < out[j].pos
	})
	return slices.CompactFunc(out, func(a, b nftElement) bool { return a.el == b.el })
}

func (x *explainer) explain(opts ExplainOptions) (*Explanation, error) {
	rs := x.rs
	svc, err := resolveService(x.objs, x.byName, opts.Namespace, opts.Name)
	if err != nil {
		return nil, err
	}
	svcPorts := x.byService[svc.Namespace+"/"+svc.Name]
	if len(svcPorts) == 0 {
		return nil, fmt.Errorf("service %s/%s has no ports: kube-proxy writes no rules for it", svc.Namespace, svc.Name)
	}
	first := svcPorts[0]
	ex := &Explanation{
		Namespace: first.Namespace, Name: first.Name, Type: string(first.Type),
		ClusterIPs: first.ClusterIPs, ExternalIPs: first.ExternalIPs, LoadBalancerIPs: first.LoadBalancerIPs,
		SourceRanges: first.SourceRanges, Selector: first.Selector, SessionAffinity: "None", AffinitySeconds: first.AffinitySeconds,
		InternalTrafficPolicy: "Cluster", Node: opts.Node.Name, Zone: opts.Node.Zone, Ports: []PortPath{},
	}
	if first.AffinitySeconds > 0 {
		ex.SessionAffinity = "ClientIP"
	}
	if first.InternalLocal {
		ex.InternalTrafficPolicy = "Local"
	}
	if first.NodePort > 0 || len(first.ExternalIPs) > 0 || len(first.LoadBalancerIPs) > 0 {
		ex.ExternalTrafficPolicy = "Cluster"
		if first.ExternalLocal {
			ex.ExternalTrafficPolicy = "Local"
		}
	}
	if !first.Proxied {
		return ex, nil
	}
	matched := false
	for _, sp := range svcPorts {
		if opts.Port != "" && opts.Port != sp.PortName && opts.Port != strconv.Itoa(int(sp.Port)) {
			continue
		}
		matched = true
		for _, t := range rs.IPTables {
			if t.Name != kubeproxy.TableNAT || !serviceHasFamily(sp, t.Family) {
				continue
			}
			filter := findIPTable(rs, t.Family, kubeproxy.TableFilter, t.Backend)
			pp := explainIPTables(sp, t, filter, x.entries[t], x.filters[filter], opts.Node)
			x.walkRoutes(&pp, sp, t.Family, opts.Node)
			ex.Ports = append(ex.Ports, pp)
		}
		for _, t := range rs.NFTables {
			if !t.IsKubeProxy() {
				continue
			}
			fam := kubeproxy.IPv4
			if t.Family == knftables.IPv6Family {
				fam = kubeproxy.IPv6
			}
			if serviceHasFamily(sp, fam) {
				pp := explainNFTables(sp, t, x.nft[t], fam, opts.Node)
				x.walkRoutes(&pp, sp, fam, opts.Node)
				ex.Ports = append(ex.Ports, pp)
			}
		}
	}
	if !matched {
		return nil, &PortNotFoundError{Namespace: svc.Namespace, Name: svc.Name, Port: opts.Port, Ports: portList(svc)}
	}
	return ex, nil
}

func findIPTable(rs *inspect.Ruleset, fam kubeproxy.Family, name string, backend kubeproxy.Backend) *inspect.IPTable {
	var any *inspect.IPTable
	for _, t := range rs.IPTables {
		if t.Family == fam && t.Name == name {
			if t.Backend == backend {
				return t
			}
			any = t
		}
	}
	return any
}

func serviceHasFamily(sp *ServicePort, fam kubeproxy.Family) bool {
	for _, ip := range sp.ClusterIPs {
		if isIPv6(ip) == (fam == kubeproxy.IPv6) {
			return true
		}
	}
	return false
}

func isIPv6(s string) bool { return strings.Contains(s, ":") }

func hasExternal(sp *ServicePort) bool {
	return sp.NodePort > 0 || len(sp.ExternalIPs) > 0 || len(sp.LoadBalancerIPs) > 0
}

func stripPrefixLen(s string) string {
	if i := strings.IndexByte(s, '/'); i >= 0 {
		return s[:i]
	}
	return s
}

func contains(list []string, ip string) bool {
	for _, x := range list {
		if CanonicalIP(x) == CanonicalIP(ip) {
			return true
		}
	}
	return false
}

// addressKind says which of the service's addresses ip is.
func addressKind(sp *ServicePort, ip string) string {
	switch {
	case contains(sp.ClusterIPs, ip):
		return "clusterIP"
	case contains(sp.ExternalIPs, ip):
		return "externalIP"
	case contains(sp.LoadBalancerIPs, ip):
		return "loadBalancerIP"
	}
	return ""
}

func hostPort(ip string, port int32) string {
	return net.JoinHostPort(CanonicalIP(ip), strconv.Itoa(int(port)))
}

// explainIPTables follows KUBE-SERVICES → SVC/SVL/EXT/FW → SEP → DNAT.
func explainIPTables(sp *ServicePort, nat, filter *inspect.IPTable, entries map[string][]entryRule, filterIdx *filterIndex, node NodeView) PortPath {
	spn, proto := sp.String(), sp.Proto()
	hash := PortProtoHash(spn, proto)
	svc, svl, ext, fw := kubeproxy.PrefixService+hash, kubeproxy.PrefixLocal+hash, kubeproxy.PrefixExternal+hash, kubeproxy.PrefixFirewall+hash
	own := []string{svc, svl, ext, fw}
	pp := PortPath{ServicePort: spn, Protocol: string(sp.Protocol), Port: sp.Port, NodePort: sp.NodePort,
		Mode: string(kubeproxy.ModeIPTables), Family: string(nat.Family), Entries: []Entry{}, Routes: []Route{}, Endpoints: []EndpointPath{}}
	entryTarget := map[string]string{} // kind → chain
	for _, er := range natEntryRules(entries, own) {
		e := natEntry(sp, er)
		if _, seen := entryTarget[e.Kind]; !seen {
			entryTarget[e.Kind] = er.rule.Target
		}
		pp.Entries = append(pp.Entries, e)
	}
	if filter != nil {
		pp.Entries = append(pp.Entries, filterEntries(sp, filterIdx)...)
	}

	exp := expect(sp, kubeproxy.Family(pp.Family), node)
	pp.exp = exp
	if hasEndpoints(exp) {
		pp.Firewall = iptFirewall(nat, sp, kubeproxy.Family(pp.Family), node, fw)
	}

	// Addresses no entry catches.
	missingEntries(&pp, sp, entryTarget)
	missingExternalEntries(&pp, sp)
	for _, c := range own {
		if ch := nat.Chain(c); ch != nil && len(ch.Rules) == 0 {
			pp.EmptyChains = append(pp.EmptyChains, c)
		}
	}
	return pp
}

// natEntryRules are the nat rules that jump to the service port's own
// chains: cluster IPs (KUBE-SERVICES) first, then node ports, each in
// rule order.
func natEntryRules(entries map[string][]entryRule, own []string) []entryRule {
	var entryRules []entryRule
	for _, target := range own {
		entryRules = append(entryRules, entries[target]...)
	}
	sort.SliceStable(entryRules, func(i, j int) bool {
		a, b := entryRules[i], entryRules[j]
		if a.chain != b.chain {
			return a.chain == kubeproxy.ChainServices // cluster IPs first, then node ports
		}
		return a.rule.Line < b.rule.Line
	})
	return entryRules
}

// natEntry is a nat entry rule as an entry: a node port, or an address
// of the kind its comment says (else the Service's address it matches).
func natEntry(sp *ServicePort, er entryRule) Entry {
	chainName, r := er.chain, er.rule
	e := Entry{Table: kubeproxy.TableNAT, Chain: chainName, Target: r.Target, Rule: r.Text}
	if chainName == kubeproxy.ChainNodePorts {
		e.Kind, e.Address = "nodePort", r.DPort().Value
		if ip := stripPrefixLen(r.Destination().Value); ip != "" {
			e.Address = net.JoinHostPort(r.Destination().Value, r.DPort().Value)
		}
		return e
	}
	ip := stripPrefixLen(r.Destination().Value)
	e.Kind = addressKind(sp, ip)
	switch {
	case strings.HasSuffix(r.Comment, " cluster IP"):
		e.Kind = "clusterIP"
	case strings.HasSuffix(r.Comment, " external IP"):
		e.Kind = "externalIP"
	case strings.HasSuffix(r.Comment, " loadbalancer IP"):
		e.Kind = "loadBalancerIP"
	}
	if ip != "" {
		e.Address = net.JoinHostPort(ip, r.DPort().Value)
	}
	if e.Kind == "" {
		e.Kind = "unknown"
	}
	return e
}

// filterEntries are the filter table's entries of the service port: no
// endpoints, firewall, health checks.
func filterEntries(sp *ServicePort, filterIdx *filterIndex) []Entry {
	var out []Entry
	for _, fr := range filterIdx.candidates(sp) {
		chainName, r := filterChains[fr.chain], fr.rule
		kind := filterEntryKind(sp, r)
		if kind == "" {
			continue
		}
		addr := r.DPort().Value
		if ip := stripPrefixLen(r.Destination().Value); ip != "" {
			addr = net.JoinHostPort(ip, r.DPort().Value)
		}
		out = append(out, Entry{Kind: kind, Address: addr, Table: kubeproxy.TableFilter, Chain: chainName, Target: r.Target, Rule: r.Text})
	}
	return out
}

// filterEntryKind is what a filter rule does to the service port, by its
// comment, or, read through nft without comments, by the address and
// port a REJECT or DROP matches; "" for a rule not the port's.
func filterEntryKind(sp *ServicePort, r *inspect.IPRule) string {
	spn := sp.String()
	switch {
	case r.Comment == spn+" has no endpoints":
		return "noEndpoints"
	case r.Comment == spn+" has no local endpoints":
		return "noLocalEndpoints"
	case r.Comment == spn+" health check node port":
		return "healthCheck"
	case strings.HasPrefix(r.Comment, spn+" traffic not accepted by"):
		return "firewall"
	case r.Comment == "" && (r.Target == "REJECT" || r.Target == "DROP"):
		ip := stripPrefixLen(r.Destination().Value)
		if ip != "" && addressKind(sp, ip) != "" && r.DPort().Value == strconv.Itoa(int(sp.Port)) ||
			ip == "" && sp.NodePort > 0 && r.DPort().Value == strconv.Itoa(int(sp.NodePort)) {
			if r.Target == "DROP" {
				return "noLocalEndpoints"
			}
			return "noEndpoints"
		}
	}
	return ""
}

// missingExternalEntries adds the service port's external and
// load-balancer IPs of the family that no entry catches.
func missingExternalEntries(pp *PortPath, sp *ServicePort) {
	for _, ip := range append(append([]string{}, sp.ExternalIPs...), sp.LoadBalancerIPs...) {
		if isIPv6(ip) != (pp.Family == string(kubeproxy.IPv6)) {
			continue
		}
		found := false
		for _, e := range pp.Entries {
			if strings.HasPrefix(e.Address, CanonicalIP(ip)+":") || strings.HasPrefix(e.Address, "["+CanonicalIP(ip)+"]") {
				found = true
			}
		}
		if !found {
			pp.Missing = append(pp.Missing, MissingEntry{"external", hostPort(ip, sp.Port)})
		}
	}
}

// missingEntries records the cluster IPs and the node port no entry
// catches. No nat entry is right when the filter table rejects the cluster
// IP: no endpoints at all, or (internalTrafficPolicy Local) none on this
// node, which kube-proxy DROPs.
func missingEntries(pp *PortPath, sp *ServicePort, entryTarget map[string]string) {
	for _, ip := range sp.ClusterIPs {
		if isIPv6(ip) != (pp.Family == string(kubeproxy.IPv6)) {
			continue
		}
		if entryTarget["clusterIP"] == "" && !hasEntryFor(pp.Entries, hostPort(ip, sp.Port), "noEndpoints", "noLocalEndpoints") {
			pp.Missing = append(pp.Missing, MissingEntry{"clusterIP", hostPort(ip, sp.Port)})
		}
	}
	if sp.NodePort > 0 && entryTarget["nodePort"] == "" && !hasEntry(pp.Entries, "noEndpoints") && !hasEntry(pp.Entries, "noLocalEndpoints") {
		pp.Missing = append(pp.Missing, MissingEntry{"nodePort", strconv.Itoa(int(sp.NodePort))})
	}
}

func hasEntry(entries []Entry, kind string) bool {
	for _, e := range entries {
		if e.Kind == kind {
			return true
		}
	}
	return false
}

// hasEntryFor says whether an entry of one of kinds catches address.
func hasEntryFor(entries []Entry, address string, kinds ...string) bool {
	for _, e := range entries {
		for _, k := range kinds {
			if e.Kind == k && e.Address == address {
				return true
			}
		}
	}
	return false
}

func recentOf(r *inspect.IPRule) *inspect.Recent {
	if r.More == nil {
		return nil
	}
	return r.More.Recent
}

// joinEndpoints compares the endpoints the routes reach with the slices.
func joinEndpoints(pp *PortPath, sp *ServicePort, exp expectation) {
	// The endpoints are gathered in place, found by position: one
	// allocation per endpoint, copied out after, cost more than the join.
	// A pointer get returns holds until the next get.
	base := len(pp.Endpoints)
	pp.Endpoints = slices.Grow(pp.Endpoints, len(exp.byEndpoint))
	at := make(map[string]int, len(exp.byEndpoint))
	get := func(ep string) *EndpointPath {
		i, ok := at[ep]
		if !ok {
			i = len(pp.Endpoints)
			at[ep] = i
			pp.Endpoints = append(pp.Endpoints, EndpointPath{Endpoint: ep})
		}
		return &pp.Endpoints[i]
	}
	for ep, e := range exp.byEndpoint {
		p := get(ep)
		p.InSlices = true
		p.Ready, p.Serving, p.Terminating = ptr(e.Ready), ptr(e.Serving), ptr(e.Terminating)
		p.NodeName = e.NodeName
		p.Local = exp.node != "" && e.NodeName == exp.node
		p.Why = exp.why(sp, ep)
		p.ExpectedUnknown = exp.unknown(sp) && e.Ready
	}
	internalExpected, externalExpected := exp.internal(sp), exp.external(sp)
	for ep := range internalExpected {
		get(ep).Expected = true
	}
	if hasExternal(sp) {
		for ep := range externalExpected {
			get(ep).Expected = true
		}
	}
	for _, r := range pp.Routes {
		// A route ends in a Local-policy chain (KUBE-SVL-, local-) only
		// where kube-proxy found local endpoints for it.
		local := false
		if n := len(r.Chains); n > 0 {
			local = kubeproxy.HasAnyPrefix(r.Chains[n-1], kubeproxy.PrefixLocal, kubeproxy.NFTPrefixLocal)
		}
		for _, h := range r.Hops {
			if h.Endpoint == "" {
				continue
			}
			if local {
				pp.LocalHops = append(pp.LocalHops, h.Endpoint)
			}
			p := get(h.Endpoint)
			p.InRules = true
			if p.Chain == "" {
				p.Chain = h.Chain
			}
			if r.Traffic == "internal" {
				p.Share += h.Share
			} else {
				s := h.Share
				if p.ExternalShare != nil {
					s += *p.ExternalShare
				}
				p.ExternalShare = &s
			}
		}
	}
	for i := base; i < len(pp.Endpoints); i++ {
		if p := &pp.Endpoints[i]; p.ExternalShare != nil && math.Abs(*p.ExternalShare-p.Share) < 1e-9 {
			p.ExternalShare = nil
		}
	}
	sort.Slice(pp.Endpoints, func(i, j int) bool { return pp.Endpoints[i].Endpoint < pp.Endpoints[j].Endpoint })
	pp.LocalPolicy = sp.InternalLocal || (sp.ExternalLocal && hasExternal(sp))
	pp.NodeKnown = exp.localKnown
	pp.Topology = exp.topology
	pp.InternalExpected = len(internalExpected)
}

func ptr[T any](v T) *T { return &v }

// explainNFTables follows the service-ips / service-nodeports maps into
// the service's chains and their numgen DNAT maps (or endpoint chains).
func explainNFTables(sp *ServicePort, t *inspect.NFTTable, idx *nftIndex, fam kubeproxy.Family, node NodeView) PortPath {
	spn, proto := sp.String(), sp.Proto()
	base := NFTServiceBase(sp.Namespace, sp.Name, proto, sp.PortName)
	svc, local, ext, fw := kubeproxy.NFTPrefixService+base, kubeproxy.NFTPrefixLocal+base, kubeproxy.NFTPrefixExternal+base, kubeproxy.NFTPrefixFirewall+base
	own := map[string]bool{svc: true, local: true, ext: true, fw: true}
	pp := PortPath{ServicePort: spn, Protocol: string(sp.Protocol), Port: sp.Port, NodePort: sp.NodePort,
		Mode: string(kubeproxy.ModeNFTables), Family: string(fam), Entries: []Entry{}, Routes: []Route{}, Endpoints: []EndpointPath{}}
	portStr := strconv.Itoa(int(sp.Port))
	entryTarget := map[string]string{}
	for _, ne := range idx.candidates(sp, []string{svc, local, ext, fw}) {
		{
			mapName, el, verdict, target := nftEntryMaps[ne.mapIdx], ne.el, ne.verdict, ne.target
			e := Entry{Table: t.Name, Chain: mapName, Target: target}
			switch mapName {
			case "service-ips", "firewall-ips":
				if !own[target] || len(el.Key) < 3 {
					continue
				}
				e.Kind = addressKind(sp, el.Key[0])
				if mapName == "firewall-ips" {
					e.Kind = "firewall"
				}
				e.Address = net.JoinHostPort(el.Key[0], el.Key[2])
			case "service-nodeports":
				if !own[target] || len(el.Key) < 2 {
					continue
				}
				e.Kind, e.Address = "nodePort", el.Key[1]
			case "no-endpoint-services":
				if len(el.Key) < 3 || addressKind(sp, el.Key[0]) == "" || el.Key[2] != portStr || !strings.EqualFold(el.Key[1], proto) {
					continue
				}
				e.Kind, e.Address = "noEndpoints", net.JoinHostPort(el.Key[0], el.Key[2])
				if verdict == "drop" {
					e.Kind = "noLocalEndpoints"
				}
			case "no-endpoint-nodeports":
				if len(el.Key) < 2 || sp.NodePort == 0 || el.Key[1] != strconv.Itoa(int(sp.NodePort)) || !strings.EqualFold(el.Key[0], proto) {
					continue
				}
				e.Kind, e.Address = "noEndpoints", el.Key[1]
				if verdict == "drop" {
					e.Kind = "noLocalEndpoints"
				}
			}
			if e.Kind == "" {
				e.Kind = "unknown"
			}
			if _, seen := entryTarget[e.Kind]; !seen {
				entryTarget[e.Kind] = target
			}
			e.Rule = elementText(el)
			pp.Entries = append(pp.Entries, e)
		}
	}
	pp.Firewall = nftFirewall(t, sp, fam, node, fw)
	pp.exp = expect(sp, fam, node)
	missingEntries(&pp, sp, entryTarget)
	return pp
}

func elementText(el *knftables.Element) string {
	s := strings.Join(el.Key, " . ")
	if el.Comment != nil {
		s += fmt.Sprintf(" comment %q", *el.Comment)
	}
	if len(el.Value) > 0 {
		s += " : " + strings.Join(el.Value, " . ")
	}
	return s
}

// mapEntries are the entries of a rule's inline numgen map by key, and
// where the map's braces are in the rule.
type mapEntries struct {
	open, close int
	byKey       map[int]string
	// byData is the key of each entry's data: an endpoint ("10.0.0.1 .
	// 80") or the chain a verdict goes to, without "goto"/"jump".
	byData map[string]int
}

// numgenEntries splits the inline map that follows "numgen" in rule text
// as nft lists it: `… numgen random mod 2 vmap { 0 : goto a, 1 : goto b }`.
func numgenEntries(rule string) mapEntries {
	at := strings.Index(rule, "numgen ")
	if at < 0 {
		return mapEntries{}
	}
	open := strings.IndexByte(rule[at:], '{')
	if open < 0 {
		return mapEntries{}
	}
	open += at
	// Sized for its entries: a Service's map has one per endpoint.
	n := strings.Count(rule[open:], ",") + 1
	m := mapEntries{open: open, byKey: make(map[int]string, n), byData: make(map[string]int, n)}
	depth, start := 0, open+1
	for i := open; i < len(rule); i++ {
		switch rule[i] {
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				m.add(rule[start:i])
				m.close = i
				return m
			}
		case ',':
			if depth == 1 {
				m.add(rule[start:i])
				start = i + 1
			}
		}
	}
	return mapEntries{} // unbalanced: keep the whole rule
}

func (m mapEntries) add(entry string) {
	entry = strings.TrimSpace(entry)
	key, data, ok := strings.Cut(entry, " : ")
	if n, err := strconv.Atoi(strings.TrimSpace(key)); ok && err == nil {
		m.byKey[n] = entry
		data = strings.TrimSpace(data)
		if verb, chain, ok := strings.Cut(data, " "); ok && (verb == "goto" || verb == "jump") {
			data = chain
		}
		if _, dup := m.byData[data]; !dup {
			m.byData[data] = n
		}
	}
}

// rule is the rule with only the entry of key in its map (the whole rule
// when the entry is not found).
func (m mapEntries) rule(rule string, key int) string {
	entry, ok := m.byKey[key]
	if !ok || m.close <= m.open {
		return rule
	}
	return rule[:m.open+1] + " " + entry + " " + rule[m.close:]
}

func nftChainDNAT(c *inspect.NFTChain) string {
	for _, r := range c.Rules {
		if len(r.Info.DNAT) > 0 {
			return r.Info.DNAT[0]
		}
	}
	return ""
}
