package collect

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// admission is the API server's side of a pod create as far as the guard
// check sees it: a dry run is never stored, and while the policy of
// deploy/ is in force a privileged pod is refused with its message.
type admission struct {
	inForce bool
	dryRuns []*corev1.Pod // the pods dry-run, in order
}

// install puts the admission in front of the fake's create of pods.
func (a *admission) install(client *fake.Clientset) *admission {
	client.PrependReactor("create", "pods", func(act k8stesting.Action) (bool, runtime.Object, error) {
		ca := act.(k8stesting.CreateActionImpl)
		pod := ca.GetObject().(*corev1.Pod)
		dryRun := len(ca.CreateOptions.DryRun) > 0
		if dryRun {
			a.dryRuns = append(a.dryRuns, pod.DeepCopy())
		}
		if a.inForce {
			if sc := pod.Spec.Containers[0].SecurityContext; sc != nil && sc.Privileged != nil && *sc.Privileged {
				return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, pod.Name,
					errors.New("ValidatingAdmissionPolicy 'kubectl-proxyrules-debug-pod' with binding 'kubectl-proxyrules-debug-pod' denied request: not privileged"))
			}
		}
		if !dryRun {
			return false, nil, nil // a real create: the tracker stores it
		}
		return true, pod, nil
	})
	return a
}

func TestGuardCheck(t *testing.T) {
	spec := DebugPod(PodOptions{Node: "node-a", Namespace: DefaultDebugNamespace, Image: "registry.k8s.io/kube-proxy:v1.37.2", StartedBy: "alice", NameSuffix: "x"})
	other := spec.DeepCopy()
	other.Namespace = "elsewhere"
	for _, tc := range []struct {
		name    string
		inForce bool
		skip    bool
		refuse  error // what the API server answers every create instead
		pods    []*corev1.Pod
		dryRuns int
		want    string // in the error; "" for none
	}{
		{name: "the policy is in force", inForce: true, pods: []*corev1.Pod{spec}, dryRuns: 1},
		{name: "checked once per namespace and run", inForce: true, pods: []*corev1.Pod{spec, spec, other, spec}, dryRuns: 2},
		{name: "no policy", pods: []*corev1.Pod{spec}, dryRuns: 1,
			want: "no admission policy guards namespace kubectl-proxyrules: the API server would admit a privileged pod there"},
		{name: "no policy: the answer is remembered", pods: []*corev1.Pod{spec, spec}, dryRuns: 1, want: "--skip-policy-check"},
		{name: "skipped", skip: true, pods: []*corev1.Pod{spec}, dryRuns: 0},
		{name: "RBAC refuses the create: the real create says so", pods: []*corev1.Pod{spec},
			refuse: apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "p", errors.New(`User "bob" cannot create resource "pods" in API group "" in the namespace "kubectl-proxyrules"`))},
		{name: "no such namespace: the real create says so", pods: []*corev1.Pod{spec},
			refuse: apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "kubectl-proxyrules")},
		{name: "a policy refuses with reason Invalid", pods: []*corev1.Pod{spec},
			refuse: apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "p", field.ErrorList{field.Invalid(field.NewPath("spec"), "", "ValidatingAdmissionPolicy 'x' denied request")})},
		{name: "the probe invalid before admission: no guard seen", pods: []*corev1.Pod{spec},
			refuse: apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "p", field.ErrorList{field.Required(field.NewPath("spec", "containers"), "")}), want: "spec.containers"},
		{name: "the API server fails", pods: []*corev1.Pod{spec},
			refuse: apierrors.NewInternalError(errors.New("etcd is down")), want: "etcd is down"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset()
			adm := (&admission{inForce: tc.inForce}).install(client)
			if tc.refuse != nil {
				client.PrependReactor("create", "pods", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, tc.refuse })
			}
			g := &GuardCheck{Skip: tc.skip}
			var err error
			for _, p := range tc.pods {
				if err = g.Check(context.Background(), client, p); err != nil {
					break
				}
			}
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Check: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Check: %v, want an error with %q", err, tc.want)
			}
			if len(adm.dryRuns) != tc.dryRuns {
				t.Errorf("%d dry runs, want %d", len(adm.dryRuns), tc.dryRuns)
			}
			for _, p := range adm.dryRuns {
				if sc := p.Spec.Containers[0].SecurityContext; !*sc.Privileged || sc.AllowPrivilegeEscalation != nil {
					t.Errorf("dry-run pod %s is not the privileged variant: %+v", p.Name, sc)
				}
			}
			if left, _ := client.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{}); len(left.Items) > 0 {
				t.Errorf("the check stored pod %s", left.Items[0].Name)
			}
		})
	}
}

// A nil GuardCheck checks every time; a cancelled check is not remembered.
func TestGuardCheckCancelled(t *testing.T) {
	spec := DebugPod(PodOptions{Node: "node-a", Namespace: DefaultDebugNamespace, Image: "i:1", NameSuffix: "x"})
	client := fake.NewClientset()
	adm := (&admission{inForce: true}).install(client)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	client.PrependReactor("create", "pods", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, ctx.Err() })
	g := &GuardCheck{}
	if err := g.Check(ctx, client, spec); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Check: %v", err)
	}
	client.ReactionChain = client.ReactionChain[1:]
	if err := g.Check(context.Background(), client, spec); err != nil || len(adm.dryRuns) != 1 {
		t.Fatalf("Check after a cancelled one: %v, %d dry runs, want the dry run asked again", err, len(adm.dryRuns))
	}
	var none *GuardCheck
	for range 2 {
		if err := none.Check(context.Background(), client, spec); err != nil {
			t.Fatal(err)
		}
	}
	if len(adm.dryRuns) != 3 {
		t.Errorf("a nil GuardCheck: %d dry runs in all, want 3", len(adm.dryRuns))
	}
}

func TestPortForwardRefused(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{errors.New(`error upgrading connection: pods "proxyrules-node-a-x" is forbidden: User "alice" cannot create resource "pods/portforward" in API group "" in the namespace "kubectl-proxyrules"`), "you may not port-forward"},
		{errors.New(`error upgrading connection: pods "etcd-node-a" is forbidden: ValidatingAdmissionPolicy 'kubectl-proxyrules-metrics' with binding 'kubectl-proxyrules-metrics' denied request`), "an admission policy refused the port-forward"},
		{errors.New("dial tcp 127.0.0.1:10249: connect: connection refused"), ""},
		{nil, ""},
	} {
		if got := portForwardRefused(tc.err); got != tc.want {
			t.Errorf("portForwardRefused(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
