package diagnose

import (
	"fmt"
	"sort"
	"strings"
)

// kube-proxy's conntrack reconciler metrics (pkg/proxy/metrics, every
// mode, label ip_family): they appear only after its first reconcile, which
// runs after a sync in which a UDP Service's endpoints changed.
const (
	metricReconcilerDuration = "kubeproxy_conntrack_reconciler_sync_duration_seconds"
	metricReconcilerDeleted  = "kubeproxy_conntrack_reconciler_deleted_entries_total"
)

// ConntrackReconciler is what kube-proxy's conntrack cleanup of one IP
// family did since kube-proxy started, by its metrics.
type ConntrackReconciler struct {
	Family string `json:"family"`
	// Runs is how many times it reconciled; Deleted the entries it
	// deleted; MeanSeconds a run's mean duration.
	Runs        uint64  `json:"runs"`
	Deleted     float64 `json:"deletedEntries"`
	MeanSeconds float64 `json:"meanSeconds"`
}

// reconciler reads the reconciler metrics of the node's kube-proxy; known
// is false when no metrics were given, and an empty list then says that
// it has not reconciled since it started.
func reconciler(n *Node) (runs []ConntrackReconciler, known bool) {
	byFamily := map[string]*ConntrackReconciler{}
	get := func(fam string) *ConntrackReconciler {
		if byFamily[fam] == nil {
			byFamily[fam] = &ConntrackReconciler{Family: fam}
		}
		return byFamily[fam]
	}
	for _, m := range n.Metrics {
		known = true
		for _, h := range m.Histograms(metricReconcilerDuration) {
			r := get(h.Labels["ip_family"])
			r.Runs, r.MeanSeconds = h.Count, h.Mean()
		}
		for _, s := range m.Samples(metricReconcilerDeleted) {
			get(s.Labels["ip_family"]).Deleted = s.Value
		}
	}
	for _, r := range byFamily {
		runs = append(runs, *r)
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i].Family < runs[j].Family })
	return runs, known
}

// reconcilerEvidence says whether kube-proxy's cleanup has been running,
// for the evidence of the entries it is counted on to clean.
// ReconcilerLine is reconcilerEvidence for people: "" without metrics.
func ReconcilerLine(rep *ConntrackReport) string {
	return reconcilerEvidence(rep.Reconciler, rep.Reconciler != nil)
}

func reconcilerEvidence(runs []ConntrackReconciler, known bool) string {
	switch {
	case !known:
		return ""
	case len(runs) == 0:
		return "kube-proxy's conntrack reconciler has not run since kube-proxy started (its metrics appear after the first run)"
	}
	var parts []string
	for _, r := range runs {
		parts = append(parts, fmt.Sprintf("%s: %d run%s, %.0f entr%s deleted", r.Family, r.Runs, plural(int(r.Runs)), r.Deleted, ies(int(r.Deleted))))
	}
	return "kube-proxy's conntrack reconciler since kube-proxy started: " + strings.Join(parts, "; ")
}
