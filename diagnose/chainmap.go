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
}

// MapChains attributes every chain of the node.
func MapChains(n *Node) *ChainMap {
	res := n.attribution()
	m := &ChainMap{APIVersion: APIVersion, Kind: "ChainMap", Node: n.Name, Sources: n.Ruleset.Dumps, Chains: res.Chains, Summary: summarize(res)}
	if m.Chains == nil {
		m.Chains = []correlate.ChainOwner{}
	}
	return m
}

func summarize(res *correlate.Result) MapSummary {
	s := MapSummary{ObjectsGiven: res.HaveObjects}
	for _, c := range res.Chains {
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
