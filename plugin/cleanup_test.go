package plugin

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/proxyrules/kubectl-proxyrules/plugin/collect"
)

var cleanupNow = time.Date(2026, 3, 4, 12, 0, 0, 0, time.UTC)

// debugPod is a pod the plugin made: started by who, age ago, with a
// deadline in seconds, in phase.
func debugPod(name, ns, who string, age time.Duration, deadline int64, phase corev1.PodPhase) *corev1.Pod {
	p := collect.DebugPod(collect.PodOptions{Node: "node-a", Namespace: ns, Image: "i", DeadlineSeconds: deadline, StartedBy: who, NameSuffix: name})
	p.CreationTimestamp = metav1.NewTime(cleanupNow.Add(-age))
	p.UID = types.UID("uid-" + name)
	p.Status.Phase = phase
	return p
}

func cleanupPods() []runtime.Object {
	ns := collect.DefaultDebugNamespace
	notOurs := debugPod("notours", ns, "alice", time.Hour, 600, corev1.PodFailed)
	notOurs.Labels = map[string]string{"app.kubernetes.io/managed-by": "kubectl-debug"}
	return []runtime.Object{
		debugPod("mine1", ns, "alice", time.Hour, 600, corev1.PodSucceeded),      // finished
		debugPod("mine2", ns, "alice", time.Hour, 600, corev1.PodRunning),        // past its deadline, no kubelet stopped it
		debugPod("mine3", ns, "alice", time.Minute, 600, corev1.PodRunning),      // a run in progress
		debugPod("bobs1", ns, "bob", time.Hour, 600, corev1.PodFailed),           // someone else's, finished
		debugPod("bobs2", "default", "bob", time.Minute, 600, corev1.PodRunning), // someone else's, running
		notOurs,
	}
}

func runCleanup(t *testing.T, client *fake.Clientset, args ...string) (string, string, error) {
	t.Helper()
	client.PrependReactor("create", "selfsubjectreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		r := a.(k8stesting.CreateAction).GetObject().(*authnv1.SelfSubjectReview).DeepCopy()
		r.Status.UserInfo.Username = "alice"
		return true, r, nil
	})
	var out, errOut bytes.Buffer
	o := &CleanupOptions{IOStreams: genericiooptions.IOStreams{Out: &out, ErrOut: &errOut}, Client: client, now: func() time.Time { return cleanupNow }}
	for _, a := range args {
		switch a {
		case "--all":
			o.All = true
		case "--dry-run":
			o.DryRun = true
		}
	}
	cmd := &cobra.Command{}
	cmd.SetContext(context.Background())
	err := o.Run(cmd)
	return out.String(), errOut.String(), err
}

func deletedPods(client *fake.Clientset) []string {
	var out []string
	for _, a := range client.Actions() {
		if a.GetVerb() == "delete" && a.GetResource().Resource == "pods" {
			out = append(out, strings.TrimPrefix(a.(k8stesting.DeleteAction).GetName(), "proxyrules-node-a-"))
		}
	}
	slices.Sort(out)
	return out
}

// TestCleanupOwnFinishedPodsOnly: cleanup deletes the caller's own pods
// that are done (finished or past their deadline), and nothing of a run in
// progress or of anyone else; --all deletes every pod of the plugin, after
// listing them; --dry-run deletes nothing.
func TestCleanupOwnFinishedPodsOnly(t *testing.T) {
	tests := []struct {
		args        []string
		wantDeleted []string
		wantOut     []string
	}{
		{nil, []string{"mine1", "mine2"}, []string{"deleted pod kubectl-proxyrules/proxyrules-node-a-mine1", "kept pod kubectl-proxyrules/proxyrules-node-a-mine3", "a run in progress"}},
		{[]string{"--dry-run"}, nil, []string{"would delete pod kubectl-proxyrules/proxyrules-node-a-mine1", "would delete pod kubectl-proxyrules/proxyrules-node-a-mine2"}},
		{[]string{"--all"}, []string{"bobs1", "bobs2", "mine1", "mine2", "mine3"}, []string{"deleting pod default/proxyrules-node-a-bobs2", "started by bob"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(append([]string{"cleanup"}, tt.args...), " "), func(t *testing.T) {
			client := fake.NewClientset(cleanupPods()...)
			out, errOut, err := runCleanup(t, client, tt.args...)
			if err != nil {
				t.Fatalf("cleanup: %v\n%s", err, errOut)
			}
			if got := deletedPods(client); !slices.Equal(got, tt.wantDeleted) {
				t.Errorf("deleted %v, want %v\n%s", got, tt.wantDeleted, out)
			}
			for _, w := range tt.wantOut {
				if !strings.Contains(out, w) {
					t.Errorf("output does not say %q:\n%s", w, out)
				}
			}
			if strings.Contains(out, "notours") {
				t.Errorf("a pod without the plugin's label is listed:\n%s", out)
			}
			if slices.Contains(tt.args, "--all") {
				// The whole list comes before the first deletion.
				if last, first := strings.LastIndex(out, "deleting "), strings.Index(out, "deleted "); first < last {
					t.Errorf("--all deleted before it listed everything:\n%s", out)
				}
			}
		})
	}
}

// With the RBAC of deploy/ a user may list pods only where debug pods run:
// cleanup looks there.
func TestCleanupWithoutClusterWideList(t *testing.T) {
	client := fake.NewClientset(cleanupPods()...)
	client.PrependReactor("list", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetNamespace() == "" {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", nil)
		}
		return false, nil, nil
	})
	_, errOut, err := runCleanup(t, client)
	if err != nil {
		t.Fatalf("cleanup: %v", err)
	}
	if got := deletedPods(client); !slices.Equal(got, []string{"mine1", "mine2"}) {
		t.Errorf("deleted %v", got)
	}
	if !strings.Contains(errOut, "looking in kubectl-proxyrules only") {
		t.Errorf("stderr %q", errOut)
	}
}

// Names and annotations come from the cluster, where anyone who may create
// a pod writes them: printed escaped.
func TestCleanupSanitizesNames(t *testing.T) {
	p := debugPod("evil1", collect.DefaultDebugNamespace, "alice", time.Hour, 600, corev1.PodFailed)
	p.Annotations[collect.AnnotationStartedBy] = "alice"
	p.Spec.NodeName = "node\x1b]52;c;ZXZpbA==\x07"
	client := fake.NewClientset(p)
	out, _, err := runCleanup(t, client, "--dry-run")
	if err != nil {
		t.Fatal(err)
	}
	if strings.ContainsRune(out, 0x1b) || !strings.Contains(out, `\x1b]52`) {
		t.Errorf("cleanup printed a raw escape sequence: %q", out)
	}
}

// RBAC is blamed only when the API server says 403.
func TestCleanupErrorsBlameRBACOnlyOnForbidden(t *testing.T) {
	for _, tc := range []struct {
		err      error
		wantRBAC bool
	}{
		{apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", nil), true},
		{apierrors.NewInternalError(errors.New("etcd timeout")), false},
		{apierrors.NewServiceUnavailable("overloaded"), false},
	} {
		client := fake.NewClientset(cleanupPods()...)
		client.PrependReactor("list", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, tc.err
		})
		_, _, err := runCleanup(t, client)
		if err == nil || strings.Contains(err.Error(), "RBAC") != tc.wantRBAC {
			t.Errorf("%v: %v (RBAC blamed: want %v)", tc.err, err, tc.wantRBAC)
		}
	}
}
