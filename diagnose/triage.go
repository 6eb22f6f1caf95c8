package diagnose

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/inspect"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// Finding is one thing triage found.
type Finding struct {
	Severity Severity `json:"severity"`
	// Area: mode, backend, service, stale, masquerade, counts, input.
	Area    string `json:"area"`
	Subject string `json:"subject,omitempty"`
	Message string `json:"message"`
}

// TriageReport is the machine-readable report of `triage`.
type TriageReport struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Node       string `json:"node,omitempty"`
	// Status: healthy, or problems (errors or warnings found).
	Status   string        `json:"status"`
	Mode     ModeDetection `json:"mode"`
	Findings []Finding     `json:"findings"`
	// Summary counts findings by severity.
	Summary    map[Severity]int `json:"summary"`
	Chains     MapSummary       `json:"chains"`
	Stale      *StaleReport     `json:"stale"`
	Masquerade []MasqReport     `json:"masquerade"`
	Counts     *RuleCounts      `json:"counts"`
}

// Triage runs every diagnosis on the node.
func Triage(n *Node) *TriageReport {
	rep := &TriageReport{APIVersion: APIVersion, Kind: "Triage", Node: n.Name, Findings: []Finding{}, Summary: map[Severity]int{}}
	add := func(sev Severity, area, subject, format string, args ...any) {
		rep.Findings = append(rep.Findings, Finding{Severity: sev, Area: area, Subject: subject, Message: fmt.Sprintf(format, args...)})
	}
	rs := n.Ruleset
	for _, w := range n.CollectionNotes {
		add(SeverityInfo, "collection", n.Name, "%s", w)
	}
	rep.Chains = summarize(n.attribution())

	// Proxy mode and backends.
	rep.Mode = DetectMode(rs)
	if n.Config != nil {
		rep.Mode.FromConfig = n.Config.Mode
	}
	if rep.Mode.Detected == kubeproxy.ModeBoth {
		add(SeverityError, "mode", "", "kube-proxy rules of both iptables and nftables mode are present: kube-proxy removes the other mode's rules when it starts, so two kube-proxies (or a mode switch without a restart) are acting on this node")
	}
	if rep.Mode.FromConfig != "" && rep.Mode.Detected != kubeproxy.ModeUnknown && !rep.Mode.Detected.Has(rep.Mode.FromConfig) {
		add(SeverityError, "mode", "", "kube-proxy's configuration says mode %q but the node has %s rules", rep.Mode.FromConfig, rep.Mode.Detected)
	}
	if rep.Mode.Detected == kubeproxy.ModeUnknown {
		add(SeverityError, "mode", "", "no kube-proxy rules in the dump: kube-proxy is not running on this node, runs in another mode (IPVS, or an eBPF replacement), or the dump is of the wrong backend (try iptables-legacy-save / iptables-nft-save)")
	}
	backendFindings(rs, add)

	// Services.
	if n.Objects == nil {
		add(SeverityInfo, "input", "", "no API objects given: Services, EndpointSlices and stale chains are not checked (pass --from-objects)")
	} else {
		for _, ex := range correlate.ExplainAll(rs, n.Objects, n.Name) {
			for _, pp := range judgeExplanation(ex).Ports {
				for _, p := range pp.Problems {
					add(p.Severity, "service", fmt.Sprintf("%s (%s %s)", pp.ServicePort, pp.Mode, pp.Family), "%s", p.Message)
				}
			}
		}
	}

	// Stale chains.
	var syncPeriod time.Duration
	if n.Config != nil {
		syncPeriod = n.Config.SyncPeriod
	}
	rep.Stale = Stale(n, StaleOptions{SyncPeriod: syncPeriod})
	staleFindings(rep.Stale, add)

	// Masquerade.
	rep.Masquerade = Masquerade(n).Families
	for _, m := range rep.Masquerade {
		subject := string(m.Mode) + " " + string(m.Family)
		for _, p := range m.Problems {
			add(SeverityError, "masquerade", subject, "%s", p)
		}
		for _, c := range m.Conflicts {
			add(SeverityWarning, "masquerade", subject, "%s rule %s %s/%s in %s %s: %s", c.Owner, c.Op, c.Value, c.Mask, c.Table, c.Chain, c.Reason)
		}
	}

	// Counts and syncs.
	rep.Counts = Counts(n)
	if len(n.Metrics) == 0 {
		add(SeverityInfo, "input", "", "no kube-proxy metrics given: rule counts, sync age and sync failures are not checked (pass --from-metrics)")
	} else {
		rep.Mode.FromMetrics = rep.Counts.ModeFromMetrics
		for _, tc := range rep.Counts.Tables {
			if !tc.Agree && tc.Reason != "" && tc.Metric != nil {
				sev := SeverityWarning
				if tc.StaleRules > 0 && tc.Difference != nil && *tc.Difference == 0 {
					sev = SeverityInfo
				}
				add(sev, "counts", fmt.Sprintf("%s %s", tc.Family, tc.Table), "%s", tc.Reason)
			}
		}
		for _, s := range rep.Counts.LastSync {
			if s.Hung {
				add(SeverityError, "counts", string(s.Family), "kube-proxy is not syncing: %s", s.Reason)
			}
		}
		for _, f := range rep.Counts.Failures {
			add(SeverityError, "counts", string(f.Family), "%s = %v: %s", f.Metric, f.Value, f.Meaning)
		}
	}

	sort.SliceStable(rep.Findings, func(i, j int) bool { return rep.Findings[i].Severity.rank() < rep.Findings[j].Severity.rank() })
	for _, f := range rep.Findings {
		rep.Summary[f.Severity]++
	}
	rep.Status = "healthy"
	if rep.Summary[SeverityError]+rep.Summary[SeverityWarning] > 0 {
		rep.Status = "problems"
	}
	return rep
}

type addFunc func(sev Severity, area, subject, format string, args ...any)

// backendFindings flags kube-proxy rules in both iptables backends.
func backendFindings(rs *inspect.Ruleset, add addFunc) {
	byFamily := map[kubeproxy.Family]map[kubeproxy.Backend]bool{}
	for _, t := range rs.IPTables {
		if t.Name != kubeproxy.TableNAT || t.Chain(kubeproxy.ChainServices) == nil {
			continue
		}
		if byFamily[t.Family] == nil {
			byFamily[t.Family] = map[kubeproxy.Backend]bool{}
		}
		byFamily[t.Family][t.Backend] = true
	}
	for fam, backends := range byFamily {
		if backends[kubeproxy.BackendNFT] && backends[kubeproxy.BackendLegacy] {
			add(SeverityError, "backend", string(fam), "kube-proxy chains exist in both the iptables-nft and the iptables-legacy backend: the kernel runs both rule sets, and the older one sends traffic to endpoints that may be gone. Find which is current (kube-proxy's iptables-wrapper picked one) and remove the other's KUBE- chains")
		}
	}
	for _, d := range rs.Dumps {
		if d.LegacyTablesPresent {
			legacyGiven := false
			for _, t := range rs.IPTables {
				if t.Backend == kubeproxy.BackendLegacy {
					legacyGiven = true
				}
			}
			if !legacyGiven {
				add(SeverityWarning, "backend", d.Source, "iptables-nft-save says iptables-legacy tables are present: collect iptables-legacy-save too, to see whether they hold old kube-proxy rules")
			}
		}
	}
}

func staleFindings(s *StaleReport, add addFunc) {
	harmful, notDue, leftover, other := 0, 0, 0, 0
	var harmfulNames []string
	for _, c := range s.Chains {
		switch {
		case c.Referenced:
			harmful++
			if len(harmfulNames) < 3 {
				harmfulNames = append(harmfulNames, c.Chain)
			}
		case c.Leftover:
			leftover++
			add(SeverityWarning, "stale", c.Chain, "%s", c.Reason)
		case c.NotDueYet:
			notDue++
		default:
			other++
		}
	}
	if harmful > 0 {
		add(SeverityError, "stale", strings.Join(harmfulNames, ", "), "%d stale chains are still reached by traffic: connections can go to Services or endpoints that are gone (see `stale`)", harmful)
	}
	if notDue > 0 {
		add(SeverityInfo, "stale", "", "%d stale chains are waiting for kube-proxy's own cleanup and are harmless (see `stale` for when they are due)", notDue)
	}
	if other > 0 {
		add(SeverityWarning, "stale", "", "%d stale chains are unreferenced but should already be gone: kube-proxy may not be syncing", other)
	}
	for _, e := range s.Elements {
		sev := SeverityWarning
		if e.Referenced {
			sev = SeverityError
		}
		add(sev, "stale", e.Map+" "+e.Element, "%s", e.Reason)
	}
}
