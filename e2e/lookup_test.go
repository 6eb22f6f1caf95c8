//go:build e2e

package e2e

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestLiveLookup: on the live cluster, `map CHAIN` answers from the
// cluster's Services and EndpointSlices alone (no node read, no pod), for
// an iptables and an nftables name; `explain CHAIN --node` explains the
// chain's Service; a mistyped Service is answered with a suggestion before
// any debug pod is made; -n filters and -o name lists.
func TestLiveLookup(t *testing.T) {
	defer noDebugPods(t)
	// A current endpoint chain of each node, from the live map.
	for _, node := range []string{"node-a", "node-b"} {
		m := runLiveMap(t, "--node", node)
		var chain, owner, endpoint string
		for _, c := range m.Chains {
			if c.Kind == "endpoint" && !c.Stale && strings.HasPrefix(c.ServicePort, nsScenario+"/") {
				chain, owner, endpoint = c.Chain, c.ServicePort, c.Endpoint
				break
			}
		}
		if chain == "" {
			t.Fatalf("%s: no endpoint chain of %s", node, nsScenario)
		}
		// From the objects alone.
		out, errOut, code := plugin(t, "map", chain, "-o", "json")
		if code != 0 {
			t.Fatalf("map %s: exit %d\n%s", chain, code, errOut)
		}
		var rep struct {
			Chains []struct {
				Chain, ServicePort, Endpoint string
				InDump                       bool `json:"inDump"`
			}
		}
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatal(err)
		}
		if len(rep.Chains) != 1 || rep.Chains[0].ServicePort != owner || rep.Chains[0].Endpoint != endpoint || rep.Chains[0].InDump {
			t.Errorf("%s: map %s from the objects: %+v, want %s → %s", node, chain, rep.Chains, owner, endpoint)
		}
		// explain CHAIN on the node: that Service.
		out, errOut, code = plugin(t, "explain", chain, "--node", node, "-o", "json")
		if code == 1 {
			t.Fatalf("explain %s --node %s: exit 1\n%s", chain, node, errOut)
		}
		var ex struct {
			Namespace, Name string
			Lookup          *struct{ Chain string }
		}
		if err := json.Unmarshal([]byte(out), &ex); err != nil {
			t.Fatal(err)
		}
		if ex.Namespace+"/"+ex.Name != strings.SplitN(owner, ":", 2)[0] || ex.Lookup == nil || ex.Lookup.Chain != chain {
			t.Errorf("%s: explain %s explained %s/%s (lookup %+v), want %s", node, chain, ex.Namespace, ex.Name, ex.Lookup, owner)
		}
	}
	// Unknown: exit 1, no pod.
	if _, errOut, code := plugin(t, "map", "KUBE-SEP-AAAAAAAAAAAAAAAA"); code != 1 || !strings.Contains(errOut, "unknown chain") {
		t.Errorf("map of an unknown chain: exit %d, %s", code, errOut)
	}
	// A typo, and a forgotten -n, answered from the cluster before any pod.
	if _, errOut, code := plugin(t, "explain", "svc/scaledd", "-n", nsScenario, "--node", "node-a"); code != 1 || !strings.Contains(errOut, "did you mean svc/scaled?") {
		t.Errorf("explain of a typo: exit %d, %s", code, errOut)
	}
	if _, errOut, code := plugin(t, "explain", "svc/scaled", "--node", "node-a"); code != 1 || !strings.Contains(errOut, "it exists in namespace "+nsScenario) {
		t.Errorf("explain without -n: exit %d, %s", code, errOut)
	}
	// -A finds the namespace.
	if out, errOut, code := plugin(t, "explain", "svc/scaled", "-A", "--node", "node-a", "-o", "name"); code == 1 || !strings.Contains(out, "serviceport/"+nsScenario+".scaled:") {
		t.Errorf("explain -A: exit %d, %s %s", code, out, errOut)
	}
	// -n on a node-wide command: only that namespace's chains.
	out, errOut, code := plugin(t, "map", "--node", "node-b", "-n", nsScenario, "-o", "jsonpath={.items[*].servicePort}")
	if code != 0 || out == "" {
		t.Fatalf("map -n: exit %d, %s", code, errOut)
	}
	for _, spn := range strings.Fields(out) {
		if !strings.HasPrefix(spn, nsScenario+"/") {
			t.Errorf("map -n %s lists %s", nsScenario, spn)
		}
	}
}
