package correlate

import (
	"fmt"
	"slices"
	"strings"

	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// Topology modes, as kube-proxy derives them from the EndpointSlice hints
// (pkg/proxy/topology.go topologyModeFromHints).
const (
	TopologyNone     = ""
	TopologySameZone = "PreferSameZone"
	TopologySameNode = "PreferSameNode"
	// TopologyUnknown: the hints call for a topology mode this input cannot
	// settle (the node, or the node's zone, is not known).
	TopologyUnknown = "unknown"
)

// NodeView is what the join knows of the node the rules come from.
type NodeView struct {
	// Name is the node's name; "" when not known.
	Name string
	// Labeled: the Node object was given, so Zone is its
	// topology.kubernetes.io/zone label ("" when it has none).
	Labeled bool
	Zone    string
	// IPs are the Node object's InternalIP addresses.
	IPs []string
}

// hasEndpoints: some endpoint is usable anywhere (kube-proxy's
// hasAnyEndpoints), which decides whether iptables mode writes the
// service's firewall chain.
func hasEndpoints(e expectation) bool {
	for _, ep := range e.byEndpoint {
		if ep.Ready || ep.Serving && ep.Terminating {
			return true
		}
	}
	return false
}

// expectation is what kube-proxy should program for a service port on a
// node, from the endpoints' conditions, their topology hints and the
// traffic policies, as pkg/proxy/topology.go CategorizeEndpoints computes
// it (v1.37).
type expectation struct {
	cluster, local map[string]bool
	// localKnown is false when no node was given.
	localKnown bool
	node       string
	byEndpoint map[string]*Endpoint // into the service port's endpoints
	// topology is the mode the hints select for cluster traffic.
	topology string
	// clusterWhy / localWhy say, per endpoint, why it is or is not used.
	clusterWhy, localWhy map[string]string
}

func expect(sp *ServicePort, fam kubeproxy.Family, nv NodeView) expectation {
	// Sized once: triage expects every service port of the node, and
	// growing six maps per port cost more than the walks' bookkeeping.
	n := len(sp.Endpoints)
	e := expectation{cluster: make(map[string]bool, n), local: map[string]bool{}, localKnown: nv.Name != "", node: nv.Name,
		byEndpoint: make(map[string]*Endpoint, n), clusterWhy: make(map[string]string, n)}
	eps := make([]*Endpoint, 0, n)
	for i := range sp.Endpoints {
		ep := &sp.Endpoints[i]
		if ep.IPv6 != (fam == kubeproxy.IPv6) {
			continue
		}
		eps = append(eps, ep)
		e.byEndpoint[ep.String()] = ep
	}
	e.topology = topologyMode(eps, nv)

	// Cluster policy: ready endpoints available for the topology, else
	// serving terminating ones (topology no longer matters then).
	anyReady := false
	for _, ep := range eps {
		s := ep.String()
		switch {
		case !ep.Ready:
			e.clusterWhy[s] = notReadyWhy(ep)
		case e.topology == TopologyUnknown:
			e.clusterWhy[s] = "topology hints: " + hintsText(ep) + "; which endpoints this node uses depends on " + unknownWhat(nv)
		case !availableForTopology(ep, e.topology, nv):
			e.clusterWhy[s] = "hinted for " + hintsText(ep) + ", not for " + topologyTarget(e.topology, nv) + " (" + e.topology + ")"
		default:
			anyReady = true
			e.cluster[s] = true
			e.clusterWhy[s] = "ready"
			if e.topology != TopologyNone {
				e.clusterWhy[s] = "ready, hinted for " + topologyTarget(e.topology, nv) + " (" + e.topology + ")"
			}
		}
	}
	if !anyReady && e.topology != TopologyUnknown {
		for _, ep := range eps {
			if ep.Serving && ep.Terminating {
				e.cluster[ep.String()] = true
				e.clusterWhy[ep.String()] = "terminating but serving: no endpoint is ready, so kube-proxy uses the serving terminating ones"
			}
		}
	}

	// Local policy: this node's ready endpoints, else its serving
	// terminating ones; hints do not apply. Only a Local policy asks.
	if !sp.InternalLocal && !sp.ExternalLocal {
		return e
	}
	e.localWhy = make(map[string]string, n)
	var localReady, localServing []string
	for _, ep := range eps {
		s := ep.String()
		local := nv.Name != "" && ep.NodeName == nv.Name
		switch {
		case nv.Name == "":
			e.localWhy[s] = "the node is not known (pass --node)"
		case !local:
			where := "no node"
			if ep.NodeName != "" {
				where = ep.NodeName
			}
			e.localWhy[s] = "on " + where + ": the Local policy uses only this node's endpoints"
		case ep.Ready:
			localReady = append(localReady, s)
			e.localWhy[s] = "ready, on this node"
		case ep.Serving && ep.Terminating:
			localServing = append(localServing, s)
			e.localWhy[s] = "terminating but serving, on this node: used only while no endpoint here is ready"
		default:
			e.localWhy[s] = notReadyWhy(ep) + ", on this node"
		}
	}
	use := localReady
	if len(use) == 0 {
		use = localServing
	} else {
		for _, s := range localServing {
			e.localWhy[s] = "terminating, on this node: not used while an endpoint here is ready"
		}
	}
	for _, s := range use {
		e.local[s] = true
	}
	return e
}

// topologyMode is pkg/proxy/topology.go topologyModeFromHints, with
// TopologyUnknown where the input lacks the node or its zone.
func topologyMode(eps []*Endpoint, nv NodeView) string {
	ready, allNode, forNode, allZone, forZone := false, true, false, true, false
	for _, ep := range eps {
		if !ep.Ready {
			continue
		}
		ready = true
		if len(ep.NodeHints) == 0 {
			allNode = false
		} else if nv.Name != "" && slices.Contains(ep.NodeHints, nv.Name) {
			forNode = true
		}
		if len(ep.ZoneHints) == 0 {
			allZone = false
		} else if nv.Labeled && slices.Contains(ep.ZoneHints, nv.Zone) {
			forZone = true
		}
	}
	if !ready {
		return TopologyNone
	}
	if allNode {
		switch {
		case nv.Name == "":
			return TopologyUnknown
		case forNode:
			return TopologySameNode
		}
	}
	if allZone {
		switch {
		case !nv.Labeled:
			return TopologyUnknown
		case forZone:
			return TopologySameZone
		}
	}
	return TopologyNone
}

func availableForTopology(ep *Endpoint, mode string, nv NodeView) bool {
	switch mode {
	case TopologyNone:
		return true
	case TopologySameNode:
		return slices.Contains(ep.NodeHints, nv.Name)
	case TopologySameZone:
		return slices.Contains(ep.ZoneHints, nv.Zone)
	}
	return false
}

func topologyTarget(mode string, nv NodeView) string {
	if mode == TopologySameNode {
		return "this node (" + nv.Name + ")"
	}
	zone := nv.Zone
	if zone == "" {
		zone = `""`
	}
	return "this node's zone (" + zone + ")"
}

func hintsText(ep *Endpoint) string {
	var parts []string
	if len(ep.NodeHints) > 0 {
		parts = append(parts, "node "+strings.Join(ep.NodeHints, ","))
	}
	if len(ep.ZoneHints) > 0 {
		parts = append(parts, "zone "+strings.Join(ep.ZoneHints, ","))
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, ", ")
}

func unknownWhat(nv NodeView) string {
	if nv.Name == "" {
		return "the node (pass --node)"
	}
	return fmt.Sprintf("node %s's zone (pass its Node object: kubectl get node %s -o json, with --from-objects)", nv.Name, nv.Name)
}

func notReadyWhy(ep *Endpoint) string {
	switch {
	case ep.Terminating && ep.Serving:
		return "terminating: not used while a ready endpoint exists"
	case ep.Terminating:
		return "terminating and not serving"
	}
	return "not ready"
}

func (e expectation) internal(sp *ServicePort) map[string]bool {
	if sp.InternalLocal {
		return e.local
	}
	return e.cluster
}

func (e expectation) external(sp *ServicePort) map[string]bool {
	if sp.ExternalLocal {
		return e.local
	}
	return e.cluster
}

// why says why kube-proxy uses an endpoint for a service port's traffic
// here, or not: for internal traffic, and for external traffic when its
// policy differs.
func (e expectation) why(sp *ServicePort, ep string) string {
	pick := func(local bool) string {
		if local {
			return e.localWhy[ep]
		}
		return e.clusterWhy[ep]
	}
	w := pick(sp.InternalLocal)
	if hasExternal(sp) && sp.ExternalLocal != sp.InternalLocal {
		if x := pick(sp.ExternalLocal); x != w {
			w = "internal: " + w + "; external: " + x
		}
	}
	return w
}

// unknown reports whether whether kube-proxy uses ep cannot be told:
// cluster traffic whose topology mode the input cannot settle.
func (e expectation) unknown(sp *ServicePort) bool {
	if e.topology != TopologyUnknown {
		return false
	}
	return !sp.InternalLocal || hasExternal(sp) && !sp.ExternalLocal
}

// TopologyFit is what a port's cluster-traffic rules say of the node that
// wrote them: the zones and nodes whose hints select exactly the endpoints
// the rules reach, where the hints tell nodes apart.
type TopologyFit struct {
	// Zones: every ready endpoint has a zone hint, and the rules hold
	// exactly those hinted for each of these zones (fewer than all).
	Zones []string
	// Nodes: the same for node hints (PreferSameNode).
	Nodes []string
	// Endpoints are the endpoints the rules reach.
	Endpoints []string
	// Agrees: they are the endpoints kube-proxy programs on the node the
	// explanation was made for; Undecided: that cannot be told (the node,
	// or its zone, is not known).
	Agrees, Undecided bool
}

// TopologyFit says which zones' and nodes' hints select exactly the
// endpoints pp's cluster-traffic routes reach. It is nil where the rules
// tell nothing of the node: no hints on some ready endpoint, a selection
// every zone or node would make alike (all endpoints), a walk cut short,
// or rules that reach an endpoint that is not ready (drift, the
// terminating fallback) or none at all.
func (pp *PortPath) TopologyFit() *TopologyFit {
	var ready []*Endpoint
	for _, ep := range pp.exp.byEndpoint {
		if ep.Ready {
			if len(ep.ZoneHints) == 0 && len(ep.NodeHints) == 0 {
				return nil // kube-proxy ignores the hints on every node
			}
			ready = append(ready, ep)
		}
	}
	reached := map[string]bool{}
	for _, r := range pp.Routes {
		if r.Truncated {
			return nil
		}
		if n := len(r.Chains); n > 0 && kubeproxy.HasAnyPrefix(r.Chains[n-1], kubeproxy.PrefixLocal, kubeproxy.NFTPrefixLocal) {
			continue // Local policy: hints do not apply
		}
		for _, h := range r.Hops {
			if h.Endpoint != "" {
				reached[h.Endpoint] = true
			}
		}
	}
	if len(reached) == 0 {
		return nil
	}
	for s := range reached {
		if ep := pp.exp.byEndpoint[s]; ep == nil || !ep.Ready {
			return nil
		}
	}
	fit := &TopologyFit{
		Zones: hintsSelecting(ready, reached, func(ep *Endpoint) []string { return ep.ZoneHints }),
		Nodes: hintsSelecting(ready, reached, func(ep *Endpoint) []string { return ep.NodeHints }),
	}
	if len(fit.Zones) == 0 && len(fit.Nodes) == 0 {
		return nil
	}
	for s := range reached {
		fit.Endpoints = append(fit.Endpoints, s)
	}
	slices.Sort(fit.Endpoints)
	fit.Undecided = pp.exp.topology == TopologyUnknown
	fit.Agrees = !fit.Undecided && len(pp.exp.cluster) == len(reached)
	for s := range pp.exp.cluster {
		fit.Agrees = fit.Agrees && reached[s]
	}
	return fit
}

// hintsSelecting lists the hint values (zones or nodes) for which
// kube-proxy would program exactly the reached endpoints: every ready
// endpoint carries such a hint, and those naming the value are the
// reached ones, a strict subset of the ready ones.
func hintsSelecting(ready []*Endpoint, reached map[string]bool, hints func(*Endpoint) []string) []string {
	if len(reached) >= len(ready) {
		return nil
	}
	// count: the ready endpoints hinted for each value, and of them
	// those the rules reach; a value selects the reached ones when the
	// two are all of them.
	count, inRules := map[string]int{}, map[string]int{}
	for _, ep := range ready {
		if len(hints(ep)) == 0 {
			return nil
		}
		for _, h := range hints(ep) {
			count[h]++
			if reached[ep.String()] {
				inRules[h]++
			}
		}
	}
	var out []string
	for h, n := range count {
		if n == len(reached) && inRules[h] == n {
			out = append(out, h)
		}
	}
	slices.Sort(out)
	return out
}
