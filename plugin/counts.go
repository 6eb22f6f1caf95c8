package plugin

import (
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/inspect"
)

const countsExample = `  # kube-proxy's rule-count metrics against the rules really there
  %[1]s counts --node ip-10-0-1-7

  # ... from what was saved on the node
  curl -s 127.0.0.1:10249/metrics > metrics.txt                 # on the node
  %[1]s counts --from-dump iptables-save.txt --from-metrics metrics.txt --from-objects objects.json

  # Judge sync ages as of when the metrics were saved
  %[1]s counts --from-dump v4.txt --from-metrics metrics.txt --at 2026-11-29T03:12:00Z -o json`

// NewCmdCounts builds `counts`.
func NewCmdCounts(name string, streams genericiooptions.IOStreams, kube *genericclioptions.ConfigFlags) *cobra.Command {
	o := &simpleOptions{IOStreams: streams, Output: "text", Color: "auto"}
	cmd := &cobra.Command{
		Use:   "counts (--node NAME | --from-bundle DIR | --from-dump FILE --from-metrics FILE [--from-objects FILE])",
		Short: "Compare kube-proxy's rule-count metrics with the rules really in the dump",
		Long: `Compare kube-proxy's own rule counts (kubeproxy_sync_proxy_rules_iptables_total
and _last, per table and IP family) with the rules in the dump, counted exactly
as kube-proxy counts them, and say why they differ when they do: stale chains
still waiting for cleanup, another writer adding rules to kube-proxy's chains,
a failed restore (the metric is set before the restore runs), labels of older
versions. It also reports large-cluster mode as the dump shows it (comments
missing) and as the API objects imply (more than 1000 endpoints), the age of
the last sync, syncs that are queued but not happening, and sync failures.
nftables mode has no rule-count metric; counts says so.

Use it when kube-proxy looks alive but the rules look wrong or old.`,
		Example: fmt.Sprintf(countsExample, name),
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := o.load()
			if err != nil {
				return err
			}
			rep := buildCounts(l, correlate.Attribute(l.Ruleset, l.Objects), o.now)
			if o.machine() {
				return printMachine(o.Out, o.Output, rep)
			}
			return renderCounts(o.Out, o.term, rep)
		},
	}
	o.addFlags(cmd, kube)
	o.addAtFlag(cmd)
	return cmd
}

func parseAt(s string) (time.Time, error) {
	if s == "" {
		return time.Now(), nil
	}
	if secs, err := strconv.ParseFloat(s, 64); err == nil {
		return time.Unix(0, int64(secs*1e9)).UTC(), nil // Unix seconds, as the metrics print them
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("--at must be an RFC 3339 time such as 2026-11-29T03:12:00Z, or Unix seconds: %v", err)
	}
	return t, nil
}

// CountsReport is the machine-readable report of `counts`.
type CountsReport struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Node       string `json:"node,omitempty"`
	inspect.CountsReport
	// EndpointsByFamily and LargeClusterModeFromObjects come from the API
	// objects: kube-proxy's iptables proxier is in large-cluster mode above
	// 1000 endpoints per family.
	LargeClusterModeFromObjects map[string]bool `json:"largeClusterModeFromObjects,omitempty"`
}

// buildCounts compares the metrics with the dump; res (the attribution of
// the same inputs) says which chains are stale.
func buildCounts(l *Loaded, res *correlate.Result, now time.Time) *CountsReport {
	stale := map[string]bool{}
	for _, c := range res.Chains {
		if c.Stale {
			stale[c.Family+"/"+c.Table+"/"+c.Chain] = true
		}
	}
	var m *inspect.Metrics
	if len(l.Metrics) > 0 {
		m = l.Metrics[0]
	}
	opts := inspect.CountOptions{}
	if l.Config != nil {
		opts.SyncPeriod = l.Config.SyncPeriod
		if l.Config.LocalhostNodePorts != nil {
			v := l.Config.LocalhostNodePortsEffective
			opts.LocalhostNodePorts = &v
		}
	}
	cr := inspect.CompareCountsWith(l.Ruleset, m, func(f inspect.Family, table, chain string) bool {
		return stale[string(f)+"/"+table+"/"+chain]
	}, now, opts)
	return &CountsReport{APIVersion: APIVersion, Kind: "RuleCounts", CountsReport: cr, LargeClusterModeFromObjects: correlate.LargeClusterMode(l.Objects)}
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

func renderCounts(out io.Writer, t *Terminal, rep *CountsReport) error {
	st := t.styles()
	fmt.Fprintln(out, st.group.Render("proxy mode "+rep.Mode))
	if len(rep.Tables) > 0 {
		rows := [][]string{}
		for _, tc := range rep.Tables {
			agree := "yes"
			if !tc.Agree {
				agree = "NO"
			}
			rows = append(rows, []string{string(tc.Family), tc.Table, optFloat(tc.Metric), strconv.Itoa(tc.Actual), strconv.Itoa(tc.StaleRules), optInt(tc.Difference), agree})
		}
		if err := renderTable(out, t, []string{"FAMILY", "TABLE", "METRIC", "ACTUAL", "STALE", "DIFF", "AGREE"}, rows, 6); err != nil {
			return err
		}
		for _, tc := range rep.Tables {
			if tc.Reason != "" {
				fmt.Fprintln(out, wrapIndent(fmt.Sprintf("%s %s: %s", tc.Family, tc.Table, tc.Reason), t.Width-2, 2))
			}
		}
	}
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
	for _, f := range []string{string(inspect.IPv4), string(inspect.IPv6)} {
		if v, ok := rep.LargeClusterModeFromObjects[f]; ok {
			fmt.Fprintf(out, "large-cluster mode (objects, %s): %s\n", f, yesNo(v))
		}
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
		if s.Hung {
			msg = st.bad.Render(msg + " HUNG")
		}
		if s.Reason != "" {
			msg += ": " + s.Reason
		}
		fmt.Fprintln(out, wrapIndent(msg, t.Width-2, 2))
	}
	for _, f := range rep.Failures {
		fmt.Fprintln(out, st.bad.Render("failure")+" "+wrapIndent(fmt.Sprintf("%s{%s} = %v: %s", f.Metric, f.Family, f.Value, f.Meaning), t.Width-8, 8))
	}
	for _, n := range rep.Notes {
		fmt.Fprintln(out, wrapIndent("note: "+n, t.Width-2, 2))
	}
	return nil
}
