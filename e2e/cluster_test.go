//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// clusterEnv holds what up.sh wrote into its env file (KUBECONFIG, E2E_*).
var clusterEnv = map[string]string{}

// loadClusterEnv reads the env file, exports it, and puts the plugin's bin
// directory and then the cluster's kubectl first on PATH, as a user would have.
func loadClusterEnv() error {
	b, err := os.ReadFile(os.Getenv(envFile))
	if err != nil {
		return fmt.Errorf("reading the cluster env file: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			clusterEnv[k] = v
			os.Setenv(k, v)
		}
	}
	os.Setenv("PATH", os.Getenv(binEnv)+string(os.PathListSeparator)+clusterEnv["E2E_K8S_BIN"]+
		string(os.PathListSeparator)+os.Getenv("PATH"))
	os.Setenv("NO_COLOR", "1")
	return nil
}

// run runs a command, stdin from stdin, and returns stdout; the error carries stderr.
func run(stdin []byte, name string, args ...string) ([]byte, error) {
	cmd := exec.Command(name, args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return out.Bytes(), fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(errOut.Bytes()))
	}
	return out.Bytes(), nil
}

func mustRun(t testing.TB, stdin []byte, name string, args ...string) []byte {
	t.Helper()
	out, err := run(stdin, name, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func kubectl(t testing.TB, args ...string) []byte {
	t.Helper()
	return mustRun(t, nil, "kubectl", args...)
}

// inNode runs a command in a node's network namespace, as root on the node would.
func inNode(node string, name string, args ...string) ([]byte, error) {
	return run(nil, "ip", append([]string{"netns", "exec", node, name}, args...)...)
}

// createObjects sends objects to the cluster in one `kubectl create`.
func createObjects(t testing.TB, objs ...any) {
	t.Helper()
	list := map[string]any{"apiVersion": "v1", "kind": "List", "items": objs}
	b, err := json.Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	mustRun(t, b, "kubectl", "create", "-f", "-")
}

// --- kube-proxy's metrics --------------------------------------------------------

// metrics are the samples of kube-proxy's /metrics on a node, by
// `name{labels}` exactly as printed (labels sorted, as Prometheus prints them).
type metrics map[string]float64

func (m metrics) get(name string, labels ...string) (float64, bool) {
	key := name
	if len(labels) > 0 {
		key += "{" + strings.Join(labels, ",") + "}"
	}
	v, ok := m[key]
	return v, ok
}

// families are the ip_family values kube-proxy reports sync timestamps for.
func (m metrics) families() []string {
	var fams []string
	for k := range m {
		if rest, ok := strings.CutPrefix(k, "kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family=\""); ok {
			fams = append(fams, strings.TrimSuffix(rest, "\"}"))
		}
	}
	return fams
}

func readMetrics(node string) (metrics, error) {
	out, err := inNode(node, "curl", "-fsS", "--max-time", "5", "http://127.0.0.1:10249/metrics")
	if err != nil {
		return nil, err
	}
	return parseMetrics(out), nil
}

func parseMetrics(b []byte) metrics {
	m := metrics{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			m[line[:i]] = v
		}
	}
	return m
}

// syncMark is where kube-proxy's change counters stood before a change.
type syncMark struct {
	node            string
	svcTotal, epTot float64
	families        int
}

func markSync(t testing.TB, node string) syncMark {
	t.Helper()
	m, err := readMetrics(node)
	if err != nil {
		t.Fatalf("kube-proxy metrics on %s: %v", node, err)
	}
	svc, _ := m.get("kubeproxy_sync_proxy_rules_service_changes_total")
	ep, _ := m.get("kubeproxy_sync_proxy_rules_endpoint_changes_total")
	return syncMark{node: node, svcTotal: svc, epTot: ep, families: len(m.families())}
}

// waitSynced waits until kube-proxy on the node has seen svcEvents Service
// events and sliceEvents (IPv4) EndpointSlice events since mark, has none
// pending, and has finished a sync after the last one it queued, per family.
// Every proxier of a dual-stack kube-proxy counts each Service event; only
// the IPv4 one counts IPv4 slices.
func waitSynced(t testing.TB, mark syncMark, svcEvents, sliceEvents int) {
	t.Helper()
	start := time.Now()
	var why string
	for time.Since(start) < 90*time.Second {
		why = syncedYet(mark, svcEvents, sliceEvents)
		if why == "" {
			t.Logf("kube-proxy on %s synced %d Service and %d EndpointSlice events in %s",
				mark.node, svcEvents, sliceEvents, time.Since(start).Round(10*time.Millisecond))
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("kube-proxy on %s did not sync within 90 s: %s (log: %s)", mark.node, why,
		filepath.Join(clusterEnv["E2E_LOGS"], "kube-proxy-"+mark.node+".log"))
}

func syncedYet(mark syncMark, svcEvents, sliceEvents int) string {
	m, err := readMetrics(mark.node)
	if err != nil {
		return err.Error()
	}
	svc, _ := m.get("kubeproxy_sync_proxy_rules_service_changes_total")
	ep, _ := m.get("kubeproxy_sync_proxy_rules_endpoint_changes_total")
	if want := mark.svcTotal + float64(svcEvents*mark.families); svc < want {
		return fmt.Sprintf("service_changes_total %v < %v", svc, want)
	}
	if want := mark.epTot + float64(sliceEvents); ep < want {
		return fmt.Sprintf("endpoint_changes_total %v < %v", ep, want)
	}
	for _, g := range []string{"kubeproxy_sync_proxy_rules_service_changes_pending", "kubeproxy_sync_proxy_rules_endpoint_changes_pending"} {
		if v, _ := m.get(g); v != 0 {
			return fmt.Sprintf("%s = %v", g, v)
		}
	}
	for _, fam := range m.families() {
		l := `ip_family="` + fam + `"`
		last, _ := m.get("kubeproxy_sync_proxy_rules_last_timestamp_seconds", l)
		queued, _ := m.get("kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds", l)
		if last < queued {
			return fmt.Sprintf("%s: last sync %.3f before last queued %.3f", fam, last, queued)
		}
	}
	return ""
}

// eventually retries check every 200 ms for up to 30 s.
func eventually(t testing.TB, what string, check func() error) {
	t.Helper()
	var err error
	for start := time.Now(); time.Since(start) < 30*time.Second; time.Sleep(200 * time.Millisecond) {
		if err = check(); err == nil {
			return
		}
	}
	t.Fatalf("%s: %v", what, err)
}

// --- dumps ----------------------------------------------------------------------

var (
	saveCounters = regexp.MustCompile(`\[\d+:\d+\]`)
)

// normalizeSave drops the comment lines (with their dates) of iptables-save
// output and zeroes the chain counters.
func normalizeSave(b []byte) string {
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		out = append(out, saveCounters.ReplaceAllString(line, "[0:0]"))
	}
	return strings.Join(out, "\n")
}

// writeTemp writes b into the test's temp dir and returns the path.
func writeTemp(t testing.TB, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
