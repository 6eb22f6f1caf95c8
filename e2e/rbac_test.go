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
			"automountServiceAccountToken": false, "restartPolicy": "Never",
			"securityContext": map[string]any{"seccompProfile": map[string]any{"type": "RuntimeDefault"}},
			"containers": []any{map[string]any{
				"name": "proxyrules", "image": "registry.k8s.io/kube-proxy:v1.37.2", "command": []any{"sleep", "300"},
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
func portForward(args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kubectl", append(append([]string{}, member...), append([]string{"port-forward"}, args...)...)...)
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
	// 1. A member: both nodes, through the debug pod in kubectl-proxyrules.
	for _, node := range nodes {
		out, errOut, code := plugin(t, append([]string{"map", "-o", "json", "--node", node}, member...)...)
		if code != 0 {
			t.Fatalf("map --node %s as a member of kubectl-proxyrules-users: exit %d\n%s", node, code, errOut)
		}
		var m liveMap
		if err := json.Unmarshal([]byte(out), &m); err != nil || m.Collection == nil || m.Collection.Via != "debug-pod" || m.Collection.Namespace != debugNS {
			t.Fatalf("map as alice: %v, collection %+v, want via debug-pod in %s", err, m.Collection, debugNS)
		}
	}

	// 2. Pods not of the plugin's shape: refused by the admission policy.
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
	} {
		_, err := asMember(debugPodJSON("refused", "alice", tc.edit), "create", "-f", "-")
		refused(t, tc.name, err, byPolicy, tc.want)
	}

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
	for _, argv := range [][]string{{"iptables", "-t", "nat", "-F"}, {"sh", "-c", "iptables -t nat -F"}, {"nft", "flush", "ruleset"}} {
		_, err := asMember(nil, append([]string{"-n", debugNS, "exec", "alice-debug", "--"}, argv...)...)
		refused(t, "exec "+strings.Join(argv, " "), err, byExecPolicy)
	}
	if out, err := inNode("node-a", "iptables-save", "-t", "nat"); err != nil || !strings.Contains(string(out), "-A KUBE-SERVICES") {
		t.Errorf("node-a's nat table after the refused commands: %v", err)
	}
	_, err := asMember(nil, "-n", debugNS, "debug", "alice-debug", "--image=registry.k8s.io/kube-proxy:v1.37.2", "--", "sh")
	refused(t, "an ephemeral container", err, "ephemeralcontainers")

	// 4. kube-system: no exec, no port-forward, neither into kube-proxy nor
	// into anything else.
	kp := kubeProxyPod(t, "node-a")
	_, err = asMember(nil, "-n", "kube-system", "exec", kp, "--", "iptables-save")
	refused(t, "exec into kube-proxy under the default set", err, `cannot create resource "pods/exec"`, "kube-system")
	refused(t, "port-forward into kube-proxy under the default set", portForward("-n", "kube-system", kp, ":10249"), "pods/portforward")
	_, errOut, code := plugin(t, append([]string{"map", "--node", "node-a", "--via", "kube-proxy"}, member...)...)
	if code != 1 || !strings.Contains(errOut, "not allowed to") || !strings.Contains(errOut, "pods/exec in namespace kube-system") || !strings.Contains(errOut, "via-kube-proxy") {
		t.Errorf("--via kube-proxy under the default set: exit %d, stderr:\n%s", code, errOut)
	}

	// 5. A stranger: neither way, and the message names the verbs and deploy/.
	_, errOut, code = plugin(t, "map", "--node", "node-a", "--as", "mallory")
	if code != 1 || !strings.Contains(errOut, "not allowed to") || !strings.Contains(errOut, "kubectl apply -f deploy/") {
		t.Errorf("map as a stranger: exit %d, stderr:\n%s", code, errOut)
	}
	t.Logf("stranger: %s", strings.TrimSpace(errOut))

	// 6. The opt-in: --via kube-proxy for the group, into kube-proxy's pods
	// only, read commands only.
	optIn := filepath.Join(repoRoot, "deploy", "via-kube-proxy")
	kubectl(t, "apply", "-f", optIn)
	defer kubectl(t, "delete", "-f", optIn, "--ignore-not-found")
	eventually(t, "the opt-in policy is in force", func() error {
		// A read command the plugin never sends: refused once the policy is in force.
		_, err := asMember(nil, "-n", "kube-system", "exec", kp, "--", "iptables", "-t", "nat", "-L", "KUBE-SERVICES")
		if err != nil && strings.Contains(err.Error(), "kubectl-proxyrules-via-kube-proxy") {
			return nil
		}
		return fmt.Errorf("not refused yet: %v", err)
	})
	out, errOut, code := plugin(t, append([]string{"map", "-o", "json", "--node", "node-a", "--debug-namespace", "kube-node-lease"}, member...)...)
	var m liveMap
	if code != 0 || json.Unmarshal([]byte(out), &m) != nil || m.Collection.Via != "kube-proxy" || m.Summary.Attributed == 0 {
		t.Errorf("--via auto without pod rights, with the opt-in: exit %d, collection %+v\n%s", code, m.Collection, errOut)
	}
	_, err = asMember(nil, "-n", "kube-system", "exec", kp, "--", "iptables", "-t", "nat", "-F")
	refused(t, "a writing command in kube-proxy's pod", err, "kubectl-proxyrules-via-kube-proxy", "read-only commands")
	mustRun(t, []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"etcd-node-a","namespace":"kube-system"},
"spec":{"nodeName":"node-a","hostNetwork":true,"containers":[{"name":"etcd","image":"registry.k8s.io/etcd:3.6.0","command":["sleep","300"]}]}}`), "kubectl", "create", "-f", "-")
	defer run(nil, "kubectl", "-n", "kube-system", "delete", "pod", "etcd-node-a", "--grace-period=0", "--wait=false")
	kubectl(t, "-n", "kube-system", "wait", "--for=condition=Ready", "pod/etcd-node-a", "--timeout=60s")
	_, err = asMember(nil, "-n", "kube-system", "exec", "etcd-node-a", "--", "iptables-save")
	refused(t, "exec into another kube-system pod with the opt-in", err, "only into kube-proxy pods, not etcd-node-a")
	refused(t, "port-forward into another kube-system pod with the opt-in", portForward("-n", "kube-system", "etcd-node-a", ":2379"), "only into kube-proxy pods")
	// Admins are not members: their own exec in kube-system stays as it was.
	if out, err := run(nil, "kubectl", "-n", "kube-system", "exec", "etcd-node-a", "--", "hostname"); err != nil || strings.TrimSpace(string(out)) != "node-a" {
		t.Errorf("the opt-in policy restricted an admin: %v %q", err, out)
	}
}
