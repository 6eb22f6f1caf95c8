package collect

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
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
	// pod is nil when the node has none (--image reads the node anyway).
	pod *corev1.Pod
	// configMapName is the ConfigMap the pod mounts; configMap is nil when
	// it was not wanted or could not be read (configMapErr says why).
	configMapName string
	configMap     *corev1.ConfigMap
	configMapErr  error
}

// discoverKubeProxy finds the node's kube-proxy pod (its image is the
// default debug image) and, when the objects file or the metrics port
// wants it, its ConfigMap: fetched once, for both.
func (c *Collector) discoverKubeProxy(ctx context.Context, w *bundleWriter) (kubeProxy, error) {
	pod, err := c.findKubeProxyPod(ctx, w)
	if err != nil || pod == nil {
		return kubeProxy{}, err
	}
	kp := kubeProxy{pod: pod, configMapName: configMapName(pod)}
	if c.Objects == nil || c.MetricsPort == 0 {
		if c.Fleet != nil {
			kp.configMap, kp.configMapErr = c.Fleet.configMap(ctx, c.Client, kp.configMapName)
		} else {
			kp.configMap, kp.configMapErr = c.Client.CoreV1().ConfigMaps("kube-system").Get(ctx, kp.configMapName, metav1.GetOptions{})
			if kp.configMapErr == nil {
				kp.configMap.APIVersion, kp.configMap.Kind = "v1", "ConfigMap"
			}
		}
	}
	return kp, nil
}

// findKubeProxyPod finds the kube-proxy pod on the node, a running one
// first; nil, with a warning, when there is none but --image is given.
func (c *Collector) findKubeProxyPod(ctx context.Context, w *bundleWriter) (*corev1.Pod, error) {
	var pods *corev1.PodList
	var err error
	if c.Fleet != nil {
		pods = &corev1.PodList{}
		for _, p := range c.Fleet.proxyPods[c.Node] {
			pods.Items = append(pods.Items, *p)
		}
	} else {
		pods, err = c.Client.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + c.Node})
	}
	if err != nil {
		if c.Image != "" && c.Via == ViaDebugPod {
			w.warn("could not look for kube-proxy on the node (%v)", firstLine(err.Error()))
			return nil, nil
		}
		return nil, apiError(err, "list", "pods", "kube-system", "find the node's kube-proxy pod and its image")
	}
	var found []*corev1.Pod
	for i := range pods.Items {
		p := &pods.Items[i]
		if isKubeProxyPod(p) {
			found = append(found, p)
		}
	}
	sort.Slice(found, func(i, j int) bool { // a running one first
		return found[i].Status.Phase == corev1.PodRunning && found[j].Status.Phase != corev1.PodRunning
	})
	if len(found) == 0 {
		if c.Image == "" {
			return nil, &NoKubeProxyError{Node: c.Node}
		}
		w.warn("no kube-proxy pod on node %s: reading its rules with --image %s", c.Node, c.Image)
		return nil, nil
	}
	pod := found[0]
	if pod.Status.Phase != corev1.PodRunning {
		w.warn("kube-proxy pod %s on node %s is %s, not Running: the rules may be old", pod.Name, c.Node, pod.Status.Phase)
	}
	return pod, nil
}

// kubeProxyContainer is the container that runs kube-proxy.
func kubeProxyContainer(p *corev1.Pod) *corev1.Container {
	for i := range p.Spec.Containers {
		if p.Spec.Containers[i].Name == "kube-proxy" {
			return &p.Spec.Containers[i]
		}
	}
	for i := range p.Spec.Containers {
		if strings.Contains(p.Spec.Containers[i].Image, "kube-proxy") {
			return &p.Spec.Containers[i]
		}
	}
	if len(p.Spec.Containers) > 0 {
		return &p.Spec.Containers[0]
	}
	return nil
}

// configMapName is the ConfigMap kube-proxy's pod mounts its config from.
func configMapName(p *corev1.Pod) string {
	for _, v := range p.Spec.Volumes {
		if v.ConfigMap != nil && strings.Contains(v.ConfigMap.Name, "kube-proxy") {
			return v.ConfigMap.Name
		}
	}
	return "kube-proxy"
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

// writeObjects saves the Services, EndpointSlices, the Node, the kube-proxy
// pod and its ConfigMap as one v1 List (what --from-objects reads), and
// returns them as the analyses read them.
func (c *Collector) writeObjects(ctx context.Context, w *bundleWriter, node *corev1.Node, proxy kubeProxy) (*correlate.Objects, error) {
	c.Progress.Step("reading Services and EndpointSlices")
	list := &objectList{List: corev1.List{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "List"}}}
	add := list.add
	if err := list.addServicesAndSlices(ctx, c.Client); err != nil {
		return nil, err
	}
	if err := add("v1", "Node", redactNode(node)); err != nil {
		return nil, err
	}
	if proxy.pod != nil {
		if err := add("v1", "Pod", redactPod(proxy.pod)); err != nil {
			return nil, err
		}
		switch err := proxy.configMapErr; {
		case proxy.configMap != nil:
			cm, dropped := redactConfigMap(proxy.configMap)
			if len(dropped) > 0 {
				c.Progress.Step("kube-proxy's ConfigMap: kept its KubeProxyConfiguration, left out %s (may hold credentials)", strings.Join(dropped, ", "))
			}
			if err := add("v1", "ConfigMap", cm); err != nil {
				return nil, err
			}
		case IsNotFound(err):
			w.warn("kube-proxy's ConfigMap kube-system/%s not found: its settings come from /configz only", proxy.configMapName)
		case err != nil:
			w.warn("could not read kube-proxy's ConfigMap kube-system/%s: %s", proxy.configMapName, firstLine(err.Error()))
		}
	}
	data, err := json.Marshal(&list.List)
	if err != nil {
		return nil, err
	}
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

// addServicesAndSlices lists every Service and EndpointSlice, 500 a page.
func (l *objectList) addServicesAndSlices(ctx context.Context, client kubernetes.Interface) error {
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
			break
		}
	}
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
			break
		}
	}
	return nil
}
