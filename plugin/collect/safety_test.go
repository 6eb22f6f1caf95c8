package collect

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
)

// Secrets that a cluster's objects hold where the plugin reads them: none
// may reach a bundle, which strangers read.
var clusterSecrets = []string{
	"token-in-the-kubeconfig-0123456789",
	"Y2xpZW50LWtleS1kYXRh", // client-key-data
	"hunter2-password-in-env",
	"secret-in-last-applied",
	"annotation-api-key-abcdef",
	"manager-of-managed-fields",
}

func objectsWithSecrets() []runtime.Object {
	cm := testConfigMap()
	cm.Data["kubeconfig.conf"] = "apiVersion: v1\nkind: Config\nusers:\n- name: default\n  user:\n    token: " + clusterSecrets[0] + "\n    client-key-data: " + clusterSecrets[1] + "\n"
	cm.BinaryData = map[string][]byte{"ca.key": []byte(clusterSecrets[1])}
	cm.Annotations = map[string]string{"kubectl.kubernetes.io/last-applied-configuration": `{"data":{"x":"` + clusterSecrets[3] + `"}}`}
	cm.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: clusterSecrets[5], Operation: metav1.ManagedFieldsOperationApply}}
	pod := testKubeProxyPod(testNode)
	pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "PASSWORD", Value: clusterSecrets[2]}}
	pod.Spec.Containers[0].Command = []string{"kube-proxy", "--token=" + clusterSecrets[0]}
	pod.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "metrics", ContainerPort: 10249}}
	pod.Annotations = map[string]string{"vendor.example/api-key": clusterSecrets[4]}
	pod.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: clusterSecrets[5]}}
	node := testNodeObj(testNode, corev1.ConditionTrue)
	node.Labels = map[string]string{corev1.LabelTopologyZone: "zone-a"}
	node.Annotations = map[string]string{"vendor.example/api-key": clusterSecrets[4]}
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.1.7"}}
	svc := testService()
	svc.Annotations = map[string]string{"kubectl.kubernetes.io/last-applied-configuration": clusterSecrets[3]}
	svc.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: clusterSecrets[5]}}
	slice := testSlice()
	slice.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: clusterSecrets[5]}}
	return []runtime.Object{node, pod, cm, svc, slice}
}

// TestCollectBundleHasNoSecrets: the bundle keeps what the analyses read
// (kube-proxy's configuration, the pod's image and ports, the node's zone
// and addresses) and no token, key or password of the cluster's objects.
func TestCollectBundleHasNoSecrets(t *testing.T) {
	e := newEnv(t, objectsWithSecrets()...)
	if _, err := e.collector(Options{Node: testNode, Via: ViaDebugPod}).Collect(context.Background()); err != nil {
		t.Fatalf("Collect: %v", err)
	}
	filepath.WalkDir(e.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, _ := os.ReadFile(p)
		for _, s := range clusterSecrets {
			if bytes.Contains(data, []byte(s)) {
				t.Errorf("%s holds %q", filepath.Base(p), s)
			}
		}
		return nil
	})
	f, err := os.Open(filepath.Join(e.dir, "objects.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	objs, err := correlate.ReadObjects(f, "objects.json")
	if err != nil {
		t.Fatal(err)
	}
	var sawConfig, sawPod bool
	for _, o := range objs.Other {
		switch o := o.(type) {
		case *corev1.ConfigMap:
			sawConfig = strings.Contains(o.Data["config.conf"], "KubeProxyConfiguration")
			if len(o.Data) != 1 || o.BinaryData != nil {
				t.Errorf("ConfigMap keeps %v and binary %v, want config.conf only", o.Data, o.BinaryData)
			}
		case *corev1.Pod:
			c := o.Spec.Containers[0]
			sawPod = c.Image == testImage && c.Name == "kube-proxy" && len(c.Ports) == 1 && o.Spec.NodeName == testNode && o.Labels["k8s-app"] == "kube-proxy"
		}
	}
	if !sawConfig || !sawPod {
		t.Errorf("the bundle lost what the analyses read: config %v, pod image/name/ports/node/labels %v", sawConfig, sawPod)
	}
	if nv := objs.NodeView(testNode); nv.Zone != "zone-a" || !slices.Contains(nv.IPs, "10.0.1.7") {
		t.Errorf("node view %+v, want zone-a and 10.0.1.7", nv)
	}
}

// TestCollectWritesPrivateFiles: the bundle's folder and files are the
// user's alone.
func TestCollectWritesPrivateFiles(t *testing.T) {
	e := newEnv(t, defaultObjects()...)
	if _, err := e.collector(Options{Node: testNode, Via: ViaDebugPod}).Collect(context.Background()); err != nil {
		t.Fatalf("Collect: %v", err)
	}
	filepath.WalkDir(e.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		st, _ := d.Info()
		want := fs.FileMode(0o600)
		if d.IsDir() {
			want = 0o700
		}
		if st.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", p, st.Mode().Perm(), want)
		}
		return nil
	})
}

// TestCollectFailureRemovesOnlyItsOwn: a failed collection removes the
// files it wrote, and the folder only if it made it.
func TestCollectFailureRemovesOnlyItsOwn(t *testing.T) {
	for _, existing := range []bool{false, true} {
		t.Run(fmt.Sprintf("folder existed %v", existing), func(t *testing.T) {
			e := newEnv(t, defaultObjects()...)
			if existing {
				os.Mkdir(e.dir, 0o755)
			}
			e.runner.runErr = errors.New("error dialing backend: EOF")
			if _, err := e.collector(Options{Node: testNode, Via: ViaDebugPod}).Collect(context.Background()); err == nil {
				t.Fatal("Collect succeeded")
			}
			ents, err := os.ReadDir(e.dir)
			switch {
			case existing && err != nil:
				t.Errorf("the user's own folder is gone: %v", err)
			case existing && len(ents) > 0:
				t.Errorf("left in the user's folder: %v", ents)
			case !existing && !os.IsNotExist(err):
				t.Errorf("the folder the collection made is still there (%v)", err)
			}
		})
	}
}

// bigService is a Service with n endpoints in slices of 1000, as the
// EndpointSlice controller writes them.
func bigService(n int) (*corev1.Service, []*discoveryv1.EndpointSlice) {
	svc := testService()
	var slices []*discoveryv1.EndpointSlice
	for i := 0; i < n; i += 1000 {
		s := testSlice()
		s.Name = fmt.Sprintf("web-%05d", i)
		s.Endpoints = nil
		for j := i; j < min(n, i+1000); j++ {
			s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
				Addresses:  []string{fmt.Sprintf("10.%d.%d.%d", 100+j/65536, j/256%256, j%256)},
				Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
			})
		}
		slices = append(slices, s)
	}
	return svc, slices
}

// TestCollectServiceScopeBigService: explain on a Service with 5,000
// endpoints reads its 5,000 chains in execs that each fit the node's limit
// on one argument (128 KiB), instead of one the node refuses.
func TestCollectServiceScopeBigService(t *testing.T) {
	svc, slices := bigService(5000)
	objs := []runtime.Object{testNodeObj(testNode, corev1.ConditionTrue), testKubeProxyPod(testNode), testConfigMap(), svc}
	for _, s := range slices {
		objs = append(objs, s)
	}
	e := newEnv(t, objs...)
	man, err := e.collector(Options{Node: testNode, Via: ViaDebugPod, ServiceNamespace: "default", ServiceName: "web"}).Collect(context.Background())
	if err != nil {
		t.Fatalf("Collect: %v", err)
	}
	e.runner.checkAllowed(t)
	if man.Scope != "service default/web" {
		t.Errorf("scope %q, want the Service's chains only", man.Scope)
	}
	listed := 0
	for _, call := range e.runner.calls[1:] { // [0] is the probe
		for _, argv := range call {
			if strings.Contains(argv, " -S KUBE-SEP-") {
				listed++
			}
		}
	}
	if listed != 5000 {
		t.Errorf("listed %d endpoint chains, want 5000", listed)
	}
	if execs := len(e.runner.calls) - 1; execs < 2 {
		t.Errorf("%d execs for 5,000 chains: one script that long is refused", execs)
	}
	t.Logf("5,000 endpoints: %d execs", len(e.runner.calls)-1)
}

// TestCollectServiceScopeFallsBack: a node whose runtime refuses even the
// split scripts is read whole, with a note, not not at all.
func TestCollectServiceScopeFallsBack(t *testing.T) {
	e := newEnv(t, defaultObjects()...)
	e.runner.maxArg = 600 // a runtime with a much smaller limit than Linux's
	man, err := e.collector(Options{Node: testNode, Via: ViaDebugPod, ServiceNamespace: "default", ServiceName: "web"}).Collect(context.Background())
	if err != nil {
		t.Fatalf("Collect: %v", err)
	}
	if man.Scope != "full" || !e.runner.ran("iptables-nft-save") {
		t.Errorf("scope %q, ran %v: want the whole tables", man.Scope, e.runner.calls)
	}
	if !slices.ContainsFunc(man.Warnings, func(w string) bool {
		return strings.Contains(w, "could not be read chain by chain") && strings.Contains(w, "argument list too long")
	}) {
		t.Errorf("warnings %q, want a note that the chains were read whole", man.Warnings)
	}
	for _, f := range man.Files {
		if f.Partial || strings.Contains(f.Path, "-chains") {
			t.Errorf("the bundle lists %s from the abandoned chain-by-chain read", f.Path)
		}
	}
	if _, err := os.Stat(filepath.Join(e.dir, "iptables-nft-nat-chains.txt")); err == nil {
		t.Error("the abandoned chain-by-chain file is left in the bundle")
	}
}

// TestCollectServiceScopeSkipsBadChain: one jump to a chain the plugin may
// not list (a foreign, over-long KUBE- name) is skipped with a warning; the
// rest of the Service is read.
func TestCollectServiceScopeSkipsBadChain(t *testing.T) {
	const spn = "default/web:http"
	svcChain := correlate.ServiceChain(spn, "tcp")
	sep := correlate.EndpointChain(spn, "tcp", "10.244.1.5:8080")
	gone := correlate.EndpointChain(spn, "tcp", "10.244.1.9:8080")
	e := newEnv(t, defaultObjects()...)
	for chain, out := range map[string]string{
		svcChain: "-N " + svcChain + "\n-A " + svcChain + " -j " + sep + "\n-A " + svcChain + " -j " + overlong + "\n-A " + svcChain + " -j " + gone + "\n",
		sep:      "-N " + sep + "\n-A " + sep + " -p tcp -m tcp -j DNAT --to-destination 10.244.1.5:8080\n",
		gone:     "-N " + gone + "\n-A " + gone + " -p tcp -m tcp -j DNAT --to-destination 10.244.1.9:8080\n",
	} {
		e.runner.outputs["iptables-nft -t nat -S "+chain] = fakeResult{out: out}
	}
	man, err := e.collector(Options{Node: testNode, Via: ViaDebugPod, ServiceNamespace: "default", ServiceName: "web"}).Collect(context.Background())
	if err != nil {
		t.Fatalf("Collect: %v", err)
	}
	e.runner.checkAllowed(t)
	if !e.runner.ran("iptables-nft -t nat -S " + gone) {
		t.Errorf("the chain after the bad one was not read: %v", e.runner.calls)
	}
	if !slices.ContainsFunc(man.Warnings, func(w string) bool { return strings.Contains(w, overlong) && strings.Contains(w, "not read") }) {
		t.Errorf("warnings %q, want one naming %s", man.Warnings, overlong)
	}
}

// TestCollectViaKubeProxyDeadline: kube-proxy's pod has no deadline of its
// own; the read through it ends at --pod-deadline all the same.
func TestCollectViaKubeProxyDeadline(t *testing.T) {
	e := newEnv(t, defaultObjects()...)
	e.runner.block = true
	done := make(chan error, 1)
	go func() {
		_, err := e.collector(Options{Node: testNode, Via: ViaKubeProxy, Deadline: 200 * time.Millisecond}).Collect(context.Background())
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "--pod-deadline") {
			t.Errorf("Collect: %v, want an error naming --pod-deadline", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a read through kube-proxy's pod that hangs is not stopped")
	}
}

// TestCollectRemovesOwnLeftovers: a run deletes what the user's own killed
// runs left in the debug namespace (finished, or past their deadline), and
// nothing else: not a run in progress, not another user's.
func TestCollectRemovesOwnLeftovers(t *testing.T) {
	old := metav1.NewTime(fixedTime.Add(-time.Hour))
	pod := func(name, by string, deadline int64, phase corev1.PodPhase) *corev1.Pod {
		p := DebugPod(PodOptions{Node: testNode, Namespace: DefaultDebugNamespace, Image: testImage, DeadlineSeconds: deadline, StartedBy: by, NameSuffix: name})
		p.CreationTimestamp, p.UID = old, types.UID("uid-"+name)
		p.Status.Phase = phase
		return p
	}
	objs := append(defaultObjects(),
		pod("finsh", "alice", 600, corev1.PodFailed),    // mine, finished
		pod("stuck", "alice", 600, corev1.PodRunning),   // mine, past its deadline
		pod("going", "alice", 7200, corev1.PodRunning),  // mine, in progress
		pod("bobss", "bob", 600, corev1.PodFailed),      // someone else's
		pod("other", "alice", 600, corev1.PodSucceeded)) // mine, in another namespace below
	objs[len(objs)-1].(*corev1.Pod).Namespace = "default"
	objs[len(objs)-3].(*corev1.Pod).CreationTimestamp = metav1.NewTime(fixedTime.Add(-10 * time.Minute))
	e := newEnv(t, objs...)
	e.debugStatus = nil
	e.client.PrependReactor("create", "selfsubjectreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		r := a.(k8stesting.CreateAction).GetObject().(*authnv1.SelfSubjectReview).DeepCopy()
		r.Status.UserInfo.Username = "alice"
		return true, r, nil
	})
	e.debugStatus = func(p *corev1.Pod) {
		if p.Name == testDebugPod {
			podRunning(p)
		}
	}
	if _, err := e.collector(Options{Node: testNode, Via: ViaDebugPod}).Collect(context.Background()); err != nil {
		t.Fatalf("Collect: %v", err)
	}
	deleted := e.deleted()
	for name, want := range map[string]bool{"finsh": true, "stuck": true, "going": false, "bobss": false} {
		got := slices.Contains(deleted, DefaultDebugNamespace+"/proxyrules-node-a-"+name)
		if got != want {
			t.Errorf("pod %s deleted %v, want %v (deleted: %v)", name, got, want, deleted)
		}
	}
	if slices.Contains(deleted, "default/proxyrules-node-a-other") {
		t.Errorf("a pod outside the debug namespace was deleted")
	}
}

// TestCollectNamespaceMissing: without `kubectl apply -f deploy/` there is
// no debug namespace, and the error says what to do.
func TestCollectNamespaceMissing(t *testing.T) {
	e := newEnv(t, defaultObjects()...)
	e.client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, DefaultDebugNamespace)
	})
	_, err := e.collector(Options{Node: testNode, Via: ViaDebugPod}).Collect(context.Background())
	containsAll(t, err, "namespace kubectl-proxyrules does not exist", "kubectl apply -f deploy/", "--debug-namespace")
}

// TestCollectPolicyRefusal: the admission policy's refusal says what it
// allows.
func TestCollectPolicyRefusal(t *testing.T) {
	e := newEnv(t, defaultObjects()...)
	e.client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, testDebugPod,
			errors.New("ValidatingAdmissionPolicy 'kubectl-proxyrules-debug-pod' with binding 'kubectl-proxyrules-debug-pod' denied request: image example.com/x is not listed"))
	})
	_, err := e.collector(Options{Node: testNode, Via: ViaDebugPod, Image: "example.com/x"}).Collect(context.Background())
	containsAll(t, err, "admission policy of kubectl-proxyrules refused", "image example.com/x is not listed", PolicyParams)
}

// TestGetLoopback: GETs through the port-forward never follow a redirect
// (which would leave the port-forward for wherever it points, from the
// user's machine) and stop at MaxHTTPBody.
func TestGetLoopback(t *testing.T) {
	var elsewhere int
	metadata := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { elsewhere++; io.WriteString(w, "instance credentials") }))
	defer metadata.Close()
	old := MaxHTTPBody
	MaxHTTPBody = 1000
	defer func() { MaxHTTPBody = old }()
	node := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/metrics":
			io.WriteString(w, "kubeproxy_sync_proxy_rules_last_timestamp_seconds 1\n")
		case "/redirect":
			http.Redirect(w, r, metadata.URL+"/latest/meta-data/", http.StatusFound)
		case "/huge":
			w.Write(bytes.Repeat([]byte("#"), 5000))
		}
	}))
	defer node.Close()
	u, _ := url.Parse(node.URL)
	port, _ := strconv.Atoi(u.Port())
	var got bytes.Buffer
	if err := getLoopback(context.Background(), uint16(port), 10249, "/metrics", &got); err != nil || !strings.Contains(got.String(), "kubeproxy_") {
		t.Fatalf("GET /metrics: %v %q", err, got.String())
	}
	got.Reset()
	err := getLoopback(context.Background(), uint16(port), 10249, "/redirect", &got)
	if err == nil || !strings.Contains(err.Error(), "not followed") || elsewhere != 0 || got.Len() != 0 {
		t.Errorf("a redirect: %v, %d requests elsewhere, body %q; want an error and none", err, elsewhere, got.String())
	}
	got.Reset()
	err = getLoopback(context.Background(), uint16(port), 10249, "/huge", &got)
	var le *LimitError
	if !errors.As(err, &le) || int64(got.Len()) > MaxHTTPBody+1 {
		t.Errorf("a body over the cap: %v, %d bytes kept", err, got.Len())
	}
}
