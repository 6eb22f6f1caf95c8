//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// debugPodJSON is a pod in the plugin's own shape (plugin/collect.DebugPod)
// started by user, changed by edit (a JSON merge of spec fields).
func debugPodJSON(name, user string, edit func(pod map[string]any)) []byte {
	pod := map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{
			"name": name, "namespace": debugNS,
			"labels":      map[string]any{"app.kubernetes.io/managed-by": "kubectl-proxyrules"},
			"annotations": map[string]any{"proxyrules.kubectl.io/started-by": user},
		},
		"spec": map[string]any{
			"nodeName": "node-a", "hostNetwork": true, "activeDeadlineSeconds": 300,
			"automountServiceAccountToken": false, "restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
			"securityContext": map[string]any{"seccompProfile": map[string]any{"type": "RuntimeDefault"}},
			"containers": []any{map[string]any{
				"name": "proxyrules", "image": "registry.k8s.io/kube-proxy:v1.37.2", "command": []any{"sleep", "300"},
				"imagePullPolicy": "IfNotPresent",
				"resources": map[string]any{
					"requests": map[string]any{"cpu": "10m", "memory": "32Mi"},
					"limits":   map[string]any{"cpu": "1", "memory": "1Gi"},
				},
				"securityContext": map[string]any{
					"allowPrivilegeEscalation": false, "privileged": false,
					"capabilities": map[string]any{"add": []any{"NET_ADMIN", "NET_RAW"}, "drop": []any{"ALL"}},
				},
			}},
		},
	}
	if edit != nil {
		edit(pod)
	}
	b, _ := json.Marshal(pod)
	return b
}

func container(pod map[string]any) map[string]any {
	return pod["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
}

// asMember runs kubectl as a member of the group deploy/ grants to.
func asMember(stdin []byte, args ...string) ([]byte, error) {
	return run(stdin, "kubectl", append(append([]string{}, member...), args...)...)
}

// refused fails t unless err is a refusal that mentions every want.
func refused(t *testing.T, what string, err error, wants ...string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: allowed, want refused", what)
		return
	}
	for _, w := range wants {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: refused, but the error does not say %q:\n%v", what, w, err)
		}
	}
}

func kubeProxyPod(t *testing.T, node string) string {
	t.Helper()
	name := strings.TrimSpace(string(kubectl(t, "-n", "kube-system", "get", "pods", "-l", "k8s-app=kube-proxy",
		"--field-selector", "spec.nodeName="+node, "-o", "jsonpath={.items[0].metadata.name}")))
	if name == "" {
		t.Fatalf("no kube-proxy pod on %s", node)
	}
	return name
}

// portForward runs kubectl port-forward for a few seconds: the error of a
// refused one, nil if it was still forwarding.
func portForward(as []string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kubectl", append(append([]string{}, as...), append([]string{"port-forward"}, args...)...)...)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("%v: %s", err, out)
}

// TestLiveRBAC: with deploy/ applied (the default set), a member of the
// group reads nodes through the debug pod, and the API server refuses her
// what the security review found she could do: a privileged pod, a pod
// mounting the host, a pod reading secrets or running as someone else, a
// command that writes, exec and port-forward into kube-system. A stranger
// is told what is missing. The opt-in deploy/via-kube-proxy/ then allows
// --via kube-proxy, into kube-proxy's pods only and for read commands only.
func TestLiveRBAC(t *testing.T) {
	defer noDebugPods(t)
	// 1. A member: both nodes, through the debug pod in kubectl-proxyrules;
	// no port-forward under the default set, so no metrics, and she is
	// told which opt-in grants them.
	for _, node := range nodes {
		out, errOut, code := plugin(t, append([]string{"map", "-o", "json", "--node", node}, member...)...)
		if code != 0 {
			t.Fatalf("map --node %s as a member of kubectl-proxyrules-users: exit %d\n%s", node, code, errOut)
		}
		var m liveMap
		if err := json.Unmarshal([]byte(out), &m); err != nil || m.Collection == nil || m.Collection.Via != "debug-pod" || m.Collection.Namespace != debugNS {
			t.Fatalf("map as alice: %v, collection %+v, want via debug-pod in %s", err, m.Collection, debugNS)
		}
		if !strings.Contains(errOut, "metrics and configuration were not read: you may not port-forward") || !strings.Contains(errOut, "deploy/metrics/") {
			t.Errorf("map --node %s as a member without the metrics opt-in: stderr does not name the opt-in:\n%s", node, errOut)
		}
	}

	// 2. Pods not of the plugin's shape: refused by the admission policy.
	refusedShapes(t)
	const byPolicy = "ValidatingAdmissionPolicy 'kubectl-proxyrules-debug-pod'"

	// 3. Her own debug pod: read commands run; a command that writes, a
	// shell, attach and ephemeral containers are refused.
	if _, err := asMember(debugPodJSON("alice-debug", "alice", nil), "create", "-f", "-"); err != nil {
		t.Fatalf("the plugin's own shape refused: %v", err)
	}
	defer run(nil, "kubectl", "-n", debugNS, "delete", "pod", "alice-debug", "--grace-period=0", "--wait=false")
	kubectl(t, "-n", debugNS, "wait", "--for=condition=Ready", "pod/alice-debug", "--timeout=60s")
	if out, err := asMember(nil, "-n", debugNS, "exec", "alice-debug", "--", "iptables-save", "-t", "nat"); err != nil || !strings.Contains(string(out), "KUBE-SERVICES") {
		t.Errorf("a read command in her debug pod: %v\n%.200s", err, out)
	}
	const byExecPolicy = "ValidatingAdmissionPolicy 'kubectl-proxyrules-read-only-exec'"
	// nft list tables/ruleset only read, but load every table: minutes
	// beside a big iptables-nft ruleset, so the plugin never sends them
	for _, argv := range [][]string{{"iptables", "-t", "nat", "-F"}, {"sh", "-c", "iptables -t nat -F"}, {"nft", "flush", "ruleset"}, {"nft", "list", "tables"}, {"nft", "-j", "list", "ruleset"}} {
		_, err := asMember(nil, append([]string{"-n", debugNS, "exec", "alice-debug", "--"}, argv...)...)
		refused(t, "exec "+strings.Join(argv, " "), err, byExecPolicy)
	}
	if out, err := inNode("node-a", "iptables-save", "-t", "nat"); err != nil || !strings.Contains(string(out), "-A KUBE-SERVICES") {
		t.Errorf("node-a's nat table after the refused commands: %v", err)
	}
	_, err := asMember(nil, "-n", debugNS, "debug", "alice-debug", "--image=registry.k8s.io/kube-proxy:v1.37.2", "--", "sh")
	refused(t, "an ephemeral container", err, "ephemeralcontainers")

	// 4. kube-system: no exec, no port-forward, neither into kube-proxy nor
	// into anything else; no port-forward to her own debug pod either (it
	// would reach every loopback port of the node).
	kp := kubeProxyPod(t, "node-a")
	_, err = asMember(nil, "-n", "kube-system", "exec", kp, "--", "iptables-save")
	// kubectl gets the pod first: the default set grants no pods of kube-system at all.
	refused(t, "exec into kube-proxy under the default set", err, `cannot get resource "pods"`, "kube-system")
	refused(t, "port-forward into kube-proxy under the default set", portForward(member, "-n", "kube-system", kp, ":10249"), `cannot get resource "pods"`, "kube-system")
	refused(t, "port-forward to her own debug pod under the default set", portForward(member, "-n", debugNS, "alice-debug", ":10249"), "pods/portforward")
	_, errOut, code := plugin(t, append([]string{"map", "--node", "node-a", "--via", "kube-proxy"}, member...)...)
	if code != 1 || !strings.Contains(errOut, "not allowed to") || !strings.Contains(errOut, "in namespace kube-system") || !strings.Contains(errOut, "via-kube-proxy") {
		t.Errorf("--via kube-proxy under the default set: exit %d, stderr:\n%s", code, errOut)
	}

	// 5. A stranger: neither way, and the message names the verbs and deploy/.
	_, errOut, code = plugin(t, "map", "--node", "node-a", "--as", "mallory")
	if code != 1 || !strings.Contains(errOut, "not allowed to") || !strings.Contains(errOut, "kubectl apply -f deploy/") {
		t.Errorf("map as a stranger: exit %d, stderr:\n%s", code, errOut)
	}
	t.Logf("stranger: %s", strings.TrimSpace(errOut))

	// 6. Updates keep the shape and the owner; deletes are of one's own
	// pods; the quota counts every pod of the namespace.
	_, err = run(nil, "kubectl", "-n", debugNS, "annotate", "--overwrite", "pod", "alice-debug", "proxyrules.kubectl.io/started-by=bob")
	refused(t, "an update that changes started-by (as an admin)", err, byPolicy, "an update keeps it")
	_, err = run(nil, "kubectl", "-n", debugNS, "set", "image", "pod/alice-debug", "proxyrules=docker.io/library/busybox:1.37")
	refused(t, "an update to another image (as an admin)", err, byPolicy, "is not listed in ConfigMap")
	bob := []string{"--as", "bob", "--as-group", "kubectl-proxyrules-users"}
	if _, err := run(debugPodJSON("bob-debug", "bob", nil), "kubectl", append(bob, "create", "-f", "-")...); err != nil {
		t.Fatalf("bob's own debug pod: %v", err)
	}
	_, err = asMember(nil, "-n", debugNS, "delete", "pod", "bob-debug", "--wait=false")
	refused(t, "alice deleting bob's debug pod", err, "kubectl-proxyrules-own-debug-pods", "only debug pods you started")
	if _, err := run(nil, "kubectl", "-n", debugNS, "delete", "pod", "bob-debug", "--grace-period=0", "--wait=false"); err != nil {
		t.Errorf("an admin deleting bob's debug pod: %v", err)
	}
	kubectl(t, "-n", debugNS, "patch", "resourcequota", "kubectl-proxyrules-pods", "--type=merge", "-p", `{"spec":{"hard":{"pods":"0"}}}`)
	defer kubectl(t, "-n", debugNS, "patch", "resourcequota", "kubectl-proxyrules-pods", "--type=merge", "-p", `{"spec":{"hard":{"pods":"50"}}}`)
	eventually(t, "a debug pod over the quota is refused", func() error {
		_, err := asMember(debugPodJSON("over-quota", "alice", nil), "create", "--dry-run=server", "-f", "-")
		if err != nil && strings.Contains(err.Error(), "exceeded quota: kubectl-proxyrules-pods") {
			return nil
		}
		return fmt.Errorf("not refused by the quota: %v", err)
	})
}

// identity is one way deploy/'s Roles can be bound: kubectl's flags to act
// as it, and the RBAC subject flags of `kubectl create rolebinding`.
type identity struct {
	name    string
	as      []string
	subject []string // nil: the group deploy/ binds already
}

var identities = []identity{
	{"a member of kubectl-proxyrules-users", member, nil},
	{"a user bound by name", []string{"--as", "carol"}, []string{"--user", "carol"}},
	{"a ServiceAccount bound by name", []string{"--as", "system:serviceaccount:default:proxyrules-reader"}, []string{"--serviceaccount", "default:proxyrules-reader"}},
}

// bindByName binds deploy/'s Roles (and the opt-ins') to the identities
// that are not the group, as "change the subjects" in rbac.yaml suggests.
func bindByName(t *testing.T) (unbind func()) {
	var subjects []string
	for _, id := range identities {
		subjects = append(subjects, id.subject...)
	}
	bindings := [][]string{
		{"create", "clusterrolebinding", "e2e-by-name", "--clusterrole", "kubectl-proxyrules"},
		{"-n", debugNS, "create", "rolebinding", "e2e-by-name", "--role", "kubectl-proxyrules-debug-pod"},
		{"-n", debugNS, "create", "rolebinding", "e2e-by-name-metrics", "--role", "kubectl-proxyrules-metrics"},
		{"-n", "kube-system", "create", "rolebinding", "e2e-by-name", "--role", "kubectl-proxyrules-kube-proxy"},
		{"-n", "kube-system", "create", "rolebinding", "e2e-by-name-via", "--role", "kubectl-proxyrules-via-kube-proxy"},
		{"-n", "kube-system", "create", "rolebinding", "e2e-by-name-metrics", "--role", "kubectl-proxyrules-metrics-via-kube-proxy"},
	}
	for _, b := range bindings {
		kubectl(t, append(b, subjects...)...)
	}
	return func() {
		run(nil, "kubectl", "delete", "clusterrolebinding", "e2e-by-name", "--ignore-not-found")
		for _, b := range bindings[1:] {
			run(nil, "kubectl", "-n", b[1], "delete", "rolebinding", b[4], "--ignore-not-found")
		}
	}
}

// TestLiveRBACOptIns: the opt-ins restrict everyone they grant, however
// bound (issue 30, item 1): a group member, a user bound by name and a
// ServiceAccount each read a node --via kube-proxy with its metrics, and
// each is refused an exec into another kube-system pod, a shell in
// kube-proxy, a port-forward to another kube-system pod and deleting
// another's debug pod. Admins are exempt.
func TestLiveRBACOptIns(t *testing.T) {
	defer noDebugPods(t)
	for _, dir := range []string{"via-kube-proxy", "metrics"} {
		optIn := filepath.Join(repoRoot, "deploy", dir)
		kubectl(t, "apply", "-f", optIn)
		defer kubectl(t, "delete", "-f", optIn, "--ignore-not-found")
	}
	defer bindByName(t)()
	kp := kubeProxyPod(t, "node-a")
	mustRun(t, []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"etcd-node-a","namespace":"kube-system"},
"spec":{"nodeName":"node-a","hostNetwork":true,"containers":[{"name":"etcd","image":"registry.k8s.io/etcd:3.6.0","command":["sleep","300"]}]}}`), "kubectl", "create", "-f", "-")
	defer run(nil, "kubectl", "-n", "kube-system", "delete", "pod", "etcd-node-a", "--grace-period=0", "--wait=false")
	kubectl(t, "-n", "kube-system", "wait", "--for=condition=Ready", "pod/etcd-node-a", "--timeout=60s")
	eventually(t, "the opt-in policies are in force", func() error {
		// A read command the plugin never sends: refused once the policy is in force.
		_, err := asMember(nil, "-n", "kube-system", "exec", kp, "--", "iptables", "-t", "nat", "-L", "KUBE-SERVICES")
		if err == nil || !strings.Contains(err.Error(), "kubectl-proxyrules-via-kube-proxy") {
			return fmt.Errorf("exec not refused yet: %v", err)
		}
		if err := portForward(member, "-n", "kube-system", "etcd-node-a", ":2379"); err == nil || !strings.Contains(err.Error(), "kubectl-proxyrules-metrics") {
			return fmt.Errorf("port-forward not refused yet: %v", err)
		}
		return nil
	})
	for _, id := range identities {
		t.Run(id.name, func(t *testing.T) { optInsRestrict(t, id, kp) })
	}
	// Admins are exempt: their own exec in kube-system stays as it was.
	if out, err := run(nil, "kubectl", "-n", "kube-system", "exec", "etcd-node-a", "--", "hostname"); err != nil || strings.TrimSpace(string(out)) != "node-a" {
		t.Errorf("the opt-in policy restricted an admin: %v %q", err, out)
	}
}

func optInsRestrict(t *testing.T, id identity, kp string) {
	out, errOut, code := plugin(t, append([]string{"map", "-o", "json", "--node", "node-a", "--debug-namespace", "kube-node-lease"}, id.as...)...)
	var m liveMap
	if code != 0 || json.Unmarshal([]byte(out), &m) != nil || m.Collection.Via != "kube-proxy" || m.Summary.Attributed == 0 {
		t.Errorf("--via auto without pod rights, with the opt-ins: exit %d, collection %+v\n%s", code, m.Collection, errOut)
	}
	if strings.Contains(errOut, "were not read") {
		t.Errorf("metrics not read with the metrics opt-in:\n%s", errOut)
	}
	out, errOut, code = plugin(t, append([]string{"map", "-o", "json", "--node", "node-a", "--via", "debug-pod"}, id.as...)...)
	if code != 0 || json.Unmarshal([]byte(out), &m) != nil || m.Collection.Via != "debug-pod" || m.Summary.Attributed == 0 {
		t.Errorf("map through the debug pod: exit %d, collection %+v\n%s", code, m.Collection, errOut)
	}
	kubectlAs := func(args ...string) error {
		_, err := run(nil, "kubectl", append(append([]string{}, id.as...), args...)...)
		return err
	}
	refused(t, "exec into etcd", kubectlAs("-n", "kube-system", "exec", "etcd-node-a", "--", "iptables-save"),
		"kubectl-proxyrules-via-kube-proxy", "only into kube-proxy pods, not etcd-node-a")
	refused(t, "a shell in kube-proxy", kubectlAs("-n", "kube-system", "exec", kp, "-c", "kube-proxy", "--", "sh", "-c", "id"),
		"kubectl-proxyrules-via-kube-proxy", "read-only commands")
	refused(t, "a writing command in kube-proxy", kubectlAs("-n", "kube-system", "exec", kp, "-c", "kube-proxy", "--", "iptables", "-t", "nat", "-F"),
		"kubectl-proxyrules-via-kube-proxy", "read-only commands")
	refused(t, "port-forward to etcd", portForward(id.as, "-n", "kube-system", "etcd-node-a", ":2379"),
		"kubectl-proxyrules-metrics", "only to kube-proxy pods")
	if _, err := inNode("node-a", "iptables-save", "-t", "nat"); err != nil {
		t.Errorf("node-a's nat table after the refused commands: %v", err)
	}
}

// TestLivePolicyGuard: with no admission policy over the debug namespace
// the plugin stops before its first pod and says what to apply (issue 30,
// item 2); an admin who knows better overrides it.
func TestLivePolicyGuard(t *testing.T) {
	defer noDebugPods(t)
	const ns = "proxyrules-unguarded"
	mustRun(t, []byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"`+ns+`","labels":{"pod-security.kubernetes.io/enforce":"privileged"}}}`), "kubectl", "apply", "-f", "-")
	run(nil, "kubectl", "-n", ns, "create", "serviceaccount", "default")
	_, errOut, code := plugin(t, "map", "--node", "node-a", "--via", "debug-pod", "--debug-namespace", ns)
	if code != 1 || !strings.Contains(errOut, "no admission policy guards namespace "+ns) || !strings.Contains(errOut, "kubectl apply -f deploy/") {
		t.Errorf("map in an unguarded namespace: exit %d, stderr:\n%s", code, errOut)
	}
	if pods := kubectl(t, "-n", ns, "get", "pods", "-o", "name"); len(strings.TrimSpace(string(pods))) > 0 {
		t.Errorf("pods created in the unguarded namespace: %s", pods)
	}
	out, errOut, code := plugin(t, "map", "-o", "json", "--node", "node-a", "--via", "debug-pod", "--debug-namespace", ns, "--skip-policy-check")
	var m liveMap
	if code != 0 || json.Unmarshal([]byte(out), &m) != nil || m.Collection.Namespace != ns {
		t.Errorf("map --skip-policy-check in an unguarded namespace: exit %d\n%s", code, errOut)
	}
	// The guarded namespace passes the check (every other live test), and
	// a dry run leaves nothing: no pod named *-guard was ever created.
	if pods := kubectl(t, "get", "pods", "-A", "-o", "name"); strings.Contains(string(pods), "-guard") {
		t.Errorf("a dry-run pod exists: %s", pods)
	}
}

// refusedShapes: pods not of the plugin's shape, each refused by the
// admission policy with its reason.
func refusedShapes(t *testing.T) {
	t.Helper()
	const byPolicy = "ValidatingAdmissionPolicy 'kubectl-proxyrules-debug-pod'"
	for _, tc := range []struct {
		name string
		edit func(map[string]any)
		want string
	}{
		{"a privileged pod", func(p map[string]any) {
			sc := container(p)["securityContext"].(map[string]any)
			sc["privileged"] = true
			delete(sc, "allowPrivilegeEscalation")
		}, "not privileged"},
		{"a pod with a hostPath volume", func(p map[string]any) {
			p["spec"].(map[string]any)["volumes"] = []any{map[string]any{"name": "root", "hostPath": map[string]any{"path": "/"}}}
			container(p)["volumeMounts"] = []any{map[string]any{"name": "root", "mountPath": "/host"}}
		}, "no volumes"},
		{"a pod with the namespace's service account token", func(p map[string]any) {
			delete(p["spec"].(map[string]any), "automountServiceAccountToken")
		}, "no volumes"},
		{"a pod reading a Secret into its env", func(p map[string]any) {
			container(p)["env"] = []any{map[string]any{"name": "T", "valueFrom": map[string]any{"secretKeyRef": map[string]any{"name": "s", "key": "k"}}}}
		}, "no env"},
		{"a probe that runs a command", func(p map[string]any) {
			container(p)["livenessProbe"] = map[string]any{"exec": map[string]any{"command": []any{"iptables", "-F"}}}
		}, "probes"},
		{"a shell instead of sleep", func(p map[string]any) {
			container(p)["command"] = []any{"sh", "-c", "iptables -F; sleep 300"}
		}, "only runs sleep"},
		{"another image", func(p map[string]any) { container(p)["image"] = "docker.io/library/busybox" }, "is not listed in ConfigMap"},
		{"another user's name", func(p map[string]any) {
			p["metadata"].(map[string]any)["annotations"] = map[string]any{"proxyrules.kubectl.io/started-by": "bob"}
		}, "your own user name"},
		{"a day-long pod", func(p map[string]any) {
			p["spec"].(map[string]any)["activeDeadlineSeconds"] = 86400
			container(p)["command"] = []any{"sleep", "86400"}
		}, "at most 3600"},
		{"a pod without the plugin's label", func(p map[string]any) { p["metadata"].(map[string]any)["labels"] = map[string]any{} }, "managed-by"},
		// The scheduling fields of the second review (issue 30, item 3).
		{"a system-node-critical pod with huge requests", func(p map[string]any) {
			p["spec"].(map[string]any)["priorityClassName"] = "system-node-critical"
			container(p)["resources"] = map[string]any{"requests": map[string]any{"cpu": "64", "memory": "256Gi"}, "limits": map[string]any{"cpu": "64", "memory": "256Gi"}}
		}, "no priority class of its own"},
		{"huge requests", func(p map[string]any) {
			container(p)["resources"] = map[string]any{"requests": map[string]any{"cpu": "1", "memory": "1Gi"}, "limits": map[string]any{"cpu": "1", "memory": "1Gi"}}
		}, "requests of at most"},
		{"no resources", func(p map[string]any) { delete(container(p), "resources") }, "CPU and memory limits"},
		{"a GPU", func(p map[string]any) {
			container(p)["resources"].(map[string]any)["limits"].(map[string]any)["example.com/gpu"] = "1"
		}, "nothing else"},
		{"a finalizer", func(p map[string]any) { p["metadata"].(map[string]any)["finalizers"] = []any{"example.com/keep"} }, "no finalizers"},
		{"restartPolicy Always", func(p map[string]any) { p["spec"].(map[string]any)["restartPolicy"] = "Always" }, "restartPolicy Never"},
		{"a host port", func(p map[string]any) {
			container(p)["ports"] = []any{map[string]any{"containerPort": 2379, "hostPort": 2379}}
		}, "no ports"},
		{"a day-long grace period", func(p map[string]any) { p["spec"].(map[string]any)["terminationGracePeriodSeconds"] = 86400 }, "terminationGracePeriodSeconds 0"},
		{"imagePullPolicy Never", func(p map[string]any) { container(p)["imagePullPolicy"] = "Never" }, "imagePullPolicy IfNotPresent or Always"},
		{"an untagged image", func(p map[string]any) {
			container(p)["image"] = "registry.k8s.io/kube-proxy"
			delete(container(p), "imagePullPolicy")
		}, "is not pinned"},
		{"a :latest image", func(p map[string]any) { container(p)["image"] = "registry.k8s.io/kube-proxy:latest" }, "is not pinned"},
	} {
		_, err := asMember(debugPodJSON("refused", "alice", tc.edit), "create", "-f", "-")
		refused(t, tc.name, err, byPolicy, tc.want)
	}
}
