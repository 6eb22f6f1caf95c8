package collect

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
)

// reach chooses the way to the node and opens it: kube-proxy's own pod, or
// a debug pod started on the node (returned, even with an error, once it
// exists: the caller deletes it). Neither waits for the objects' listing.
func (c *Collector) reach(ctx context.Context, w *bundleWriter, node *corev1.Node, proxy kubeProxy) (Target, *corev1.Pod, error) {
	stopAPI := c.Timings.Start(PhaseAPI)
	var via string
	var err error
	if c.Fleet != nil {
		via, err = c.Fleet.chooseVia(func() (string, error) { return c.chooseVia(ctx, proxy.template) })
	} else {
		via, err = c.chooseVia(ctx, proxy.template)
	}
	stopAPI(0)
	if err != nil {
		return Target{}, nil, err
	}
	w.man.Via = via
	if via == ViaKubeProxy {
		target, image, err := c.kubeProxyTarget(ctx, w, proxy)
		w.man.Image = image
		return target, nil, err
	}
	if reason := notReady(node); reason != "" {
		return Target{}, nil, fmt.Errorf("node %s is not Ready (%s): a debug pod cannot start there. Try --via kube-proxy if its kube-proxy still runs", c.Node, reason)
	}
	image, pull, err := c.debugImage(proxy.template)
	if err != nil {
		return Target{}, nil, err
	}
	w.man.Image = image
	ask := func() string {
		me := c.whoAmI(ctx)
		c.removeLeftovers(ctx, me)
		return me
	}
	var me string
	if c.Fleet != nil {
		me = c.Fleet.whoAmI(ask)
	} else {
		me = ask()
	}
	stopStart := c.Timings.Start(PhasePodStart)
	pod, err := c.startDebugPod(ctx, image, pull, me)
	stopStart(0)
	if err != nil {
		return Target{}, pod, err
	}
	return Target{Namespace: pod.Namespace, Pod: pod.Name, Container: ContainerName}, pod, nil
}

// pendingObjects are the objects being listed in the background
// (startListing), or those given.
type pendingObjects struct {
	done   chan struct{}
	objs   *correlate.Objects
	err    error
	cancel context.CancelFunc
}

// startListing lists and writes the objects (writeObjects) in the
// background, unless Options.Objects are given. A failed listing calls
// failed (the debug pod need not start for a read that cannot be joined).
func (c *Collector) startListing(ctx context.Context, w *bundleWriter, node *corev1.Node, proxy kubeProxy, failed func()) *pendingObjects {
	p := &pendingObjects{done: make(chan struct{}), objs: c.Objects, cancel: func() {}}
	if c.Objects != nil {
		close(p.done)
		return p
	}
	lctx, cancel := context.WithCancel(ctx)
	p.cancel = cancel
	go func() {
		defer close(p.done)
		if p.objs, p.err = c.writeObjects(lctx, w, node, proxy); p.err != nil {
			failed()
		}
	}()
	return p
}

// wait returns the objects once listed.
func (p *pendingObjects) wait() (*correlate.Objects, error) {
	<-p.done
	return p.objs, p.err
}

// precede is the error to report when reaching the node failed with err:
// the listing's own failure if it failed (it began first, and its
// failure may be why the pod's start was given up), else err.
func (p *pendingObjects) precede(err error) error {
	if _, lerr := p.wait(); lerr != nil {
		return lerr
	}
	return err
}

// stop gives the listing up and waits for it to end.
func (p *pendingObjects) stop() {
	p.cancel()
	<-p.done
}
