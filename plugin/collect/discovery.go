package collect

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// getNode reads the Node, or says how to find the right name.
func (c *Collector) getNode(ctx context.Context) (*corev1.Node, error) {
	if c.Fleet != nil {
		if n := c.Fleet.Node(c.Node); n != nil {
			return n, nil
		}
		return nil, fmt.Errorf("node %q not found: list them with kubectl get nodes", c.Node)
	}
	node, err := c.Client.CoreV1().Nodes().Get(ctx, c.Node, metav1.GetOptions{})
	if err != nil {
		if IsNotFound(err) {
			return nil, fmt.Errorf("node %q not found: list them with kubectl get nodes", c.Node)
		}
		return nil, apiError(err, "get", "nodes", "", "check the node")
	}
	return node, nil
}

// kubeProxy is what the API server says about the node's kube-proxy.
type kubeProxy struct {
	// template is the pod kube-proxy runs in on the node: its DaemonSet's
	// pod template, or the pod listed (a static pod, or --via kube-proxy);
	// nil when the node has none that could be found (--image reads the
	// node anyway). Its image is the debug pod's default.
	template *corev1.Pod
	// pod is the node's kube-proxy pod itself, listed only where it is
	// needed: the exec target of --via kube-proxy, or no DaemonSet found.
	pod *corev1.Pod
	// configMapName is the ConfigMap the pod mounts; configMap is nil when
	// it was not wanted or could not be read (configMapErr says why).
	configMapName string
	configMap     *corev1.ConfigMap
	configMapErr  error
}

// discoverKubeProxy finds the node's kube-proxy (its image is the default
// debug image) and, when the objects file or the metrics port wants it,
// its ConfigMap: fetched once, for both. --via kube-proxy lists the node's
// pods (it execs into one, and its opt-in grants that); otherwise the image
// comes from the DaemonSet that runs kube-proxy on the node.
func (c *Collector) discoverKubeProxy(ctx context.Context, w *bundleWriter, node *corev1.Node) (kubeProxy, error) {
	var kp kubeProxy
	var err error
	if c.Via == ViaKubeProxy {
		kp.pod, err = c.findKubeProxyPod(ctx, w)
		kp.template = kp.pod
	} else {
		kp.template, kp.pod, err = c.kubeProxyTemplate(ctx, w, node)
	}
	if err != nil || kp.template == nil {
		return kubeProxy{}, err
	}
	kp.configMapName = configMapName(kp.template)
	if c.Objects == nil || c.MetricsPort == 0 {
		if c.Fleet != nil {
			kp.configMap, kp.configMapErr = c.Fleet.configMap(ctx, c.Client, kp.configMapName)
		} else {
			kp.configMap, kp.configMapErr = c.Client.CoreV1().ConfigMaps("kube-system").Get(ctx, kp.configMapName, metav1.GetOptions{})
			if kp.configMapErr == nil {
				kp.configMap.APIVersion, kp.configMap.Kind = "v1", "ConfigMap"
			} else {
				kp.configMap = nil // client-go returns an empty one with the error
			}
		}
	}
	return kp, nil
}

// warnConfigMap says why kube-proxy's ConfigMap, when it was wanted, was
// not read.
func warnConfigMap(w *bundleWriter, proxy kubeProxy) {
	switch err := proxy.configMapErr; {
	case err == nil:
	case IsNotFound(err):
		w.warn("kube-proxy's ConfigMap kube-system/%s not found: its settings come from /configz only", proxy.configMapName)
	case apierrors.IsForbidden(err) && proxy.configMapName != kubeProxyConfigMap:
		// A second kube-proxy DaemonSet (a pool in another mode) names
		// its own ConfigMap, which deploy/'s Role does not name.
		w.warn("you may not read kube-proxy's ConfigMap kube-system/%s (RBAC: \"get\" on configmaps %q; %srbac.yaml's Role kube-system/kubectl-proxyrules-kube-proxy names only %q: add this name to its resourceNames): "+
			"its settings come from /configz only", proxy.configMapName, proxy.configMapName, RBACFile, kubeProxyConfigMap)
	default:
		w.warn("could not read kube-proxy's ConfigMap kube-system/%s: %s", proxy.configMapName, firstLine(err.Error()))
	}
}

// kubeProxyTemplate is the pod template of the DaemonSet that runs
// kube-proxy on the node. With none (a static kube-proxy pod, or DaemonSets
// may not be listed) it is the node's kube-proxy pod, if pods in
// kube-system may be listed (an admin); else nil, with a warning, when
// --image is given, and a NoKubeProxyError that asks for --image when not.
func (c *Collector) kubeProxyTemplate(ctx context.Context, w *bundleWriter, node *corev1.Node) (template, pod *corev1.Pod, err error) {
	var sets []*appsv1.DaemonSet
	if c.Fleet != nil {
		sets, err = c.Fleet.proxySets, c.Fleet.proxySetsErr
	} else {
		sets, err = listProxyDaemonSets(ctx, c.Client)
	}
	if err != nil && !apierrors.IsForbidden(err) {
		if c.Image != "" { // not needed: say so, read the node
			w.warn("could not look for kube-proxy's DaemonSet (%s)", firstLine(err.Error()))
			return nil, nil, nil
		}
		return nil, nil, apiError(err, "list", "daemonsets.apps", "kube-system", "find the node's kube-proxy image")
	}
	dsRefused := err != nil
	if ds, others := daemonSetFor(node, sets); ds != nil {
		if len(others) > 0 {
			w.warn("DaemonSets kube-system/%s and %s all run kube-proxy on node %s: taking the image of %s", ds.Name, strings.Join(others, ", "), c.Node, ds.Name)
		}
		if why := rolloutPending(ds); why != "" {
			w.warn("%s: node %s may still run the previous kube-proxy image", why, c.Node)
		}
		c.Progress.Step("kube-proxy on node %s: DaemonSet kube-system/%s", c.Node, ds.Name)
		return templatePod(ds), nil, nil
	}
	pods, err := c.nodeProxyPods(ctx)
	podsRefused := apierrors.IsForbidden(err)
	if err != nil && !podsRefused {
		return nil, nil, apiError(err, "list", "pods", "kube-system", "find the node's kube-proxy pod and its image")
	}
	if pod := pickProxyPod(pods); pod != nil {
		if pod.Status.Phase != corev1.PodRunning {
			w.warn("kube-proxy pod %s on node %s is %s, not Running: the rules may be old", pod.Name, c.Node, pod.Status.Phase)
		}
		return pod, pod, nil
	}
	why := noDaemonSetWhy(dsRefused, podsRefused)
	if c.Image == "" {
		return nil, nil, &NoKubeProxyError{Node: c.Node, Detail: why}
	}
	w.warn("no kube-proxy pod on node %s (%s): reading its rules with --image %s", c.Node, why, c.Image)
	return nil, nil, nil
}

// noDaemonSetWhy says what was looked at to find no kube-proxy.
func noDaemonSetWhy(dsRefused, podsRefused bool) string {
	ds := "no kube-proxy DaemonSet in kube-system selects the node"
	if dsRefused {
		ds = "you may not list DaemonSets in kube-system (RBAC: \"list\" on \"daemonsets.apps\")"
	}
	if podsRefused {
		return ds + ", and you may not list pods in kube-system to find a static kube-proxy pod"
	}
	return ds + ", and none of its pods in kube-system has label " + proxyLabel + " or a container named kube-proxy"
}

// findKubeProxyPod finds the kube-proxy pod on the node, a running one
// first, for --via kube-proxy: its exec target.
func (c *Collector) findKubeProxyPod(ctx context.Context, w *bundleWriter) (*corev1.Pod, error) {
	pods, err := c.nodeProxyPods(ctx)
	if err != nil {
		return nil, apiError(err, "list", "pods", "kube-system", "find the node's kube-proxy pod to exec into (--via kube-proxy)")
	}
	pod := pickProxyPod(pods)
	if pod == nil {
		return nil, &NoKubeProxyError{Node: c.Node}
	}
	if pod.Status.Phase != corev1.PodRunning {
		w.warn("kube-proxy pod %s on node %s is %s, not Running: the rules may be old", pod.Name, c.Node, pod.Status.Phase)
	}
	return pod, nil
}

// kubeProxyTarget is the exec target of --via kube-proxy, and its image:
// the node's kube-proxy pod, listed here when auto chose this way.
func (c *Collector) kubeProxyTarget(ctx context.Context, w *bundleWriter, proxy kubeProxy) (Target, string, error) {
	pod := proxy.pod
	if pod == nil && proxy.template != nil {
		var err error
		if pod, err = c.findKubeProxyPod(ctx, w); err != nil {
			return Target{}, "", err
		}
	}
	if pod == nil {
		return Target{}, "", &NoKubeProxyError{Node: c.Node}
	}
	container := kubeProxyContainer(pod)
	return Target{Namespace: pod.Namespace, Pod: pod.Name, Container: container.Name}, container.Image, nil
}

// nodeProxyPods lists the kube-proxy pods on the node (the sweep's, listed
// once for every node).
func (c *Collector) nodeProxyPods(ctx context.Context) ([]*corev1.Pod, error) {
	if c.Fleet != nil {
		return c.Fleet.proxyPods(ctx, c.Client, c.Node)
	}
	list, err := c.Client.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + c.Node})
	if err != nil {
		return nil, err
	}
	var out []*corev1.Pod
	for i := range list.Items {
		if isKubeProxyPod(&list.Items[i]) {
			out = append(out, &list.Items[i])
		}
	}
	return out, nil
}

// pickProxyPod is a running one of the pods, else the first; nil for none.
func pickProxyPod(pods []*corev1.Pod) *corev1.Pod {
	for _, p := range pods {
		if p.Status.Phase == corev1.PodRunning {
			return p
		}
	}
	if len(pods) > 0 {
		return pods[0]
	}
	return nil
}

// kubeProxyContainer is the container that runs kube-proxy.
func kubeProxyContainer(p *corev1.Pod) *corev1.Container { return proxyContainer(&p.Spec) }

// kubeProxyConfigMap is kube-proxy's ConfigMap as kubeadm names it, the
// one deploy/'s Role may read.
const kubeProxyConfigMap = "kube-proxy"

// configMapName is the ConfigMap kube-proxy's pod mounts its config from.
func configMapName(p *corev1.Pod) string {
	for _, v := range p.Spec.Volumes {
		if v.ConfigMap != nil && strings.Contains(v.ConfigMap.Name, "kube-proxy") {
			return v.ConfigMap.Name
		}
	}
	return kubeProxyConfigMap
}

// metricsPortOf reads metricsBindAddress from kube-proxy's ConfigMap;
// kube-proxy's default when there is none or it does not say.
func metricsPortOf(cm *corev1.ConfigMap) int {
	if cm == nil {
		return kubeproxy.MetricsPort
	}
	cfg, err := KubeProxyConfigOf(cm)
	if err != nil {
		return kubeproxy.MetricsPort
	}
	_, port, err := net.SplitHostPort(cfg.MetricsBindAddress)
	if n, perr := strconv.Atoi(port); err == nil && perr == nil && n > 0 {
		return n
	}
	return kubeproxy.MetricsPort
}

// configModeOf is the proxy mode kube-proxy's ConfigMap sets, after
// kube-proxy's defaulting; "" when there is none or it does not read.
func configModeOf(cm *corev1.ConfigMap) kubeproxy.Mode {
	if cm == nil {
		return ""
	}
	cfg, err := KubeProxyConfigOf(cm)
	if err != nil {
		return ""
	}
	return cfg.Mode
}

// writeObjects saves the Services, EndpointSlices, the Node, the kube-proxy
// pod and its ConfigMap as one v1 List (what --from-objects reads), and
// returns them as the analyses read them.
func (c *Collector) writeObjects(ctx context.Context, w *bundleWriter, node *corev1.Node, proxy kubeProxy) (*correlate.Objects, error) {
	c.Progress.Step("reading Services and EndpointSlices")
	var size int64
	stop := c.Timings.Start(PhaseListObjects)
	defer func() { stop(size) }()
	list := &objectList{List: corev1.List{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "List"}}}
	add := list.add
	if err := list.addServicesAndSlices(ctx, c.Client); err != nil {
		return nil, err
	}
	if err := add("v1", "Node", redactNode(node)); err != nil {
		return nil, err
	}
	if c.Kernel {
		if err := list.addServiceCIDRs(ctx, c.Client, w); err != nil {
			return nil, err
		}
	}
	if proxy.pod != nil { // listed only where needed: no DaemonSet, or --via kube-proxy
		if err := add("v1", "Pod", redactPod(proxy.pod)); err != nil {
			return nil, err
		}
	}
	if proxy.configMap != nil {
		cm, dropped := redactConfigMap(proxy.configMap)
		if len(dropped) > 0 {
			c.Progress.Step("kube-proxy's ConfigMap: kept its KubeProxyConfiguration, left out %s (may hold credentials)", strings.Join(dropped, ", "))
		}
		if err := add("v1", "ConfigMap", cm); err != nil {
			return nil, err
		}
	}
	data, err := json.Marshal(&list.List)
	if err != nil {
		return nil, err
	}
	size = int64(len(data))
	objs, err := correlate.ReadObjects(bytes.NewReader(data), "objects.json")
	if err != nil {
		return nil, err
	}
	if err := w.write(BundleFile{Path: "objects.json", Kind: KindObjects, Command: "kubectl get services,endpointslices -A; node; kube-proxy pod and ConfigMap (what the analyses read: no annotations, managedFields, env or credentials)"}, data); err != nil {
		return nil, err
	}
	return objs, nil
}

// objectList is the List an objects file holds: redacted objects, as the
// analyses read them.
type objectList struct{ corev1.List }

func (l *objectList) add(apiVersion, kind string, obj runtime.Object) error {
	obj.GetObjectKind().SetGroupVersionKind(schema.FromAPIVersionAndKind(apiVersion, kind))
	data, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	l.Items = append(l.Items, runtime.RawExtension{Raw: data})
	return nil
}

// addServiceCIDRs lists the ranges cluster IPs come from (Kubernetes
// 1.33+): a conntrack entry to an address in them that no Service has is
// a deleted Service's. Without them (an older cluster, no RBAC) the range
// of the known cluster IPs stands in, which the report says.
func (l *objectList) addServiceCIDRs(ctx context.Context, client kubernetes.Interface, w *bundleWriter) error {
	cidrs, err := client.NetworkingV1().ServiceCIDRs().List(ctx, metav1.ListOptions{})
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return ctx.Err()
	case IsNotFound(err):
		return nil // before 1.33: no such API
	default:
		w.warn("could not list ServiceCIDRs (%s): a deleted Service's conntrack entries are looked for within the range of the known cluster IPs", firstLine(err.Error()))
		return nil
	}
	for i := range cidrs.Items {
		c := &cidrs.Items[i]
		kept := &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: c.Name}, Spec: c.Spec}
		if err := l.add("networking.k8s.io/v1", "ServiceCIDR", kept); err != nil {
			return err
		}
	}
	return nil
}

// addServicesAndSlices lists every Service and EndpointSlice, 500 a page.
func (l *objectList) addServicesAndSlices(ctx context.Context, client kubernetes.Interface) error {
	// Both at once: on a big cluster each is seconds of the API server's
	// encoding and our decoding.
	var svcs, slices objectList
	var svcErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		svcErr = svcs.addServices(ctx, client)
	}()
	sliceErr := slices.addSlices(ctx, client)
	<-done
	if svcErr != nil {
		return svcErr
	}
	if sliceErr != nil {
		return sliceErr
	}
	l.Items = append(append(l.Items, svcs.Items...), slices.Items...)
	return nil
}

func (l *objectList) addServices(ctx context.Context, client kubernetes.Interface) error {
	var cont string
	for {
		svcs, err := client.CoreV1().Services("").List(ctx, metav1.ListOptions{Limit: 500, Continue: cont})
		if err != nil {
			return apiError(err, "list", "services", "", "join the rules with their Services")
		}
		for i := range svcs.Items {
			if err := l.add("v1", "Service", redactService(&svcs.Items[i])); err != nil {
				return err
			}
		}
		if cont = svcs.Continue; cont == "" {
			return nil
		}
	}
}

func (l *objectList) addSlices(ctx context.Context, client kubernetes.Interface) error {
	var cont string
	for {
		slices, err := client.DiscoveryV1().EndpointSlices("").List(ctx, metav1.ListOptions{Limit: 500, Continue: cont})
		if err != nil {
			return apiError(err, "list", "endpointslices.discovery.k8s.io", "", "compare the rules with the endpoints")
		}
		for i := range slices.Items {
			if err := l.add("discovery.k8s.io/v1", "EndpointSlice", redactSlice(&slices.Items[i])); err != nil {
				return err
			}
		}
		if cont = slices.Continue; cont == "" {
			return nil
		}
	}
}
