package collect

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// Ways to reach the node.
const (
	ViaAuto      = "auto"
	ViaDebugPod  = "debug-pod"
	ViaKubeProxy = "kube-proxy"
)

// Options say what to collect and how.
type Options struct {
	Node string
	// Via: auto (what RBAC allows, preferring the debug pod), debug-pod or
	// kube-proxy.
	Via            string
	Image          string // overrides the node's kube-proxy image
	DebugNamespace string // DefaultDebugNamespace when empty
	// StartTimeout bounds the wait for the debug pod to run.
	StartTimeout time.Duration
	// Deadline is the debug pod's activeDeadlineSeconds, and bounds the
	// whole read of the node (also through kube-proxy's pod, which has none).
	Deadline time.Duration
	Reader   string // ReaderAuto or ReaderSave
	// Service limits the ruleset read to one Service's chains where that is
	// faster (explain); empty reads everything.
	ServiceNamespace, ServiceName string
	// Objects, when set, are the API objects the caller has already
	// (--from-objects): they are not fetched again.
	Objects *correlate.Objects
	// MetricsPort is kube-proxy's metrics port; 0 reads it from kube-proxy's
	// ConfigMap (kubeproxy.MetricsPort when that does not say).
	MetricsPort int
	// Fleet, in a sweep, answers what is read once for every node.
	Fleet *Fleet
	// IncludeControlPlane reads control-plane nodes too
	// (--include-control-plane): see ControlPlaneError.
	IncludeControlPlane bool
	// Kernel reads the kernel's state beside the rules: the conntrack
	// table, its counters (twice, some seconds apart) and the sysctls.
	Kernel bool
	// StatsInterval is the least time between the counters' two reads;
	// 0: conntrackStatsInterval. Triage takes less (it reads many nodes).
	StatsInterval time.Duration
	// KernelTable, without Kernel, reads only the conntrack entries of
	// the Service read (ServiceName; explain): conntrack_service.go.
	KernelTable bool
	// Guard checks, once per run and namespace, that the admission policy
	// guards the debug namespace (guard.go); nil checks every time.
	Guard *GuardCheck
}

func (o *Options) debugNamespace() string {
	if o.DebugNamespace == "" {
		return DefaultDebugNamespace
	}
	return o.DebugNamespace
}

func (o *Options) deadline() time.Duration {
	if o.Deadline <= 0 {
		return DefaultPodDeadline
	}
	return min(o.Deadline, MaxPodDeadline)
}

// Collector writes a bundle of one node into Dir. Its steps live in
// discovery.go (the API objects), access.go (which way to the node),
// debugpod.go (the debug pod's life) and read.go (the node's rules).
type Collector struct {
	Client   kubernetes.Interface
	Runner   Runner
	Progress *Progress
	Options
	Dir string
	// Listed are the objects Collect listed and wrote into the bundle
	// (nil when Objects were given): the caller reads them without
	// decoding the bundle's file again.
	Listed *correlate.Objects
	// Timings, when set, records how long each phase took (--timings).
	Timings *Timings
	// Tee, when set, sees the ruleset outputs of a whole read as they
	// stream in (tee.go).
	Tee RulesTee
	// configMode is the mode kube-proxy's ConfigMap sets ("" unread).
	configMode kubeproxy.Mode

	now func() time.Time // tests pin it
	// after is time.After, or what a test waits on instead.
	after func(time.Duration) <-chan time.Time
}

// Collect reads the node. The debug pod, if one was made, is deleted before
// Collect returns, whatever happened (the caller cancels ctx on Ctrl-C).
func (c *Collector) Collect(ctx context.Context) (man *Manifest, err error) {
	w := &bundleWriter{dir: c.Dir, progress: c.Progress,
		man: Manifest{Node: c.Node, CollectedAt: c.clock().UTC().Truncate(time.Second), Scope: "full"}}
	if err := w.makeDir(); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			w.discard() // no half bundle that looks whole
		}
	}()
	stopAPI := c.Timings.Start(PhaseAPI)
	node, err := c.getNode(ctx)
	if err != nil {
		return nil, err
	}
	if why := ControlPlaneReason(node); why != "" && !c.IncludeControlPlane {
		return nil, &ControlPlaneError{Node: c.Node, Why: why}
	}
	proxy, err := c.discoverKubeProxy(ctx, w, node)
	stopAPI(0)
	if err != nil {
		return nil, err
	}
	warnConfigMap(w, proxy)
	metricsPort := c.MetricsPort
	if metricsPort == 0 {
		metricsPort = metricsPortOf(proxy.configMap)
	}
	c.configMode = configModeOf(proxy.configMap)
	// The objects are listed while the way to the node is chosen and the
	// debug pod starts: both mostly wait, on the API server and the kubelet.
	podCtx, cancelPod := context.WithCancel(ctx)
	defer cancelPod()
	listing := c.startListing(ctx, w, node, proxy, cancelPod)
	defer listing.stop() // before the bundle is discarded: nothing writes into it after
	target, pod, err := c.reach(podCtx, w, node, proxy)
	if pod != nil {
		defer func() {
			stop := c.Timings.Start(PhasePodDelete)
			derr := c.deletePod(pod)
			stop(0)
			if derr != nil && err == nil {
				err = derr
			}
		}()
	}
	if err != nil {
		return nil, listing.precede(err)
	}
	w.man.Namespace, w.man.Pod = target.Namespace, target.Pod
	// The debug pod's deadline stops it, and so its execs; kube-proxy's pod
	// has none: this bounds the read either way. A failed listing ends the
	// read too (podCtx), and its error is the one said.
	rctx, cancel := context.WithTimeout(podCtx, c.deadline())
	defer cancel()
	if err := c.readNode(rctx, w, target, listing, metricsPort); err != nil {
		if _, lerr := listing.wait(); lerr != nil {
			return nil, lerr
		}
		if ctx.Err() == nil && errors.Is(rctx.Err(), context.DeadlineExceeded) {
			return nil, fmt.Errorf("reading node %s through pod %s/%s did not finish within --pod-deadline (%s): %w", c.Node, target.Namespace, target.Pod, c.deadline(), err)
		}
		return nil, err
	}
	objects, err := listing.wait()
	if err != nil {
		return nil, err
	}
	if c.Objects == nil {
		c.Listed = objects
	}
	if err := w.writeManifest(); err != nil {
		return nil, err
	}
	return &w.man, nil
}

// waitFor is a channel that fires d from now (after, in tests).
func (c *Collector) waitFor(d time.Duration) <-chan time.Time {
	if c.after != nil {
		return c.after(d)
	}
	return time.After(d)
}

func (c *Collector) clock() time.Time {
	if c.now != nil {
		return c.now()
	}
	return time.Now()
}

// bundleWriter writes the files of one bundle and records them, with the
// warnings, in its manifest.
type bundleWriter struct {
	// mu guards the lists below: the objects are written while the node
	// is read.
	mu       sync.Mutex
	dir      string
	man      Manifest
	progress *Progress
	// created are the files written, madeDir whether dir was made here:
	// what a failed collection removes, and nothing else.
	created []string
	madeDir bool
}

// write saves data as f.Path and records f with its size.
func (w *bundleWriter) write(f BundleFile, data []byte) error {
	out, err := w.create(f.Path)
	if err != nil {
		return err
	}
	_, err = out.Write(data)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	f.Bytes = int64(len(data))
	w.add(f)
	return nil
}

// create opens a new file of the bundle for a streamed output; add records
// it. O_EXCL: a file or link already there is never written through.
func (w *bundleWriter) create(name string) (*os.File, error) {
	p := filepath.Join(w.dir, name)
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fileMode)
	if err == nil {
		w.mu.Lock()
		w.created = append(w.created, p)
		w.mu.Unlock()
	}
	return f, err
}

// writeManifest writes bundle.json, last: a bundle without it is not one.
func (w *bundleWriter) writeManifest() error {
	f, err := w.create(ManifestFile)
	if err != nil {
		return err
	}
	f.Close()
	return WriteManifest(w.dir, &w.man)
}

func (w *bundleWriter) add(f BundleFile) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.man.Files = append(w.man.Files, f)
}

// fileCount is how many files are recorded so far.
func (w *bundleWriter) fileCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.man.Files)
}

// files are the files recorded so far.
func (w *bundleWriter) files() []BundleFile {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.man.Files)
}

// bytesSince is the size of the rules and node state recorded after the
// first n files (not the objects, listed meanwhile).
func (w *bundleWriter) bytesSince(n int) int64 {
	var sum int64
	for _, f := range w.files()[n:] {
		if f.Kind != KindObjects {
			sum += f.Bytes
		}
	}
	return sum
}

func (w *bundleWriter) warn(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	w.mu.Lock()
	w.man.Warnings = append(w.man.Warnings, msg)
	w.mu.Unlock()
	w.progress.Warning(msg)
}

// forget removes the files written and recorded since the manifest listed
// files and created created: a read given up for another.
func (w *bundleWriter) forget(files, created int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range w.created[created:] {
		os.Remove(p)
	}
	w.created, w.man.Files = w.created[:created], w.man.Files[:files]
}

// discard removes what a failed collection wrote: its files, and the
// folder if it made it (os.Remove leaves a folder that holds anything else).
func (w *bundleWriter) discard() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range w.created {
		os.Remove(p)
	}
	w.created = nil
	if w.madeDir {
		os.Remove(w.dir)
	}
}

// makeDir creates the bundle's folder, or takes an existing empty one.
func (w *bundleWriter) makeDir() error {
	if err := os.MkdirAll(filepath.Dir(w.dir), 0o755); err != nil {
		return err
	}
	err := os.Mkdir(w.dir, dirMode)
	if err == nil {
		w.madeDir = true
		return nil
	}
	if !os.IsExist(err) {
		return err
	}
	entries, rerr := os.ReadDir(w.dir)
	if rerr != nil {
		return rerr
	}
	if len(entries) > 0 {
		return fmt.Errorf("%s is not empty: collect writes into a new or empty folder", w.dir)
	}
	return nil
}
