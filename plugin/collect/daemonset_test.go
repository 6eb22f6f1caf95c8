package collect

import (
	"context"
	"errors"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
)

// testDaemonSet is a kube-proxy DaemonSet as kubeadm writes it, its rollout
// done, running image with the ConfigMap cm on the nodes nodeSelector picks.
func testDaemonSet(name, image, cm string, nodeSelector map[string]string) *appsv1.DaemonSet {
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system", Generation: 2, Labels: map[string]string{"k8s-app": "kube-proxy"}},
		Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"k8s-app": "kube-proxy"}},
			Spec: corev1.PodSpec{
				HostNetwork:  true,
				NodeSelector: nodeSelector,
				Containers:   []corev1.Container{{Name: "kube-proxy", Image: image}},
				Volumes: []corev1.Volume{{Name: "kube-proxy", VolumeSource: corev1.VolumeSource{
					ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: cm}},
				}}},
			},
		}},
		Status: appsv1.DaemonSetStatus{ObservedGeneration: 2, DesiredNumberScheduled: 3, UpdatedNumberScheduled: 3},
	}
}

func withDS(ds *appsv1.DaemonSet, change func(ds *appsv1.DaemonSet)) *appsv1.DaemonSet {
	change(ds)
	return ds
}

func forbidden(resource string) func(a k8stesting.Action) (bool, runtime.Object, error) {
	return func(a k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: resource}, "",
			errors.New(`User "alice" cannot list resource "`+resource+`" in API group "" in the namespace "kube-system"`))
	}
}

// The node's kube-proxy image comes from the DaemonSet that places a pod on
// it (nodeSelector, required node affinity, taints), with no pod listed;
// only without one are the node's pods looked at, and a refusal asks for
// --image.
func TestKubeProxyTemplate(t *testing.T) {
	const (
		imgA, imgNFT, imgScale = "registry.k8s.io/kube-proxy:v1.37.2", "registry.k8s.io/kube-proxy:v1.37.1", "registry.k8s.io/kube-proxy:v1.36.0"
	)
	node := func(labels map[string]string, taints ...corev1.Taint) *corev1.Node {
		n := testNodeObj(testNode, corev1.ConditionTrue)
		n.Labels, n.Spec.Taints = labels, taints
		return n
	}
	pools := func() []runtime.Object {
		return []runtime.Object{
			testDaemonSet("kube-proxy", imgA, "kube-proxy", map[string]string{"proxy-mode": "iptables"}),
			testDaemonSet("kube-proxy-nftables", imgNFT, "kube-proxy-nftables", map[string]string{"proxy-mode": "nftables"}),
			testDaemonSet("kube-proxy-scale", imgScale, "kube-proxy-scale", map[string]string{"proxy-mode": "scale"}),
		}
	}
	affinity := func(op corev1.NodeSelectorOperator, values ...string) func(ds *appsv1.DaemonSet) {
		return func(ds *appsv1.DaemonSet) {
			ds.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
					{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "pool", Operator: op, Values: values}}},
				}},
			}}
		}
	}
	dedicated := corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
	tolerateDedicated := func(ds *appsv1.DaemonSet) {
		ds.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "gpu"}}
	}
	tests := []struct {
		name      string
		node      *corev1.Node
		objs      []runtime.Object
		refuse    []string // resources whose list is forbidden
		image     string   // --image
		wantImage string
		wantCM    string
		wantPod   bool // the node's pod was listed (and is the template)
		wantWarn  string
		wantErr   []string
	}{
		{name: "one pool", node: node(nil),
			objs:      []runtime.Object{testDaemonSet("kube-proxy", imgA, "kube-proxy", nil), testKubeProxyPod("node-b")},
			wantImage: imgA, wantCM: "kube-proxy"},
		{name: "three pools with nodeSelectors", node: node(map[string]string{"proxy-mode": "nftables"}),
			objs: pools(), wantImage: imgNFT, wantCM: "kube-proxy-nftables"},
		{name: "three pools, the last", node: node(map[string]string{"proxy-mode": "scale"}),
			objs: pools(), wantImage: imgScale, wantCM: "kube-proxy-scale"},
		{name: "required node affinity", node: node(map[string]string{"pool": "blue"}),
			objs: []runtime.Object{
				withDS(testDaemonSet("kube-proxy", imgA, "kube-proxy", nil), affinity(corev1.NodeSelectorOpNotIn, "blue")),
				withDS(testDaemonSet("kube-proxy-blue", imgNFT, "kube-proxy-blue", nil), affinity(corev1.NodeSelectorOpIn, "blue", "green")),
			},
			wantImage: imgNFT, wantCM: "kube-proxy-blue"},
		{name: "a taint one pool does not tolerate", node: node(nil, dedicated),
			objs: []runtime.Object{
				testDaemonSet("kube-proxy", imgA, "kube-proxy", nil),
				withDS(testDaemonSet("kube-proxy-gpu", imgNFT, "kube-proxy-gpu", nil), tolerateDedicated),
			},
			wantImage: imgNFT, wantCM: "kube-proxy-gpu"},
		{name: "the taints every daemon pod tolerates", node: node(nil,
			corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule},
			corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute},
			corev1.Taint{Key: "soft", Effect: corev1.TaintEffectPreferNoSchedule}),
			objs: []runtime.Object{testDaemonSet("kube-proxy", imgA, "kube-proxy", nil)}, wantImage: imgA, wantCM: "kube-proxy"},
		{name: "rollout in progress", node: node(nil),
			objs:      []runtime.Object{withDS(testDaemonSet("kube-proxy", imgA, "kube-proxy", nil), func(ds *appsv1.DaemonSet) { ds.Status.UpdatedNumberScheduled = 1 })},
			wantImage: imgA, wantCM: "kube-proxy",
			wantWarn: "DaemonSet kube-system/kube-proxy is rolling out: 1 of 3 pods run its current template: node node-a may still run the previous kube-proxy image"},
		{name: "a new generation not yet observed", node: node(nil),
			objs:      []runtime.Object{withDS(testDaemonSet("kube-proxy", imgA, "kube-proxy", nil), func(ds *appsv1.DaemonSet) { ds.Generation = 3 })},
			wantImage: imgA, wantCM: "kube-proxy", wantWarn: "may still run the previous kube-proxy image"},
		{name: "not labelled, a container named kube-proxy (AKS)", node: node(nil),
			objs: []runtime.Object{
				withDS(testDaemonSet("kube-proxy", imgA, "kube-proxy", nil), func(ds *appsv1.DaemonSet) { ds.Labels = map[string]string{"component": "kube-proxy"} }),
				withDS(testDaemonSet("other", "example.com/agent:1", "x", nil), func(ds *appsv1.DaemonSet) {
					ds.Labels, ds.Spec.Template.Spec.Containers[0].Name = nil, "agent"
				}),
			},
			wantImage: imgA, wantCM: "kube-proxy"},
		{name: "no DaemonSet for the node: its static pod", node: node(map[string]string{"proxy-mode": "none"}),
			objs: append(pools(), testKubeProxyPod(testNode)), wantImage: testImage, wantCM: "kube-proxy", wantPod: true},
		{name: "DaemonSets refused: the node's pod", node: node(nil), refuse: []string{"daemonsets"},
			objs: []runtime.Object{testKubeProxyPod(testNode)}, wantImage: testImage, wantCM: "kube-proxy", wantPod: true},
		{name: "no DaemonSet, pods refused", node: node(map[string]string{"proxy-mode": "none"}), refuse: []string{"pods"},
			objs:    append(pools(), testKubeProxyPod(testNode)),
			wantErr: []string{"no kube-proxy pod runs on node node-a", "no kube-proxy DaemonSet in kube-system selects the node", "you may not list pods in kube-system", "pass --image"}},
		{name: "both refused", node: node(nil), refuse: []string{"daemonsets", "pods"},
			objs:    []runtime.Object{testDaemonSet("kube-proxy", imgA, "kube-proxy", nil), testKubeProxyPod(testNode)},
			wantErr: []string{"no kube-proxy pod runs on node node-a", `you may not list DaemonSets in kube-system (RBAC: "list" on "daemonsets.apps")`, "pass --image"}},
		{name: "both refused, --image", node: node(nil), refuse: []string{"daemonsets", "pods"}, image: "example.com/nettools:1",
			objs:     []runtime.Object{testKubeProxyPod(testNode)},
			wantWarn: "no kube-proxy pod on node node-a (you may not list DaemonSets in kube-system"},
		{name: "nothing at all", node: node(nil),
			wantErr: []string{"no kube-proxy pod runs on node node-a", "no kube-proxy DaemonSet in kube-system selects the node, and none of its pods"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.objs...)
			for _, r := range tc.refuse {
				e.client.PrependReactor("list", r, forbidden(r))
			}
			c := e.collector(Options{Node: testNode, Via: ViaDebugPod, Image: tc.image})
			c.Progress = &Progress{}
			w := &bundleWriter{progress: c.Progress}
			kp, err := c.discoverKubeProxy(context.Background(), w, tc.node)
			if tc.wantErr != nil {
				var nk *NoKubeProxyError
				if !errors.As(err, &nk) {
					t.Fatalf("err %v (%T), want a NoKubeProxyError", err, err)
				}
				containsAll(t, err, tc.wantErr...)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			warnings := strings.Join(w.man.Warnings, "\n")
			if tc.wantWarn == "" && warnings != "" || !strings.Contains(warnings, tc.wantWarn) {
				t.Errorf("warnings %q, want %q", warnings, tc.wantWarn)
			}
			if tc.wantImage == "" {
				if kp.template != nil {
					t.Errorf("template %v, want none", kp.template)
				}
				return
			}
			if kp.template == nil {
				t.Fatal("no template")
			}
			if got := kubeProxyContainer(kp.template).Image; got != tc.wantImage || kp.configMapName != tc.wantCM || kp.template.Namespace != "kube-system" {
				t.Errorf("image %q ConfigMap %q namespace %q, want %q %q", got, kp.configMapName, kp.template.Namespace, tc.wantImage, tc.wantCM)
			}
			listedPods := false
			for _, a := range e.client.Actions() {
				listedPods = listedPods || a.GetVerb() == "list" && a.GetResource().Resource == "pods"
			}
			if listedPods != tc.wantPod || (kp.pod != nil) != tc.wantPod {
				t.Errorf("pods listed %v, pod %v; want %v", listedPods, kp.pod, tc.wantPod)
			}
		})
	}
}

func TestControlPlaneReason(t *testing.T) {
	for _, tc := range []struct {
		labels map[string]string
		taints []corev1.Taint
		want   string
	}{
		{nil, nil, ""},
		{map[string]string{"node-role.kubernetes.io/worker": ""}, []corev1.Taint{{Key: "dedicated", Effect: corev1.TaintEffectNoSchedule}}, ""},
		{map[string]string{LabelControlPlane: ""}, nil, "label node-role.kubernetes.io/control-plane"},
		{map[string]string{LabelMaster: "true"}, nil, "label node-role.kubernetes.io/master"},
		{nil, []corev1.Taint{{Key: LabelControlPlane, Effect: corev1.TaintEffectNoSchedule}}, "taint node-role.kubernetes.io/control-plane:NoSchedule"},
	} {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: tc.labels}, Spec: corev1.NodeSpec{Taints: tc.taints}}
		if got := ControlPlaneReason(n); got != tc.want {
			t.Errorf("%v %v: %q, want %q", tc.labels, tc.taints, got, tc.want)
		}
	}
}

// kubeSystemPodLists counts the lists of pods in kube-system.
func kubeSystemPodLists(e *env) int {
	n := 0
	for _, a := range e.client.Actions() {
		if a.GetVerb() == "list" && a.GetResource().Resource == "pods" && a.GetNamespace() == "kube-system" {
			n++
		}
	}
	return n
}

// A read through a debug pod lists no pod in kube-system (the default Role
// grants none there); auto falling back to kube-proxy's pod lists them, for
// its exec target.
func TestCollectListsNoKubeSystemPods(t *testing.T) {
	for _, tc := range []struct {
		name      string
		via       string
		access    func(a authzv1.ResourceAttributes) bool
		wantLists int
	}{
		{"debug pod", ViaDebugPod, nil, 0},
		{"auto, a debug pod", ViaAuto, deny(), 0},
		{"auto, kube-proxy's pod", ViaAuto, deny("create pods kubectl-proxyrules"), 1},
		{"--via kube-proxy", ViaKubeProxy, nil, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, defaultObjects()...)
			e.access = tc.access
			man, err := e.collector(Options{Node: testNode, Via: tc.via}).Collect(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if n := kubeSystemPodLists(e); n != tc.wantLists {
				t.Errorf("%d lists of kube-system's pods, want %d", n, tc.wantLists)
			}
			if man.Image != testImage {
				t.Errorf("image %q", man.Image)
			}
		})
	}
}

// A control-plane node is read only with IncludeControlPlane, whichever
// way: a debug pod there, or an exec in its kube-proxy, reaches etcd and
// the API server on its loopback.
func TestCollectControlPlaneGate(t *testing.T) {
	cpLabel := func(n *corev1.Node) { n.Labels = map[string]string{LabelControlPlane: ""} }
	cpTaint := func(n *corev1.Node) {
		n.Spec.Taints = []corev1.Taint{{Key: LabelControlPlane, Effect: corev1.TaintEffectNoSchedule}}
	}
	for _, tc := range []struct {
		name    string
		node    func(n *corev1.Node)
		via     string
		include bool
		wantErr string
	}{
		{"labelled, debug pod", cpLabel, ViaDebugPod, false, "node node-a is a control-plane node (label node-role.kubernetes.io/control-plane)"},
		{"tainted, debug pod", cpTaint, ViaDebugPod, false, "(taint node-role.kubernetes.io/control-plane:NoSchedule)"},
		{"labelled, --via kube-proxy", cpLabel, ViaKubeProxy, false, "could reach the control plane's loopback ports (etcd, the API server)"},
		{"labelled, asked for", cpLabel, ViaDebugPod, true, ""},
		{"labelled, asked for, --via kube-proxy", cpLabel, ViaKubeProxy, true, ""},
		{"a worker", func(*corev1.Node) {}, ViaDebugPod, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := defaultObjects()
			tc.node(objs[0].(*corev1.Node))
			e := newEnv(t, objs...)
			_, err := e.collector(Options{Node: testNode, Via: tc.via, IncludeControlPlane: tc.include}).Collect(context.Background())
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var cp *ControlPlaneError
			if !errors.As(err, &cp) || FailureReason(err) != "ControlPlane" {
				t.Fatalf("err %v (%T), want a ControlPlaneError", err, err)
			}
			containsAll(t, err, tc.wantErr, "--include-control-plane")
			if e.podCreates() != 0 || len(e.runner.calls) > 0 {
				t.Errorf("%d pods created, %d runs", e.podCreates(), len(e.runner.calls))
			}
		})
	}
}

// TestConfigMapRefused: a pool's own ConfigMap, which deploy/'s Role does
// not name, is said with the grant that would read it; a refusal of
// kubeadm's kube-proxy, which the Role names, is said as the API server
// puts it (the Role is not bound, or not applied).
func TestConfigMapRefused(t *testing.T) {
	const poolWant = `you may not read kube-proxy's ConfigMap kube-system/kube-proxy-nftables (RBAC: "get" on configmaps "kube-proxy-nftables"; ` +
		`deploy/rbac.yaml's Role kube-system/kubectl-proxyrules-kube-proxy names only "kube-proxy": add this name to its resourceNames)`
	for _, tc := range []struct {
		name, cm, want string
		fleet          bool // a sweep's read, through the Fleet's ConfigMap cache
		objects        bool // the objects given, none listed (explain lists its Service's first)
	}{
		{"another pool's", "kube-proxy-nftables", poolWant, false, false},
		{"another pool's, in a sweep", "kube-proxy-nftables", poolWant, true, false},
		{"another pool's, the objects given", "kube-proxy-nftables", poolWant, false, true},
		{"kubeadm's", "kube-proxy", `could not read kube-proxy's ConfigMap kube-system/kube-proxy: configmaps "kube-proxy" is forbidden`, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := defaultObjects()
			for i, o := range objs {
				if _, ok := o.(*appsv1.DaemonSet); ok {
					objs[i] = testDaemonSet("kube-proxy", testImage, tc.cm, nil)
				}
			}
			e := newEnv(t, objs...)
			e.client.PrependReactor("get", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
				name := a.(k8stesting.GetAction).GetName()
				return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, name,
					errors.New(`User "alice" cannot get resource "configmaps" in API group "" in the namespace "kube-system"`))
			})
			c := e.collector(Options{Node: testNode, Via: ViaDebugPod})
			if tc.objects {
				c.Objects = &correlate.Objects{Services: []*corev1.Service{testService()}, EndpointSlices: []*discoveryv1.EndpointSlice{testSlice()}}
			}
			if tc.fleet {
				f, _, _, err := NewFleet(context.Background(), e.client, FleetOptions{All: true})
				if err != nil {
					t.Fatal(err)
				}
				c.Fleet = f
			}
			man, err := c.Collect(context.Background())
			if err != nil {
				t.Fatalf("Collect: %v", err)
			}
			got := warningsAbout(man, "ConfigMap")
			if len(got) != 1 || !strings.Contains(got[0], tc.want) {
				t.Errorf("warnings about the ConfigMap %q, want one with %q", got, tc.want)
			}
		})
	}
}
