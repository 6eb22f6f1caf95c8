package plugin

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/inspect"
	"github.com/proxyrules/kubectl-proxyrules/plugin/collect"
)

// Exit statuses of triage (and of the plugin in general).
const (
	ExitHealthy     = 0 // ran, found nothing to worry about
	ExitCouldNotRun = 1 // bad flags, unreadable input, cluster unreachable
	ExitProblems    = 2 // ran, found errors or warnings
)

// ExitError asks main to exit with Code after the report was printed.
type ExitError struct{ Code int }

func (e *ExitError) Error() string { return fmt.Sprintf("exit status %d", e.Code) }

// IsExitError reports an *ExitError and its code.
func IsExitError(err error) (int, bool) {
	var e *ExitError
	if errors.As(err, &e) {
		return e.Code, true
	}
	return 0, false
}

const triageExample = `  # Everything about one node, most severe first (read live)
  %[1]s triage --node ip-10-0-1-7

  # ... from what was saved on the node and in the cluster
  %[1]s triage --from-dump iptables-save.txt --from-dump ip6tables-save.txt \
      --from-objects objects.json --from-metrics metrics.txt --from-config kube-proxy-cm.yaml --node ip-10-0-1-7

  # In a script: 0 healthy, 2 problems found, 1 could not run
  %[1]s triage --from-dump ruleset.json --from-objects objects.json -o json > report.json; echo $?`

// NewCmdTriage builds `triage`.
func NewCmdTriage(name string, streams genericiooptions.IOStreams, kube *genericclioptions.ConfigFlags) *cobra.Command {
	o := &simpleOptions{IOStreams: streams, Output: "text", Color: "auto"}
	cmd := &cobra.Command{
		Use:   "triage (--node NAME | --from-bundle DIR | --from-dump FILE [--from-objects FILE] [--from-metrics FILE] [--from-config FILE])",
		Short: "Everything wrong with kube-proxy's rules on one node, most severe first",
		Long: `Run every diagnosis on one node and report the findings, most severe first:
the proxy mode kube-proxy is really in (and rules of both modes), kube-proxy
rules in both iptables backends, Services whose rules are missing altogether or
disagree with their EndpointSlices (explain), stale chains that traffic still
reaches (stale), masquerade mark problems and clashes (masq), and rule counts,
sync age and sync failures from kube-proxy's metrics (counts).

Exit status: 0 when healthy, 2 when problems (errors or warnings) were found,
1 when it could not run. Informational findings do not change the status.

Use it first, at 3 a.m., when a Service on a node does not get traffic.`,
		Example: fmt.Sprintf(triageExample, name),
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := o.load()
			if err != nil {
				return err
			}
			rep := BuildTriage(l, o.Sources.Node, o.now)
			if o.machine() {
				err = printMachine(o.Out, o.Output, rep)
			} else {
				err = renderTriage(o.Out, o.term, rep)
			}
			if err != nil {
				return err
			}
			if rep.Status != "healthy" {
				return &ExitError{Code: ExitProblems}
			}
			return nil
		},
	}
	o.addFlags(cmd, kube)
	o.addAtFlag(cmd)
	return cmd
}

// Finding is one thing triage found.
type Finding struct {
	Severity correlate.Severity `json:"severity"`
	// Area: mode, backend, service, stale, masquerade, counts, input.
	Area    string `json:"area"`
	Subject string `json:"subject,omitempty"`
	Message string `json:"message"`
}

// ModeDetection is the proxy mode as the node shows it.
type ModeDetection struct {
	// Detected: iptables, nftables, ipvs, iptables+nftables, or unknown.
	Detected    string   `json:"detected"`
	Evidence    []string `json:"evidence"`
	FromConfig  string   `json:"fromConfig,omitempty"`
	FromMetrics string   `json:"fromMetrics,omitempty"`
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
	Summary    map[correlate.Severity]int `json:"summary"`
	Chains     MapSummary                 `json:"chains"`
	Stale      *correlate.StaleReport     `json:"stale"`
	Masquerade []inspect.MasqReport       `json:"masquerade"`
	Counts     *CountsReport              `json:"counts"`
	// Collection says how the node was read, when it was read live or
	// from a bundle.
	Collection *collect.Manifest `json:"collection,omitempty"`
}

// BuildTriage runs every diagnosis.
func BuildTriage(l *Loaded, node string, now time.Time) *TriageReport {
	rep := &TriageReport{APIVersion: APIVersion, Kind: "Triage", Node: node, Findings: []Finding{}, Summary: map[correlate.Severity]int{}}
	add := func(sev correlate.Severity, area, subject, format string, args ...any) {
		rep.Findings = append(rep.Findings, Finding{Severity: sev, Area: area, Subject: subject, Message: fmt.Sprintf(format, args...)})
	}
	rs := l.Ruleset
	rep.Collection = l.Collected
	if l.Collected != nil {
		for _, w := range l.Collected.Warnings {
			add(correlate.SeverityInfo, "collection", l.Collected.Node, "%s", w)
		}
	}
	res := correlate.Attribute(rs, l.Objects)
	rep.Chains = BuildChainMap(node, rs, res).Summary

	// Proxy mode and backends.
	rep.Mode = detectMode(rs)
	if l.Config != nil {
		rep.Mode.FromConfig = l.Config.Mode
	}
	if rep.Mode.Detected == "iptables+nftables" {
		add(correlate.SeverityError, "mode", "", "kube-proxy rules of both iptables and nftables mode are present: kube-proxy removes the other mode's rules when it starts, so two kube-proxies (or a mode switch without a restart) are acting on this node")
	}
	if rep.Mode.FromConfig != "" && rep.Mode.Detected != "unknown" && !strings.Contains(rep.Mode.Detected, rep.Mode.FromConfig) {
		add(correlate.SeverityError, "mode", "", "kube-proxy's configuration says mode %q but the node has %s rules", rep.Mode.FromConfig, rep.Mode.Detected)
	}
	if rep.Mode.Detected == "unknown" {
		add(correlate.SeverityError, "mode", "", "no kube-proxy rules in the dump: kube-proxy is not running on this node, runs in another mode (IPVS, or an eBPF replacement), or the dump is of the wrong backend (try iptables-legacy-save / iptables-nft-save)")
	}
	backendFindings(rs, add)

	// Services.
	if l.Objects == nil {
		add(correlate.SeverityInfo, "input", "", "no API objects given: Services, EndpointSlices and stale chains are not checked (pass --from-objects)")
	} else {
		for _, ex := range correlate.ExplainAll(rs, l.Objects, node) {
			for _, pp := range ex.Ports {
				for _, p := range pp.Problems {
					add(p.Severity, "service", fmt.Sprintf("%s (%s %s)", pp.ServicePort, pp.Mode, pp.Family), "%s", p.Message)
				}
			}
		}
	}

	// Stale chains.
	var syncPeriod time.Duration
	if l.Config != nil {
		syncPeriod = l.Config.SyncPeriod
	}
	rep.Stale = correlate.FindStale(rs, res, l.Objects, correlate.StaleOptions{SyncPeriod: syncPeriod})
	staleFindings(rep.Stale, add)

	// Masquerade.
	rep.Masquerade = inspect.AnalyzeMasquerade(rs, l.Config)
	if rep.Masquerade == nil {
		rep.Masquerade = []inspect.MasqReport{}
	}
	for _, m := range rep.Masquerade {
		subject := m.Mode + " " + string(m.Family)
		for _, p := range m.Problems {
			add(correlate.SeverityError, "masquerade", subject, "%s", p)
		}
		for _, c := range m.Conflicts {
			add(correlate.SeverityWarning, "masquerade", subject, "%s rule %s %s/%s in %s %s: %s", c.Owner, c.Op, c.Value, c.Mask, c.Table, c.Chain, c.Reason)
		}
	}

	// Counts and syncs.
	rep.Counts = buildCounts(l, res, now)
	if len(l.Metrics) == 0 {
		add(correlate.SeverityInfo, "input", "", "no kube-proxy metrics given: rule counts, sync age and sync failures are not checked (pass --from-metrics)")
	} else {
		rep.Mode.FromMetrics = rep.Counts.ModeFromMetrics
		for _, tc := range rep.Counts.Tables {
			if !tc.Agree && tc.Reason != "" && tc.Metric != nil {
				sev := correlate.SeverityWarning
				if tc.StaleRules > 0 && tc.Difference != nil && *tc.Difference == 0 {
					sev = correlate.SeverityInfo
				}
				add(sev, "counts", fmt.Sprintf("%s %s", tc.Family, tc.Table), "%s", tc.Reason)
			}
		}
		for _, s := range rep.Counts.LastSync {
			if s.Hung {
				add(correlate.SeverityError, "counts", string(s.Family), "kube-proxy is not syncing: %s", s.Reason)
			}
		}
		for _, f := range rep.Counts.Failures {
			add(correlate.SeverityError, "counts", string(f.Family), "%s = %v: %s", f.Metric, f.Value, f.Meaning)
		}
	}

	rank := map[correlate.Severity]int{correlate.SeverityError: 0, correlate.SeverityWarning: 1, correlate.SeverityInfo: 2}
	sort.SliceStable(rep.Findings, func(i, j int) bool { return rank[rep.Findings[i].Severity] < rank[rep.Findings[j].Severity] })
	for _, f := range rep.Findings {
		rep.Summary[f.Severity]++
	}
	rep.Status = "healthy"
	if rep.Summary[correlate.SeverityError]+rep.Summary[correlate.SeverityWarning] > 0 {
		rep.Status = "problems"
	}
	return rep
}

type addFunc func(sev correlate.Severity, area, subject, format string, args ...any)

// detectMode tells the proxy mode from the rules present.
func detectMode(rs *inspect.Ruleset) ModeDetection {
	d := ModeDetection{Evidence: []string{}}
	ipt, nft, ipvs := false, false, false
	for _, t := range rs.IPTables {
		if t.Name != "nat" {
			continue
		}
		svcChains := 0
		for _, c := range t.Chains {
			if strings.HasPrefix(c.Name, correlate.PrefixService) {
				svcChains++
			}
		}
		switch {
		case svcChains > 0 || t.Chain("KUBE-SERVICES") != nil && t.Chain("KUBE-MARK-MASQ") != nil && t.Chain("KUBE-NODE-PORT") == nil:
			ipt = true
			d.Evidence = append(d.Evidence, fmt.Sprintf("%s nat (%s): KUBE-SERVICES and %d KUBE-SVC- chains", t.Family, orUnknown(string(t.Backend)), svcChains))
		case t.Chain("KUBE-NODE-PORT") != nil || t.Chain("KUBE-LOAD-BALANCER") != nil:
			ipvs = true
			d.Evidence = append(d.Evidence, fmt.Sprintf("%s nat: IPVS chains KUBE-NODE-PORT/KUBE-LOAD-BALANCER", t.Family))
		}
	}
	for _, t := range rs.NFTables {
		if t.IsKubeProxy() && len(t.Chains) > 0 {
			nft = true
			d.Evidence = append(d.Evidence, fmt.Sprintf("table %s kube-proxy with %d chains", t.Family, len(t.Chains)))
		}
	}
	switch {
	case ipt && nft:
		d.Detected = "iptables+nftables"
	case ipt:
		d.Detected = "iptables"
	case nft:
		d.Detected = "nftables"
	case ipvs:
		d.Detected = "ipvs"
	default:
		d.Detected = "unknown"
	}
	return d
}

func orUnknown(s string) string {
	if s == "" {
		return "backend unknown"
	}
	return s
}

// backendFindings flags kube-proxy rules in both iptables backends.
func backendFindings(rs *inspect.Ruleset, add addFunc) {
	byFamily := map[inspect.Family]map[inspect.Backend]bool{}
	for _, t := range rs.IPTables {
		if t.Name != "nat" || t.Chain("KUBE-SERVICES") == nil {
			continue
		}
		if byFamily[t.Family] == nil {
			byFamily[t.Family] = map[inspect.Backend]bool{}
		}
		byFamily[t.Family][t.Backend] = true
	}
	for fam, backends := range byFamily {
		if backends[inspect.BackendNFT] && backends[inspect.BackendLegacy] {
			add(correlate.SeverityError, "backend", string(fam), "kube-proxy chains exist in both the iptables-nft and the iptables-legacy backend: the kernel runs both rule sets, and the older one sends traffic to endpoints that may be gone. Find which is current (kube-proxy's iptables-wrapper picked one) and remove the other's KUBE- chains")
		}
	}
	for _, d := range rs.Dumps {
		if d.LegacyTablesPresent {
			legacyGiven := false
			for _, t := range rs.IPTables {
				if t.Backend == inspect.BackendLegacy {
					legacyGiven = true
				}
			}
			if !legacyGiven {
				add(correlate.SeverityWarning, "backend", d.Source, "iptables-nft-save says iptables-legacy tables are present: collect iptables-legacy-save too, to see whether they hold old kube-proxy rules")
			}
		}
	}
}

func staleFindings(s *correlate.StaleReport, add addFunc) {
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
			add(correlate.SeverityWarning, "stale", c.Chain, "%s", c.Reason)
		case c.NotDueYet:
			notDue++
		default:
			other++
		}
	}
	if harmful > 0 {
		add(correlate.SeverityError, "stale", strings.Join(harmfulNames, ", "), "%d stale chains are still reached by traffic: connections can go to Services or endpoints that are gone (see `stale`)", harmful)
	}
	if notDue > 0 {
		add(correlate.SeverityInfo, "stale", "", "%d stale chains are waiting for kube-proxy's own cleanup and are harmless (see `stale` for when they are due)", notDue)
	}
	if other > 0 {
		add(correlate.SeverityWarning, "stale", "", "%d stale chains are unreferenced but should already be gone: kube-proxy may not be syncing", other)
	}
	for _, e := range s.Elements {
		sev := correlate.SeverityWarning
		if e.Referenced {
			sev = correlate.SeverityError
		}
		add(sev, "stale", e.Map+" "+e.Element, "%s", e.Reason)
	}
}

func renderTriage(out io.Writer, t *Terminal, rep *TriageReport) error {
	st := t.styles()
	title := "triage"
	if rep.Node != "" {
		title += " node/" + rep.Node
	}
	status := st.good.Render("HEALTHY")
	if rep.Status != "healthy" {
		status = st.bad.Render("PROBLEMS FOUND")
	}
	fmt.Fprintf(out, "%s: %s  %s\n", st.header.Render(title), status,
		st.dim.Render(fmt.Sprintf("(%d errors, %d warnings, %d notes)", rep.Summary[correlate.SeverityError], rep.Summary[correlate.SeverityWarning], rep.Summary[correlate.SeverityInfo])))
	mode := "proxy mode: " + rep.Mode.Detected
	if rep.Mode.FromConfig != "" {
		mode += " (config: " + rep.Mode.FromConfig + ")"
	}
	fmt.Fprintln(out, mode)
	fmt.Fprintf(out, "chains: %d kube-proxy chains, %d attributed, %d without owner, %d stale\n", rep.Chains.Chains, rep.Chains.Attributed, rep.Chains.Unowned, rep.Chains.Stale)
	for _, m := range rep.Masquerade {
		line := fmt.Sprintf("masquerade %s %s: mark %s", m.Mode, m.Family, m.Mark)
		if m.MasqueradeBit >= 0 {
			line += fmt.Sprintf(" (bit %d)", m.MasqueradeBit)
		}
		line += ", random-fully " + yesNo(m.RandomFully) + fmt.Sprintf(", %d conflicts", len(m.Conflicts))
		fmt.Fprintln(out, line)
	}
	if rep.Counts != nil {
		for _, tc := range rep.Counts.Tables {
			if tc.Metric == nil {
				continue
			}
			fmt.Fprintf(out, "rule count %s %s: metric %s, actual %d%s\n", tc.Family, tc.Table, optFloat(tc.Metric), tc.Actual, map[bool]string{true: "", false: " (differs)"}[tc.Agree])
		}
	}
	if len(rep.Findings) == 0 {
		return nil
	}
	fmt.Fprintln(out)
	for _, f := range rep.Findings {
		label := severityStyle(st, f.Severity).Render(fmt.Sprintf("%-7s", strings.ToUpper(string(f.Severity))))
		head := f.Area
		if f.Subject != "" {
			head += " " + f.Subject
		}
		fmt.Fprintf(out, "%s %s\n", label, st.header.Render(head))
		fmt.Fprintln(out, "        "+wrapIndent(f.Message, t.Width-8, 8))
	}
	return nil
}
