package diagnose

import (
	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/inspect/metrics"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// RuleCounts is the report of `counts`.
type RuleCounts struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Node       string `json:"node,omitempty"`
	CountsReport
	// LargeClusterModeFromObjects comes from the API objects: kube-proxy's
	// iptables proxier is in large-cluster mode above 1000 endpoints per
	// family.
	LargeClusterModeFromObjects map[string]bool `json:"largeClusterModeFromObjects,omitempty"`
}

// Counts compares kube-proxy's rule-count metrics with the node's rules;
// the chains attribution calls stale are counted apart.
func Counts(n *Node) *RuleCounts {
	stale := ChainSet{}
	for _, c := range n.attribution().Chains {
		if c.Stale {
			stale[ChainRef{kubeproxy.Family(c.Family), c.Table, c.Chain}] = true
		}
	}
	var m *metrics.Metrics
	if len(n.Metrics) > 0 {
		m = n.Metrics[0]
	}
	opts := CountOptions{}
	if n.Config != nil {
		opts.SyncPeriod = n.Config.SyncPeriod
		if n.Config.LocalhostNodePorts != nil {
			v := n.Config.LocalhostNodePortsEffective
			opts.LocalhostNodePorts = &v
		}
	}
	cr := CompareCounts(n.Ruleset, m, stale, n.At, opts)
	return &RuleCounts{APIVersion: APIVersion, Kind: "RuleCounts", CountsReport: cr, LargeClusterModeFromObjects: correlate.LargeClusterMode(n.Objects)}
}

// MasqueradeReport is the report of `masq`.
type MasqueradeReport struct {
	APIVersion string       `json:"apiVersion"`
	Kind       string       `json:"kind"`
	Node       string       `json:"node,omitempty"`
	Families   []MasqReport `json:"families"`
}

// Masquerade checks the node's masquerade mark.
func Masquerade(n *Node) *MasqueradeReport {
	rep := &MasqueradeReport{APIVersion: APIVersion, Kind: "MasqueradeReport", Node: n.Name, Families: AnalyzeMasquerade(n.Ruleset, n.Config)}
	if rep.Families == nil {
		rep.Families = []MasqReport{}
	}
	return rep
}
