package collect

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	k8stesting "k8s.io/client-go/testing"
)

// TestCollectListsWhilePodStarts: the Services and EndpointSlices are
// listed while the debug pod starts and the node is read (issue 33), and
// the bundle is the same (TestCollectFails: when something fails).
func TestCollectListsWhilePodStarts(t *testing.T) {
	t.Run("overlapped", func(t *testing.T) {
		e := newEnv(t, defaultObjects()...)
		created := make(chan struct{})
		e.client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
			if len(a.(k8stesting.CreateActionImpl).CreateOptions.DryRun) == 0 {
				select {
				case <-created:
				default:
					close(created)
				}
			}
			return false, nil, nil
		})
		c := e.collector(Options{Node: testNode, Via: ViaDebugPod})
		// The listing waits for the pod's create (outside the fake's lock,
		// which its reactors hold): listed one after the other, the pod
		// would not exist yet.
		slow := &waitingServices{Interface: e.client, until: created}
		c.Client = slow
		c.Timings = NewTimings()
		man, err := c.Collect(context.Background())
		if err != nil {
			t.Fatalf("Collect: %v", err)
		}
		if !slow.overlapped {
			t.Error("the Services were listed before the debug pod was created, not while it started")
		}
		if c.Listed == nil || len(c.Listed.Services) != 1 {
			t.Errorf("Listed = %+v, want the one Service", c.Listed)
		}
		if kinds := fileKinds(man); kinds["objects.json"] != KindObjects || kinds["metrics.txt"] != KindMetrics {
			t.Errorf("files %v", kinds)
		}
		phases := map[string]bool{}
		for _, p := range c.Timings.Phases() {
			phases[p.Name] = true
		}
		for _, want := range []string{PhaseAPI, PhaseListObjects, PhasePodStart, PhaseProbe, PhaseRead, PhaseMetrics, PhasePodDelete} {
			if !phases[want] {
				t.Errorf("no %s phase timed: %v", want, phases)
			}
		}
		if left := e.managedPods(t); len(left) != 0 {
			t.Errorf("%d debug pods left", len(left))
		}
	})

}

// firstExec is a channel closed when r's first exec runs.
func firstExec(r *fakeRunner) chan struct{} {
	execed := make(chan struct{})
	r.onRun = func() {
		select {
		case <-execed:
		default:
			close(execed)
		}
	}
	return execed
}

// TestCollectViaKubeProxyListsWhileReading: through kube-proxy's pod there
// is no pod to start, and the node is read while the objects are listed.
func TestCollectViaKubeProxyListsWhileReading(t *testing.T) {
	t.Run("overlapped", func(t *testing.T) {
		e := newEnv(t, defaultObjects()...)
		execed := firstExec(e.runner)
		c := e.collector(Options{Node: testNode, Via: ViaKubeProxy})
		slow := &waitingServices{Interface: e.client, until: execed}
		c.Client = slow
		man, err := c.Collect(context.Background())
		if err != nil {
			t.Fatalf("Collect: %v", err)
		}
		if !slow.overlapped {
			t.Error("the Services were listed before kube-proxy's pod was exec'd into, not while the node was read")
		}
		if kinds := fileKinds(man); kinds["objects.json"] != KindObjects || man.Via != ViaKubeProxy {
			t.Errorf("via %q, files %v", man.Via, kinds)
		}
	})

}

// TestCollectFails: a failed listing is the error said (the pod is
// deleted, the read cut), a pod that cannot start is said even when the
// listing went well, and a read past --pod-deadline says so.
func TestCollectFails(t *testing.T) {
	tests := []struct {
		name     string
		via      string        // ViaDebugPod when ""
		deadline time.Duration // Options.Deadline
		setup    func(e *env)
		wantIn   []string
	}{
		{
			// A read that outlasts --pod-deadline is said as such, the
			// listing having gone well.
			name: "read past the deadline", deadline: 200 * time.Millisecond,
			setup:  func(e *env) { e.runner.block = true },
			wantIn: []string{"did not finish within --pod-deadline (200ms)", "context deadline exceeded"},
		},
		{
			name: "listing refused",
			setup: func(e *env) {
				e.client.PrependReactor("list", "endpointslices", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "discovery.k8s.io", Resource: "endpointslices"}, "", errors.New("no"))
				})
			},
			wantIn: []string{"list", "endpointslices"},
		},
		{
			// The read through kube-proxy's pod is under way when the
			// listing fails: it is cut, and the listing's error is said.
			name: "listing refused during the read, via kube-proxy",
			via:  ViaKubeProxy,
			setup: func(e *env) {
				execed := firstExec(e.runner)
				e.runner.block = true // the read lasts until cut
				e.client.PrependReactor("list", "endpointslices", func(k8stesting.Action) (bool, runtime.Object, error) {
					select {
					case <-execed:
					case <-time.After(5 * time.Second): // a reach that waits for the listing
					}
					return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "discovery.k8s.io", Resource: "endpointslices"}, "", errors.New("no"))
				})
			},
			wantIn: []string{"list", "endpointslices"},
		},
		{
			name: "pod cannot start",
			setup: func(e *env) {
				e.debugStatus = func(p *corev1.Pod) {
					p.Status.Phase = corev1.PodPending
					p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: ContainerName, Image: p.Spec.Containers[0].Image,
						State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: "not found"}}}}
				}
			},
			wantIn: []string{"cannot be pulled"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, defaultObjects()...)
			tc.setup(e)
			via := tc.via
			if via == "" {
				via = ViaDebugPod
			}
			// The read that blocks is cut by the listing's failure, long
			// before this context ends.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, err := e.collector(Options{Node: testNode, Via: via, Deadline: tc.deadline}).Collect(ctx)
			if err == nil {
				t.Fatal("Collect succeeded")
			}
			if ctx.Err() != nil {
				t.Fatalf("Collect returned only when its context ended: %v", err)
			}
			for _, w := range tc.wantIn {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if left := e.managedPods(t); len(left) != 0 {
				t.Errorf("%d debug pods left", len(left))
			}
			if _, err := os.Stat(filepath.Join(e.dir, "objects.json")); err == nil {
				t.Error("a failed collection left objects.json")
			}
		})
	}
}

// waitingServices is a client whose Service listing waits (at most 3 s)
// for until to close, and says whether it did.
type waitingServices struct {
	kubernetes.Interface
	until      chan struct{}
	overlapped bool
}

func (w *waitingServices) CoreV1() corev1client.CoreV1Interface {
	return waitingCore{w.Interface.CoreV1(), w}
}

type waitingCore struct {
	corev1client.CoreV1Interface
	w *waitingServices
}

func (c waitingCore) Services(ns string) corev1client.ServiceInterface {
	return waitingList{c.CoreV1Interface.Services(ns), c.w}
}

type waitingList struct {
	corev1client.ServiceInterface
	w *waitingServices
}

func (l waitingList) List(ctx context.Context, opts metav1.ListOptions) (*corev1.ServiceList, error) {
	select {
	case <-l.w.until:
		l.w.overlapped = true
	case <-time.After(3 * time.Second):
	}
	return l.ServiceInterface.List(ctx, opts)
}
