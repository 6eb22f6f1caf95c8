package plugin

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/inspect"
	"github.com/proxyrules/kubectl-proxyrules/inspect/conntrack"
	"github.com/proxyrules/kubectl-proxyrules/inspect/input"
	"github.com/proxyrules/kubectl-proxyrules/inspect/iptables"
	"github.com/proxyrules/kubectl-proxyrules/inspect/kpconfig"
	"github.com/proxyrules/kubectl-proxyrules/inspect/metrics"
	"github.com/proxyrules/kubectl-proxyrules/plugin/collect"
)

// inputSet is what one load reads (Loader.Load makes it): the files given
// and those of the bundles, the objects already read, and how to read
// them. It lives for one load.
type inputSet struct {
	InputFiles
	// node is the node: the request's, else the bundle's.
	node string
	// objects, when set, are already read: no objects file is.
	objects *correlate.Objects
	// only, when set, narrows the read to one Service (targeted.go);
	// walk, to what a walk of its packets reads (trace_load.go).
	only *correlate.ServiceFilter
	walk bool
	// stream has the live read's rules parsed as they came (streamparse.go).
	stream *streamParse
	table  string
	caps   inputCaps
	in     io.Reader
	// collected is the manifest of the bundle read (live or --from-bundle).
	collected *collect.Manifest
	// bundleFiles are the inputs that are files of a bundle, by the path
	// addBundle put in the lists: open reads them through their bundle.
	bundleFiles map[string]bundleFile
	// warn is where an objects file's left-out objects are reported.
	warn io.Writer
	// given are the conntrack files the request names, which win over a
	// bundle's; bundleConntrack counts the bundle tables added.
	given           InputFiles
	bundleConntrack int
	// kernelOnly: no ruleset is needed (Request.KernelOnly).
	kernelOnly bool
}

// inputSet starts the files of one load: those req names.
func (ld *Loader) inputSet(req Request) *inputSet {
	caps := ld.Caps
	if caps == nil {
		caps = defaultCaps
	}
	// Clipped: a bundle's files are appended to a copy of each list.
	files := InputFiles{Dumps: clip(req.Files.Dumps), Objects: clip(req.Files.Objects), Metrics: clip(req.Files.Metrics),
		Config: clip(req.Files.Config), Bundles: clip(req.Files.Bundles),
		Conntrack: clip(req.Files.Conntrack), ConntrackStats: clip(req.Files.ConntrackStats), Sysctls: clip(req.Files.Sysctls)}
	return &inputSet{InputFiles: files, node: req.Node, objects: req.Objects, table: req.Table,
		caps: caps, in: ld.In, bundleFiles: map[string]bundleFile{}, warn: ld.errOut(), given: req.Files, kernelOnly: req.KernelOnly,
		walk: req.Walk}
}

// parsedAsRead gives s the rules a live read parsed as they came
// (streamparse.go; nil: none).
func (s *inputSet) parsedAsRead(stream *streamParse) *inputSet {
	s.stream = stream
	return s
}

// sweepFolders resolves sweep folders among bundles: a node's bundle
// inside one is read with the folder's objects; a whole folder names one
// node's bundle (a sweep reads its nodes one request each).
func (s *inputSet) sweepFolders(bundles []string) ([]string, error) {
	for _, b := range bundles {
		if sweep := sweepOfNodeBundle(b); sweep != "" {
			// Its objects and node folders as collect wrote them: no FIFO
			// or link (ReadSweepManifest checks).
			if _, err := collect.ReadSweepManifest(sweep); err != nil {
				return nil, err
			}
			if !s.haveObjects() {
				s.Objects = []string{filepath.Join(sweep, collect.SweepObjectsFile)}
			}
		}
	}
	dir := sweepDirOf(bundles)
	if dir == "" {
		return bundles, nil
	}
	if _, err := collect.ReadSweepManifest(dir); err != nil {
		return nil, err
	}
	if s.node == "" {
		return nil, fmt.Errorf("%s is a sweep folder of many nodes: pass --node NAME for one of them, or use a command that sweeps (triage, stale, counts, masq, explain)", dir)
	}
	// The node names a folder inside the sweep: never one outside it.
	if err := collect.CheckNodeName(s.node); err != nil {
		return nil, fmt.Errorf("--node: %w", err)
	}
	bundles = slices.DeleteFunc(slices.Clone(bundles), func(b string) bool { return b == dir })
	bundles = append(bundles, collect.NodeBundleDir(dir, s.node))
	if !s.haveObjects() {
		s.Objects = []string{filepath.Join(dir, collect.SweepObjectsFile)}
	}
	return bundles, nil
}

type bundleFile struct {
	bundle *collect.Bundle
	file   collect.BundleFile
}

// haveObjects: objects are given (read, or files to read), so a bundle's
// own are not read.
func (s *inputSet) haveObjects() bool {
	return s.objects != nil || len(s.Objects) > 0
}

// addBundle adds a bundle's files to the inputs. Objects given win over
// the bundle's.
func (s *inputSet) addBundle(b *collect.Bundle) {
	userObjects := s.haveObjects()
	m := b.Manifest
	s.collected = &m
	if s.node == "" {
		s.node = m.Node
	}
	for _, f := range m.Files {
		// An empty conntrack table read without error is a table with no
		// Service entry: read, unlike an empty file of another kind.
		if f.Bytes == 0 && (f.Kind != collect.KindConntrack || f.Error != "") {
			continue
		}
		var list *[]string
		switch f.Kind {
		case collect.KindRuleset:
			list = &s.Dumps
		case collect.KindMetrics:
			list = &s.Metrics
		case collect.KindConfig:
			list = &s.Config
		case collect.KindObjects:
			if userObjects {
				continue
			}
			list = &s.Objects
		default:
			if list = s.bundleConntrackList(f.Kind); list == nil {
				continue
			}
		}
		p := b.Path(f)
		*list = append(*list, p)
		s.bundleFiles[p] = bundleFile{bundle: b, file: f}
	}
}

// narrowTo reads only service's objects and chains where that gives the
// full read's answer: the node must be known (inferring it reads every
// Service's chains) and the objects given.
func (s *inputSet) narrowTo(service *correlate.ServiceFilter) {
	if service != nil && s.node != "" && s.haveObjects() {
		s.only = service
	}
}

// open opens an input for reading, within the cap on its kind: a file of a
// bundle through the bundle (regular files inside it only), stdin for "-",
// else the file. Reading past the cap is an error that says how to raise it.
func (s *inputSet) open(name string) (io.ReadCloser, string, error) {
	caps := s.caps // Loader.inputSet fills in the defaults
	kind := s.kindOf(name)
	var rc io.ReadCloser
	src := name
	switch bf, ok := s.bundleFiles[name]; {
	case ok && bf.file.Bytes == 0:
		// an empty conntrack table (addBundle): nothing to open, and an
		// archive holds no empty file
		rc = io.NopCloser(strings.NewReader(""))
	case ok:
		f, err := bf.bundle.Open(bf.file)
		if err != nil {
			return nil, name, err
		}
		rc = f
	case name == "-":
		in := s.in
		if in == nil {
			in = os.Stdin
		}
		rc, src = io.NopCloser(in), "<stdin>"
	default:
		f, err := os.Open(name)
		if err != nil {
			return nil, name, err
		}
		rc = f
	}
	return &cappedReader{ReadCloser: rc, left: caps[kind], limit: caps[kind], kind: kind, source: src}, src, nil
}

// readObjects reads every objects file.
func (s *inputSet) readObjects() (*correlate.Objects, error) {
	objs := &correlate.Objects{}
	for _, name := range s.Objects {
		more, err := readInput(s, input.KindObjects, name, s.objectsReader(nil))
		if err != nil {
			return nil, err
		}
		objs.Add(more)
	}
	return objs, nil
}

// objectsReader reads an objects file (only one Service's, when only is
// set) and says in one line which objects it left out for their names.
func (s *inputSet) objectsReader(only *correlate.ServiceFilter) func(io.Reader, string) (*correlate.Objects, error) {
	return func(r io.Reader, source string) (*correlate.Objects, error) {
		var objs *correlate.Objects
		var err error
		if only != nil {
			objs, err = correlate.ReadServiceObjects(r, source, *only)
		} else {
			objs, err = correlate.ReadObjects(r, source)
		}
		if err == nil && s.warn != nil {
			if w := objs.LeftOut.Warning(); w != "" {
				fmt.Fprintf(s.warn, "warning: %s: %s\n", escapeData(source), escapeData(w))
			}
		}
		return objs, err
	}
}

// readOptions are how --from-dump files are read.
func readOptions(table string) input.Options {
	return input.Options{IPTables: iptables.Options{Table: table}}
}

// loadResult is what one file held.
type loadResult struct {
	in   *input.Input
	m    *metrics.Metrics
	cfg  *kpconfig.Config
	objs *correlate.Objects
	// The kernel's conntrack state (conntrackinput.go).
	ct      *conntrack.Table
	stats   *ConntrackStatsRead
	sysctls *conntrack.Sysctls
	err     error
}

// load reads the files, parseWorkers at once: the dumps are parsed while
// the objects decode, several dumps at once. What they hold is
// joined in the order given, and the first error in that order is the one
// returned, so the result is that of reading them one after another.
func (s *inputSet) load() (*Loaded, error) {
	objects := s.objectTasks()
	var tasks []func() loadResult
	for _, name := range s.Dumps {
		tasks = append(tasks, func() loadResult {
			if in, ok := s.stream.parsed(name); ok {
				return loadResult{in: in} // parsed while the node was read
			}
			read := readOptions(s.table).Read
			switch {
			case s.only != nil && s.walk:
				read = func(r io.Reader, source string) (*input.Input, error) {
					return readWalkTargeted(r, source, readOptions(s.table), objects.all)
				}
			case s.only != nil:
				read = func(r io.Reader, source string) (*input.Input, error) {
					return readTargeted(r, source, readOptions(s.table), objects.all)
				}
			}
			in, err := readInput(s, input.KindRuleset, name, read)
			return loadResult{in: in, err: err}
		})
	}
	for _, name := range s.Metrics {
		tasks = append(tasks, func() loadResult {
			m, err := readInput(s, input.KindMetrics, name, metrics.Parse)
			return loadResult{m: m, err: err}
		})
	}
	for _, name := range s.Config {
		tasks = append(tasks, func() loadResult {
			cfg, err := readInput(s, input.KindConfig, name, kpconfig.Parse)
			return loadResult{cfg: cfg, err: err}
		})
	}
	tasks = append(tasks, objects.tasks...)
	tasks = append(tasks, s.conntrackTasks()...)
	l, err := joinResults(runTasks(tasks, parseWorkers()), objects.files)
	if err != nil {
		return nil, err
	}
	s.finishConntrack(l)
	if objects.given != nil {
		l.Objects = objects.given
	}
	if l.Config == nil && l.Objects != nil {
		l.Config = collect.KubeProxyConfig(l.Objects)
	}
	kernel := l.Conntrack != nil || l.Sysctls != nil || len(l.ConntrackStats) > 0
	if len(l.Ruleset.IPTables) == 0 && len(l.Ruleset.NFTables) == 0 && !l.Ruleset.HasIPVS() && !l.Ruleset.HasIPSets() && !(s.kernelOnly && kernel) {
		return nil, fmt.Errorf("the inputs hold no ruleset (only metrics or kernel state?): pass an iptables-save or nft dump with --from-dump")
	}
	return l, nil
}

// parseWorkers is how many files are parsed at once: every core busy, and
// no more inputs in memory half-parsed than that (a parse costs several
// times its input while it runs).
func parseWorkers() int { return runtime.GOMAXPROCS(0) + 1 }

// runTasks runs tasks, at most workers at once, started in the order
// given; result i is task i's. A task may wait on a sync.Once another runs
// (objects.all), never on a task not started: each runs on its caller.
func runTasks(tasks []func() loadResult, workers int) []loadResult {
	results := make([]loadResult, len(tasks))
	slots := make(chan struct{}, max(workers, 1))
	var wg sync.WaitGroup
	for i, task := range tasks {
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer func() { <-slots; wg.Done() }()
			results[i] = task()
		}()
	}
	wg.Wait()
	return results
}

// objectReads are the objects of a load: given (already read, narrowed to
// the one Service when the read is), or read from files, each on a task
// of its own.
type objectReads struct {
	given *correlate.Objects
	// all is every object, once read (nil on an error: the tasks report it).
	all   func() *correlate.Objects
	tasks []func() loadResult
	files int
}

func (s *inputSet) objectTasks() objectReads {
	if s.objects != nil {
		given := s.objects
		all := func() *correlate.Objects { return given }
		if s.only != nil {
			// One Service's: small, and read by every dump's filter.
			given = given.OnlyService(*s.only)
			given.Warm()
			return objectReads{given: given, all: all}
		}
		// Joined while the dumps parse, which do not read them.
		warm := func() loadResult { given.Warm(); return loadResult{} }
		return objectReads{given: given, all: all, tasks: []func() loadResult{warm}}
	}
	reads := make([]func() (*correlate.Objects, error), len(s.Objects))
	for i, name := range s.Objects {
		reads[i] = sync.OnceValues(func() (*correlate.Objects, error) {
			return readInput(s, input.KindObjects, name, s.objectsReader(s.only))
		})
	}
	o := objectReads{files: len(reads)}
	o.all = sync.OnceValue(func() *correlate.Objects {
		all := &correlate.Objects{}
		for _, read := range reads {
			objs, err := read()
			if err != nil {
				return nil // reported by the objects' own task
			}
			all.Add(objs)
		}
		all.Warm() // several dumps filter against it at once
		return all
	})
	for _, read := range reads {
		o.tasks = append(o.tasks, func() loadResult {
			objs, err := read()
			if err == nil && len(reads) == 1 {
				objs.ServicePorts() // joined here, while the dumps parse
			}
			return loadResult{objs: objs, err: err}
		})
	}
	return o
}

// joinResults joins what the files held, in the order given: the first
// error wins; the last configuration wins; metrics of the dumps come
// first. objectFiles is how many objects files were read.
func joinResults(results []loadResult, objectFiles int) (*Loaded, error) {
	l := &Loaded{Ruleset: &inspect.Ruleset{}}
	var dumpMetrics, fileMetrics []*metrics.Metrics
	for _, r := range results {
		switch {
		case r.err != nil:
			return nil, r.err
		case r.in != nil:
			if r.in.Ruleset != nil {
				l.Ruleset.Merge(r.in.Ruleset)
			}
			if r.in.Metrics != nil {
				dumpMetrics = append(dumpMetrics, r.in.Metrics)
			}
		case r.m != nil:
			fileMetrics = append(fileMetrics, r.m)
		case r.cfg != nil:
			l.Config = r.cfg
		case r.ct != nil || r.stats != nil || r.sysctls != nil:
			l.addConntrack(r)
		case r.objs != nil:
			switch {
			case objectFiles == 1:
				l.Objects = r.objs // with its service ports
			case l.Objects == nil:
				l.Objects = &correlate.Objects{}
				fallthrough
			default:
				l.Objects.Add(r.objs)
			}
		}
	}
	l.Metrics = append(dumpMetrics, fileMetrics...)
	return l, nil
}

// readInput opens name and reads it with read, after checking that it
// holds what its flag reads (want): a file given to the wrong flag says
// which flag reads it ("objects.json: this file is an iptables dump
// (iptables-save): pass it with --from-dump").
func readInput[T any](s *inputSet, want input.Kind, name string, read func(io.Reader, string) (T, error)) (T, error) {
	var zero T
	if st, err := os.Stat(name); err == nil && st.IsDir() {
		return zero, fmt.Errorf("%s is a directory: pass a bundle's folder with --from-bundle, and files with %s", name, want.Flag())
	}
	rc, src, err := s.open(name)
	if err != nil {
		return zero, err
	}
	defer rc.Close()
	r, err := input.Expect(rc, src, want)
	if err != nil {
		return zero, err
	}
	return read(r, src)
}

// sweepOfNodeBundle is the sweep folder a node's bundle DIR/nodes/NODE
// belongs to, or "".
func sweepOfNodeBundle(bundle string) string {
	clean := filepath.Clean(bundle)
	nodes := filepath.Dir(clean)
	if filepath.Base(nodes) != "nodes" {
		return ""
	}
	if dir := filepath.Dir(nodes); collect.IsSweepDir(dir) {
		return dir
	}
	return ""
}
