package collect

import (
	"context"
	"fmt"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// The node's kube-proxy image comes from the DaemonSet that runs kube-proxy
// there, not from its pod: listing kube-system's pods would show every
// system pod's spec and env, which may hold secrets, so the default Role
// grants list on DaemonSets in kube-system, not on pods.

// proxyLabel is kubeadm's label on kube-proxy's DaemonSet and pods.
const proxyLabel = "k8s-app=kube-proxy"

// listProxyDaemonSets lists kube-system's kube-proxy DaemonSets, by name:
// those labelled k8s-app=kube-proxy (kubeadm, EKS, kind), else, when none
// is, those whose template has a container named kube-proxy (AKS labels
// them component=kube-proxy). Clusters run several pools (one DaemonSet per
// mode or per node group, told apart by nodeSelector).
func listProxyDaemonSets(ctx context.Context, client kubernetes.Interface) ([]*appsv1.DaemonSet, error) {
	list, err := client.AppsV1().DaemonSets("kube-system").List(ctx, metav1.ListOptions{LabelSelector: proxyLabel})
	if err != nil {
		return nil, err
	}
	labelled := len(list.Items) > 0
	if !labelled {
		if list, err = client.AppsV1().DaemonSets("kube-system").List(ctx, metav1.ListOptions{}); err != nil {
			return nil, err
		}
	}
	var out []*appsv1.DaemonSet
	for i := range list.Items {
		ds := &list.Items[i]
		if c := proxyContainer(&ds.Spec.Template.Spec); labelled || c != nil && c.Name == "kube-proxy" {
			out = append(out, ds)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// daemonSetFor is the DaemonSet whose pod the node runs, and the names of
// any other that would run one there too (a misconfiguration: the first by
// name is taken).
func daemonSetFor(node *corev1.Node, sets []*appsv1.DaemonSet) (*appsv1.DaemonSet, []string) {
	var found *appsv1.DaemonSet
	var others []string
	for _, ds := range sets {
		if !runsOn(ds, node) {
			continue
		}
		if found == nil {
			found = ds
		} else {
			others = append(others, ds.Name)
		}
	}
	return found, others
}

// runsOn says whether the DaemonSet controller places a pod of ds on node:
// its nodeName, nodeSelector and required node affinity match the node, and
// its tolerations, with those the controller adds to every daemon pod,
// tolerate the node's NoSchedule and NoExecute taints (as the controller's
// NodeShouldRunDaemonPod).
func runsOn(ds *appsv1.DaemonSet, node *corev1.Node) bool {
	spec := &ds.Spec.Template.Spec
	if spec.NodeName != "" && spec.NodeName != node.Name {
		return false
	}
	if !labels.SelectorFromSet(spec.NodeSelector).Matches(labels.Set(node.Labels)) {
		return false
	}
	if a := spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		if !matchesNodeSelector(a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution, node) {
			return false
		}
	}
	tolerations := append(daemonTolerations(spec.HostNetwork), spec.Tolerations...)
	for i := range node.Spec.Taints {
		taint := &node.Spec.Taints[i]
		if taint.Effect != corev1.TaintEffectNoSchedule && taint.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		if !tolerates(tolerations, taint) {
			return false
		}
	}
	return true
}

func tolerates(tolerations []corev1.Toleration, taint *corev1.Taint) bool {
	for i := range tolerations {
		if tolerations[i].ToleratesTaint(klog.Background(), taint, true) {
			return true
		}
	}
	return false
}

// daemonTolerations are what the DaemonSet controller adds to every daemon
// pod (AddOrUpdateDaemonPodTolerations).
func daemonTolerations(hostNetwork bool) []corev1.Toleration {
	t := []corev1.Toleration{
		{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
		{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
		{Key: corev1.TaintNodeDiskPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		{Key: corev1.TaintNodeMemoryPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		{Key: corev1.TaintNodePIDPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	}
	if hostNetwork {
		t = append(t, corev1.Toleration{Key: corev1.TaintNodeNetworkUnavailable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
	}
	return t
}

// matchesNodeSelector is a required node affinity: any of its terms, each
// term all of its expressions (labels) and fields (metadata.name only); a
// term with neither matches no node, a term that does not parse neither
// (component-helpers' nodeaffinity, which this module does not import).
func matchesNodeSelector(ns *corev1.NodeSelector, node *corev1.Node) bool {
	for _, term := range ns.NodeSelectorTerms {
		if len(term.MatchExpressions) == 0 && len(term.MatchFields) == 0 {
			continue
		}
		if matchRequirements(term.MatchExpressions, labels.Set(node.Labels)) &&
			matchRequirements(term.MatchFields, labels.Set{"metadata.name": node.Name}) {
			return true
		}
	}
	return false
}

var nodeSelectorOps = map[corev1.NodeSelectorOperator]selection.Operator{
	corev1.NodeSelectorOpIn: selection.In, corev1.NodeSelectorOpNotIn: selection.NotIn,
	corev1.NodeSelectorOpExists: selection.Exists, corev1.NodeSelectorOpDoesNotExist: selection.DoesNotExist,
	corev1.NodeSelectorOpGt: selection.GreaterThan, corev1.NodeSelectorOpLt: selection.LessThan,
}

func matchRequirements(reqs []corev1.NodeSelectorRequirement, set labels.Set) bool {
	for _, r := range reqs {
		op, ok := nodeSelectorOps[r.Operator]
		if !ok {
			return false
		}
		req, err := labels.NewRequirement(r.Key, op, r.Values)
		if err != nil || !req.Matches(set) {
			return false
		}
	}
	return true
}

// rolloutPending says, when the DaemonSet's rollout is not finished, that
// the node may still run the previous kube-proxy image; "" when it is.
func rolloutPending(ds *appsv1.DaemonSet) string {
	st := ds.Status
	switch {
	case st.ObservedGeneration < ds.Generation:
		return fmt.Sprintf("DaemonSet kube-system/%s changed (generation %d) and its controller has not acted on it yet (generation %d)", ds.Name, ds.Generation, st.ObservedGeneration)
	case st.UpdatedNumberScheduled < st.DesiredNumberScheduled:
		return fmt.Sprintf("DaemonSet kube-system/%s is rolling out: %d of %d pods run its current template", ds.Name, st.UpdatedNumberScheduled, st.DesiredNumberScheduled)
	}
	return ""
}

// templatePod is the pod ds runs: its template, as the controller names
// its namespace.
func templatePod(ds *appsv1.DaemonSet) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: *ds.Spec.Template.ObjectMeta.DeepCopy(), Spec: *ds.Spec.Template.Spec.DeepCopy()}
	p.Namespace = ds.Namespace
	if p.Name == "" {
		p.Name = ds.Name
	}
	return p
}

// proxyContainer is the container of spec that runs kube-proxy.
func proxyContainer(spec *corev1.PodSpec) *corev1.Container {
	for i := range spec.Containers {
		if spec.Containers[i].Name == "kube-proxy" {
			return &spec.Containers[i]
		}
	}
	for i := range spec.Containers {
		if strings.Contains(spec.Containers[i].Image, "kube-proxy") {
			return &spec.Containers[i]
		}
	}
	if len(spec.Containers) > 0 {
		return &spec.Containers[0]
	}
	return nil
}
