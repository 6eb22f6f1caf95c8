package collect

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
)

// Labels on every pod the plugin creates: `cleanup` finds leftovers by
// LabelManagedBy, and deletes nothing without it.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "kubectl-proxyrules"
	LabelNode      = "proxyrules.kubectl.io/node"
	// AnnotationStartedBy says who started the pod (the user's name as the
	// API server knows it, when SelfSubjectReview tells it) and from where.
	AnnotationStartedBy = "proxyrules.kubectl.io/started-by"
	ContainerName       = "proxyrules"
	// DefaultDebugNamespace is where debug pods run: the namespace
	// `kubectl apply -f deploy/` creates, with the RBAC and the admission
	// policy that let the plugin's users run only this pod there.
	DefaultDebugNamespace = "kubectl-proxyrules"
)

// Bounds of the debug pod's life (--pod-deadline): the admission policy of
// deploy/ refuses longer ones.
const (
	DefaultPodDeadline = 10 * time.Minute
	MinPodDeadline     = 30 * time.Second
	MaxPodDeadline     = time.Hour
)

// PodOptions say where and how to run the debug pod.
type PodOptions struct {
	Node      string
	Namespace string
	Image     string
	// PullPolicy is IfNotPresent for the node's own kube-proxy image: it
	// is cached there, so the pod starts without a registry (air-gapped).
	PullPolicy corev1.PullPolicy
	// Deadline bounds the pod's life (activeDeadlineSeconds) and its sleep:
	// a backstop should the plugin be killed before it deletes the pod.
	DeadlineSeconds int64
	StartedBy       string
	// ControlPlane adds the tolerations of control-plane nodes' taints
	// (--include-control-plane).
	ControlPlane bool
	// NameSuffix makes names unique; tests pin it.
	NameSuffix string
}

// nameSuffix is swapped in tests, like kubectl debug's nameSuffixFunc.
var nameSuffix = func() string { return rand.String(5) }

// DebugPod is the pod that reads a node's rules. It is a pure function of
// its options so that tests can compare it field by field.
//
// Why each setting:
//   - nodeName pins it to the node (no scheduler involved); it tolerates
//     NoExecute taints (not-ready and unreachable nodes can be read), a
//     cordoned node, and control-plane taints only when asked (see
//     Tolerations and ControlPlaneReason);
//   - hostNetwork: the rules live in the node's network namespace, and
//     kube-proxy's metrics listen on the node's 127.0.0.1:10249;
//   - capabilities NET_ADMIN (read nf_tables and, in IPVS mode, ipset save
//     over nfnetlink, which wants it for every message, and iptables'
//     get-entries socket option) and NET_RAW (the raw socket legacy iptables
//     reads through), everything else dropped, not privileged. No hostPID,
//     no host filesystem: the image's own iptables/nft read the kernel, so
//     nothing on the node is entered or mounted;
//   - root: capabilities of a non-root user do not survive exec without
//     ambient capabilities. The root filesystem stays writable because
//     iptables-wrapper in the kube-proxy image re-links iptables to the
//     backend it detects on first use;
//   - the container only sleeps; every command is an exec from the plugin
//     (see Allowed), and restartPolicy Never with activeDeadlineSeconds make
//     the kubelet kill it should it outlive the plugin;
//   - the runtime's default seccomp profile, and small requests with limits
//     that still fit the biggest read (nft list table ip nat of a 300k-rule
//     table peaks at some 835 MB, iptables-nft-save at 250 MB).
func DebugPod(o PodOptions) *corev1.Pod {
	suffix := o.NameSuffix
	if suffix == "" {
		suffix = nameSuffix()
	}
	name := "proxyrules-" + o.Node
	if len(name) > 63-6 {
		name = name[:63-6]
	}
	name = strings.TrimRight(name, "-.") + "-" + suffix
	pull := o.PullPolicy
	if pull == "" {
		pull = corev1.PullIfNotPresent
	}
	deadline := o.DeadlineSeconds
	if deadline <= 0 {
		deadline = int64(DefaultPodDeadline / time.Second)
	}
	deadline = min(deadline, int64(MaxPodDeadline/time.Second))
	labels := map[string]string{LabelManagedBy: ManagedBy}
	if len(o.Node) <= 63 {
		labels[LabelNode] = o.Node
	}
	var annotations map[string]string
	if o.StartedBy != "" {
		annotations = map[string]string{AnnotationStartedBy: o.StartedBy}
	}
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Namespace:   o.Namespace,
			Labels:      labels,
			Annotations: annotations,
		},
		Spec: corev1.PodSpec{
			NodeName:                      o.Node,
			HostNetwork:                   true,
			DNSPolicy:                     corev1.DNSClusterFirstWithHostNet,
			RestartPolicy:                 corev1.RestartPolicyNever,
			ActiveDeadlineSeconds:         ptr.To(deadline),
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			AutomountServiceAccountToken:  ptr.To(false),
			EnableServiceLinks:            ptr.To(false),
			Tolerations:                   Tolerations(o.ControlPlane),
			SecurityContext: &corev1.PodSecurityContext{
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name:            ContainerName,
				Image:           o.Image,
				ImagePullPolicy: pull,
				Command:         []string{"sleep", strconv.FormatInt(deadline, 10)},
				SecurityContext: &corev1.SecurityContext{
					RunAsUser:                ptr.To[int64](0),
					RunAsNonRoot:             ptr.To(false),
					AllowPrivilegeEscalation: ptr.To(false),
					Privileged:               ptr.To(false),
					Capabilities: &corev1.Capabilities{
						Add:  []corev1.Capability{"NET_ADMIN", "NET_RAW"},
						Drop: []corev1.Capability{"ALL"},
					},
				},
				Resources: PodResources(),
			}},
		},
	}
}

// Tolerations are the debug pod's: every NoExecute taint (the kubelet
// would evict it from a not-ready or unreachable node, the very nodes worth
// reading), a cordoned node's, and, with controlPlane, control-plane
// nodes' (never "every taint": a pod that tolerates all reaches where it
// was not meant to).
func Tolerations(controlPlane bool) []corev1.Toleration {
	t := []corev1.Toleration{
		{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
		{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	}
	if controlPlane {
		for _, key := range []string{LabelControlPlane, LabelMaster} {
			t = append(t, corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
		}
	}
	return t
}

// PodResources are the debug pod's requests and limits.
func PodResources() corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")},
	}
}

// PodDone says whether a debug pod is no longer of use to any run, and why:
// it finished (the kubelet stopped it), or it is past its deadline
// (activeDeadlineSeconds since it was made, should no kubelet have stopped
// it). A pod that is neither may belong to a run in progress.
func PodDone(p *corev1.Pod, now time.Time) (bool, string) {
	switch p.Status.Phase {
	case corev1.PodSucceeded, corev1.PodFailed:
		return true, strings.ToLower(string(p.Status.Phase))
	}
	if p.DeletionTimestamp != nil {
		return true, "being deleted"
	}
	if d := p.Spec.ActiveDeadlineSeconds; d != nil && !p.CreationTimestamp.IsZero() {
		if end := p.CreationTimestamp.Add(time.Duration(*d) * time.Second); now.After(end) {
			return true, fmt.Sprintf("past its deadline by %s", now.Sub(end).Round(time.Second))
		}
		return false, fmt.Sprintf("running, deadline in %s", p.CreationTimestamp.Add(time.Duration(*d)*time.Second).Sub(now).Round(time.Second))
	}
	return false, "running, no deadline"
}
