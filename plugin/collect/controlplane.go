package collect

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// The labels and taint keys of control-plane nodes (kubeadm's, and the
// older "master" that other installers still set).
const (
	LabelControlPlane = "node-role.kubernetes.io/control-plane"
	LabelMaster       = "node-role.kubernetes.io/master"
)

// IncludeControlPlaneFlag is the flag that reads control-plane nodes too.
const IncludeControlPlaneFlag = "--include-control-plane"

// ControlPlaneReason says why node is a control-plane node (a label or a
// taint), or "" when it is not. The debug pod's host network reaches the
// node's loopback ports: on a control-plane node, etcd's and the API
// server's. The kubelet admits a pod with spec.nodeName whatever its
// NoSchedule taints, so tolerations are no gate: this check is.
func ControlPlaneReason(node *corev1.Node) string {
	for _, l := range []string{LabelControlPlane, LabelMaster} {
		if _, ok := node.Labels[l]; ok {
			return "label " + l
		}
	}
	for _, t := range node.Spec.Taints {
		if t.Key == LabelControlPlane || t.Key == LabelMaster {
			return fmt.Sprintf("taint %s:%s", t.Key, t.Effect)
		}
	}
	return ""
}

// ControlPlaneError is a control-plane node not read because
// --include-control-plane was not given.
type ControlPlaneError struct{ Node, Why string }

func (e *ControlPlaneError) Error() string {
	return fmt.Sprintf("node %s is a control-plane node (%s): a debug pod there, or an exec in its kube-proxy, could reach the control plane's loopback ports (etcd, the API server), so it is read only when asked: pass %s (a cluster admin's choice)", e.Node, e.Why, IncludeControlPlaneFlag)
}
