package collect

import (
	"context"
	"fmt"
	"strings"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// chooseVia decides how to reach the node. auto asks the API server what
// the user may do (SelfSubjectAccessReview) and prefers the debug pod;
// proxyPod is the node's kube-proxy pod, nil when it has none.
func (c *Collector) chooseVia(ctx context.Context, proxyPod *corev1.Pod) (string, error) {
	switch c.Via {
	case ViaDebugPod, ViaKubeProxy:
		return c.Via, nil
	}
	ns := c.debugNamespace()
	var missing []string
	podOK := c.canI(ctx, "create", "pods", "", ns, &missing) &&
		c.canI(ctx, "create", "pods", "exec", ns, &missing) &&
		c.canI(ctx, "get", "pods", "", ns, &missing) &&
		c.canI(ctx, "delete", "pods", "", ns, &missing)
	if podOK {
		return ViaDebugPod, nil
	}
	if proxyPod != nil && c.canI(ctx, "create", "pods", "exec", proxyPod.Namespace, &missing) {
		c.Progress.Step("no rights for a debug pod in %s: using --via kube-proxy", ns)
		return ViaKubeProxy, nil
	}
	return "", fmt.Errorf("you may neither run a debug pod nor exec into kube-proxy: missing %s. "+
		"Ask your cluster admin to run `kubectl apply -f %s` of kubectl-proxyrules (namespace %s, its RBAC and admission policy; %svia-kube-proxy/ adds --via kube-proxy), "+
		"or check with kubectl auth can-i", strings.Join(missing, ", "), RBACFile, DefaultDebugNamespace, RBACFile)
}

// canI asks a SelfSubjectAccessReview, adding what is refused to missing.
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
