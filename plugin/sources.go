package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/diagnose"
	"github.com/proxyrules/kubectl-proxyrules/inspect"
	"github.com/proxyrules/kubectl-proxyrules/inspect/input"
	"github.com/proxyrules/kubectl-proxyrules/inspect/kpconfig"
	"github.com/proxyrules/kubectl-proxyrules/inspect/metrics"
	"github.com/proxyrules/kubectl-proxyrules/plugin/collect"
)

// InputOptions are the inputs every analysis command reads: a node read
// live through a debug pod (--node alone), a bundle written by `collect`,
// or saved dumps, API objects and metrics. Formats are detected, not
// declared.
type InputOptions struct {
	Dumps   []string
	Objects []string
	Metrics []string
	Config  []string
	Bundles []string
	Node    string
	Live    LiveOptions
	// At is --at: the time ages are judged against; at is it parsed (zero
	// when not given).
	At string
	at time.Time

	In     io.Reader // stdin, for "-"
	ErrOut io.Writer // progress and warnings

	// ServiceNamespace/ServiceName, set by explain, let a live read fetch
	// only that Service's chains where that is faster.
	ServiceNamespace, ServiceName string

	kube *genericclioptions.ConfigFlags
	cmd  *cobra.Command
	// collected is the manifest of the bundle being read (live or
	// --from-bundle), on Load's copy.
	collected *collect.Manifest
	// noTargeting reads everything even for explain (tests compare the
	// targeted path with it).
	noTargeting bool
}

// LiveOptions are the flags of live collection.
type LiveOptions struct {
	Via            string
	Image          string
	DebugNamespace string
	StartTimeout   time.Duration
	Deadline       time.Duration
	Reader         string
	MetricsPort    int
}

// AddFlags registers the input flags on cmd; kube selects the cluster for
// live collection.
func (o *InputOptions) AddFlags(cmd *cobra.Command, kube *genericclioptions.ConfigFlags) {
	o.cmd, o.kube = cmd, kube
	fs := cmd.Flags()
	fs.StringVar(&o.Node, "node", "", "the node to read, live through a short-lived debug pod; with --from-dump, the node the dump comes from (traffic policies depend on it)")
	fs.StringArrayVar(&o.Bundles, "from-bundle", nil, "read a bundle written by \"collect -d\" (a folder or .tar.gz) instead of the cluster")
	fs.StringArrayVar(&o.Dumps, "from-dump", nil, "read a saved ruleset (iptables-save, ip6tables-save, nft list ruleset, nft -j list ruleset, knftables dump) or kube-proxy metrics; repeatable; - reads stdin")
	fs.StringArrayVar(&o.Objects, "from-objects", nil, "read Services and EndpointSlices saved with \"kubectl get services,endpointslices -A -o json\" (or -o yaml); repeatable")
	fs.StringArrayVar(&o.Metrics, "from-metrics", nil, "read kube-proxy's /metrics saved from the node (curl 127.0.0.1:10249/metrics); repeatable")
	fs.StringArrayVar(&o.Config, "from-config", nil, "read kube-proxy's configuration: its /configz JSON, a KubeProxyConfiguration file, or the kube-proxy ConfigMap (-o yaml or json)")
	fs.StringVar(&o.At, "at", "", "judge ages as of this time (RFC 3339 or Unix seconds), e.g. when the metrics were saved; default: when the node was read (live or the bundle's collectedAt), else the newest timestamp in the metrics")
	o.Live.AddFlags(cmd)
}

// Complete takes the streams and reads --at.
func (o *InputOptions) Complete(in io.Reader, errOut io.Writer) error {
	o.In, o.ErrOut = in, errOut
	var err error
	o.at, err = parseAt(o.At)
	return err
}

// AddFlags registers the live collection flags.
func (l *LiveOptions) AddFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&l.Via, "via", collect.ViaAuto, "how to reach the node: debug-pod (a short-lived pod on the node), kube-proxy (exec into its kube-proxy pod), or auto (what your RBAC allows, preferring the debug pod)")
	fs.StringVar(&l.Image, "image", "", "debug pod image (needs sleep, iptables and nft); default: the node's own kube-proxy image, already cached there")
	fs.StringVar(&l.DebugNamespace, "debug-namespace", "default", "namespace of the debug pod (Pod Security must allow the privileged level there)")
	fs.DurationVar(&l.StartTimeout, "pod-timeout", 2*time.Minute, "how long to wait for the debug pod to run")
	fs.DurationVar(&l.Deadline, "pod-deadline", 10*time.Minute, "activeDeadlineSeconds of the debug pod: the kubelet stops it after this even if the plugin is killed")
	fs.StringVar(&l.Reader, "reader", collect.ReaderAuto, "how to read whole iptables-nft tables: save (iptables-nft-save, with rule comments), nft (nft list table, no comments), or auto (save, then nft if the save fails)")
	fs.IntVar(&l.MetricsPort, "metrics-port", 0, "kube-proxy's metrics port on the node's loopback; default: from metricsBindAddress in kube-proxy's ConfigMap, else 10249")
	_ = cmd.RegisterFlagCompletionFunc("via", cobra.FixedCompletions([]string{collect.ViaAuto, collect.ViaDebugPod, collect.ViaKubeProxy}, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("reader", cobra.FixedCompletions(collect.Readers, cobra.ShellCompDirectiveNoFileComp))
}

// Validate checks the live collection flags.
func (l *LiveOptions) Validate() error {
	switch l.Via {
	case collect.ViaAuto, collect.ViaDebugPod, collect.ViaKubeProxy:
	default:
		return fmt.Errorf("--via must be auto, debug-pod or kube-proxy, not %q", l.Via)
	}
	switch l.Reader {
	case collect.ReaderAuto, collect.ReaderSave, collect.ReaderNFT:
	default:
		return fmt.Errorf("--reader must be auto, save or nft, not %q", l.Reader)
	}
	if l.Deadline < 30*time.Second {
		return fmt.Errorf("--pod-deadline must be at least 30s")
	}
	return nil
}

// live says whether the node is read through the cluster.
func (o *InputOptions) live() bool {
	return len(o.Dumps) == 0 && len(o.Bundles) == 0 && o.Node != ""
}

// Validate checks the flags.
func (o *InputOptions) Validate() error {
	if len(o.Dumps) == 0 && len(o.Bundles) == 0 && o.Node == "" {
		return fmt.Errorf("which node? Pass --node NAME to read it through the cluster, or --from-bundle DIR / --from-dump FILE to read a saved one")
	}
	if len(o.Dumps) > 0 && len(o.Bundles) > 0 {
		return fmt.Errorf("--from-dump and --from-bundle do not mix: a bundle holds its own dumps")
	}
	if err := o.Live.Validate(); err != nil {
		return err
	}
	stdin := 0
	for _, d := range append(append(append(append([]string{}, o.Dumps...), o.Objects...), o.Metrics...), o.Config...) {
		if d == "-" {
			stdin++
		}
	}
	if stdin > 1 {
		return fmt.Errorf("only one input can be read from stdin (-)")
	}
	return nil
}

// Loaded is what the inputs held.
type Loaded struct {
	Ruleset *inspect.Ruleset
	Metrics []*metrics.Metrics
	Objects *correlate.Objects // nil when no --from-objects
	Config  *kpconfig.Config
	// Collected says how the node was read (live or --from-bundle).
	Collected *collect.Manifest
	// Node is the diagnosis input: the above, the node's name and --at.
	Node *diagnose.Node
}

func (o *InputOptions) open(name string) (io.ReadCloser, string, error) {
	if name == "-" {
		in := o.In
		if in == nil {
			in = os.Stdin
		}
		return io.NopCloser(in), "<stdin>", nil
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, name, err
	}
	return f, name, nil
}

// Load reads every source: the node through the cluster when --node
// comes alone, else the bundles and files given.
func (o *InputOptions) Load() (*Loaded, error) {
	bundles := o.Bundles
	if o.live() {
		dir, err := os.MkdirTemp("", "proxyrules-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		if _, err := o.Collect(dir); err != nil {
			return nil, err
		}
		bundles = []string{dir}
	}
	// The bundles' files join the files given, in a copy: Load can run again.
	src := *o
	src.Dumps, src.Metrics, src.Config, src.Objects = clip(o.Dumps), clip(o.Metrics), clip(o.Config), clip(o.Objects)
	userObjects := len(o.Objects) > 0
	for _, name := range bundles {
		b, err := collect.OpenBundle(name)
		if err != nil {
			return nil, err
		}
		defer b.Close()
		src.addBundle(b, userObjects)
	}
	if o.Node == "" {
		o.Node = src.Node
	}
	l, err := src.load()
	if err != nil {
		return nil, err
	}
	l.Collected = src.collected
	l.Node = &diagnose.Node{Name: o.Node, Ruleset: l.Ruleset, Metrics: l.Metrics, Objects: l.Objects, Config: l.Config}
	if l.Collected != nil {
		l.Node.CollectionNotes = l.Collected.Warnings
		if l.Collected.Scope != "" && l.Collected.Scope != "full" {
			l.Node.Scope = l.Collected.Scope
		}
	}
	l.Node.At, l.Node.AtSource = o.evidenceTime(l)
	if l.Node.Name == "" {
		// Offline without --node: the dump's Local-policy chains say
		// whose endpoints they hold.
		if id := diagnose.IdentifyNode("", l.Node); id.Inferred != "" {
			l.Node.Name, l.Node.NameEvidence = id.Inferred, id.Evidence
		}
	}
	for _, d := range l.Ruleset.Dumps {
		for _, msg := range d.Warnings {
			fmt.Fprintf(o.errOut(), "warning: %s: %s\n", d.Source, msg)
		}
	}
	return l, nil
}

// evidenceTime is when the evidence was taken, which ages are judged
// against: --at when given, else when the node was read (live now, or the
// bundle's collectedAt), else the newest timestamp the metrics carry (a
// lower bound of when they were scraped).
func (o *InputOptions) evidenceTime(l *Loaded) (time.Time, string) {
	switch {
	case !o.at.IsZero():
		return o.at, "--at"
	case o.live() && l.Collected != nil:
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

func (o *InputOptions) errOut() io.Writer {
	if o.ErrOut == nil {
		return os.Stderr
	}
	return o.ErrOut
}

func clip(s []string) []string { return s[:len(s):len(s)] }

// addBundle adds a bundle's files to the inputs. Objects given with
// --from-objects win over the bundle's.
func (o *InputOptions) addBundle(b *collect.Bundle, userObjects bool) {
	m := b.Manifest
	o.collected = &m
	if o.Node == "" {
		o.Node = m.Node
	}
	for _, f := range m.Files {
		if f.Bytes == 0 {
			continue
		}
		switch f.Kind {
		case collect.KindRuleset:
			o.Dumps = append(o.Dumps, b.Path(f))
		case collect.KindMetrics:
			o.Metrics = append(o.Metrics, b.Path(f))
		case collect.KindConfig:
			o.Config = append(o.Config, b.Path(f))
		case collect.KindObjects:
			if !userObjects {
				o.Objects = append(o.Objects, b.Path(f))
			}
		}
	}
}

// Context is the command's context: cancelled on Ctrl-C (see cmd main).
func (o *InputOptions) Context() context.Context {
	if o.cmd != nil && o.cmd.Context() != nil {
		return o.cmd.Context()
	}
	return context.Background()
}

// Collect reads the node (--node) through the cluster into dir.
func (o *InputOptions) Collect(dir string) (*collect.Manifest, error) {
	if o.kube == nil {
		return nil, fmt.Errorf("no cluster access configured")
	}
	cfg, err := o.kube.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("cannot reach the cluster: %w", err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	errOut := o.ErrOut
	if errOut == nil {
		errOut = os.Stderr
	}
	progress := &collect.Progress{Warn: errOut, Started: time.Now()}
	if f, ok := errOut.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		progress.W = errOut
	}
	var objs *correlate.Objects
	if len(o.Objects) > 0 {
		// --from-objects with --node: the saved objects, the live rules.
		objs = &correlate.Objects{}
		for _, name := range o.Objects {
			rc, src, err := o.open(name)
			if err != nil {
				return nil, err
			}
			more, err := correlate.ReadObjects(rc, src)
			rc.Close()
			if err != nil {
				return nil, err
			}
			objs.Add(more)
		}
	}
	c := &collect.Collector{
		Client: client, Runner: &collect.RemoteRunner{Config: cfg, Client: client}, Progress: progress, Dir: dir,
		Options: collect.Options{
			Node: o.Node, Via: o.Live.Via, Image: o.Live.Image, DebugNamespace: o.Live.DebugNamespace,
			StartTimeout: o.Live.StartTimeout, Deadline: o.Live.Deadline, Reader: o.Live.Reader,
			ServiceNamespace: o.ServiceNamespace, ServiceName: o.ServiceName, Objects: objs, MetricsPort: o.Live.MetricsPort,
		},
	}
	return c.Collect(o.Context())
}

// load reads the files, each on a goroutine of its own: the dumps are
// parsed while the objects decode, several dumps at once. What they hold is
// joined in the order given, and the first error in that order is the one
// returned, so the result is that of reading them one after another.
func (o *InputOptions) load() (*Loaded, error) {
	type result struct {
		in   *input.Input
		m    *metrics.Metrics
		cfg  *kpconfig.Config
		objs *correlate.Objects
		err  error
	}
	var tasks []func() result
	// explain reads only its Service's objects and chains where that gives
	// the same answer (targeted.go): the dumps wait for the objects then.
	only := o.targetService()
	objectTasks := make([]func() (*correlate.Objects, error), len(o.Objects))
	for i, name := range o.Objects {
		objectTasks[i] = sync.OnceValues(func() (*correlate.Objects, error) {
			return readInput(o, name, func(r io.Reader, source string) (*correlate.Objects, error) {
				if only != nil {
					return correlate.ReadServiceObjects(r, source, *only)
				}
				return correlate.ReadObjects(r, source)
			})
		})
	}
	allObjects := sync.OnceValue(func() *correlate.Objects {
		all := &correlate.Objects{}
		for _, read := range objectTasks {
			objs, err := read()
			if err != nil {
				return nil // reported by the objects' own task
			}
			all.Add(objs)
		}
		return all
	})
	for _, name := range o.Dumps {
		tasks = append(tasks, func() result {
			read := input.Read
			if only != nil {
				read = func(r io.Reader, source string) (*input.Input, error) { return readTargeted(r, source, allObjects) }
			}
			in, err := readInput(o, name, read)
			return result{in: in, err: err}
		})
	}
	for _, name := range o.Metrics {
		tasks = append(tasks, func() result {
			m, err := readInput(o, name, metrics.Parse)
			return result{m: m, err: err}
		})
	}
	for _, name := range o.Config {
		tasks = append(tasks, func() result {
			cfg, err := readInput(o, name, kpconfig.Parse)
			return result{cfg: cfg, err: err}
		})
	}
	for _, read := range objectTasks {
		tasks = append(tasks, func() result {
			objs, err := read()
			if err == nil && len(objectTasks) == 1 {
				objs.ServicePorts() // joined here, while the dumps parse
			}
			return result{objs: objs, err: err}
		})
	}
	results := make([]result, len(tasks))
	var wg sync.WaitGroup
	for i, task := range tasks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = task()
		}()
	}
	wg.Wait()

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
			l.Config = r.cfg // the last one wins
		case r.objs != nil:
			switch {
			case len(objectTasks) == 1:
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
	if l.Config == nil && l.Objects != nil {
		l.Config = configFromObjects(l.Objects)
	}
	if len(l.Ruleset.IPTables) == 0 && len(l.Ruleset.NFTables) == 0 {
		return nil, fmt.Errorf("the inputs hold no ruleset (only metrics?): pass an iptables-save or nft dump with --from-dump")
	}
	return l, nil
}

// readInput opens name and reads it with read.
func readInput[T any](o *InputOptions, name string, read func(io.Reader, string) (T, error)) (T, error) {
	rc, src, err := o.open(name)
	if err != nil {
		var zero T
		return zero, err
	}
	defer rc.Close()
	return read(rc, src)
}

// configFromObjects reads kube-proxy's configuration from the kube-system
// kube-proxy ConfigMap when the objects include it.
func configFromObjects(objs *correlate.Objects) *kpconfig.Config {
	for _, o := range objs.Other {
		cm, ok := o.(*corev1.ConfigMap)
		if !ok || cm.Namespace != "kube-system" || cm.Name != "kube-proxy" {
			continue
		}
		cm.APIVersion, cm.Kind = "v1", "ConfigMap"
		data, err := json.Marshal(cm)
		if err != nil {
			continue
		}
		if cfg, err := kpconfig.Parse(bytes.NewReader(data), "configmap/kube-system/kube-proxy"); err == nil {
			return cfg
		}
	}
	return nil
}
