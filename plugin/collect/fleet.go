package collect

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
)

// Fleet is what a sweep of many nodes reads from the API server once
// rather than once per node: the Nodes, the kube-proxy DaemonSets
// (kube-system), their ConfigMaps, which way to reach a node, and who the
// user is; kube-system's pods only if a node needs them (--via kube-proxy,
// or no DaemonSet runs its kube-proxy). A Collector with a Fleet asks it
// instead of the API server, so a sweep's list requests do not grow with
// the number of nodes.
type Fleet struct {
	nodes map[string]*corev1.Node
	// proxySets are the kube-proxy DaemonSets; proxySetsErr why they
	// could not be listed (each node then looks for its pod).
	proxySets    []*appsv1.DaemonSet
	proxySetsErr error
	skipped      []SkippedNode

	mu         sync.Mutex
	configMaps map[string]configMapResult
	pods       *podsResult
	via        *viaResult
	me         *string
}

// SkippedNode is a node of the sweep not read, and why: a control-plane
// node without --include-control-plane.
type SkippedNode struct{ Node, Why string }

// podsResult is kube-system's kube-proxy pods by node, or why they could
// not be listed.
type podsResult struct {
	byNode map[string][]*corev1.Pod
	err    error
}

type configMapResult struct {
	cm  *corev1.ConfigMap
	err error
}

type viaResult struct{ via string }

// FleetOptions choose the nodes of a sweep: every node, those matching a
// label selector, or those named; control-plane nodes only with
// IncludeControlPlane (else they are Skipped).
type FleetOptions struct {
	All                 bool
	Selector            string
	Names               []string
	IncludeControlPlane bool
}

// NewFleet lists the Nodes and the kube-proxy DaemonSets once and returns
// the nodes of the sweep, sorted by name. Named nodes that do not exist are
// returned in missing, for the caller to report as failed; control-plane
// nodes left out are in Skipped.
func NewFleet(ctx context.Context, client kubernetes.Interface, opts FleetOptions) (f *Fleet, nodes, missing []string, err error) {
	sel := labels.Everything()
	if opts.Selector != "" {
		if sel, err = labels.Parse(opts.Selector); err != nil {
			return nil, nil, nil, fmt.Errorf("--node-selector %q: %v", opts.Selector, err)
		}
	}
	f = &Fleet{nodes: map[string]*corev1.Node{}, configMaps: map[string]configMapResult{}}
	var cont string
	for {
		list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 500, Continue: cont})
		if err != nil {
			return nil, nil, nil, apiError(err, "list", "nodes", "", "find the nodes to sweep")
		}
		for i := range list.Items {
			n := &list.Items[i]
			f.nodes[n.Name] = n
		}
		if cont = list.Continue; cont == "" {
			break
		}
	}
	switch {
	case len(opts.Names) > 0:
		seen := map[string]bool{}
		for _, name := range opts.Names {
			if seen[name] {
				continue
			}
			seen[name] = true
			if _, ok := f.nodes[name]; ok {
				nodes = append(nodes, name)
			} else {
				missing = append(missing, name)
			}
		}
	default:
		for name, n := range f.nodes {
			if sel.Matches(labels.Set(n.Labels)) {
				nodes = append(nodes, name)
			}
		}
		sort.Strings(nodes)
	}
	nodes = f.skipControlPlane(nodes, opts.IncludeControlPlane)
	f.proxySets, f.proxySetsErr = listProxyDaemonSets(ctx, client)
	return f, nodes, missing, nil
}

// skipControlPlane leaves out the control-plane nodes unless include.
func (f *Fleet) skipControlPlane(nodes []string, include bool) []string {
	if include {
		return nodes
	}
	kept := nodes[:0]
	for _, name := range nodes {
		if why := ControlPlaneReason(f.nodes[name]); why != "" {
			f.skipped = append(f.skipped, SkippedNode{Node: name, Why: "control-plane node (" + why + "): pass " + IncludeControlPlaneFlag + " to read it"})
			continue
		}
		kept = append(kept, name)
	}
	return kept
}

// Skipped are the nodes of the sweep left out, and why.
func (f *Fleet) Skipped() []SkippedNode { return f.skipped }

// proxyPods are the kube-proxy pods on node: kube-system's pods are listed
// once, for the whole sweep, when a node first needs them.
func (f *Fleet) proxyPods(ctx context.Context, client kubernetes.Interface, node string) ([]*corev1.Pod, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pods == nil {
		r := &podsResult{byNode: map[string][]*corev1.Pod{}}
		var cont string
		for {
			pods, err := client.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{Limit: 500, Continue: cont})
			if err != nil {
				r.err = err
				break
			}
			for i := range pods.Items {
				if p := &pods.Items[i]; p.Spec.NodeName != "" && isKubeProxyPod(p) {
					r.byNode[p.Spec.NodeName] = append(r.byNode[p.Spec.NodeName], p)
				}
			}
			if cont = pods.Continue; cont == "" {
				break
			}
		}
		if ctx.Err() != nil { // an interrupted list is not an answer
			return nil, ctx.Err()
		}
		f.pods = r
	}
	return f.pods.byNode[node], f.pods.err
}

// Node is the sweep's Node object of that name.
func (f *Fleet) Node(name string) *corev1.Node { return f.nodes[name] }

// configMap is kube-system/NAME, fetched once for the whole sweep.
func (f *Fleet) configMap(ctx context.Context, client kubernetes.Interface, name string) (*corev1.ConfigMap, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r, ok := f.configMaps[name]; ok {
		return r.cm, r.err
	}
	cm, err := client.CoreV1().ConfigMaps("kube-system").Get(ctx, name, metav1.GetOptions{})
	if err == nil {
		cm.APIVersion, cm.Kind = "v1", "ConfigMap"
	} else {
		cm = nil // client-go returns an empty one with the error
	}
	if ctx.Err() == nil { // an interrupted get is not an answer
		f.configMaps[name] = configMapResult{cm, err}
	}
	return cm, err
}

// chooseVia asks decide until it answers, then gives that answer ever
// after: the user's rights are the same for every node. A refusal is not
// kept (it can depend on the node: one without kube-proxy).
func (f *Fleet) chooseVia(decide func() (string, error)) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.via != nil {
		return f.via.via, nil
	}
	via, err := decide()
	if err == nil {
		f.via = &viaResult{via: via}
	}
	return via, err
}

// whoAmI asks once; ask also removes the user's own leftover pods, once
// for the sweep.
func (f *Fleet) whoAmI(ask func() string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.me == nil {
		me := ask()
		f.me = &me
	}
	return *f.me
}

func isKubeProxyPod(p *corev1.Pod) bool {
	c := kubeProxyContainer(p)
	return p.Labels["k8s-app"] == "kube-proxy" || c != nil && c.Name == "kube-proxy"
}

// Objects lists the Services and EndpointSlices once for the whole sweep
// and returns them, with the swept Nodes and the ConfigMaps of their
// kube-proxy DaemonSets, as an objects file (JSON, redacted as a bundle's)
// and as the analyses read them.
func (f *Fleet) Objects(ctx context.Context, client kubernetes.Interface, nodes []string) ([]byte, *correlate.Objects, error) {
	list := &objectList{List: corev1.List{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "List"}}}
	if err := list.addServicesAndSlices(ctx, client); err != nil {
		return nil, nil, err
	}
	configMaps := map[string]bool{}
	for _, name := range nodes {
		if n := f.nodes[name]; n != nil {
			if err := list.add("v1", "Node", redactNode(n)); err != nil {
				return nil, nil, err
			}
		}
		if ds, _ := daemonSetFor(f.nodes[name], f.proxySets); ds != nil {
			configMaps[configMapName(templatePod(ds))] = true
		}
	}
	names := make([]string, 0, len(configMaps))
	for name := range configMaps {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		cm, err := f.configMap(ctx, client, name)
		if err != nil {
			continue // each node's bundle says so when its kube-proxy needs it
		}
		redacted, _ := redactConfigMap(cm)
		if err := list.add("v1", "ConfigMap", redacted); err != nil {
			return nil, nil, err
		}
	}
	data, err := json.Marshal(&list.List)
	if err != nil {
		return nil, nil, err
	}
	objs, err := correlate.ReadObjects(bytes.NewReader(data), SweepObjectsFile)
	if err != nil {
		return nil, nil, err
	}
	return data, objs, nil
}

// FailureReason names why a node could not be read, for a sweep's
// summary: NotReady, NoKubeProxy, ControlPlane, NoDebugNamespace, Forbidden,
// PodSecurity, ImagePull, Timeout, NotFound, Interrupted or Other.
func FailureReason(err error) string {
	var noProxy *NoKubeProxyError
	var controlPlane *ControlPlaneError
	var psa *PodSecurityError
	var forbidden *Forbidden
	msg := err.Error()
	switch {
	case errors.Is(err, context.Canceled):
		return "Interrupted"
	case errors.As(err, &noProxy):
		return "NoKubeProxy"
	case errors.As(err, &controlPlane):
		return "ControlPlane"
	case errors.As(err, &psa):
		return "PodSecurity"
	case errors.As(err, &forbidden), strings.Contains(msg, "you may neither run a debug pod"):
		return "Forbidden"
	case strings.Contains(msg, "does not exist, so no debug pod can run there"):
		return "NoDebugNamespace"
	case strings.Contains(msg, "is not Ready"):
		return "NotReady"
	case strings.Contains(msg, "cannot be pulled"):
		return "ImagePull"
	case errors.Is(err, context.DeadlineExceeded), strings.Contains(msg, "did not start"), strings.Contains(msg, "did not finish within"):
		return "Timeout"
	case strings.Contains(msg, "not found"):
		return "NotFound"
	}
	return "Other"
}
