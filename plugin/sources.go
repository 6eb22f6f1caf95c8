package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/diagnose"
	"github.com/proxyrules/kubectl-proxyrules/inspect"
	"github.com/proxyrules/kubectl-proxyrules/inspect/input"
	"github.com/proxyrules/kubectl-proxyrules/inspect/iptables"
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
	// objectsOnly: no node is read (map CHAIN with no dump: the names are
	// recomputed from the objects, the cluster's when none are given).
	objectsOnly bool
	// Nodes are --node as given; Node is the one node read (Nodes[0] when
	// one is given, else the bundle's).
	Nodes []string
	// In a sweep: the node's inputs read quietly, with the sweep's context
	// and what it read once for every node.
	sweep bool
	quiet bool
	ctx   context.Context
	fleet *collect.Fleet
	// Table is --table: the iptables table of pasted rules without one.
	Table string
	// NodeIPs is --node-ip: the node's addresses, when no Node object
	// gives them.
	NodeIPs []string
	// AllNamespaces (-A) and Selector (-l) select Services, with -n.
	AllNamespaces bool
	Selector      string
	// At is --at: the time ages are judged against; at is it parsed (zero
	// when not given).
	At string
	at time.Time

	In     io.Reader // stdin, for "-"
	ErrOut io.Writer // progress and warnings

	// ServiceNamespace/ServiceName, set by explain, let a live read fetch
	// only that Service's chains where that is faster.
	ServiceNamespace, ServiceName string

	// MaxSize is --max-input-size: KIND=SIZE,... caps (see inputCaps).
	MaxSize string

	kube *genericclioptions.ConfigFlags
	cmd  *cobra.Command
	// preloaded are objects a command already read (explain resolves the
	// Service before reading the node); a live read uses them.
	preloaded *correlate.Objects
	// collected is the manifest of the bundle being read (live or
	// --from-bundle), on Load's copy.
	collected *collect.Manifest
	// bundleFiles are the inputs that are files of a bundle, by the path
	// Load put in the lists: open reads them through their bundle.
	bundleFiles map[string]bundleFile
	// noTargeting reads everything even for explain (tests compare the
	// targeted path with it).
	noTargeting bool
}

type bundleFile struct {
	bundle *collect.Bundle
	file   collect.BundleFile
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
	fs.StringArrayVar(&o.Nodes, "node", nil, "the node to read, live through a short-lived debug pod (repeated: a sweep of those nodes, where the command sweeps); with --from-dump, the node the dump comes from (traffic policies depend on it); with a sweep folder, one of its nodes")
	fs.StringArrayVar(&o.Bundles, "from-bundle", nil, "read a bundle written by \"collect -d\" (a folder or .tar.gz) instead of the cluster")
	fs.StringArrayVar(&o.Dumps, "from-dump", nil, "read a saved ruleset (iptables-save, iptables -S, iptables -L -n, pasted rule lines, nft list ruleset, nft -j list ruleset, knftables dump) or kube-proxy metrics; repeatable; - reads stdin")
	fs.StringArrayVar(&o.Objects, "from-objects", nil, "read Services and EndpointSlices saved with \"kubectl get services,endpointslices -A -o json\" (or -o yaml); repeatable")
	fs.StringArrayVar(&o.Metrics, "from-metrics", nil, "read kube-proxy's /metrics saved from the node (curl 127.0.0.1:10249/metrics); repeatable")
	fs.StringArrayVar(&o.Config, "from-config", nil, "read kube-proxy's configuration: its /configz JSON, a KubeProxyConfiguration file, or the kube-proxy ConfigMap (-o yaml or json)")
	fs.StringVar(&o.Table, "table", "", "the iptables table of pasted rules that do not say it (-S, -A lines, -L listings without a *table header or an iptables -t command line): "+strings.Join(iptables.Tables, ", ")+"; default: inferred from the chains")
	_ = cmd.RegisterFlagCompletionFunc("table", cobra.FixedCompletions(iptables.Tables, cobra.ShellCompDirectiveNoFileComp))
	fs.StringVar(&o.At, "at", "", "judge ages as of this time (RFC 3339 or Unix seconds), e.g. when the metrics were saved; default: when the node was read (live or the bundle's collectedAt), else the newest timestamp in the metrics")
	fs.StringVar(&o.MaxSize, "max-input-size", "", "caps on the size of inputs, KIND=SIZE,... (default "+strings.ReplaceAll(defaultCaps.String(), ",", ", ")+"; bundle: the files of one .tar.gz together)")
	o.Live.AddFlags(cmd)
}

// addSelectFlags registers -A and -l; -n is kubectl's.
func (o *InputOptions) addSelectFlags(cmd *cobra.Command) {
	allHelp := "every namespace (the default; -n NAMESPACE for one)"
	if cmd.Name() == "explain" {
		allHelp = "look the Service up in every namespace (with -l, select in every namespace)"
	}
	cmd.Flags().BoolVarP(&o.AllNamespaces, "all-namespaces", "A", false, allHelp)
	cmd.Flags().StringVarP(&o.Selector, "selector", "l", "", "only Services with these labels (e.g. app=web,tier!=db), as kubectl selects")
}

// addNodeIPFlag registers --node-ip, for the commands that walk
// connections through the rules (explain, trace, triage).
func (o *InputOptions) addNodeIPFlag(cmd *cobra.Command) {
	cmd.Flags().StringArrayVar(&o.NodeIPs, "node-ip", nil, "an address of the node (repeatable), when no Node object says (--from-objects with kubectl get nodes): what node ports and local addresses are")
}

// nodeAddresses parses --node-ip.
func (o *InputOptions) nodeAddresses() ([]netip.Addr, error) {
	var out []netip.Addr
	for _, s := range o.NodeIPs {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("--node-ip %q is not an IP address", s)
		}
		out = append(out, a.Unmap())
	}
	return out, nil
}

// namespaceFlag is -n as given on the command line ("" when not given).
func (o *InputOptions) namespaceFlag() string {
	if o.kube != nil && o.kube.Namespace != nil && !o.AllNamespaces {
		return *o.kube.Namespace
	}
	return ""
}

// selectServices is -n and -l as a filter on Services, nil for all.
func (o *InputOptions) selectServices(objs *correlate.Objects) (func(namespace, name string) bool, error) {
	ns := o.namespaceFlag()
	if ns == "" && o.Selector == "" {
		return nil, nil
	}
	sel := labels.Everything()
	if o.Selector != "" {
		var err error
		if sel, err = labels.Parse(o.Selector); err != nil {
			return nil, fmt.Errorf("-l %q: %v", o.Selector, err)
		}
	}
	svcLabels := map[string]map[string]string{}
	if objs != nil {
		for _, s := range objs.Services {
			svcLabels[s.Namespace+"/"+s.Name] = s.Labels
		}
	}
	return func(namespace, name string) bool {
		if ns != "" && namespace != ns {
			return false
		}
		if o.Selector == "" {
			return true
		}
		l, ok := svcLabels[namespace+"/"+name]
		return ok && sel.Matches(labels.Set(l))
	}, nil
}

// Complete takes the streams and reads --at.
func (o *InputOptions) Complete(in io.Reader, errOut io.Writer) error {
	o.In, o.ErrOut = in, errOut
	if len(o.Nodes) == 1 {
		o.Node = o.Nodes[0]
	}
	var err error
	o.at, err = parseAt(o.At)
	return err
}

// AddFlags registers the live collection flags.
func (l *LiveOptions) AddFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&l.Via, "via", collect.ViaAuto, "how to reach the node: debug-pod (a short-lived pod on the node), kube-proxy (exec into its kube-proxy pod), or auto (what your RBAC allows, preferring the debug pod)")
	fs.StringVar(&l.Image, "image", "", "debug pod image (needs sleep, iptables and nft); default: the node's own kube-proxy image, already cached there")
	fs.StringVar(&l.DebugNamespace, "debug-namespace", collect.DefaultDebugNamespace, "namespace of the debug pod: the one \"kubectl apply -f deploy/\" creates, or one whose Pod Security allows the privileged level")
	fs.DurationVar(&l.StartTimeout, "pod-timeout", 2*time.Minute, "how long to wait for the debug pod to run")
	fs.DurationVar(&l.Deadline, "pod-deadline", collect.DefaultPodDeadline, "activeDeadlineSeconds of the debug pod (the kubelet stops it after this even if the plugin is killed), and the most reading the node may take; at most 1h")
	fs.StringVar(&l.Reader, "reader", collect.ReaderAuto, "how to read whole iptables-nft tables: save (iptables-nft-save, with rule comments), nft (nft list table, no comments), or auto (save, then nft if the save fails)")
	fs.IntVar(&l.MetricsPort, "metrics-port", 0, "kube-proxy's metrics port on the node's loopback; default: from metricsBindAddress in kube-proxy's ConfigMap, else 10249")
	groupFlags(cmd, flagGroupLive, "via", "image", "debug-namespace", "pod-timeout", "pod-deadline", "reader", "metrics-port")
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
	if l.Deadline < collect.MinPodDeadline || l.Deadline > collect.MaxPodDeadline {
		return fmt.Errorf("--pod-deadline must be between %s and %s (the admission policy of deploy/ refuses longer-lived pods), not %s", collect.MinPodDeadline, collect.MaxPodDeadline, l.Deadline)
	}
	return nil
}

// live says whether the node is read through the cluster.
func (o *InputOptions) live() bool {
	return len(o.Dumps) == 0 && len(o.Bundles) == 0 && o.Node != ""
}

// Validate checks the flags.
func (o *InputOptions) Validate() error {
	if len(o.Nodes) > 1 && !o.sweep {
		return fmt.Errorf("--node once: this command reads one node")
	}
	if len(o.Dumps) == 0 && len(o.Bundles) == 0 && o.Node == "" && !o.objectsOnly && !o.sweep {
		return fmt.Errorf("which node? Pass --node NAME to read it through the cluster, or --from-bundle DIR / --from-dump FILE to read a saved one")
	}
	if len(o.Dumps) > 0 && len(o.Bundles) > 0 {
		return fmt.Errorf("--from-dump and --from-bundle do not mix: a bundle holds its own dumps")
	}
	if err := o.readOptions().Validate(); err != nil {
		return fmt.Errorf("--table: %w", err)
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

// open opens an input for reading, within the cap on its kind: a file of a
// bundle through the bundle (regular files inside it only), stdin for "-",
// else the file. Reading past the cap is an error that says how to raise it.
func (o *InputOptions) open(name string) (io.ReadCloser, string, error) {
	caps, err := o.inputCaps()
	if err != nil {
		return nil, name, err
	}
	kind := o.kindOf(name)
	var rc io.ReadCloser
	src := name
	switch bf, ok := o.bundleFiles[name]; {
	case ok:
		f, err := bf.bundle.Open(bf.file)
		if err != nil {
			return nil, name, err
		}
		rc = f
	case name == "-":
		in := o.In
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

// Load reads every source: the node through the cluster when --node
// comes alone, else the bundles and files given.
func (o *InputOptions) Load() (*Loaded, error) {
	if o.objectsOnly && len(o.Dumps) == 0 && len(o.Bundles) == 0 && o.Node == "" {
		return o.loadObjectsOnly()
	}
	caps, err := o.inputCaps()
	if err != nil {
		return nil, err
	}
	bundles := o.Bundles
	if o.live() {
		dir, err := collect.MkdirTemp("", "proxyrules-")
		if err != nil {
			return nil, err
		}
		defer collect.RemoveTemp(dir)
		if _, err := o.Collect(dir); err != nil {
			return nil, err
		}
		bundles = []string{dir}
	}
	// The bundles' files join the files given, in a copy: Load can run again.
	src := *o
	src.Dumps, src.Metrics, src.Config, src.Objects = clip(o.Dumps), clip(o.Metrics), clip(o.Config), clip(o.Objects)
	src.bundleFiles = map[string]bundleFile{}
	// A node's bundle inside a sweep folder: the folder's objects with it.
	for _, b := range bundles {
		if sweep := sweepOfNodeBundle(b); sweep != "" && len(src.Objects) == 0 {
			src.Objects = []string{filepath.Join(sweep, collect.SweepObjectsFile)}
		}
	}
	// One node of a sweep folder: its bundle, with the folder's objects.
	if dir := o.sweepDir(); dir != "" && !o.sweep {
		if o.Node == "" {
			return nil, fmt.Errorf("%s is a sweep folder of many nodes: pass --node NAME for one of them, or use a command that sweeps (triage, stale, counts, masq, explain)", dir)
		}
		bundles = slices.DeleteFunc(slices.Clone(bundles), func(b string) bool { return b == dir })
		bundles = append(bundles, collect.NodeBundleDir(dir, o.Node))
		if len(src.Objects) == 0 {
			src.Objects = []string{filepath.Join(dir, collect.SweepObjectsFile)}
		}
	}
	userObjects := len(o.Objects) > 0
	for _, name := range bundles {
		b, err := collect.OpenBundle(o.Context(), name, caps.bundleLimits(userObjects))
		if err != nil {
			return nil, misplacedBundle(name, caps.explain(err))
		}
		defer b.Close()
		src.addBundle(b, userObjects)
	}
	if o.Node == "" {
		o.Node = src.Node
	}
	l, err := src.load()
	if err != nil {
		return nil, caps.explain(err)
	}
	l.Collected = src.collected
	if l.Objects == nil && o.preloaded != nil {
		// Read before the node (explain finds its Service first): the
		// bundle does not hold them again.
		l.Objects = o.preloaded
	}
	l.Node = &diagnose.Node{Name: o.Node, Ruleset: l.Ruleset, Metrics: l.Metrics, Objects: l.Objects, Config: l.Config}
	if l.Node.Addresses, err = o.nodeAddresses(); err != nil {
		return nil, err
	}
	if l.Collected != nil {
		l.Node.CollectionNotes = l.Collected.Warnings
		if l.Collected.Scope != "" && l.Collected.Scope != "full" {
			l.Node.Scope = l.Collected.Scope
		}
	}
	l.Node.At, l.Node.AtSource = o.evidenceTime(l)
	if l.Node.Select, err = o.selectServices(l.Objects); err != nil {
		return nil, err
	}
	if l.Node.Name == "" {
		// Offline without --node: the dump's Local-policy chains say
		// whose endpoints they hold.
		if id := diagnose.IdentifyNode("", l.Node); id.Inferred != "" {
			l.Node.Name, l.Node.NameEvidence = id.Inferred, id.Evidence
		}
	}
	for _, d := range l.Ruleset.Dumps {
		for _, msg := range d.Warnings {
			fmt.Fprintf(o.errOut(), "warning: %s: %s\n", d.Source, sanitize(msg))
		}
	}
	return l, nil
}

// loadObjectsOnly reads the objects given, or the cluster's Services and
// EndpointSlices: no node, no rules.
func (o *InputOptions) loadObjectsOnly() (*Loaded, error) {
	l := &Loaded{Ruleset: &inspect.Ruleset{}}
	if len(o.Objects) > 0 {
		objs, err := o.readObjects()
		if err != nil {
			return nil, err
		}
		l.Objects = objs
	} else {
		client, _, err := o.client()
		if err != nil {
			return nil, err
		}
		if l.Objects, err = collect.ListObjects(o.Context(), client); err != nil {
			return nil, err
		}
	}
	l.Node = &diagnose.Node{Ruleset: l.Ruleset, Objects: l.Objects}
	return l, nil
}

// readObjects reads every --from-objects.
func (o *InputOptions) readObjects() (*correlate.Objects, error) {
	objs := &correlate.Objects{}
	for _, name := range o.Objects {
		more, err := readInput(o, input.KindObjects, name, correlate.ReadObjects)
		if err != nil {
			return nil, err
		}
		objs.Add(more)
	}
	return objs, nil
}

// client is the cluster's client, from the kubectl flags.
func (o *InputOptions) client() (kubernetes.Interface, *rest.Config, error) {
	if o.kube == nil {
		return nil, nil, fmt.Errorf("no cluster access configured")
	}
	cfg, err := o.kube.ToRESTConfig()
	if err != nil {
		return nil, nil, fmt.Errorf("cannot reach the cluster: %w", err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	return client, cfg, err
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
		var list *[]string
		switch f.Kind {
		case collect.KindRuleset:
			list = &o.Dumps
		case collect.KindMetrics:
			list = &o.Metrics
		case collect.KindConfig:
			list = &o.Config
		case collect.KindObjects:
			if userObjects {
				continue
			}
			list = &o.Objects
		default:
			continue
		}
		p := b.Path(f)
		*list = append(*list, p)
		o.bundleFiles[p] = bundleFile{bundle: b, file: f}
	}
}

// Context is the command's context: cancelled on Ctrl-C (see cmd main).
func (o *InputOptions) Context() context.Context {
	if o.ctx != nil {
		return o.ctx
	}
	if o.cmd != nil && o.cmd.Context() != nil {
		return o.cmd.Context()
	}
	return context.Background()
}

// Collect reads the node (--node) through the cluster into dir.
func (o *InputOptions) Collect(dir string) (*collect.Manifest, error) {
	client, cfg, err := o.client()
	if err != nil {
		return nil, err
	}
	errOut := o.ErrOut
	if errOut == nil {
		errOut = os.Stderr
	}
	progress := &collect.Progress{Warn: &sanitizingWriter{w: errOut}, Started: time.Now()}
	if f, ok := errOut.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		progress.W = errOut
	}
	if o.quiet { // a sweep's node: its warnings are in its report
		progress = &collect.Progress{Warn: io.Discard, Started: time.Now()}
	}
	objs := o.preloaded
	if objs == nil && len(o.Objects) > 0 {
		// --from-objects with --node: the saved objects, the live rules.
		if objs, err = o.readObjects(); err != nil {
			return nil, err
		}
	}
	c := &collect.Collector{
		Client: client, Runner: &collect.RemoteRunner{Config: cfg, Client: client}, Progress: progress, Dir: dir,
		Options: collect.Options{
			Node: o.Node, Via: o.Live.Via, Image: o.Live.Image, DebugNamespace: o.Live.DebugNamespace,
			StartTimeout: o.Live.StartTimeout, Deadline: o.Live.Deadline, Reader: o.Live.Reader,
			ServiceNamespace: o.ServiceNamespace, ServiceName: o.ServiceName, Objects: objs, MetricsPort: o.Live.MetricsPort,
			Fleet: o.fleet,
		},
	}
	return c.Collect(o.Context())
}

// readOptions are how --from-dump files are read.
func (o *InputOptions) readOptions() input.Options {
	return input.Options{IPTables: iptables.Options{Table: o.Table}}
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
			return readInput(o, input.KindObjects, name, func(r io.Reader, source string) (*correlate.Objects, error) {
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
		all.Warm() // several dumps filter against it at once
		return all
	})
	for _, name := range o.Dumps {
		tasks = append(tasks, func() result {
			read := o.readOptions().Read
			if only != nil {
				read = func(r io.Reader, source string) (*input.Input, error) {
					return readTargeted(r, source, o.readOptions(), allObjects)
				}
			}
			in, err := readInput(o, input.KindRuleset, name, read)
			return result{in: in, err: err}
		})
	}
	for _, name := range o.Metrics {
		tasks = append(tasks, func() result {
			m, err := readInput(o, input.KindMetrics, name, metrics.Parse)
			return result{m: m, err: err}
		})
	}
	for _, name := range o.Config {
		tasks = append(tasks, func() result {
			cfg, err := readInput(o, input.KindConfig, name, kpconfig.Parse)
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

// readInput opens name and reads it with read, after checking that it
// holds what its flag reads (want): a file given to the wrong flag says
// which flag reads it ("objects.json: this file is an iptables dump
// (iptables-save): pass it with --from-dump").
func readInput[T any](o *InputOptions, want input.Kind, name string, read func(io.Reader, string) (T, error)) (T, error) {
	var zero T
	if st, err := os.Stat(name); err == nil && st.IsDir() {
		return zero, fmt.Errorf("%s is a directory: pass a bundle's folder with --from-bundle, and files with %s", name, want.Flag())
	}
	rc, src, err := o.open(name)
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
