//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The live benchmark (make bench-live, issue 33): the big cluster of the
// README's "Reading a node live, at scale" loaded into the e2e cluster, and
// each live command timed end to end, split into the phases --timings
// reports, next to the node's own read of its rules. Not part of make
// test: it takes minutes and measures, it does not judge.

const (
	nsBench        = "e2e-bench"
	benchServices  = 5000
	benchEndpoints = 20
)

// benchObjects are benchServices Services of one port, each with one
// EndpointSlice of benchEndpoints endpoints on no node of ours (addresses
// of 10.248.0.0/14, which nothing routes): large-cluster mode on every node.
func benchObjects() []any {
	var objs []any
	for i := 0; i < benchServices; i++ {
		var eps []endpoint
		for j := 0; j < benchEndpoints; j++ {
			n := i*benchEndpoints + j + 1
			eps = append(eps, endpoint{ip: fmt.Sprintf("10.%d.%d.%d", 248+n>>16, n>>8&255, n&255)})
		}
		d := svcDef{ns: nsBench, name: fmt.Sprintf("big-%04d", i), ports: []svcPort{{name: "http", port: 80, target: 8080, proto: "TCP"}}, eps: eps}
		objs = append(objs, serviceObject(d), sliceObject(d))
	}
	return objs
}

// loadBench creates the objects in parallel kubectl creates and waits
// until kube-proxy on each node has synced them.
func loadBench(t *testing.T) {
	if out, err := run(nil, "kubectl", "get", "namespace", nsBench); err == nil && len(out) > 0 {
		t.Logf("%s exists: reusing it", nsBench)
		return
	}
	marks := markAll(t)
	start := time.Now()
	createObjects(t, namespaceObjects(nsBench)...)
	objs := benchObjects()
	const parts = 8
	var wg sync.WaitGroup
	for p := 0; p < parts; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			var part []any
			for i := p * 2; i < len(objs); i += parts * 2 {
				part = append(part, objs[i], objs[i+1])
			}
			b, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": part})
			if err == nil {
				_, err = run(b, "kubectl", "create", "-f", "-")
			}
			if err != nil {
				t.Errorf("creating part %d of the big cluster: %v", p, err)
			}
		}(p)
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("created %d Services and EndpointSlices in %s", benchServices, time.Since(start).Round(time.Second))
	for _, n := range nodes {
		var why string
		for begun := time.Now(); time.Since(begun) < 15*time.Minute; time.Sleep(time.Second) {
			if why = syncedYet(marks[n], benchServices, benchServices); why == "" {
				break
			}
		}
		if why != "" {
			t.Fatalf("kube-proxy on %s did not sync the big cluster: %s", n, why)
		}
		t.Logf("kube-proxy on %s synced %d Services at %s", n, benchServices, time.Since(start).Round(time.Second))
	}
}

// phaseTimes are one run's seconds per --timings phase (summed where a
// phase ran more than once), "wall" the whole process as waited for.
type phaseTimes map[string]float64

// parseTimings reads the --timings lines of stderr.
func parseTimings(stderr string) phaseTimes {
	pt := phaseTimes{}
	for _, line := range strings.Split(stderr, "\n") {
		f := strings.Fields(strings.TrimPrefix(line, "timings:"))
		if !strings.HasPrefix(line, "timings:") || len(f) < 2 || f[0] == "phase" {
			continue
		}
		took := f[len(f)-1]
		if f[0] != "total" {
			took = f[2]
		}
		if s, err := strconv.ParseFloat(strings.TrimSuffix(took, "s"), 64); err == nil {
			pt[f[0]] += s
		}
	}
	return pt
}

// benchRow is one command or raw read, its runs.
type benchRow struct {
	node, what string
	runs       []phaseTimes
}

var benchPhases = []string{"wall", "api", "list-objects", "pod-start", "probe", "read", "metrics", "kernel", "parse", "analyse", "render", "pod-delete"}

// TestLiveBench times the live commands on the big cluster (make
// bench-live; E2E_LIVE_BENCH_ROUNDS rounds, default 3; E2E_LIVE_BENCH_BASE
// an older build to time alongside) and writes a table
// of medians [min–max] per phase into the log and .cache/e2e/bench-live.md.
func TestLiveBench(t *testing.T) {
	if os.Getenv("E2E_LIVE_BENCH") == "" {
		t.Skip("the live benchmark runs with make bench-live (E2E_LIVE_BENCH=1)")
	}
	defer noDebugPods(t)
	loadBench(t)
	rounds := 3
	if n, err := strconv.Atoi(os.Getenv("E2E_LIVE_BENCH_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	raw := map[string][][]string{
		"node-a": {{"iptables-nft-save", "-t", "nat"}, {"iptables-nft", "-t", "nat", "-S", "KUBE-SERVICES"}},
		"node-b": {{"nft", "-j", "list", "table", "ip", "kube-proxy"}, {"nft", "-j", "list", "chain", "ip", "kube-proxy", "services"},
			{"nft", "-j", "list", "map", "ip", "kube-proxy", "service-ips"}, {"nft", "-t", "-j", "list", "table", "ip", "kube-proxy"}},
	}
	// As a member of deploy/'s group (no port-forward: no /proxyMode, no
	// metrics), and explain and triage again as the admin, who has them.
	commands := [][]string{
		{"explain", "svc/big-0001", "-n", nsBench, "-o", "json"},
		{"map", "-o", "json"},
		{"triage", "-o", "json"},
		{"explain", "svc/big-0001", "-n", nsBench, "-o", "json", "--as-admin"},
		{"triage", "-o", "json", "--as-admin"},
	}
	base := os.Getenv("E2E_LIVE_BENCH_BASE") // an older build of the plugin, timed alongside
	var rows []*benchRow
	row := func(node, what string) *benchRow {
		for _, r := range rows {
			if r.node == node && r.what == what {
				return r
			}
		}
		r := &benchRow{node: node, what: what}
		rows = append(rows, r)
		return r
	}
	for round := 0; round < rounds; round++ {
		for _, node := range nodes {
			for _, argv := range raw[node] {
				start := time.Now()
				out, err := inNode(node, argv[0], argv[1:]...)
				if err != nil {
					t.Fatalf("%s on %s: %v", strings.Join(argv, " "), node, err)
				}
				r := row(node, fmt.Sprintf("`%s` (on the node, %.1f MB)", strings.Join(argv, " "), float64(len(out))/(1<<20)))
				r.runs = append(r.runs, phaseTimes{"wall": time.Since(start).Seconds()})
			}
			for _, args := range commands {
				who, as := member, ""
				if args[len(args)-1] == "--as-admin" {
					args, who, as = args[:len(args)-1], nil, " as admin"
				}
				label := "`" + strings.Join(args[:len(args)-2], " ") + "`" + as
				start := time.Now()
				_, errOut, code := plugin(t, append(append(append([]string{}, args...), "--node", node, "--timings"), who...)...)
				wall := time.Since(start).Seconds()
				if code != 0 && code != 2 && code != 3 {
					t.Fatalf("%s --node %s: exit %d\n%s", strings.Join(args, " "), node, code, errOut)
				}
				pt := parseTimings(errOut)
				pt["wall"] = wall
				r := row(node, label)
				r.runs = append(r.runs, pt)
				if base != "" {
					// The same command by an older build, paired: its wall time.
					start := time.Now()
					out, err := run(nil, base, append(append(append([]string{}, args...), "--node", node), who...)...)
					if err != nil && !strings.Contains(err.Error(), "exit status 2") && !strings.Contains(err.Error(), "exit status 3") {
						t.Fatalf("base %s: %v\n%.300s", base, err, out)
					}
					r := row(node, r.what+" (base)")
					r.runs = append(r.runs, phaseTimes{"wall": time.Since(start).Seconds()})
				}
			}
		}
	}
	table := benchTable(rows)
	t.Logf("live benchmark, %d rounds:\n%s", rounds, table)
	path := filepath.Join(e2eCache(), "bench-live.md")
	if err := os.WriteFile(path, []byte(table), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("written to %s", path)
}

// benchTable renders rows as a markdown table: per phase the median
// [min–max] of the runs, in seconds.
func benchTable(rows []*benchRow) string {
	var b strings.Builder
	b.WriteString("| node | command | " + strings.Join(benchPhases, " | ") + " |\n|")
	for range len(benchPhases) + 2 {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, r := range rows {
		b.WriteString("| " + r.node + " | " + r.what + " |")
		for _, p := range benchPhases {
			var v []float64
			for _, run := range r.runs {
				if s, ok := run[p]; ok {
					v = append(v, s)
				}
			}
			if len(v) == 0 {
				b.WriteString(" |")
				continue
			}
			sort.Float64s(v)
			fmt.Fprintf(&b, " %.2f [%.2f–%.2f] |", v[len(v)/2], v[0], v[len(v)-1])
		}
		b.WriteString("\n")
	}
	return b.String()
}
