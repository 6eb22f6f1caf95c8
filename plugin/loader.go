package plugin

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/term"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/diagnose"
	"github.com/proxyrules/kubectl-proxyrules/inspect"
	"github.com/proxyrules/kubectl-proxyrules/inspect/conntrack"
	"github.com/proxyrules/kubectl-proxyrules/inspect/kpconfig"
	"github.com/proxyrules/kubectl-proxyrules/inspect/metrics"
	"github.com/proxyrules/kubectl-proxyrules/plugin/collect"
)

// A Loader reads Requests: the node through the cluster (a debug pod or
// kube-proxy's own pod), or bundles and saved files, within the caps on
// their sizes. It keeps nothing of one load for the next.
type Loader struct {
	// Kube selects the cluster for live reads; nil offline.
	Kube *genericclioptions.ConfigFlags
	Live LiveOptions
	// Caps are the caps on input sizes; nil is the defaults.
	Caps inputCaps
	// In is read for "-" (os.Stdin when nil); ErrOut gets progress and
	// warnings (os.Stderr when nil).
	In     io.Reader
	ErrOut io.Writer
	// Timings, when set, records the phases of each load (--timings).
	Timings *collect.Timings

	// guard checks once per run, for all the nodes of a sweep, that a
	// policy guards the debug namespace.
	guardOnce sync.Once
	guard     *collect.GuardCheck
}

// newLoader is the loader of the flags' live options and caps; timings,
// when not nil, records the phases of its loads (--timings).
func newLoader(f *InputFlags, kube *genericclioptions.ConfigFlags, in io.Reader, errOut io.Writer, timings *collect.Timings) (*Loader, error) {
	caps, err := parseCaps(f.MaxSize)
	if err != nil {
		return nil, err
	}
	return &Loader{Kube: kube, Live: f.Live, Caps: caps, In: in, ErrOut: errOut, Timings: timings}, nil
}

// Loaded is what the inputs held.
type Loaded struct {
	Ruleset *inspect.Ruleset
	Metrics []*metrics.Metrics
	Objects *correlate.Objects // nil when no --from-objects
	Config  *kpconfig.Config
	// Conntrack is the node's conntrack table (live and in bundles: only
	// the entries of Service addresses and NodePorts, capped);
	// ConntrackStats its counters, in time order; Sysctls the kernel
	// settings Services depend on. Nil when not read (conntrackinput.go).
	Conntrack      *conntrack.Table
	ConntrackStats []*ConntrackStatsRead
	Sysctls        *conntrack.Sysctls
	// Collected says how the node was read (live or --from-bundle).
	Collected *collect.Manifest
	// Narrowed: only the requested Service's objects and chains were
	// read (Request.Service, offline); reading everything may say more.
	Narrowed bool
	// Node is the diagnosis input: the above, the node's name and --at.
	Node *diagnose.Node
}

// Load reads every source of req: the node through the cluster when req
// names a node and no file, else the bundles and files given.
func (ld *Loader) Load(ctx context.Context, req Request) (*Loaded, error) {
	if req.ObjectsOnly && len(req.Files.Dumps) == 0 && len(req.Files.Bundles) == 0 && req.Node == "" {
		return ld.loadObjectsOnly(ctx, req)
	}
	bundles := req.Files.Bundles
	var stream *streamParse
	if req.live() {
		dir, err := collect.MkdirTemp("", "proxyrules-")
		if err != nil {
			return nil, err
		}
		defer collect.RemoveTemp(dir)
		stream = newStreamParse(dir, req.Table, ld.inputSet(req).caps[capDump])
		_, objs, err := ld.collect(ctx, req, dir, stream)
		stream.stop()
		if err != nil {
			return nil, err
		}
		req.Objects = objs // decoded once, by the collector
		bundles = []string{dir}
	}
	set := ld.inputSet(req).parsedAsRead(stream)
	bundles, err := set.sweepFolders(bundles)
	if err != nil {
		return nil, err
	}
	var opened []*collect.Bundle
	closeBundles := func() {
		for _, b := range opened {
			b.Close()
		}
	}
	for _, name := range bundles {
		b, err := collect.OpenBundle(ctx, name, set.caps.bundleLimits(set.haveObjects()))
		if err != nil {
			closeBundles()
			return nil, misplacedBundle(name, set.caps.explain(err))
		}
		opened = append(opened, b)
		set.addBundle(b)
	}
	if !req.live() {
		set.narrowTo(req.Service)
	}
	// The parse owns the bundles: a Ctrl-C returns at once and leaves it
	// reading them (the interrupted command removes the temporary files).
	l, err := untilDone(ctx, func() (*Loaded, error) {
		defer closeBundles()
		defer ld.Timings.Start(collect.PhaseParse)(0)
		return set.load()
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, set.caps.explain(err)
	}
	l.Narrowed = set.only != nil
	ld.describeNode(req, set, l)
	return l, nil
}

// describeNode makes l's diagnosis input: the node, its addresses, the
// time ages are judged against and the Services selected.
func (ld *Loader) describeNode(req Request, set *inputSet, l *Loaded) {
	l.Collected = set.collected
	l.Node = &diagnose.Node{Name: set.node, Ruleset: l.Ruleset, Metrics: l.Metrics, Objects: l.Objects, Config: l.Config, Addresses: req.NodeIPs}
	if l.Collected != nil {
		l.Node.CollectionNotes = l.Collected.Warnings
		if l.Collected.Scope != "" && l.Collected.Scope != "full" {
			l.Node.Scope = l.Collected.Scope
		}
	}
	if l.Collected != nil {
		l.Node.KubeProxyVersion = collect.KubeProxyVersion(l.Collected.Image)
	}
	if l.Conntrack != nil || len(l.ConntrackStats) > 0 || l.Sysctls != nil {
		in := conntrackInputs(l)
		l.Node.Kernel = &in
	}
	l.Node.At, l.Node.AtSource = evidenceTime(req, l)
	l.Node.Select = req.Select.filter(l.Objects)
	if l.Node.Name == "" {
		// Offline without --node: the dump's Local-policy chains say
		// whose endpoints they hold.
		if id := diagnose.IdentifyNode("", l.Node); id.Inferred != "" {
			l.Node.Name, l.Node.NameEvidence = id.Inferred, id.Evidence
		}
	}
	for _, d := range l.Ruleset.Dumps {
		for _, msg := range d.Warnings {
			fmt.Fprintf(ld.errOut(), "warning: %s: %s\n", escapeData(d.Source), escapeData(msg))
		}
	}
}

// Objects are the objects req names (already read, or files), else the
// cluster's Services and EndpointSlices.
func (ld *Loader) Objects(ctx context.Context, req Request) (*correlate.Objects, error) {
	if req.Objects != nil {
		return req.Objects, nil
	}
	if len(req.Files.Objects) > 0 {
		return untilDone(ctx, ld.inputSet(req).readObjects)
	}
	client, _, err := ld.client()
	if err != nil {
		return nil, err
	}
	defer ld.Timings.Start(collect.PhaseListObjects)(0)
	return collect.ListObjects(ctx, client)
}

// ServiceObjects are one Service's objects read from the cluster (only it
// and its EndpointSlices), or nil when it is not there.
func (ld *Loader) ServiceObjects(ctx context.Context, namespace, name string) (*correlate.Objects, error) {
	client, _, err := ld.client()
	if err != nil {
		return nil, err
	}
	defer ld.Timings.Start(collect.PhaseListObjects)(0)
	return collect.ListServiceObjects(ctx, client, namespace, name)
}

// loadObjectsOnly reads the objects and no node, no rules.
func (ld *Loader) loadObjectsOnly(ctx context.Context, req Request) (*Loaded, error) {
	objs, err := ld.Objects(ctx, req)
	if err != nil {
		return nil, err
	}
	l := &Loaded{Ruleset: &inspect.Ruleset{}, Objects: objs}
	l.Node = &diagnose.Node{Ruleset: l.Ruleset, Objects: l.Objects}
	return l, nil
}

// Collect reads the node req names through the cluster into dir.
func (ld *Loader) Collect(ctx context.Context, req Request, dir string) (*collect.Manifest, error) {
	man, _, err := ld.collect(ctx, req, dir, nil)
	return man, err
}

// collect is Collect, with the objects of the read: req's, or those the
// collector listed (and wrote into dir); tee, when set, sees the rules
// as they stream in.
func (ld *Loader) collect(ctx context.Context, req Request, dir string, tee collect.RulesTee) (*collect.Manifest, *correlate.Objects, error) {
	client, cfg, err := ld.client()
	if err != nil {
		return nil, nil, err
	}
	objs := req.Objects
	if objs == nil && len(req.Files.Objects) > 0 {
		// --from-objects with --node: the saved objects, the live rules.
		if objs, err = untilDone(ctx, ld.inputSet(req).readObjects); err != nil {
			return nil, nil, err
		}
	}
	opts := collect.Options{
		Node: req.Node, Via: ld.Live.Via, Image: ld.Live.Image, DebugNamespace: ld.Live.DebugNamespace,
		StartTimeout: ld.Live.StartTimeout, Deadline: ld.Live.Deadline, Reader: ld.Live.Reader,
		Objects: objs, MetricsPort: ld.Live.MetricsPort, Fleet: req.Fleet,
		IncludeControlPlane: ld.Live.IncludeControlPlane, Guard: ld.guardCheck(), Kernel: req.Kernel,
		KernelTable: req.KernelTable, StatsInterval: req.StatsInterval,
	}
	if req.Service != nil {
		opts.ServiceNamespace, opts.ServiceName = req.Service.Namespace, req.Service.Name
	}
	c := &collect.Collector{Client: client, Runner: &collect.RemoteRunner{Config: cfg, Client: client},
		Progress: ld.progress(req.Quiet), Dir: dir, Options: opts, Timings: ld.Timings}
	if tee != nil {
		c.Tee = tee
	}
	man, err := c.Collect(ctx)
	if err != nil {
		return nil, nil, err
	}
	if objs == nil {
		objs = c.Listed
	}
	return man, objs, nil
}

func (ld *Loader) guardCheck() *collect.GuardCheck {
	ld.guardOnce.Do(func() { ld.guard = &collect.GuardCheck{Skip: ld.Live.SkipPolicyCheck} })
	return ld.guard
}

// progress is where a live read reports its steps: stderr when it is a
// terminal (warnings always), nowhere when quiet.
func (ld *Loader) progress(quiet bool) *collect.Progress {
	if quiet {
		return &collect.Progress{Warn: io.Discard, Started: time.Now()}
	}
	// Steps and warnings quote names and errors from the cluster and the
	// node: escaped, a line each.
	errOut := ld.errOut()
	p := &collect.Progress{Warn: dataLines{errOut}, Started: time.Now()}
	if f, ok := errOut.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.W = dataLines{errOut}
	}
	return p
}

// client is the cluster's client, from the kubectl flags.
func (ld *Loader) client() (kubernetes.Interface, *rest.Config, error) {
	if ld.Kube == nil {
		return nil, nil, fmt.Errorf("no cluster access configured")
	}
	cfg, err := ld.Kube.ToRESTConfig()
	if err != nil {
		return nil, nil, fmt.Errorf("cannot reach the cluster: %w", err)
	}
	// Protobuf for the built-in types the plugin reads: a big cluster's
	// Services and EndpointSlices are encoded and decoded some times
	// faster than as JSON. (Exec and port-forward keep cfg.)
	pcfg := rest.CopyConfig(cfg)
	pcfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	pcfg.ContentType = "application/vnd.kubernetes.protobuf"
	client, err := kubernetes.NewForConfig(pcfg)
	return client, cfg, err
}

func (ld *Loader) errOut() io.Writer {
	if ld.ErrOut == nil {
		return os.Stderr
	}
	return ld.ErrOut
}

// evidenceTime is when the evidence was taken, which ages are judged
// against: --at when given, else when the node was read (live now, or the
// bundle's collectedAt), else the newest timestamp the metrics carry (a
// lower bound of when they were scraped).
func evidenceTime(req Request, l *Loaded) (time.Time, string) {
	switch {
	case !req.At.IsZero():
		return req.At, "--at"
	case req.live() && l.Collected != nil:
		return l.Collected.CollectedAt, "read live"
	case l.Collected != nil && !l.Collected.CollectedAt.IsZero():
		return l.Collected.CollectedAt, "the bundle's collectedAt"
	}
	var newest time.Time
	for _, m := range l.Metrics {
		if t, ok := m.Newest(); ok && t.After(newest) {
			newest = t
		}
	}
	if !newest.IsZero() {
		return newest, "the newest timestamp in the metrics, a lower bound: ages are at least these"
	}
	return time.Time{}, ""
}
