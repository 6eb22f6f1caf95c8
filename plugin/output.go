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
	// wide says whether -o wide shows more than the text; where it does
	// not, -o wide prints the text, as kubectl does.
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
	formats := "text, wide, json, yaml, name, jsonpath=…, jsonpath-file=…, go-template=…, go-template-file=…, custom-columns=… or custom-columns-file=…"
	wideWords := "wide prints the text (there is nothing wider)"
	if wide {
		wideWords = "wide adds columns"
	}
	cmd.Flags().StringVarP(&o.Output, "output", "o", o.Output, "output format: "+formats+"; "+wideWords+
		"; name prints KIND/NAME for each row, NAME one word a shell takes unquoted (\"/\" becomes \".\"); the templates see the whole report ({.status}), its rows as items ({.items[*]})")
	cmd.Flags().StringVar(&o.Color, "color", o.Color, "colour: auto (only on a terminal, honours NO_COLOR), always or never")
	cmd.Flags().BoolVar(&o.NoHeaders, "no-headers", false, "print tables and custom-columns without their header line")
	cmd.Flags().StringVar(&o.SortBy, "sort-by", "", "sort the rows by a JSONPath expression on each row, e.g. '{.servicePort}'")
	groupFlags(cmd, flagGroupOutput, "output", "color", "no-headers", "sort-by")
	_ = cmd.RegisterFlagCompletionFunc("output", outputCompletion())
	_ = cmd.RegisterFlagCompletionFunc("color", cobra.FixedCompletions(ColorModes, cobra.ShellCompDirectiveNoFileComp))
}

func outputCompletion() cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		return OutputFormats, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
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
	case "text", "wide", "json", "yaml", "name":
		if arg != "" {
			return fmt.Errorf("-o %s takes no argument", format)
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

// printRows prints the rows with -o name, a template (which sees the whole
// report, the rows as its items) or custom columns.
func (o *OutputOptions) printRows(out io.Writer, report any, r rows) error {
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
			fmt.Fprintf(out, "%s/%s\n", r.kind, shellName(r.name(i)))
		}
		return nil
	}
	sorted := make([]map[string]any, len(order))
	for k, i := range order {
		sorted[k] = items[i]
	}
	return o.list.print(out, func() (map[string]any, error) { return wholeReport(report, sorted) }, sorted, o.NoHeaders)
}

// wholeReport is the report as a template sees it: its JSON fields, with
// the rows as items (an ExplanationList's items are its Services: the
// rows, its ports, replace them), and an apiVersion and kind always.
func wholeReport(report any, items []map[string]any) (map[string]any, error) {
	obj := map[string]any{}
	if report != nil {
		data, err := json.Marshal(report)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(data, &obj); err != nil {
			obj = map[string]any{} // not an object: the rows alone
		}
	}
	list := make([]any, len(items))
	for i, it := range items {
		list[i] = it
	}
	obj["items"] = list
	if _, ok := obj["apiVersion"].(string); !ok {
		obj["apiVersion"] = APIVersion
	}
	if _, ok := obj["kind"].(string); !ok {
		obj["kind"] = "List"
	}
	return obj, nil
}

// shellName makes a row's name one word a shell takes as it is, without a
// slash (kubectl's KIND/NAME has one): "/" and blanks become "." and what
// a shell treats specially (brackets, parentheses, quotes, "*", "$", …)
// is dropped.
func shellName(s string) string {
	var b strings.Builder
	dot := false
	for _, r := range s {
		switch {
		case r == '/' || r == ' ' || r == '\t' || r == '\n':
			dot = b.Len() > 0
			continue
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', strings.ContainsRune("._:@%+=,-", r):
		default:
			continue
		}
		if dot && !strings.HasSuffix(b.String(), ".") && r != '.' {
			b.WriteByte('.')
		}
		dot = false
		b.WriteRune(r)
	}
	if b.Len() == 0 {
		return "-"
	}
	return b.String()
}

// listPrinter prints rows with a template (seeing the whole report, built
// by whole when asked) or as custom columns (one line a row).
type listPrinter interface {
	print(out io.Writer, whole func() (map[string]any, error), items []map[string]any, noHeaders bool) error
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

// templatePrinter runs a cli-runtime printer on the whole report, its rows
// as items.
type templatePrinter struct{ p printers.ResourcePrinter }

func (t templatePrinter) print(out io.Writer, whole func() (map[string]any, error), _ []map[string]any, _ bool) error {
	obj, err := whole()
	if err != nil {
		return err
	}
	return t.p.PrintObj(&unstructured.Unstructured{Object: obj}, out)
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

func (c *columns) print(out io.Writer, _ func() (map[string]any, error), items []map[string]any, noHeaders bool) error {
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
