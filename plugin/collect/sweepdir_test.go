package collect

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestSweepFolderRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sweep")
	w, err := NewSweepWriter(dir, time.Unix(1795939150, 0))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Objects([]byte(`{"apiVersion":"v1","kind":"List","items":[]}`)); err != nil {
		t.Fatal(err)
	}
	w.Node("node-a", nil, "")
	w.Node("node-b", errors.New("node node-b is not Ready"), "NotReady")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if !IsSweepDir(dir) || IsSweepDir(t.TempDir()) {
		t.Errorf("IsSweepDir")
	}
	m, err := ReadSweepManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Nodes) != 2 || m.Nodes[0].Dir != "nodes/node-a" || m.Nodes[1].Reason != "NotReady" || m.Objects != SweepObjectsFile {
		t.Errorf("manifest %+v", m)
	}
	for _, name := range []string{SweepManifestFile, SweepObjectsFile} {
		if st, err := os.Stat(filepath.Join(dir, name)); err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v, want 0600", name, err, st)
		}
	}
	if _, err := NewSweepWriter(dir, time.Now()); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("a second sweep into the same folder: %v", err)
	}
}

// A hostile sweep.json cannot send the reader out of the folder.
func TestSweepManifestHostile(t *testing.T) {
	for _, tc := range []struct {
		name, manifest, want string
	}{
		{"dotdot", `{"kind":"Sweep","nodes":[{"name":"x","dir":"../../etc"}]}`, `is in "../../etc"`},
		{"absolute", `{"kind":"Sweep","nodes":[{"name":"x","dir":"/etc"}]}`, `is in "/etc"`},
		{"name with slash", `{"kind":"Sweep","nodes":[{"name":"../x","dir":"nodes/../x"}]}`, "is in"},
		{"other dir", `{"kind":"Sweep","nodes":[{"name":"x","dir":"nodes/y"}]}`, `not nodes/x`},
		{"objects elsewhere", `{"kind":"Sweep","objects":"../objects.json","nodes":[]}`, "a sweep keeps them in objects.json"},
		{"not a sweep", `{"kind":"Bundle"}`, `kind "Bundle", not Sweep`},
		{"garbage", `{{{`, "sweep.json"},
	} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, SweepManifestFile), []byte(tc.manifest), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadSweepManifest(dir); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	big := t.TempDir()
	if err := os.WriteFile(filepath.Join(big, SweepManifestFile), make([]byte, maxSweepManifestBytes+1), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadSweepManifest(big); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("a huge manifest: %v", err)
	}
}

// A fleet lists the nodes and kube-system's kube-proxy DaemonSets once
// (kube-system's pods only when a node needs them, once), picks the nodes
// by selector or name, leaves out control-plane nodes unless asked, and
// answers each node's collector from what it listed.
func TestFleet(t *testing.T) {
	var objs []runtime.Object
	for i := 1; i <= 5; i++ {
		zone := "a"
		if i > 3 {
			zone = "b"
		}
		name := fmt.Sprintf("node-%d", i)
		objs = append(objs,
			&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"zone": zone}}},
			&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-proxy-" + name, Labels: map[string]string{"k8s-app": "kube-proxy"}},
				Spec: corev1.PodSpec{NodeName: name, Containers: []corev1.Container{{Name: "kube-proxy", Image: "registry.k8s.io/kube-proxy:v1.37.2"}}}})
	}
	objs = append(objs,
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cp-1", Labels: map[string]string{"zone": "a", LabelControlPlane: ""}}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "coredns"}, Spec: corev1.PodSpec{NodeName: "node-1"}},
		testDaemonSet("kube-proxy", "registry.k8s.io/kube-proxy:v1.37.2", "kube-proxy", map[string]string{"zone": "a"}),
		testDaemonSet("kube-proxy-b", "registry.k8s.io/kube-proxy:v1.37.1", "kube-proxy-b", map[string]string{"zone": "b"}))
	client := fake.NewClientset(objs...)
	lists := map[string]int{}
	client.PrependReactor("list", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		lists[a.GetResource().Resource]++
		return false, nil, nil
	})
	ctx := context.Background()
	cpSkipped := []SkippedNode{{"cp-1", "control-plane node (label node-role.kubernetes.io/control-plane): pass --include-control-plane to read it"}}
	for _, tc := range []struct {
		opts           FleetOptions
		nodes, missing []string
		skipped        []SkippedNode
	}{
		{FleetOptions{All: true}, []string{"node-1", "node-2", "node-3", "node-4", "node-5"}, nil, cpSkipped},
		{FleetOptions{All: true, IncludeControlPlane: true}, []string{"cp-1", "node-1", "node-2", "node-3", "node-4", "node-5"}, nil, nil},
		{FleetOptions{Selector: "zone=b"}, []string{"node-4", "node-5"}, nil, nil},
		{FleetOptions{Selector: "zone=a"}, []string{"node-1", "node-2", "node-3"}, nil, cpSkipped},
		{FleetOptions{Names: []string{"node-5", "node-1", "node-9", "node-5", "cp-1"}}, []string{"node-5", "node-1"}, []string{"node-9"}, cpSkipped},
	} {
		for k := range lists {
			delete(lists, k)
		}
		f, nodes, missing, err := NewFleet(ctx, client, tc.opts)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(nodes, tc.nodes) || !slices.Equal(missing, tc.missing) || !slices.Equal(f.Skipped(), tc.skipped) {
			t.Errorf("%+v: nodes %v missing %v skipped %v", tc.opts, nodes, missing, f.Skipped())
		}
		if lists["nodes"] != 1 || lists["daemonsets"] != 1 || lists["pods"] != 0 {
			t.Errorf("%+v: lists %v, want nodes and daemonsets once, no pods", tc.opts, lists)
		}
	}
	if _, _, _, err := NewFleet(ctx, client, FleetOptions{Selector: "zone in (a"}); err == nil || !strings.Contains(err.Error(), "--node-selector") {
		t.Errorf("a bad selector: %v", err)
	}
	// The collector asks the fleet: no list, no get of the node.
	f, _, _, _ := NewFleet(ctx, client, FleetOptions{All: true})
	for k := range lists {
		delete(lists, k)
	}
	for node, want := range map[string]string{"node-2": "registry.k8s.io/kube-proxy:v1.37.2", "node-4": "registry.k8s.io/kube-proxy:v1.37.1"} {
		c := &Collector{Client: client, Progress: &Progress{}, Options: Options{Node: node, Fleet: f}}
		n, err := c.getNode(ctx)
		if err != nil || n.Name != node {
			t.Fatalf("getNode: %v %v", n, err)
		}
		tmpl, pod, err := c.kubeProxyTemplate(ctx, &bundleWriter{}, n)
		if err != nil || pod != nil || kubeProxyContainer(tmpl).Image != want {
			t.Errorf("%s: kubeProxyTemplate: %v %v %v", node, tmpl, pod, err)
		}
	}
	if len(lists) != 0 {
		t.Errorf("the collector listed %v", lists)
	}
	// --via kube-proxy needs the pod: kube-system's pods, listed once.
	for _, node := range []string{"node-2", "node-3"} {
		c := &Collector{Client: client, Progress: &Progress{}, Options: Options{Node: node, Fleet: f}}
		if p, err := c.findKubeProxyPod(ctx, &bundleWriter{}); err != nil || p.Name != "kube-proxy-"+node {
			t.Errorf("findKubeProxyPod: %v %v", p, err)
		}
	}
	if lists["pods"] != 1 {
		t.Errorf("lists %v, want pods once", lists)
	}
	// The sweep's objects: the swept nodes and their DaemonSets' ConfigMaps.
	_, objs2, err := f.Objects(ctx, client, []string{"node-1", "node-4"})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, o := range objs2.Other {
		kinds = append(kinds, o.GetObjectKind().GroupVersionKind().Kind)
	}
	if !slices.Equal(kinds, []string{"Node", "Node"}) { // the fake has no ConfigMaps: left out
		t.Errorf("sweep objects: %v", kinds)
	}
	if _, ok := f.configMaps["kube-proxy-b"]; !ok || len(f.configMaps) != 2 {
		t.Errorf("ConfigMaps asked: %v", f.configMaps)
	}
}

func TestFailureReason(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&NoKubeProxyError{Node: "n"}, "NoKubeProxy"},
		{fmt.Errorf("wrapped: %w", context.Canceled), "Interrupted"},
		{context.DeadlineExceeded, "Timeout"},
		{errors.New("node n is not Ready (kubelet stopped posting status): a debug pod cannot start there"), "NotReady"},
		{errors.New("debug pod x/y on node n cannot run: image foo cannot be pulled (ErrImagePull: x)"), "ImagePull"},
		{errors.New("debug pod x/y did not start on node n within 2m0s: Pending"), "Timeout"},
		{errors.New("namespace kubectl-proxyrules does not exist, so no debug pod can run there: ask"), "NoDebugNamespace"},
		{errors.New(`node "n" not found: list them with kubectl get nodes`), "NotFound"},
		{errors.New("something else"), "Other"},
	} {
		if got := FailureReason(tc.err); got != tc.want {
			t.Errorf("%v: %s, want %s", tc.err, got, tc.want)
		}
	}
}

// A sweep folder's manifest, objects and node folders are read only as the
// regular files and folders collect writes, inside the folder: a FIFO
// (which would block the read until someone writes) or a link (which would
// read a bundle from anywhere) is refused at once, saying what it is.
func TestSweepFolderRefusesSpecialFiles(t *testing.T) {
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, ManifestFile), []byte(`{"kind":"Bundle"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		swap func(t *testing.T, dir string) bool // false: not on this system
		want string
		fifo bool
	}{
		{"objects a FIFO", func(t *testing.T, dir string) bool {
			return replaced(t, dir, SweepObjectsFile) && mkfifo(t, filepath.Join(dir, SweepObjectsFile))
		}, "objects.json is a FIFO", true},
		{"manifest a FIFO", func(t *testing.T, dir string) bool {
			return replaced(t, dir, SweepManifestFile) && mkfifo(t, filepath.Join(dir, SweepManifestFile))
		}, "sweep.json is a FIFO", true},
		{"objects a link", func(t *testing.T, dir string) bool {
			return replaced(t, dir, SweepObjectsFile) && symlink(t, filepath.Join(outside, ManifestFile), filepath.Join(dir, SweepObjectsFile))
		}, "objects.json is a symbolic link", false},
		{"node folder a link", func(t *testing.T, dir string) bool {
			return replaced(t, dir, "nodes/node-a") && symlink(t, outside, filepath.Join(dir, "nodes", "node-a"))
		}, "nodes/node-a is a symbolic link", false},
		{"nodes a link", func(t *testing.T, dir string) bool {
			return replaced(t, dir, "nodes") && symlink(t, outside, filepath.Join(dir, "nodes"))
		}, "nodes is a symbolic link", false},
		{"node folder a file", func(t *testing.T, dir string) bool {
			return replaced(t, dir, "nodes/node-a") && os.WriteFile(filepath.Join(dir, "nodes", "node-a"), nil, 0o600) == nil
		}, "nodes/node-a is a regular file, not a folder", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeTestSweep(t)
			if !tc.swap(t, dir) {
				t.Skip("not on this system")
			}
			if tc.fifo {
				// Were the FIFO opened, a writer would unblock the read.
				defer unblockFIFO(dir)
			}
			done := make(chan error, 1)
			go func() {
				_, err := ReadSweepManifest(dir)
				done <- err
			}()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("ReadSweepManifest: %v, want an error saying %q", err, tc.want)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("ReadSweepManifest still blocked after 5 s")
			}
		})
	}
}

// writeTestSweep is a sweep folder of two nodes, node-a's bundle written.
func writeTestSweep(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "sweep")
	w, err := NewSweepWriter(dir, time.Unix(1795939150, 0))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Objects([]byte(`{"apiVersion":"v1","kind":"List","items":[]}`)); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(w.NodeDir("node-a"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := WriteManifest(w.NodeDir("node-a"), &Manifest{Node: "node-a"}); err != nil {
		t.Fatal(err)
	}
	w.Node("node-a", nil, "")
	w.Node("node-b", errors.New("node node-b is not Ready"), "NotReady")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadSweepManifest(dir); err != nil {
		t.Fatalf("the sweep as written: %v", err)
	}
	return dir
}

// replaced removes name from the sweep folder, for a test to put
// something else there; its manifest is read before (IsSweepDir).
func replaced(t *testing.T, dir, name string) bool {
	t.Helper()
	if err := os.RemoveAll(filepath.Join(dir, filepath.FromSlash(name))); err != nil {
		t.Fatal(err)
	}
	return true
}

func symlink(t *testing.T, target, link string) bool {
	if err := os.Symlink(target, link); err != nil {
		t.Logf("symlink: %v", err)
		return false
	}
	return true
}

// unblockFIFO opens the sweep's FIFOs for writing without waiting, so that
// a read blocked on one ends with the test.
func unblockFIFO(dir string) {
	for _, name := range []string{SweepObjectsFile, SweepManifestFile} {
		if f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|oNonblock, 0); err == nil {
			f.Close()
		}
	}
}
