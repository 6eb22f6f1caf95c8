//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// The e2e cluster runs no kube-controller-manager, and the API server's
// ResourceQuota admission refuses every pod of a namespace whose quota has
// no status yet ("status unknown for quota"). syncQuotas does the quota
// controller's one job for deploy/'s namespace: status.hard from spec.hard,
// status.used from the pods there, every half second. Admission itself,
// which counts each create against that status, is the API server's own.
func syncQuotas(ctx context.Context) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if err := syncQuotasOnce(ctx, cs); err != nil {
		return err
	}
	go func() {
		for ctx.Err() == nil {
			time.Sleep(500 * time.Millisecond)
			if err := syncQuotasOnce(ctx, cs); err != nil && ctx.Err() == nil {
				fmt.Fprintln(os.Stderr, "e2e: syncing the quotas' status:", err)
			}
		}
	}()
	return nil
}

func syncQuotasOnce(ctx context.Context, cs kubernetes.Interface) error {
	quotas, err := cs.CoreV1().ResourceQuotas(debugNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	pods, err := cs.CoreV1().Pods(debugNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for i := range quotas.Items {
		q := &quotas.Items[i]
		n := 0
		for _, p := range pods.Items {
			if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed && inScope(q, &p) {
				n++
			}
		}
		q.Status.Hard = q.Spec.Hard
		q.Status.Used = corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(int64(n), resource.DecimalSI)}
		if _, err := cs.CoreV1().ResourceQuotas(debugNS).UpdateStatus(ctx, q, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// inScope: the only scope deploy/ uses, PriorityClass In [...].
func inScope(q *corev1.ResourceQuota, p *corev1.Pod) bool {
	if q.Spec.ScopeSelector == nil {
		return true
	}
	for _, e := range q.Spec.ScopeSelector.MatchExpressions {
		if e.ScopeName == corev1.ResourceQuotaScopePriorityClass && !slices.Contains(e.Values, p.Spec.PriorityClassName) {
			return false
		}
	}
	return true
}
