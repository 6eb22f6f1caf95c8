package collect

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
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
	DebugNamespace string // "default" when empty
	// StartTimeout bounds the wait for the debug pod to run.
	StartTimeout time.Duration
	// Deadline is the debug pod's activeDeadlineSeconds.
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
}

func (o *Options) debugNamespace() string {
	if o.DebugNamespace == "" {
		return "default"
	}
	return o.DebugNamespace
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

	now func() time.Time // tests pin it
}

// Collect reads the node. The debug pod, if one was made, is deleted before
// Collect returns, whatever happened (the caller cancels ctx on Ctrl-C).
func (c *Collector) Collect(ctx context.Context) (man *Manifest, err error) {
	now := c.now
	if now == nil {
		now = time.Now
	}
	w := &bundleWriter{dir: c.Dir, progress: c.Progress,
		man: Manifest{Node: c.Node, CollectedAt: now().UTC().Truncate(time.Second), Scope: "full"}}
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return nil, err
	}
	node, err := c.getNode(ctx)
	if err != nil {
		return nil, err
	}
	proxy, err := c.discoverKubeProxy(ctx, w)
	if err != nil {
		return nil, err
	}
	objects := c.Objects
	if objects == nil {
		if objects, err = c.writeObjects(ctx, w, node, proxy); err != nil {
			return nil, err
		}
	}
	metricsPort := c.MetricsPort
	if metricsPort == 0 {
		metricsPort = metricsPortOf(proxy.configMap)
	}
	via, err := c.chooseVia(ctx, proxy.pod)
	if err != nil {
		return nil, err
	}
	w.man.Via = via
	var target Target
	switch via {
	case ViaKubeProxy:
		if proxy.pod == nil {
			return nil, &NoKubeProxyError{Node: c.Node}
		}
		container := kubeProxyContainer(proxy.pod)
		target = Target{Namespace: proxy.pod.Namespace, Pod: proxy.pod.Name, Container: container.Name}
		w.man.Image = container.Image
	default:
		if reason := notReady(node); reason != "" {
			return nil, fmt.Errorf("node %s is not Ready (%s): a debug pod cannot start there. Try --via kube-proxy if its kube-proxy still runs", c.Node, reason)
		}
		image, err := c.debugImage(proxy.pod)
		if err != nil {
			return nil, err
		}
		w.man.Image = image
		pod, err := c.startDebugPod(ctx, image)
		if pod != nil {
			defer func() {
				if derr := c.deletePod(pod); derr != nil && err == nil {
					err = derr
				}
			}()
		}
		if err != nil {
			return nil, err
		}
		target = Target{Namespace: pod.Namespace, Pod: pod.Name, Container: ContainerName}
	}
	w.man.Namespace, w.man.Pod = target.Namespace, target.Pod
	if err := c.read(ctx, w, target, objects, metricsPort); err != nil {
		return nil, err
	}
	if err := WriteManifest(c.Dir, &w.man); err != nil {
		return nil, err
	}
	return &w.man, nil
}

// bundleWriter writes the files of one bundle and records them, with the
// warnings, in its manifest.
type bundleWriter struct {
	dir      string
	man      Manifest
	progress *Progress
}

// write saves data as f.Path and records f with its size.
func (w *bundleWriter) write(f BundleFile, data []byte) error {
	if err := os.WriteFile(filepath.Join(w.dir, f.Path), data, 0o644); err != nil {
		return err
	}
	f.Bytes = int64(len(data))
	w.add(f)
	return nil
}

// create opens a file of the bundle for a streamed output; add records it.
func (w *bundleWriter) create(name string) (*os.File, error) {
	return os.Create(filepath.Join(w.dir, name))
}

func (w *bundleWriter) add(f BundleFile) { w.man.Files = append(w.man.Files, f) }

func (w *bundleWriter) warn(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	w.man.Warnings = append(w.man.Warnings, msg)
	w.progress.Warning(msg)
}
