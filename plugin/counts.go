package plugin

import (
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/charmbracelet/lipgloss"
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/proxyrules/kubectl-proxyrules/diagnose"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

const countsExample = `  # kube-proxy's rule-count metrics against the rules really there
  %[1]s counts --node ip-10-0-1-7

  # ... from what was saved on the node
  curl -s 127.0.0.1:10249/metrics > metrics.txt                 # on the node
  %[1]s counts --from-dump iptables-save.txt --from-metrics metrics.txt --from-objects objects.json

  # Judge sync ages as of when the metrics were saved
  %[1]s counts --from-dump v4.txt --from-metrics metrics.txt --at 2026-11-29T03:12:00Z -o json

  # Rule-count drift and failed syncs on three nodes
  %[1]s counts --node node-3 --node node-7 --node node-9`

// NewCmdCounts builds `counts`.
func NewCmdCounts(name string, streams genericiooptions.IOStreams, kube *genericclioptions.ConfigFlags) *cobra.Command {
	o := &CountsOptions{analysisOptions{IOStreams: streams}}
	cmd := &cobra.Command{
		Use:   "counts (--node NAME... | --all-nodes | --node-selector LABELS | --from-bundle DIR | --from-dump FILE --from-metrics FILE [--from-objects FILE])",
		Short: "Compare kube-proxy's rule-count metrics with the rules really in the dump",
		Long: `Compare kube-proxy's own rule counts (kubeproxy_sync_proxy_rules_iptables_total
and _last, per table and IP family) with the rules in the dump, counted exactly
as kube-proxy counts them, and say why they differ when they do: stale chains
still waiting for cleanup, another writer adding rules to kube-proxy's chains,
a failed restore (the metric is set before the restore runs), labels of older
versions. It also reports large-cluster mode as the dump shows it (comments
missing) and as the API objects imply (more than 1000 endpoints), the age of
the last sync, syncs that are queued but not happening, and sync failures.
nftables mode has no rule-count metric; counts says so. IPVS mode has none
either: counts compares its virtual servers with the frontends the Service
ports call for (missing, stale, kube-proxy's probe).

Use it when kube-proxy looks alive but the rules look wrong or old.

` + sweepHelp + exitStatusHelp,
		Example: fmt.Sprintf(countsExample, name),
		Args:    cobra.NoArgs,
		RunE:    runAnalysis(o),
	}
	o.addFlags(cmd, kube, false)
	o.Sweep.AddFlags(cmd)
	return cmd
}

// CountsOptions are the options of `counts`.
type CountsOptions struct{ analysisOptions }

// Run compares the counts.
func (o *CountsOptions) Run() error {
	return o.run(func(l *Loaded) (built, error) {
		rep := diagnose.Counts(l.Node)
		rep.Node = l.Node.Name
		return built{report: rep, status: rep.Status, notChecked: rep.NotChecked,
			render: func(out io.Writer, t *Terminal) error { return renderCounts(out, t, rep) },
			rows: func() rows {
				return rows{kind: "table", items: anySlice(rep.Tables), name: func(i int) string { return string(rep.Tables[i].Family) + "/" + rep.Tables[i].Table }}
			}}, nil
	})
}

// seconds writes a duration in seconds for people: 12ms, 3.4s, 3m12s.
func seconds(v float64) string {
	d := time.Duration(v * float64(time.Second))
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

func optInt(p *int) string {
	if p == nil {
		return "-"
	}
	return strconv.Itoa(*p)
}

func optFloat(p *float64) string {
	if p == nil {
		return "-"
	}
	return strconv.FormatFloat(*p, 'f', -1, 64)
}

func renderCounts(out io.Writer, t *Terminal, rep *diagnose.RuleCounts) error {
	st := t.styles()
	fmt.Fprintln(out, st.group.Render("proxy mode "+string(rep.Mode)))
	if len(rep.Tables) > 0 {
		rows := [][]string{}
		for _, tc := range rep.Tables {
			agree := "yes"
			switch {
			case !tc.Compared:
				agree = "n/a"
			case !tc.Agree:
				agree = "NO"
			}
			actual, staleRules := strconv.Itoa(tc.Actual), strconv.Itoa(tc.StaleRules)
			if !tc.InDump {
				actual, staleRules = "-", "-"
			}
			rows = append(rows, []string{string(tc.Family), tc.Table, optFloat(tc.Metric), actual, staleRules, optInt(tc.Difference), agree})
		}
		agreeStyle := func(cell string) lipgloss.Style {
			switch cell {
			case "yes":
				return st.good
			case "NO":
				return st.bad
			}
			return st.dim
		}
		if err := renderTableStyled(out, t, []string{"FAMILY", "TABLE", "METRIC", "ACTUAL", "STALE", "DIFF", "AGREE"}, rows, 6, agreeStyle); err != nil {
			return err
		}
		for _, tc := range rep.Tables {
			if tc.InDump {
				fmt.Fprintln(out, wrapIndent(fmt.Sprintf("%s %s: %d rules in the dump = %d counted by kube-proxy + %d in stale chains + %d jumps from built-in chains + %d others",
					tc.Family, tc.Table, tc.Present, tc.Actual, tc.StaleRules, tc.BuiltinJumps, tc.Others), t.Width-2, 2))
			}
			switch {
			case !tc.Compared && tc.NotCompared != "":
				fmt.Fprintln(out, wrapIndent(fmt.Sprintf("%s %s: not compared: %s", tc.Family, tc.Table, tc.NotCompared), t.Width-2, 2))
			case tc.Reason != "":
				fmt.Fprintln(out, wrapIndent(fmt.Sprintf("%s %s: %s", tc.Family, tc.Table, tc.Reason), t.Width-2, 2))
			}
		}
	}
	renderCountsIPVS(out, t, rep.IPVS)
	if rep.IPVS == nil { // the IPVS proxier has no large-cluster mode
		renderLargeClusterMode(out, t, rep)
	}
	renderLastSyncs(out, t, st, rep)
	renderFailures(out, t, rep.Failures)
	for _, n := range rep.Notes {
		fmt.Fprintln(out, wrapIndent("note: "+n, t.Width-2, 2))
	}
	return nil
}

// renderLargeClusterMode says what the dump and the objects show of the
// iptables proxier's large-cluster mode.
func renderLargeClusterMode(out io.Writer, t *Terminal, rep *diagnose.RuleCounts) {
	lc := rep.LargeClusterMode
	line := "large-cluster mode (dump): "
	switch {
	case lc.FromDump == nil:
		line += "cannot tell"
	case *lc.FromDump:
		line += "yes"
	default:
		line += "no"
	}
	if lc.Evidence != "" {
		line += " (" + lc.Evidence + ")"
	}
	fmt.Fprintln(out, wrapIndent(line, t.Width-2, 2))
	for _, f := range []string{string(kubeproxy.IPv4), string(kubeproxy.IPv6)} {
		if v, ok := rep.LargeClusterModeFromObjects[f]; ok {
			fmt.Fprintf(out, "large-cluster mode (objects, %s): %s\n", f, yesNo(v))
		}
	}
}

// renderFailures says each failure counter with its state now: the counter
// is kube-proxy's lifetime, its state says how loud to be.
func renderFailures(out io.Writer, t *Terminal, failures []diagnose.FailureCount) {
	st := t.styles()
	for _, f := range failures {
		label := st.bad.Render("failing")
		switch f.Now {
		case diagnose.Recovered:
			label = st.dim.Render("failed before")
		case diagnose.Unknown:
			label = st.warn.Render("failed")
		}
		fmt.Fprintln(out, label+" "+wrapIndent(fmt.Sprintf("%s{%s} = %v since kube-proxy started, %s now (%s): %s", f.Metric, f.Family, f.Value, f.Now, f.Evidence, f.Meaning), t.Width-8, 8))
	}
}

// renderLastSyncs prints each family's last sync, its age (said relative
// to what) and its sync durations.
func renderLastSyncs(out io.Writer, t *Terminal, st styles, rep *diagnose.RuleCounts) {
	if len(rep.LastSync) > 0 && rep.EvidenceTime != nil {
		// An age is relative to something: say what.
		fmt.Fprintln(out, wrapIndent(fmt.Sprintf("ages relative to %s (%s)", rep.EvidenceTime.UTC().Format(time.RFC3339), rep.EvidenceTimeSource), t.Width-2, 2))
	}
	for _, s := range rep.LastSync {
		fam := string(s.Family)
		if fam == "" {
			fam = "all families"
		}
		age := "unknown"
		if s.LastSyncAgeSeconds != nil {
			age = (time.Duration(*s.LastSyncAgeSeconds) * time.Second).String() + " ago"
		}
		msg := fmt.Sprintf("last sync %s: %s", fam, age)
		switch {
		case s.Hung:
			msg = st.bad.Render(msg + " HUNG")
		case s.Slow:
			msg = st.warn.Render(msg + " SLOW")
		}
		if s.Reason != "" {
			msg += ": " + s.Reason
		}
		fmt.Fprintln(out, wrapIndent(msg, t.Width-2, 2))
		if s.Syncs > 0 {
			line := fmt.Sprintf("%s, %s on average", count(int(s.Syncs), "sync"), seconds(s.MeanSyncSeconds))
			if s.FullSyncs+s.PartialSyncs > 0 { // IPVS mode has no full and partial histograms
				line += fmt.Sprintf(" (full: %d, %s; partial: %d, %s)", s.FullSyncs, seconds(s.MeanFullSyncSeconds), s.PartialSyncs, seconds(s.MeanPartialSyncSeconds))
			}
			if s.RecentMeanSyncSeconds != nil {
				line += fmt.Sprintf("; %d since the earlier scrape, %s on average", *s.RecentSyncs, seconds(*s.RecentMeanSyncSeconds))
			}
			if s.LongSyncs > 0 {
				line += fmt.Sprintf("; %d longer than 16 s", s.LongSyncs)
			}
			if s.Programmed > 0 {
				line += fmt.Sprintf("; network programming %s on average", seconds(s.MeanProgrammingSeconds))
			}
			fmt.Fprintln(out, "  "+wrapIndent(line, t.Width-4, 4))
		}
	}
}
