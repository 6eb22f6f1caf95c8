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
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
)

// The e2e cluster runs no kube-controller-manager, and the API server's
// ResourceQuota admission refuses every pod of a namespace whose quota has
// no status yet ("status unknown for quota"). syncQuotas does the quota
// controller's one job for deploy/'s namespace: status.hard from spec.hard,
// status.used from the pods there, at every change of a pod (and every
// second, for changes of a quota's spec). Admission itself, which counts
// each create against that status, is the API server's own. It watches
// the pods (one LIST at start), so that the suite's counts of LIST
// requests (TestSweepListsOnce) do not see it.
func syncQuotas(ctx context.Context) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(debugNS))
	pods := factory.Core().V1().Pods().Informer()
	changed := make(chan struct{}, 1)
	poke := func(any) {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	pods.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: poke, DeleteFunc: poke, UpdateFunc: func(_, o any) { poke(o) }})
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), pods.HasSynced) {
		return fmt.Errorf("the pods of %s did not sync", debugNS)
	}
	list := func() []*corev1.Pod {
		var out []*corev1.Pod
		for _, o := range pods.GetStore().List() {
			out = append(out, o.(*corev1.Pod))
		}
		return out
	}
	if err := syncQuotasOnce(ctx, cs, list()); err != nil {
		return err
	}
	go func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-changed:
			case <-tick.C:
			}
			if err := syncQuotasOnce(ctx, cs, list()); err != nil && ctx.Err() == nil {
				fmt.Fprintln(os.Stderr, "e2e: syncing the quotas' status:", err)
			}
		}
	}()
	return nil
}

func syncQuotasOnce(ctx context.Context, cs kubernetes.Interface, pods []*corev1.Pod) error {
	for _, name := range []string{"kubectl-proxyrules-pods", "kubectl-proxyrules-no-critical-pods"} {
		// Admission updates the same status at every create: retry until
		// an update lands between two of them.
		err := retry.RetryOnConflict(wait.Backoff{Steps: 50, Duration: 5 * time.Millisecond, Factor: 1.2, Jitter: 1, Cap: 200 * time.Millisecond}, func() error {
			q, err := cs.CoreV1().ResourceQuotas(debugNS).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			n := 0
			for _, p := range pods {
				if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed && inScope(q, p) {
					n++
				}
			}
			q.Status.Hard = q.Spec.Hard
			q.Status.Used = corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(int64(n), resource.DecimalSI)}
			_, err = cs.CoreV1().ResourceQuotas(debugNS).UpdateStatus(ctx, q, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
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
