package collect

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Like kubectl's TestGenerateNodeDebugPod: the whole spec, field by field.
func TestDebugPod(t *testing.T) {
	container := func(image string, pull corev1.PullPolicy, sleep string) corev1.Container {
		return corev1.Container{
			Name: ContainerName, Image: image, ImagePullPolicy: pull, Command: []string{"sleep", sleep},
			SecurityContext: &corev1.SecurityContext{
				RunAsUser: ptr.To[int64](0), RunAsNonRoot: ptr.To(false),
				AllowPrivilegeEscalation: ptr.To(false), Privileged: ptr.To(false),
				Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN", "NET_RAW"}, Drop: []corev1.Capability{"ALL"}},
			},
			// Small requests; limits that bound it yet fit the biggest read.
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")},
			},
		}
	}
	spec := func(node string, deadline int64, c corev1.Container) corev1.PodSpec {
		return corev1.PodSpec{
			NodeName: node, HostNetwork: true, DNSPolicy: corev1.DNSClusterFirstWithHostNet,
			RestartPolicy: corev1.RestartPolicyNever, ActiveDeadlineSeconds: ptr.To(deadline),
			TerminationGracePeriodSeconds: ptr.To[int64](0), AutomountServiceAccountToken: ptr.To(false),
			EnableServiceLinks: ptr.To(false),
			// NoExecute (not-ready, unreachable) and cordoned: never every taint.
			Tolerations: []corev1.Toleration{
				{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
				{Key: "node.kubernetes.io/unschedulable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
			},
			SecurityContext: &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers:      []corev1.Container{c},
		}
	}
	long := "ip-10-0-1-7.eu-west-1.compute.internal.with-a-very-long-suffix-that-goes-on"
	tests := []struct {
		name string
		opts PodOptions
		want *corev1.Pod
	}{
		{
			name: "the node's kube-proxy image",
			opts: PodOptions{Node: "node-a", Namespace: "default", Image: "registry.k8s.io/kube-proxy:v1.37.2", DeadlineSeconds: 600, StartedBy: "alice", NameSuffix: "abcde"},
			want: &corev1.Pod{
				TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
				ObjectMeta: metav1.ObjectMeta{
					Name: "proxyrules-node-a-abcde", Namespace: "default",
					Labels:      map[string]string{LabelManagedBy: ManagedBy, LabelNode: "node-a"},
					Annotations: map[string]string{AnnotationStartedBy: "alice"},
				},
				Spec: spec("node-a", 600, container("registry.k8s.io/kube-proxy:v1.37.2", corev1.PullIfNotPresent, "600")),
			},
		},
		{
			name: "--image, --debug-namespace, default deadline, unknown user",
			opts: PodOptions{Node: "node-b", Namespace: "kube-system", Image: "nicolaka/netshoot", PullPolicy: corev1.PullAlways, NameSuffix: "zzzzz"},
			want: &corev1.Pod{
				TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
				ObjectMeta: metav1.ObjectMeta{
					Name: "proxyrules-node-b-zzzzz", Namespace: "kube-system",
					Labels: map[string]string{LabelManagedBy: ManagedBy, LabelNode: "node-b"},
				},
				Spec: spec("node-b", 600, container("nicolaka/netshoot", corev1.PullAlways, "600")),
			},
		},
		{
			name: "a long node name: the pod name stays a valid name, the label is left out",
			opts: PodOptions{Node: long, Namespace: "default", Image: "i", DeadlineSeconds: 60, NameSuffix: "q1w2e"},
			want: &corev1.Pod{
				TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
				ObjectMeta: metav1.ObjectMeta{
					Name: "proxyrules-ip-10-0-1-7.eu-west-1.compute.internal.with-a-q1w2e", Namespace: "default",
					Labels: map[string]string{LabelManagedBy: ManagedBy},
				},
				Spec: spec(long, 60, container("i", corev1.PullIfNotPresent, "60")),
			},
		},
	}
	tests = append(tests, struct {
		name string
		opts PodOptions
		want *corev1.Pod
	}{
		name: "a deadline above the bound is cut to an hour",
		opts: PodOptions{Node: "node-a", Namespace: DefaultDebugNamespace, Image: "i", DeadlineSeconds: 86400, StartedBy: "alice", NameSuffix: "abcde"},
		want: &corev1.Pod{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{
				Name: "proxyrules-node-a-abcde", Namespace: DefaultDebugNamespace,
				Labels:      map[string]string{LabelManagedBy: ManagedBy, LabelNode: "node-a"},
				Annotations: map[string]string{AnnotationStartedBy: "alice"},
			},
			Spec: spec("node-a", 3600, container("i", corev1.PullIfNotPresent, "3600")),
		},
	})
	controlPlane := spec("cp-1", 600, container("i", corev1.PullIfNotPresent, "600"))
	controlPlane.Tolerations = append(controlPlane.Tolerations,
		corev1.Toleration{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		corev1.Toleration{Key: "node-role.kubernetes.io/master", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
	tests = append(tests, struct {
		name string
		opts PodOptions
		want *corev1.Pod
	}{
		name: "--include-control-plane: its taints tolerated",
		opts: PodOptions{Node: "cp-1", Namespace: DefaultDebugNamespace, Image: "i", ControlPlane: true, NameSuffix: "abcde"},
		want: &corev1.Pod{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{
				Name: "proxyrules-cp-1-abcde", Namespace: DefaultDebugNamespace,
				Labels: map[string]string{LabelManagedBy: ManagedBy, LabelNode: "cp-1"},
			},
			Spec: controlPlane,
		},
	})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := DebugPod(tt.opts)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("DebugPod() (-want +got):\n%s", diff)
			}
			if len(got.Name) > 63 {
				t.Errorf("name %q is longer than 63", got.Name)
			}
		})
	}
}

func TestDebugPodRandomSuffix(t *testing.T) {
	defer func(f func() string) { nameSuffix = f }(nameSuffix)
	n := 0
	nameSuffix = func() string { n++; return []string{"aaaaa", "bbbbb"}[n-1] }
	a, b := DebugPod(PodOptions{Node: "n", Image: "i"}), DebugPod(PodOptions{Node: "n", Image: "i"})
	if a.Name != "proxyrules-n-aaaaa" || b.Name != "proxyrules-n-bbbbb" {
		t.Errorf("names %q, %q", a.Name, b.Name)
	}
}
