package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	"sigs.k8s.io/yaml"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/diagnose"
	"github.com/proxyrules/kubectl-proxyrules/plugin/collect"
)

// DefaultParallel is how many nodes a sweep reads at once: a modest load on
// the API server and the nodes.
const DefaultParallel = 5

// maxParallel bounds --parallel: each node in flight holds its ruleset in
// memory.
const maxParallel = 50

// SweepOptions choose the nodes a command sweeps: every node, those with
// some labels, or those named by --node repeated.
type SweepOptions struct {
	AllNodes     bool
	NodeSelector string
	Parallel     int
	// supported: the command sweeps (triage, stale, counts, masq, explain,
	// collect).
	supported bool
}

// AddFlags registers --all-nodes, --node-selector and --parallel.
func (s *SweepOptions) AddFlags(cmd *cobra.Command) {
	s.supported = true
	fs := cmd.Flags()
	fs.BoolVar(&s.AllNodes, "all-nodes", false, "sweep every node: one short-lived debug pod each, --parallel at a time, the API objects read once")
	fs.StringVar(&s.NodeSelector, "node-selector", "", "sweep the nodes with these labels, e.g. topology.kubernetes.io/zone=eu-1a (comma-separated, as kubectl -l)")
	fs.IntVar(&s.Parallel, "parallel", DefaultParallel, "nodes a sweep reads at once (never more debug pods at once)")
	groupFlags(cmd, flagGroupSweep, "all-nodes", "node-selector", "parallel")
}

// sweeping says whether the command sweeps: --all-nodes, --node-selector,
// --node repeated, or a sweep folder read back (unless --node picks one of
// its nodes).
func (o *analysisOptions) sweeping() bool {
	in := &o.Inputs
	return o.Sweep.AllNodes || o.Sweep.NodeSelector != "" || len(in.Nodes) > 1 || in.sweepDir() != "" && len(in.Nodes) != 1
}

// validateSweep checks the sweep's flags; a single-node command given
// them says which commands sweep.
func (o *analysisOptions) validateSweep() error {
	if !o.sweeping() {
		return nil
	}
	if !o.Sweep.supported {
		return fmt.Errorf("%s reads one node: sweeps (--all-nodes, --node-selector, --node repeated, a sweep folder) are for triage, stale, counts, masq, explain and collect", o.Out.command)
	}
	if err := o.Sweep.validate(o.Inputs.Nodes); err != nil {
		return err
	}
	if len(o.Inputs.Dumps) > 0 {
		return fmt.Errorf("--from-dump holds one node's rules: a sweep reads each node (live, or --from-bundle of a folder written by collect --all-nodes)")
	}
	if dir := o.Inputs.sweepDir(); dir != "" && (o.Sweep.AllNodes || o.Sweep.NodeSelector != "") {
		return fmt.Errorf("--from-bundle %s is a sweep folder: it sweeps its own nodes (pick some with --node)", dir)
	}
	if o.Out.Listed() {
		return fmt.Errorf("a sweep prints a summary table, -o json or -o yaml (a List of the nodes' reports); -o %s is for one node", strings.SplitN(o.Out.Output, "=", 2)[0])
	}
	return nil
}

// validate checks the sweep's own flags against --node (nodes).
func (s *SweepOptions) validate(nodes []string) error {
	if s.AllNodes && s.NodeSelector != "" {
		return fmt.Errorf("--all-nodes or --node-selector, not both")
	}
	if (s.AllNodes || s.NodeSelector != "") && len(nodes) > 0 {
		return fmt.Errorf("--node names the nodes itself: drop it, or drop --all-nodes/--node-selector")
	}
	if s.Parallel < 1 || s.Parallel > maxParallel {
		return fmt.Errorf("--parallel must be between 1 and %d, not %d", maxParallel, s.Parallel)
	}
	return nil
}

// nodeResult is one node of a sweep, done.
type nodeResult struct {
	node    string
	built   built
	loaded  *Loaded
	err     error
	seconds float64
}

// sweepSource reads the nodes of a sweep: live through the cluster, or
// from a sweep folder.
type sweepSource struct {
	nodes []string
	// objects are the sweep's, read once.
	objects *correlate.Objects
	// failed are nodes known unreadable before any is read (named but not
	// in the cluster, or failed when the sweep folder was collected).
	failed []diagnose.NodeError
	// base is the request every node is read with, folder the sweep
	// folder read offline ("" live).
	base   Request
	folder string
}

// request is the request of one node: live, or its bundle in the folder,
// with the sweep's objects.
func (s *sweepSource) request(node string) Request {
	r := s.base.forNode(node)
	if s.folder != "" {
		r.Files.Objects = nil
		r.Files.Bundles = []string{collect.NodeBundleDir(s.folder, node)}
	}
	return r
}

// sweep runs build on every node of the sweep, --parallel at a time, and
// streams the reports as the nodes finish: a List in -o json/yaml (its
// items printed as they come, the summary last), a summary table and the
// causes across nodes in text.
func (o *analysisOptions) sweep(base Request, build func(l *Loaded) (built, error)) error {
	ctx, cancel := context.WithCancel(o.context())
	defer cancel()
	start := time.Now()
	src, err := o.sweepSource(ctx, base)
	if err != nil {
		return err
	}
	if o.beforeSweep != nil {
		if err := o.beforeSweep(src.objects, &src.base); err != nil {
			return err
		}
	}
	total := len(src.nodes) + len(src.failed)
	if total == 0 {
		return fmt.Errorf("no node to sweep: %s", o.noNodesWhy())
	}
	out := newSweepOutput(o.IOStreams.Out, o.Out.Output)
	if err := out.begin(); err != nil {
		return err
	}
	sum := diagnose.NewSweep()
	progress := o.sweepProgress()
	done := 0
	for _, f := range src.failed {
		done++
		sum.AddError(f, 0)
		progress(done, total, f.Node, "not read: "+f.Error)
		if err := out.item(f); err != nil {
			return err
		}
	}
	results := make(chan nodeResult)
	go func() {
		defer close(results)
		eachParallel(ctx, src.nodes, o.Sweep.Parallel, func(node string) {
			t0 := time.Now()
			r := nodeResult{node: node}
			if r.loaded, r.err = o.loader.Load(ctx, src.request(node)); r.err == nil {
				loaded := r.loaded
				r.built, r.err = untilDone(ctx, func() (built, error) { return build(loaded) })
			}
			r.seconds = time.Since(t0).Seconds()
			results <- r
		})
	}()
	for r := range results {
		done++
		if r.err != nil {
			if ctx.Err() != nil {
				continue // interrupted: no row for what was cut short
			}
			ne := diagnose.NodeError{APIVersion: APIVersion, Kind: "NodeError", Node: r.node, Error: r.err.Error(), Reason: collect.FailureReason(r.err)}
			sum.AddError(ne, r.seconds)
			progress(done, total, r.node, "not read: "+firstLineOf(ne.Error))
			if err := out.item(ne); err != nil {
				cancel()
				return err
			}
			continue
		}
		sum.Add(r.node, r.built.report, r.seconds)
		progress(done, total, r.node, fmt.Sprintf("%s (%s)", r.built.status, seconds(r.seconds)))
		if err := out.item(withCollection{r.built.report, r.loaded.Collected}); err != nil {
			cancel()
			return err
		}
		r.loaded, r.built = nil, built{} // streamed: nothing of the node is kept
	}
	if err := o.context().Err(); err != nil {
		return err // interrupted: the pods are gone, say so
	}
	s := sum.Summary()
	if out.machine() {
		if err := out.end(s); err != nil {
			return err
		}
	} else {
		w := newSanitizingWriter(o.IOStreams.Out, o.Out.term)
		escapeReport(s)
		renderSweep(w, o.Out.term, escapeData(o.sweepTitle()), s, time.Since(start))
		w.flush()
	}
	if s.Failed == s.Nodes {
		if out.machine() {
			return fmt.Errorf("no node could be read (%s)", s.Rows[0].Error)
		}
		return &ExitError{Code: ExitCouldNotRun} // the text said why
	}
	if code := exitCode(s.Status); code != ExitHealthy {
		return &ExitError{Code: code}
	}
	return nil
}

func (o *analysisOptions) noNodesWhy() string {
	switch {
	case o.Sweep.NodeSelector != "":
		return "no node has the labels " + o.Sweep.NodeSelector
	case o.Inputs.sweepDir() != "":
		return "the sweep folder lists none"
	}
	return "the cluster has no nodes"
}

// sweepProgress prints a line per finished node on stderr when it is a
// terminal.
func (o *analysisOptions) sweepProgress() func(done, total int, node, what string) {
	f, ok := o.ErrOut.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return func(int, int, string, string) {}
	}
	var mu sync.Mutex
	return func(done, total int, node, what string) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(o.ErrOut, "[%d/%d] %s: %s\n", done, total, escapeData(node), escapeData(what))
	}
}

// sweepSource picks the nodes and how to read each.
func (o *analysisOptions) sweepSource(ctx context.Context, base Request) (*sweepSource, error) {
	if dir := o.Inputs.sweepDir(); dir != "" {
		return o.loader.offlineSweep(ctx, base, dir, o.Inputs.Nodes)
	}
	return o.loader.liveSweep(ctx, base, collect.FleetOptions{All: o.Sweep.AllNodes, Selector: o.Sweep.NodeSelector, Names: o.Inputs.Nodes, IncludeControlPlane: o.Inputs.Live.IncludeControlPlane})
}

// liveSweep lists the nodes, the kube-proxy DaemonSets and the objects once;
// each node is then read into a temporary bundle, analysed and forgotten.
func (ld *Loader) liveSweep(ctx context.Context, base Request, opts collect.FleetOptions) (*sweepSource, error) {
	client, _, err := ld.client()
	if err != nil {
		return nil, err
	}
	fleet, nodes, missing, err := collect.NewFleet(ctx, client, opts)
	if err != nil {
		return nil, err
	}
	if err := ld.warnSkipped(fleet.Skipped(), len(nodes)+len(missing)); err != nil {
		return nil, err
	}
	objs := base.Objects
	if objs == nil && len(base.Files.Objects) > 0 {
		if objs, err = ld.Objects(ctx, base); err != nil {
			return nil, err
		}
	}
	if objs == nil {
		if _, objs, err = fleet.Objects(ctx, client, nodes); err != nil {
			return nil, err
		}
	}
	objs.Warm()
	base.Objects, base.Fleet, base.Quiet = objs, fleet, true
	src := &sweepSource{nodes: nodes, objects: objs, base: base}
	for _, m := range missing {
		src.failed = append(src.failed, diagnose.NodeError{APIVersion: APIVersion, Kind: "NodeError", Node: m, Error: fmt.Sprintf("node %q not found: list them with kubectl get nodes", m), Reason: "NotFound"})
	}
	return src, nil
}

// warnSkipped says on stderr which nodes a sweep leaves out, and why; an
// error when it leaves out all (left: the nodes it still reads).
func (ld *Loader) warnSkipped(skipped []collect.SkippedNode, left int) error {
	if left == 0 && len(skipped) > 0 {
		names := make([]string, len(skipped))
		for i, s := range skipped {
			names[i] = escapeData(s.Node)
		}
		return fmt.Errorf("no node to sweep: every one is a control-plane node (%s): pass %s to read them", strings.Join(names, ", "), collect.IncludeControlPlaneFlag)
	}
	for _, s := range skipped {
		fmt.Fprintf(ld.errOut(), "Warning: skipped node %s: %s\n", escapeData(s.Node), escapeData(s.Why))
	}
	return nil
}

// offlineSweep reads the nodes of a sweep folder, with its objects read
// once (or --from-objects): nodes, or every node of the folder.
func (ld *Loader) offlineSweep(ctx context.Context, base Request, dir string, nodes []string) (*sweepSource, error) {
	man, err := collect.ReadSweepManifest(dir)
	if err != nil {
		return nil, err
	}
	if len(base.Files.Objects) == 0 {
		base.Files.Objects = []string{filepath.Join(dir, collect.SweepObjectsFile)}
	}
	objs, err := ld.Objects(ctx, base)
	if err != nil {
		return nil, err
	}
	objs.Warm()
	base.Objects = objs
	want := map[string]bool{}
	for _, n := range nodes {
		want[n] = true
	}
	src := &sweepSource{objects: objs, base: base, folder: dir}
	filter := len(want) > 0
	for _, n := range man.Nodes {
		if filter && !want[n.Name] {
			continue
		}
		delete(want, n.Name) // what stays was asked for and is not there
		if n.Dir == "" {
			src.failed = append(src.failed, diagnose.NodeError{APIVersion: APIVersion, Kind: "NodeError", Node: n.Name, Error: n.Error, Reason: n.Reason})
			continue
		}
		src.nodes = append(src.nodes, n.Name)
	}
	for n := range want {
		src.failed = append(src.failed, diagnose.NodeError{APIVersion: APIVersion, Kind: "NodeError", Node: n, Error: fmt.Sprintf("node %q is not in the sweep folder %s", n, dir), Reason: "NotFound"})
	}
	return src, nil
}

// sweepOutput streams a List: the header, each item as it comes, the
// summary last; text keeps nothing but the summary's rows.
type sweepOutput struct {
	w      io.Writer
	format string
	n      int
}

func newSweepOutput(w io.Writer, format string) *sweepOutput {
	return &sweepOutput{w: w, format: format}
}

func (s *sweepOutput) machine() bool { return s.format == "json" || s.format == "yaml" }

func (s *sweepOutput) begin() error {
	var err error
	switch s.format {
	case "json":
		_, err = fmt.Fprintf(s.w, "{\n  \"apiVersion\": %q,\n  \"kind\": \"List\",\n  \"items\": [", APIVersion)
	case "yaml":
		_, err = fmt.Fprintf(s.w, "apiVersion: %s\nkind: List\nitems:\n", APIVersion)
	}
	return err
}

func (s *sweepOutput) item(v any) error {
	if !s.machine() {
		return nil
	}
	data, err := json.MarshalIndent(v, "    ", "  ")
	if err != nil {
		return err
	}
	defer func() { s.n++ }()
	if s.format == "json" {
		sep := ","
		if s.n == 0 {
			sep = ""
		}
		_, err = fmt.Fprintf(s.w, "%s\n    %s", sep, data)
		return err
	}
	y, err := yaml.JSONToYAML(data)
	if err != nil {
		return err
	}
	_, err = io.WriteString(s.w, yamlListItem(string(y)))
	return err
}

func (s *sweepOutput) end(sum *diagnose.SweepSummary) error {
	switch s.format {
	case "json":
		data, err := json.MarshalIndent(sum, "  ", "  ")
		if err != nil {
			return err
		}
		closing := "\n  ]"
		if s.n == 0 {
			closing = "]"
		}
		_, err = fmt.Fprintf(s.w, "%s,\n  \"summary\": %s\n}\n", closing, data)
		return err
	case "yaml":
		if s.n == 0 {
			if _, err := io.WriteString(s.w, "  []\n"); err != nil { // "items:" with none
				return err
			}
		}
		data, err := json.Marshal(sum)
		if err != nil {
			return err
		}
		y, err := yaml.JSONToYAML(data)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(s.w, "summary:\n%s", indentLines(string(y), "  "))
		return err
	}
	return nil
}

// yamlListItem turns a YAML document into an item of a list: "- " before
// its first line, two spaces before the others.
func yamlListItem(doc string) string {
	lines := strings.Split(strings.TrimRight(doc, "\n"), "\n")
	for i, l := range lines {
		if i == 0 {
			lines[i] = "- " + l
		} else if l != "" {
			lines[i] = "  " + l
		}
	}
	return strings.Join(lines, "\n") + "\n"
}

func indentLines(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = prefix + l
		}
	}
	return strings.Join(lines, "\n") + "\n"
}

func firstLineOf(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// sweepTitle names what was swept in the text's first line.
func (o *analysisOptions) sweepTitle() string {
	if o.sweepSubject != "" {
		return o.sweepSubject
	}
	return o.Out.command
}

// eachParallel runs work for every node, at most n at once, and returns
// when all it started have returned; once ctx is done it starts no more.
func eachParallel(ctx context.Context, nodes []string, n int, work func(node string)) {
	sem := make(chan struct{}, n)
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, node := range nodes {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return
		}
		if ctx.Err() != nil {
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			work(node)
		}()
	}
}
