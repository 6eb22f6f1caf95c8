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

// Finding is one thing triage found: a cause, with the findings it
// explains listed under it as its symptoms, or a finding of its own.
type Finding struct {
	Severity Severity `json:"severity"`
	// Area: identity, mode, backend, sync, service, stale, masquerade,
	// counts, collection.
	Area    string `json:"area"`
	Subject string `json:"subject,omitempty"`
	// Title is the cause in a few words, for the one-line verdict.
	Title   string `json:"title,omitempty"`
	Message string `json:"message"`
	// Remedy says what to do, where that is known.
	Remedy string `json:"remedy,omitempty"`
	// Symptoms are the consequences of this cause, each listed here once
	// instead of as a finding of its own.
	Symptoms []Symptom `json:"symptoms,omitempty"`
	// Kind and Endpoints, for a Service's problem: its kind (see
	// Problem*) and the endpoints it names.
	Kind      string   `json:"kind,omitempty"`
	Endpoints []string `json:"endpoints,omitempty"`
	// Count, on a finding that stands for many alike (the stale elements
	// of a set past those listed): how many.
	Count int `json:"count,omitempty"`
	// Evidence is what was read that shows it, and Commands what would
	// clear it (conntrack -D, printed, never run), where the diagnosis
	// gives them.
	Evidence string   `json:"evidence,omitempty"`
	Commands []string `json:"commands,omitempty"`
}

// Symptom is a finding explained by its cause.
type Symptom struct {
	Severity  Severity `json:"severity"`
	Area      string   `json:"area"`
	Subject   string   `json:"subject,omitempty"`
	Message   string   `json:"message"`
	Kind      string   `json:"kind,omitempty"`
	Endpoints []string `json:"endpoints,omitempty"`
}

// TriageReport is the machine-readable report of `triage`.
type TriageReport struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Node       string `json:"node,omitempty"`
	// Status: healthy, problems (errors or warnings found), or incomplete
	// (nothing wrong in what was checked; NotChecked says what was not).
	Status Status `json:"status"`
	// Verdict is the report in one line.
	Verdict  string        `json:"verdict"`
	Identity NodeIdentity  `json:"identity"`
	Mode     ModeDetection `json:"mode"`
	// EvidenceTime is when the evidence was taken, as far as known, and
	// EvidenceTimeSource where that comes from; ages are judged against it.
	EvidenceTime       *time.Time `json:"evidenceTime,omitempty"`
	EvidenceTimeSource string     `json:"evidenceTimeSource,omitempty"`
	// Findings: causes first (each with its symptoms), most severe first.
	Findings   []Finding `json:"findings"`
	NotChecked []Gap     `json:"notChecked"`
	// Summary counts findings (not symptoms) by severity.
	Summary    map[Severity]int `json:"summary"`
	Chains     MapSummary       `json:"chains"`
	Stale      *StaleReport     `json:"stale"`
	Masquerade []MasqReport     `json:"masquerade"`
	Counts     *RuleCounts      `json:"counts"`
	// Conntrack is the node's conntrack table, counters and kernel
	// settings judged (nil when they were not read: NotChecked says so).
	Conntrack *ConntrackReport `json:"conntrack"`
	// IPVS is the IPVS table judged, in IPVS mode (nil in the others).
	IPVS *IPVSReport `json:"ipvs,omitempty"`
}

// A finding before it is grouped by cause: what it is about, so that a
// cause can claim it.
type raw struct {
	Finding
	tag       string   // see the tags below
	kind      string   // a service problem's kind
	endpoints []string // the endpoints it names
	family    kubeproxy.Family
	service   string // ns/name
	local     bool   // the service has a Local traffic policy
}

// Finding tags.
const (
	tagDrift        = "drift"        // a Service's rules disagree with its EndpointSlices
	tagService      = "service"      // another problem of a Service's rules
	tagHarmful      = "stale"        // stale chains traffic still reaches
	tagOverdue      = "overdue"      // unreferenced stale chains that should be gone
	tagLeftover     = "leftover"     // a chain an older version left
	tagHung         = "hung"         // kube-proxy is not syncing
	tagFailure      = "failure"      // a failure counter that grows now
	tagFailedBefore = "failedBefore" // one that did, not known to now
	tagCountsDiff   = "counts"       // the rule counts disagree
	tagOther        = "other"        // anything else
)

// Triage runs every diagnosis on the node and groups the findings by cause.
func Triage(n *Node) *TriageReport {
	rep := &TriageReport{APIVersion: APIVersion, Kind: "Triage", Node: n.Name, Findings: []Finding{}, Summary: map[Severity]int{}}
	if !n.At.IsZero() {
		at := n.At
		rep.EvidenceTime, rep.EvidenceTimeSource = &at, n.AtSource
	}
	var f rawFindings
	for _, w := range n.CollectionNotes {
		f.other(SeverityInfo, "collection", n.Name, "%s", w)
	}
	rep.Chains = MapChains(n).Summary
	// Every Service explained once, for the identity and the findings.
	var explained []*correlate.Explanation
	if n.Objects != nil {
		explained = correlate.ExplainAll(n.Ruleset, n.Objects, n.nodeView())
	}
	if n.NameEvidence != "" {
		rep.Identity = NodeIdentity{Inferred: n.Name, Evidence: n.NameEvidence}
	} else {
		rep.Identity = identifyFrom(n.Name, n, explained)
	}

	modeFindings(n, rep, f.other)
	backendFindings(n.Ruleset, f.other)
	var walkGaps []Gap
	if rep.Mode.Detected == kubeproxy.ModeIPVS {
		// IPVS mode's iptables rules name no endpoint: its table does
		rep.IPVS = IPVS(n)
		walkGaps = ipvsFindings(rep.IPVS, f.add)
	} else {
		walkGaps = serviceFindings(n, explained, f.add)
	}

	// Stale chains.
	var syncPeriod time.Duration
	if n.Config != nil {
		syncPeriod = n.Config.SyncPeriod
	}
	rep.Stale = Stale(n, StaleOptions{SyncPeriod: syncPeriod})
	staleFindings(rep.Stale, f.add)

	rep.Masquerade = Masquerade(n).Families
	masqueradeFindings(rep.Masquerade, &f)

	// Counts and syncs.
	rep.Counts = Counts(n)
	if len(n.Metrics) > 0 {
		countsFindings(rep, f.add)
	}
	kernelGaps := conntrackFindings(n, rep, f.add)

	rep.Findings = nonNil(groupByCause(n, rep, f.raws))
	concludeTriage(n, rep, append(walkGaps, kernelGaps...))
	return rep
}

// rawFindings collects the findings of every diagnosis before they are
// grouped by cause.
type rawFindings struct{ raws []*raw }

func (f *rawFindings) add(r *raw, format string, args ...any) {
	r.Message = fmt.Sprintf(format, args...)
	f.raws = append(f.raws, r)
}

// other adds a finding no cause claims.
func (f *rawFindings) other(sev Severity, area, subject, format string, args ...any) {
	f.add(&raw{Finding: Finding{Severity: sev, Area: area, Subject: subject}, tag: tagOther}, format, args...)
}

// modeFindings says what is wrong with the proxy mode: two modes at once,
// another mode than configured, or none.
func modeFindings(n *Node, rep *TriageReport, other func(sev Severity, area, subject, format string, args ...any)) {
	rep.Mode = DetectMode(n.Ruleset)
	if n.Config != nil {
		rep.Mode.FromConfig = n.Config.Mode
	}
	if rep.Mode.Detected == kubeproxy.ModeBoth {
		other(SeverityError, "mode", "", "kube-proxy rules of both iptables and nftables mode are present: kube-proxy removes the other mode's rules when it starts, so two kube-proxies (or a mode switch without a restart) are acting on this node")
	}
	if rep.Mode.FromConfig != "" && rep.Mode.Detected != kubeproxy.ModeUnknown && !rep.Mode.Detected.Has(rep.Mode.FromConfig) {
		other(SeverityError, "mode", "", "kube-proxy's configuration says mode %q but the node has %s rules", rep.Mode.FromConfig, rep.Mode.Detected)
	}
	if rep.Mode.Detected == kubeproxy.ModeUnknown {
		other(SeverityError, "mode", "", "no kube-proxy rules in the dump: kube-proxy is not running on this node, runs in another mode (IPVS, or an eBPF replacement), or the dump is of the wrong backend (try iptables-legacy-save / iptables-nft-save)")
	}
}

// serviceFindings adds the problems of every selected Service's rules. It
// returns the walks cut short: what their absence findings would rest on.
func serviceFindings(n *Node, explained []*correlate.Explanation, add addRaw) []Gap {
	var walkGaps []Gap
	for _, ex := range explained {
		if n.Select != nil && !n.Select(ex.Namespace, ex.Name) {
			continue
		}
		judged, _ := judgeOn(n, ex) // the excerpt's gap is the triage's (gapPartial)
		for _, pp := range judged.Ports {
			if truncatedRoute(&pp.PortPath) {
				walkGaps = append(walkGaps, Gap{Check: fmt.Sprintf("%s (%s %s): that every endpoint is reached, and with its share", pp.ServicePort, pp.Mode, pp.Family),
					Reason: truncatedReason, Remedy: truncatedRemedy})
			}
			for _, p := range pp.Problems {
				tag := tagService
				if driftKinds[p.Kind] {
					tag = tagDrift
				}
				add(&raw{Finding: Finding{Severity: p.Severity, Area: "service", Subject: fmt.Sprintf("%s (%s %s)", pp.ServicePort, pp.Mode, pp.Family)},
					tag: tag, kind: p.Kind, endpoints: p.Endpoints, family: kubeproxy.Family(pp.Family), service: ex.Namespace + "/" + ex.Name, local: pp.LocalPolicy}, "%s", p.Message)
			}
		}
	}
	return walkGaps
}

// masqueradeFindings adds the masquerade problems (errors, with their
// remedy) and the conflicting mark rules (warnings).
func masqueradeFindings(families []MasqReport, f *rawFindings) {
	for _, m := range families {
		subject := string(m.Mode) + " " + string(m.Family)
		for _, p := range m.Problems {
			f.add(&raw{Finding: Finding{Severity: SeverityError, Area: "masquerade", Subject: subject, Remedy: m.Remedy(p)}, tag: tagOther}, "%s", p)
		}
		for _, c := range m.Conflicts {
			f.other(SeverityWarning, "masquerade", subject, "%s rule %s %s/%s in %s %s: %s", c.Owner, c.Op, c.Value, c.Mask, c.Table, c.Chain, c.Reason)
		}
	}
}

// concludeTriage counts the findings and says what was not checked, the
// status and the verdict.
func concludeTriage(n *Node, rep *TriageReport, walkGaps []Gap) {
	for _, f := range rep.Findings {
		rep.Summary[f.Severity]++
	}
	all := n.gaps()
	rep.NotChecked = gapsOf(all, gapObjects, gapFamily, gapFilter, gapMetrics, gapConfig, gapTopology, gapLocalPolicy, gapScope, gapPartial)
	rep.NotChecked = append(rep.NotChecked, walkGaps...)
	rep.NotChecked = append(rep.NotChecked, rep.Identity.unchecked...)
	rep.Status = verdict(rep.Summary[SeverityError]+rep.Summary[SeverityWarning] > 0, rep.NotChecked)
	rep.Verdict = triageVerdict(rep)
}

// countsFindings adds what kube-proxy's metrics say: rule counts that
// disagree, a sync that stopped, failure counters.
func countsFindings(rep *TriageReport, add addRaw) {
	rep.Mode.FromMetrics = rep.Counts.ModeFromMetrics
	for _, tc := range rep.Counts.Tables {
		if !tc.Agree && tc.Reason != "" && tc.Metric != nil && tc.InDump {
			sev := SeverityWarning
			if tc.StaleRules > 0 && tc.Difference != nil && *tc.Difference == 0 {
				sev = SeverityInfo
			}
			add(&raw{Finding: Finding{Severity: sev, Area: "counts", Subject: fmt.Sprintf("%s %s", tc.Family, tc.Table)}, tag: tagCountsDiff, family: tc.Family}, "%s", tc.Reason)
		}
	}
	for _, s := range rep.Counts.LastSync {
		if s.Hung {
			add(&raw{Finding: Finding{Severity: SeverityError, Area: "sync", Subject: string(s.Family)}, tag: tagHung, family: s.Family}, "kube-proxy is not syncing: %s", s.Reason)
		}
	}
	failureRaws(rep, add)
}

// driftKinds are the problems that mean the rules lag (or lost) what the
// EndpointSlices say: the symptoms of a sync that did not happen.
var driftKinds = map[string]bool{
	ProblemMissingEndpoints: true, ProblemExtraEndpoints: true, ProblemNoEntry: true,
	ProblemRejectedWithReady: true, ProblemShares: true, ProblemUnexpected: true,
}

func sortFindings(fs []Finding) {
	sort.SliceStable(fs, func(i, j int) bool { return fs[i].Severity.rank() < fs[j].Severity.rank() })
}

// blocker is a leftover chain that jumps to a stale chain kube-proxy
// deletes on every sync: the kernel refuses to delete a chain that is
// still referenced, so each of kube-proxy's restores fails.
type blocker struct {
	leftover, target StaleVerdict
}

func blockingLeftovers(st *StaleReport) []blocker {
	byChain := map[string]StaleVerdict{}
	for _, c := range st.Chains {
		byChain[c.Family+"/"+c.Chain] = c
	}
	var out []blocker
	for _, c := range st.Chains {
		if c.Leftover || !kubeproxy.IsServiceChainName(c.Chain) {
			continue
		}
		for _, from := range c.ReferencedBy {
			if l, ok := byChain[c.Family+"/"+from]; ok && l.Leftover && strings.HasPrefix(l.Chain, kubeproxy.PrefixXLB) {
				out = append(out, blocker{l, c})
			}
		}
	}
	return out
}

func blockerNamed(bs []blocker, chain string) bool {
	for _, b := range bs {
		if b.leftover.Chain == chain {
			return true
		}
	}
	return false
}

func familiesOf(failing map[kubeproxy.Family]float64, bs []blocker) []kubeproxy.Family {
	seen := map[kubeproxy.Family]bool{}
	var out []kubeproxy.Family
	for f := range failing {
		seen[f] = true
	}
	for _, b := range bs {
		seen[kubeproxy.Family(b.target.Family)] = true
	}
	for f := range seen {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// currentFailure is what a failure counter means now: as its counts
// report says, except that a sync queued and not run yet fails for sure
// when a leftover chain in the rules blocks every restore.
func currentFailure(f FailureCount, blockers []blocker) (now, evidence string) {
	if f.Now == Unknown && blocksFamily(blockers, f.Family) {
		return FailingNow, "a sync is queued, and a leftover chain in the rules makes every restore fail"
	}
	return f.Now, f.Evidence
}

// failureRaws adds a finding for each failure counter above zero, as loud
// as what it means now: an error while failing (the cause "kube-proxy's
// syncs fail" claims it), a warning when not known, a note when
// kube-proxy has recovered.
func failureRaws(rep *TriageReport, add func(*raw, string, ...any)) {
	blockers := blockingLeftovers(rep.Stale)
	for _, f := range rep.Counts.Failures {
		r := &raw{Finding: Finding{Area: "sync", Subject: string(f.Family)}, tag: tagFailedBefore, family: f.Family}
		switch now, evidence := currentFailure(f, blockers); now {
		case FailingNow:
			r.Severity, r.tag = SeverityError, tagFailure
			add(r, "%s = %v (%s): %s", f.Metric, f.Value, evidence, f.Meaning)
		case Recovered:
			r.Severity = SeverityInfo
			add(r, "%s: failed %g time%s since kube-proxy started, not now: %s", f.Metric, f.Value, plural(int(f.Value)), evidence)
		default:
			r.Severity = SeverityWarning
			add(r, "%s: failed %g time%s since kube-proxy started; whether it fails now is not known: %s", f.Metric, f.Value, plural(int(f.Value)), evidence)
		}
	}
}

// blocksFamily: a leftover chain blocks the restores of fam.
func blocksFamily(bs []blocker, fam kubeproxy.Family) bool {
	for _, b := range bs {
		if fam == "" || kubeproxy.Family(b.target.Family) == fam {
			return true
		}
	}
	return false
}

// restoreCause words the failed restores of one family, with the chain that
// blocks them when the rules show it.
func restoreCause(fam kubeproxy.Family, failures float64, bs []blocker, mode kubeproxy.Mode) Finding {
	c := Finding{Severity: SeverityError, Area: "sync", Subject: familyOr(fam)}
	what := "kube-proxy's iptables-restore fails"
	if mode == kubeproxy.ModeNFTables {
		what = "kube-proxy's nftables transactions fail"
	}
	if failures > 0 {
		what += fmt.Sprintf(" (%g failure%s in the %s metrics)", failures, plural(int(failures)), familyOr(fam))
	} else {
		what = "kube-proxy's iptables-restore fails while this is so (no metrics to confirm it)"
	}
	var mine []blocker
	for _, b := range bs {
		if fam == "" || kubeproxy.Family(b.target.Family) == fam {
			mine = append(mine, b)
		}
	}
	c.Title = "kube-proxy's syncs fail"
	if len(mine) == 0 {
		c.Message = what + ": nothing kube-proxy changes since the last successful sync reaches the node, so the rules below lag the EndpointSlices"
		c.Remedy = "read kube-proxy's log on the node for the failing restore (kubectl logs -n kube-system <kube-proxy pod> | grep -i restore)"
		return c
	}
	b := mine[0]
	c.Title = "kube-proxy's syncs fail: " + b.leftover.Chain + " blocks them"
	owner := b.target.ServicePort
	if b.target.Endpoint != "" {
		owner += " sends traffic to " + b.target.Endpoint + ", which is gone"
	} else if owner != "" {
		owner = "traffic still reaches the former " + owner
	}
	c.Message = fmt.Sprintf("%s because %s (left by kube-proxy ≤ 1.23) still jumps to %s, which kube-proxy deletes on every sync: the kernel refuses to delete a chain that is referenced, so the whole restore fails", what, b.leftover.Chain, b.target.Chain)
	if owner != "" {
		c.Message += "; until it is removed " + owner
	}
	cmd := "iptables"
	if fam == kubeproxy.IPv6 {
		cmd = "ip6tables"
	}
	c.Remedy = fmt.Sprintf("on the node: %[1]s -t nat -F %[2]s && %[1]s -t nat -X %[2]s (kube-proxy's next sync then succeeds)", cmd, b.leftover.Chain)
	return c
}

// lagging reports whether the family's rules hold what the objects no
// longer have: endpoints gone from the slices, stale chains still reached.
func lagging(raws []*raw, fam kubeproxy.Family) bool {
	for _, r := range raws {
		if r.family == fam && (r.tag == tagHarmful || r.kind == ProblemExtraEndpoints) {
			return true
		}
	}
	return false
}

func truncated(rs *inspect.Ruleset, source string) bool {
	for _, d := range rs.Dumps {
		if d.Source != source {
			continue
		}
		for _, w := range d.Warnings {
			if strings.Contains(w, "truncated") {
				return true
			}
		}
	}
	return false
}

func hung(c *RuleCounts) bool {
	for _, s := range c.LastSync {
		if s.Hung {
			return true
		}
	}
	return false
}

// triageVerdict is the report in one line.
func triageVerdict(rep *TriageReport) string {
	switch rep.Status {
	case StatusHealthy:
		node := ""
		if rep.Node != "" {
			node = " on " + rep.Node
		}
		return "HEALTHY: kube-proxy's rules" + node + " match the API objects, and everything was checked"
	case StatusIncomplete:
		var what []string
		for _, g := range rep.NotChecked {
			what = append(what, g.Check)
		}
		return fmt.Sprintf("INCOMPLETE: nothing wrong in what was checked; %d thing%s not checked (see above)", len(what), plural(len(what)))
	}
	first := rep.Findings[0]
	title := first.Title
	if title == "" {
		// What it is about, and what is wrong with it in a few words.
		title = first.Area
		if first.Subject != "" {
			title += " " + first.Subject
		}
		title += ": " + shortCause(first.Message)
	}
	line := "PROBLEMS FOUND: " + title
	if n := len(first.Symptoms); n > 0 {
		line += fmt.Sprintf(" (%d symptom%s)", n, plural(n))
	}
	if more := len(rep.Findings) - 1; more > 0 {
		line += fmt.Sprintf("; %d more finding%s", more, plural(more))
	}
	return line
}

// stockCauses are the guesses a Service's problem offers when nothing
// better is known; under a cause that explains it they are wrong or
// redundant (no "propagation lag or a failed sync" under "another writer
// removed kube-proxy's rules").
var stockCauses = []string{": propagation lag or a failed sync", " (is kube-proxy running and syncing?)", ": kube-proxy has not caught up"}

func withoutStockCause(msg string) string {
	for _, c := range stockCauses {
		if i := strings.Index(msg, c); i >= 0 {
			msg = msg[:i] + msg[i+len(c):]
		}
	}
	return msg
}

// shortCause is a message's first clause, in at most about 60 columns.
func shortCause(msg string) string {
	cut := len(msg)
	for _, sep := range []string{": ", "; ", " ("} {
		if i := strings.Index(msg, sep); i >= 0 && i < cut {
			cut = i
		}
	}
	clause := msg[:cut]
	if len([]rune(clause)) <= 60 {
		return clause
	}
	words := strings.Fields(clause)
	out := ""
	for _, w := range words {
		if len([]rune(out+" "+w)) > 58 {
			break
		}
		out = strings.TrimSpace(out + " " + w)
	}
	return out + " …"
}

type addRaw func(r *raw, format string, args ...any)

// backendFindings flags kube-proxy rules in both iptables backends.
func backendFindings(rs *inspect.Ruleset, add func(sev Severity, area, subject, format string, args ...any)) {
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
	for _, fam := range []kubeproxy.Family{kubeproxy.IPv4, kubeproxy.IPv6} {
		backends := byFamily[fam]
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

func staleFindings(s *StaleReport, add addRaw) {
	var harmful, notDue, other []StaleVerdict
	for _, c := range s.Chains {
		switch {
		case c.Referenced && !c.Leftover:
			harmful = append(harmful, c)
		case c.Leftover:
			sev := SeverityInfo // harmless while nothing reaches it
			if c.Referenced {
				sev = SeverityError
			}
			add(&raw{Finding: Finding{Severity: sev, Area: "stale", Subject: c.Chain}, tag: tagLeftover, family: kubeproxy.Family(c.Family)}, "%s", c.Reason)
		case c.NotDueYet:
			notDue = append(notDue, c)
		default:
			other = append(other, c)
		}
	}
	if len(harmful) > 0 {
		staleRoutedFindings(s, add)
	}
	if len(notDue) > 0 {
		add(&raw{Finding: Finding{Severity: SeverityInfo, Area: "stale"}, tag: tagOther}, "%d stale chains are waiting for kube-proxy's own cleanup and are harmless (see `stale` for when they are due)", len(notDue))
	}
	if len(other) > 0 {
		add(&raw{Finding: Finding{Severity: SeverityWarning, Area: "stale"}, tag: tagOverdue, family: kubeproxy.Family(other[0].Family)}, "%d stale chains are unreferenced but should already be gone: kube-proxy may not be syncing", len(other))
	}
	for _, e := range s.Elements {
		sev := SeverityWarning
		if e.Referenced {
			sev = SeverityError
		}
		// the item closing a long list (e.More) counts the rest: one finding
		subject := e.Map
		if e.Element != "" {
			subject += " " + e.Element
		}
		add(&raw{Finding: Finding{Severity: sev, Area: "stale", Subject: subject, Count: e.More}, tag: tagHarmful, family: kubeproxy.Family(e.Family)}, "%s", e.Reason)
	}
}

// pluralVerb is "s are" or " is".
func pluralVerb(n int) string {
	if n == 1 {
		return " is"
	}
	return "s are"
}
