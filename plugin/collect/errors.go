package collect

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// RBACFile is where the project's manifests are: `kubectl apply -f deploy/`
// installs the namespace, RBAC and admission policy the plugin needs
// (deploy/via-kube-proxy/ adds --via kube-proxy); errors point to it.
const RBACFile = "deploy/"

// Forbidden explains a refusal by the API server: which verb on which
// resource the user lacks, and what grants it.
type Forbidden struct {
	Verb, Resource, Namespace string
	Why                       string // what the plugin wanted it for
	Hint                      string
	Err                       error
}

func (e *Forbidden) Error() string {
	where := "cluster-wide"
	if e.Namespace != "" {
		where = "in namespace " + e.Namespace
	}
	msg := fmt.Sprintf("not allowed to %s %s %s (RBAC: verb %q on %q)", e.Verb, e.Resource, where, e.Verb, e.Resource)
	if e.Why != "" {
		msg += ", needed to " + e.Why
	}
	msg += ". Ask your cluster admin for the RBAC of kubectl-proxyrules (kubectl apply -f " + RBACFile + ", and " + RBACFile + "via-kube-proxy/ for --via kube-proxy), or check with: kubectl auth can-i " + e.Verb + " " + e.Resource
	if e.Namespace != "" {
		msg += " -n " + e.Namespace
	}
	if e.Hint != "" {
		msg += ". " + e.Hint
	}
	return msg
}

func (e *Forbidden) Unwrap() error { return e.Err }

// apiError turns an API error into one that says what to do.
func apiError(err error, verb, resource, namespace, why string) error {
	if err == nil {
		return nil
	}
	switch {
	case isPodSecurity(err):
		return &PodSecurityError{Namespace: namespace, Err: err}
	case apierrors.IsForbidden(err) && isRBAC(err):
		return &Forbidden{Verb: verb, Resource: resource, Namespace: namespace, Why: why, Err: err}
	case strings.Contains(err.Error(), "ValidatingAdmissionPolicy 'kubectl-proxyrules"):
		return fmt.Errorf("the admission policy of kubectl-proxyrules refused to %s %s in namespace %s: %v. It lets only the plugin's own debug pod run there; --image must be one the cluster admin lists in the policy's parameters (ConfigMap %s/%s)", verb, resource, namespace, err, DefaultDebugNamespace, PolicyParams)
	case apierrors.IsForbidden(err) && strings.Contains(err.Error(), "exceeded quota"):
		return fmt.Errorf("namespace %s holds as many pods as its ResourceQuota allows (%v): run `kubectl proxyrules cleanup` for debug pods left behind, "+
			"give a sweep a lower --parallel, or ask your cluster admin to raise the quota (deploy/namespace.yaml)", namespace, err)
	case apierrors.IsForbidden(err):
		// An admission plugin, not RBAC: its message says why.
		return fmt.Errorf("the API server refused to %s %s in namespace %s: %v", verb, resource, namespace, err)
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("the API server did not accept your credentials (%v): log in again or check --kubeconfig/--context", err)
	}
	var netErr *net.OpError
	var urlErr *url.Error
	if errors.As(err, &netErr) || errors.As(err, &urlErr) && !apierrors.IsTimeout(err) {
		return fmt.Errorf("cannot reach the API server (%v): check --kubeconfig and --context", err)
	}
	return fmt.Errorf("%s %s: %w", verb, resource, err)
}

// isRBAC tells an authorizer's refusal ("User \"x\" cannot create
// resource \"pods\"") from an admission plugin's.
func isRBAC(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, " cannot ") && strings.Contains(msg, "resource ")
}

func isPodSecurity(err error) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "violates PodSecurity")
}

// PodSecurityError is a debug pod refused by Pod Security Admission.
type PodSecurityError struct {
	Namespace string
	Err       error
}

func (e *PodSecurityError) Error() string {
	detail := e.Err.Error()
	if _, after, ok := strings.Cut(detail, "violates PodSecurity"); ok {
		detail = "violates PodSecurity" + after
	}
	return fmt.Sprintf("Pod Security Admission refused the debug pod in namespace %s (%s). "+
		"Reading a node's rules needs hostNetwork and the NET_ADMIN and NET_RAW capabilities, which only the \"privileged\" level allows. "+
		"Use the namespace `kubectl apply -f deploy/` creates (%s, the default), or pass --debug-namespace NS for one whose pod-security.kubernetes.io/enforce label is privileged, "+
		"or --via kube-proxy to exec into the node's kube-proxy pod instead", e.Namespace, detail, DefaultDebugNamespace)
}

func (e *PodSecurityError) Unwrap() error { return e.Err }

// NoKubeProxyError says the node runs no kube-proxy pod that could be
// found; Detail, when set, says what was looked at.
type NoKubeProxyError struct{ Node, Detail string }

func (e *NoKubeProxyError) Error() string {
	detail := e.Detail
	if detail == "" {
		detail = "none in kube-system with label k8s-app=kube-proxy or a container named kube-proxy"
	}
	return fmt.Sprintf("no kube-proxy pod runs on node %s (%s). "+
		"If the cluster replaces kube-proxy (Cilium, Calico eBPF, ...) there are no kube-proxy rules to read: use that project's tools. "+
		"If kube-proxy runs outside a DaemonSet (a static pod, k3s, a systemd unit), pass --image with an image that has iptables and nft to read the node anyway", e.Node, detail)
}

// PolicyParams is the ConfigMap (in DefaultDebugNamespace) that lists the
// images the admission policy of deploy/ lets the debug pod run.
const PolicyParams = "kubectl-proxyrules-images"

// IsNotFound reports a missing object.
func IsNotFound(err error) bool { return apierrors.IsNotFound(err) }
