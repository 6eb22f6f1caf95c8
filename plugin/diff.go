package plugin

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/diagnose"
	"github.com/proxyrules/kubectl-proxyrules/plugin/collect"
)

// DiffOptions are the options of `diff`.
type DiffOptions struct {
	analysisOptions
	a, b string
}

const diffExample = `  # What does node-3 program differently from node-4? (both read live)
  %[1]s diff node-3 node-4

  # What changed on node-3 since yesterday's collect?
  %[1]s collect --node node-3 -d node-3-today.tar.gz
  %[1]s diff node-3-yesterday.tar.gz node-3-today.tar.gz

  # A node now against a bundle from before the incident, one namespace
  %[1]s diff incident-4711/nodes/node-3 node-3 -n shop -o json`

// NewCmdDiff builds `diff`.
func NewCmdDiff(name string, streams genericiooptions.IOStreams, kube *genericclioptions.ConfigFlags) *cobra.Command {
	o := &DiffOptions{analysisOptions: analysisOptions{IOStreams: streams}}
	cmd := &cobra.Command{
		Use:   "diff A B",
		Short: "Compare what two nodes (or one node at two times) program, by Service port and endpoint",
		Long: `Compare two nodes, a node and a bundle, or two bundles, by ownership: for each
Service port and IP family, the entry rules (cluster IP, node port, external
and load-balancer IPs), the endpoints traffic reaches, the per-service
chains and the stale chains that one side has and the other lacks. Rule
order, counters, comments (large-cluster mode drops them), the iptables
backend, the proxy mode's naming and nftables handles do not count, so an
iptables node and an nftables node of the same cluster compare too.

Each of A and B is a node name (read live, as --node does) or a bundle
(a folder or .tar.gz written by collect; a node's folder of a sweep). The
chains of both are attributed with the objects of both, the newer first: a
bundle from before an incident names the former owners of chains whose
Services were deleted since, which no hash can invert. Differences a Local
traffic policy or topology hints explain are said so.

Exit status: 0 when A and B program the same, 2 when they differ, 1 when
a side could not be read.`,
		Example: fmt.Sprintf(diffExample, name),
		Args:    cobra.ExactArgs(2),
		RunE:    runAnalysis(o),
	}
	o.Inputs.AddFlags(cmd, kube)
	o.Inputs.addSelectFlags(cmd)
	o.Out.AddFlags(cmd, false)
	// A and B are the nodes or bundles; --node and --from-* do not apply.
	for _, f := range []string{"node", "from-dump", "from-bundle", "from-metrics", "from-config"} {
		_ = cmd.Flags().MarkHidden(f)
	}
	return cmd
}

// Complete takes A and B.
func (o *DiffOptions) Complete(cmd *cobra.Command, args []string) error {
	if err := o.analysisOptions.Complete(cmd, args); err != nil {
		return err
	}
	o.a, o.b = args[0], args[1]
	return nil
}

// Validate checks the options.
func (o *DiffOptions) Validate() error {
	if err := o.Out.Validate(); err != nil {
		return err
	}
	in := &o.Inputs
	if len(in.Nodes) > 0 || len(in.Dumps) > 0 || len(in.Bundles) > 0 || len(in.Metrics) > 0 || len(in.Config) > 0 {
		return fmt.Errorf("diff compares A and B, each a node name or a bundle: pass them as the two arguments (--from-objects may add objects to both)")
	}
	if o.a == o.b {
		return fmt.Errorf("A and B are both %s: a diff needs two", o.a)
	}
	return nil
}

// isBundle: a path that exists is a bundle, anything else a node name.
func isBundle(arg string) bool {
	_, err := os.Stat(arg)
	return err == nil
}

// side is one side of the diff, as InputOptions.
func (o *DiffOptions) side(arg string) *InputOptions {
	one := o.Inputs
	if isBundle(arg) {
		one.Bundles = []string{arg}
	} else {
		one.Nodes, one.Node = []string{arg}, arg
	}
	return &one
}

// Run reads both sides and compares them.
func (o *DiffOptions) Run() error {
	a, b := o.side(o.a), o.side(o.b)
	// Two live nodes: the objects once, for both.
	var live []string
	for _, arg := range []string{o.a, o.b} {
		if !isBundle(arg) {
			live = append(live, arg)
		}
	}
	if len(live) > 0 && len(o.Inputs.Objects) == 0 {
		client, _, err := o.Inputs.client()
		if err != nil {
			return err
		}
		ctx := o.Inputs.Context()
		fleet, _, missing, err := collect.NewFleet(ctx, client, collect.FleetOptions{Names: live})
		if err != nil {
			return err
		}
		if len(missing) > 0 {
			return fmt.Errorf("node %q not found, and no such file or folder: list the nodes with kubectl get nodes", missing[0])
		}
		_, objs, err := fleet.Objects(ctx, client, live)
		if err != nil {
			return err
		}
		for _, s := range []*InputOptions{a, b} {
			if s.Node != "" {
				s.preloaded, s.fleet = objs, fleet
			}
		}
	}
	la, err := a.Load()
	if err != nil {
		return fmt.Errorf("A (%s): %w", o.a, err)
	}
	lb, err := b.Load()
	if err != nil {
		return fmt.Errorf("B (%s): %w", o.b, err)
	}
	rep := diagnose.Diff(diagnose.DiffSides{A: la.Node, B: lb.Node, SourceA: o.a, SourceB: o.b, CollectedA: collectedAt(la), CollectedB: collectedAt(lb)})
	if sel, err := o.Inputs.selectServices(mergedObjects(la.Objects, lb.Objects)); err != nil {
		return err
	} else if sel != nil {
		kept := rep.ServicePorts[:0]
		for _, sp := range rep.ServicePorts {
			if ns, name, _, ok := correlate.ParseServicePortName(sp.ServicePort); ok && sel(ns, name) {
				kept = append(kept, sp)
			}
		}
		rep.ServicePorts = kept
		if len(rep.ServicePorts) == 0 && len(rep.Unowned.OnlyA)+len(rep.Unowned.OnlyB) == 0 {
			rep.Status = diagnose.StatusHealthy
		}
	}
	if o.Out.Machine() {
		if err := o.Out.PrintMachine(o.IOStreams.Out, rep); err != nil {
			return err
		}
	} else {
		w := newSanitizingWriter(o.IOStreams.Out, o.Out.term)
		renderDiff(w, o.Out.term, rep)
		w.flush()
	}
	if rep.Status == diagnose.StatusProblems {
		return &ExitError{Code: ExitProblems}
	}
	return nil
}

func collectedAt(l *Loaded) string {
	if l.Collected == nil || l.Collected.CollectedAt.IsZero() {
		return ""
	}
	return l.Collected.CollectedAt.UTC().Format("2006-01-02T15:04:05Z")
}

// mergedObjects is both sides' objects, for -n and -l.
func mergedObjects(a, b *correlate.Objects) *correlate.Objects {
	out := &correlate.Objects{}
	for _, o := range []*correlate.Objects{a, b} {
		if o != nil {
			out.Services = append(out.Services, o.Services...)
		}
	}
	return out
}

// renderDiff prints the diff as a unified diff of ownership: "-" only in A,
// "+" only in B, per Service port.
func renderDiff(out io.Writer, t *Terminal, d *diagnose.NodeDiff) {
	st := t.styles()
	side := func(s diagnose.DiffSide) string {
		var facts []string
		if s.Node != "" && s.Node != s.Source {
			facts = append(facts, "node "+s.Node)
		}
		facts = append(facts, s.Mode)
		if s.CollectedAt != "" {
			facts = append(facts, s.CollectedAt)
		}
		return s.Source + " (" + strings.Join(facts, ", ") + ")"
	}
	fmt.Fprintln(out, trimTrailing(st.header.Render(wrapIndent("--- A "+side(d.A), t.Width, 6))))
	fmt.Fprintln(out, trimTrailing(st.header.Render(wrapIndent("+++ B "+side(d.B), t.Width, 6))))
	for _, sp := range d.ServicePorts {
		fmt.Fprintln(out, st.group.Render(fmt.Sprintf("@@ %s %s %s", sp.ServicePort, sp.Protocol, sp.Family)))
		for _, e := range sp.OnlyA {
			fmt.Fprintln(out, trimTrailing(st.bad.Render(wrapIndent("- "+e.String(), t.Width, 4))))
		}
		for _, e := range sp.OnlyB {
			fmt.Fprintln(out, trimTrailing(st.good.Render(wrapIndent("+ "+e.String(), t.Width, 4))))
		}
		if sp.Expected != "" {
			fmt.Fprintln(out, trimTrailing(st.dim.Render(wrapIndent("  ("+sp.Expected+")", t.Width, 3))))
		}
	}
	for _, c := range d.Unowned.OnlyA {
		fmt.Fprintln(out, st.bad.Render("- chain without owner "+c))
	}
	for _, c := range d.Unowned.OnlyB {
		fmt.Fprintln(out, st.good.Render("+ chain without owner "+c))
	}
	for _, n := range d.Notes {
		fmt.Fprintln(out, trimTrailing(st.dim.Render(wrap("note: "+n, t.Width))))
	}
	verdict := fmt.Sprintf("%d Service port%s alike", d.Same, plural(d.Same))
	if n := len(d.ServicePorts); n == 1 {
		verdict = "1 Service port differs, " + verdict
	} else if n > 1 {
		verdict = fmt.Sprintf("%d Service ports differ, ", n) + verdict
	} else {
		verdict = "no difference: " + verdict
	}
	fmt.Fprintln(out, verdict)
}
