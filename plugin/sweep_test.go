package plugin

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/proxyrules/kubectl-proxyrules/plugin/collect"
)

// sweepFolder writes a sweep folder as collect --all-nodes does, of the
// small-v1.37 fixture (kube-proxy's own rules for node-a): node-a in
// iptables mode with an endpoint's jump removed from its Service chain (a
// fault), node-b with node-a's nftables rules (whose Local-policy chains
// give them away: the identity check says so), node-c with node-a's
// iptables rules, and node-d that could not be read.
func sweepFolder(t *testing.T) string {
	t.Helper()
	const small = "../testdata/fixtures/small-v1.37/"
	dir := filepath.Join(t.TempDir(), "sweep")
	w, err := collect.NewSweepWriter(dir, time.Unix(1795939150, 0))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := os.ReadFile(small + "objects.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Objects(objs); err != nil {
		t.Fatal(err)
	}
	v4, _ := os.ReadFile(small + "iptables/save-legacy-ipv4.txt")
	var faulty []string
	for _, line := range strings.Split(string(v4), "\n") {
		if strings.HasPrefix(line, "-A KUBE-SVC-67NZLRHBNDSAWJRO ") && strings.Contains(line, "-j KUBE-SEP-GXKVICYM64SODBWJ") {
			continue
		}
		faulty = append(faulty, line)
	}
	node := func(name, mode string, files map[string][]byte) {
		nd := w.NodeDir(name)
		if err := os.MkdirAll(nd, 0o700); err != nil {
			t.Fatal(err)
		}
		m := &collect.Manifest{Node: name, CollectedAt: time.Unix(1795939150, 0).UTC(), Via: "debug-pod", ProxyMode: "iptables", Scope: "full"}
		if mode == "nftables" {
			m.ProxyMode = "nftables"
		}
		for _, base := range slices.Sorted(mapKeys(files)) {
			data := files[base]
			if err := os.WriteFile(filepath.Join(nd, base), data, 0o600); err != nil {
				t.Fatal(err)
			}
			kind := "ruleset"
			if strings.HasPrefix(base, "metrics") {
				kind = collect.KindMetrics
			}
			m.Files = append(m.Files, collect.BundleFile{Path: base, Kind: kind, Bytes: int64(len(data))})
		}
		if err := collect.WriteManifest(nd, m); err != nil {
			t.Fatal(err)
		}
		w.Node(name, nil, "")
	}
	read := func(p string) []byte {
		data, err := os.ReadFile(small + p)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	node("node-a", "iptables", map[string][]byte{"iptables-save.txt": []byte(strings.Join(faulty, "\n")), "ip6tables-save.txt": read("iptables/save-legacy-ipv6.txt")})
	node("node-b", "nftables", map[string][]byte{"nft.json": read("nftables/ruleset.json")})
	node("node-c", "iptables", map[string][]byte{"iptables-save.txt": read("iptables/save-legacy-ipv4.txt"), "ip6tables-save.txt": read("iptables/save-legacy-ipv6.txt")})
	w.Node("node-d", errors.New("node node-d is not Ready (kubelet stopped posting status): a debug pod cannot start there"), "NotReady")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

type sweepList struct {
	Kind    string            `json:"kind"`
	Items   []json.RawMessage `json:"items"`
	Summary struct {
		Kind   string `json:"kind"`
		Nodes  int    `json:"nodes"`
		Failed int    `json:"failed"`
		Status string `json:"status"`
		Rows   []struct {
			Node, Status, Error, Reason string
			MissingEndpoints            *int `json:"missingEndpoints"`
		} `json:"rows"`
		Causes []struct {
			Title string
			Nodes []string
		} `json:"causes"`
	} `json:"summary"`
}

// A sweep over a sweep folder: every node's report, the one that could not
// be read as a NodeError, a summary worst first, the fault found on the
// node that has it, and each item the same report as the command on that
// node alone.
func TestSweepFolder(t *testing.T) {
	dir := sweepFolder(t)
	out, errOut, err := runCmd(t, nil, "triage", "--from-bundle", dir, "-o", "json")
	if code := exitOf(t, err, errOut); code != ExitProblems {
		t.Fatalf("exit %d, want %d (problems on node-c)\n%s", code, ExitProblems, errOut)
	}
	var l sweepList
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if l.Kind != "List" || len(l.Items) != 4 || l.Summary.Nodes != 4 || l.Summary.Failed != 1 || l.Summary.Status != "problems" {
		t.Fatalf("kind %s, %d items, summary %+v", l.Kind, len(l.Items), l.Summary)
	}
	var order []string
	for _, r := range l.Summary.Rows {
		order = append(order, r.Node+"="+r.Status)
	}
	// node-b and node-c hold node-a's rules: their identity is wrong.
	if want := []string{"node-d=incomplete", "node-a=problems", "node-b=problems", "node-c=problems"}; !slices.Equal(order, want) {
		t.Errorf("rows %v, want %v: unread, problems, incomplete", order, want)
	}
	if r := l.Summary.Rows[0]; r.Reason != "NotReady" || !strings.Contains(r.Error, "not Ready") {
		t.Errorf("unread row %+v", r)
	}
	if r := l.Summary.Rows[1]; r.MissingEndpoints == nil || *r.MissingEndpoints != 1 {
		t.Errorf("node-a row: missing %v, want 1", r.MissingEndpoints)
	}
	foundCause := false
	for _, c := range l.Summary.Causes {
		if slices.Equal(c.Nodes, []string{"node-a"}) && strings.Contains(c.Title, "shop/web") {
			foundCause = true
		}
	}
	if !foundCause {
		t.Errorf("no cause for node-a's shop/web: %+v", l.Summary.Causes)
	}
	// Each item is the single-node report.
	for _, raw := range l.Items {
		var head struct{ Kind, Node string }
		if err := json.Unmarshal(raw, &head); err != nil {
			t.Fatal(err)
		}
		if head.Kind == "NodeError" {
			if head.Node != "node-d" {
				t.Errorf("NodeError for %s", head.Node)
			}
			continue
		}
		single, errOut, err := runCmd(t, nil, "triage", "--from-bundle", dir, "--node", head.Node, "-o", "json")
		if _, isExit := IsExitError(err); err != nil && !isExit {
			t.Fatalf("%s alone: %v\n%s", head.Node, err, errOut)
		}
		if compact(t, raw) != compact(t, []byte(single)) {
			t.Errorf("%s: the sweep's item differs from the node alone", head.Node)
		}
	}
	// YAML: the same List.
	yout, errOut, err := runCmd(t, nil, "triage", "--from-bundle", dir, "-o", "yaml")
	if code := exitOf(t, err, errOut); code != ExitProblems {
		t.Fatalf("yaml: exit %d", code)
	}
	if !strings.HasPrefix(yout, "apiVersion: proxyrules.kubectl.io/v1alpha1\nkind: List\nitems:\n- ") || !strings.Contains(yout, "\nsummary:\n  apiVersion:") {
		t.Errorf("yaml list:\n%.400s", yout)
	}
	// --node picks nodes of the folder: a sweep of two.
	out, _, _ = runCmd(t, nil, "stale", "--from-bundle", dir, "--node", "node-a", "--node", "node-b", "-o", "json")
	if err := json.Unmarshal([]byte(out), &l); err != nil || len(l.Items) != 2 || l.Summary.Nodes != 2 {
		t.Errorf("a sweep of two: %v, %d items", err, len(l.Items))
	}
}

func compact(t *testing.T, data []byte) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(v)
	return string(out)
}

// The text of a sweep: the table worst first, the causes across nodes, the
// nodes not read, the verdict; 80 columns in a pipe.
func TestSweepText(t *testing.T) {
	dir := sweepFolder(t)
	for _, cmd := range []string{"triage", "stale", "counts", "masq"} {
		out, errOut, err := runCmd(t, nil, cmd, "--from-bundle", dir)
		if _, isExit := IsExitError(err); err != nil && !isExit {
			t.Fatalf("%s: %v\n%s", cmd, err, errOut)
		}
		lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
		if !strings.HasPrefix(lines[0], cmd+" of 4 nodes: ") {
			t.Errorf("%s: first line %q", cmd, lines[0])
		}
		table := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "NODE ") })
		if table < 0 || table > 2 || !strings.HasPrefix(lines[table+1], "node-d ") {
			t.Errorf("%s: no table of nodes, the unread first:\n%s", cmd, out)
		}
		if !strings.Contains(out, "not read\n  node-d (NotReady): node node-d is not Ready") {
			t.Errorf("%s: the unread node is not listed:\n%s", cmd, out)
		}
		if !strings.HasPrefix(lines[len(lines)-1], "verdict: ") {
			t.Errorf("%s: last line %q", cmd, lines[len(lines)-1])
		}
		for _, l := range lines {
			if len([]rune(l)) > 80 {
				t.Errorf("%s: %d columns: %s", cmd, len([]rune(l)), l)
			}
		}
	}
	out, _, _ := runCmd(t, nil, "triage", "--from-bundle", dir)
	if flat := strings.Join(strings.Fields(out), " "); !strings.Contains(flat, "ERROR node-a: service shop/web:http (iptables IPv4): endpoint chain KUBE-SEP-GXKVICYM64SODBWJ of 10.244.0.11:8080 is there, but no rule sends new connections to it any more") {
		t.Errorf("triage causes:\n%s", out)
	}
}

func TestSweepFlagErrors(t *testing.T) {
	dir := sweepFolder(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"map", "--node", "a", "--node", "b", "--from-dump", "../testdata/fixtures/small-v1.37/iptables/save-legacy-ipv4.txt"}, "map reads one node"},
		{[]string{"map", "--from-bundle", dir}, "map reads one node: sweeps"},
		{[]string{"triage", "--all-nodes", "--node-selector", "a=b"}, "not both"},
		{[]string{"triage", "--all-nodes", "--node", "a"}, "--node names the nodes itself"},
		{[]string{"triage", "--all-nodes", "--from-dump", "x"}, "--from-dump holds one node's rules"},
		{[]string{"triage", "--all-nodes", "--parallel", "0"}, "--parallel must be between 1 and 50"},
		{[]string{"triage", "--from-bundle", dir, "--all-nodes"}, "is a sweep folder"},
		{[]string{"triage", "--from-bundle", dir, "-o", "name"}, "a sweep prints a summary table"},
		{[]string{"triage", "--from-bundle", dir, "--node", "node-x", "--node", "node-y", "-o", "json"}, "no node could be read"},
	} {
		_, _, err := runCmd(t, nil, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
}

// explain on many nodes: per node whether the Service is programmed as its
// EndpointSlices say, the nodes that agree collapsed.
func TestSweepExplain(t *testing.T) {
	dir := sweepFolder(t)
	out, errOut, err := runCmd(t, nil, "explain", "svc/web", "-n", "shop", "--from-bundle", dir)
	if code := exitOf(t, err, errOut); code != ExitProblems {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	flat := strings.Join(strings.Fields(out), " ")
	for _, want := range []string{
		"svc shop/web on 4 nodes: PROBLEMS FOUND",
		"HEALTHY 2 nodes (node-b, node-c): programmed as its EndpointSlices say",
		"PROBLEMS FOUND node-a: programmed differently: - shop/web:http (IPv4): endpoint chain KUBE-SEP-GXKVICYM64SODBWJ of 10.244.0.11:8080 is there, but no rule sends new connections to it any more",
		"node-d (NotReady)",
	} {
		if !strings.Contains(flat, want) {
			t.Errorf("lacks %q:\n%s", want, out)
		}
	}
	// -o json: a ServiceExplanation per node, with groups in the summary;
	// a chain name finds the Service in the sweep's objects.
	out, _, _ = runCmd(t, nil, "explain", "KUBE-SEP-GXKVICYM64SODBWJ", "--from-bundle", dir, "-o", "json")
	var l struct {
		Items []struct {
			Kind, Node, Namespace, Name string
		}
		Summary struct {
			Groups []struct {
				Status string
				Nodes  []string
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, it := range l.Items {
		kinds[it.Kind]++
		if it.Kind == "ServiceExplanation" && (it.Namespace != "shop" || it.Name != "web") {
			t.Errorf("item %+v", it)
		}
	}
	if kinds["ServiceExplanation"] != 3 || kinds["NodeError"] != 1 || len(l.Summary.Groups) != 2 || !slices.Equal(l.Summary.Groups[0].Nodes, []string{"node-b", "node-c"}) {
		t.Errorf("items %v, groups %+v", kinds, l.Summary.Groups)
	}
	if _, _, err := runCmd(t, nil, "explain", "svc/webb", "-n", "shop", "--from-bundle", dir); err == nil || !strings.Contains(err.Error(), "did you mean svc/web?") {
		t.Errorf("a typo in a sweep: %v", err)
	}
}
