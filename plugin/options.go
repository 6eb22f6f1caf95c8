package plugin

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/proxyrules/kubectl-proxyrules/diagnose"
	"github.com/proxyrules/kubectl-proxyrules/plugin/collect"
)

// Every analysis command (map, explain, stale, masq, counts, triage) has an
// options struct of the same shape: the IOStreams, the shared InputOptions
// and OutputOptions, and its own flags; Complete fills what the flags
// imply, Validate checks them before anything is read, Run loads the
// inputs, asks package diagnose for the report and renders it.

// OutputOptions are -o and --color, the same on every command.
type OutputOptions struct {
	Output string
	Color  string
	// wide says whether -o wide means something to the command; where it
	// does not, it prints the default text.
	wide bool
	term *Terminal
}

// OutputFormats are the values of -o.
var OutputFormats = []string{"text", "wide", "json", "yaml"}

// ColorModes are the values of --color.
var ColorModes = []string{"auto", "always", "never"}

// AddFlags registers -o and --color. wide says whether the command has a
// wide form.
func (o *OutputOptions) AddFlags(cmd *cobra.Command, wide bool) {
	o.Output, o.Color, o.wide = "text", "auto", wide
	formats := "text, json or yaml"
	if wide {
		formats = "text, wide, json or yaml"
	}
	cmd.Flags().StringVarP(&o.Output, "output", "o", o.Output, "output format: "+formats)
	cmd.Flags().StringVar(&o.Color, "color", o.Color, "colour: auto (only on a terminal, honours NO_COLOR), always or never")
}

// Complete inspects the terminal the text goes to.
func (o *OutputOptions) Complete(out io.Writer) error {
	t, err := NewTerminal(out, o.Color)
	o.term = t
	return err
}

// Validate checks -o.
func (o *OutputOptions) Validate() error {
	for _, f := range OutputFormats {
		if o.Output == f {
			return nil
		}
	}
	return fmt.Errorf("-o must be one of %s, not %q", strings.Join(OutputFormats, ", "), o.Output)
}

// Machine says whether the report is printed as JSON or YAML.
func (o *OutputOptions) Machine() bool { return o.Output == "json" || o.Output == "yaml" }

// Wide says whether -o wide was asked for and means something.
func (o *OutputOptions) Wide() bool { return o.wide && o.Output == "wide" }

// PrintMachine writes report as JSON or YAML.
func (o *OutputOptions) PrintMachine(out io.Writer, report any) error {
	return printMachine(out, o.Output, report)
}

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
		return o.Run()
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
// streams, the inputs and the output. Commands with arguments or flags of
// their own override Complete or Validate and call these.
type analysisOptions struct {
	genericiooptions.IOStreams
	Inputs InputOptions
	Out    OutputOptions
}

func (o *analysisOptions) addFlags(cmd *cobra.Command, kube *genericclioptions.ConfigFlags, wide bool) {
	o.Inputs.AddFlags(cmd, kube)
	o.Out.AddFlags(cmd, wide)
}

// Complete reads --at and inspects the terminal.
func (o *analysisOptions) Complete(cmd *cobra.Command, args []string) error {
	if err := o.Inputs.Complete(o.In, o.ErrOut); err != nil {
		return err
	}
	return o.Out.Complete(o.IOStreams.Out)
}

// Validate checks -o and the inputs.
func (o *analysisOptions) Validate() error {
	if err := o.Out.Validate(); err != nil {
		return err
	}
	return o.Inputs.Validate()
}

// A built report: what -o json|yaml prints, and how to print it as text.
type built struct {
	report any
	render func(out io.Writer, t *Terminal) error
	// status, when set, decides the exit status: see exitCode.
	status diagnose.Status
	// notChecked is printed after the text, when render does not.
	notChecked []diagnose.Gap
}

// run loads the inputs, builds the report and prints it: JSON or YAML
// (with the collection manifest when the node was read live or from a
// bundle), else text.
func (o *analysisOptions) run(build func(l *Loaded) (built, error)) error {
	l, err := o.Inputs.Load()
	if err != nil {
		return err
	}
	b, err := build(l)
	if err != nil {
		return err
	}
	if o.Out.Machine() {
		err = o.Out.PrintMachine(o.IOStreams.Out, withCollection{b.report, l.Collected})
	} else if err = b.render(o.IOStreams.Out, o.Out.term); err == nil {
		renderNotChecked(o.IOStreams.Out, o.Out.term, b.notChecked)
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
