package plugin

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/charmbracelet/lipgloss"
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/diagnose"
	"github.com/proxyrules/kubectl-proxyrules/inspect/input"
	"github.com/proxyrules/kubectl-proxyrules/plugin/collect"
)

// DiffOptions are the options of `diff`.
type DiffOptions struct {
	analysisOptions
	a, b string
	// kindA, kindB: what A and B are (a node, a bundle, a dump).
	kindA, kindB sideKind
	// fromFlags: A and B came as two --from-dump (or --from-bundle).
	fromFlags bool
}

// sideKind is what one side of a diff is.
type sideKind int

const (
	sideNode sideKind = iota
	sideBundle
	sideDump
)

const diffExample = `  # What does node-3 program differently from node-4? (both read live)
  %[1]s diff node-3 node-4

  # What changed on node-3 since yesterday's collect?
  %[1]s collect --node node-3 -d node-3-today.tar.gz
  %[1]s diff node-3-yesterday.tar.gz node-3-today.tar.gz

  # A node now against a bundle from before the incident, one namespace
  %[1]s diff incident-4711/nodes/node-3 node-3 -n shop -o json

  # Two saved dumps (iptables-save, nft list ruleset), with the objects
  %[1]s diff a.txt b.txt --from-objects objects.json
  %[1]s diff --from-dump a --from-dump b --from-objects o.json`

// NewCmdDiff builds `diff`.
func NewCmdDiff(name string, streams genericiooptions.IOStreams, kube *genericclioptions.ConfigFlags) *cobra.Command {
	o := &DiffOptions{analysisOptions: analysisOptions{IOStreams: streams}}
	cmd := &cobra.Command{
		Use:   "diff A B",
		Short: "Compare what two nodes (or one node at two times) do to Service traffic",
		Long: `Compare two nodes, bundles or dumps by what their rules do to Service
traffic. For each Service port, IP family and route (an entry: cluster IP,
node port, external or load-balancer IP, walked from a pod, the node or
outside, as explain walks it): the endpoints new connections are DNATed to
and their shares, what happens to the rest (dropped, rejected, not
DNATed) and whether they are masqueraded. Then, by ownership, the entries,
endpoints, per-service chains and stale chains one side has and the other
lacks; and the fixed rules by what they do: the masquerade mark (the bit
KUBE-MARK-MASQ or nftables' mark set sets, the bit postrouting tests),
KUBE-FORWARD and KUBE-FIREWALL (iptables mode), filter-forward (nftables
mode). Rule order, counters, comments, the iptables backend, the proxy
mode's naming and nftables handles do not count, so an iptables node and
an nftables node of the same cluster compare too. In IPVS mode each
frontend's virtual server is compared by its real servers and their weights
(a NodePort's by its port), and an IPVS node against an iptables or nftables
one by the endpoints each sends each Service port to.

Each of A and B is a node name (read live, as --node does), a bundle (a
folder or .tar.gz written by collect; a node's folder of a sweep) or a
saved ruleset (iptables-save, nft list ruleset, ...; or give both as
--from-dump A --from-dump B). The chains of both are attributed with the
objects of both, the newer first: a bundle from before an incident names
the former owners of chains whose Services were deleted since, which no
hash can invert. Differences a Local traffic policy or topology hints
explain are said so.

Exit status: 0 when A and B do the same, 2 when they differ, 1 when a
side could not be read.`,
		Example: fmt.Sprintf(diffExample, name),
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return nil // two --from-dump (or --from-bundle): see Validate
			}
			return cobra.ExactArgs(2)(cmd, args)
		},
		RunE: runAnalysis(o),
	}
	o.addInputFlags(cmd, kube)
	o.Inputs.addSelectFlags(cmd)
	o.Out.AddFlags(cmd, false)
	fs := cmd.Flags()
	fs.Lookup("from-dump").Usage = "A's and B's saved rulesets (iptables-save, iptables -S, nft list ruleset, nft -j list ruleset, knftables dump), given twice instead of the arguments: the first is A"
	fs.Lookup("from-bundle").Usage = "A's and B's bundles written by \"collect -d\" (a folder or .tar.gz), given twice instead of the arguments: the first is A"
	// A and B are the nodes, bundles or dumps; --node, --from-metrics and
	// --from-config do not apply.
	for _, f := range []string{"node", "from-metrics", "from-config"} {
		_ = fs.MarkHidden(f)
	}
	return cmd
}

// Complete takes A and B: the arguments, or two --from-dump (or two
// --from-bundle).
func (o *DiffOptions) Complete(cmd *cobra.Command, args []string) error {
	if err := o.analysisOptions.Complete(cmd, args); err != nil {
		return err
	}
	in := &o.Inputs
	switch {
	case len(args) == 2:
		o.a, o.b = args[0], args[1]
		o.kindA, o.kindB = kindOfSide(o.a), kindOfSide(o.b)
	case len(in.Dumps) == 2 && len(in.Bundles) == 0:
		o.a, o.b, o.kindA, o.kindB, o.fromFlags = in.Dumps[0], in.Dumps[1], sideDump, sideDump, true
	case len(in.Bundles) == 2 && len(in.Dumps) == 0:
		o.a, o.b, o.kindA, o.kindB, o.fromFlags = in.Bundles[0], in.Bundles[1], sideBundle, sideBundle, true
	}
	return nil
}

// Validate checks the options.
func (o *DiffOptions) Validate() error {
	if err := o.Out.Validate(); err != nil {
		return err
	}
	in := &o.Inputs
	const how = "diff compares A and B, each a node name, a bundle or a dump: pass them as the two arguments, or as two --from-dump (or two --from-bundle) and no arguments (--from-objects may add objects to both)"
	switch {
	case len(in.Nodes) > 0 || len(in.Metrics) > 0 || len(in.Config) > 0:
		return fmt.Errorf("%s", how)
	case o.fromFlags:
	case o.a == "" || len(in.Dumps) > 0 || len(in.Bundles) > 0:
		return fmt.Errorf("%s", how)
	}
	if o.a == o.b {
		return fmt.Errorf("A and B are both %s: a diff needs two", o.a)
	}
	if err := o.Inputs.Validate(false, true); err != nil {
		return err
	}
	return o.prepare()
}

// kindOfSide tells what an argument is: a path that does not exist is a
// node name; a folder, a .tar.gz (or anything gzip or tar) and a bundle's
// bundle.json are a bundle, as collect writes them; any other file (a
// pipe too, as <(iptables-save) gives) is a dump, as --from-dump reads it.
func kindOfSide(arg string) sideKind {
	if arg == "-" {
		return sideDump
	}
	st, err := os.Stat(arg)
	switch {
	case err != nil:
		return sideNode
	case st.IsDir(), collect.IsArchiveName(arg), filepath.Base(arg) == collect.ManifestFile:
		return sideBundle
	case !st.Mode().IsRegular():
		return sideDump // a FIFO is not looked into: reading it would consume it
	}
	f, err := os.Open(arg)
	if err != nil {
		return sideDump // the dump's reader says why
	}
	defer f.Close()
	head := make([]byte, 512)
	n, _ := io.ReadFull(f, head)
	if input.Identify(head[:n]).Kind == input.KindBundle {
		return sideBundle
	}
	return sideDump
}

// side is the request of one side of the diff.
func (o *DiffOptions) side(arg string, kind sideKind) Request {
	one := o.request()
	one.Files.Dumps, one.Files.Bundles, one.Node = nil, nil, ""
	switch kind {
	case sideBundle:
		if filepath.Base(arg) == collect.ManifestFile {
			arg = filepath.Dir(arg)
		}
		one.Files.Bundles = []string{arg}
	case sideDump:
		one.Files.Dumps = []string{arg}
	default:
		one.Node = arg
	}
	return one
}

// Run reads both sides and compares them.
func (o *DiffOptions) Run() error {
	a, b := o.side(o.a, o.kindA), o.side(o.b, o.kindB)
	ctx := o.context()
	// Two live nodes: the objects once, for both.
	var live []string
	for _, s := range []Request{a, b} {
		if s.Node != "" {
			live = append(live, s.Node)
		}
	}
	if len(live) > 0 && len(o.Inputs.Objects) == 0 {
		client, _, err := o.loader.client()
		if err != nil {
			return err
		}
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
		for _, s := range []*Request{&a, &b} {
			if s.Node != "" {
				s.Objects, s.Fleet = objs, fleet
			}
		}
	}
	la, err := o.loader.Load(ctx, a)
	if err != nil {
		return fmt.Errorf("A (%s): %w", o.a, err)
	}
	lb, err := o.loader.Load(ctx, b)
	if err != nil {
		return fmt.Errorf("B (%s): %w", o.b, err)
	}
	rep, err := untilDone(ctx, func() (*diagnose.NodeDiff, error) {
		return diagnose.Diff(diagnose.DiffSides{A: la.Node, B: lb.Node, SourceA: o.a, SourceB: o.b, CollectedA: collectedAt(la), CollectedB: collectedAt(lb)}), nil
	})
	if err != nil {
		return err
	}
	if sel := a.Select.filter(mergedObjects(la.Objects, lb.Objects)); sel != nil {
		kept := rep.ServicePorts[:0]
		for _, sp := range rep.ServicePorts {
			if ns, name, _, ok := correlate.ParseServicePortName(sp.ServicePort); ok && sel(ns, name) {
				kept = append(kept, sp)
			}
		}
		rep.ServicePorts = kept
		if len(rep.ServicePorts) == 0 && len(rep.Unowned.OnlyA)+len(rep.Unowned.OnlyB) == 0 && len(rep.FixedRules) == 0 && !unownedVirtualServersDiffer(rep) {
			rep.Status = diagnose.StatusHealthy
		}
	}
	if o.Out.Machine() {
		if err := o.Out.PrintMachine(o.IOStreams.Out, rep); err != nil {
			return err
		}
	} else {
		w := newSanitizingWriter(o.IOStreams.Out, o.Out.term)
		escapeReport(rep)
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

// renderDiff prints the diff as a unified diff: per Service port "!" a
// route whose connections fare otherwise, then "-" only in A, "+" only in
// B; then the fixed rules, the same way.
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
	line := func(style lipgloss.Style, s string, indent int) {
		fmt.Fprintln(out, trimTrailing(style.Render(hangWrap(s, t.Width, indent))))
	}
	fmt.Fprintln(out, trimTrailing(st.header.Render(wrapIndent("--- A "+side(d.A), t.Width, 6))))
	fmt.Fprintln(out, trimTrailing(st.header.Render(wrapIndent("+++ B "+side(d.B), t.Width, 6))))
	for _, sp := range d.ServicePorts {
		fmt.Fprintln(out, st.group.Render(fmt.Sprintf("@@ %s %s %s", sp.ServicePort, sp.Protocol, sp.Family)))
		// What connections meet first: the chains are why.
		for _, r := range sp.Routes {
			line(st.warn, "! "+r.Summary, 4)
		}
		for _, v := range sp.VirtualServers { // IPVS mode's frontends
			line(st.warn, "! "+v.Summary, 4)
		}
		for _, e := range sp.OnlyA {
			if e.What == "route" && len(sp.Routes) > 0 {
				continue // the route's line below says it, with shares
			}
			line(st.bad, "- "+e.String(), 4)
		}
		for _, e := range sp.OnlyB {
			if e.What == "route" && len(sp.Routes) > 0 {
				continue
			}
			line(st.good, "+ "+e.String(), 4)
		}
		if sp.Expected != "" {
			line(st.dim, "  ("+sp.Expected+")", 3)
		}
	}
	for _, c := range d.Unowned.OnlyA {
		fmt.Fprintln(out, st.bad.Render("- chain without owner "+c))
	}
	for _, c := range d.Unowned.OnlyB {
		fmt.Fprintln(out, st.good.Render("+ chain without owner "+c))
	}
	if u := d.UnownedVirtualServers; u != nil {
		for _, v := range u.OnlyA {
			line(st.bad, "- IPVS virtual server without a Service port "+v, 4)
		}
		for _, v := range u.OnlyB {
			line(st.good, "+ IPVS virtual server without a Service port "+v, 4)
		}
	}
	family := ""
	for _, f := range d.FixedRules {
		if f.Family != family {
			family = f.Family
			fmt.Fprintln(out, st.group.Render("@@ fixed rules "+family))
		}
		style := st.warn
		switch s := f.String(); {
		case strings.HasPrefix(s, "- "):
			style = st.bad
		case strings.HasPrefix(s, "+ "):
			style = st.good
		}
		line(style, f.String(), 4)
	}
	for _, n := range d.Notes {
		fmt.Fprintln(out, trimTrailing(st.dim.Render(wrap("note: "+n, t.Width))))
	}
	fmt.Fprintln(out, diffVerdict(d))
}

// diffVerdict is the last line: "1 Service port and the fixed rules
// differ, 34 Service ports alike", "no difference: 35 Service ports alike".
func diffVerdict(d *diagnose.NodeDiff) string {
	alike := fmt.Sprintf("%d Service port%s alike", d.Same, plural(d.Same))
	var differ []string
	switch n := len(d.ServicePorts); {
	case n == 1:
		differ = append(differ, "1 Service port")
	case n > 1:
		differ = append(differ, fmt.Sprintf("%d Service ports", n))
	}
	if len(d.FixedRules) > 0 {
		differ = append(differ, "the fixed rules")
	}
	if unownedVirtualServersDiffer(d) {
		differ = append(differ, "the virtual servers without a Service port")
	}
	switch {
	case len(differ) == 0:
		return "no difference: " + alike
	case len(differ) == 1 && len(d.ServicePorts) == 1:
		return "1 Service port differs, " + alike
	}
	return strings.Join(differ, " and ") + " differ, " + alike
}

// hangWrap wraps s at width, the lines after the first indented by indent
// and wrapped so that they too fit. Blanks at the start of s go, as wrap's.
func hangWrap(s string, width, indent int) string {
	if width < 20 {
		width = 20
	}
	var lines []string
	cur, empty := "", true
	for _, w := range strings.Fields(s) {
		if !empty && lipgloss.Width(cur)+1+lipgloss.Width(w) > width {
			lines = append(lines, cur)
			cur, empty = strings.Repeat(" ", indent), true
		}
		if !empty {
			cur += " "
		}
		cur += w
		empty = false
	}
	if !empty {
		lines = append(lines, cur)
	}
	return strings.Join(lines, "\n")
}
