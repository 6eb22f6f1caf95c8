package diagnose

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// Kinds of the stale-routing findings (raw.kind): what became of the
// former owner whose chains traffic still reaches.
const (
	kindDeletedRouted  = "deletedServiceRouted"
	kindRemovedPort    = "removedPortRouted"
	kindGoneEndpoints  = "goneEndpointsRouted"
	kindUnknownOwner   = "unknownOwnerRouted"
	deletedRoutedTitle = "deleted Service %s still routed"
)

// staleRoutedFindings says, per former owner, what the stale chains that
// traffic still reaches do: a deleted Service still routed, endpoints that
// are gone still getting connections. Named by the Service, not by hashes:
// the on-call engineer knows the Service.
func staleRoutedFindings(s *StaleReport, add addRaw) {
	byChain := map[string]*StaleVerdict{}
	for i := range s.Chains {
		byChain[s.Chains[i].Family+"/"+s.Chains[i].Chain] = &s.Chains[i]
	}
	for _, g := range s.Groups {
		if g.Cause != StaleCauseReferenced {
			continue
		}
		for _, o := range g.Owners {
			var chains []*StaleVerdict
			for _, name := range o.Chains {
				if c := byChain[o.Family+"/"+name]; c != nil {
					chains = append(chains, c)
				}
			}
			r, msg := staleRouted(o, chains)
			add(r, "%s", msg)
		}
	}
}

// staleRouted words one former owner's still-reached chains.
func staleRouted(o StaleOwner, chains []*StaleVerdict) (*raw, string) {
	fam := kubeproxy.Family(o.Family)
	var entries, gone, via []string
	for _, c := range chains {
		entries = appendNew(entries, c.Entries...)
		if c.Endpoint != "" {
			gone = appendNew(gone, c.Endpoint)
		}
		gone = appendNew(gone, c.DNAT...)
		if c.Kind != kubeproxy.KindEndpoint {
			via = appendNew(via, c.ReferencedBy...)
		}
		if c.Kind == kubeproxy.KindEndpoint && !hasServiceChain(chains) {
			via = appendNew(via, c.ReferencedBy...) // the live chains that still send to it
		}
	}
	sort.Strings(gone)
	r := &raw{Finding: Finding{Severity: SeverityError, Area: "stale"}, tag: tagHarmful, family: fam}
	path := routedPath(via, entries, gone)
	switch {
	case o.State == "deleted":
		r.kind, r.service = kindDeletedRouted, o.Owner
		r.Subject = "service " + o.Owner + " (deleted)"
		r.Title = fmt.Sprintf(deletedRoutedTitle, o.Owner)
		return r, fmt.Sprintf("Service %s was deleted, but the %s rules still route it: %s", o.Owner, fam, path)
	case o.State == "port removed":
		r.kind, r.Subject = kindRemovedPort, "service "+o.Owner+" (port removed)"
		return r, fmt.Sprintf("port %s was removed from its Service, but the %s rules still route it: %s", o.Owner, fam, path)
	case o.Owner != "":
		r.kind, r.Subject = kindGoneEndpoints, "service "+o.Owner
		from := ""
		if len(via) > 0 {
			from = ", from " + strings.Join(via, ", ")
		}
		return r, fmt.Sprintf("%s (%s) of %s %s gone but still %s new connections (%s rules%s)", countWord(len(gone), "endpoint"), fewOf(gone), o.Owner, isAre(len(gone)), gets(gone), fam, from)
	default:
		r.kind = kindUnknownOwner
		r.Subject = fmt.Sprintf("%s (former owner unknown)", countWord(len(o.Chains), string(fam)+" chain"))
		return r, fmt.Sprintf("%s that no current Service owns (former owner unknown: the rules carry no comments, and no Service's hash matches) %s still reached by traffic: %s; connections can go to Services or endpoints that are gone (see `stale`)", countWord(len(o.Chains), "stale "+string(fam)+" chain"), isAre(len(o.Chains)), path)
	}
}

// routedPath is "KUBE-SERVICES → 10.96.0.1:80 → 3 endpoints that are gone
// (…)": where the connections come from and where they go.
func routedPath(via, entries, gone []string) string {
	var parts []string
	if len(via) > 0 {
		parts = append(parts, strings.Join(via, ", "))
	}
	if len(entries) > 0 {
		parts = append(parts, strings.Join(entries, ", "))
	}
	switch len(gone) {
	case 0:
		parts = append(parts, "no endpoint (rejected or dropped there)")
	default:
		parts = append(parts, fmt.Sprintf("%s that %s gone (%s)", countWord(len(gone), "endpoint"), isAre(len(gone)), fewOf(gone)))
	}
	return strings.Join(parts, " → ")
}

func appendNew(list []string, items ...string) []string {
	for _, it := range items {
		if !slices.Contains(list, it) {
			list = append(list, it)
		}
	}
	return list
}

func countWord(n int, word string) string { return fmt.Sprintf("%d %s%s", n, word, plural(n)) }

func isAre(n int) string {
	if n == 1 {
		return "is"
	}
	return "are"
}

// staleRoutedCauses makes each deleted Service still routed that no
// failing restore or hung sync explains a cause of its own: kube-proxy
// has not synced since the Service went. It claims what that explains in
// its family: the rule counts that still count the Service's rules, the
// other stale chains still reached or overdue.
func staleRoutedCauses(rep *TriageReport, raws []*raw, claimed map[*raw]bool, claim func(*Finding, func(*raw) bool)) []Finding {
	var causes []Finding
	for _, r := range raws {
		if claimed[r] || r.kind != kindDeletedRouted || syncUnderway(rep.Counts, r.family) {
			continue
		}
		claimed[r] = true
		c := r.Finding
		c.Message = r.Message + "; kube-proxy removes them at its next sync, so it has not synced since" + lastSyncWords(rep.Counts, r.family)
		c.Remedy = fmt.Sprintf("check kube-proxy on %s: kubectl logs -n kube-system <its kube-proxy pod> (is it running, does it reach the API server?); its next sync removes these rules, and restarting it forces one", nodeOr(rep.Node))
		fam := r.family
		claim(&c, func(o *raw) bool {
			// The rules lag the objects for one reason: other drift in
			// the family is the same missed sync.
			return o.family == fam && (o.tag == tagCountsDiff || o.tag == tagOverdue || o.tag == tagDrift || o.tag == tagHarmful && o.kind != kindDeletedRouted)
		})
		causes = append(causes, c)
	}
	return causes
}

// lastSyncWords says when kube-proxy last synced the family, where the
// metrics tell.
func lastSyncWords(c *RuleCounts, fam kubeproxy.Family) string {
	if c == nil {
		return " (pass --from-metrics to see when kube-proxy last synced)"
	}
	for _, s := range c.LastSync {
		if (s.Family == fam || s.Family == "") && s.LastSync != nil {
			w := fmt.Sprintf(" (its last %s sync was at %s", fam, s.LastSync.UTC().Format(time.RFC3339))
			if s.LastSyncAgeSeconds != nil {
				w += fmt.Sprintf(", %s before the evidence was taken", secs(*s.LastSyncAgeSeconds))
			}
			return w + ")"
		}
	}
	return ""
}

func nodeOr(node string) string {
	if node == "" {
		return "the node"
	}
	return node
}

// syncUnderway: kube-proxy has a sync queued that is still to come (or
// slow to finish): rules that lag the objects are propagation lag then,
// not a kube-proxy that stopped.
func syncUnderway(c *RuleCounts, fam kubeproxy.Family) bool {
	if c == nil {
		return false
	}
	for _, s := range c.LastSync {
		if (s.Family == fam || s.Family == "") && !s.Hung && (s.Pending || s.Slow) {
			return true
		}
	}
	return false
}

func hasServiceChain(chains []*StaleVerdict) bool {
	for _, c := range chains {
		if c.Kind != kubeproxy.KindEndpoint {
			return true
		}
	}
	return false
}
