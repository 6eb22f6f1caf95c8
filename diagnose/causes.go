package diagnose

import (
	"fmt"
	"strings"

	"github.com/proxyrules/kubectl-proxyrules/inspect/metrics"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// grouping is the state the cause rules of groupByCause share: the raw
// findings, which of them a cause has claimed, and the causes so far.
type grouping struct {
	n       *Node
	rep     *TriageReport
	raws    []*raw
	claimed map[*raw]bool
	causes  []Finding
}

// groupByCause puts every finding a known cause explains under that cause,
// causes first, then the findings of their own, most severe first.
//
// The rules run in this order, each claiming only what an earlier one
// left: a finding goes under the first cause that explains it.
func groupByCause(n *Node, rep *TriageReport, raws []*raw) []Finding {
	g := &grouping{n: n, rep: rep, raws: raws, claimed: map[*raw]bool{}}
	g.identityCause()
	failing := g.restoreCauses()
	g.hungCause()
	g.causes = append(g.causes, staleRoutedCauses(rep, raws, g.claimed, g.claim)...)
	g.removedRulesCauses(failing)
	g.lagCauses()
	sortFindings(g.causes)
	return append(g.causes, g.ownFindings()...)
}

// claim puts every finding not claimed yet that pred accepts under c.
func (g *grouping) claim(c *Finding, pred func(r *raw) bool) {
	for _, r := range g.raws {
		if !g.claimed[r] && pred(r) {
			g.claimed[r] = true
			c.Symptoms = append(c.Symptoms, Symptom{r.Severity, r.Area, r.Subject, withoutStockCause(r.Message), r.kind, r.endpoints})
		}
	}
}

// addCause claims for c what pred accepts and adds c to the causes.
func (g *grouping) addCause(c Finding, pred func(r *raw) bool) {
	g.claim(&c, pred)
	g.causes = append(g.causes, c)
}

// identityCause: the node is not the one the dump is of.
func (g *grouping) identityCause() {
	id := g.rep.Identity
	switch {
	case id.Given != "" && id.Unknown:
		c := Finding{Severity: SeverityWarning, Area: "identity", Subject: id.Given, Title: "no node " + id.Given + " in the objects",
			Message: fmt.Sprintf("no Node named %s among the objects and no endpoint on it: is the name right? Local-policy Services are judged as if %s had no endpoints", id.Given, id.Given),
			Remedy:  "check the name with kubectl get nodes"}
		if id.Inferred != "" {
			c.Message += "; " + id.Evidence
			c.Remedy = "pass --node " + id.Inferred
		}
		g.addCause(c, func(r *raw) bool { return r.local && (r.tag == tagDrift || r.tag == tagService) })
	case id.Mismatch:
		g.addCause(id.mismatchCause(), func(r *raw) bool { return id.explains(r) && (r.tag == tagDrift || r.tag == tagService) })
	}
}

// restoreCauses: kube-proxy's restores fail, so nothing it changes
// reaches the node; one cause per family. It returns the failures that
// happen now, by family, which rule out other causes.
func (g *grouping) restoreCauses() map[kubeproxy.Family]float64 {
	counts := g.rep.Counts
	blockers := blockingLeftovers(g.rep.Stale)
	failing := map[kubeproxy.Family]float64{}
	for _, f := range counts.Failures {
		switch f.Metric {
		case metrics.RestoreFailures, metrics.NFTSyncFailures:
			if now, _ := currentFailure(f, blockers); now == FailingNow {
				failing[f.Family] += f.Value
			}
		}
	}
	if len(failing) == 0 && len(blockers) == 0 {
		return failing
	}
	for _, fam := range familiesOf(failing, blockers) {
		g.addCause(restoreCause(fam, failing[fam], blockers, counts.Mode), func(r *raw) bool {
			return sameFamily(fam, r.family) && (r.tag == tagDrift || r.tag == tagHung || r.tag == tagFailure || r.tag == tagCountsDiff || r.tag == tagHarmful || r.tag == tagOverdue) ||
				r.tag == tagLeftover && blockerNamed(blockers, r.Subject)
		})
	}
	return failing
}

// hungCause: kube-proxy is not syncing, for no reason the rules show; one
// cause for every family it stopped in.
func (g *grouping) hungCause() {
	var hungFams []string
	var hungMsg string
	for _, r := range g.raws {
		if r.tag == tagHung && !g.claimed[r] {
			g.claimed[r] = true
			hungFams = append(hungFams, familyOr(r.family))
			if hungMsg == "" {
				hungMsg = r.Message
			}
		}
	}
	if len(hungFams) == 0 {
		return
	}
	c := Finding{Severity: SeverityError, Area: "sync", Subject: strings.Join(hungFams, ", "), Message: hungMsg, Title: "kube-proxy is not syncing",
		Remedy: "check kube-proxy's pod and log on the node (kubectl logs -n kube-system <kube-proxy pod>)"}
	if len(hungFams) > 1 {
		c.Message += " (the same for " + strings.Join(hungFams[1:], ", ") + ")"
	}
	g.addCause(c, func(o *raw) bool {
		return o.tag == tagDrift || o.tag == tagCountsDiff || o.tag == tagHarmful || o.tag == tagOverdue
	})
}

// removedRulesCauses: another writer removed kube-proxy's rules: fewer
// rules than it counted, nothing extra (rules that merely lag the objects
// also hold endpoints and chains that are gone), no sync failed.
func (g *grouping) removedRulesCauses(failing map[kubeproxy.Family]float64) {
	for _, tc := range g.rep.Counts.Tables {
		if tc.Metric == nil || tc.Difference == nil || *tc.Difference >= 0 || len(failing) > 0 || truncated(g.n.Ruleset, tc.Source) || hung(g.rep.Counts) ||
			lagging(g.raws, tc.Family) {
			continue
		}
		fam := tc.Family
		c := Finding{Severity: SeverityError, Area: "counts", Subject: fmt.Sprintf("%s %s", tc.Family, tc.Table), Title: "another writer removed kube-proxy's rules",
			Message: fmt.Sprintf("rules were removed from kube-proxy's chains by something other than kube-proxy: the %s %s table has %d fewer rule%s than kube-proxy counted at its last sync, and no sync failed since", tc.Family, tc.Table, -*tc.Difference, plural(-*tc.Difference)),
			Remedy:  "find the other writer (a CNI, a security agent, a script with iptables -D/-F); kube-proxy puts the rules back at its next full sync (restart it to force one)"}
		g.addCause(c, func(r *raw) bool {
			removed := r.tag == tagDrift || r.tag == tagService && (r.kind == ProblemSourceRanges || r.kind == ProblemEmptyChain || r.kind == ProblemNoReject)
			return sameFamily(fam, r.family) && (removed || r.tag == tagCountsDiff && r.Subject == c.Subject)
		})
	}
}

// lagCauses: propagation lag; the rules lag the objects while kube-proxy
// has changes queued (or a sync running): not a bug in the rules.
func (g *grouping) lagCauses() {
	counts := g.rep.Counts
	pendingChanges := counts.PendingEndpointChanges != nil && *counts.PendingEndpointChanges > 0 ||
		counts.PendingServiceChanges != nil && *counts.PendingServiceChanges > 0
	for _, st := range counts.LastSync {
		if st.Hung || !(st.Pending || st.Slow || pendingChanges) {
			continue
		}
		fam := st.Family
		eps := g.unprogrammedEndpoints(fam)
		if len(eps) == 0 {
			continue
		}
		c := Finding{Severity: SeverityWarning, Area: "sync", Subject: familyOr(fam), Title: "propagation lag",
			Message: fmt.Sprintf("propagation lag, not a bug in the rules: %d endpoint%s not yet programmed; %s", len(eps), pluralVerb(len(eps)), lagReason(st)),
			Remedy:  "wait a sync and look again; if it persists past 2 × syncPeriod, kube-proxy is not keeping up (see the sync durations in counts)"}
		g.addCause(c, func(r *raw) bool { return sameFamily(fam, r.family) && (r.tag == tagDrift || r.tag == tagCountsDiff) })
	}
}

// unprogrammedEndpoints are the endpoints of fam's unclaimed findings that
// the slices have and the rules do not.
func (g *grouping) unprogrammedEndpoints(fam kubeproxy.Family) []string {
	var eps []string
	for _, r := range g.raws {
		if !g.claimed[r] && r.tag == tagDrift && sameFamily(fam, r.family) && r.kind == ProblemMissingEndpoints {
			eps = append(eps, r.endpoints...)
		}
	}
	return eps
}

// lagReason says why the rules lag: what is queued, and how long syncs take.
func lagReason(st SyncState) string {
	why := "kube-proxy has changes it has not synced yet"
	if st.LastQueuedAgeSeconds != nil && st.Pending {
		why = fmt.Sprintf("kube-proxy has had a sync queued for %s", secs(*st.LastQueuedAgeSeconds))
	}
	mean := st.MeanSyncSeconds
	if st.RecentMeanSyncSeconds != nil {
		mean = *st.RecentMeanSyncSeconds
	}
	if mean > 0 {
		why += fmt.Sprintf(" and its syncs take %s on average", secs(mean))
	}
	return why
}

// ownFindings are the findings no cause claimed, most severe first; a
// Service's problem keeps its kind and endpoints.
func (g *grouping) ownFindings() []Finding {
	var rest []Finding
	for _, r := range g.raws {
		if !g.claimed[r] {
			f := r.Finding
			if r.tag == tagService || r.tag == tagDrift {
				f.Kind, f.Endpoints = r.kind, r.endpoints
			}
			rest = append(rest, f)
		}
	}
	sortFindings(rest)
	return rest
}
