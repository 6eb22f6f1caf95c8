package collect

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/inspect/kpconfig"
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
	DebugNamespace string
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
	Objects     *correlate.Objects
	MetricsPort int // kube-proxy's metrics port, 10249 by default
}

// Collector writes a bundle of one node into Dir.
type Collector struct {
	Client   kubernetes.Interface
	Runner   Runner
	Progress *Progress
	Options
	Dir string

	man      Manifest
	objects  *correlate.Objects
	proxyPod *corev1.Pod
	// kube-proxy's ConfigMap, fetched once (kubeProxyConfigMap).
	cm        *corev1.ConfigMap
	cmErr     error
	cmFetched bool
	now       func() time.Time
}

// Collect reads the node. The debug pod, if one was made, is deleted before
// Collect returns, whatever happened (the caller cancels ctx on Ctrl-C).
func (c *Collector) Collect(ctx context.Context) (man *Manifest, err error) {
	if c.now == nil {
		c.now = time.Now
	}
	if c.DebugNamespace == "" {
		c.DebugNamespace = "default"
	}
	c.man = Manifest{Node: c.Node, CollectedAt: c.now().UTC().Truncate(time.Second), Scope: "full"}
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return nil, err
	}
	node, err := c.Client.CoreV1().Nodes().Get(ctx, c.Node, metav1.GetOptions{})
	if err != nil {
		if IsNotFound(err) {
			return nil, fmt.Errorf("node %q not found: list them with kubectl get nodes", c.Node)
		}
		return nil, apiError(err, "get", "nodes", "", "check the node")
	}
	if err := c.findKubeProxy(ctx); err != nil {
		return nil, err
	}
	c.objects = c.Objects
	if c.objects == nil {
		if err := c.writeObjects(ctx, node); err != nil {
			return nil, err
		}
	}
	if c.MetricsPort == 0 {
		c.MetricsPort = c.metricsPortFromConfig(ctx)
	}
	via, err := c.chooseVia(ctx)
	if err != nil {
		return nil, err
	}
	c.man.Via = via
	var target Target
	switch via {
	case ViaKubeProxy:
		if c.proxyPod == nil {
			return nil, &NoKubeProxyError{Node: c.Node}
		}
		target = Target{Namespace: c.proxyPod.Namespace, Pod: c.proxyPod.Name, Container: kubeProxyContainer(c.proxyPod).Name}
		c.man.Image = kubeProxyContainer(c.proxyPod).Image
	default:
		if reason := notReady(node); reason != "" {
			return nil, fmt.Errorf("node %s is not Ready (%s): a debug pod cannot start there. Try --via kube-proxy if its kube-proxy still runs", c.Node, reason)
		}
		pod, err := c.startDebugPod(ctx)
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
	c.man.Namespace, c.man.Pod = target.Namespace, target.Pod
	if err := c.read(ctx, target); err != nil {
		return nil, err
	}
	if err := WriteManifest(c.Dir, &c.man); err != nil {
		return nil, err
	}
	return &c.man, nil
}

func notReady(n *corev1.Node) string {
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			if cond.Status == corev1.ConditionTrue {
				return ""
			}
			return strings.TrimSpace(cond.Reason + " " + cond.Message)
		}
	}
	return "" // no condition reported: let the pod try
}

// findKubeProxy finds the kube-proxy pod on the node: its image is the
// default debug image, its config map holds kube-proxy's configuration.
func (c *Collector) findKubeProxy(ctx context.Context) error {
	pods, err := c.Client.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + c.Node})
	if err != nil {
		if c.Image != "" && c.Via == ViaDebugPod {
			c.warn("could not look for kube-proxy on the node (%v)", firstLine(err.Error()))
			return nil
		}
		return apiError(err, "list", "pods", "kube-system", "find the node's kube-proxy pod and its image")
	}
	var found []*corev1.Pod
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Labels["k8s-app"] == "kube-proxy" || kubeProxyContainer(p) != nil && kubeProxyContainer(p).Name == "kube-proxy" {
			found = append(found, p)
		}
	}
	sort.Slice(found, func(i, j int) bool { // a running one first
		return found[i].Status.Phase == corev1.PodRunning && found[j].Status.Phase != corev1.PodRunning
	})
	if len(found) == 0 {
		if c.Image == "" {
			return &NoKubeProxyError{Node: c.Node}
		}
		c.warn("no kube-proxy pod on node %s: reading its rules with --image %s", c.Node, c.Image)
		return nil
	}
	c.proxyPod = found[0]
	if c.proxyPod.Status.Phase != corev1.PodRunning {
		c.warn("kube-proxy pod %s on node %s is %s, not Running: the rules may be old", c.proxyPod.Name, c.Node, c.proxyPod.Status.Phase)
	}
	return nil
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

// metricsPortFromConfig reads metricsBindAddress from kube-proxy's
// ConfigMap; 10249, kube-proxy's default, when it cannot.
func (c *Collector) metricsPortFromConfig(ctx context.Context) int {
	if c.proxyPod == nil {
		return 10249
	}
	cm, err := c.kubeProxyConfigMap(ctx)
	if err != nil {
		return 10249
	}
	data, err := json.Marshal(cm)
	if err != nil {
		return 10249
	}
	cfg, err := kpconfig.Parse(bytes.NewReader(data), "configmap")
	if err != nil {
		return 10249
	}
	_, port, err := net.SplitHostPort(cfg.MetricsBindAddress)
	if n, perr := strconv.Atoi(port); err == nil && perr == nil && n > 0 {
		return n
	}
	return 10249
}

// kubeProxyConfigMap fetches the ConfigMap of the node's kube-proxy pod,
// once: the objects file and the metrics port both want it.
func (c *Collector) kubeProxyConfigMap(ctx context.Context) (*corev1.ConfigMap, error) {
	if !c.cmFetched {
		c.cmFetched = true
		c.cm, c.cmErr = c.Client.CoreV1().ConfigMaps("kube-system").Get(ctx, configMapName(c.proxyPod), metav1.GetOptions{})
		if c.cmErr == nil {
			c.cm.APIVersion, c.cm.Kind = "v1", "ConfigMap"
		}
	}
	return c.cm, c.cmErr
}

// configMapName is the ConfigMap kube-proxy's pod mounts its config from.
func configMapName(p *corev1.Pod) string {
	if p != nil {
		for _, v := range p.Spec.Volumes {
			if v.ConfigMap != nil && strings.Contains(v.ConfigMap.Name, "kube-proxy") {
				return v.ConfigMap.Name
			}
		}
	}
	return "kube-proxy"
}

// writeObjects saves the Services, EndpointSlices, the Node, the kube-proxy
// pod and its ConfigMap as one v1 List (what --from-objects reads).
func (c *Collector) writeObjects(ctx context.Context, node *corev1.Node) error {
	c.Progress.Step("reading Services and EndpointSlices")
	list := &corev1.List{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "List"}}
	add := func(apiVersion, kind string, obj runtime.Object) error {
		obj.GetObjectKind().SetGroupVersionKind(schema.FromAPIVersionAndKind(apiVersion, kind))
		data, err := json.Marshal(obj)
		if err != nil {
			return err
		}
		list.Items = append(list.Items, runtime.RawExtension{Raw: data})
		return nil
	}
	var cont string
	for {
		svcs, err := c.Client.CoreV1().Services("").List(ctx, metav1.ListOptions{Limit: 500, Continue: cont})
		if err != nil {
			return apiError(err, "list", "services", "", "join the rules with their Services")
		}
		for i := range svcs.Items {
			if err := add("v1", "Service", &svcs.Items[i]); err != nil {
				return err
			}
		}
		if cont = svcs.Continue; cont == "" {
			break
		}
	}
	for {
		slices, err := c.Client.DiscoveryV1().EndpointSlices("").List(ctx, metav1.ListOptions{Limit: 500, Continue: cont})
		if err != nil {
			return apiError(err, "list", "endpointslices.discovery.k8s.io", "", "compare the rules with the endpoints")
		}
		for i := range slices.Items {
			if err := add("discovery.k8s.io/v1", "EndpointSlice", &slices.Items[i]); err != nil {
				return err
			}
		}
		if cont = slices.Continue; cont == "" {
			break
		}
	}
	if err := add("v1", "Node", node.DeepCopy()); err != nil {
		return err
	}
	if c.proxyPod != nil {
		if err := add("v1", "Pod", c.proxyPod.DeepCopy()); err != nil {
			return err
		}
		name := configMapName(c.proxyPod)
		cm, err := c.kubeProxyConfigMap(ctx)
		switch {
		case err == nil:
			if err := add("v1", "ConfigMap", cm); err != nil {
				return err
			}
		case IsNotFound(err):
			c.warn("kube-proxy's ConfigMap kube-system/%s not found: its settings come from /configz only", name)
		default:
			c.warn("could not read kube-proxy's ConfigMap kube-system/%s: %s", name, firstLine(err.Error()))
		}
	}
	data, err := json.Marshal(list)
	if err != nil {
		return err
	}
	objs, err := correlate.ReadObjects(bytes.NewReader(data), "objects.json")
	if err != nil {
		return err
	}
	c.objects = objs
	return c.writeFile("objects.json", KindObjects, "kubectl get services,endpointslices -A; node; kube-proxy pod and ConfigMap", data)
}

func (c *Collector) writeFile(name, kind, command string, data []byte) error {
	if err := os.WriteFile(filepath.Join(c.Dir, name), data, 0o644); err != nil {
		return err
	}
	c.man.Files = append(c.man.Files, BundleFile{Path: name, Kind: kind, Command: command, Bytes: int64(len(data))})
	return nil
}

func (c *Collector) warn(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	c.man.Warnings = append(c.man.Warnings, msg)
	c.Progress.Warning(msg)
}

// chooseVia decides how to reach the node. auto asks the API server what
// the user may do (SelfSubjectAccessReview) and prefers the debug pod.
func (c *Collector) chooseVia(ctx context.Context) (string, error) {
	switch c.Via {
	case ViaDebugPod, ViaKubeProxy:
		return c.Via, nil
	}
	var missing []string
	podOK := c.canI(ctx, "create", "pods", "", c.DebugNamespace, &missing) &&
		c.canI(ctx, "create", "pods", "exec", c.DebugNamespace, &missing) &&
		c.canI(ctx, "get", "pods", "", c.DebugNamespace, &missing) &&
		c.canI(ctx, "delete", "pods", "", c.DebugNamespace, &missing)
	if podOK {
		return ViaDebugPod, nil
	}
	if c.proxyPod != nil && c.canI(ctx, "create", "pods", "exec", c.proxyPod.Namespace, &missing) {
		c.Progress.Step("no rights for a debug pod in %s: using --via kube-proxy", c.DebugNamespace)
		return ViaKubeProxy, nil
	}
	return "", fmt.Errorf("you may neither run a debug pod nor exec into kube-proxy: missing %s. "+
		"Ask for the ClusterRole in %s of kubectl-proxyrules (or check with kubectl auth can-i)", strings.Join(missing, ", "), RBACFile)
}

func (c *Collector) canI(ctx context.Context, verb, resource, sub, ns string, missing *[]string) bool {
	r, err := c.Client.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authzv1.SelfSubjectAccessReview{
		Spec: authzv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authzv1.ResourceAttributes{
			Namespace: ns, Verb: verb, Resource: resource, Subresource: sub,
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		return true // cannot ask: let the real request say
	}
	if !r.Status.Allowed {
		what := resource
		if sub != "" {
			what += "/" + sub
		}
		*missing = append(*missing, fmt.Sprintf("%q on %s in %s", verb, what, ns))
	}
	return r.Status.Allowed
}

// whoAmI is the user's name for the pod's started-by annotation.
func (c *Collector) whoAmI(ctx context.Context) string {
	r, err := c.Client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return ""
	}
	return r.Status.UserInfo.Username
}

// startDebugPod creates the pod and waits for it to run. The pod is returned
// even with an error once it exists, so that the caller deletes it.
func (c *Collector) startDebugPod(ctx context.Context) (*corev1.Pod, error) {
	image := c.Image
	pull := corev1.PullIfNotPresent
	if image == "" {
		if c.proxyPod == nil {
			return nil, &NoKubeProxyError{Node: c.Node}
		}
		image = kubeProxyContainer(c.proxyPod).Image
	}
	c.man.Image = image
	deadline := int64(c.Deadline / time.Second)
	spec := DebugPod(PodOptions{Node: c.Node, Namespace: c.DebugNamespace, Image: image, PullPolicy: pull, DeadlineSeconds: deadline, StartedBy: c.whoAmI(ctx)})
	c.Progress.Step("creating pod %s/%s on node %s (image %s)", c.DebugNamespace, spec.Name, c.Node, image)
	pod, err := c.Client.CoreV1().Pods(c.DebugNamespace).Create(ctx, spec, metav1.CreateOptions{})
	if err != nil && ctx.Err() != nil {
		// Interrupted while the request was out: the pod may exist. Its
		// name is ours, so the caller deletes it by name.
		return spec, ctx.Err()
	}
	if err != nil {
		return nil, apiError(err, "create", "pods", c.DebugNamespace, "run the debug pod that reads the node's rules (or use --via kube-proxy)")
	}
	c.Progress.Step("waiting for pod %s to run", pod.Name)
	timeout := c.StartTimeout
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		cur, err := c.Client.CoreV1().Pods(pod.Namespace).Get(wctx, pod.Name, metav1.GetOptions{})
		if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
			return pod, apiError(err, "get", "pods", pod.Namespace, "watch the debug pod start")
		}
		if err == nil {
			pod = cur
			if running(pod) {
				return pod, nil
			}
			if why := podFailed(pod); why != "" {
				return pod, fmt.Errorf("debug pod %s/%s on node %s cannot run: %s", pod.Namespace, pod.Name, c.Node, why)
			}
		}
		select {
		case <-wctx.Done():
			if ctx.Err() != nil {
				return pod, ctx.Err()
			}
			return pod, fmt.Errorf("debug pod %s/%s did not start on node %s within %s: %s", pod.Namespace, pod.Name, c.Node, timeout, c.whyPending(pod))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func running(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == ContainerName && s.State.Running != nil {
			return true
		}
	}
	return len(p.Status.ContainerStatuses) == 0 // a kubelet that reports no container status
}

// podFailed says why a pod will never run, or "".
func podFailed(p *corev1.Pod) string {
	if p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
		return strings.TrimSpace(fmt.Sprintf("pod %s: %s %s", p.Status.Phase, p.Status.Reason, p.Status.Message))
	}
	for _, s := range p.Status.ContainerStatuses {
		if w := s.State.Waiting; w != nil {
			switch w.Reason {
			case "ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull":
				return fmt.Sprintf("image %s cannot be pulled (%s: %s). The default is the node's own kube-proxy image, which is normally cached there; pass --image with an image the node can pull", s.Image, w.Reason, w.Message)
			case "CreateContainerConfigError", "CreateContainerError", "RunContainerError":
				return fmt.Sprintf("%s: %s", w.Reason, w.Message)
			}
		}
		if t := s.State.Terminated; t != nil {
			return fmt.Sprintf("container exited (%s, code %d): %s. --image must have a sleep command", t.Reason, t.ExitCode, t.Message)
		}
	}
	return ""
}

// whyPending collects what the pod's status and events say.
func (c *Collector) whyPending(p *corev1.Pod) string {
	var why []string
	for _, cond := range p.Status.Conditions {
		if cond.Status != corev1.ConditionTrue && cond.Message != "" {
			why = append(why, fmt.Sprintf("%s: %s", cond.Type, cond.Message))
		}
	}
	for _, s := range p.Status.ContainerStatuses {
		if w := s.State.Waiting; w != nil {
			why = append(why, strings.TrimSpace(w.Reason+" "+w.Message))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	evs, err := c.Client.CoreV1().Events(p.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + p.Name})
	if err == nil {
		for _, e := range evs.Items {
			if e.Type == corev1.EventTypeWarning {
				why = append(why, e.Reason+": "+e.Message)
			}
		}
	}
	if len(why) == 0 {
		return fmt.Sprintf("phase %s, no events (is the node's kubelet running? taints and resources do not apply: the pod tolerates every taint and requests nothing)", p.Status.Phase)
	}
	return strings.Join(why, "; ")
}

// deletePod deletes the debug pod now, whatever the caller's context says.
func (c *Collector) deletePod(p *corev1.Pod) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := c.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
	if err != nil && !IsNotFound(err) {
		return fmt.Errorf("could not delete debug pod %s/%s (%v): delete it with `kubectl proxyrules cleanup`; its activeDeadlineSeconds stops it in any case", p.Namespace, p.Name, firstLine(err.Error()))
	}
	c.Progress.Step("deleted pod %s/%s", p.Namespace, p.Name)
	return nil
}

// read probes the node, then reads what the scope needs.
func (c *Collector) read(ctx context.Context, t Target) error {
	probe, err := c.probe(ctx, t)
	if err != nil {
		return err
	}
	c.man.ProxyMode, c.man.Backend = probe.ProxyMode, probe.Backend
	done := false
	if c.ServiceName != "" {
		if done, err = c.readService(ctx, t, probe); err != nil {
			return err
		}
	}
	if !done {
		if err := c.runToFiles(ctx, t, FullPlan(probe, c.Reader), "reading the node's rules"); err != nil {
			return err
		}
	}
	for _, ep := range []struct{ path, file, kind string }{
		{"/metrics", "metrics.txt", KindMetrics},
		{"/configz", "configz.json", KindConfig},
	} {
		var buf bytes.Buffer
		start := time.Now()
		if err := c.Runner.Get(ctx, t, c.MetricsPort, ep.path, &buf); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			c.warn("kube-proxy's %s did not answer: %s (kube-proxy serves it on metricsBindAddress, 127.0.0.1:%d by default; counts and config checks are skipped)", ep.path, firstLine(err.Error()), c.MetricsPort)
			continue
		}
		if err := c.writeFile(ep.file, ep.kind, "GET 127.0.0.1:"+fmt.Sprint(c.MetricsPort)+ep.path, buf.Bytes()); err != nil {
			return err
		}
		c.man.Files[len(c.man.Files)-1].Seconds = time.Since(start).Seconds()
	}
	return nil
}

// probe learns the proxy mode and the iptables backend in one exec.
func (c *Collector) probe(ctx context.Context, t Target) (Probe, error) {
	c.Progress.Step("probing the node (iptables backend, nftables tables, proxy mode)")
	var p Probe
	var mode bytes.Buffer
	if err := c.Runner.Get(ctx, t, c.MetricsPort, "/proxyMode", &mode); err == nil {
		p.ProxyMode = strings.TrimSpace(mode.String())
		if err := c.writeFile("proxymode.txt", KindProxyMode, fmt.Sprintf("GET 127.0.0.1:%d/proxyMode", c.MetricsPort), mode.Bytes()); err != nil {
			return p, err
		}
	} else if ctx.Err() != nil {
		return p, ctx.Err()
	} else {
		c.Progress.Step("kube-proxy's /proxyMode did not answer (%s): asking nft which tables exist, which takes long on big nodes", firstLine(err.Error()))
	}
	// `nft list tables` loads the whole ruleset (minutes for 380k rules
	// of iptables-nft): it runs only when kube-proxy did not say its mode.
	// iptables-nft -S of one small chain is instant and says whether
	// kube-proxy wrote rules through iptables-nft.
	const version, nftVersion, natV4, natV6, tables = 0, 1, 2, 3, 4 // indices in cmds
	cmds := []NodeCommand{IPTablesVersion("iptables"), NFTVersion(),
		ListChain("iptables-nft", "nat", "KUBE-POSTROUTING"), ListChain("ip6tables-nft", "nat", "KUBE-POSTROUTING")}
	if p.ProxyMode == "" {
		cmds = append(cmds, NFTTables())
	}
	outs := make([]bytes.Buffer, len(cmds))
	rcs := make([]int, len(cmds))
	for i := range rcs {
		rcs[i] = -1
	}
	stderr, err := c.Runner.Run(ctx, t, cmds, Sink{
		Open: func(i int) (io.Writer, error) { return &outs[i], nil },
		Done: func(i, rc int) { rcs[i] = rc },
	})
	if err != nil {
		return p, c.execError(ctx, err, t, stderr)
	}
	p.Backend = ParseIPTablesVersion(outs[version].String())
	p.NFTKnown = rcs[nftVersion] == 0
	switch {
	case len(cmds) > tables && rcs[tables] == 0:
		p.NFTTables = ParseNFTTables(outs[tables].String())
	case p.NFTKnown:
		// The tables kube-proxy's mode implies, and iptables-nft's where
		// its KUBE-SERVICES chain exists.
		p.guessed = true
		if p.ProxyMode == "nftables" {
			p.NFTTables = append(p.NFTTables, "ip kube-proxy", "ip6 kube-proxy")
		}
		for i, fam := range []string{"ip", "ip6"} {
			if rcs[natV4+i] == 0 {
				p.NFTTables = append(p.NFTTables, fam+" filter", fam+" mangle", fam+" nat")
			}
		}
		sort.Strings(p.NFTTables)
	}
	if p.ProxyMode == "" {
		switch {
		case p.hasNFT("ip", "kube-proxy") || p.hasNFT("ip6", "kube-proxy"):
			p.ProxyMode = "nftables"
		}
	}
	return p, nil
}

func (c *Collector) execError(ctx context.Context, err error, t Target, stderr string) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	msg := err.Error()
	// Through the WebSocket upgrade a refusal arrives as text, not a Status.
	if apierrors.IsForbidden(err) || strings.Contains(msg, "is forbidden") {
		verb := "create"
		if strings.Contains(msg, "cannot get resource") {
			verb = "get" // the WebSocket upgrade is a GET
		}
		return &Forbidden{Verb: verb, Resource: "pods/exec", Namespace: t.Namespace, Why: "run the read commands in pod " + t.Pod,
			Hint: "Exec needs both get (WebSocket) and create (SPDY) on pods/exec", Err: err}
	}
	msg = firstLine(msg)
	if s := strings.TrimSpace(stderr); s != "" {
		msg += ": " + firstLine(s)
	}
	return fmt.Errorf("exec in %s/%s failed: %s", t.Namespace, t.Pod, msg)
}

// runToFiles runs cmds in one exec, streaming each output into its file.
// A failed nft -j (an nft built without JSON) is retried as text.
func (c *Collector) runToFiles(ctx context.Context, t Target, cmds []NodeCommand, what string) error {
	c.Progress.Step("%s (%d commands in one exec)", what, len(cmds))
	files := make([]*os.File, len(cmds))
	counters := make([]*countingWriter, len(cmds))
	starts := make([]time.Time, len(cmds))
	rcs := make([]int, len(cmds))
	for i := range rcs {
		rcs[i] = -1
	}
	defer func() {
		for _, f := range files {
			if f != nil {
				f.Close()
			}
		}
	}()
	stderr, err := c.Runner.Run(ctx, t, cmds, Sink{
		Open: func(i int) (io.Writer, error) {
			f, err := os.Create(filepath.Join(c.Dir, cmds[i].FileName()))
			if err != nil {
				return nil, err
			}
			files[i], starts[i] = f, time.Now()
			counters[i] = &countingWriter{w: f, progress: c.Progress, label: strings.Join(cmds[i].Argv, " "), last: time.Now()}
			return counters[i], nil
		},
		Done: func(i, rc int) {
			rcs[i] = rc
			if counters[i] != nil {
				counters[i].finish(time.Since(starts[i]))
			}
		},
	})
	if err != nil {
		return c.execError(ctx, err, t, stderr)
	}
	var retry []NodeCommand
	for i, cmd := range cmds {
		bf := BundleFile{Path: cmd.FileName(), Kind: cmd.Kind, Command: strings.Join(cmd.Argv, " ")}
		if counters[i] != nil {
			bf.Bytes, bf.Seconds = counters[i].n, counters[i].seconds
		}
		if rcs[i] != 0 {
			status := fmt.Sprintf("exit status %d", rcs[i])
			bf.Error = status
			if len(cmd.Fallback) > 0 {
				var names []string
				for _, f := range cmd.Fallback {
					f.Optional = f.Optional || cmd.Optional
					retry = append(retry, f)
					names = append(names, strings.Join(f.Argv, " "))
				}
				bf.Error += " (read again with " + strings.Join(names, ", ") + ")"
				bf.Kind = KindFailed // kept for the record, not read
				if !cmd.Optional {
					c.warn("%s failed (%s)%s: reading with %s instead", bf.Command, status, stderrHint(stderr), strings.Join(names, ", "))
				}
			} else if bf.Bytes == 0 && !cmd.Optional {
				c.warn("%s failed (%s)%s", bf.Command, bf.Error, stderrHint(stderr))
			}
		}
		c.man.Files = append(c.man.Files, bf)
	}
	if len(retry) > 0 {
		return c.runToFiles(ctx, t, retry, "reading again what failed")
	}
	return nil
}

func stderrHint(stderr string) string {
	if s := strings.TrimSpace(stderr); s != "" {
		return ": " + firstLine(s)
	}
	return ""
}

// countingWriter counts bytes and reports progress for big outputs.
type countingWriter struct {
	w        io.Writer
	n        int64
	progress *Progress
	label    string
	last     time.Time
	seconds  float64
}

func (cw *countingWriter) Write(p []byte) (int, error) {
	n, err := cw.w.Write(p)
	cw.n += int64(n)
	if time.Since(cw.last) > time.Second {
		cw.last = time.Now()
		cw.progress.Bytes(cw.label, cw.n)
	}
	return n, err
}

func (cw *countingWriter) finish(d time.Duration) {
	cw.seconds = d.Seconds()
	cw.progress.Done(cw.label, cw.n, d)
}
