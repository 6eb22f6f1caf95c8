package plugin

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/proxyrules/kubectl-proxyrules/plugin/collect"
)

// CollectOptions are the options of `collect`.
type CollectOptions struct {
	genericiooptions.IOStreams
	Sources InputOptions
	Dir     string
	Output  string
}

const collectExample = `  # Save everything about a node for later (or for a ticket)
  %[1]s collect --node ip-10-0-1-7 -d incident-4711.tar.gz

  # ... and analyse it anywhere, without the cluster
  %[1]s triage --from-bundle incident-4711.tar.gz
  %[1]s explain svc/web -n shop --from-bundle incident-4711.tar.gz`

// NewCmdCollect builds `collect`.
func NewCmdCollect(name string, streams genericiooptions.IOStreams, kube *genericclioptions.ConfigFlags) *cobra.Command {
	o := &CollectOptions{IOStreams: streams, Output: "text"}
	cmd := &cobra.Command{
		Use:   "collect --node NAME -d DIR|FILE.tar.gz",
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
alone.`,
		Example: fmt.Sprintf(collectExample, name),
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run()
		},
	}
	o.Sources.cmd, o.Sources.kube = cmd, kube
	cmd.Flags().StringVar(&o.Sources.Node, "node", "", "the node to read")
	cmd.Flags().StringVarP(&o.Dir, "dir", "d", "", "where to write the bundle: a new folder, or FILE.tar.gz")
	cmd.Flags().StringVarP(&o.Output, "output", "o", o.Output, "output format: text, json or yaml (the bundle's manifest)")
	o.Sources.Live.AddFlags(cmd)
	return cmd
}

// Validate checks the options.
func (o *CollectOptions) Validate() error {
	o.Sources.In, o.Sources.ErrOut = o.In, o.ErrOut
	if o.Sources.Node == "" {
		return fmt.Errorf("which node? pass --node NAME")
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
	return o.Sources.Live.Validate()
}

// Run collects.
func (o *CollectOptions) Run() error {
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
	man, err := o.Sources.Collect(dir)
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
