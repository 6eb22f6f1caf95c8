//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// explainCT is what the e2e reads of `explain -o json`'s conntrack part.
type explainCT struct {
	Status string `json:"status"`
	Ports  []struct {
		ServicePort string `json:"servicePort"`
		Problems    []struct {
			Kind string `json:"kind"`
		} `json:"problems"`
	} `json:"ports"`
	Conntrack *struct {
		Read  int `json:"read"`
		Ports []struct {
			ServicePort string `json:"servicePort"`
			Family      string `json:"family"`
			Entries     int    `json:"entries"`
			Stale       int    `json:"stale"`
			ByCause     []struct {
				Cause           string   `json:"cause"`
				KubeProxyCleans bool     `json:"kubeProxyCleans"`
				Commands        []string `json:"commands"`
			} `json:"byCause"`
		} `json:"ports"`
	} `json:"conntrack"`
	Collection *struct {
		Files []struct {
			Path string `json:"path"`
			Kind string `json:"kind"`
		} `json:"files"`
	} `json:"collection"`
}

// TestLiveExplainConntrack: `explain svc/X --node node-a` reads the
// Service's own entries from node-a's real table (one grep, filtered on
// the node; no counters, no sysctls): an entry inserted with conntrack -I
// whose reply source is a gone endpoint shows, counted as the kernel
// lists them, with the command that clears it, and explain exits 2
// though the Service's rules are right (issue 31, item 3).
func TestLiveExplainConntrack(t *testing.T) {
	defer noDebugPods(t)
	const ns, node = "e2e-ct-explain", "node-a"
	defs := withNamespace([]svcDef{
		{name: "dns", ports: []svcPort{{name: "dns", port: 53, target: 5353, proto: "UDP"}}, eps: []endpoint{{ip: "10.244.1.60", node: node}}},
	}, ns)
	createObjects(t, namespaceObjects(ns)...)
	marks := markAll(t)
	objs, svcEvents, sliceEvents := objectsOf(defs)
	createObjects(t, objs...)
	waitAll(t, marks, svcEvents, sliceEvents)
	defer func() {
		// Other tests check that every chain belongs to a Service they
		// made: gone, and synced away, before they run.
		marks := markAll(t)
		kubectl(t, "-n", ns, "delete", "service,endpointslice", "--all")
		waitAll(t, marks, 1, 1)
	}()
	ip := strings.TrimSpace(string(kubectl(t, "-n", ns, "get", "service", "dns", "-o", "jsonpath={.spec.clusterIP}")))
	defer inNode(node, "conntrack", "-D", "-p", "udp", "-d", ip)
	ctInsert(t, node, "10.244.1.87", ip, 42001, "10.244.1.60") // the serving endpoint
	ctInsert(t, node, "10.244.1.87", ip, 42002, "10.244.9.98") // an endpoint that is gone

	out, errOut, code := plugin(t, "explain", "svc/dns", "-n", ns, "--node", node, "-o", "json")
	if code != 2 {
		t.Fatalf("explain: exit %d, want 2 (a stale UDP entry)\n%s\n%s", code, errOut, out)
	}
	var ex explainCT
	if err := json.Unmarshal([]byte(out), &ex); err != nil {
		t.Fatalf("explain -o json: %v\n%s", err, out)
	}
	if ex.Conntrack == nil || len(ex.Conntrack.Ports) != 1 {
		t.Fatalf("conntrack part %+v, want one port", ex.Conntrack)
	}
	p := ex.Conntrack.Ports[0]
	kernel := ctCount(t, node, ip)
	command := fmt.Sprintf("conntrack -D -p udp --orig-dst %s --orig-port-dst 53 --reply-src 10.244.9.98", ip)
	if p.ServicePort != ns+"/dns:dns" || p.Entries != kernel || kernel != 2 || p.Stale != 1 || len(p.ByCause) != 1 ||
		p.ByCause[0].Cause != "noEndpointChange" || !p.ByCause[0].KubeProxyCleans || !slices.Equal(p.ByCause[0].Commands, []string{command}) {
		t.Errorf("port %+v (kernel lists %d); want 2 entries, 1 stale that kube-proxy cleans at its next endpoint change, %q", p, kernel, command)
	}
	// Only the Service's entries were read: the table's read holds its two.
	if ex.Conntrack.Read != kernel {
		t.Errorf("%d entries read, want the Service's %d (the grep filters on the node)", ex.Conntrack.Read, kernel)
	}
	var kinds []string
	for _, pp := range ex.Ports {
		for _, pr := range pp.Problems {
			kinds = append(kinds, pr.Kind)
		}
	}
	if !slices.Equal(kinds, []string{"staleUDPPending"}) {
		t.Errorf("problems %q, want only staleUDPPending (the rules are right)", kinds)
	}
	if ex.Collection == nil {
		t.Fatal("no collection manifest")
	}
	for _, f := range ex.Collection.Files {
		if f.Kind == "conntrack-stats" || f.Kind == "sysctls" {
			t.Errorf("explain read %s (%s): only the table's grep is explain's", f.Path, f.Kind)
		}
	}

	text, _, _ := plugin(t, "explain", "svc/dns", "-n", ns, "--node", node)
	if !strings.Contains(text, command) || !strings.Contains(text, "1 stale, answered by 10.244.9.98") {
		t.Errorf("explain's text does not show the stale entry and its command:\n%s", text)
	}
}
