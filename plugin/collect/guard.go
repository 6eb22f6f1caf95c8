package collect

import (
	"context"
	"fmt"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// The Role of deploy/ lets its users create pods in the debug namespace;
// only the admission policy of deploy/policy.yaml keeps those pods to the
// plugin's shape. Without it (a cluster before 1.30, the admission plugin
// off, a binding deleted, a --debug-namespace no policy covers) the Role
// is root on every node. So before its first pod the plugin asks the API
// server, by a server-side dry run, whether a privileged variant of that
// pod would be admitted; if it would, nothing guards the namespace, and the
// plugin stops rather than be the tool that worked "fine" there.

// GuardCheck remembers the answer per namespace for one run, so that a
// sweep asks once. The zero value is ready; Skip turns the check off
// (--skip-policy-check, for admins who guard the namespace otherwise).
type GuardCheck struct {
	Skip bool

	mu      sync.Mutex
	checked map[string]error
}

// UnguardedError is a debug namespace where a privileged pod would be
// admitted.
type UnguardedError struct {
	Namespace string
}

func (e *UnguardedError) Error() string {
	return fmt.Sprintf("no admission policy guards namespace %s: the API server would admit a privileged pod there (a dry run said so), "+
		"so a debug pod's permissions there are root on every node. Ask your cluster admin to run `kubectl apply -f %s` of kubectl-proxyrules "+
		"(Kubernetes 1.30 or later, with the ValidatingAdmissionPolicy admission plugin on), which installs the policy for namespace %s; "+
		"for another --debug-namespace, bind that policy there too. Admins who guard the namespace otherwise may pass --skip-policy-check",
		e.Namespace, RBACFile, DefaultDebugNamespace)
}

// Check runs the dry run for spec's namespace once per run. It returns nil
// when the privileged variant was refused, or when the dry run cannot tell
// (refused by RBAC, namespace missing): the real create then reports that
// with its own error.
func (g *GuardCheck) Check(ctx context.Context, client kubernetes.Interface, spec *corev1.Pod) error {
	if g == nil {
		return checkGuard(ctx, client, spec)
	}
	if g.Skip {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if err, ok := g.checked[spec.Namespace]; ok {
		return err
	}
	err := checkGuard(ctx, client, spec)
	if ctx.Err() != nil {
		return err // not an answer to remember
	}
	if g.checked == nil {
		g.checked = map[string]error{}
	}
	g.checked[spec.Namespace] = err
	return err
}

func checkGuard(ctx context.Context, client kubernetes.Interface, spec *corev1.Pod) error {
	probe := privilegedVariant(spec)
	_, err := client.CoreV1().Pods(probe.Namespace).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	switch {
	case err == nil:
		return &UnguardedError{Namespace: spec.Namespace}
	case ctx.Err() != nil:
		return ctx.Err()
	case apierrors.IsForbidden(err) && isRBAC(err), apierrors.IsNotFound(err):
		return nil // the real create says what is missing
	case apierrors.IsForbidden(err), apierrors.IsInvalid(err) && byAdmission(err):
		return nil // refused: something guards the namespace
	}
	// Anything else (the probe invalid before admission was asked, a
	// server error) says nothing of a guard: not taken as one.
	return apiError(err, "create (dry run)", "pods", spec.Namespace, "check that the admission policy guards the debug namespace")
}

// byAdmission: an Invalid refusal came from an admission policy or
// webhook (a policy may answer with reason Invalid), not from the API's
// field validation.
func byAdmission(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "ValidatingAdmissionPolicy") || strings.Contains(msg, "admission webhook")
}

// privilegedVariant is spec as a privileged container: what the policy
// must refuse, and valid otherwise (privileged with allowPrivilegeEscalation
// false would fail validation before admission is asked).
func privilegedVariant(spec *corev1.Pod) *corev1.Pod {
	p := spec.DeepCopy()
	p.Name = spec.Name + "-guard"
	sc := p.Spec.Containers[0].SecurityContext
	if sc == nil {
		sc = &corev1.SecurityContext{}
		p.Spec.Containers[0].SecurityContext = sc
	}
	sc.Privileged = ptr.To(true)
	sc.AllowPrivilegeEscalation = nil
	return p
}
