package plugin

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/proxyrules/kubectl-proxyrules/diagnose"
)

// StaleOptions are the options of `stale`.
type StaleOptions struct {
	analysisOptions
	SyncPeriod time.Duration
}

const staleExample = `  # Chains and map entries no current Service owns, and who owned them
  %[1]s stale --node ip-10-0-1-7

  # ... in a dump saved on the node
  %[1]s stale --from-dump iptables-save.txt --from-objects objects.json --node ip-10-0-1-7

  # nftables mode, as JSON
  %[1]s stale --from-dump ruleset.json --from-objects objects.json -o json`

// NewCmdStale builds `stale`.
func NewCmdStale(name string, streams genericiooptions.IOStreams, kube *genericclioptions.ConfigFlags) *cobra.Command {
	o := &StaleOptions{analysisOptions: analysisOptions{IOStreams: streams}}
	cmd := &cobra.Command{
		Use:   "stale (--node NAME | --from-bundle DIR | --from-dump FILE --from-objects FILE)",
		Short: "List kube-proxy chains and map entries that no current Service or endpoint owns",
		Long: `List the kube-proxy chains (and nftables map and set elements) that no current
Service or endpoint owns, with their former owner where it can be recovered
(remaining comments, the jump graph, the DNAT target hashed against every
current service port). Each is marked harmful when traffic can still reach it,
or harmless when nothing refers to it, and says when kube-proxy will remove it
by itself: large-cluster mode cleans up at most once per syncPeriod, nftables
deletes a flushed chain a sync later. Leftovers of older versions (KUBE-XLB-,
the kubelet's KUBE-MARK-DROP) are listed too.

Use it when a dump shows chains you cannot place, or after deleting Services.

` + exitStatusHelp,
		Example: fmt.Sprintf(staleExample, name),
		Args:    cobra.NoArgs,
		RunE:    runAnalysis(o),
	}
	o.Inputs.AddFlags(cmd, kube)
	cmd.Flags().DurationVar(&o.SyncPeriod, "sync-period", 0, "kube-proxy's syncPeriod, when not 30s and no --from-config says it")
	o.Out.AddFlags(cmd, true)
	return cmd
}

// Run finds the stale chains.
func (o *StaleOptions) Run() error {
	return o.run(func(l *Loaded) (built, error) {
		rep := diagnose.Stale(l.Node, diagnose.StaleOptions{SyncPeriod: o.SyncPeriod})
		rep.APIVersion, rep.Kind, rep.Node = APIVersion, "StaleReport", l.Node.Name
		return built{rep, func(out io.Writer, t *Terminal) error { return renderStale(out, t, rep, o.Out.Wide()) }, rep.Status, rep.NotChecked}, nil
	})
}

func staleState(s diagnose.StaleVerdict) string {
	switch {
	case s.Referenced:
		return "HARMFUL"
	case s.Leftover:
		return "leftover"
	case s.NotDueYet:
		return "not due"
	}
	return "harmless"
}

func renderStale(out io.Writer, t *Terminal, rep *diagnose.StaleReport, wide bool) error {
	st := t.styles()
	if len(rep.Chains) == 0 && len(rep.Elements) == 0 {
		fmt.Fprintln(out, st.good.Render("no stale kube-proxy chains or map elements"))
	}
	for _, s := range rep.Chains {
		owner := s.ServicePort
		if owner == "" {
			owner = "(former owner unknown)"
		}
		if s.Endpoint != "" {
			owner += " → " + s.Endpoint
		}
		state := staleState(s)
		style := st.dim
		if s.Referenced {
			style = st.bad
		}
		chain := s.Chain
		if !wide {
			chain = shortName(chain)
		}
		fmt.Fprintf(out, "%s  %s %s  %s\n", style.Render(fmt.Sprintf("%-8s", state)), chain, st.dim.Render(fmt.Sprintf("(%s, %s %s)", s.Kind, s.Family, s.Table)), owner)
		fmt.Fprintln(out, trimTrailing(indent(st.dim.Render(wrap(s.Reason, t.Width-10)), "          ")))
	}
	for _, e := range rep.Elements {
		fmt.Fprintf(out, "%s  %s %s\n", st.warn.Render("element "), e.Map, e.Element)
		fmt.Fprintln(out, trimTrailing(indent(st.dim.Render(wrap(e.Reason, t.Width-10)), "          ")))
	}
	for _, n := range rep.Notes {
		fmt.Fprintln(out, wrap(n, t.Width))
	}
	return nil
}

func indent(s, prefix string) string {
	return prefix + strings.ReplaceAll(s, "\n", "\n"+prefix)
}
