package diagnose

import (
	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/inspect"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// ChainMap is the report of `map`: every kube-proxy chain with its owner.
type ChainMap struct {
	APIVersion string                 `json:"apiVersion"`
	Kind       string                 `json:"kind"`
	Node       string                 `json:"node,omitempty"`
	Sources    []inspect.Dump         `json:"sources"`
	Summary    MapSummary             `json:"summary"`
	Chains     []correlate.ChainOwner `json:"chains"`
	// VirtualServers are the IPVS virtual servers (IPVS mode), each with
	// its owner (ipvs_map.go); Summary.IPVS is set when a table was read.
	VirtualServers []MapVirtualServer `json:"virtualServers"`
}

// MapSummary counts the chains.
type MapSummary struct {
	Chains int `json:"chains"`
	// Attributed chains have an owning service port.
	Attributed int `json:"attributed"`
	Fixed      int `json:"fixed"`
	// Unowned chains are per-service chains whose owner could not be found.
	Unowned int `json:"unowned"`
	Stale   int `json:"stale"`
	// ObjectsGiven: stale can only be judged against API objects.
	ObjectsGiven bool `json:"objectsGiven"`
	// IPVS counts the virtual and real servers of VirtualServers, present
	// when an IPVS table was read; IPVSIncomplete: the table was read only
	// in part.
	IPVS           *correlate.IPVSCounts `json:"ipvs,omitempty"`
	IPVSIncomplete bool                  `json:"ipvsIncomplete,omitempty"`
}

// MapChains attributes every chain of the node.
func MapChains(n *Node) *ChainMap {
	res := n.attribution()
	m := &ChainMap{APIVersion: APIVersion, Kind: "ChainMap", Node: n.Name, Sources: n.Ruleset.Dumps, Chains: res.Chains}
	if n.Select != nil {
		// only the selected Services' chains (a copy: res is shared)
		m.Chains = nil
		for _, c := range res.Chains {
			if c.ServicePort != "" && n.selected(c.ServicePort) {
				m.Chains = append(m.Chains, c)
			}
		}
	}
	if m.Chains == nil {
		m.Chains = []correlate.ChainOwner{}
	}
	m.Summary = summarize(res.HaveObjects, m.Chains)
	m.mapIPVS(n)
	return m
}

func summarize(haveObjects bool, chains []correlate.ChainOwner) MapSummary {
	s := MapSummary{ObjectsGiven: haveObjects}
	for _, c := range chains {
		s.Chains++
		switch {
		case c.Kind == kubeproxy.KindFixed:
			s.Fixed++
		case c.ServicePort != "":
			s.Attributed++
		default:
			s.Unowned++
		}
		if c.Stale {
			s.Stale++
		}
	}
	return s
}

// ChainLookup is the report of `map CHAIN…`: just those chains.
type ChainLookup struct {
	APIVersion string             `json:"apiVersion"`
	Kind       string             `json:"kind"`
	Node       string             `json:"node,omitempty"`
	Chains     []correlate.Lookup `json:"chains"`
	// Unknown are the names nothing matched.
	Unknown []string `json:"unknown,omitempty"`
}

// LookupChains answers which chains the names are: from the node's rules
// when it has them, else from the objects alone.
func LookupChains(n *Node, names []string) *ChainLookup {
	var res *correlate.Result
	if n.Ruleset != nil && (len(n.Ruleset.IPTables) > 0 || len(n.Ruleset.NFTables) > 0) {
		res = n.attribution()
	}
	found, unknown := correlate.LookupChains(names, n.Ruleset, res, n.Objects)
	if found == nil {
		found = []correlate.Lookup{}
	}
	return &ChainLookup{APIVersion: APIVersion, Kind: "ChainLookup", Node: n.Name, Chains: found, Unknown: unknown}
}
