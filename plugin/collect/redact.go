package collect

import (
	"sort"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// A bundle is attached to tickets and read by strangers: it keeps of each
// object what the analyses read and nothing that may be a credential.
// managedFields and annotations (kubectl's last-applied-configuration
// holds whole objects) go from every object; the kube-proxy Pod keeps its
// image, node, labels, container names and ports (no env, no command, no
// volumes); the Node its labels, addresses, conditions and pod CIDRs; the
// ConfigMap only its KubeProxyConfiguration (kubeadm's kubeconfig.conf, and
// any other key, may embed a token or a client key).

// redactedMeta is the metadata every object keeps.
func redactedMeta(m metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: m.Name, Namespace: m.Namespace, UID: m.UID, Labels: m.Labels,
		CreationTimestamp: m.CreationTimestamp, DeletionTimestamp: m.DeletionTimestamp,
	}
}

func redactService(s *corev1.Service) *corev1.Service {
	out := s.DeepCopy()
	out.ObjectMeta = redactedMeta(s.ObjectMeta)
	return out
}

func redactSlice(s *discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
	out := s.DeepCopy()
	out.ObjectMeta = redactedMeta(s.ObjectMeta)
	return out
}

func redactNode(n *corev1.Node) *corev1.Node {
	out := &corev1.Node{ObjectMeta: redactedMeta(n.ObjectMeta)}
	out.Spec = corev1.NodeSpec{PodCIDR: n.Spec.PodCIDR, PodCIDRs: n.Spec.PodCIDRs, ProviderID: n.Spec.ProviderID, Unschedulable: n.Spec.Unschedulable, Taints: n.Spec.Taints}
	out.Status.Addresses = n.Status.Addresses
	out.Status.NodeInfo = corev1.NodeSystemInfo{KernelVersion: n.Status.NodeInfo.KernelVersion, OSImage: n.Status.NodeInfo.OSImage,
		ContainerRuntimeVersion: n.Status.NodeInfo.ContainerRuntimeVersion, KubeletVersion: n.Status.NodeInfo.KubeletVersion,
		OperatingSystem: n.Status.NodeInfo.OperatingSystem, Architecture: n.Status.NodeInfo.Architecture}
	for _, c := range n.Status.Conditions {
		out.Status.Conditions = append(out.Status.Conditions, corev1.NodeCondition{Type: c.Type, Status: c.Status, Reason: c.Reason})
	}
	return out
}

func redactPod(p *corev1.Pod) *corev1.Pod {
	out := &corev1.Pod{ObjectMeta: redactedMeta(p.ObjectMeta)}
	out.Spec.NodeName, out.Spec.HostNetwork = p.Spec.NodeName, p.Spec.HostNetwork
	for _, c := range p.Spec.Containers {
		out.Spec.Containers = append(out.Spec.Containers, corev1.Container{Name: c.Name, Image: c.Image, Ports: c.Ports})
	}
	out.Status.Phase = p.Status.Phase
	return out
}

// redactConfigMap keeps the data keys that hold a KubeProxyConfiguration,
// and reports the keys it dropped.
func redactConfigMap(cm *corev1.ConfigMap) (*corev1.ConfigMap, []string) {
	out := &corev1.ConfigMap{ObjectMeta: redactedMeta(cm.ObjectMeta)}
	var dropped []string
	for k, v := range cm.Data {
		var head struct {
			Kind string `json:"kind"`
		}
		if yaml.Unmarshal([]byte(v), &head) == nil && head.Kind == "KubeProxyConfiguration" {
			if out.Data == nil {
				out.Data = map[string]string{}
			}
			out.Data[k] = v
			continue
		}
		dropped = append(dropped, k)
	}
	for k := range cm.BinaryData {
		dropped = append(dropped, k)
	}
	sort.Strings(dropped)
	return out, dropped
}
