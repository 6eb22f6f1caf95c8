//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// The scale mode of the cluster (hack/e2e/up.sh, E2E_SCALE_NODES): fake
// nodes scale-000 … managed by one kwok in the shared namespace pr-scale,
// where one real kube-proxy (iptables mode, hostnameOverride scale-000)
// programs the rules every one of them shows. Helpers for the sweep tests.

// scaleMode is what up.sh wrote about the fake nodes into its env file.
type scaleMode struct {
	nodes      int    // how many fake nodes
	netns      string // their shared network namespace
	selector   string // a label selector matching all of them
	groupLabel string // label whose value i%10 selects a tenth of them
	prefix     string // their names: prefix + %03d
}

// scaleCluster returns the scale mode, or skips the test when the cluster
// was brought up without it (E2E_SCALE_NODES=0): the only reason to skip.
func scaleCluster(t *testing.T) scaleMode {
	t.Helper()
	n, err := strconv.Atoi(clusterEnv["E2E_SCALE_NODES"])
	if err != nil || n == 0 || clusterEnv["E2E_SCALE_NETNS"] == "" {
		t.Skipf("the cluster has no fake nodes (E2E_SCALE_NODES=%q): bring it up in scale mode (the default, E2E_SCALE_NODES=100)", clusterEnv["E2E_SCALE_NODES"])
	}
	return scaleMode{nodes: n, netns: clusterEnv["E2E_SCALE_NETNS"], selector: clusterEnv["E2E_SCALE_SELECTOR"],
		groupLabel: clusterEnv["E2E_SCALE_GROUP_LABEL"], prefix: clusterEnv["E2E_SCALE_PREFIX"]}
}

func (s scaleMode) node(i int) string { return fmt.Sprintf("%s%03d", s.prefix, i) }

// group returns the selector of the fake nodes i with i%10 == g, and their names.
func (s scaleMode) group(g int) (selector string, names []string) {
	for i := g; i < s.nodes; i += 10 {
		names = append(names, s.node(i))
	}
	return fmt.Sprintf("%s=%d", s.groupLabel, g), names
}

// nodeNames lists the cluster's nodes (matching selector, when given), sorted.
func nodeNames(t *testing.T, selector string) []string {
	t.Helper()
	args := []string{"get", "nodes", "-o", "jsonpath={range .items[*]}{.metadata.name}{\"\\n\"}{end}"}
	if selector != "" {
		args = append(args, "-l", selector)
	}
	names := strings.Fields(string(kubectl(t, args...)))
	sort.Strings(names)
	return names
}

// --- the sweep's output (the CLI contract: README, "Sweeps") ---------------------

// sweepList is `-o json` of a sweep; items are decoded by the caller.
type sweepList struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Items      []json.RawMessage `json:"items"`
	Summary    sweepSummary      `json:"summary"`
}

type sweepSummary struct {
	Kind   string `json:"kind"`
	Nodes  int    `json:"nodes"`
	Failed int    `json:"failed"`
	Status string `json:"status"`
	Rows   []struct {
		Node, Status, Error string
		Seconds             float64
	} `json:"rows"`
	Causes []struct {
		Title, Severity string
		Nodes           []string
	} `json:"causes"`
}

// itemHead is what every item of a sweep has: its kind and node, and, for
// a node that could not be read, the error and its reason.
type itemHead struct {
	APIVersion, Kind, Node string
	Status                 string
	Error, Reason          string
}

func (l sweepList) heads(t *testing.T) []itemHead {
	t.Helper()
	var hs []itemHead
	for i, raw := range l.Items {
		var h itemHead
		if err := json.Unmarshal(raw, &h); err != nil {
			t.Fatalf("item %d: %v\n%.300s", i, err, raw)
		}
		hs = append(hs, h)
	}
	return hs
}

// byNode maps each item's node to the item, failing on a node seen twice.
func (l sweepList) byNode(t *testing.T) map[string]json.RawMessage {
	t.Helper()
	out := map[string]json.RawMessage{}
	for i, h := range l.heads(t) {
		if h.Node == "" {
			t.Errorf("item %d (kind %s) names no node", i, h.Kind)
			continue
		}
		if _, dup := out[h.Node]; dup {
			t.Errorf("node %s has two items", h.Node)
		}
		out[h.Node] = l.Items[i]
	}
	return out
}

// --- running a sweep, watching its debug pods -------------------------------------

// sweepRun is one run of the plugin and what it did on the cluster.
type sweepRun struct {
	args           []string
	stdout, stderr string
	code           int
	took           time.Duration
	ended          time.Time
	cpu            time.Duration // the plugin's own CPU time
	maxRSSKiB      int64
	pods           podStats
	lists          map[string]float64 // LIST requests the API server served meanwhile (listDelta)
}

func (r sweepRun) String() string {
	return fmt.Sprintf("kubectl proxyrules %s: exit %d in %s", strings.Join(r.args, " "), r.code, r.took.Round(10*time.Millisecond))
}

// list decodes the run's `-o json` output as a sweep.
func (r sweepRun) list(t *testing.T) sweepList {
	t.Helper()
	var l sweepList
	if err := json.Unmarshal([]byte(r.stdout), &l); err != nil {
		t.Fatalf("%v: -o json is not one JSON document: %v\nstdout: %.500s\nstderr: %.2000s", r, err, r.stdout, r.stderr)
	}
	if l.Kind != "List" || l.APIVersion != "proxyrules.kubectl.io/v1alpha1" || l.Summary.Kind != "SweepSummary" {
		t.Fatalf("%v: kind %q apiVersion %q summary kind %q, want a proxyrules.kubectl.io/v1alpha1 List with a SweepSummary\nstderr: %.2000s",
			r, l.Kind, l.APIVersion, l.Summary.Kind, r.stderr)
	}
	return l
}

// sweep runs `kubectl proxyrules ARGS` while watching the plugin's debug
// pods and counting the API server's LIST requests, then checks that it
// left no pod: none undeleted when it exits, none at all within 60 s (kwok
// removes a deleted pod in a moment).
func sweep(t *testing.T, args ...string) sweepRun {
	t.Helper()
	w := watchDebugPods(t)
	before := apiRequests(t)
	r := runPlugin(t, nil, args...)
	r.lists = listDelta(before, apiRequests(t))
	var err error
	if r.pods, err = w.stop(); err != nil {
		t.Fatalf("%v: %v (the count of debug pods would be short)", r, err)
	}
	if live := r.pods.live; len(live) > 0 {
		t.Errorf("%v: %d debug pods not deleted when it exited: %s", r, len(live), strings.Join(live, ", "))
	}
	noPodsWithin(t, 60*time.Second)
	return r
}

// runPlugin runs `kubectl proxyrules ARGS`; when started is given it is
// called with the running command (to signal it).
func runPlugin(t testing.TB, started func(*exec.Cmd), args ...string) sweepRun {
	t.Helper()
	r := sweepRun{args: args}
	cmd := exec.Command("kubectl", append([]string{"proxyrules"}, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if started != nil {
		started(cmd)
	}
	err := cmd.Wait()
	r.ended = time.Now()
	r.took = r.ended.Sub(start)
	var exitErr *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exitErr):
		r.code = exitErr.ExitCode()
	default:
		t.Fatalf("kubectl proxyrules %s: %v", strings.Join(args, " "), err)
	}
	// kubectl execs the plugin in its own process: these are the plugin's.
	r.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.maxRSSKiB = ru.Maxrss
	}
	r.stdout, r.stderr = out.String(), errOut.String()
	if strings.Contains(r.stderr, "Error closing listener") {
		t.Errorf("kubectl proxyrules %s: client-go's port-forward log on stderr:\n%s", strings.Join(args, " "), tail(r.stderr, 2000))
	}
	return r
}

// exited reports whether the process has exited (a zombie not reaped yet).
func exited(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(stat)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) == 0 || f[0] == "Z" || f[0] == "X"
}

// noPodsWithin fails unless every debug pod is gone within d.
func noPodsWithin(t *testing.T, d time.Duration) {
	t.Helper()
	var out string
	for start := time.Now(); time.Since(start) < d; time.Sleep(250 * time.Millisecond) {
		out = strings.TrimSpace(string(kubectl(t, "get", "pods", "-A", "-l", debugPodLabel, "-o", "name")))
		if out == "" {
			return
		}
	}
	t.Errorf("debug pods still there %s after the run:\n%s", d, out)
	run(nil, "kubectl", "delete", "pods", "-A", "-l", debugPodLabel, "--grace-period=0", "--force", "--wait=false")
}

// podStats is what a watch of the debug pods saw.
type podStats struct {
	maxLive     int             // most pods at once that existed and were not being deleted
	maxExisting int             // most pods at once, those being deleted included
	created     int             // pods that appeared
	nodes       map[string]bool // the nodes they ran on
	live        []string        // pods not deleted when the watch stopped
}

type podWatcher struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	stats  podStats
	err    error
}

func apiClient(t *testing.T) *kubernetes.Clientset {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// watchDebugPods lists the plugin's pods (in every namespace) and watches
// them from that list's resourceVersion on, so that no pod is missed.
func watchDebugPods(t *testing.T) *podWatcher {
	t.Helper()
	cs := apiClient(t)
	ctx, cancel := context.WithCancel(context.Background())
	opts := metav1.ListOptions{LabelSelector: debugPodLabel}
	list, err := cs.CoreV1().Pods("").List(ctx, opts)
	if err != nil {
		cancel()
		t.Fatalf("listing debug pods: %v", err)
	}
	opts.ResourceVersion = list.ResourceVersion
	opts.AllowWatchBookmarks = true
	wi, err := cs.CoreV1().Pods("").Watch(ctx, opts)
	if err != nil {
		cancel()
		t.Fatalf("watching debug pods: %v", err)
	}
	w := &podWatcher{cancel: cancel, done: make(chan struct{}), stats: podStats{nodes: map[string]bool{}}}
	existing := map[string]bool{} // key → being deleted
	key := func(p *corev1.Pod) string { return p.Namespace + "/" + p.Name + "/" + string(p.UID) }
	seen := map[string]bool{}
	observe := func(typ watch.EventType, p *corev1.Pod) {
		w.mu.Lock()
		defer w.mu.Unlock()
		k := key(p)
		if typ == watch.Deleted {
			delete(existing, k)
		} else {
			existing[k] = p.DeletionTimestamp != nil
			if !seen[k] {
				seen[k] = true
				w.stats.created++
			}
			if p.Spec.NodeName != "" {
				w.stats.nodes[p.Spec.NodeName] = true
			}
		}
		liveNow := 0
		for _, deleting := range existing {
			if !deleting {
				liveNow++
			}
		}
		w.stats.maxLive = max(w.stats.maxLive, liveNow)
		w.stats.maxExisting = max(w.stats.maxExisting, len(existing))
	}
	for i := range list.Items {
		observe(watch.Added, &list.Items[i])
	}
	go func() {
		defer close(w.done)
		for ev := range wi.ResultChan() {
			switch ev.Type {
			case watch.Added, watch.Modified, watch.Deleted:
				if p, ok := ev.Object.(*corev1.Pod); ok {
					observe(ev.Type, p)
				}
			case watch.Error:
				if ctx.Err() == nil { // not the end of a watch we stopped
					w.mu.Lock()
					w.err = fmt.Errorf("watch error: %v", ev.Object)
					w.mu.Unlock()
				}
			}
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		if ctx.Err() == nil {
			w.err = errors.New("the watch of debug pods ended early")
		}
		for k, deleting := range existing {
			if !deleting {
				w.stats.live = append(w.stats.live, k)
			}
		}
	}()
	t.Cleanup(cancel)
	return w
}

// stop ends the watch and returns what it saw, or why the watch broke.
func (w *podWatcher) stop() (podStats, error) {
	time.Sleep(500 * time.Millisecond) // the last events of the run
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stats, w.err
}

// --- kube-apiserver's request counters --------------------------------------------

var requestSample = regexp.MustCompile(`^apiserver_request_total\{(.*)\} (\S+)$`)
var labelPair = regexp.MustCompile(`(\w+)="([^"]*)"`)

// apiRequests reads kube-apiserver's /metrics: apiserver_request_total
// summed by "VERB resource scope" (e.g. "LIST pods namespace").
func apiRequests(t *testing.T) map[string]float64 {
	t.Helper()
	out := kubectl(t, "get", "--raw", "/metrics")
	sums := map[string]float64{}
	for _, line := range strings.Split(string(out), "\n") {
		m := requestSample.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		labels := map[string]string{}
		for _, kv := range labelPair.FindAllStringSubmatch(m[1], -1) {
			labels[kv[1]] = kv[2]
		}
		v, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			continue
		}
		sums[labels["verb"]+" "+labels["resource"]+" "+labels["scope"]] += v
	}
	if len(sums) == 0 {
		t.Fatalf("kube-apiserver's /metrics has no apiserver_request_total samples:\n%.500s", out)
	}
	return sums
}

// listDelta: the LIST requests per resource (summed over scopes, and by
// scope) between two readings, for the resources a sweep reads.
func listDelta(before, after map[string]float64) map[string]float64 {
	d := map[string]float64{}
	for k, v := range after {
		verb, rest, _ := strings.Cut(k, " ")
		resource, scope, _ := strings.Cut(rest, " ")
		if verb != "LIST" {
			continue
		}
		switch resource {
		case "services", "endpointslices", "nodes", "pods":
			if diff := v - before[k]; diff != 0 {
				d[resource] += diff
				d[resource+" ("+scope+")"] += diff
			}
		}
	}
	return d
}

func formatCounts(m map[string]float64) string {
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s=%g", k, m[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// --- CPU the cluster spends ------------------------------------------------------

// clusterCPU is the CPU time the cluster's processes (and the children they
// waited for: kwok's execs) have used so far, from /proc (USER_HZ = 100).
func clusterCPU(t *testing.T) time.Duration {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(clusterEnv["E2E_RUN"], "pids", "*.pid"))
	var ticks int64
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		fs := strings.Fields(string(b))
		if len(fs) == 0 {
			continue
		}
		stat, err := os.ReadFile("/proc/" + fs[0] + "/stat")
		if err != nil {
			continue
		}
		s := string(stat)
		s = s[strings.LastIndexByte(s, ')')+2:]   // the fields after the command name
		f := strings.Fields(s)                    // f[0] is field 3 (state)
		for _, i := range []int{11, 12, 13, 14} { // utime stime cutime cstime: fields 14-17
			v, _ := strconv.ParseInt(f[i], 10, 64)
			ticks += v
		}
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}

// --- the nodes' rules ------------------------------------------------------------

var nftCounter = regexp.MustCompile(`counter packets \d+ bytes \d+`)

// rulesFingerprint is a hash of the rules in a network namespace (both
// families, counters and dates left out): equal while kube-proxy changes nothing.
func rulesFingerprint(t *testing.T, netns string) string {
	t.Helper()
	h := sha256.New()
	for _, cmd := range [][]string{{"iptables-save"}, {"ip6tables-save"}, {"nft", "list", "ruleset"}} {
		out, err := inNode(netns, cmd[0], cmd[1:]...)
		if err != nil {
			t.Fatalf("reading the rules in %s: %v", netns, err)
		}
		h.Write([]byte(nftCounter.ReplaceAllString(normalizeSave(out), "")))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// stableRules runs compare, which returns the differences it found between
// runs of the plugin, until the rules of the given namespaces were the same
// before and after it (kube-proxy on node-b finishes a deletion on its next
// periodic sync, up to 30 s after a change), at most 3 times; then reports
// the differences of that last run.
func stableRules(t *testing.T, netns []string, compare func() []string) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		before := map[string]string{}
		for _, n := range netns {
			before[n] = rulesFingerprint(t, n)
		}
		diffs := compare()
		var changed []string
		for _, n := range netns {
			if rulesFingerprint(t, n) != before[n] {
				changed = append(changed, n)
			}
		}
		if len(changed) == 0 {
			for _, d := range diffs {
				t.Error(d)
			}
			return
		}
		if attempt == 3 {
			t.Fatalf("the rules in %s changed during each of 3 attempts", strings.Join(changed, ", "))
		}
		t.Logf("attempt %d: the rules in %s changed meanwhile (%d differences): again", attempt, strings.Join(changed, ", "), len(diffs))
	}
}

// failedItems lists the rows of a sweep's summary that are not a node's
// verdict (nodes that could not be read, or not checked), for a failure's
// message.
func failedItems(stdout string) string {
	var l sweepList
	if err := json.Unmarshal([]byte(stdout), &l); err != nil {
		return fmt.Sprintf("(stdout is no List: %v)", err)
	}
	var out []string
	for _, row := range l.Summary.Rows {
		if row.Error != "" || row.Status != "healthy" && row.Status != "problems" {
			out = append(out, fmt.Sprintf("%s: %s %s", row.Node, row.Status, row.Error))
		}
	}
	return strings.Join(out, "; ")
}
