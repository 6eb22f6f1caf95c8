package plugin

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/proxyrules/kubectl-proxyrules/plugin/collect"
)

// CollectOptions are the options of `collect`.
type CollectOptions struct {
	genericiooptions.IOStreams
	// Nodes are --node; Live how to read them.
	Nodes  []string
	Live   LiveOptions
	Sweep  SweepOptions
	Dir    string
	Output string

	kube   *genericclioptions.ConfigFlags
	ctx    context.Context
	loader *Loader
}

const collectExample = `  # Save everything about a node for later (or for a ticket)
  %[1]s collect --node ip-10-0-1-7 -d incident-4711.tar.gz

  # ... and analyse it anywhere, without the cluster
  %[1]s triage --from-bundle incident-4711.tar.gz
  %[1]s explain svc/web -n shop --from-bundle incident-4711.tar.gz

  # Every node of a zone, 10 at a time: one bundle per node, the objects once
  %[1]s collect --node-selector topology.kubernetes.io/zone=eu-1a --parallel 10 -d incident-4711
  %[1]s triage --from-bundle incident-4711                # a sweep of them all, offline
  %[1]s diff incident-4711/nodes/node-3 incident-4711/nodes/node-4`

// NewCmdCollect builds `collect`.
func NewCmdCollect(name string, streams genericiooptions.IOStreams, kube *genericclioptions.ConfigFlags) *cobra.Command {
	o := &CollectOptions{IOStreams: streams, Output: "text"}
	cmd := &cobra.Command{
		Use:   "collect (--node NAME | --all-nodes | --node-selector LABELS) -d DIR|FILE.tar.gz",
		Short: "Save a node's rules, kube-proxy's metrics and config, and the API objects into a bundle",
		Long: `Read a node the way every command does with --node (a short-lived debug pod,
or kube-proxy's own pod with --via kube-proxy) and save what was read into a
folder, or a .tar.gz when the name ends so: the whole iptables and nftables
rulesets, kube-proxy's /metrics, /configz and /proxyMode, the Services,
EndpointSlices, the Node, the kube-proxy pod and its ConfigMap, and a
bundle.json that says how each file was obtained.

Every command reads a bundle back with --from-bundle, so an incident can be
analysed later, elsewhere, or attached to a ticket: it holds no secrets (of
the objects, only what the analyses read: no env, annotations, managedFields,
nor the ConfigMap's embedded kubeconfig), and its files are readable by you
alone.

With --all-nodes, --node-selector or --node repeated, collect sweeps: it
writes a folder with one bundle per node (nodes/NODE/), the API objects once
(objects.json) and sweep.json, reading --parallel nodes at a time. Every
command reads the folder back with --from-bundle: triage, stale, counts, masq
and explain as a sweep of its nodes, any command for one node with --node.`,
		Example: fmt.Sprintf(collectExample, name),
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.ctx = cmd.Context()
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run()
		},
	}
	o.kube = kube
	cmd.Flags().StringArrayVar(&o.Nodes, "node", nil, "the node to read (repeated: a sweep of those nodes)")
	o.Sweep.AddFlags(cmd)
	cmd.Flags().StringVarP(&o.Dir, "dir", "d", "", "where to write the bundle: a new folder, or FILE.tar.gz")
	cmd.Flags().StringVarP(&o.Output, "output", "o", o.Output, "output format: text, json or yaml (the bundle's manifest)")
	o.Live.AddFlags(cmd)
	return cmd
}

// Validate checks the options.
func (o *CollectOptions) Validate() error {
	o.loader = &Loader{Kube: o.kube, Live: o.Live, In: o.In, ErrOut: o.ErrOut}
	if o.ctx == nil {
		o.ctx = context.Background()
	}
	if o.sweeping() {
		if err := o.Sweep.validate(o.Nodes); err != nil {
			return err
		}
		if collect.IsArchiveName(o.Dir) {
			return fmt.Errorf("a sweep writes a folder (one bundle per node): pass -d DIR, not %s", o.Dir)
		}
	} else if len(o.Nodes) == 0 {
		return fmt.Errorf("which node? pass --node NAME (or --all-nodes, --node-selector LABELS)")
	}
	if o.Dir == "" {
		return fmt.Errorf("where to? pass -d DIR or -d FILE.tar.gz")
	}
	if err := (&OutputOptions{Output: o.Output}).Validate(); err != nil {
		return err
	}
	if o.Output == "wide" {
		o.Output = "text"
	}
	if _, err := os.Stat(o.Dir); err == nil {
		if collect.IsArchiveName(o.Dir) {
			return fmt.Errorf("%s exists: choose a new name", o.Dir)
		}
		if entries, _ := os.ReadDir(o.Dir); len(entries) > 0 {
			return fmt.Errorf("%s exists and is not empty: choose a new folder", o.Dir)
		}
	}
	return o.Live.Validate()
}

func (o *CollectOptions) sweeping() bool {
	return o.Sweep.AllNodes || o.Sweep.NodeSelector != "" || len(o.Nodes) > 1
}

// Run collects.
func (o *CollectOptions) Run() error {
	if o.sweeping() {
		return o.runSweep()
	}
	dir := o.Dir
	if collect.IsArchiveName(o.Dir) {
		tmp, err := collect.MkdirTemp(filepath.Dir(o.Dir), ".proxyrules-collect-")
		if err != nil {
			return err
		}
		defer collect.RemoveTemp(tmp)
		dir = tmp
	}
	// On failure the collector removes the files it wrote (and the folder,
	// if it made it): never a half bundle, never the user's own folder.
	man, err := o.loader.Collect(o.ctx, Request{Node: o.Nodes[0], Kernel: true}, dir)
	if err != nil {
		return err
	}
	if dir != o.Dir {
		if err := collect.WriteTarGz(dir, o.Dir); err != nil {
			return err
		}
	}
	if o.Output != "text" {
		return printMachine(o.Out, o.Output, man)
	}
	var total int64
	for _, f := range man.Files {
		total += f.Bytes
	}
	mode := man.ProxyMode
	if mode == "" {
		mode = "unknown"
	}
	// The manifest quotes the node (command errors, kube-proxy's mode).
	out := &sanitizingWriter{w: o.Out}
	escapeReport(man) // a warning quotes what a command printed on the node
	fmt.Fprintf(out, "node %s (%s mode", man.Node, mode)
	if man.Backend != "" {
		fmt.Fprintf(out, ", iptables %s", man.Backend)
	}
	fmt.Fprintf(out, ") via %s: %d files, %s in %s\n", man.Via, len(man.Files), collect.HumanBytes(total), o.Dir)
	for _, f := range man.Files {
		state := collect.HumanBytes(f.Bytes)
		if f.Error != "" {
			state += ", " + f.Error
		}
		fmt.Fprintf(out, "  %-34s %-10s %s\n", f.Path, f.Kind, state)
	}
	for _, w := range man.Warnings {
		fmt.Fprintf(out, "warning: %s\n", w)
	}
	fmt.Fprintf(out, "read it back with: %s triage --from-bundle %s\n", rootName(), o.Dir)
	out.flush()
	return nil
}

// runSweep collects every node of the sweep into a sweep folder, --parallel
// at a time, the objects listed once.
func (o *CollectOptions) runSweep() error {
	ctx := o.ctx
	client, _, err := o.loader.client()
	if err != nil {
		return err
	}
	start := time.Now()
	fleet, nodes, missing, err := collect.NewFleet(ctx, client, collect.FleetOptions{All: o.Sweep.AllNodes, Selector: o.Sweep.NodeSelector, Names: o.Nodes, IncludeControlPlane: o.Live.IncludeControlPlane})
	if err != nil {
		return err
	}
	if err := o.loader.warnSkipped(fleet.Skipped(), len(nodes)+len(missing)); err != nil {
		return err
	}
	if len(nodes)+len(missing) == 0 {
		return fmt.Errorf("no node to collect: %s", map[bool]string{true: "no node has the labels " + o.Sweep.NodeSelector, false: "the cluster has no nodes"}[o.Sweep.NodeSelector != ""])
	}
	w, err := collect.NewSweepWriter(o.Dir, start)
	if err != nil {
		return err
	}
	data, objs, err := fleet.Objects(ctx, client, nodes)
	if err != nil {
		return err
	}
	if err := w.Objects(data); err != nil {
		return err
	}
	objs.Warm()
	for _, m := range missing {
		w.Node(m, fmt.Errorf("node %q not found: list them with kubectl get nodes", m), "NotFound")
	}
	type done struct {
		node string
		man  *collect.Manifest
		err  error
	}
	results := make(chan done)
	go func() {
		defer close(results)
		eachParallel(ctx, nodes, o.Sweep.Parallel, func(node string) {
			one := Request{Node: node, Objects: objs, Fleet: fleet, Quiet: true, Kernel: true}
			man, err := o.loader.Collect(ctx, one, w.NodeDir(node))
			results <- done{node, man, err}
		})
	}()
	failed := len(missing)
	out := &sanitizingWriter{w: o.Out}
	for r := range results {
		if r.err != nil {
			if ctx.Err() != nil {
				continue
			}
			failed++
			w.Node(r.node, r.err, collect.FailureReason(r.err))
			if o.Output == "text" {
				fmt.Fprintf(out, "%s: not read (%s): %s\n", r.node, collect.FailureReason(r.err), firstLineOf(r.err.Error()))
			}
			continue
		}
		w.Node(r.node, nil, "")
		if o.Output == "text" {
			var total int64
			for _, f := range r.man.Files {
				total += f.Bytes
			}
			fmt.Fprintf(out, "%s: %s mode via %s, %d files, %s\n", r.node, orUnknown(string(r.man.ProxyMode)), r.man.Via, len(r.man.Files), collect.HumanBytes(total))
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	man, err := collect.ReadSweepManifest(o.Dir)
	if err != nil {
		return err
	}
	if o.Output != "text" {
		if err := printMachine(o.Out, o.Output, man); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(out, "%d of %d nodes in %s (objects once: %s) in %s\n", len(man.Nodes)-failed, len(man.Nodes), o.Dir, collect.HumanBytes(int64(len(data))), seconds(time.Since(start).Seconds()))
		fmt.Fprintf(out, "read it back with: %s triage --from-bundle %s\n", rootName(), o.Dir)
		out.flush()
	}
	switch {
	case failed == len(man.Nodes):
		return &ExitError{Code: ExitCouldNotRun}
	case failed > 0:
		return &ExitError{Code: ExitIncomplete}
	}
	return nil
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
