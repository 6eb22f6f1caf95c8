package collect

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// notReady says why the node is not Ready, or "".
func notReady(n *corev1.Node) string {
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			if cond.Status == corev1.ConditionTrue {
				return ""
			}
			return strings.TrimSpace(cond.Reason + " " + cond.Message)
		}
	}
	return "" // no condition reported: let the pod try
}

// debugImage is the debug pod's image and pull policy: --image, else the
// node's own kube-proxy image (cached on the node, with the binaries
// kube-proxy uses), pulled as kube-proxy's own is: Always stays Always (the
// tag may have moved: the pod then runs what kube-proxy would), anything
// else is IfNotPresent (deploy/'s policy refuses Never, which would run a
// cached image without the pull credentials).
func (c *Collector) debugImage(proxyPod *corev1.Pod) (string, corev1.PullPolicy, error) {
	if c.Image != "" {
		return c.Image, corev1.PullIfNotPresent, nil
	}
	if proxyPod == nil {
		return "", "", &NoKubeProxyError{Node: c.Node}
	}
	kp := kubeProxyContainer(proxyPod)
	if kp.ImagePullPolicy == corev1.PullAlways {
		return kp.Image, corev1.PullAlways, nil
	}
	return kp.Image, corev1.PullIfNotPresent, nil
}

// startDebugPod creates the pod and waits for it to run. The pod is returned
// even with an error once it exists, so that the caller deletes it.
func (c *Collector) startDebugPod(ctx context.Context, image string, pull corev1.PullPolicy, startedBy string) (*corev1.Pod, error) {
	ns := c.debugNamespace()
	deadline := int64(c.deadline() / time.Second)
	spec := DebugPod(PodOptions{Node: c.Node, Namespace: ns, Image: image, PullPolicy: pull, DeadlineSeconds: deadline,
		StartedBy: startedBy, ControlPlane: c.IncludeControlPlane})
	if err := c.Guard.Check(ctx, c.Client, spec); err != nil {
		return nil, err
	}
	c.Progress.Step("creating pod %s/%s on node %s (image %s)", ns, spec.Name, c.Node, image)
	pod, err := c.Client.CoreV1().Pods(ns).Create(ctx, spec, metav1.CreateOptions{})
	if err != nil && ctx.Err() != nil {
		// Interrupted while the request was out: the pod may exist. Its
		// name is ours, so the caller deletes it by name.
		return spec, ctx.Err()
	}
	if IsNotFound(err) {
		return nil, fmt.Errorf("namespace %s does not exist, so no debug pod can run there: ask your cluster admin to run `kubectl apply -f deploy/` of kubectl-proxyrules (it creates namespace %s with the RBAC and the admission policy for the debug pod), or pass --debug-namespace", ns, DefaultDebugNamespace)
	}
	if err != nil {
		return nil, apiError(err, "create", "pods", ns, "run the debug pod that reads the node's rules (or use --via kube-proxy)")
	}
	c.Progress.Step("waiting for pod %s to run", pod.Name)
	timeout := c.StartTimeout
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// Asked often at first, then every 200 ms: a pod whose image is on the
	// node runs within a fraction of a second, which a fixed 200 ms wait
	// rounds up (the role grants no watch).
	poll := 25 * time.Millisecond
	for {
		cur, err := c.Client.CoreV1().Pods(pod.Namespace).Get(wctx, pod.Name, metav1.GetOptions{})
		if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
			return pod, apiError(err, "get", "pods", pod.Namespace, "watch the debug pod start")
		}
		if err == nil {
			pod = cur
			if running(pod) {
				return pod, nil
			}
			if why := podFailed(pod); why != "" {
				return pod, fmt.Errorf("debug pod %s/%s on node %s cannot run: %s", pod.Namespace, pod.Name, c.Node, why)
			}
		}
		select {
		case <-wctx.Done():
			if ctx.Err() != nil {
				return pod, ctx.Err()
			}
			return pod, fmt.Errorf("debug pod %s/%s did not start on node %s within %s: %s", pod.Namespace, pod.Name, c.Node, timeout, c.whyPending(pod))
		case <-c.waitFor(poll):
			poll = min(2*poll, podPollMax)
		}
	}
}

// podPollMax is the longest wait between two looks at the starting pod.
const podPollMax = 200 * time.Millisecond

func running(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == ContainerName && s.State.Running != nil {
			return true
		}
	}
	return len(p.Status.ContainerStatuses) == 0 // a kubelet that reports no container status
}

// podFailed says why a pod will never run, or "".
func podFailed(p *corev1.Pod) string {
	if p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
		return strings.TrimSpace(fmt.Sprintf("pod %s: %s %s", p.Status.Phase, p.Status.Reason, p.Status.Message))
	}
	for _, s := range p.Status.ContainerStatuses {
		if w := s.State.Waiting; w != nil {
			switch w.Reason {
			case "ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull":
				return fmt.Sprintf("image %s cannot be pulled (%s: %s). The default is the node's own kube-proxy image, which is normally cached there; pass --image with an image the node can pull", s.Image, w.Reason, w.Message)
			case "CreateContainerConfigError", "CreateContainerError", "RunContainerError":
				return fmt.Sprintf("%s: %s", w.Reason, w.Message)
			}
		}
		if t := s.State.Terminated; t != nil {
			return fmt.Sprintf("container exited (%s, code %d): %s. --image must have a sleep command", t.Reason, t.ExitCode, t.Message)
		}
	}
	return ""
}

// whyPending collects what the pod's status and events say.
func (c *Collector) whyPending(p *corev1.Pod) string {
	var why []string
	for _, cond := range p.Status.Conditions {
		if cond.Status != corev1.ConditionTrue && cond.Message != "" {
			why = append(why, fmt.Sprintf("%s: %s", cond.Type, cond.Message))
		}
	}
	for _, s := range p.Status.ContainerStatuses {
		if w := s.State.Waiting; w != nil {
			why = append(why, strings.TrimSpace(w.Reason+" "+w.Message))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	evs, err := c.Client.CoreV1().Events(p.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + p.Name})
	if err == nil {
		for _, e := range evs.Items {
			if e.Type == corev1.EventTypeWarning {
				why = append(why, e.Reason+": "+e.Message)
			}
		}
	}
	if len(why) == 0 {
		return fmt.Sprintf("phase %s, no events (is the node's kubelet running? taints do not apply: the pod tolerates every taint and requests only 10m CPU and 32Mi memory)", p.Status.Phase)
	}
	return strings.Join(why, "; ")
}

// removeLeftovers deletes the caller's own debug pods in the debug
// namespace that an earlier, killed run left behind: finished, or past
// their deadline. Pods of a run in progress (another terminal) and other
// people's are left alone. Best effort: a refusal only skips it.
func (c *Collector) removeLeftovers(ctx context.Context, me string) {
	if me == "" {
		return
	}
	ns := c.debugNamespace()
	pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: LabelManagedBy + "=" + ManagedBy})
	if err != nil {
		return
	}
	now := c.clock()
	for i := range pods.Items {
		p := &pods.Items[i]
		done, why := PodDone(p, now)
		if p.Labels[LabelManagedBy] != ManagedBy || p.Annotations[AnnotationStartedBy] != me || !done || p.DeletionTimestamp != nil {
			continue
		}
		err := c.Client.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64), Preconditions: &metav1.Preconditions{UID: &p.UID}})
		if err == nil {
			c.Progress.Step("deleted pod %s/%s that an earlier run left (%s)", ns, p.Name, why)
		}
	}
}

// unconfirmedCreateWait is how long deletePod keeps trying to delete a pod
// whose create was interrupted in flight: the API server may still be
// writing it when the first delete arrives.
const unconfirmedCreateWait = 5 * time.Second

// deletePod deletes the debug pod now, whatever the caller's context says.
// A pod without a UID is one whose create was interrupted while the request
// was out: a delete that finds no pod is tried again for a while, because
// the create may land after it (an interrupted sweep left such a pod).
// A pod with a UID is deleted only if it is still that pod: one that took
// its name since (a run of someone else's) is not ours to delete.
func (c *Collector) deletePod(p *corev1.Pod) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	opts := metav1.DeleteOptions{GracePeriodSeconds: new(int64)}
	if p.UID != "" {
		opts.Preconditions = &metav1.Preconditions{UID: &p.UID}
	}
	del := func() error {
		return c.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, opts)
	}
	err := del()
	if p.UID != "" && apierrors.IsConflict(err) {
		c.Progress.Step("pod %s/%s is gone; another pod has its name now and is left alone", p.Namespace, p.Name)
		return nil
	}
	for waited := time.Duration(0); p.UID == "" && IsNotFound(err) && waited < unconfirmedCreateWait; waited += 200 * time.Millisecond {
		time.Sleep(200 * time.Millisecond)
		err = del()
	}
	if IsNotFound(err) && p.UID == "" {
		return nil // never created
	}
	if err != nil && !IsNotFound(err) {
		return fmt.Errorf("could not delete debug pod %s/%s (%v): delete it with `kubectl proxyrules cleanup`; its activeDeadlineSeconds stops it in any case", p.Namespace, p.Name, firstLine(err.Error()))
	}
	c.Progress.Step("deleted pod %s/%s", p.Namespace, p.Name)
	return nil
}
