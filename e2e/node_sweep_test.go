//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Sweeps (issue 15): triage, collect, explain and diff over many nodes, on
// node-a, node-b and the scale mode's fake nodes (scalemode_test.go). They
// run after the live tests (file order), when node-b has finished the
// deletions TestMapLiveNodes started, and before TestLiveExplainBigService
// adds its 5,000 endpoints to every node's rules.

const sweepParallel = 10

// TestScaleNodes: the scale mode is what the sweeps need: every fake node is
// Ready at the shared namespace's address with one Running kube-proxy pod,
// a pod's exec lands in the shared namespace, port-forward to a fake node's
// kube-proxy pod reaches the shared kube-proxy, and triage of two fake nodes
// reads each as itself, with the same report.
func TestScaleNodes(t *testing.T) {
	s := scaleCluster(t)
	defer noDebugPods(t)
	if got := nodeNames(t, s.selector); len(got) != s.nodes {
		t.Fatalf("%d nodes match %s, want %d", len(got), s.selector, s.nodes)
	}
	wantIP := clusterEnv["E2E_SUBNET"] + ".13"
	out := kubectl(t, "get", "nodes", "-l", s.selector, "-o",
		`jsonpath={range .items[*]}{.metadata.name} {.status.conditions[?(@.type=="Ready")].status} {.status.addresses[?(@.type=="InternalIP")].address}{"\n"}{end}`)
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if f := strings.Fields(line); len(f) != 3 || f[1] != "True" || f[2] != wantIP {
			t.Errorf("fake node %q: want Ready at %s", line, wantIP)
		}
	}
	out = kubectl(t, "-n", "kube-system", "get", "pods", "-l", "k8s-app=kube-proxy,proxyrules.e2e/proxy-pool=scale", "-o",
		`jsonpath={range .items[*]}{.spec.nodeName} {.status.phase} {.spec.containers[0].image}{"\n"}{end}`)
	pods := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 || f[1] != "Running" || !strings.Contains(f[2], "kube-proxy") {
			t.Errorf("kube-proxy pod %q: want Running, the kube-proxy image", line)
			continue
		}
		pods[f[0]]++
	}
	for i := 0; i < s.nodes; i++ {
		if pods[s.node(i)] != 1 {
			t.Errorf("%s has %d kube-proxy pods, want 1", s.node(i), pods[s.node(i)])
		}
	}

	// exec and port-forward on a fake node land in the shared namespace.
	node := s.node(s.nodes / 2)
	createObjects(t, map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "scale-exec", "namespace": "default"},
		"spec": map[string]any{"nodeName": node, "hostNetwork": true,
			"containers": []any{map[string]any{"name": "c", "image": "registry.k8s.io/kube-proxy:v1.37.2"}}},
	})
	defer run(nil, "kubectl", "-n", "default", "delete", "pod", "scale-exec", "--grace-period=0", "--wait=false")
	kubectl(t, "-n", "default", "wait", "--for=condition=Ready", "pod/scale-exec", "--timeout=60s")
	if got, err := run(nil, "kubectl", "-n", "default", "exec", "scale-exec", "--", "hostname"); err != nil || strings.TrimSpace(string(got)) != s.netns {
		t.Errorf("exec hostname on %s: %q, %v; want %s (the shared kwok's)", node, got, err, s.netns)
	}
	eventually(t, "exec iptables-save on "+node+" equals the shared namespace's", func() error {
		d1, err := inNode(s.netns, "iptables-save", "-t", "nat")
		if err != nil {
			return err
		}
		viaExec, err := run(nil, "kubectl", "-n", "default", "exec", "scale-exec", "--", "iptables-save", "-t", "nat")
		if err != nil {
			return err
		}
		if normalizeSave(viaExec) != normalizeSave(d1) || !strings.Contains(string(viaExec), "-A KUBE-SERVICES") {
			return fmt.Errorf("differs, or has no KUBE-SERVICES (%d vs %d bytes)", len(viaExec), len(d1))
		}
		return nil
	})
	if mode := portForwardGet(t, "kube-system", kubeProxyPod(t, node), 10249, "/proxyMode"); strings.TrimSpace(mode) != "iptables" {
		t.Errorf("port-forward to %s's kube-proxy /proxyMode: %q, want iptables", node, mode)
	}

	// triage reads two fake nodes alike, each as itself.
	var reports []string
	for _, n := range []string{s.node(1), s.node(s.nodes - 1)} {
		r := runPlugin(t, nil, "triage", "--node", n, "-o", "json")
		if r.code != 0 && r.code != 2 {
			t.Fatalf("%v\n%s", r, r.stderr)
		}
		var id struct {
			Identity struct {
				Given, Inferred   string
				Mismatch, Unknown bool
			}
			Mode struct{ Detected string }
		}
		if err := json.Unmarshal([]byte(r.stdout), &id); err != nil {
			t.Fatalf("triage -o json: %v", err)
		}
		if id.Identity.Given != n || id.Identity.Mismatch || id.Identity.Unknown || !strings.Contains(id.Mode.Detected, "iptables") {
			t.Errorf("triage --node %s: identity %+v, mode %q; want the node itself, no mismatch, iptables", n, id.Identity, id.Mode.Detected)
		}
		e, err := triageEssentials([]byte(r.stdout))
		if err != nil {
			t.Fatal(err)
		}
		reports = append(reports, strings.ReplaceAll(e, n, "NODE"))
		t.Logf("%v", r)
	}
	if reports[0] != reports[1] {
		t.Errorf("two fake nodes, one ruleset, two reports:\n%s\n%s", reports[0], reports[1])
	}
}

// TestSweepAllNodes: a sweep of every node holds its parallelism bound,
// counted from the API (debug pods existing at once, not being deleted), is
// parallel, visits every node and leaves no pod; its List has one item per
// node, each the single-node report, and the summary agrees with the exit status.
func TestSweepAllNodes(t *testing.T) {
	s := scaleCluster(t)
	all := nodeNames(t, "")
	waitSynced(t, markSync(t, s.netns), 0, 0)
	r := sweep(t, "triage", "--all-nodes", "--parallel", fmt.Sprint(sweepParallel), "-o", "json")
	t.Logf("%v: %d debug pods at most at once (%d with those being deleted), %d created on %d nodes; plugin CPU %s, max RSS %d MiB; LIST requests: %s",
		r, r.pods.maxLive, r.pods.maxExisting, r.pods.created, len(r.pods.nodes), r.cpu.Round(10*time.Millisecond), r.maxRSSKiB/1024, formatCounts(r.lists))
	if r.code != 0 && r.code != 2 {
		t.Fatalf("%v, want 0 or 2 (every node read)\nnodes not read: %s\nstderr: %s", r, failedItems(r.stdout), tail(r.stderr, 3000))
	}
	l := r.list(t)
	checkSweepCovers(t, l, all, "Triage")
	wantStatus := map[int]string{0: "healthy", 2: "problems"}[r.code]
	if l.Summary.Status != wantStatus || l.Summary.Failed != 0 || l.Summary.Nodes != len(all) {
		t.Errorf("summary: status %q, %d failed, %d nodes; want %s (exit %d), 0, %d", l.Summary.Status, l.Summary.Failed, l.Summary.Nodes, wantStatus, r.code, len(all))
	}
	if r.pods.maxLive > sweepParallel {
		t.Errorf("%d debug pods at once, want at most --parallel %d", r.pods.maxLive, sweepParallel)
	}
	if r.pods.maxLive < 2 {
		t.Errorf("at most %d debug pod at once: the sweep is not parallel", r.pods.maxLive)
	}
	if len(r.pods.nodes) != len(all) {
		t.Errorf("debug pods ran on %d nodes, want every one of the %d", len(r.pods.nodes), len(all))
	}
}

// checkSweepCovers: one item per node of want, of kind (the report of a
// node that was read), and one summary row per node.
func checkSweepCovers(t *testing.T, l sweepList, want []string, kind string) map[string]json.RawMessage {
	t.Helper()
	kinds := map[string]string{}
	for _, n := range want {
		kinds[n] = kind
	}
	return checkSweepKinds(t, l, kinds)
}

// checkSweepKinds: one item per node of kinds, of that kind, and one
// summary row per node.
func checkSweepKinds(t *testing.T, l sweepList, kinds map[string]string) map[string]json.RawMessage {
	t.Helper()
	items := l.byNode(t)
	var missing, extra, wrongKind []string
	for n, kind := range kinds {
		raw, ok := items[n]
		if !ok {
			missing = append(missing, n)
			continue
		}
		var h itemHead
		json.Unmarshal(raw, &h)
		if h.Kind != kind {
			wrongKind = append(wrongKind, fmt.Sprintf("%s: kind %s, not %s (%s %s)", n, h.Kind, kind, h.Reason, h.Error))
		}
	}
	for n := range items {
		if _, ok := kinds[n]; !ok {
			extra = append(extra, n)
		}
	}
	for what, list := range map[string][]string{"missing": missing, "not asked for": extra, "of another kind": wrongKind} {
		if len(list) > 0 {
			sort.Strings(list)
			t.Errorf("%d items %s: %s", len(list), what, strings.Join(list, "; "))
		}
	}
	rows := map[string]int{}
	for _, row := range l.Summary.Rows {
		rows[row.Node]++
	}
	for n := range kinds {
		if rows[n] != 1 {
			t.Errorf("summary: %d rows for %s, want 1", rows[n], n)
		}
	}
	if len(l.Summary.Rows) != len(kinds) {
		t.Errorf("summary: %d rows, want %d", len(l.Summary.Rows), len(kinds))
	}
	return items
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// TestSweepInterrupted: Ctrl-C in the middle of a sweep stops it (no pod
// on the nodes it had not reached), deletes every pod it started before
// it exits, and exits 130.
func TestSweepInterrupted(t *testing.T) {
	scaleCluster(t)
	all := nodeNames(t, "")
	for attempt := 1; attempt <= 3; attempt++ {
		w := watchDebugPods(t)
		var signalled time.Time
		var podsThen int
		endedFirst := false
		r := runPlugin(t, func(cmd *exec.Cmd) {
			// Interrupt once some pods exist (or the run ended by itself).
			for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline) && !exited(cmd.Process.Pid); time.Sleep(20 * time.Millisecond) {
				w.mu.Lock()
				podsThen = w.stats.created
				w.mu.Unlock()
				if podsThen >= 3 {
					break
				}
			}
			signalled, endedFirst = time.Now(), exited(cmd.Process.Pid)
			cmd.Process.Signal(syscall.SIGINT)
		}, "triage", "--all-nodes", "--parallel", fmt.Sprint(sweepParallel))
		stats, err := w.stop()
		if err != nil {
			t.Fatal(err)
		}
		if endedFirst && (r.code == 0 || r.code == 2 || r.code == 3) {
			t.Logf("attempt %d: the sweep ended (exit %d) before the interrupt: again", attempt, r.code)
			noPodsWithin(t, 60*time.Second)
			continue
		}
		if endedFirst {
			t.Fatalf("%v before it could be interrupted\nstderr: %s", r, tail(r.stderr, 2000))
		}
		t.Logf("%v; interrupted once %d pods were created, exited %s later; %d pods created in all",
			r, podsThen, r.ended.Sub(signalled).Round(10*time.Millisecond), stats.created)
		if r.code != 130 {
			t.Errorf("exit %d after SIGINT, want 130\nstderr: %s", r.code, tail(r.stderr, 2000))
		}
		if len(stats.live) > 0 {
			t.Errorf("the interrupted sweep exited with %d debug pods not deleted: %s", len(stats.live), strings.Join(stats.live, ", "))
		}
		if stats.created >= len(all) {
			t.Errorf("the interrupted sweep went on: %d pods created for %d nodes", stats.created, len(all))
		}
		if !strings.Contains(r.stderr, "interrupted") {
			t.Errorf("stderr does not say interrupted:\n%s", tail(r.stderr, 2000))
		}
		noPodsWithin(t, 60*time.Second)
		return
	}
	t.Fatal("could not interrupt a sweep of every node in 3 attempts")
}

// TestSweepListsOnce: the API list requests of a sweep do not grow with the
// number of nodes: a sweep of a tenth of the fake nodes and one of every
// node LIST Services, EndpointSlices, Nodes and Pods equally often, Services
// and EndpointSlices at most twice (one page each: the cluster has fewer
// than 500). The plugin's memory does not grow with them either.
func TestSweepListsOnce(t *testing.T) {
	s := scaleCluster(t)
	sel, tenth := s.group(min(3, s.nodes-1))
	all := nodeNames(t, "")
	var small, big sweepRun
	for attempt := 1; attempt <= 2; attempt++ {
		small = sweep(t, "triage", "--node-selector", sel, "--parallel", fmt.Sprint(sweepParallel), "-o", "json")
		big = sweep(t, "triage", "--all-nodes", "--parallel", fmt.Sprint(sweepParallel), "-o", "json")
		for _, r := range []sweepRun{small, big} {
			if r.code != 0 && r.code != 2 {
				t.Fatalf("%v\nstderr: %s", r, tail(r.stderr, 3000))
			}
		}
		t.Logf("%d nodes: LIST %s; max RSS %d MiB", len(tenth), formatCounts(small.lists), small.maxRSSKiB/1024)
		t.Logf("%d nodes: LIST %s; max RSS %d MiB", len(all), formatCounts(big.lists), big.maxRSSKiB/1024)
		if equalLists(small.lists, big.lists) || attempt == 2 {
			break
		}
		// Another client's relist (kwok, a kube-proxy) in one window would look
		// like growth: a second pair tells.
		t.Logf("attempt %d: the counts differ; measuring again", attempt)
	}
	checkSweepCovers(t, small.list(t), tenth, "Triage")
	checkSweepCovers(t, big.list(t), all, "Triage")
	for _, res := range []string{"services", "endpointslices", "nodes", "pods"} {
		if small.lists[res] != big.lists[res] {
			t.Errorf("LIST %s: %g in a sweep of %d nodes, %g in one of %d: grows with the nodes (by scope: %s | %s)",
				res, small.lists[res], len(tenth), big.lists[res], len(all), formatCounts(small.lists), formatCounts(big.lists))
		}
	}
	for _, res := range []string{"services", "endpointslices", "nodes"} {
		if n := big.lists[res]; n < 1 || n > 2 {
			t.Errorf("LIST %s: %g in a sweep of %d nodes, want 1 or 2", res, n, len(all))
		}
	}
	if big.maxRSSKiB > 2*small.maxRSSKiB {
		t.Errorf("max RSS %d MiB sweeping %d nodes, %d MiB sweeping %d: the plugin keeps per-node results", big.maxRSSKiB/1024, len(all), small.maxRSSKiB/1024, len(tenth))
	}
}

func equalLists(a, b map[string]float64) bool {
	for _, res := range []string{"services", "endpointslices", "nodes", "pods"} {
		if a[res] != b[res] {
			return false
		}
	}
	return true
}

// durations in a finding's message ("last sync 42s ago") differ between runs.
var durations = regexp.MustCompile(`\b\d+(\.\d+)?(ns|µs|ms|s|m|h)\b`)

// triageEssentials is what a node's triage says, for comparing two reports
// of the same node: kind, node, status, verdict, detected mode, the chain
// counts and the findings (severity, area, subject, title, message with its
// durations blanked), sorted.
func triageEssentials(b []byte) (string, error) {
	var r struct {
		Kind, Node, Status, Verdict string
		Mode                        struct{ Detected string }
		Chains                      map[string]any // marshalled again: sorted, one layout
		Findings                    []struct{ Severity, Area, Subject, Title, Message string }
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return "", fmt.Errorf("a triage report: %v\n%.300s", err, b)
	}
	var findings []string
	for _, f := range r.Findings {
		findings = append(findings, strings.Join([]string{f.Severity, f.Area, f.Subject, f.Title, durations.ReplaceAllString(f.Message, "DURATION")}, " | "))
	}
	sort.Strings(findings)
	chains, _ := json.Marshal(r.Chains)
	return fmt.Sprintf("kind %s node %s status %s verdict %q mode %q chains %s findings:\n\t%s",
		r.Kind, r.Node, r.Status, r.Verdict, r.Mode.Detected, chains, strings.Join(findings, "\n\t")), nil
}

// TestSweepMatchesSingleNode: each item of a sweep of node-a and node-b
// says what triage of that node alone says, and the sweep's exit status is
// the worse of theirs.
func TestSweepMatchesSingleNode(t *testing.T) {
	stableRules(t, nodes, func() []string {
		var diffs []string
		both := sweep(t, "triage", "--node", "node-a", "--node", "node-b", "-o", "json")
		t.Logf("%v", both)
		if both.code != 0 && both.code != 2 {
			t.Fatalf("%v\nstderr: %s", both, tail(both.stderr, 3000))
		}
		items := checkSweepCovers(t, both.list(t), nodes, "Triage")
		worst := 0
		for _, n := range nodes {
			single := runPlugin(t, nil, "triage", "--node", n, "-o", "json")
			if single.code != 0 && single.code != 2 {
				t.Fatalf("%v\n%s", single, single.stderr)
			}
			worst = max(worst, single.code)
			got, err := triageEssentials(items[n])
			if err != nil {
				t.Fatal(err)
			}
			want, err := triageEssentials([]byte(single.stdout))
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				diffs = append(diffs, fmt.Sprintf("%s: the sweep's item\n%s\ntriage --node %s alone\n%s", n, got, n, want))
			}
		}
		if both.code != worst {
			diffs = append(diffs, fmt.Sprintf("the sweep exits %d, the single-node runs at worst %d", both.code, worst))
		}
		noPodsWithin(t, 60*time.Second)
		return diffs
	})
}

// TestSweepTiming: 100 fake nodes swept with --parallel 10 against one
// node's time. The goal (issue 15) is 1.3 × (100/10 × one node's time).
// That ideal assumes the cores for ten reads at once; with fewer, a sweep
// cannot finish before the CPU it needs (the plugin's and the cluster's: API
// server, etcd, kwok and the commands it runs) spread over the cores. So the
// goal asserted is 1.3 × the larger of the ideal and that CPU floor (on a
// machine with the cores, exactly the goal), and, so that wasted
// CPU cannot hide in the floor, a node in the sweep may cost no more CPU
// than a single-node run. Times and ratios are logged for the README.
func TestSweepTiming(t *testing.T) {
	s := scaleCluster(t)
	waitSynced(t, markSync(t, s.netns), 0, 0)
	var ones []time.Duration
	var oneCPU time.Duration
	for _, i := range []int{1 % s.nodes, s.nodes / 2, s.nodes - 1} {
		c0 := clusterCPU(t)
		r := runPlugin(t, nil, "triage", "--node", s.node(i), "-o", "json")
		if r.code != 0 && r.code != 2 {
			t.Fatalf("%v\n%s", r, r.stderr)
		}
		ones = append(ones, r.took)
		oneCPU += clusterCPU(t) - c0 + r.cpu
	}
	noPodsWithin(t, 60*time.Second)
	sort.Slice(ones, func(i, j int) bool { return ones[i] < ones[j] })
	one, oneCPU := ones[1], oneCPU/time.Duration(len(ones))

	c0 := clusterCPU(t)
	r := sweep(t, "triage", "--node-selector", s.selector, "--parallel", fmt.Sprint(sweepParallel), "-o", "json")
	sweepCPU := clusterCPU(t) - c0 + r.cpu
	if r.code != 0 && r.code != 2 {
		t.Fatalf("%v\nstderr: %s", r, tail(r.stderr, 3000))
	}
	checkSweepCovers(t, r.list(t), nodeNames(t, s.selector), "Triage")
	if r.pods.maxLive > sweepParallel {
		t.Errorf("%d debug pods at once, want at most %d", r.pods.maxLive, sweepParallel)
	}

	n, cores := float64(s.nodes), float64(runtime.NumCPU())
	ideal := time.Duration(n / sweepParallel * float64(one))
	floor := time.Duration(float64(sweepCPU) / cores)
	bound := time.Duration(1.3 * float64(max(ideal, floor)))
	perNode := sweepCPU / time.Duration(s.nodes)
	t.Logf("one node: %s (median of %s), CPU %s (plugin and cluster)", one.Round(10*time.Millisecond), ones, oneCPU.Round(10*time.Millisecond))
	t.Logf("sweep of %d nodes --parallel %d: %s, CPU %s (%s a node), plugin max RSS %d MiB, %d pods at once at most",
		s.nodes, sweepParallel, r.took.Round(10*time.Millisecond), sweepCPU.Round(10*time.Millisecond),
		perNode.Round(time.Millisecond), r.maxRSSKiB/1024, r.pods.maxLive)
	t.Logf("ideal %d/%d × one node = %s: the sweep took %.2f × that (goal ≤ 1.3); CPU floor on %g cores %s (%.2f × ideal): the sweep took %.2f × the floor; bound asserted %s; one node after the other: %s",
		s.nodes, sweepParallel, ideal.Round(10*time.Millisecond), float64(r.took)/float64(ideal), cores,
		floor.Round(10*time.Millisecond), float64(floor)/float64(ideal), float64(r.took)/float64(floor), bound.Round(10*time.Millisecond),
		time.Duration(n*float64(one)).Round(100*time.Millisecond))
	if r.took > bound {
		t.Errorf("the sweep of %d nodes took %s, more than %s (1.3 × max(ideal %s, CPU floor %s))",
			s.nodes, r.took.Round(10*time.Millisecond), bound.Round(10*time.Millisecond), ideal.Round(10*time.Millisecond), floor.Round(10*time.Millisecond))
	}
	if perNode > oneCPU {
		t.Errorf("a node in the sweep cost %s of CPU, more than a single-node run's %s: the sweep wastes work per node", perNode.Round(time.Millisecond), oneCPU.Round(time.Millisecond))
	}
}

// TestSweepNodeFailures: a NotReady node and a node without kube-proxy do
// not stop a sweep: both are items of kind NodeError with their reason,
// every other node is read, and the sweep is incomplete (exit 3).
func TestSweepNodeFailures(t *testing.T) {
	s := scaleCluster(t)
	notReady, noProxy := s.prefix+"notready", s.prefix+"nokp"
	// The node without kube-proxy is a Windows node of the pool: kube-proxy's
	// DaemonSet (nodeSelector kubernetes.io/os: linux) does not run there.
	node := func(name string, managed bool) map[string]any {
		annotations := map[string]any{"kwok.x-k8s.io/node": "fake"}
		os := "windows"
		if managed {
			annotations["proxyrules.e2e/kwok"] = "scale" // the shared kwok's: Ready in a moment
		}
		if name == notReady {
			os = "linux"
		}
		return map[string]any{"apiVersion": "v1", "kind": "Node",
			"metadata": map[string]any{"name": name, "annotations": annotations,
				"labels": map[string]any{"kubernetes.io/hostname": name, "kubernetes.io/os": os, strings.SplitN(s.selector, "=", 2)[0]: "scale"}},
			"status": map[string]any{"addresses": []any{map[string]any{"type": "InternalIP", "address": clusterEnv["E2E_SUBNET"] + ".13"}}},
		}
	}
	// The NotReady node keeps its kube-proxy pod (Pending: no kubelet runs it).
	kp := map[string]any{"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "kube-proxy-notready", "namespace": "kube-system",
			"labels": map[string]any{"k8s-app": "kube-proxy", "proxyrules.e2e/proxy-pool": "scale"}},
		"spec": map[string]any{"nodeName": notReady, "hostNetwork": true, "serviceAccountName": "kube-proxy",
			"containers": []any{map[string]any{"name": "kube-proxy", "image": "registry.k8s.io/kube-proxy:v1.37.2"}},
			"volumes":    []any{map[string]any{"name": "kube-proxy", "configMap": map[string]any{"name": "kube-proxy-scale"}}}},
	}
	createObjects(t, node(notReady, false), node(noProxy, true), kp)
	defer func() {
		run(nil, "kubectl", "-n", "kube-system", "delete", "pod", "kube-proxy-notready", "--grace-period=0", "--force", "--wait=false")
		run(nil, "kubectl", "delete", "node", notReady, noProxy, "--wait=false")
	}()
	now := time.Now().UTC().Format(time.RFC3339)
	kubectl(t, "patch", "node", notReady, "--subresource=status", "--type=merge", "-p", fmt.Sprintf(
		`{"status":{"conditions":[{"type":"Ready","status":"False","reason":"KubeletNotReady","message":"container runtime network not ready","lastHeartbeatTime":%q,"lastTransitionTime":%q}]}}`, now, now))
	kubectl(t, "wait", "--for=condition=Ready", "node/"+noProxy, "--timeout=60s")

	r := sweep(t, "triage", "--node-selector", s.selector, "--parallel", fmt.Sprint(sweepParallel), "-o", "json")
	t.Logf("%v", r)
	if r.code != 3 {
		t.Errorf("exit %d, want 3 (incomplete: two nodes could not be read)\nstderr: %s\nstdout: %.4000s", r.code, tail(r.stderr, 3000), r.stdout)
	}
	l := r.list(t)
	kinds := map[string]string{notReady: "NodeError", noProxy: "NodeError"}
	for i := 0; i < s.nodes; i++ {
		kinds[s.node(i)] = "Triage"
	}
	items := checkSweepKinds(t, l, kinds)
	for _, want := range []struct{ node, reason, says string }{{notReady, "NotReady", "ready"}, {noProxy, "NoKubeProxy", "kube-proxy"}} {
		var h itemHead
		json.Unmarshal(items[want.node], &h)
		if h.Kind != "NodeError" || h.Reason != want.reason || !strings.Contains(strings.ToLower(h.Error), want.says) {
			t.Errorf("%s: kind %q reason %q error %q; want NodeError, %s, an error that says %q", want.node, h.Kind, h.Reason, h.Error, want.reason, want.says)
		}
	}
	if l.Summary.Failed != 2 || l.Summary.Status != "incomplete" || l.Summary.Nodes != s.nodes+2 {
		t.Errorf("summary: %d failed, status %q, %d nodes; want 2, incomplete, %d", l.Summary.Failed, l.Summary.Status, l.Summary.Nodes, s.nodes+2)
	}
	for _, row := range l.Summary.Rows {
		if failed := row.Node == notReady || row.Node == noProxy; failed != (row.Error != "") {
			t.Errorf("summary row %s: error %q", row.Node, row.Error)
		}
	}
}

// TestSweepCollectOffline: collect --all-nodes writes one bundle per node
// and the objects once; triage --from-bundle of that folder, with no
// cluster, is a sweep over its nodes that says what a live sweep says.
func TestSweepCollectOffline(t *testing.T) {
	scaleCluster(t)
	all := nodeNames(t, "")
	nowhere := filepath.Join(t.TempDir(), "nowhere.kubeconfig")
	attempt := 0
	stableRules(t, append(append([]string{}, nodes...), clusterEnv["E2E_SCALE_NETNS"]), func() []string {
		attempt++
		dir := filepath.Join(t.TempDir(), fmt.Sprintf("sweep-%d", attempt))
		c := sweep(t, "collect", "--all-nodes", "--parallel", fmt.Sprint(sweepParallel), "-d", dir)
		if c.code != 0 {
			t.Fatalf("%v\n%s%s", c, tail(c.stdout, 2000), tail(c.stderr, 2000))
		}
		checkSweepFolder(t, dir, all)
		t.Logf("%v: %s on disk", c, duSize(dir))

		off := runPlugin(t, nil, "triage", "--from-bundle", dir, "--kubeconfig", nowhere, "-o", "json")
		live := sweep(t, "triage", "--all-nodes", "--parallel", fmt.Sprint(sweepParallel), "-o", "json")
		t.Logf("%v; live: %v", off, live)
		if off.code != live.code {
			t.Errorf("triage --from-bundle exits %d, the live sweep %d\nstderr: %s", off.code, live.code, tail(off.stderr, 2000))
		}
		offItems := checkSweepCovers(t, off.list(t), all, "Triage")
		liveItems := checkSweepCovers(t, live.list(t), all, "Triage")
		var diffs []string
		for _, n := range all {
			var o, l itemHead
			json.Unmarshal(offItems[n], &o)
			json.Unmarshal(liveItems[n], &l)
			if o.Status != l.Status {
				diffs = append(diffs, fmt.Sprintf("%s: status %q from the bundle, %q live", n, o.Status, l.Status))
			}
		}
		return diffs
	})
}

// checkSweepFolder: DIR/sweep.json (kind Sweep) names every node,
// DIR/objects.json once, DIR/nodes/NODE/bundle.json per node without objects.
func checkSweepFolder(t *testing.T, dir string, all []string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "sweep.json"))
	if err != nil {
		t.Fatalf("collect --all-nodes: %v", err)
	}
	var sw struct {
		Kind        string
		CollectedAt string `json:"collectedAt"`
		Nodes       []map[string]any
	}
	if err := json.Unmarshal(b, &sw); err != nil || sw.Kind != "Sweep" || sw.CollectedAt == "" {
		t.Errorf("sweep.json: kind %q collectedAt %q (%v), want kind Sweep with a time\n%.500s", sw.Kind, sw.CollectedAt, err, b)
	}
	named := map[string]bool{}
	for _, n := range sw.Nodes {
		for _, k := range []string{"node", "name"} {
			if s, ok := n[k].(string); ok {
				named[s] = true
			}
		}
		if e, _ := n["error"].(string); e != "" {
			t.Errorf("sweep.json: %v", n)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "objects.json")); err != nil {
		t.Errorf("no objects.json in the sweep folder: %v", err)
	}
	for _, n := range all {
		if !named[n] {
			t.Errorf("sweep.json does not name %s", n)
		}
		if _, err := os.Stat(filepath.Join(dir, "nodes", n, "bundle.json")); err != nil {
			t.Errorf("no bundle for %s: %v", n, err)
		}
		if _, err := os.Stat(filepath.Join(dir, "nodes", n, "objects.json")); err == nil {
			t.Errorf("the bundle of %s has its own objects.json: the objects belong once in the folder", n)
		}
	}
}

func duSize(dir string) string {
	out, err := exec.Command("du", "-sh", dir).Output()
	if err != nil {
		return "?"
	}
	return strings.Fields(string(out))[0]
}

// TestSweepExplain: explain svc/NAME --all-nodes answers per node, reading
// only the Service's chains on the iptables nodes, and groups the nodes that
// agree: the fake nodes, which share one ruleset, all in one group.
func TestSweepExplain(t *testing.T) {
	s := scaleCluster(t)
	all := nodeNames(t, "")
	const svc = "clusterip"
	r := sweep(t, "explain", "svc/"+svc, "-n", nsScenario, "--all-nodes", "-o", "json")
	t.Logf("%v: %d debug pods at most at once", r, r.pods.maxLive)
	if r.code != 0 {
		t.Errorf("%v, want 0 (the Service is programmed as its slices say everywhere)\nstderr: %s\nstdout: %.4000s", r, tail(r.stderr, 3000), r.stdout)
	}
	if r.pods.maxLive > 5 {
		t.Errorf("%d debug pods at once, want at most the default --parallel 5", r.pods.maxLive)
	}
	var l struct {
		Kind    string
		Items   []json.RawMessage
		Summary struct {
			Groups []struct{ Nodes []string }
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &l); err != nil || l.Kind != "List" {
		t.Fatalf("explain --all-nodes -o json: kind %q, %v\n%.500s", l.Kind, err, r.stdout)
	}
	seen := map[string]bool{}
	for _, raw := range l.Items {
		var e struct {
			Kind, Node, Namespace, Name string
			Collection                  *collection
		}
		json.Unmarshal(raw, &e)
		if e.Kind != "ServiceExplanation" || e.Namespace != nsScenario || e.Name != svc || seen[e.Node] {
			t.Errorf("item: kind %q node %q service %s/%s (seen before: %v)", e.Kind, e.Node, e.Namespace, e.Name, seen[e.Node])
		}
		seen[e.Node] = true
		if e.Collection == nil {
			t.Errorf("%s: the explanation says nothing of its collection", e.Node)
			continue
		}
		if e.Node == "node-b" {
			continue // nftables: the table is read whole
		}
		if e.Collection.Scope != "service "+nsScenario+"/"+svc {
			t.Errorf("%s: collected %q, want only the Service's chains", e.Node, e.Collection.Scope)
		}
	}
	for _, n := range all {
		if !seen[n] {
			t.Errorf("no explanation for %s", n)
		}
	}
	group := map[string]int{}
	for i, g := range l.Summary.Groups {
		for _, n := range g.Nodes {
			if _, dup := group[n]; dup {
				t.Errorf("%s in two groups", n)
			}
			group[n] = i
		}
	}
	if len(group) != len(all) {
		t.Errorf("the groups hold %d nodes, want all %d: %+v", len(group), len(all), l.Summary.Groups)
	}
	for i := 1; i < s.nodes; i++ {
		if g, ok := group[s.node(i)]; !ok || g != group[s.node(0)] {
			t.Errorf("%s is not in the group of %s: they share one ruleset", s.node(i), s.node(0))
			break
		}
	}
	t.Logf("explain svc/%s: %d groups", svc, len(l.Summary.Groups))
}

// nodeDiff is `diff -o json` (kind NodeDiff).
type nodeDiff struct {
	Kind         string
	Same         int // Service ports programmed alike
	Status       string
	ServicePorts []struct {
		ServicePort  string `json:"servicePort"`
		Family       string
		OnlyA, OnlyB []json.RawMessage
	} `json:"servicePorts"`
}

func runDiff(t *testing.T, a, b string, wantCode int) nodeDiff {
	t.Helper()
	r := runPlugin(t, nil, "diff", a, b, "-o", "json")
	noPodsWithin(t, 60*time.Second)
	var d nodeDiff
	if err := json.Unmarshal([]byte(r.stdout), &d); err != nil || d.Kind != "NodeDiff" {
		t.Fatalf("%v: kind %q, %v\n%.500s\nstderr: %s", r, d.Kind, err, r.stdout, tail(r.stderr, 2000))
	}
	if r.code != wantCode || (len(d.ServicePorts) == 0) != (wantCode == 0) || d.Status != map[bool]string{true: "healthy", false: "problems"}[wantCode == 0] {
		t.Errorf("%v: status %q, %d service ports differ; want exit %d\n%s", r, d.Status, len(d.ServicePorts), wantCode, tail(r.stdout, 3000))
	}
	if d.Same == 0 {
		t.Errorf("%v: no Service port programmed alike on both sides (the scenario's Services are on every node)", r)
	}
	var ports []string
	for _, sp := range d.ServicePorts {
		ports = append(ports, fmt.Sprintf("%s (%s: %d only in A, %d only in B)", sp.ServicePort, sp.Family, len(sp.OnlyA), len(sp.OnlyB)))
	}
	t.Logf("%v: %s", r, strings.Join(ports, "; "))
	return d
}

// TestSweepDiff: diff by Service port, live between two nodes and between
// two bundles of one node around a scale change of a Service.
func TestSweepDiff(t *testing.T) {
	// node-a and node-b: the Local-policy Service's local endpoints differ.
	d := runDiff(t, "node-a", "node-b", 2)
	found := false
	for _, sp := range d.ServicePorts {
		if sp.ServicePort == nsScenario+"/etp-local:http" {
			found = len(sp.OnlyA)+len(sp.OnlyB) > 0
		}
	}
	if !found {
		t.Errorf("diff node-a node-b: no difference for %s/etp-local:http, whose local endpoints differ", nsScenario)
	}
	if n, _ := strconv.Atoi(clusterEnv["E2E_SCALE_NODES"]); n >= 2 {
		p := clusterEnv["E2E_SCALE_PREFIX"]
		runDiff(t, p+"000", p+"001", 0) // two fake nodes, one ruleset: no difference
	}

	// Two bundles of node-a, around a scale-up of a Service from 2 to 4 endpoints.
	const ns = "e2e-sweep"
	web := svcDef{ns: ns, name: "web", ports: []svcPort{{name: "http", port: 80, target: 8080, proto: "TCP"}},
		eps: []endpoint{{ip: "10.244.90.1"}, {ip: "10.244.90.2"}}}
	mark := markSync(t, "node-a")
	createObjects(t, append(namespaceObjects(ns), serviceObject(web), sliceObject(web))...)
	waitSynced(t, mark, 1, 1)
	dir := t.TempDir()
	collect := func(name string) string {
		p := filepath.Join(dir, name)
		if out, errOut, code := plugin(t, "collect", "--node", "node-a", "-d", p); code != 0 {
			t.Fatalf("collect: exit %d\n%s%s", code, out, errOut)
		}
		return p
	}
	before := collect("before.tar.gz")
	mark = markSync(t, "node-a")
	web.eps = append(web.eps, endpoint{ip: "10.244.90.3"}, endpoint{ip: "10.244.90.4"})
	patch, _ := json.Marshal([]any{map[string]any{"op": "replace", "path": "/endpoints", "value": endpointObjects(web.eps)}})
	kubectl(t, "-n", ns, "patch", "endpointslice", sliceName(web), "--type=json", "-p", string(patch))
	waitSynced(t, mark, 0, 1)
	after := collect("after.tar.gz")

	d = runDiff(t, before, after, 2)
	if len(d.ServicePorts) != 1 || d.ServicePorts[0].ServicePort != ns+"/web:http" {
		t.Fatalf("diff of the bundles: %d service ports, want only %s/web:http", len(d.ServicePorts), ns)
	}
	onlyAfter, _ := json.Marshal(d.ServicePorts[0].OnlyB)
	for _, ip := range []string{"10.244.90.3", "10.244.90.4"} {
		if !strings.Contains(string(onlyAfter), ip) {
			t.Errorf("diff of the bundles: the new endpoint %s is not among what only the later bundle has: %s", ip, onlyAfter)
		}
	}
	// The same bundle under two names: nothing differs. (The same path
	// twice is refused as a mistake.)
	same := filepath.Join(dir, "before-copy.tar.gz")
	if b, err := os.ReadFile(before); err != nil || os.WriteFile(same, b, 0o600) != nil {
		t.Fatalf("copying %s: %v", before, err)
	}
	runDiff(t, before, same, 0)
	if _, errOut, code := plugin(t, "diff", before, before); code != 1 || !strings.Contains(errOut, "a diff needs two") {
		t.Errorf("diff of one bundle with itself: exit %d, %q; want exit 1 saying a diff needs two", code, errOut)
	}
}
