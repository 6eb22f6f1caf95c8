//go:build e2e

package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestPluginOnPath: the plugin is found by kubectl as users install it.
func TestPluginOnPath(t *testing.T) {
	out := string(kubectl(t, "plugin", "list"))
	if !strings.Contains(out, "kubectl-proxyrules") {
		t.Errorf("kubectl plugin list does not show kubectl-proxyrules:\n%s", out)
	}
	help := string(kubectl(t, "proxyrules", "--help"))
	if !strings.Contains(help, "map") {
		t.Errorf("kubectl proxyrules --help does not mention map:\n%s", help)
	}
	if regexp.MustCompile(`(?m)^\s+version\s`).MatchString(help) {
		if v := strings.TrimSpace(string(kubectl(t, "proxyrules", "version"))); v == "" {
			t.Error("kubectl proxyrules version printed nothing")
		} else {
			t.Logf("kubectl proxyrules version: %s", strings.SplitN(v, "\n", 2)[0])
		}
	}
}

// chainMap is `map -o json` (README, "JSON schema").
type chainMap struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Node       string `json:"node"`
	Sources    []struct {
		Source, Format, Backend string
	} `json:"sources"`
	Summary struct {
		Chains, Attributed, Fixed, Unowned, Stale int
		ObjectsGiven                              bool `json:"objectsGiven"`
	} `json:"summary"`
	Chains []mappedChain `json:"chains"`
}

type mappedChain struct {
	Mode, Family, Table, Chain, Kind string
	ServicePort                      string `json:"servicePort"`
	Protocol, Endpoint               string
	Evidence                         []string
	Rules                            int
	Stale                            bool
}

func (c mappedChain) String() string {
	return fmt.Sprintf("%s %s/%s %s (kind %s, servicePort %q, endpoint %q, stale %v, evidence %v)",
		c.Mode, c.Family, c.Table, c.Chain, c.Kind, c.ServicePort, c.Endpoint, c.Stale, c.Evidence)
}

var nodes = []string{"node-a", "node-b"}
var nodeMode = map[string]string{"node-a": "iptables", "node-b": "nftables"}

func markAll(t *testing.T) map[string]syncMark {
	marks := map[string]syncMark{}
	for _, n := range nodes {
		marks[n] = markSync(t, n)
	}
	return marks
}

func waitAll(t *testing.T, marks map[string]syncMark, svcEvents, sliceEvents int) {
	t.Helper()
	for _, n := range nodes {
		waitSynced(t, marks[n], svcEvents, sliceEvents)
	}
}

// objectsOf returns the Services and EndpointSlices of defs, and how many
// Service and EndpointSlice events kube-proxy will see for them (it does not
// watch headless Services or their slices).
func objectsOf(defs []svcDef) (objs []any, svcEvents, sliceEvents int) {
	for _, d := range defs {
		objs = append(objs, serviceObject(d))
		if !d.headless {
			svcEvents++
		}
		if s := sliceObject(d); s != nil {
			objs = append(objs, s)
			if !d.headless {
				sliceEvents++
			}
		}
	}
	return objs, svcEvents, sliceEvents
}

// kubernetesService is default/kubernetes as the apiserver maintains it.
func kubernetesService() svcDef {
	u, _ := url.Parse(clusterEnv["E2E_APISERVER"])
	port, _ := strconv.Atoi(u.Port())
	return svcDef{ns: "default", name: "kubernetes",
		ports: []svcPort{{name: "https", port: 443, target: int32(port), proto: "TCP"}},
		eps:   []endpoint{{ip: u.Hostname()}}}
}

// createScenario makes the scenario's namespaces and Services and waits
// for both kube-proxies each time: 1. 1100 endpoints, so that kube-proxy
// switches to large-cluster mode; 2. every Service type and traffic
// policy, created in large-cluster mode. It returns both lists.
func createScenario(t *testing.T) (load, scenario []svcDef) {
	t.Helper()
	createObjects(t, append(namespaceObjects(nsScenario), namespaceObjects(nsLoad)...)...)
	load = loadServices()
	marks := markAll(t)
	objs, svcEvents, sliceEvents := objectsOf(load)
	createObjects(t, objs...)
	waitAll(t, marks, svcEvents, sliceEvents)

	scenario = withNamespace(scenarioServices(), nsScenario)
	marks = markAll(t)
	objs, svcEvents, sliceEvents = objectsOf(scenario)
	createObjects(t, objs...)
	for _, d := range scenario {
		if d.lbIngress != "" {
			status := fmt.Sprintf(`{"status":{"loadBalancer":{"ingress":[{"ip":%q}]}}}`, d.lbIngress)
			kubectl(t, "-n", d.ns, "patch", "service", d.name, "--subresource=status", "--type=merge", "-p", status)
			svcEvents++
		}
	}
	waitAll(t, marks, svcEvents, sliceEvents)
	return load, scenario
}

// TestMapLiveNodes drives kube-proxy through every Service type and policy,
// large-cluster mode, a deleted Service and a scale-down, then maps both
// nodes' rulesets with the plugin and checks every chain against the objects.
func TestMapLiveNodes(t *testing.T) {
	// 1, 2: large-cluster mode, then every Service type and policy.
	load, before := createScenario(t)

	// 3. Delete a Service and scale another down: on node-a (large-cluster
	// mode, syncPeriod 1h) their chains linger, stale.
	marks := markAll(t)
	kubectl(t, "-n", nsScenario, "delete", "service", "deleted")
	kubectl(t, "-n", nsScenario, "delete", "endpointslice", "deleted-e2e01")
	var current []svcDef
	for _, d := range before {
		switch d.name {
		case "deleted":
			continue
		case "scaled":
			d.eps = d.eps[:1]
			patch, _ := json.Marshal([]any{map[string]any{"op": "replace", "path": "/endpoints", "value": endpointObjects(d.eps)}})
			kubectl(t, "-n", nsScenario, "patch", "endpointslice", sliceName(d), "--type=json", "-p", string(patch))
		}
		current = append(current, d)
	}
	waitAll(t, marks, 1, 2)
	// kube-proxy's metrics say it synced; the ruleset says so too.
	eventually(t, "node-a: the deleted Service still in KUBE-SERVICES", func() error {
		out, err := inNode("node-a", "iptables-save", "-t", "nat")
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(line, "-A KUBE-SERVICES ") && strings.Contains(line, nsScenario+"/deleted:http") {
				return fmt.Errorf("KUBE-SERVICES still has %s", line)
			}
		}
		return nil
	})

	// 4. Last, in one EndpointSlice event, one endpoint of the ClientIP
	// affinity Service goes away. node-b (nftables) flushes that endpoint's
	// chain now and deletes it on its next sync, which, with no further event,
	// is syncPeriod (30 s) away: the dumps taken right after hold it.
	marks = markAll(t)
	for i, d := range current {
		if d.name == "affinity" {
			current[i].eps = d.eps[:1]
			patch, _ := json.Marshal([]any{map[string]any{"op": "replace", "path": "/endpoints", "value": endpointObjects(current[i].eps)}})
			kubectl(t, "-n", nsScenario, "patch", "endpointslice", sliceName(d), "--type=json", "-p", string(patch))
		}
	}
	waitAll(t, marks, 0, 1)
	nodeB := mustRun(t, nil, "ip", "netns", "exec", "node-b", "nft", "-j", "list", "ruleset")
	nodeA4 := mustRun(t, nil, "ip", "netns", "exec", "node-a", "iptables-save")
	nodeA6 := mustRun(t, nil, "ip", "netns", "exec", "node-a", "ip6tables-save")
	objects := writeTemp(t, "objects.json", kubectl(t, "get", "services,endpointslices", "-A", "-o", "json"))

	base := []svcDef{kubernetesService()}
	base = append(base, load...)
	current = append(base, current...)
	before = append(base, before...)

	t.Run("node-a/iptables", func(t *testing.T) {
		m := runMap(t, "node-a", objects, writeTemp(t, "node-a-v4.txt", nodeA4), writeTemp(t, "node-a-v6.txt", nodeA6))
		for _, s := range m.Sources {
			if s.Format != "iptables-save" || s.Backend != "nf_tables" {
				t.Errorf("source %s read as %s/%s, want iptables-save/nf_tables", s.Source, s.Format, s.Backend)
			}
		}
		// Large-cluster mode, syncPeriod 1h: every chain of a removed
		// Service or endpoint lingers.
		checkMap(t, m, "iptables", "node-a", before, current, func(owner) bool { return true })
		checkLargeClusterMode(t, string(nodeA4), current)
	})
	t.Run("node-b/nftables", func(t *testing.T) {
		m := runMap(t, "node-b", objects, writeTemp(t, "node-b.json", nodeB))
		for _, s := range m.Sources {
			if s.Format != "nft-json" {
				t.Errorf("source %s read as %s, want nft-json", s.Source, s.Format)
			}
		}
		// Only the chain flushed by the last sync is sure to be there.
		checkMap(t, m, "nftables", "node-b", before, current, func(o owner) bool {
			return o.servicePort == nsScenario+"/affinity:http"
		})
	})
}

// runMap runs `kubectl proxyrules map -o json` as a user would.
func runMap(t *testing.T, node, objects string, dumps ...string) chainMap {
	t.Helper()
	args := []string{"proxyrules", "map", "-o", "json", "--node", node, "--from-objects", objects}
	for _, d := range dumps {
		args = append(args, "--from-dump", d)
	}
	out, err := run(nil, "kubectl", args...)
	if err != nil {
		t.Fatal(err)
	}
	var m chainMap
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatalf("map -o json: %v\n%s", err, out)
	}
	if m.Kind != "ChainMap" || m.Node != node || !m.Summary.ObjectsGiven {
		t.Errorf("map: kind %q node %q objectsGiven %v, want ChainMap %s true", m.Kind, m.Node, m.Summary.ObjectsGiven, node)
	}
	if m.Summary.Unowned != 0 {
		t.Errorf("map: %d chains without owner, want 0", m.Summary.Unowned)
	}
	t.Logf("%s: %d chains, %d attributed, %d fixed, %d stale", node, m.Summary.Chains, m.Summary.Attributed, m.Summary.Fixed, m.Summary.Stale)
	return m
}

// checkMap: every per-Service chain the plugin reports is attributed to the
// service port and endpoint the oracle derives from its name and the objects;
// the chains kube-proxy must have written are all there; the chains of the
// deleted Service and of the removed endpoints are stale (and, where
// kube-proxy keeps them, present).
func checkMap(t *testing.T, m chainMap, mode, node string, before, current []svcDef, lingers func(owner) bool) {
	t.Helper()
	cur := allNames(mode, current)
	gone := minus(allNames(mode, before), cur)
	want := expectedChains(mode, node, current)
	// The chains kube-proxy wrote for objects since removed, and must still have.
	wantGone := map[string]owner{}
	for name, o := range expectedChains(mode, node, before) {
		if _, ok := gone[name]; ok && lingers(o) {
			wantGone[name] = o
		}
	}
	if len(wantGone) == 0 {
		t.Fatal("oracle: the scenario leaves no stale chain")
	}

	seen := map[string]bool{}
	stale := 0
	for _, c := range m.Chains {
		if c.Stale {
			stale++
		}
		if c.Mode != mode {
			t.Errorf("%v: mode %s, want %s", c, c.Mode, mode)
		}
		switch c.Kind {
		case "fixed":
			continue
		case "unknown":
			t.Errorf("%v: unknown chain", c)
			continue
		}
		if o, ok := cur[c.Chain]; ok {
			seen[c.Chain] = true
			if c.ServicePort != o.servicePort || c.Protocol != o.protocol || c.Endpoint != o.endpoint || c.Kind != o.kind || c.Stale {
				t.Errorf("%v\n\twant kind %s, servicePort %q, protocol %s, endpoint %q, not stale", c, o.kind, o.servicePort, o.protocol, o.endpoint)
			}
			if _, ok := want[c.Chain]; !ok {
				t.Errorf("%v: kube-proxy wrote a chain the oracle does not expect on %s", c, node)
			}
			continue
		}
		if o, ok := gone[c.Chain]; ok {
			seen[c.Chain] = true
			if !c.Stale || c.Kind != o.kind || (c.ServicePort != "" && c.ServicePort != o.servicePort) {
				t.Errorf("%v\n\twant stale, kind %s, former servicePort %q (or none)", c, o.kind, o.servicePort)
			}
			continue
		}
		t.Errorf("%v: owned by no Service the test created", c)
	}
	if stale != m.Summary.Stale {
		t.Errorf("summary.stale %d, but %d chains are stale", m.Summary.Stale, stale)
	}
	for _, name := range sortedKeys(want) {
		if !seen[name] {
			o := want[name]
			t.Errorf("%s: chain %s (%s %s %s) missing from the map", node, name, o.kind, o.servicePort, o.endpoint)
		}
	}
	for _, name := range sortedKeys(wantGone) {
		if !seen[name] {
			o := wantGone[name]
			t.Errorf("%s: stale chain %s (%s %s %s) of a removed Service/endpoint is not in the map (kube-proxy keeps it)", node, name, o.kind, o.servicePort, o.endpoint)
		}
	}
	staleSeen := 0
	for name := range gone {
		if seen[name] {
			staleSeen++
		}
	}
	t.Logf("%s: %d current per-Service chains checked; %d chains of removed objects present and stale (%d required)",
		node, len(want), staleSeen, len(wantGone))
}

// checkLargeClusterMode: in large-cluster mode kube-proxy writes no comments
// on KUBE-SEP rules; the scenario Services were created in that mode.
func checkLargeClusterMode(t *testing.T, save string, current []svcDef) {
	t.Helper()
	var scen []svcDef
	for _, d := range current {
		if d.ns == nsScenario {
			scen = append(scen, d)
		}
	}
	seps := map[string]bool{}
	for name, o := range expectedChains("iptables", "node-a", scen) {
		if o.kind == "endpoint" {
			seps[name] = true
		}
	}
	checked := 0
	sc := bufio.NewScanner(strings.NewReader(save))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 2 && f[0] == "-A" && seps[f[1]] {
			checked++
			if strings.Contains(sc.Text(), "--comment") {
				t.Errorf("large-cluster mode expected, but a KUBE-SEP rule has a comment: %s", sc.Text())
			}
		}
	}
	if checked == 0 {
		t.Error("no KUBE-SEP rule of the scenario Services found")
	}
}

// TestExecLandsInNode: `kubectl exec` into a hostNetwork pod on a node runs in
// that node's network (what a debug pod on a real node gives), and
// port-forward to the kube-proxy pod reaches that node's kube-proxy.
func TestExecLandsInNode(t *testing.T) {
	const ns = "e2e-debug"
	objs := namespaceObjects(ns)
	for _, n := range nodes {
		objs = append(objs, map[string]any{
			"apiVersion": "v1", "kind": "Pod",
			"metadata": map[string]any{"name": "debug-" + n, "namespace": ns},
			"spec": map[string]any{
				"nodeName":    n,
				"hostNetwork": true,
				"containers": []any{map[string]any{
					"name": "debug", "image": "registry.example/netshoot:e2e",
					"securityContext": map[string]any{"privileged": true},
				}},
			},
		})
	}
	createObjects(t, objs...)
	for _, n := range nodes {
		kubectl(t, "-n", ns, "wait", "--for=condition=Ready", "pod/debug-"+n, "--timeout=60s")
	}

	for _, n := range nodes {
		n := n
		t.Run(n, func(t *testing.T) {
			pod := "debug-" + n
			exe := func(args ...string) ([]byte, error) {
				return run(nil, "kubectl", append([]string{"-n", ns, "exec", pod, "--"}, args...)...)
			}
			if out, err := exe("hostname"); err != nil || strings.TrimSpace(string(out)) != n {
				t.Errorf("exec hostname on %s: %q, %v", pod, out, err)
			}
			// The same ruleset through exec as on the node, read twice around
			// the exec in case kube-proxy synced in between.
			list := []string{"iptables-save"}
			if nodeMode[n] == "nftables" {
				list = []string{"nft", "list", "ruleset"}
			}
			eventually(t, "exec "+strings.Join(list, " ")+" equals the node's", func() error {
				d1, err := inNode(n, list[0], list[1:]...)
				if err != nil {
					return err
				}
				viaExec, err := exe(list...)
				if err != nil {
					return err
				}
				d2, err := inNode(n, list[0], list[1:]...)
				if err != nil {
					return err
				}
				e := normalizeSave(viaExec)
				if e != normalizeSave(d1) && e != normalizeSave(d2) {
					return fmt.Errorf("differs (%d vs %d bytes)", len(e), len(normalizeSave(d2)))
				}
				if !strings.Contains(e, "KUBE-") && !strings.Contains(e, "kube-proxy") {
					return fmt.Errorf("no kube-proxy rules in %q", e)
				}
				return nil
			})

			// port-forward to the node's kube-proxy pod reaches its metrics port.
			podName := strings.TrimSpace(string(kubectl(t, "-n", "kube-system", "get", "pods", "-l", "k8s-app=kube-proxy",
				"--field-selector", "spec.nodeName="+n, "-o", "jsonpath={.items[0].metadata.name}")))
			if podName == "" {
				t.Fatalf("no kube-proxy pod on %s", n)
			}
			mode := portForwardGet(t, "kube-system", podName, 10249, "/proxyMode")
			if strings.TrimSpace(mode) != nodeMode[n] {
				t.Errorf("port-forward to %s /proxyMode: %q, want %s", podName, mode, nodeMode[n])
			}
		})
	}

	// The objects the plugin will look for on a real cluster.
	cm := string(kubectl(t, "-n", "kube-system", "get", "configmap", "kube-proxy", "-o", "jsonpath={.data.config\\.conf}"))
	if !strings.Contains(cm, "mode: iptables") {
		t.Errorf("kube-system/kube-proxy config.conf does not say mode: iptables:\n%s", cm)
	}
}

// portForwardGet runs kubectl port-forward to pod:port on a free loopback
// port and returns the body of GET path.
func portForwardGet(t *testing.T, ns, pod string, port int, path string) string {
	t.Helper()
	cmd := exec.Command("kubectl", "-n", ns, "port-forward", "--address", "127.0.0.1", "pod/"+pod, fmt.Sprintf(":%d", port))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	local := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(`Forwarding from 127\.0\.0\.1:(\d+) ->`)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				local <- m[1]
			}
		}
		io.Copy(io.Discard, stdout)
	}()
	var lp string
	select {
	case lp = <-local:
	case <-time.After(30 * time.Second):
		t.Fatal("kubectl port-forward did not start within 30 s")
	}
	resp, err := http.Get("http://127.0.0.1:" + lp + path)
	if err != nil {
		t.Fatalf("GET through port-forward: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
