package plugin

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/proxyrules/kubectl-proxyrules/diagnose"
)

// Exit statuses of every analysis command (triage, explain, stale, masq,
// counts).
const (
	ExitHealthy     = 0 // ran, found nothing wrong, checked everything
	ExitCouldNotRun = 1 // bad flags, unreadable input, cluster unreachable
	ExitProblems    = 2 // ran, found errors or warnings
	ExitIncomplete  = 3 // ran, found nothing wrong, but could not check everything
)

// sweepHelp is in the help of every command that sweeps.
const sweepHelp = `With --all-nodes, --node-selector LABELS or --node repeated, it sweeps: one
short-lived debug pod per node, --parallel at a time (5 by default), the
Services, EndpointSlices, Nodes and kube-proxy DaemonSets listed once for
the whole sweep. The text is a table of the nodes, worst first, and the
findings grouped by cause across nodes; -o json|yaml is a List of each node's report
(as the command prints it for that node alone), streamed as nodes finish,
and a summary. A node that cannot be read (not ready, no kube-proxy, refused)
is reported and the sweep goes on. --from-bundle of a folder written by
collect --all-nodes sweeps its nodes offline. The exit status is that of the
whole sweep; 3 when some node could not be read.

`

// exitStatusHelp ends the help of every command that judges.
const exitStatusHelp = `Exit status: 0 healthy (nothing wrong, everything checked), 2 problems found
(errors or warnings; notes do not count), 3 incomplete (nothing wrong in what
was checked, but the report lists what could not be and what to pass), 1 could
not run.`

// exitCode is a report status's exit status.
func exitCode(s diagnose.Status) int {
	switch s {
	case diagnose.StatusProblems:
		return ExitProblems
	case diagnose.StatusIncomplete:
		return ExitIncomplete
	}
	return ExitHealthy
}

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
  %[1]s triage --from-dump iptables-save.txt \
      --from-dump ip6tables-save.txt --from-objects objects.json \
      --from-metrics metrics.txt --from-config kube-proxy-cm.yaml --node ip-10-0-1-7

  # In a script: 0 healthy, 2 problems found, 3 incomplete, 1 could not run
  %[1]s triage --from-dump ruleset.json --from-objects objects.json -o json > report.json; echo $?

  # Which nodes are affected? Every node, 10 at a time
  %[1]s triage --all-nodes --parallel 10

  # The workers of one zone, as a List of reports
  %[1]s triage -o json \
      --node-selector node-role.kubernetes.io/worker=,topology.kubernetes.io/zone=eu-1a`

// NewCmdTriage builds `triage`.
func NewCmdTriage(name string, streams genericiooptions.IOStreams, kube *genericclioptions.ConfigFlags) *cobra.Command {
	o := &TriageOptions{analysisOptions{IOStreams: streams}}
	cmd := &cobra.Command{
		Use:   "triage (--node NAME... | --all-nodes | --node-selector LABELS | --from-bundle DIR | --from-dump FILE [--from-objects FILE] [--from-metrics FILE] [--from-config FILE])",
		Short: "Everything wrong with kube-proxy's rules on one node, most severe first",
		Long: `Run every diagnosis on one node and report the findings, most severe first:
the proxy mode kube-proxy is really in (and rules of both modes), kube-proxy
rules in both iptables backends, Services whose rules are missing altogether or
disagree with their EndpointSlices (explain), stale chains that traffic still
reaches (stale), masquerade mark problems and clashes (masq), rule counts,
sync age and sync failures from kube-proxy's metrics (counts), and beside the
rules, stale conntrack entries, a full conntrack table and the sysctls
Services depend on (conntrack; read live, or --from-conntrack,
--from-conntrack-stats and --from-sysctls: without them it is not checked).

Findings are grouped by cause, each cause once with the findings it explains
listed under it; the last line is the verdict.

Use it first, at 3 a.m., when a Service on a node does not get traffic.

` + sweepHelp + exitStatusHelp,
		Example: fmt.Sprintf(triageExample, name),
		Args:    cobra.NoArgs,
		RunE:    runAnalysis(o),
	}
	o.addFlags(cmd, kube, false)
	o.Inputs.addNodeIPFlag(cmd)
	o.Sweep.AddFlags(cmd)
	return cmd
}

// triageStatsInterval is triage's least time between the conntrack
// counters' two reads.
const triageStatsInterval = time.Second

// TriageOptions are the options of `triage`.
type TriageOptions struct{ analysisOptions }

// Run runs every diagnosis; the status gives the exit status.
func (o *TriageOptions) Run() error {
	req := o.request()
	req.Kernel = true // the conntrack table, its counters and the sysctls beside the rules
	// A second between the counters' reads, not conntrack's three: a node
	// dropping packets for a full table drops many a second, and a sweep
	// of many nodes pays the wait on each.
	req.StatsInterval = triageStatsInterval
	return o.runRequest(req, func(l *Loaded) (built, error) {
		rep := diagnose.Triage(l.Node)
		return built{report: rep, status: rep.Status,
			render: func(out io.Writer, t *Terminal) error { return renderTriage(out, t, rep) },
			rows: func() rows {
				return rows{kind: "finding", items: anySlice(rep.Findings), name: func(i int) string {
					f := rep.Findings[i]
					return strings.Join(strings.Fields(f.Area+" "+f.Subject), "-")
				}}
			}}, nil
	})
}

func renderTriage(out io.Writer, t *Terminal, rep *diagnose.TriageReport) error {
	st := t.styles()
	title := "triage"
	if rep.Node != "" {
		title += " node/" + rep.Node
	}
	fmt.Fprintf(out, "%s: %s  %s\n", st.header.Render(title), statusText(st, rep.Status),
		st.dim.Render(fmt.Sprintf("(%s, %s, %s)", count(rep.Summary[diagnose.SeverityError], "error"), count(rep.Summary[diagnose.SeverityWarning], "warning"), count(rep.Summary[diagnose.SeverityInfo], "note"))))
	if id := rep.Identity; id.Given == "" && id.Inferred != "" {
		fmt.Fprintln(out, wrapIndent("node inferred from the dump: "+id.Evidence, t.Width-2, 2))
	}
	if rep.EvidenceTime != nil {
		fmt.Fprintln(out, wrapIndent(fmt.Sprintf("evidence taken %s (%s)", rep.EvidenceTime.UTC().Format(time.RFC3339), rep.EvidenceTimeSource), t.Width-2, 2))
	}
	mode := "proxy mode: " + string(rep.Mode.Detected)
	if rep.Mode.FromConfig != "" {
		mode += " (config: " + string(rep.Mode.FromConfig) + ")"
	}
	fmt.Fprintln(out, mode)
	if rep.IPVS != nil {
		renderTriageIPVS(out, t, rep.IPVS)
	} else {
		fmt.Fprintf(out, "chains: %d kube-proxy chains, %d attributed, %d without owner, %d stale\n", rep.Chains.Chains, rep.Chains.Attributed, rep.Chains.Unowned, rep.Chains.Stale)
	}
	for _, m := range rep.Masquerade {
		mark := m.Mark
		if mark == "" {
			mark = "not seen"
		}
		line := fmt.Sprintf("masquerade %s %s: mark %s", m.Mode, m.Family, mark)
		if m.MasqueradeBit >= 0 {
			line += fmt.Sprintf(" (bit %d)", m.MasqueradeBit)
		}
		if m.RandomFully {
			line += ", random-fully"
		} else {
			line += ", no random-fully"
		}
		line += ", " + count(len(m.Conflicts), "conflict")
		fmt.Fprintln(out, wrapIndent(line, t.Width, 2))
	}
	if rep.Counts != nil {
		for _, tc := range rep.Counts.Tables {
			switch {
			case tc.Metric == nil:
				continue
			case !tc.InDump:
				fmt.Fprintf(out, "rule count %s %s: metric %s, not in the dump\n", tc.Family, tc.Table, optFloat(tc.Metric))
			default:
				fmt.Fprintf(out, "rule count %s %s: metric %s, actual %d%s\n", tc.Family, tc.Table, optFloat(tc.Metric), tc.Actual, map[bool]string{true: "", false: " (differs)"}[tc.Agree])
			}
		}
	}
	fmt.Fprintln(out, wrapIndent(conntrackLine(rep.Conntrack), t.Width, 2))
	for _, f := range rep.Findings {
		fmt.Fprintln(out)
		label := severityStyle(st, f.Severity).Render(fmt.Sprintf("%-7s", strings.ToUpper(string(f.Severity))))
		head := f.Area
		if f.Subject != "" {
			head += " " + f.Subject
		}
		fmt.Fprintf(out, "%s %s\n", label, wrapIndent(st.header.Render(head), t.Width-8, 8))
		fmt.Fprintln(out, "        "+wrapIndent(f.Message, t.Width-8, 8))
		if f.Evidence != "" {
			fmt.Fprintln(out, "        "+wrapIndent(st.dim.Render("evidence: ")+f.Evidence, t.Width-8, 8))
		}
		if f.Remedy != "" {
			fmt.Fprintln(out, "        "+wrapIndent(st.good.Render("fix: ")+f.Remedy, t.Width-8, 8))
		}
		for _, c := range f.Commands {
			fmt.Fprintln(out, "          "+st.dim.Render(c))
		}
		if n := len(f.Symptoms); n > 0 {
			fmt.Fprintf(out, "        %s\n", st.dim.Render(fmt.Sprintf("%d symptom%s:", n, plural(n))))
			for _, s := range f.Symptoms {
				head := s.Area
				if s.Subject != "" {
					head += " " + s.Subject
				}
				fmt.Fprintln(out, "        - "+wrapIndent(head+": "+s.Message, t.Width-10, 10))
			}
		}
	}
	if len(rep.NotChecked) > 0 {
		fmt.Fprintln(out)
		renderNotChecked(out, t, rep.NotChecked)
	}
	fmt.Fprintln(out)
	fmt.Fprintln(out, wrapIndent(st.header.Render("verdict: ")+rep.Verdict+fmt.Sprintf(" (exit %d)", exitCode(rep.Status)), t.Width, 2))
	return nil
}

// statusText renders a status for people.
func statusText(st styles, s diagnose.Status) string {
	switch s {
	case diagnose.StatusHealthy:
		return st.good.Render("HEALTHY")
	case diagnose.StatusIncomplete:
		return st.warn.Render("INCOMPLETE")
	}
	return st.bad.Render("PROBLEMS FOUND")
}

// count is "1 error", "0 errors", "3 errors".
func count(n int, noun string) string { return fmt.Sprintf("%d %s%s", n, noun, plural(n)) }

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
