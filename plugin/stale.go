package plugin

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/charmbracelet/lipgloss"
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
  %[1]s stale --from-dump ruleset.json --from-objects objects.json -o json

  # Stale chains on every node
  %[1]s stale --all-nodes`

// NewCmdStale builds `stale`.
func NewCmdStale(name string, streams genericiooptions.IOStreams, kube *genericclioptions.ConfigFlags) *cobra.Command {
	o := &StaleOptions{analysisOptions: analysisOptions{IOStreams: streams}}
	cmd := &cobra.Command{
		Use:   "stale (--node NAME... | --all-nodes | --node-selector LABELS | --from-bundle DIR | --from-dump FILE --from-objects FILE)",
		Short: "List kube-proxy chains and map entries that no current Service or endpoint owns",
		Long: `List the kube-proxy chains (and nftables map and set elements) that no current
Service or endpoint owns, with their former owner where it can be recovered
(remaining comments, the jump graph, the DNAT target hashed against every
current service port). Each is marked harmful when traffic can still reach it,
or harmless when nothing refers to it, and says when kube-proxy will remove it
by itself: large-cluster mode cleans up at most once per syncPeriod, nftables
deletes a flushed chain a sync later. Leftovers of older versions (KUBE-XLB-,
the kubelet's KUBE-MARK-DROP) are listed too. In IPVS mode: the virtual
servers no current Service port has, with their former owner where the
objects tell (a Service still at that address, or whose endpoints are its
real servers), kube-proxy's startup probe and an older version's loopback
NodePorts.

Use it when a dump shows chains you cannot place, or after deleting Services.

` + sweepHelp + exitStatusHelp,
		Example: fmt.Sprintf(staleExample, name),
		Args:    cobra.NoArgs,
		RunE:    runAnalysis(o),
	}
	o.addInputFlags(cmd, kube)
	o.Inputs.addSelectFlags(cmd)
	o.Sweep.AddFlags(cmd)
	cmd.Flags().DurationVar(&o.SyncPeriod, "sync-period", 0, "kube-proxy's syncPeriod; default: what --from-config says, else 30s")
	o.Out.AddFlags(cmd, true)
	return cmd
}

// Run finds the stale chains.
func (o *StaleOptions) Run() error {
	return o.run(func(l *Loaded) (built, error) {
		rep := diagnose.Stale(l.Node, diagnose.StaleOptions{SyncPeriod: o.SyncPeriod})
		rep.APIVersion, rep.Kind, rep.Node = APIVersion, "StaleReport", l.Node.Name
		return built{report: rep, status: rep.Status, notChecked: rep.NotChecked,
			render: func(out io.Writer, t *Terminal) error { return renderStale(out, t, rep, o.Out.Wide()) },
			rows: func() rows {
				return rows{kind: "chain", items: anySlice(rep.Chains), name: func(i int) string { return rep.Chains[i].Chain }}
			}}, nil
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
	switch {
	case len(rep.Chains) == 0 && len(rep.Elements) == 0 && !rep.IPVSRead:
		fmt.Fprintln(out, st.good.Render("no stale kube-proxy chains or map elements"))
	case len(rep.Chains) == 0 && len(rep.Elements) == 0 && len(rep.VirtualServers) == 0:
		fmt.Fprintln(out, st.good.Render("no stale kube-proxy chains, map elements or IPVS virtual servers"))
	}
	renderStaleIPVS(out, t, rep)
	if wide {
		if err := renderStaleWide(out, t, rep); err != nil {
			return err
		}
	} else {
		renderStaleGroups(out, t, rep)
	}
	for _, e := range rep.Elements {
		fmt.Fprintln(out, fitParts(t.Width, "          ", " ", st.warn.Render("element "), e.Map, e.Element))
		fmt.Fprintln(out, trimTrailing(indent(st.dim.Render(wrap(e.Reason, t.Width-10)), "          ")))
	}
	for _, n := range rep.Notes {
		fmt.Fprintln(out, wrap(n, t.Width))
	}
	return nil
}

// renderStaleGroups prints the stale chains by cause and former owner,
// the cause's explanation once; the chains of harmful groups by name, as
// someone has to act on them.
func renderStaleGroups(out io.Writer, t *Terminal, rep *diagnose.StaleReport) {
	st := t.styles()
	families := map[string]bool{}
	byName := map[string]diagnose.StaleVerdict{}
	for _, c := range rep.Chains {
		families[c.Family] = true
		byName[c.Family+" "+c.Chain] = c
	}
	for _, g := range rep.Groups {
		style := st.warn
		if g.Harmful {
			style = st.bad
		} else if !strings.HasPrefix(g.Cause, "leftover") {
			style = st.dim
		}
		fmt.Fprintln(out, trimTrailing(style.Render(wrapIndent(fmt.Sprintf("%d %s:", g.Chains, g.Title), t.Width, 2))))
		for _, o := range g.Owners {
			label := o.Owner
			if label == "" {
				label = "(former owner unknown)"
			}
			if o.State != "" {
				label += " (" + o.State + ")"
			}
			if len(families) > 1 {
				label += " " + o.Family
			}
			fmt.Fprintln(out, "  "+fitParts(t.Width-2, "    ", " ", label+":", o.Kinds))
			if !g.Harmful && g.Cause != diagnose.StaleCauseLeftover {
				continue
			}
			for _, name := range o.Chains {
				line := []string{t.chainName(name, t.Width-4)}
				if c := byName[o.Family+" "+name]; len(c.ReferencedBy) > 0 {
					for i, r := range c.ReferencedBy {
						if i == 0 {
							r = "← " + r
						}
						if i < len(c.ReferencedBy)-1 {
							r += ","
						}
						line = append(line, r)
					}
				}
				fmt.Fprintln(out, "    "+fitParts(t.Width-4, "      ", " ", line...))
			}
		}
		fmt.Fprintln(out, trimTrailing(indent(st.dim.Render(wrap(g.Explanation, t.Width-2)), "  ")))
	}
}

// renderStaleWide is one line per stale chain.
func renderStaleWide(out io.Writer, t *Terminal, rep *diagnose.StaleReport) error {
	if len(rep.Chains) == 0 {
		return nil
	}
	headers := []string{"STATUS", "CHAIN", "KIND", "FAMILY", "TABLE", "OWNER", "ENDPOINT", "CAUSE", "REFERENCED-BY"}
	rows := make([][]string, 0, len(rep.Chains))
	for _, c := range rep.Chains {
		owner := c.ServicePort
		if owner == "" {
			owner = "-"
		}
		rows = append(rows, []string{staleState(c), c.Chain, string(c.Kind), c.Family, c.Table, owner, c.Endpoint, c.Cause, strings.Join(c.ReferencedBy, ",")})
	}
	st := t.styles()
	return renderTableStyled(out, t, headers, rows, 0, func(cell string) lipgloss.Style {
		if cell == "HARMFUL" {
			return st.bad
		}
		return st.dim
	})
}

func indent(s, prefix string) string {
	return prefix + strings.ReplaceAll(s, "\n", "\n"+prefix)
}
