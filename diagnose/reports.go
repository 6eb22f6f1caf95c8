package diagnose

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

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
	// EvidenceTime is what the ages are relative to, EvidenceTimeSource
	// where it comes from (as triage's).
	EvidenceTime       *time.Time `json:"evidenceTime,omitempty"`
	EvidenceTimeSource string     `json:"evidenceTimeSource,omitempty"`
	// Status: problems when counts disagree for a reason that needs action,
	// kube-proxy is not syncing or its syncs fail; incomplete without
	// metrics.
	Status     Status `json:"status"`
	NotChecked []Gap  `json:"notChecked"`
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
	m, earlier := n.scrapes()
	opts := CountOptions{Earlier: earlier}
	if n.Config != nil {
		opts.SyncPeriod = n.Config.SyncPeriod
		if n.Config.LocalhostNodePorts != nil {
			v := n.Config.LocalhostNodePortsEffective
			opts.LocalhostNodePorts = &v
		}
	}
	cr := CompareCounts(n.Ruleset, m, stale, n.At, opts)
	rep := &RuleCounts{APIVersion: APIVersion, Kind: "RuleCounts", CountsReport: cr, LargeClusterModeFromObjects: correlate.LargeClusterMode(n.Objects)}
	if !n.At.IsZero() {
		at := n.At
		rep.EvidenceTime, rep.EvidenceTimeSource = &at, n.AtSource
	}
	rep.NotChecked = gapsOf(n.gaps(), gapMetrics, gapPartial)
	if (n.Config == nil || n.Config.SyncPeriod <= 0) && slices.ContainsFunc(cr.LastSync, func(s SyncState) bool { return s.Pending }) {
		rep.NotChecked = append(rep.NotChecked, syncPeriodGap("whether a queued sync is overdue (kube-proxy hung)"))
	}
	problems := len(cr.Failures) > 0
	for _, s := range cr.LastSync {
		problems = problems || s.Hung
	}
	for _, tc := range cr.Tables {
		problems = problems || !tc.Agree && tc.InDump && tc.Metric != nil && !(tc.StaleRules > 0 && tc.Difference != nil && *tc.Difference == 0)
	}
	problems = rep.countIPVS(n) || problems
	rep.Status = verdict(problems, rep.NotChecked)
	return rep
}

// MasqueradeReport is the report of `masq`.
type MasqueradeReport struct {
	APIVersion string       `json:"apiVersion"`
	Kind       string       `json:"kind"`
	Node       string       `json:"node,omitempty"`
	Families   []MasqReport `json:"families"`
	// Status: problems when a family has problems or conflicts; incomplete
	// without kube-proxy's configuration (the bit it should use).
	Status     Status `json:"status"`
	NotChecked []Gap  `json:"notChecked"`
}

// Masquerade checks the node's masquerade mark.
func Masquerade(n *Node) *MasqueradeReport {
	rep := &MasqueradeReport{APIVersion: APIVersion, Kind: "MasqueradeReport", Node: n.Name, Families: AnalyzeMasquerade(n.Ruleset, n.Config)}
	if rep.Families == nil {
		rep.Families = []MasqReport{}
	}
	rep.NotChecked = gapsOf(n.gaps(), gapConfig)
	// On an excerpt of the nat table, a chain or rule it does not show
	// proves nothing: what the family's setup lacks is not checked.
	for i := range rep.Families {
		f := &rep.Families[i]
		if f.Mode != kubeproxy.ModeIPTables || !partialTables(n, f.Family) || len(f.Problems) == 0 {
			continue
		}
		rep.NotChecked = append(rep.NotChecked, Gap{Check: fmt.Sprintf("the masquerade setup of %s %s (%s)", f.Mode, f.Family, strings.Join(f.Problems, "; ")),
			Reason: "the " + string(f.Family) + " rules are an excerpt, and what it does not show may hold it", Remedy: "the whole " + saveCommand(f.Family)})
		f.dropProblems()
	}
	problems := false
	for _, f := range rep.Families {
		problems = problems || len(f.Problems) > 0 || len(f.Conflicts) > 0
	}
	rep.Status = verdict(problems, rep.NotChecked)
	return rep
}

// scrapes picks the newest of the node's metrics, and an earlier scrape of
// the same kube-proxy when there is one (live reads scrape twice).
func (n *Node) scrapes() (latest, earlier *metrics.Metrics) {
	if len(n.Metrics) == 0 {
		return nil, nil
	}
	ms := append([]*metrics.Metrics(nil), n.Metrics...)
	sort.SliceStable(ms, func(i, j int) bool {
		a, _ := ms[i].Newest()
		b, _ := ms[j].Newest()
		return a.Before(b)
	})
	latest = ms[len(ms)-1]
	if len(ms) > 1 {
		a, _ := ms[len(ms)-2].Newest()
		b, _ := latest.Newest()
		if a.Before(b) {
			earlier = ms[len(ms)-2]
		}
	}
	return latest, earlier
}

// nonNil is s, or an empty list for none: the JSON forms write lists as
// [], never null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
