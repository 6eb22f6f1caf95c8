package plugin

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/util/jsonpath"
)

// OutputOptions are -o, --color, --no-headers and --sort-by, the same on
// every command.
type OutputOptions struct {
	Output    string
	Color     string
	NoHeaders bool
	SortBy    string
	// wide says whether -o wide means something to the command; where it
	// does not, it is refused.
	wide bool
	// command names the command in errors.
	command string
	term    *Terminal
	// template is the parsed jsonpath, go-template or custom-columns.
	list listPrinter
}

// OutputFormats are the values of -o (templates take an argument).
var OutputFormats = []string{"text", "wide", "json", "yaml", "name", "jsonpath=", "jsonpath-file=", "go-template=", "go-template-file=", "custom-columns=", "custom-columns-file="}

// ColorModes are the values of --color.
var ColorModes = []string{"auto", "always", "never"}

// AddFlags registers the output flags. wide says whether the command has a
// wide form.
func (o *OutputOptions) AddFlags(cmd *cobra.Command, wide bool) {
	o.Output, o.Color, o.wide, o.command = "text", "auto", wide, cmd.Name()
	formats := "text, json, yaml, name, jsonpath=…, jsonpath-file=…, go-template=…, go-template-file=…, custom-columns=… or custom-columns-file=…"
	if wide {
		formats = "text, wide, " + strings.TrimPrefix(formats, "text, ")
	}
	cmd.Flags().StringVarP(&o.Output, "output", "o", o.Output, "output format: "+formats+"; the templates see the report's rows as a List ({.items[*]})")
	cmd.Flags().StringVar(&o.Color, "color", o.Color, "colour: auto (only on a terminal, honours NO_COLOR), always or never")
	cmd.Flags().BoolVar(&o.NoHeaders, "no-headers", false, "print tables and custom-columns without their header line")
	cmd.Flags().StringVar(&o.SortBy, "sort-by", "", "sort the rows by a JSONPath expression on each row, e.g. '{.servicePort}'")
	_ = cmd.RegisterFlagCompletionFunc("output", outputCompletion(wide))
	_ = cmd.RegisterFlagCompletionFunc("color", cobra.FixedCompletions(ColorModes, cobra.ShellCompDirectiveNoFileComp))
}

func outputCompletion(wide bool) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		var out []string
		for _, f := range OutputFormats {
			if f == "wide" && !wide {
				continue
			}
			out = append(out, f)
		}
		return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
	}
}

// Complete inspects the terminal the text goes to.
func (o *OutputOptions) Complete(out io.Writer) error {
	t, err := NewTerminal(out, o.Color)
	if t != nil {
		t.NoHeaders = o.NoHeaders
	}
	o.term = t
	return err
}

// Validate checks -o and parses its template.
func (o *OutputOptions) Validate() error {
	format, arg, _ := strings.Cut(o.Output, "=")
	switch format {
	case "text", "json", "yaml", "name":
		if arg != "" {
			return fmt.Errorf("-o %s takes no argument", format)
		}
	case "wide":
		if !o.wide {
			return fmt.Errorf("%s has no wide output: its text already shows everything; use -o yaml for the whole report", o.command)
		}
	case "jsonpath", "jsonpath-file", "go-template", "go-template-file", "template", "templatefile", "custom-columns", "custom-columns-file":
		if !strings.Contains(o.Output, "=") || arg == "" {
			return fmt.Errorf("-o %s needs its template: -o %s=…", format, format)
		}
		p, err := newListPrinter(format, arg)
		if err != nil {
			return err
		}
		o.list = p
	default:
		return fmt.Errorf("-o must be one of %s, not %q", strings.Join(OutputFormats, ", "), o.Output)
	}
	if o.SortBy != "" {
		if _, err := relaxedJSONPath(o.SortBy); err != nil {
			return fmt.Errorf("--sort-by: %v", err)
		}
		if !o.Listed() {
			return fmt.Errorf("--sort-by orders the rows of -o name, custom-columns, jsonpath and go-template; the %s output keeps its own order (by Service, then chain)", format)
		}
	}
	return nil
}

// Machine says whether the whole report is printed as JSON or YAML.
func (o *OutputOptions) Machine() bool { return o.Output == "json" || o.Output == "yaml" }

// Listed says whether the rows are printed by name, template or columns.
func (o *OutputOptions) Listed() bool { return o.Output == "name" || o.list != nil }

// Wide says whether -o wide was asked for.
func (o *OutputOptions) Wide() bool { return o.wide && o.Output == "wide" }

// PrintMachine writes report as JSON or YAML.
func (o *OutputOptions) PrintMachine(out io.Writer, report any) error {
	return printMachine(out, o.Output, report)
}

// rows are a report's rows for -o name, the templates and --sort-by: the
// chains of map and stale, the findings of triage, the ports of explain,
// the tables of counts, the families of masq.
type rows struct {
	// kind names a row in -o name: chain, finding, serviceport, table, family.
	kind  string
	items []any
	// name is the row's name in -o name.
	name func(i int) string
}

// maps turns the rows into JSON objects, as the templates see them.
func (r rows) maps() ([]map[string]any, error) {
	out := make([]map[string]any, 0, len(r.items))
	for _, it := range r.items {
		data, err := json.Marshal(it)
		if err != nil {
			return nil, err
		}
		m := map[string]any{}
		if err := json.Unmarshal(data, &m); err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// sortRows orders rows by a JSONPath value of each: numbers numerically,
// the rest as text; rows without the field last. It returns the order.
func sortRows(expr string, items []map[string]any) ([]int, error) {
	jp, err := relaxedJSONPath(expr)
	if err != nil {
		return nil, err
	}
	keys := make([]any, len(items))
	for i, it := range items {
		if vs, err := jp.FindResults(it); err == nil && len(vs) > 0 && len(vs[0]) > 0 {
			keys[i] = vs[0][0].Interface()
		}
	}
	order := make([]int, len(items))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		ka, kb := keys[order[a]], keys[order[b]]
		switch {
		case ka == nil:
			return false
		case kb == nil:
			return true
		}
		fa, oka := ka.(float64)
		fb, okb := kb.(float64)
		if oka && okb {
			return fa < fb
		}
		return fmt.Sprint(ka) < fmt.Sprint(kb)
	})
	return order, nil
}

// printRows prints the rows with -o name, a template or custom columns.
func (o *OutputOptions) printRows(out io.Writer, r rows) error {
	items, err := r.maps()
	if err != nil {
		return err
	}
	order := make([]int, len(items))
	for i := range order {
		order[i] = i
	}
	if o.SortBy != "" {
		if order, err = sortRows(o.SortBy, items); err != nil {
			return err
		}
	}
	if o.Output == "name" {
		for _, i := range order {
			fmt.Fprintf(out, "%s/%s\n", r.kind, r.name(i))
		}
		return nil
	}
	sorted := make([]map[string]any, len(order))
	for k, i := range order {
		sorted[k] = items[i]
	}
	return o.list.print(out, sorted, o.NoHeaders)
}

// listPrinter prints rows with a template (seeing them as a List) or as
// custom columns (one line a row).
type listPrinter interface {
	print(out io.Writer, items []map[string]any, noHeaders bool) error
}

func newListPrinter(format, arg string) (listPrinter, error) {
	text := arg
	if strings.HasSuffix(format, "-file") || format == "templatefile" {
		data, err := os.ReadFile(arg)
		if err != nil {
			return nil, fmt.Errorf("-o %s: %v", format, err)
		}
		text = string(data)
	}
	switch format {
	case "jsonpath", "jsonpath-file":
		p, err := printers.NewJSONPathPrinter(text)
		if err != nil {
			return nil, fmt.Errorf("-o %s: %v", format, err)
		}
		p.AllowMissingKeys(true) // kubectl's --allow-missing-template-keys default
		return templatePrinter{p}, nil
	case "go-template", "go-template-file", "template", "templatefile":
		p, err := printers.NewGoTemplatePrinter([]byte(text))
		if err != nil {
			return nil, fmt.Errorf("-o %s: %v", format, err)
		}
		p.AllowMissingKeys(true)
		return templatePrinter{p}, nil
	}
	return newColumns(strings.TrimSpace(text), format)
}

// templatePrinter runs a cli-runtime printer on the rows as a List.
type templatePrinter struct{ p printers.ResourcePrinter }

func (t templatePrinter) print(out io.Writer, items []map[string]any, _ bool) error {
	list := make([]any, len(items))
	for i, it := range items {
		list[i] = it
	}
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": APIVersion, "kind": "List", "items": list}}
	return t.p.PrintObj(obj, out)
}

// columns is -o custom-columns=HEADER:JSONPATH,…
type columns struct {
	headers []string
	paths   []*jsonpath.JSONPath
}

func newColumns(spec, format string) (*columns, error) {
	c := &columns{}
	// The file form is "HEADER HEADER\nPATH PATH", as kubectl's.
	if format == "custom-columns-file" {
		lines := strings.Split(spec, "\n")
		if len(lines) < 2 {
			return nil, fmt.Errorf("-o %s: want a line of headers and a line of JSONPaths", format)
		}
		hs, ps := strings.Fields(lines[0]), strings.Fields(lines[1])
		if len(hs) != len(ps) {
			return nil, fmt.Errorf("-o %s: %d headers, %d JSONPaths", format, len(hs), len(ps))
		}
		var parts []string
		for i := range hs {
			parts = append(parts, hs[i]+":"+ps[i])
		}
		spec = strings.Join(parts, ",")
	}
	for _, col := range strings.Split(spec, ",") {
		h, path, ok := strings.Cut(col, ":")
		if !ok || h == "" || path == "" {
			return nil, fmt.Errorf("-o custom-columns: %q is not HEADER:JSONPATH", col)
		}
		jp, err := relaxedJSONPath(path)
		if err != nil {
			return nil, fmt.Errorf("-o custom-columns: column %s: %v", h, err)
		}
		c.headers, c.paths = append(c.headers, h), append(c.paths, jp)
	}
	return c, nil
}

func (c *columns) print(out io.Writer, items []map[string]any, noHeaders bool) error {
	tw := tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)
	if !noHeaders {
		fmt.Fprintln(tw, strings.Join(c.headers, "\t"))
	}
	for _, it := range items {
		cells := make([]string, len(c.paths))
		for i, jp := range c.paths {
			cells[i] = "<none>"
			vs, err := jp.FindResults(it)
			if err != nil || len(vs) == 0 || len(vs[0]) == 0 {
				continue
			}
			var parts []string
			for _, v := range vs[0] {
				parts = append(parts, fmt.Sprint(v.Interface()))
			}
			cells[i] = strings.Join(parts, ",")
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

// relaxedJSONPath accepts kubectl's forms: {.a.b}, .a.b and a.b.
func relaxedJSONPath(expr string) (*jsonpath.JSONPath, error) {
	e := strings.TrimSpace(expr)
	if !strings.HasPrefix(e, "{") {
		if !strings.HasPrefix(e, ".") {
			e = "." + e
		}
		e = "{" + e + "}"
	}
	jp := jsonpath.New("path").AllowMissingKeys(true)
	if err := jp.Parse(e); err != nil {
		return nil, err
	}
	return jp, nil
}

// anySlice lets a typed slice be rows.
func anySlice[T any](s []T) []any {
	out := make([]any, len(s))
	for i := range s {
		out[i] = s[i]
	}
	return out
}
