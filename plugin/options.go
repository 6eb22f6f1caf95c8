package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/diagnose"
	"github.com/proxyrules/kubectl-proxyrules/plugin/collect"
)

// Every analysis command (map, explain, stale, masq, counts, triage) has an
// options struct of the same shape: the IOStreams, the shared InputOptions
// and OutputOptions, and its own flags; Complete fills what the flags
// imply, Validate checks them before anything is read, Run loads the
// inputs, asks package diagnose for the report and renders it.

// printMachine writes report as JSON (format "json") or YAML, streamed as
// it is encoded (machine.go): the bytes of json.MarshalIndent(report, "",
// "  ") and a newline, or of yaml.JSONToYAML of it.
func printMachine(out io.Writer, format string, report any) error {
	if format == "yaml" {
		return streamYAML(out, report)
	}
	return streamJSON(out, report)
}

// APIVersion is the apiVersion of every machine-readable report.
const APIVersion = diagnose.APIVersion

// runAnalysis is the RunE of every analysis command.
func runAnalysis(o interface {
	Complete(cmd *cobra.Command, args []string) error
	Validate() error
	Run() error
}) func(cmd *cobra.Command, args []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if err := o.Complete(cmd, args); err != nil {
			return err
		}
		if err := o.Validate(); err != nil {
			return err
		}
		err := o.Run()
		if t, ok := o.(interface{ writeTimings() }); ok {
			t.writeTimings()
		}
		return err
	}
}

// parseAt reads --at: RFC 3339 or Unix seconds; zero when empty.
func parseAt(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
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

// kubeNamespace is the namespace kubectl would use: -n, else the
// kubeconfig context's, else "default".
func kubeNamespace(kube *genericclioptions.ConfigFlags) string {
	if kube == nil {
		return "default"
	}
	if kube.Namespace != nil && *kube.Namespace != "" {
		return *kube.Namespace
	}
	if ns, _, err := kube.ToRawKubeConfigLoader().Namespace(); err == nil && ns != "" {
		return ns
	}
	return "default"
}

// analysisOptions are what every analysis command's options embed: the
// streams, the input flags and the output. Commands with arguments or flags
// of their own override Complete or Validate and call these.
type analysisOptions struct {
	genericiooptions.IOStreams
	Inputs InputFlags
	Out    OutputOptions
	// Sweep is --all-nodes, --node-selector and --parallel, on the
	// commands that sweep (registered by their AddFlags).
	Sweep SweepOptions
	// beforeSweep, when set, sees the sweep's objects before any node is
	// read and narrows the request every node is read with (explain finds
	// its Service); sweepSubject names what is swept.
	beforeSweep  func(objs *correlate.Objects, req *Request) error
	sweepSubject string

	kube *genericclioptions.ConfigFlags
	ctx  context.Context
	// base is the request of the flags, loader what reads it (Validate
	// makes both).
	base   Request
	loader *Loader
	// timings is --timings: each phase's time, on stderr at the end.
	timings     bool
	timingsKept *collect.Timings
}

// addInputFlags registers the input flags; kube selects the cluster.
func (o *analysisOptions) addInputFlags(cmd *cobra.Command, kube *genericclioptions.ConfigFlags) {
	o.kube = kube
	o.Inputs.AddFlags(cmd)
	cmd.Flags().BoolVar(&o.timings, "timings", false, "print on stderr, at the end, how long each phase took: the API calls, listing the objects, the debug pod's start and deletion, reading the node, parsing, the analysis and the output")
	groupFlags(cmd, flagGroupOutput, "timings")
}

func (o *analysisOptions) addFlags(cmd *cobra.Command, kube *genericclioptions.ConfigFlags, wide bool) {
	o.addInputFlags(cmd, kube)
	o.Out.AddFlags(cmd, wide)
	o.Inputs.addSelectFlags(cmd)
}

// Complete takes the command's context and inspects the terminal.
func (o *analysisOptions) Complete(cmd *cobra.Command, args []string) error {
	if o.timings {
		o.timingsKept = collect.NewTimings()
	}
	o.ctx = cmd.Context()
	if o.ctx == nil {
		o.ctx = context.Background()
	}
	return o.Out.Complete(o.IOStreams.Out)
}

// Validate checks -o, the sweep and the inputs, and makes the request of
// the flags and the loader.
func (o *analysisOptions) Validate() error {
	return o.validate(false)
}

// validate is Validate; nodeOptional: the command may read no node (map
// CHAIN recomputes names from the objects).
func (o *analysisOptions) validate(nodeOptional bool) error {
	if err := o.Out.Validate(); err != nil {
		return err
	}
	if err := o.validateSweep(); err != nil {
		return err
	}
	if err := o.Inputs.Validate(o.sweeping(), nodeOptional); err != nil {
		return err
	}
	return o.prepare()
}

// prepare makes the request of the flags and the loader, once the flags
// are valid.
func (o *analysisOptions) prepare() error {
	var err error
	if o.base, err = newRequest(&o.Inputs, o.kube); err != nil {
		return err
	}
	o.loader, err = newLoader(&o.Inputs, o.kube, o.In, o.ErrOut, o.timingsKept)
	return err
}

// writeTimings prints --timings on stderr.
func (o *analysisOptions) writeTimings() {
	if o.timingsKept != nil && o.ErrOut != nil {
		o.timingsKept.Write(o.ErrOut)
	}
}

// request is the request the flags make, made by Validate: a command
// narrows its copy.
func (o *analysisOptions) request() Request {
	return o.base
}

// context is the command's: cancelled on Ctrl-C (see cmd main).
func (o *analysisOptions) context() context.Context {
	if o.ctx == nil {
		return context.Background()
	}
	return o.ctx
}

// A built report: what -o json|yaml prints, and how to print it as text.
type built struct {
	report any
	render func(out io.Writer, t *Terminal) error
	// status, when set, decides the exit status: see exitCode.
	status diagnose.Status
	// notChecked is printed after the text, when render does not.
	notChecked []diagnose.Gap
	// rows are the report's rows for -o name, the templates and columns.
	rows func() rows
}

// run loads the inputs, builds the report and prints it: JSON or YAML
// (with the collection manifest when the node was read live or from a
// bundle), else text.
func (o *analysisOptions) run(build func(l *Loaded) (built, error)) error {
	return o.runRequest(o.request(), build)
}

// runRequest is run of req: the request of one node, or the base request
// of a sweep's nodes.
func (o *analysisOptions) runRequest(req Request, build func(l *Loaded) (built, error)) error {
	if o.sweeping() {
		return o.sweep(req, build)
	}
	l, err := o.loader.Load(o.context(), req)
	if err != nil {
		return err
	}
	// The analysis and the layout of a big node take seconds: Ctrl-C
	// stops them too.
	_, err = untilDone(o.context(), func() (struct{}, error) { return struct{}{}, o.printReport(l, build) })
	return err
}

// printReport builds the report of l and prints it.
func (o *analysisOptions) printReport(l *Loaded, build func(l *Loaded) (built, error)) error {
	stopAnalyse := o.timingsKept.Start(collect.PhaseAnalyse)
	b, err := build(l)
	stopAnalyse(0)
	if err != nil {
		return err
	}
	defer o.timingsKept.Start(collect.PhaseRender)(0)
	switch {
	case o.Out.Machine():
		err = o.Out.PrintMachine(o.IOStreams.Out, withCollection{b.report, l.Collected})
	default:
		out := newSanitizingWriter(o.IOStreams.Out, o.Out.term) // names and notes are untrusted text
		// The writer lets newlines and colours pass, the plugin's own:
		// the report's, from files, are escaped before they join them.
		escapeReport(b.report)
		escapeReport(&b.notChecked)
		if o.Out.Listed() {
			err = o.Out.printRows(out, withCollection{b.report, l.Collected}, b.rows())
		} else if err = b.render(out, o.Out.term); err == nil {
			renderNotChecked(out, o.Out.term, b.notChecked)
		}
		out.flush()
	}
	if code := exitCode(b.status); err == nil && code != ExitHealthy {
		return &ExitError{Code: code}
	}
	return err
}

// withCollection is a report with the collection manifest (how the node
// was read) as its last field, "collection".
type withCollection struct {
	report     any
	collection *collect.Manifest
}

func (w withCollection) MarshalJSON() ([]byte, error) {
	data, err := json.Marshal(w.report)
	if err != nil || w.collection == nil || len(data) < 2 || data[len(data)-1] != '}' {
		return data, err
	}
	m, err := json.Marshal(w.collection)
	if err != nil {
		return nil, err
	}
	out := append(data[:len(data)-1:len(data)-1], `,"collection":`...)
	return append(append(out, m...), '}'), nil
}
