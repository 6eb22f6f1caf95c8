//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The live tests run `kubectl proxyrules … --node N` against the cluster, as
// users do: the plugin creates its debug pod through the API server, kwok
// runs the pod's execs in the node's network namespace, the real kube-proxy's
// rules are read there. They run after TestMapLiveNodes (file order), which
// leaves every kind of Service, large-cluster mode and stale chains behind.

const debugPodLabel = "app.kubernetes.io/managed-by=kubectl-proxyrules"

// noDebugPods fails when a debug pod of the plugin is left in any namespace.
func noDebugPods(t *testing.T) {
	t.Helper()
	out := strings.TrimSpace(string(kubectl(t, "get", "pods", "-A", "-l", debugPodLabel, "-o", "name")))
	if out != "" {
		t.Errorf("debug pods left behind:\n%s", out)
		kubectl(t, "delete", "pods", "-A", "-l", debugPodLabel, "--grace-period=0", "--wait=false")
	}
}

// plugin runs `kubectl proxyrules ARGS` and returns stdout, stderr and the
// exit status.
func plugin(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command("kubectl", append([]string{"proxyrules"}, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exitErr *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exitErr):
		code = exitErr.ExitCode()
	default:
		t.Fatalf("kubectl proxyrules %s: %v", strings.Join(args, " "), err)
	}
	// client-go's port-forward once logged this after every live command.
	if strings.Contains(errOut.String(), "Error closing listener") {
		t.Errorf("kubectl proxyrules %s: client-go's log on stderr:\n%s", strings.Join(args, " "), errOut.String())
	}
	return out.String(), errOut.String(), code
}

type collection struct {
	Via, Pod, Namespace, Image, ProxyMode, Backend, Scope string
	Files                                                 []struct {
		Path, Kind, Command string
		Bytes               int64
		Partial             bool
		Error               string
	}
	Warnings []string
}

type liveMap struct {
	chainMap
	Collection *collection `json:"collection"`
}

func runLiveMap(t *testing.T, args ...string) liveMap {
	t.Helper()
	out, errOut, code := plugin(t, append([]string{"map", "-o", "json"}, args...)...)
	if code != 0 {
		t.Fatalf("map %s: exit %d\n%s", strings.Join(args, " "), code, errOut)
	}
	var m liveMap
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("map -o json: %v\n%s", err, out)
	}
	return m
}

// attribution is what map says of each chain, keyed by family/table/chain.
func attribution(m chainMap, withStaleOwners bool) map[string]string {
	out := map[string]string{}
	for _, c := range m.Chains {
		v := fmt.Sprintf("%s %s %s stale=%v", c.Kind, c.ServicePort, c.Endpoint, c.Stale)
		if c.Stale && !withStaleOwners {
			v = fmt.Sprintf("%s stale=%v", c.Kind, c.Stale)
		}
		out[c.Family+"/"+c.Table+"/"+c.Chain] = v
	}
	return out
}

func diffAttribution(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	var diffs []string
	for k, w := range want {
		if g, ok := got[k]; !ok {
			diffs = append(diffs, "missing "+k+": "+w)
		} else if g != w {
			diffs = append(diffs, fmt.Sprintf("%s: live %q, offline %q", k, g, w))
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			diffs = append(diffs, "extra "+k+": "+g)
		}
	}
	sort.Strings(diffs)
	if len(diffs) > 0 {
		if len(diffs) > 20 {
			diffs = append(diffs[:20], fmt.Sprintf("… %d more", len(diffs)-20))
		}
		t.Errorf("%s: live and offline attribution differ:\n%s", what, strings.Join(diffs, "\n"))
	}
}

// offlineMap reads the node directly (ip netns exec, as root on the node)
// and maps it with the same objects.
func offlineMap(t *testing.T, node, objects string) chainMap {
	t.Helper()
	var dumps []string
	if nodeMode[node] == "nftables" {
		dumps = append(dumps, writeTemp(t, node+".json", mustRun(t, nil, "ip", "netns", "exec", node, "nft", "-j", "list", "ruleset")))
	} else {
		dumps = append(dumps,
			writeTemp(t, node+"-v4.txt", mustRun(t, nil, "ip", "netns", "exec", node, "iptables-save")),
			writeTemp(t, node+"-v6.txt", mustRun(t, nil, "ip", "netns", "exec", node, "ip6tables-save")))
	}
	return runMap(t, node, objects, dumps...)
}

// TestLiveMapMatchesOffline: --node gives the same attribution as the
// offline path on a dump read on the node at the same time.
func TestLiveMapMatchesOffline(t *testing.T) {
	for _, node := range nodes {
		t.Run(node+"/"+nodeMode[node], func(t *testing.T) {
			defer noDebugPods(t)
			objects := writeTemp(t, "objects.json", kubectl(t, "get", "services,endpointslices", "-A", "-o", "json"))
			want := offlineMap(t, node, objects)
			// --reader save reads iptables-nft with iptables-nft-save, as the
			// offline dump was: the same text, so the same attribution, stale
			// owners included.
			live := runLiveMap(t, "--node", node, "--reader", "save", "--via", "debug-pod")
			if live.Collection == nil || live.Collection.Via != "debug-pod" || live.Collection.ProxyMode != nodeMode[node] {
				t.Fatalf("collection = %+v, want via debug-pod, proxy mode %s", live.Collection, nodeMode[node])
			}
			if !strings.Contains(live.Collection.Image, "kube-proxy") {
				t.Errorf("debug pod image %q, want the node's kube-proxy image", live.Collection.Image)
			}
			diffAttribution(t, "--reader save", attribution(live.chainMap, true), attribution(want, true))
			if live.Summary.Unowned != 0 {
				t.Errorf("live map: %d chains without owner", live.Summary.Unowned)
			}
			// nft list table (the fallback when the save fails): the same
			// chains and owners; stale chains lose their comments.
			fast := runLiveMap(t, "--node", node, "--reader", "nft")
			diffAttribution(t, "--reader nft", attribution(fast.chainMap, false), attribution(want, false))
			t.Logf("%s: %d chains, %d stale, read by %s", node, fast.Summary.Chains, fast.Summary.Stale, files(fast.Collection))
		})
	}
}

func files(c *collection) string {
	var s []string
	for _, f := range c.Files {
		if f.Kind == "ruleset" && f.Bytes > 0 {
			s = append(s, fmt.Sprintf("%s (%d B)", f.Command, f.Bytes))
		}
	}
	return strings.Join(s, ", ")
}

// TestLiveTriage: triage --node works for both proxy modes.
func TestLiveTriage(t *testing.T) {
	for _, node := range nodes {
		t.Run(node, func(t *testing.T) {
			defer noDebugPods(t)
			out, errOut, code := plugin(t, "triage", "--node", node, "-o", "json")
			if code != 0 && code != 2 {
				t.Fatalf("triage --node %s: exit %d (want 0 or 2)\n%s", node, code, errOut)
			}
			var rep struct {
				Kind, Node, Status string
				Mode               struct{ Detected string }
				Chains             struct{ Chains, Unowned int }
				Counts             *json.RawMessage
				Collection         *collection
			}
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatalf("triage -o json: %v\n%s", err, out)
			}
			if rep.Kind != "Triage" || rep.Node != node || rep.Chains.Chains == 0 || rep.Chains.Unowned != 0 {
				t.Errorf("triage: kind %q node %q chains %d unowned %d", rep.Kind, rep.Node, rep.Chains.Chains, rep.Chains.Unowned)
			}
			if !strings.Contains(rep.Mode.Detected, nodeMode[node]) {
				t.Errorf("triage detected mode %q on %s, want %s", rep.Mode.Detected, node, nodeMode[node])
			}
			var kinds []string
			for _, f := range rep.Collection.Files {
				if f.Bytes > 0 {
					kinds = append(kinds, f.Kind)
				}
			}
			for _, want := range []string{"ruleset", "metrics", "config", "objects"} {
				if !strings.Contains(strings.Join(kinds, " "), want) {
					t.Errorf("triage --node %s collected %v, want a %s file", node, kinds, want)
				}
			}
			text, _, _ := plugin(t, "triage", "--node", node)
			t.Logf("triage --node %s (exit %d): %s", node, code, strings.SplitN(text, "\n", 2)[0])
		})
	}
}

// TestLiveExplainReadsOnlyItsChains: explain on the iptables-nft node reads
// KUBE-SERVICES and the Service's chains (one exec per round), and explains
// the Service as the full dump does.
func TestLiveExplainReadsOnlyItsChains(t *testing.T) {
	defer noDebugPods(t)
	svc := nsScenario + "/scaled"
	ns, name, _ := strings.Cut(svc, "/")
	type explanation struct {
		Namespace, Name string
		Ports           []json.RawMessage
		Problems        []json.RawMessage
		Collection      *collection
	}
	explain := func(args ...string) explanation {
		out, errOut, code := plugin(t, append([]string{"explain", "svc/" + name, "-n", ns, "-o", "json"}, args...)...)
		if code != 0 {
			t.Fatalf("explain %v: exit %d\n%s\n%.4000s", args, code, errOut, out)
		}
		var e explanation
		if err := json.Unmarshal([]byte(out), &e); err != nil {
			t.Fatalf("explain -o json: %v\n%s", err, out)
		}
		return e
	}
	live := explain("--node", "node-a")
	c := live.Collection
	if c == nil || c.Scope != "service "+svc {
		t.Fatalf("explain --node node-a collected %+v, want scope service %s", c, svc)
	}
	for _, f := range c.Files {
		if f.Kind == "ruleset" && f.Bytes > 0 && !f.Partial {
			t.Errorf("explain read a whole table: %s", f.Command)
		}
	}
	objects := writeTemp(t, "objects.json", kubectl(t, "get", "services,endpointslices", "-A", "-o", "json"))
	v4 := writeTemp(t, "node-a-v4.txt", mustRun(t, nil, "ip", "netns", "exec", "node-a", "iptables-save"))
	v6 := writeTemp(t, "node-a-v6.txt", mustRun(t, nil, "ip", "netns", "exec", "node-a", "ip6tables-save"))
	full := explain("--node", "node-a", "--from-dump", v4, "--from-dump", v6, "--from-objects", objects)
	gotPorts, _ := json.Marshal(live.Ports)
	wantPorts, _ := json.Marshal(full.Ports)
	if !bytes.Equal(gotPorts, wantPorts) {
		t.Errorf("explain from the Service's chains differs from the full dump:\nlive: %s\nfull: %s", gotPorts, wantPorts)
	}
	if len(live.Problems) != len(full.Problems) {
		t.Errorf("explain problems: live %d, full %d", len(live.Problems), len(full.Problems))
	}
	t.Logf("explain svc/%s on node-a read %s", name, files(c))
}

// TestLiveViaKubeProxy: the same collection by exec into kube-proxy's pod,
// with no debug pod.
func TestLiveViaKubeProxy(t *testing.T) {
	defer noDebugPods(t)
	m := runLiveMap(t, "--node", "node-b", "--via", "kube-proxy")
	if m.Collection.Via != "kube-proxy" || m.Collection.Namespace != "kube-system" || !strings.HasPrefix(m.Collection.Pod, "kube-proxy-") {
		t.Errorf("collection %+v, want via kube-proxy in kube-system/kube-proxy-…", m.Collection)
	}
	if m.Summary.Attributed == 0 || m.Summary.Unowned != 0 {
		t.Errorf("map via kube-proxy: %d attributed, %d unowned", m.Summary.Attributed, m.Summary.Unowned)
	}
}

// TestLiveCollectBundle: collect -d FILE.tar.gz, then every command reads
// it back without the cluster.
func TestLiveCollectBundle(t *testing.T) {
	defer noDebugPods(t)
	dir := t.TempDir()
	archive := filepath.Join(dir, "node-b.tar.gz")
	out, errOut, code := plugin(t, "collect", "--node", "node-b", "-d", archive)
	if code != 0 {
		t.Fatalf("collect: exit %d\n%s%s", code, out, errOut)
	}
	if !strings.Contains(out, "nftables mode") {
		t.Errorf("collect output does not name the mode:\n%s", out)
	}
	live := runLiveMap(t, "--node", "node-b")
	// No cluster: a kubeconfig that points nowhere.
	nowhere := filepath.Join(dir, "nowhere.kubeconfig")
	saved := runLiveMap(t, "--from-bundle", archive, "--kubeconfig", nowhere)
	if saved.Node != "node-b" || saved.Collection == nil || saved.Collection.ProxyMode != "nftables" {
		t.Errorf("bundle map: node %q collection %+v", saved.Node, saved.Collection)
	}
	diffAttribution(t, "bundle", attribution(saved.chainMap, true), attribution(live.chainMap, true))
	for _, cmd := range [][]string{{"triage"}, {"stale"}, {"counts"}, {"masq"}, {"explain", "svc/affinity", "-n", nsScenario}} {
		_, errOut, code := plugin(t, append(cmd, "--from-bundle", archive, "--kubeconfig", nowhere)...)
		if code != 0 && code != 2 {
			t.Errorf("%s --from-bundle: exit %d\n%s", cmd[0], code, errOut)
		}
	}
}

// TestLiveInterrupted: Ctrl-C while the debug pod starts leaves no pod.
func TestLiveInterrupted(t *testing.T) {
	defer noDebugPods(t)
	for attempt := 1; attempt <= 3; attempt++ {
		cmd := exec.Command("kubectl", "proxyrules", "triage", "--node", "node-a", "--reader", "save")
		var errOut bytes.Buffer
		cmd.Stderr = &errOut
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Wait for the pod to exist, then interrupt.
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			out, _ := run(nil, "kubectl", "get", "pods", "-A", "-l", debugPodLabel, "-o", "name")
			if len(bytes.TrimSpace(out)) > 0 {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		cmd.Process.Signal(syscall.SIGINT)
		err := cmd.Wait()
		var exitErr *exec.ExitError
		if !errors.As(err, &exitErr) || exitErr.ExitCode() != 130 {
			t.Logf("attempt %d: the run ended before the interrupt (%v): again", attempt, err)
			continue
		}
		// The run deleted its pod before exiting: nothing to wait for.
		out := strings.TrimSpace(string(kubectl(t, "get", "pods", "-A", "-l", debugPodLabel, "-o", "name")))
		if out != "" {
			t.Fatalf("interrupted run left %s\nstderr: %s", out, errOut.String())
		}
		if !strings.Contains(errOut.String(), "interrupted") {
			t.Errorf("stderr does not say interrupted: %s", errOut.String())
		}
		return
	}
	t.Fatal("could not interrupt a run while its pod existed in 3 attempts")
}

// TestLiveErrors: the errors a user can act on.
func TestLiveErrors(t *testing.T) {
	defer noDebugPods(t)
	mustRun(t, []byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"psa-baseline","labels":{"pod-security.kubernetes.io/enforce":"baseline"}}}`), "kubectl", "apply", "-f", "-")
	// No controller-manager: the namespace's default ServiceAccount, which
	// admission wants before Pod Security has its say, is made by hand.
	run(nil, "kubectl", "-n", "psa-baseline", "create", "serviceaccount", "default")
	// A node without kube-proxy, as with an eBPF replacement (kwok does not
	// manage it: only the object exists).
	mustRun(t, []byte(`{"apiVersion":"v1","kind":"Node","metadata":{"name":"node-nokp","labels":{"kubernetes.io/hostname":"node-nokp"}}}`), "kubectl", "apply", "-f", "-")
	defer run(nil, "kubectl", "delete", "node", "node-nokp", "--ignore-not-found")
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"unknown node", []string{"--node", "node-zz"}, []string{`node "node-zz" not found`, "kubectl get nodes"}},
		{"pod security", []string{"--node", "node-a", "--debug-namespace", "psa-baseline", "--via", "debug-pod"}, []string{"Pod Security", "privileged", "--debug-namespace", "--via kube-proxy"}},
		{"no kube-proxy", []string{"--node", "node-nokp"}, []string{"no kube-proxy pod runs on node node-nokp", "--image"}},
		{"no debug namespace", []string{"--node", "node-a", "--debug-namespace", "not-applied", "--via", "debug-pod"}, []string{"namespace not-applied does not exist", "kubectl apply -f deploy/"}},
		{"pod deadline above the bound", []string{"--node", "node-a", "--pod-deadline", "2h"}, []string{"--pod-deadline must be between"}},
		{"bad --via", []string{"--node", "node-a", "--via", "ssh"}, []string{"--via must be"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, errOut, code := plugin(t, append([]string{"map"}, tt.args...)...)
			if code != 1 {
				t.Errorf("exit %d, want 1", code)
			}
			for _, w := range tt.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr does not say %q:\n%s", w, errOut)
				}
			}
		})
	}
}

// TestLiveCleanup: cleanup deletes the caller's own leftovers (finished, or
// past their deadline) and nothing else: not a run in progress, not
// someone else's, never a pod without the plugin's label; --all deletes
// every pod with the label, whoever started it.
func TestLiveCleanup(t *testing.T) {
	me := strings.TrimSpace(string(kubectl(t, "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}")))
	pod := func(name, labels, by string, deadline int) string {
		return fmt.Sprintf(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":%q,"namespace":"default","labels":{%s},"annotations":{"proxyrules.kubectl.io/started-by":%q}},
"spec":{"nodeName":"node-a","activeDeadlineSeconds":%d,"containers":[{"name":"c","image":"registry.k8s.io/kube-proxy:v1.37.2","command":["sleep","600"]}]}}`, name, labels, by, deadline)
	}
	const ours = `"app.kubernetes.io/managed-by":"kubectl-proxyrules"`
	for _, p := range []string{
		pod("proxyrules-left-over", ours, me, 1),     // mine, past its deadline in a moment
		pod("proxyrules-in-progress", ours, me, 600), // mine, a run in progress
		pod("proxyrules-bobs", ours, "bob", 1),       // someone else's
		pod("someone-elses", `"app.kubernetes.io/managed-by":"kubectl-debug"`, me, 1),
	} {
		mustRun(t, []byte(p), "kubectl", "create", "-f", "-")
	}
	defer run(nil, "kubectl", "delete", "pod", "someone-elses", "proxyrules-in-progress", "proxyrules-bobs", "--grace-period=0", "--ignore-not-found", "--wait=false")
	time.Sleep(2500 * time.Millisecond) // past the 1 s deadlines
	exists := func(name string) bool {
		_, err := run(nil, "kubectl", "get", "pod", name)
		return err == nil
	}
	out, _, code := plugin(t, "cleanup", "--dry-run")
	if code != 0 || !strings.Contains(out, "would delete pod default/proxyrules-left-over") || strings.Contains(out, "would delete pod default/proxyrules-in-progress") ||
		strings.Contains(out, "proxyrules-bobs") || strings.Contains(out, "someone-elses") {
		t.Errorf("cleanup --dry-run as %s: exit %d\n%s", me, code, out)
	}
	out, _, code = plugin(t, "cleanup")
	if code != 0 || !strings.Contains(out, "deleted pod default/proxyrules-left-over") || !strings.Contains(out, "kept pod default/proxyrules-in-progress") {
		t.Errorf("cleanup: exit %d\n%s", code, out)
	}
	eventually(t, "the leftover pod is gone", func() error {
		if exists("proxyrules-left-over") {
			return fmt.Errorf("still there")
		}
		return nil
	})
	if !exists("proxyrules-in-progress") || !exists("proxyrules-bobs") {
		t.Errorf("cleanup deleted a run in progress or someone else's pod")
	}
	out, _, code = plugin(t, "cleanup", "--all")
	if code != 0 || !strings.Contains(out, "deleting pod default/proxyrules-bobs") || !strings.Contains(out, "deleting pod default/proxyrules-in-progress") {
		t.Errorf("cleanup --all: exit %d\n%s", code, out)
	}
	eventually(t, "--all deleted the plugin's pods", func() error {
		if out := strings.TrimSpace(string(kubectl(t, "get", "pods", "-A", "-l", debugPodLabel, "-o", "name"))); out != "" {
			return fmt.Errorf("still there: %s", out)
		}
		return nil
	})
	if !exists("someone-elses") {
		t.Errorf("cleanup deleted a pod that is not its own")
	}
}
