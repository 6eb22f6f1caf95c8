package collect

import (
	"context"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// The debug pod runs the node's kube-proxy image as kube-proxy pulls it,
// never Never-pulled; on a control-plane node, read only when asked, it
// tolerates the control-plane taint.
func TestDebugPodFollowsKubeProxy(t *testing.T) {
	pulled := func(p corev1.PullPolicy) func(ds *appsv1.DaemonSet) {
		return func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.Containers[0].ImagePullPolicy = p }
	}
	tolerateAll := func(ds *appsv1.DaemonSet) { // as kubeadm's kube-proxy does
		ds.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	}
	controlPlane := testNodeObj(testNode, corev1.ConditionTrue)
	controlPlane.Labels = map[string]string{LabelControlPlane: ""}
	controlPlane.Spec.Taints = []corev1.Taint{{Key: LabelControlPlane, Effect: corev1.TaintEffectNoSchedule}}
	for _, tc := range []struct {
		name      string
		node      *corev1.Node
		ds        *appsv1.DaemonSet
		opts      Options
		wantImage string
		wantPull  corev1.PullPolicy
		wantCP    bool
	}{
		{"kube-proxy pulls IfNotPresent", nil, withDS(testDaemonSet("kube-proxy", testImage, "kube-proxy", nil), pulled(corev1.PullIfNotPresent)), Options{}, testImage, corev1.PullIfNotPresent, false},
		{"kube-proxy pulls Always", nil, withDS(testDaemonSet("kube-proxy", testImage, "kube-proxy", nil), pulled(corev1.PullAlways)), Options{}, testImage, corev1.PullAlways, false},
		{"kube-proxy's Never is not copied", nil, withDS(testDaemonSet("kube-proxy", testImage, "kube-proxy", nil), pulled(corev1.PullNever)), Options{}, testImage, corev1.PullIfNotPresent, false},
		{"--image", nil, withDS(testDaemonSet("kube-proxy", testImage, "kube-proxy", nil), pulled(corev1.PullAlways)), Options{Image: "example.com/tools:1.0"}, "example.com/tools:1.0", corev1.PullIfNotPresent, false},
		{"a control-plane node, asked for", controlPlane, withDS(testDaemonSet("kube-proxy", testImage, "kube-proxy", nil), tolerateAll), Options{IncludeControlPlane: true}, testImage, corev1.PullIfNotPresent, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node := tc.node
			if node == nil {
				node = testNodeObj(testNode, corev1.ConditionTrue)
			}
			e := newEnv(t, []runtime.Object{node, tc.ds, testConfigMap(), testService(), testSlice()}...)
			tc.opts.Node, tc.opts.Via = testNode, ViaDebugPod
			if _, err := e.collector(tc.opts).Collect(context.Background()); err != nil {
				t.Fatalf("Collect: %v", err)
			}
			if len(e.created) != 1 {
				t.Fatalf("%d pods created, want 1", len(e.created))
			}
			c := e.created[0].Spec.Containers[0]
			if c.Image != tc.wantImage || c.ImagePullPolicy != tc.wantPull {
				t.Errorf("image %s pulled %s, want %s pulled %s", c.Image, c.ImagePullPolicy, tc.wantImage, tc.wantPull)
			}
			cp := slices.ContainsFunc(e.created[0].Spec.Tolerations, func(t corev1.Toleration) bool { return t.Key == LabelControlPlane })
			if cp != tc.wantCP {
				t.Errorf("tolerates the control-plane taint: %v, want %v", cp, tc.wantCP)
			}
		})
	}
}
