package collect

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

const (
	testNode     = "node-a"
	testImage    = "registry.k8s.io/kube-proxy:v1.37.2"
	testProxyPod = "kube-proxy-x7k2p"
	testSuffix   = "t3st1"
	testDebugPod = "proxyrules-node-a-t3st1"
)

var (
	podsGVR   = corev1.SchemeGroupVersion.WithResource("pods")
	podsGVK   = corev1.SchemeGroupVersion.WithKind("Pod")
	fixedTime = time.Date(2026, 3, 4, 5, 6, 7, 800, time.FixedZone("CET", 3600))
)

// --- API objects --------------------------------------------------------

func testNodeObj(name string, ready corev1.ConditionStatus) *corev1.Node {
	cond := corev1.NodeCondition{Type: corev1.NodeReady, Status: ready}
	if ready != corev1.ConditionTrue {
		cond.Reason, cond.Message = "KubeletNotReady", "container runtime is down"
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{cond}},
	}
}

func testKubeProxyPod(node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: testProxyPod, Namespace: "kube-system",
			Labels: map[string]string{"k8s-app": "kube-proxy"},
		},
		Spec: corev1.PodSpec{
			NodeName:   node,
			Containers: []corev1.Container{{Name: "kube-proxy", Image: testImage}},
			Volumes: []corev1.Volume{{Name: "kube-proxy", VolumeSource: corev1.VolumeSource{
				ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-proxy"}},
			}}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
}

func testConfigMap() *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-proxy", Namespace: "kube-system"},
		Data: map[string]string{
			"config.conf": "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: iptables\nmetricsBindAddress: 127.0.0.1:10249\n",
		},
	}
}

func testService() *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: corev1.ServiceSpec{
			Type:       corev1.ServiceTypeClusterIP,
			ClusterIP:  "10.96.0.10",
			ClusterIPs: []string{"10.96.0.10"},
			Ports:      []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}},
		},
	}
}

func testSlice() *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web-abc12", Namespace: "default",
			Labels: map[string]string{discoveryv1.LabelServiceName: "web"},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](8080)}},
		Endpoints: []discoveryv1.Endpoint{{
			Addresses:  []string{"10.244.1.5"},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
			NodeName:   ptr.To(testNode),
		}},
	}
}

// defaultObjects is a cluster with node-a, its kube-proxy and one Service.
func defaultObjects() []runtime.Object {
	return []runtime.Object{
		testNodeObj(testNode, corev1.ConditionTrue), testDaemonSet("kube-proxy", testImage, "kube-proxy", nil), testKubeProxyPod(testNode), testConfigMap(), testService(), testSlice(),
	}
}

// --- the fake runner ----------------------------------------------------

type fakeResult struct {
	out    string
	rc     int
	stderr string // what the command prints there; an exec's commands share one stream
}

// fakeRunner plays a node: canned outputs by argv, canned bodies by path.
type fakeRunner struct {
	outputs map[string]fakeResult // by argv joined with spaces
	bodies  map[string]string     // by path; a missing path is a refused connection
	runErr  error                 // Run fails with it
	cuts    int                   // so many Runs of cutOn, after some output, fail as a connection cut under them
	cutOn   string                // the argv (joined) whose Runs are cut
	block   bool                  // Run waits for ctx to end
	onRun   func()                // called in every Run (before it blocks)
	maxArg  int                   // the longest argument the node takes; 0: the kernel's 128 KiB

	calls   [][]string // each Run's argvs, joined with spaces
	argvs   [][]string // every argv received
	targets []Target
	gets    []string
	ports   []int
	bad     []string // commands that did not pass the checks
	// conntrackCalls are the execs of the conntrack reads, not in calls.
	conntrackCalls [][]string
}

func newFakeRunner() *fakeRunner {
	return &fakeRunner{
		outputs: map[string]fakeResult{
			"iptables -V": {out: "iptables v1.8.11 (nf_tables)\n"},
			"iptables-nft -t nat -S KUBE-POSTROUTING": {out: "-N KUBE-POSTROUTING\n"},
			"iptables-nft-save":                       {out: "# Generated by iptables-nft-save v1.8.9 (nf_tables)\n*nat\n:KUBE-SERVICES - [0:0]\nCOMMIT\n"},
			"nft list table ip nat":                   {out: "table ip nat {\n\tchain KUBE-SERVICES {\n\t}\n}\n"},
			"nft list table ip filter":                {out: "table ip filter {\n\tchain KUBE-FORWARD {\n\t}\n}\n"},
		},
		bodies: map[string]string{
			"/proxyMode": "iptables",
			"/metrics":   "# TYPE kubeproxy_sync_proxy_rules_last_timestamp_seconds gauge\nkubeproxy_sync_proxy_rules_last_timestamp_seconds 1.77e+09\n",
			"/configz":   `{"kubeproxy.config.k8s.io":{"mode":"iptables"}}`,
		},
	}
}

func (r *fakeRunner) Run(ctx context.Context, t Target, cmds []NodeCommand, sink Sink) (string, error) {
	r.targets = append(r.targets, t)
	var call []string
	for _, c := range cmds {
		r.argvs = append(r.argvs, slices.Clone(c.Argv))
		call = append(call, strings.Join(c.Argv, " "))
		if err := c.Check(); err != nil {
			r.bad = append(r.bad, err.Error())
		}
	}
	if slices.ContainsFunc(cmds, isConntrackRead) {
		r.conntrackCalls = append(r.conntrackCalls, call) // kept apart from the rules' reads
	} else {
		r.calls = append(r.calls, call)
	}
	// What the remote runner would send: a script of the commands, which
	// its stream checks again, and which the kernel takes only below 128 KiB
	// (a node's runtime may take less: maxArg).
	script, err := Script(cmds)
	if err != nil {
		r.bad = append(r.bad, "Script: "+err.Error())
	} else if err := allowedOrScript(script); err != nil {
		r.bad = append(r.bad, "allowedOrScript: "+err.Error())
	}
	maxArg := r.maxArg
	if maxArg == 0 {
		maxArg = 128 << 10
	}
	if err == nil && len(script[2]) > maxArg {
		return "", fmt.Errorf(`exec: "sh": argument list too long`)
	}
	if r.onRun != nil {
		r.onRun()
	}
	if r.block {
		<-ctx.Done()
		return "", ctx.Err()
	}
	if r.runErr != nil {
		return "error: stream reset by peer\n", r.runErr
	}
	var stderr strings.Builder
	for i, c := range cmds {
		res, ok := r.outputs[strings.Join(c.Argv, " ")]
		if !ok && c.Chain != "" {
			res = fakeResult{rc: 1, stderr: "iptables: No chain/target/match by that name.\n"}
		}
		if !ok && strings.HasPrefix(strings.Join(c.Argv, " "), "nft -t list sets table ") {
			res = fakeResult{rc: 1, stderr: "Error: No such file or directory\n"} // no such table
		}
		stderr.WriteString(res.stderr)
		w, err := sink.Open(i)
		if err != nil {
			return "", err
		}
		if r.cuts > 0 && i == len(cmds)-1 && slices.Contains(call, r.cutOn) {
			r.cuts--
			io.WriteString(w, res.out[:len(res.out)/2])
			return "", errors.New("next reader: read tcp 172.31.255.1:39800->172.31.255.1:6443: read: connection reset by peer")
		}
		if _, err := io.WriteString(w, res.out); err != nil {
			return stderr.String(), err
		}
		sink.Done(i, res.rc)
	}
	return stderr.String(), nil
}

func (r *fakeRunner) Forward(ctx context.Context, t Target, port int) (GetFunc, func(), error) {
	return func(ctx context.Context, path string, w io.Writer) error { return r.get(port, path, w) }, func() {}, nil
}

// get answers a GET from the canned bodies.
func (r *fakeRunner) get(port int, path string, w io.Writer) error {
	r.gets = append(r.gets, path)
	r.ports = append(r.ports, port)
	body, ok := r.bodies[path]
	if !ok {
		return fmt.Errorf("GET 127.0.0.1:%d%s on the node: dial tcp 127.0.0.1:%d: connect: connection refused", port, path, port)
	}
	_, err := io.WriteString(w, body)
	return err
}

// ran says whether some Run received argv.
func (r *fakeRunner) ran(argv string) bool {
	for _, call := range r.calls {
		if slices.Contains(call, argv) {
			return true
		}
	}
	return false
}

// checkAllowed fails t for every command the runner got that the plugin's
// own gate would refuse.
func (r *fakeRunner) checkAllowed(t *testing.T) {
	t.Helper()
	for _, b := range r.bad {
		t.Errorf("runner received a refused command: %s", b)
	}
	for _, argv := range r.argvs {
		if err := Allowed(argv); err != nil {
			t.Errorf("Allowed(%q) = %v", argv, err)
		}
	}
}

// --- the fake cluster ---------------------------------------------------

type env struct {
	client *fake.Clientset
	runner *fakeRunner
	dir    string
	// created are the pods as the collector sent them.
	created []*corev1.Pod
	// debugStatus sets the status of the plugin's pods as the API server
	// reports it (the fake runs no kubelet).
	debugStatus func(*corev1.Pod)
	// access answers SelfSubjectAccessReviews; nil leaves the fake's
	// default (an empty status: denied).
	access  func(a authzv1.ResourceAttributes) bool
	reviews []authzv1.ResourceAttributes
}

func podRunning(p *corev1.Pod) {
	p.Status.Phase = corev1.PodRunning
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{
		Name: ContainerName, Image: p.Spec.Containers[0].Image,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
	}}
}

func podPending(p *corev1.Pod) { p.Status.Phase = corev1.PodPending }

func newEnv(t *testing.T, objs ...runtime.Object) *env {
	t.Helper()
	old := nameSuffix
	nameSuffix = func() string { return testSuffix }
	t.Cleanup(func() { nameSuffix = old })
	e := &env{
		client:      fake.NewClientset(objs...),
		runner:      newFakeRunner(),
		dir:         filepath.Join(t.TempDir(), "bundle"),
		debugStatus: podRunning,
	}
	e.client.PrependReactor("list", "pods", e.listPods)
	e.client.PrependReactor("get", "pods", e.getPod)
	e.client.PrependReactor("create", "pods", e.recordCreate)
	(&admission{inForce: true}).install(e.client) // deploy/'s policy: dry runs are not recorded
	e.client.PrependReactor("create", "selfsubjectaccessreviews", e.review)
	return e
}

// listPods honours field selectors (spec.nodeName), which the fake ignores.
func (e *env) listPods(a k8stesting.Action) (bool, runtime.Object, error) {
	la := a.(k8stesting.ListAction)
	obj, err := e.client.Tracker().List(podsGVR, podsGVK, la.GetNamespace())
	if err != nil {
		return true, nil, err
	}
	list := obj.(*corev1.PodList)
	res := la.GetListRestrictions()
	var keep []corev1.Pod
	for _, p := range list.Items {
		if res.Labels != nil && !res.Labels.Matches(labels.Set(p.Labels)) {
			continue
		}
		if res.Fields != nil && !res.Fields.Matches(fields.Set{"spec.nodeName": p.Spec.NodeName, "metadata.name": p.Name, "metadata.namespace": p.Namespace}) {
			continue
		}
		keep = append(keep, p)
	}
	list.Items = keep
	return true, list, nil
}

// getPod reports the plugin's pods with debugStatus.
func (e *env) getPod(a k8stesting.Action) (bool, runtime.Object, error) {
	ga := a.(k8stesting.GetAction)
	obj, err := e.client.Tracker().Get(podsGVR, ga.GetNamespace(), ga.GetName())
	if err != nil {
		return true, nil, err
	}
	p := obj.(*corev1.Pod).DeepCopy()
	if p.Labels[LabelManagedBy] == ManagedBy && e.debugStatus != nil {
		e.debugStatus(p)
	}
	return true, p, nil
}

func (e *env) recordCreate(a k8stesting.Action) (bool, runtime.Object, error) {
	e.created = append(e.created, a.(k8stesting.CreateAction).GetObject().(*corev1.Pod).DeepCopy())
	return false, nil, nil
}

func (e *env) review(a k8stesting.Action) (bool, runtime.Object, error) {
	if e.access == nil {
		return false, nil, nil
	}
	r := a.(k8stesting.CreateAction).GetObject().(*authzv1.SelfSubjectAccessReview).DeepCopy()
	e.reviews = append(e.reviews, *r.Spec.ResourceAttributes)
	r.Status.Allowed = e.access(*r.Spec.ResourceAttributes)
	return true, r, nil
}

// deny returns an access function that denies the listed
// "verb resource[/sub] namespace" and allows the rest.
func deny(rules ...string) func(authzv1.ResourceAttributes) bool {
	return func(a authzv1.ResourceAttributes) bool {
		what := a.Resource
		if a.Subresource != "" {
			what += "/" + a.Subresource
		}
		return !slices.Contains(rules, a.Verb+" "+what+" "+a.Namespace) && !slices.Contains(rules, "*")
	}
}

func (e *env) collector(o Options) *Collector {
	return &Collector{Client: e.client, Runner: e.runner, Options: o, Dir: e.dir, now: func() time.Time { return fixedTime }}
}

// managedPods lists the pods the plugin made that still exist.
func (e *env) managedPods(t *testing.T) []corev1.Pod {
	t.Helper()
	pods, err := e.client.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{LabelSelector: LabelManagedBy + "=" + ManagedBy})
	if err != nil {
		t.Fatal(err)
	}
	return pods.Items
}

// deleted lists "namespace/name" of the pods deleted.
func (e *env) deleted() []string {
	var out []string
	for _, a := range e.client.Actions() {
		if a.GetVerb() == "delete" && a.GetResource().Resource == "pods" {
			out = append(out, a.GetNamespace()+"/"+a.(k8stesting.DeleteAction).GetName())
		}
	}
	return out
}

func (e *env) podCreates() int {
	n := 0
	for _, a := range e.client.Actions() {
		if a.GetVerb() == "create" && a.GetResource().Resource == "pods" && a.GetSubresource() == "" {
			n++
		}
	}
	return n
}

// checkCleanedUp fails t unless every pod created was deleted.
func (e *env) checkCleanedUp(t *testing.T) {
	t.Helper()
	if left := e.managedPods(t); len(left) > 0 {
		t.Errorf("%d debug pods left behind, first %s/%s", len(left), left[0].Namespace, left[0].Name)
	}
	del := e.deleted()
	for _, p := range e.created {
		if !slices.Contains(del, p.Namespace+"/"+p.Name) {
			t.Errorf("pod %s/%s was created but not deleted (deleted: %v)", p.Namespace, p.Name, del)
		}
	}
}

func openBundle(t *testing.T, dir string) *Bundle {
	t.Helper()
	b, err := OpenBundle(context.Background(), dir, DefaultLimits)
	if err != nil {
		t.Fatalf("OpenBundle: %v", err)
	}
	t.Cleanup(b.Close)
	return b
}

func fileKinds(m *Manifest) map[string]string {
	kinds := map[string]string{}
	for _, f := range m.Files {
		kinds[f.Path] = f.Kind
	}
	return kinds
}

func findFile(m *Manifest, path string) *BundleFile {
	for i := range m.Files {
		if m.Files[i].Path == path {
			return &m.Files[i]
		}
	}
	return nil
}

// checkSizes fails t unless every file in the manifest exists with the
// size it records.
func checkSizes(t *testing.T, b *Bundle) {
	t.Helper()
	for _, f := range b.Manifest.Files {
		st, err := os.Stat(b.Path(f))
		if err != nil {
			t.Errorf("manifest lists %s: %v", f.Path, err)
			continue
		}
		if st.Size() != f.Bytes {
			t.Errorf("%s: manifest says %d bytes, the file has %d", f.Path, f.Bytes, st.Size())
		}
	}
}

func containsAll(t *testing.T, err error, wants ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("Collect succeeded, want an error mentioning %q", wants)
	}
	for _, w := range wants {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q\ndoes not mention %q", err, w)
		}
	}
}

// --- tests --------------------------------------------------------------

// debugPodCase is one collect through a debug pod and what the pod, the
// manifest and objects.json must then say.
type debugPodCase struct {
	name        string
	objs        []runtime.Object
	opts        Options
	access      func(authzv1.ResourceAttributes) bool
	user        string // what SelfSubjectReview answers
	wantNS      string
	wantImage   string
	wantOther   []string // kinds besides Services and slices in objects.json
	wantWarning string
}

// debugPodFiles are the files, and their kinds, of a full read through a
// debug pod.
var debugPodFiles = map[string]string{
	"objects.json":              KindObjects,
	"iptables-nft-save.txt":     KindRuleset,
	"iptables-legacy-save.txt":  KindRuleset,
	"ip6tables-legacy-save.txt": KindRuleset,
	"metrics-before.txt":        KindMetrics,
	"metrics.txt":               KindMetrics,
	"configz.json":              KindConfig,
	"proxymode.txt":             KindProxyMode,
	// No conntrack reads: only Options.Kernel asks for them (conntrack_test.go).
}

func debugPodCases() []debugPodCase {
	withoutProxy := []runtime.Object{testNodeObj(testNode, corev1.ConditionTrue), testService(), testSlice()}
	otherNodeProxy := append(slices.Clone(withoutProxy), testNodeObj("node-b", corev1.ConditionTrue), testKubeProxyPod("node-b"))
	return []debugPodCase{
		{
			name:      "node's kube-proxy image",
			objs:      defaultObjects(),
			opts:      Options{Node: testNode, Via: ViaDebugPod, Deadline: 5 * time.Minute},
			wantNS:    DefaultDebugNamespace,
			wantImage: testImage,
			wantOther: []string{"Node", "ConfigMap"}, // the DaemonSet's image: no pod listed
		},
		{
			name:      "auto with every right takes a debug pod",
			objs:      defaultObjects(),
			opts:      Options{Node: testNode, Via: ViaAuto, Deadline: 5 * time.Minute},
			access:    deny(),
			wantNS:    DefaultDebugNamespace,
			wantImage: testImage,
			wantOther: []string{"Node", "ConfigMap"}, // the DaemonSet's image: no pod listed
		},
		{
			name:      "debug namespace",
			objs:      defaultObjects(),
			opts:      Options{Node: testNode, Via: ViaDebugPod, DebugNamespace: "kube-system", Deadline: 5 * time.Minute},
			user:      "alice@example.com",
			wantNS:    "kube-system",
			wantImage: testImage,
			wantOther: []string{"Node", "ConfigMap"}, // the DaemonSet's image: no pod listed
		},
		{
			name:      "--image overrides kube-proxy's",
			objs:      defaultObjects(),
			opts:      Options{Node: testNode, Via: ViaDebugPod, Image: "example.com/nettools:1", Deadline: 5 * time.Minute},
			wantNS:    DefaultDebugNamespace,
			wantImage: "example.com/nettools:1",
			wantOther: []string{"Node", "ConfigMap"},
		},
		{
			name:        "--image without kube-proxy",
			objs:        withoutProxy,
			opts:        Options{Node: testNode, Via: ViaDebugPod, Image: "example.com/nettools:1", Deadline: 5 * time.Minute},
			wantNS:      DefaultDebugNamespace,
			wantImage:   "example.com/nettools:1",
			wantOther:   []string{"Node"},
			wantWarning: "no kube-proxy pod on node node-a",
		},
		{
			name:        "--image, kube-proxy only on another node",
			objs:        otherNodeProxy,
			opts:        Options{Node: testNode, Via: ViaDebugPod, Image: "example.com/nettools:1", Deadline: 5 * time.Minute},
			wantNS:      DefaultDebugNamespace,
			wantImage:   "example.com/nettools:1",
			wantOther:   []string{"Node"},
			wantWarning: "no kube-proxy pod on node node-a",
		},
	}
}

func TestCollectDebugPod(t *testing.T) {
	for _, tc := range debugPodCases() {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.objs...)
			e.access = tc.access
			if tc.user != "" {
				e.client.PrependReactor("create", "selfsubjectreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
					r := a.(k8stesting.CreateAction).GetObject().(*authnv1.SelfSubjectReview).DeepCopy()
					r.Status.UserInfo.Username = tc.user
					return true, r, nil
				})
			}
			man, err := e.collector(tc.opts).Collect(context.Background())
			if err != nil {
				t.Fatalf("Collect: %v", err)
			}
			checkDebugPodCreated(t, e, tc)
			checkDebugPodCommands(t, e, tc)
			checkDebugPodManifest(t, e, tc, man)
			checkDebugPodObjects(t, e, tc)
		})
	}
}

// checkDebugPodCreated: the pod is exactly DebugPod's, on the node, and
// gone now.
func checkDebugPodCreated(t *testing.T, e *env, tc debugPodCase) {
	t.Helper()
	if len(e.created) != 1 {
		t.Fatalf("created %d pods, want 1", len(e.created))
	}
	want := DebugPod(PodOptions{
		Node: testNode, Namespace: tc.wantNS, Image: tc.wantImage,
		PullPolicy: corev1.PullIfNotPresent, DeadlineSeconds: 300, NameSuffix: testSuffix, StartedBy: tc.user,
	})
	if diff := cmp.Diff(want, e.created[0]); diff != "" {
		t.Errorf("created pod (-DebugPod +created):\n%s", diff)
	}
	e.checkCleanedUp(t)
}

// checkDebugPodCommands: the commands are all allowed, all in the debug
// container.
func checkDebugPodCommands(t *testing.T, e *env, tc debugPodCase) {
	t.Helper()
	e.runner.checkAllowed(t)
	wantTarget := Target{Namespace: tc.wantNS, Pod: testDebugPod, Container: ContainerName}
	for _, got := range e.runner.targets {
		if got != wantTarget {
			t.Errorf("runner target %+v, want %+v", got, wantTarget)
		}
	}
	for _, p := range e.runner.ports {
		if p != 10249 {
			t.Errorf("GET on port %d, want 10249", p)
		}
	}
	if !e.runner.ran("iptables-nft-save") || e.runner.ran("nft list table ip nat") {
		t.Errorf("want iptables-nft-save and no nft read when it works: %v", e.runner.calls)
	}
}

// checkDebugPodManifest: the manifest, as returned and as written.
func checkDebugPodManifest(t *testing.T, e *env, tc debugPodCase, man *Manifest) {
	t.Helper()
	b := openBundle(t, e.dir)
	if diff := cmp.Diff(man, &b.Manifest); diff != "" {
		t.Errorf("bundle.json differs from the returned manifest (-returned +written):\n%s", diff)
	}
	m := b.Manifest
	if m.Via != ViaDebugPod || m.ProxyMode != "iptables" || m.Backend != "nf_tables" || m.Scope != "full" {
		t.Errorf("via %q, proxy mode %q, backend %q, scope %q; want debug-pod, iptables, nf_tables, full", m.Via, m.ProxyMode, m.Backend, m.Scope)
	}
	if m.Node != testNode || m.Namespace != tc.wantNS || m.Pod != testDebugPod || m.Image != tc.wantImage {
		t.Errorf("node %q, pod %s/%s, image %q; want %s, %s/%s, %s", m.Node, m.Namespace, m.Pod, m.Image, testNode, tc.wantNS, testDebugPod, tc.wantImage)
	}
	if !m.CollectedAt.Equal(fixedTime.Truncate(time.Second)) || m.CollectedAt.Location() != time.UTC {
		t.Errorf("collectedAt %v, want %v in UTC", m.CollectedAt, fixedTime.Truncate(time.Second).UTC())
	}
	if diff := cmp.Diff(debugPodFiles, fileKinds(&m)); diff != "" {
		t.Errorf("files and kinds (-want +got):\n%s", diff)
	}
	checkSizes(t, b)
	for _, f := range m.Files {
		if f.Error != "" || f.Partial {
			t.Errorf("%s: error %q, partial %v", f.Path, f.Error, f.Partial)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(e.dir, "iptables-nft-save.txt")); string(got) != e.runner.outputs["iptables-nft-save"].out {
		t.Errorf("iptables-nft-save.txt = %q, want the command's output", got)
	}
	if tc.wantWarning == "" && len(m.Warnings) > 0 {
		t.Errorf("warnings %q, want none", m.Warnings)
	}
	if tc.wantWarning != "" && !slices.ContainsFunc(m.Warnings, func(w string) bool { return strings.Contains(w, tc.wantWarning) }) {
		t.Errorf("warnings %q, want one mentioning %q", m.Warnings, tc.wantWarning)
	}
}

// checkDebugPodObjects: objects.json, what --from-objects reads.
func checkDebugPodObjects(t *testing.T, e *env, tc debugPodCase) {
	t.Helper()
	f, err := os.Open(filepath.Join(e.dir, "objects.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	objs, err := correlate.ReadObjects(f, "objects.json")
	if err != nil {
		t.Fatalf("objects.json: %v", err)
	}
	if len(objs.Services) != 1 || objs.Services[0].Name != "web" || len(objs.EndpointSlices) != 1 || objs.EndpointSlices[0].Name != "web-abc12" {
		t.Errorf("objects.json: %d services, %d slices; want web and web-abc12", len(objs.Services), len(objs.EndpointSlices))
	}
	var other []string
	for _, o := range objs.Other {
		switch o := o.(type) {
		case *corev1.Node:
			other = append(other, "Node")
			if o.Name != testNode {
				t.Errorf("objects.json holds node %q", o.Name)
			}
		case *corev1.Pod:
			other = append(other, "Pod")
			if o.Name != testProxyPod {
				t.Errorf("objects.json holds pod %q, want kube-proxy's", o.Name)
			}
		case *corev1.ConfigMap:
			other = append(other, "ConfigMap")
			if o.Name != "kube-proxy" || o.Data["config.conf"] == "" {
				t.Errorf("objects.json holds ConfigMap %q with data %v", o.Name, o.Data)
			}
		default:
			other = append(other, fmt.Sprintf("%T", o))
		}
	}
	if diff := cmp.Diff(tc.wantOther, other); diff != "" {
		t.Errorf("objects.json, other kinds (-want +got):\n%s", diff)
	}
}

// TestCollectDeletesPod: whatever goes wrong once the pod exists, it is
// deleted before Collect returns.
func TestCollectDeletesPod(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(e *env, cancel context.CancelFunc)
		timeout time.Duration
		wantIs  error
		want    []string
	}{
		{
			name:  "runner fails",
			setup: func(e *env, _ context.CancelFunc) { e.runner.runErr = errors.New("error dialing backend: EOF") },
			want:  []string{"exec in " + DefaultDebugNamespace + "/" + testDebugPod + " failed", "error dialing backend: EOF", "stream reset by peer"},
		},
		{
			name: "pods/exec forbidden",
			setup: func(e *env, _ context.CancelFunc) {
				e.runner.runErr = apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, testDebugPod, errors.New(`User "alice" cannot create resource "pods/exec"`))
			},
			want: []string{"not allowed to create pods/exec in namespace kubectl-proxyrules", "kubectl auth can-i create pods/exec -n kubectl-proxyrules"},
		},
		{
			name: "cancelled during Run",
			setup: func(e *env, cancel context.CancelFunc) {
				e.runner.block = true
				e.runner.onRun = cancel
			},
			wantIs: context.Canceled,
		},
		{
			name: "image cannot be pulled",
			setup: func(e *env, _ context.CancelFunc) {
				e.debugStatus = func(p *corev1.Pod) {
					p.Status.Phase = corev1.PodPending
					p.Status.ContainerStatuses = []corev1.ContainerStatus{{
						Name: ContainerName, Image: p.Spec.Containers[0].Image,
						State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: "manifest unknown"}},
					}}
				}
			},
			want: []string{"cannot be pulled", "--image", testImage, "ErrImagePull: manifest unknown"},
		},
		{
			name: "container exits",
			setup: func(e *env, _ context.CancelFunc) {
				e.debugStatus = func(p *corev1.Pod) {
					p.Status.Phase = corev1.PodRunning
					p.Status.ContainerStatuses = []corev1.ContainerStatus{{
						Name:  ContainerName,
						State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "StartError", ExitCode: 128, Message: `exec: "sleep": not found`}},
					}}
				}
			},
			want: []string{"container exited", "code 128", "sleep"},
		},
		{
			name: "start timeout",
			setup: func(e *env, _ context.CancelFunc) {
				e.debugStatus = podPending
				ev := &corev1.Event{
					ObjectMeta:     metav1.ObjectMeta{Name: testDebugPod + ".1", Namespace: DefaultDebugNamespace},
					InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: DefaultDebugNamespace, Name: testDebugPod},
					Type:           corev1.EventTypeWarning, Reason: "FailedCreatePodSandBox", Message: "network plugin not ready",
				}
				if err := e.client.Tracker().Add(ev); err != nil {
					panic(err)
				}
			},
			timeout: 300 * time.Millisecond,
			want:    []string{"did not start", "within 300ms", "FailedCreatePodSandBox: network plugin not ready"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, defaultObjects()...)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			tc.setup(e, cancel)
			start := time.Now()
			_, err := e.collector(Options{Node: testNode, Via: ViaDebugPod, StartTimeout: tc.timeout}).Collect(ctx)
			if tc.wantIs != nil {
				if !errors.Is(err, tc.wantIs) {
					t.Errorf("Collect: %v, want %v", err, tc.wantIs)
				}
			} else {
				containsAll(t, err, tc.want...)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("Collect took %s", d)
			}
			if len(e.created) != 1 {
				t.Fatalf("created %d pods, want 1", len(e.created))
			}
			e.checkCleanedUp(t)
			if _, err := os.Stat(filepath.Join(e.dir, ManifestFile)); err == nil {
				t.Errorf("a failed collection wrote %s", ManifestFile)
			}
		})
	}
}

// TestCollectRefused: errors before any pod runs say what to do, and leave
// nothing behind.
func TestCollectRefused(t *testing.T) {
	forbidden := func(msg string) func(e *env) {
		return func(e *env) {
			e.client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, testDebugPod, errors.New(msg))
			})
		}
	}
	withoutProxy := []runtime.Object{testNodeObj(testNode, corev1.ConditionTrue), testService(), testSlice()}
	tests := []struct {
		name  string
		objs  []runtime.Object
		setup func(e *env)
		opts  Options
		check func(t *testing.T, err error)
	}{
		{
			name:  "create pods forbidden",
			objs:  defaultObjects(),
			setup: forbidden(`User "alice" cannot create resource "pods" in API group "" in the namespace "kubectl-proxyrules"`),
			opts:  Options{Node: testNode, Via: ViaDebugPod},
			check: func(t *testing.T, err error) {
				var f *Forbidden
				if !errors.As(err, &f) {
					t.Fatalf("Collect: %v (%T), want *Forbidden", err, err)
				}
				if f.Verb != "create" || f.Resource != "pods" || f.Namespace != DefaultDebugNamespace {
					t.Errorf("Forbidden{Verb: %q, Resource: %q, Namespace: %q}, want create pods in %s", f.Verb, f.Resource, f.Namespace, DefaultDebugNamespace)
				}
				containsAll(t, err, "not allowed to create pods in namespace kubectl-proxyrules", "kubectl apply -f deploy/", "kubectl auth can-i create pods -n kubectl-proxyrules")
			},
		},
		{
			name:  "PodSecurity",
			objs:  defaultObjects(),
			setup: forbidden(`violates PodSecurity "baseline:latest": host namespaces (hostNetwork=true), non-default capabilities (container "proxyrules" must not include "NET_ADMIN", "NET_RAW" in securityContext.capabilities.add)`),
			opts:  Options{Node: testNode, Via: ViaDebugPod},
			check: func(t *testing.T, err error) {
				var ps *PodSecurityError
				if !errors.As(err, &ps) {
					t.Fatalf("Collect: %v (%T), want *PodSecurityError", err, err)
				}
				if ps.Namespace != DefaultDebugNamespace {
					t.Errorf("PodSecurityError.Namespace = %q", ps.Namespace)
				}
				var f *Forbidden
				if errors.As(err, &f) {
					t.Errorf("a PodSecurity refusal reported as RBAC: %v", f)
				}
				containsAll(t, err, `violates PodSecurity "baseline:latest": host namespaces (hostNetwork=true)`, "--debug-namespace", "--via kube-proxy")
			},
		},
		{
			name: "node not found",
			objs: defaultObjects(),
			opts: Options{Node: "node-x", Via: ViaDebugPod},
			check: func(t *testing.T, err error) {
				containsAll(t, err, `node "node-x" not found`)
			},
		},
		{
			name: "node not Ready",
			objs: []runtime.Object{testNodeObj(testNode, corev1.ConditionFalse), testKubeProxyPod(testNode), testConfigMap()},
			opts: Options{Node: testNode, Via: ViaDebugPod},
			check: func(t *testing.T, err error) {
				containsAll(t, err, "not Ready", "KubeletNotReady", "--via kube-proxy")
			},
		},
		{
			name: "no kube-proxy, no --image",
			objs: withoutProxy,
			opts: Options{Node: testNode, Via: ViaDebugPod},
			check: func(t *testing.T, err error) {
				var nk *NoKubeProxyError
				if !errors.As(err, &nk) || nk.Node != testNode {
					t.Errorf("Collect: %v (%T), want *NoKubeProxyError for %s", err, err, testNode)
				}
			},
		},
		{
			name: "kube-proxy only on another node",
			objs: append(slices.Clone(withoutProxy), testKubeProxyPod("node-b")),
			opts: Options{Node: testNode, Via: ViaAuto},
			check: func(t *testing.T, err error) {
				var nk *NoKubeProxyError
				if !errors.As(err, &nk) {
					t.Errorf("Collect: %v (%T), want *NoKubeProxyError", err, err)
				}
			},
		},
		{
			name: "via kube-proxy without kube-proxy",
			objs: withoutProxy,
			opts: Options{Node: testNode, Via: ViaKubeProxy, Image: "example.com/nettools:1"},
			check: func(t *testing.T, err error) {
				var nk *NoKubeProxyError
				if !errors.As(err, &nk) {
					t.Errorf("Collect: %v (%T), want *NoKubeProxyError", err, err)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.objs...)
			if tc.setup != nil {
				tc.setup(e)
			}
			man, err := e.collector(tc.opts).Collect(context.Background())
			if err == nil {
				t.Fatalf("Collect succeeded (%+v), want an error", man)
			}
			tc.check(t, err)
			e.checkCleanedUp(t)
			if len(e.runner.calls) > 0 || len(e.runner.gets) > 0 {
				t.Errorf("the runner was used: %v %v", e.runner.calls, e.runner.gets)
			}
		})
	}
}

func TestCollectViaAuto(t *testing.T) {
	tests := []struct {
		name       string
		access     func(authzv1.ResourceAttributes) bool
		wantErr    []string
		wantTarget Target
	}{
		{
			name:       "no debug pod rights, exec into kube-proxy",
			access:     deny("create pods kubectl-proxyrules"),
			wantTarget: Target{Namespace: "kube-system", Pod: testProxyPod, Container: "kube-proxy"},
		},
		{
			name:       "no delete right, exec into kube-proxy",
			access:     deny("delete pods kubectl-proxyrules"),
			wantTarget: Target{Namespace: "kube-system", Pod: testProxyPod, Container: "kube-proxy"},
		},
		{
			name:   "nothing allowed",
			access: deny("*"),
			wantErr: []string{
				`missing "create" on pods in kubectl-proxyrules, "create" on pods/exec in kube-system`,
				RBACFile, "kubectl auth can-i",
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, defaultObjects()...)
			e.access = tc.access
			man, err := e.collector(Options{Node: testNode, Via: ViaAuto}).Collect(context.Background())
			if n := e.podCreates(); n != 0 {
				t.Errorf("%d pods created, want none", n)
			}
			if len(e.reviews) == 0 {
				t.Errorf("auto asked no SelfSubjectAccessReview")
			}
			if tc.wantErr != nil {
				containsAll(t, err, tc.wantErr...)
				if len(e.runner.calls) > 0 {
					t.Errorf("the runner ran %v", e.runner.calls)
				}
				return
			}
			if err != nil {
				t.Fatalf("Collect: %v", err)
			}
			if len(e.runner.targets) == 0 {
				t.Fatal("nothing ran")
			}
			for _, got := range e.runner.targets {
				if got != tc.wantTarget {
					t.Errorf("runner target %+v, want %+v", got, tc.wantTarget)
				}
			}
			e.runner.checkAllowed(t)
			if man.Via != ViaKubeProxy || man.Namespace != "kube-system" || man.Pod != testProxyPod || man.Image != testImage {
				t.Errorf("manifest via %q, pod %s/%s, image %q", man.Via, man.Namespace, man.Pod, man.Image)
			}
			b := openBundle(t, e.dir)
			if b.Manifest.Via != ViaKubeProxy {
				t.Errorf("bundle.json via %q", b.Manifest.Via)
			}
		})
	}
}

// withConfigMode is objs with kube-proxy's ConfigMap setting mode.
func withConfigMode(objs []runtime.Object, mode string) []runtime.Object {
	objs = slices.Clone(objs)
	for i, o := range objs {
		if cm, ok := o.(*corev1.ConfigMap); ok {
			cm = cm.DeepCopy()
			cm.Data["config.conf"] = strings.Replace(cm.Data["config.conf"], "mode: iptables", "mode: "+mode, 1)
			objs[i] = cm
		}
	}
	return objs
}

// TestCollectConfigModeWrong: a ConfigMap that says nftables where the
// node has no kube-proxy table (kube-proxy not restarted since) costs a
// failed optional read, not a wrong mode: the manifest says none, and
// the iptables-nft rules are read.
func TestCollectConfigModeWrong(t *testing.T) {
	e := newEnv(t, withConfigMode(defaultObjects(), "nftables")...)
	r := e.runner
	delete(r.bodies, "/proxyMode")
	r.outputs["nft -j list table ip kube-proxy"] = fakeResult{rc: 1}
	r.outputs["nft list table ip kube-proxy"] = fakeResult{rc: 1}
	man, err := e.collector(Options{Node: testNode, Via: ViaDebugPod}).Collect(context.Background())
	if err != nil {
		t.Fatalf("Collect: %v", err)
	}
	e.runner.checkAllowed(t)
	if man.ProxyMode != "" {
		t.Errorf("proxy mode %q, want none: the node has no kube-proxy table", man.ProxyMode)
	}
	if !r.ran("iptables-nft-save") {
		t.Errorf("the iptables-nft rules were not read: %v", r.calls)
	}
	if len(man.Warnings) != 0 {
		t.Errorf("warnings %q: the table was optional", man.Warnings)
	}
}

func TestCollectNFTables(t *testing.T) {
	const jsonCmd, textCmd = "nft -j list table ip kube-proxy", "nft list table ip kube-proxy"
	jsonFile, textFile := NFTTable(kubeproxy.IPv4, kubeproxy.NFTTable, true).FileName(), NFTTable(kubeproxy.IPv4, kubeproxy.NFTTable, false).FileName()
	if jsonFile == textFile {
		t.Fatalf("the JSON and text listings share the file name %s", jsonFile)
	}
	tests := []struct {
		name      string
		proxyMode string // "" for a /proxyMode that does not answer
		// configMode is the mode kube-proxy's ConfigMap sets ("": iptables)
		configMode string
		jsonRC     int
		wantFiles  map[string]string
		wantRetry  bool
	}{
		{
			name: "json", proxyMode: "nftables",
			wantFiles: map[string]string{jsonFile: KindRuleset},
		},
		{
			name: "nft without json", proxyMode: "nftables", jsonRC: 1, wantRetry: true,
			wantFiles: map[string]string{jsonFile: KindFailed, textFile: KindRuleset},
		},
		{
			name: "mode from the tables", proxyMode: "",
			wantFiles: map[string]string{jsonFile: KindRuleset},
		},
		{
			// no nft list chain: it costs what the read costs
			name: "mode from the ConfigMap", proxyMode: "", configMode: "nftables",
			wantFiles: map[string]string{jsonFile: KindRuleset},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			objs := defaultObjects()
			if tc.configMode != "" {
				objs = withConfigMode(objs, tc.configMode)
			}
			e := newEnv(t, objs...)
			r := e.runner
			r.outputs["nft -t list sets table ip kube-proxy"] = fakeResult{out: "table ip kube-proxy {\n\tset cluster-ips {\n\t\ttype ipv4_addr\n\t}\n}\n"}
			delete(r.outputs, "iptables-nft -t nat -S KUBE-POSTROUTING") // no iptables-nft rules
			if tc.jsonRC != 0 {
				r.outputs[jsonCmd] = fakeResult{rc: tc.jsonRC}
			} else {
				r.outputs[jsonCmd] = fakeResult{out: `{"nftables": [{"metainfo": {"json_schema_version": 1}}]}` + "\n"}
			}
			r.outputs[textCmd] = fakeResult{out: "table ip kube-proxy {\n}\n"}
			if tc.proxyMode == "" {
				delete(r.bodies, "/proxyMode")
			} else {
				r.bodies["/proxyMode"] = tc.proxyMode + "\n"
			}
			man, err := e.collector(Options{Node: testNode, Via: ViaDebugPod}).Collect(context.Background())
			if err != nil {
				t.Fatalf("Collect: %v", err)
			}
			e.runner.checkAllowed(t)
			if man.ProxyMode != "nftables" {
				t.Errorf("proxy mode %q, want nftables", man.ProxyMode)
			}
			for _, argv := range r.argvs {
				// it loads every table: over a minute beside 380k iptables-nft rules
				if strings.Join(argv, " ") == "nft list tables" {
					t.Errorf("the probe ran nft list tables")
				}
			}
			if probed := r.ran("nft -t list sets table ip kube-proxy"); probed != (tc.proxyMode == "" && tc.configMode == "") {
				t.Errorf("asked nft for kube-proxy's chain: %v (calls %v)", probed, r.calls)
			}
			// With the mode known before any exec, the probe rides in the
			// read's exec: one round trip fewer.
			read := 1
			if tc.proxyMode != "" || tc.configMode != "" {
				read = 0
				if !slices.Contains(r.calls[0], "iptables -V") || !slices.Contains(r.calls[0], "nft --version") {
					t.Errorf("the probe is not in the read's exec: %q", r.calls)
				}
			}
			if len(r.calls) <= read || !slices.Contains(r.calls[read], jsonCmd) {
				t.Fatalf("the read plan %v lacks %q", r.calls, jsonCmd)
			}
			if r.ran("nft list table ip6 kube-proxy-other") || r.ran("nft list table ip nat") {
				t.Errorf("read tables the node does not have: %v", r.calls)
			}
			retried := len(r.calls) == read+2 && slices.Equal(r.calls[read+1], []string{textCmd})
			if retried != tc.wantRetry {
				t.Errorf("runs %q; want a text retry: %v", r.calls, tc.wantRetry)
			}
			b := openBundle(t, e.dir)
			checkSizes(t, b)
			kinds := fileKinds(&b.Manifest)
			for path, kind := range tc.wantFiles {
				if kinds[path] != kind {
					t.Errorf("file %s: kind %q, want %q (files %v)", path, kinds[path], kind, kinds)
				}
			}
			jf := findFile(&b.Manifest, jsonFile)
			if tc.wantRetry {
				if jf == nil || !strings.Contains(jf.Error, "exit status 1") {
					t.Errorf("the failed nft -j is not marked: %+v", jf)
				}
				if got, _ := os.ReadFile(filepath.Join(e.dir, textFile)); string(got) != "table ip kube-proxy {\n}\n" {
					t.Errorf("%s = %q", textFile, got)
				}
			} else if jf == nil || jf.Error != "" {
				t.Errorf("nft -j file: %+v", jf)
			}
		})
	}
}

// In nftables mode the probe rides in the read's exec, which reads
// kube-proxy's tables; what it finds besides is read in a second exec:
// kube-proxy's chains left in iptables-nft (read whole, as a mismatch),
// or an image without nft (iptables-nft's tables through iptables-nft-save).
func TestCollectNFTablesProbeFindsMore(t *testing.T) {
	tests := []struct {
		name      string
		outputs   map[string]fakeResult
		wantThen  [][]string // the execs after the first
		wantFiles []string
		wantWarn  string // a warning that says so ("" none about nft)
	}{
		{"the usual node", map[string]fakeResult{"iptables-nft -t nat -S KUBE-POSTROUTING": {rc: 1}}, nil, nil, ""},
		{"iptables-nft chains left", nil, [][]string{{"iptables-nft-save"}}, []string{"iptables-nft-save.txt"}, ""},
		// Every nft fails: nft --version failed in the same exec, so the
		// listings are not tried again as text; iptables-nft's tables are
		// read instead, and the warning says why kube-proxy's are not.
		{"no nft", map[string]fakeResult{"nft --version": {rc: 127}, "iptables-nft -t nat -S KUBE-POSTROUTING": {rc: 1},
			"nft -j list table ip kube-proxy": {rc: 127}, "nft -j list table ip6 kube-proxy": {rc: 127},
			"nft list table ip kube-proxy": {rc: 127}, "nft list table ip6 kube-proxy": {rc: 127}},
			[][]string{{"iptables-nft-save", "ip6tables-nft-save"}},
			[]string{"iptables-nft-save.txt", "ip6tables-nft-save.txt"}, "nft does not run in pod"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, defaultObjects()...)
			r := e.runner
			r.bodies["/proxyMode"] = "nftables\n"
			r.outputs["nft --version"] = fakeResult{out: "nftables v1.0.6 (Lester Gooch #5)\n"}
			r.outputs["nft -j list table ip kube-proxy"] = fakeResult{out: `{"nftables": [{"metainfo": {"json_schema_version": 1}}]}` + "\n"}
			for cmd, res := range tc.outputs {
				r.outputs[cmd] = res
			}
			man, err := e.collector(Options{Node: testNode, Via: ViaDebugPod}).Collect(context.Background())
			if err != nil {
				t.Fatalf("Collect: %v", err)
			}
			e.runner.checkAllowed(t)
			if len(r.calls) == 0 || !slices.Contains(r.calls[0], "iptables -V") || !slices.Contains(r.calls[0], "nft -j list table ip kube-proxy") {
				t.Fatalf("the first exec %q is not the probe with the read", r.calls)
			}
			if then := r.calls[1:]; !slices.EqualFunc(then, tc.wantThen, slices.Equal) {
				t.Errorf("execs %q, want after the first %q", r.calls, tc.wantThen)
			}
			if man.ProxyMode != "nftables" || man.Backend != "nf_tables" {
				t.Errorf("mode %q, backend %q", man.ProxyMode, man.Backend)
			}
			kinds := fileKinds(man)
			for _, f := range tc.wantFiles {
				if kinds[f] != KindRuleset {
					t.Errorf("file %s: kind %q (files %v)", f, kinds[f], kinds)
				}
			}
			nftWarnings := warningsAbout(man, "nft")
			if tc.wantWarn == "" && len(nftWarnings) > 0 || tc.wantWarn != "" && (len(nftWarnings) != 1 || !strings.Contains(nftWarnings[0], tc.wantWarn)) {
				t.Errorf("warnings about nft %q, want one saying %q", nftWarnings, tc.wantWarn)
			}
		})
	}
}

// TestFailedCommandHint: a failed command's warning quotes stderr as its
// own only when no other command of its exec failed; the probe's chain
// lookups that fail by design share the read's exec in nftables mode.
func TestFailedCommandHint(t *testing.T) {
	const legacyErr = "iptables-legacy-save: can't initialize iptables table `nat': Permission denied"
	tests := []struct {
		name, mode string
		want       string // in the legacy save's warning
		notWant    string
	}{
		// The probe runs in an exec of its own: the read's only failure.
		{"iptables mode", "iptables", "iptables-legacy-save failed (exit status 1): " + legacyErr, "same exec"},
		// The probe rides in the read's exec, and its two lookups of
		// KUBE-POSTROUTING fail there first.
		{"nftables mode", "nftables", `3 commands of the same exec failed, whose stderr says "iptables: No chain/target/match by that name.", ` +
			`"iptables: No chain/target/match by that name.", "` + legacyErr + `"`, "failed (exit status 1): iptables: No chain"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, defaultObjects()...)
			r := e.runner
			r.bodies["/proxyMode"] = tc.mode + "\n"
			r.outputs["nft --version"] = fakeResult{out: "nftables v1.0.6 (Lester Gooch #5)\n"}
			r.outputs["nft -j list table ip kube-proxy"] = fakeResult{out: `{"nftables": [{"metainfo": {"json_schema_version": 1}}]}` + "\n"}
			delete(r.outputs, "iptables-nft -t nat -S KUBE-POSTROUTING") // the chain is not there: rc 1 and its message
			r.outputs["iptables-legacy-save"] = fakeResult{rc: 1, stderr: legacyErr + "\n"}
			man, err := e.collector(Options{Node: testNode, Via: ViaDebugPod}).Collect(context.Background())
			if err != nil {
				t.Fatalf("Collect: %v", err)
			}
			got := strings.Join(warningsAbout(man, "iptables-legacy-save failed"), "\n")
			if !strings.Contains(got, tc.want) || strings.Contains(got, tc.notWant) {
				t.Errorf("warning %q\nwant it to say %q, not %q (warnings %q)", got, tc.want, tc.notWant, man.Warnings)
			}
		})
	}
}

func TestStderrHint(t *testing.T) {
	tests := []struct {
		stderr string
		failed int
		want   string
	}{
		{"", 1, ""},
		{"  \n", 3, ""},
		{"Error: No such file or directory\nlist table ip x\n", 1, ": Error: No such file or directory"},
		{"a\nb\n", 0, ": a"}, // the command's rc unknown: as its own
		{"a\n b \n", 2, `; 2 commands of the same exec failed, whose stderr says "a", "b"`},
		{"a\nb\nc\nd\ne\n", 4, `; 4 commands of the same exec failed, whose stderr says "a", "b", "c", …`},
		{"bad\x1b[31m\n\xff\n", 2, `; 2 commands of the same exec failed, whose stderr says "bad\x1b[31m", "\xff"`},
	}
	for _, tc := range tests {
		if got := stderrHint(tc.stderr, tc.failed); got != tc.want {
			t.Errorf("stderrHint(%q, %d) = %q, want %q", tc.stderr, tc.failed, got, tc.want)
		}
	}
}

// warningsAbout are man's warnings that contain about.
func warningsAbout(man *Manifest, about string) []string {
	var out []string
	for _, msg := range man.Warnings {
		if strings.Contains(msg, about) {
			out = append(out, msg)
		}
	}
	return out
}

// scopeChains are web's chains, one other Service's, and what the node
// lists for each "table chain" in a read scoped to web.
type scopeChains struct {
	svc, sepLive, sepGone, otherSvc string
	outputs                         map[string]string // by "table chain"
}

func newScopeChains() scopeChains {
	const spn = "default/web:http"
	svcChain := correlate.ServiceChain(spn, "tcp")
	sepLive := correlate.EndpointChain(spn, "tcp", "10.244.1.5:8080")
	sepGone := correlate.EndpointChain(spn, "tcp", "10.244.1.9:8080") // no longer in the slices
	otherSvc := correlate.ServiceChain("default/other:http", "tcp")
	chainOutputs := map[string]string{
		"nat KUBE-SERVICES": "-N KUBE-SERVICES\n" +
			"-A KUBE-SERVICES -d 10.96.0.10/32 -p tcp -m comment --comment \"default/web:http cluster IP\" -m tcp --dport 80 -j " + svcChain + "\n" +
			"-A KUBE-SERVICES -d 10.96.0.11/32 -p tcp -m comment --comment \"default/other:http cluster IP\" -m tcp --dport 80 -j " + otherSvc + "\n" +
			"-A KUBE-SERVICES -m comment --comment \"kubernetes service nodeports\" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS\n",
		"nat KUBE-NODEPORTS":   "-N KUBE-NODEPORTS\n",
		"nat KUBE-MARK-MASQ":   "-N KUBE-MARK-MASQ\n-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000\n",
		"nat KUBE-POSTROUTING": "-N KUBE-POSTROUTING\n-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN\n",
		"nat " + svcChain: "-N " + svcChain + "\n" +
			"-A " + svcChain + " -m comment --comment \"default/web:http -> 10.244.1.5:8080\" -m statistic --mode random --probability 0.50000000000 -j " + sepLive + "\n" +
			"-A " + svcChain + " -m comment --comment \"default/web:http -> 10.244.1.9:8080\" -j " + sepGone + "\n",
		"nat " + sepLive: "-N " + sepLive + "\n" +
			"-A " + sepLive + " -s 10.244.1.5/32 -m comment --comment default/web:http -j KUBE-MARK-MASQ\n" +
			"-A " + sepLive + " -p tcp -m comment --comment default/web:http -m tcp -j DNAT --to-destination 10.244.1.5:8080\n",
		"nat " + sepGone: "-N " + sepGone + "\n" +
			"-A " + sepGone + " -s 10.244.1.9/32 -m comment --comment default/web:http -j KUBE-MARK-MASQ\n" +
			"-A " + sepGone + " -p tcp -m comment --comment default/web:http -m tcp -j DNAT --to-destination 10.244.1.9:8080\n",
		"filter KUBE-SERVICES": "-N KUBE-SERVICES\n",
		"filter KUBE-FORWARD":  "-N KUBE-FORWARD\n-A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP\n",
	}
	return scopeChains{svc: svcChain, sepLive: sepLive, sepGone: sepGone, otherSvc: otherSvc, outputs: chainOutputs}
}

// listChain is the command that lists key ("table chain") with prog.
func listChain(prog, key string) string {
	table, chain, _ := strings.Cut(key, " ")
	return prog + " -t " + table + " -S " + chain
}

func TestCollectServiceScope(t *testing.T) {
	ch := newScopeChains()

	// The chains the collector derives from the objects.
	objs := &correlate.Objects{Services: []*corev1.Service{testService()}, EndpointSlices: []*discoveryv1.EndpointSlice{testSlice()}}
	owned := correlate.ChainsOfService(objs.ServicePorts())
	if !slices.Contains(owned, ch.svc) || !slices.Contains(owned, ch.sepLive) || slices.Contains(owned, ch.sepGone) {
		t.Fatalf("ChainsOfService = %v; want %s and %s, not %s", owned, ch.svc, ch.sepLive, ch.sepGone)
	}

	tests := []struct {
		name      string
		proxyMode string
		version   string
		given     bool // objects passed in Options.Objects
		wantScope bool
	}{
		{name: "iptables on nf_tables", proxyMode: "iptables", version: "iptables v1.8.11 (nf_tables)", wantScope: true},
		{name: "objects given", proxyMode: "iptables", version: "iptables v1.8.11 (nf_tables)", given: true, wantScope: true},
		{name: "legacy backend reads all", proxyMode: "iptables", version: "iptables v1.8.11 (legacy)"},
		{name: "nftables mode reads all", proxyMode: "nftables", version: "iptables v1.8.11 (nf_tables)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, defaultObjects()...)
			r := e.runner
			r.bodies["/proxyMode"] = tc.proxyMode
			r.outputs["iptables -V"] = fakeResult{out: tc.version + "\n"}
			for key, out := range ch.outputs {
				r.outputs[listChain("iptables-nft", key)] = fakeResult{out: out}
			}
			opts := Options{Node: testNode, Via: ViaDebugPod, ServiceNamespace: "default", ServiceName: "web"}
			if tc.given {
				opts.Objects = &correlate.Objects{Services: []*corev1.Service{testService()}, EndpointSlices: []*discoveryv1.EndpointSlice{testSlice()}}
			}
			man, err := e.collector(opts).Collect(context.Background())
			if err != nil {
				t.Fatalf("Collect: %v", err)
			}
			e.runner.checkAllowed(t)
			b := openBundle(t, e.dir)
			checkSizes(t, b)
			if !tc.wantScope {
				checkReadWhole(t, man, r)
				return
			}
			if want := "service default/web"; man.Scope != want || b.Manifest.Scope != want {
				t.Errorf("scope %q (bundle.json %q), want %q", man.Scope, b.Manifest.Scope, want)
			}
			checkScopedRounds(t, r, ch)
			checkScopedFiles(t, e, b, ch)
			if kinds := fileKinds(&b.Manifest); kinds["metrics.txt"] != KindMetrics || kinds["objects.json"] != KindObjects && !tc.given {
				t.Errorf("files %v", kinds)
			}
		})
	}
}

// checkReadWhole: where a scoped read is no faster, the whole tables are
// read, not chain by chain.
func checkReadWhole(t *testing.T, man *Manifest, r *fakeRunner) {
	t.Helper()
	if man.Scope != "full" {
		t.Errorf("scope %q, want full", man.Scope)
	}
	for _, call := range r.calls[1:] { // [0] is the probe, which sizes KUBE-SERVICES
		for _, argv := range call {
			if strings.Contains(argv, " -S ") {
				t.Errorf("read chain by chain (%s) where the whole tables are as fast", argv)
			}
		}
	}
}

// checkScopedRounds: the probe, then the chains the objects name, then
// the endpoint chain round 1 found that the objects no longer name; no
// other Service's chain and no whole table.
func checkScopedRounds(t *testing.T, r *fakeRunner, ch scopeChains) {
	t.Helper()
	if len(r.calls) != 3 {
		t.Fatalf("%d runs, want probe, round 1, round 2: %q", len(r.calls), r.calls)
	}
	round1 := r.calls[1]
	for _, want := range []string{
		"iptables-nft -t nat -S KUBE-SERVICES",
		"iptables-nft -t nat -S " + ch.svc,
		"iptables-nft -t nat -S " + ch.sepLive,
		"iptables-nft -t filter -S KUBE-FORWARD",
	} {
		if !slices.Contains(round1, want) {
			t.Errorf("round 1 %q lacks %q", round1, want)
		}
	}
	if diff := cmp.Diff([]string{"iptables-nft -t nat -S " + ch.sepGone}, r.calls[2]); diff != "" {
		t.Errorf("round 2 (-want +got):\n%s", diff)
	}
	if r.ran("iptables-nft -t nat -S "+ch.otherSvc) || r.ran("nft list table ip nat") || r.ran("iptables-nft-save") {
		t.Errorf("read more than the Service's chains: %q", r.calls)
	}
}

// checkScopedFiles: the chains read are written as partial save files,
// one a table.
func checkScopedFiles(t *testing.T, e *env, b *Bundle, ch scopeChains) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(e.dir, "iptables-nft-nat-chains.txt"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) < 3 || !strings.HasPrefix(lines[0], "# ") || lines[1] != "*nat" || lines[len(lines)-1] != "COMMIT" || !strings.HasSuffix(string(data), "\n") {
		t.Errorf("iptables-nft-nat-chains.txt is not a save file:\n%s", data)
	}
	for _, key := range []string{"nat KUBE-SERVICES", "nat " + ch.svc, "nat " + ch.sepLive, "nat " + ch.sepGone} {
		if !strings.Contains(string(data), ch.outputs[key]) {
			t.Errorf("iptables-nft-nat-chains.txt lacks %s", key)
		}
	}
	filter, err := os.ReadFile(filepath.Join(e.dir, "iptables-nft-filter-chains.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(filter), "\n*filter\n") || !strings.HasSuffix(string(filter), "\nCOMMIT\n") {
		t.Errorf("iptables-nft-filter-chains.txt:\n%s", filter)
	}
	for _, name := range []string{"iptables-nft-nat-chains.txt", "iptables-nft-filter-chains.txt"} {
		f := findFile(&b.Manifest, name)
		if f == nil {
			t.Errorf("manifest lacks %s: %+v", name, b.Manifest.Files)
			continue
		}
		if !f.Partial || f.Kind != KindRuleset {
			t.Errorf("%s: partial %v, kind %q; want partial ruleset", name, f.Partial, f.Kind)
		}
	}
	// 4 fixed nat chains, the SVC chain and both SEP chains.
	if f := findFile(&b.Manifest, "iptables-nft-nat-chains.txt"); f != nil && !strings.Contains(f.Command, "(7 chains present)") {
		t.Errorf("nat command %q, want 7 chains present", f.Command)
	}
}

func TestCollectMetricsClosed(t *testing.T) {
	tests := []struct {
		name string
		port int
		want int
	}{
		{name: "default port", want: 10249},
		{name: "--metrics-port", port: 12345, want: 12345},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, defaultObjects()...)
			e.runner.bodies = map[string]string{}
			man, err := e.collector(Options{Node: testNode, Via: ViaDebugPod, MetricsPort: tc.port}).Collect(context.Background())
			if err != nil {
				t.Fatalf("Collect: %v", err)
			}
			e.checkCleanedUp(t)
			warned := warningsAbout(man, "metricsBindAddress")
			if len(warned) != 2 {
				t.Errorf("warnings %q, want two about metricsBindAddress (/metrics, /configz)", man.Warnings)
			}
			for _, w := range warned {
				if !strings.Contains(w, fmt.Sprintf("127.0.0.1:%d", tc.want)) {
					t.Errorf("warning %q does not name port %d", w, tc.want)
				}
			}
			for _, p := range e.runner.ports {
				if p != tc.want {
					t.Errorf("GET on port %d, want %d", p, tc.want)
				}
			}
			b := openBundle(t, e.dir)
			if diff := cmp.Diff(man.Warnings, b.Manifest.Warnings); diff != "" {
				t.Errorf("bundle.json warnings (-returned +written):\n%s", diff)
			}
			kinds := fileKinds(&b.Manifest)
			if _, ok := kinds["metrics.txt"]; ok {
				t.Errorf("metrics.txt listed though /metrics did not answer")
			}
			if kinds["iptables-nft-save.txt"] != KindRuleset {
				t.Errorf("the rules were not read: %v", kinds)
			}
			if b.Manifest.ProxyMode != "" || b.Manifest.Backend != "nf_tables" {
				t.Errorf("proxy mode %q, backend %q; want unknown, nf_tables", b.Manifest.ProxyMode, b.Manifest.Backend)
			}
		})
	}
}

// iptables-nft-save that fails (seen to overflow its stack on big tables)
// is followed by nft list table for the same family, with a warning.
func TestCollectSaveFallsBackToNFT(t *testing.T) {
	e := newEnv(t, defaultObjects()...)
	e.runner.outputs["iptables-nft-save"] = fakeResult{out: "*nat\n:KUBE-SERV", rc: 139}
	man, err := e.collector(Options{Node: testNode, Via: ViaDebugPod}).Collect(context.Background())
	if err != nil {
		t.Fatalf("Collect: %v", err)
	}
	e.checkCleanedUp(t)
	e.runner.checkAllowed(t)
	if !e.runner.ran("nft list table ip nat") || !e.runner.ran("nft list table ip filter") {
		t.Errorf("no nft read after the failed save: %v", e.runner.calls)
	}
	kinds := fileKinds(man)
	if kinds["nft-ip-nat.txt"] != KindRuleset {
		t.Errorf("files %v, want nft-ip-nat.txt", kinds)
	}
	for _, f := range man.Files {
		if f.Path == "iptables-nft-save.txt" && (!strings.Contains(f.Error, "exit status 139") || f.Kind != KindFailed) {
			t.Errorf("iptables-nft-save.txt: kind %q, error %q; want failed, exit status 139 (its half output must not be read)", f.Kind, f.Error)
		}
	}
	if !slices.ContainsFunc(man.Warnings, func(w string) bool {
		return strings.Contains(w, "iptables-nft-save failed") && strings.Contains(w, "nft list table ip nat")
	}) {
		t.Errorf("warnings %q, want one saying the save failed and nft read instead", man.Warnings)
	}
}

// The metrics port comes from metricsBindAddress in kube-proxy's ConfigMap.
func TestCollectMetricsPortFromConfigMap(t *testing.T) {
	var objs []runtime.Object
	for _, o := range defaultObjects() {
		if cm, ok := o.(*corev1.ConfigMap); ok {
			cm = cm.DeepCopy()
			cm.Data["config.conf"] = "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: iptables\nmetricsBindAddress: 0.0.0.0:10999\n"
			o = cm
		}
		objs = append(objs, o)
	}
	e := newEnv(t, objs...)
	if _, err := e.collector(Options{Node: testNode, Via: ViaDebugPod}).Collect(context.Background()); err != nil {
		t.Fatalf("Collect: %v", err)
	}
	if len(e.runner.ports) == 0 {
		t.Fatal("no GET")
	}
	for _, p := range e.runner.ports {
		if p != 10999 {
			t.Errorf("GET on port %d, want 10999 from the ConfigMap", p)
		}
	}
	gets := 0
	for _, a := range e.client.Actions() {
		if a.GetVerb() == "get" && a.GetResource().Resource == "configmaps" {
			gets++
		}
	}
	if gets != 1 {
		t.Errorf("kube-proxy's ConfigMap fetched %d times, want once (objects and metrics port share it)", gets)
	}
}

// kube-proxy's ConfigMap is fetched once at most, and only when the objects
// file or the metrics port needs it.
func TestCollectConfigMapOnlyWhenWanted(t *testing.T) {
	tests := []struct {
		name         string
		objectsGiven bool
		metricsPort  int
		wantGets     int
		wantPort     int
	}{
		{name: "objects file and metrics port", wantGets: 1, wantPort: 10999},
		{name: "--from-objects: the metrics port", objectsGiven: true, wantGets: 1, wantPort: 10999},
		{name: "--metrics-port: the objects file", metricsPort: 12345, wantGets: 1, wantPort: 12345},
		{name: "neither", objectsGiven: true, metricsPort: 12345, wantGets: 0, wantPort: 12345},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cm := testConfigMap()
			cm.Data["config.conf"] = "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: iptables\nmetricsBindAddress: 0.0.0.0:10999\n"
			e := newEnv(t, testNodeObj(testNode, corev1.ConditionTrue), testKubeProxyPod(testNode), cm, testService(), testSlice())
			opts := Options{Node: testNode, Via: ViaDebugPod, MetricsPort: tc.metricsPort}
			if tc.objectsGiven {
				opts.Objects = &correlate.Objects{Services: []*corev1.Service{testService()}, EndpointSlices: []*discoveryv1.EndpointSlice{testSlice()}}
			}
			man, err := e.collector(opts).Collect(context.Background())
			if err != nil {
				t.Fatalf("Collect: %v", err)
			}
			gets := 0
			for _, a := range e.client.Actions() {
				if a.GetVerb() == "get" && a.GetResource().Resource == "configmaps" {
					gets++
				}
			}
			if gets != tc.wantGets {
				t.Errorf("ConfigMap fetched %d times, want %d", gets, tc.wantGets)
			}
			for _, p := range e.runner.ports {
				if p != tc.wantPort {
					t.Errorf("GET on port %d, want %d", p, tc.wantPort)
				}
			}
			if _, ok := fileKinds(man)["objects.json"]; ok == tc.objectsGiven {
				t.Errorf("objects.json written: %v, want %v", ok, !tc.objectsGiven)
			}
			if len(man.Warnings) > 0 {
				t.Errorf("warnings %q", man.Warnings)
			}
		})
	}
}

// Ctrl-C while the create request is out: the pod may exist on the server
// though the client saw only an error. Its name is the plugin's own, so it
// is deleted by name all the same.
func TestCollectInterruptedCreate(t *testing.T) {
	e := newEnv(t, defaultObjects()...)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e.client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if len(a.(k8stesting.CreateActionImpl).CreateOptions.DryRun) > 0 {
			return false, nil, nil // the guard check
		}
		pod := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
		if err := e.client.Tracker().Create(podsGVR, pod, pod.Namespace); err != nil {
			t.Fatal(err)
		}
		cancel()
		return true, nil, context.Canceled
	})
	_, err := e.collector(Options{Node: testNode, Via: ViaDebugPod}).Collect(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Collect: %v, want context.Canceled", err)
	}
	if left := e.managedPods(t); len(left) > 0 {
		t.Errorf("pod %s/%s left behind after an interrupted create", left[0].Namespace, left[0].Name)
	}
}

// TestCollectReadsAgainAfterACut: an exec whose connection is cut
// mid-stream (seen in the e2e cluster under load: "connection reset by
// peer" from the API server) is run once more into fresh files, so the
// bundle holds the whole output once; cut twice, the read fails with the
// exec's error, and nothing is left of it.
func TestCollectReadsAgainAfterACut(t *testing.T) {
	for _, tc := range []struct {
		cutOn string
		cuts  int
	}{{"iptables-nft-save", 1}, {"iptables-nft-save", 2}, {"iptables -V", 1}, {"iptables -V", 2}} {
		cuts := tc.cuts
		t.Run(fmt.Sprintf("%s cut %d times", tc.cutOn, cuts), func(t *testing.T) {
			e := newEnv(t, defaultObjects()...)
			e.runner.cuts, e.runner.cutOn = cuts, tc.cutOn
			save := e.runner.outputs["iptables-nft-save"].out
			e.runner.outputs["ip6tables-legacy-save"] = fakeResult{out: save}
			_, err := e.collector(Options{Node: testNode, Via: ViaDebugPod}).Collect(context.Background())
			e.checkCleanedUp(t)
			if cuts == 2 {
				containsAll(t, err, "exec in "+DefaultDebugNamespace+"/"+testDebugPod+" failed", "connection reset by peer")
				if ents, _ := os.ReadDir(e.dir); len(ents) > 0 {
					t.Errorf("left behind: %v", ents)
				}
				return
			}
			if err != nil {
				t.Fatalf("Collect: %v", err)
			}
			b := openBundle(t, e.dir)
			checkSizes(t, b)
			seen := map[string]int{}
			for _, f := range b.Manifest.Files {
				seen[f.Path]++
			}
			for p, n := range seen {
				if n != 1 {
					t.Errorf("%s listed %d times", p, n)
				}
			}
			data, err := os.ReadFile(filepath.Join(e.dir, "ip6tables-legacy-save.txt"))
			if err != nil || string(data) != save {
				t.Errorf("the cut file holds %q (%v), want the whole output %q", data, err, save)
			}
			runs := 0
			for _, call := range e.runner.calls {
				if slices.Contains(call, tc.cutOn) {
					runs++
				}
			}
			if runs != 2 {
				t.Errorf("%s ran %d times, want 2 (once cut, once whole)", tc.cutOn, runs)
			}
		})
	}
}

// A pod whose create was interrupted in flight (no UID) is deleted even
// when its create lands after the first delete; a pod known to exist that
// is gone already costs no wait.
func TestDeletePodCreatedLate(t *testing.T) {
	client := fake.NewClientset()
	c := &Collector{Client: client, Progress: &Progress{}}
	spec := DebugPod(PodOptions{Node: "node-a", Namespace: DefaultDebugNamespace, Image: "kube-proxy", StartedBy: "me"})
	landed := make(chan struct{})
	go func() {
		defer close(landed)
		time.Sleep(600 * time.Millisecond)
		if _, err := client.CoreV1().Pods(spec.Namespace).Create(context.Background(), spec, metav1.CreateOptions{}); err != nil {
			t.Error(err)
		}
	}()
	if err := c.deletePod(spec); err != nil {
		t.Fatal(err)
	}
	<-landed
	if _, err := client.CoreV1().Pods(spec.Namespace).Get(context.Background(), spec.Name, metav1.GetOptions{}); !IsNotFound(err) {
		t.Errorf("the pod created after the first delete is still there (err %v)", err)
	}
	gone := spec.DeepCopy()
	gone.UID = "4d3c2b1a"
	start := time.Now()
	if err := c.deletePod(gone); err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited > time.Second {
		t.Errorf("a pod known to exist and gone already: deleting waited %s", waited)
	}
}

// honourDeletePreconditions makes the fake clientset check a pod delete's
// UID precondition as the API server does (409 Conflict); the fake's own
// tracker ignores preconditions.
func honourDeletePreconditions(client *fake.Clientset) {
	client.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		del := a.(k8stesting.DeleteAction)
		pre := del.GetDeleteOptions().Preconditions
		if pre == nil || pre.UID == nil {
			return false, nil, nil
		}
		obj, err := client.Tracker().Get(podsGVR, a.GetNamespace(), del.GetName())
		if err != nil {
			return false, nil, nil
		}
		if uid := obj.(*corev1.Pod).UID; uid != *pre.UID {
			return true, nil, apierrors.NewConflict(podsGVR.GroupResource(), del.GetName(),
				fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", *pre.UID, uid))
		}
		return false, nil, nil
	})
}

// deletePod deletes its own pod, never another that took the name since
// (the debug pod's name is the node's and a suffix: a rerun, or someone
// else's run, may have it).
func TestDeletePodOnlyItsOwn(t *testing.T) {
	ours := DebugPod(PodOptions{Node: "node-a", Namespace: DefaultDebugNamespace, Image: "kube-proxy", StartedBy: "me"})
	ours.UID = "1111-ours"
	theirs := ours.DeepCopy()
	theirs.UID = "2222-theirs"
	theirs.Annotations = map[string]string{AnnotationStartedBy: "someone else"}
	for _, tc := range []struct {
		name     string
		there    *corev1.Pod // the pod of that name in the cluster, or nil
		wantLeft types.UID   // the pod still there after the delete, or ""
	}{
		{"ours is there", ours, ""},
		{"another took the name", theirs, theirs.UID},
		{"none is there", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset()
			honourDeletePreconditions(client)
			if tc.there != nil {
				if _, err := client.CoreV1().Pods(ours.Namespace).Create(context.Background(), tc.there, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			c := &Collector{Client: client, Progress: &Progress{}}
			if err := c.deletePod(ours); err != nil {
				t.Fatalf("deletePod: %v", err)
			}
			left, err := client.CoreV1().Pods(ours.Namespace).Get(context.Background(), ours.Name, metav1.GetOptions{})
			switch {
			case tc.wantLeft == "" && !IsNotFound(err):
				t.Errorf("pod %s is still there (err %v)", ours.Name, err)
			case tc.wantLeft != "" && (err != nil || left.UID != tc.wantLeft):
				t.Errorf("the pod that took the name was deleted (err %v)", err)
			}
			for _, a := range client.Actions() {
				if del, ok := a.(k8stesting.DeleteAction); ok {
					if pre := del.GetDeleteOptions().Preconditions; pre == nil || pre.UID == nil || *pre.UID != ours.UID {
						t.Errorf("delete without the pod's UID as precondition: %+v", del.GetDeleteOptions())
					}
				}
			}
		})
	}
}

// The starting pod is looked at soon after its create, then less often:
// a pod that runs within a fraction of a second is not kept waiting for
// a fixed 200 ms, and a slow one costs the API server five GETs a second.
func TestCollectPollsStartingPod(t *testing.T) {
	for _, tc := range []struct {
		name    string
		pending int // GETs that find the pod not yet running
		want    []time.Duration
	}{
		{"running at once", 0, nil},
		{"running after one look", 1, []time.Duration{25 * time.Millisecond}},
		{"slow", 6, []time.Duration{25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond, 200 * time.Millisecond, 200 * time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, defaultObjects()...)
			looks := 0
			e.debugStatus = func(p *corev1.Pod) {
				if looks++; looks > tc.pending {
					podRunning(p)
				} else {
					podPending(p)
				}
			}
			c := e.collector(Options{Node: testNode, Via: ViaDebugPod})
			waited := recordWaits(c)
			if _, err := c.Collect(context.Background()); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(*waited, tc.want) {
				t.Errorf("waited %v between looks at the pod, want %v", *waited, tc.want)
			}
			if looks != tc.pending+1 {
				t.Errorf("looked at the pod %d times, want %d", looks, tc.pending+1)
			}
		})
	}
}

// recordWaits makes c's waits end at once, each recorded.
func recordWaits(c *Collector) *[]time.Duration {
	var waited []time.Duration
	c.after = func(d time.Duration) <-chan time.Time {
		waited = append(waited, d)
		ch := make(chan time.Time, 1)
		ch <- fixedTime.Add(d)
		return ch
	}
	return &waited
}
