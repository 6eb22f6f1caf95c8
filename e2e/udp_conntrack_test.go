//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// ctReport is what the e2e reads of `conntrack -o json`.
type ctReport struct {
	Status string `json:"status"`
	Facts  *struct {
		Groups []struct {
			ServicePort string `json:"servicePort"`
			Target      string `json:"target"`
			Deleted     bool   `json:"deleted"`
			Entries     int    `json:"entries"`
			Stale       int    `json:"stale"`
			ByCause     []struct {
				Cause           string   `json:"cause"`
				KubeProxyCleans bool     `json:"kubeProxyCleans"`
				Entries         int      `json:"entries"`
				ReplySources    []string `json:"replySources"`
			} `json:"byCause"`
		} `json:"groups"`
	} `json:"facts"`
	Problems []struct {
		Kind     string `json:"kind"`
		Severity string `json:"severity"`
	} `json:"problems"`
}

func liveConntrack(t *testing.T, node string) ctReport {
	t.Helper()
	var r ctReport
	conntrackJSON(t, node, &r)
	return r
}

// conntrackJSON runs `conntrack --node NODE -o json` into report; it
// returns the plugin's stderr.
func conntrackJSON(t *testing.T, node string, report any) string {
	t.Helper()
	out, errOut, code := plugin(t, "conntrack", "--node", node, "-o", "json")
	if code != 0 && code != 2 && code != 3 {
		t.Fatalf("conntrack --node %s: exit %d\n%s", node, code, errOut)
	}
	if err := json.Unmarshal([]byte(out), report); err != nil {
		t.Fatalf("conntrack -o json: %v\n%s", err, out)
	}
	return errOut
}

func (r ctReport) group(target string) (servicePort string, entries, stale int, causes []string) {
	if r.Facts == nil {
		return "", 0, 0, nil
	}
	for _, g := range r.Facts.Groups {
		if g.Target == target || g.ServicePort == target {
			for _, c := range g.ByCause {
				causes = append(causes, fmt.Sprintf("%s:%d", c.Cause, c.Entries))
			}
			return g.ServicePort, g.Entries, g.Stale, causes
		}
	}
	return "", 0, 0, nil
}

func (r ctReport) has(kind string) bool {
	for _, p := range r.Problems {
		if p.Kind == kind {
			return true
		}
	}
	return false
}

// ctInsert puts an entry into node's conntrack table as the kernel keeps
// one for a DNATed UDP flow: client → vip:port, answered by reply.
func ctInsert(t *testing.T, node, client, vip string, sport int, reply string) {
	t.Helper()
	if out, err := inNode(node, "conntrack", "-I", "-p", "udp", "-s", client, "-d", vip, "--sport", fmt.Sprint(sport), "--dport", "53",
		"-r", reply, "-q", client, "--reply-port-src", "5353", "--reply-port-dst", fmt.Sprint(sport), "-t", "300", "-u", "SEEN_REPLY,ASSURED"); err != nil {
		t.Fatalf("conntrack -I in %s: %v\n%s", node, err, out)
	}
}

// ctCount is what the kernel itself lists: entries to vip.
func ctCount(t *testing.T, node, vip string) int {
	t.Helper()
	out, _ := inNode(node, "conntrack", "-L", "-p", "udp", "-d", vip)
	return strings.Count(string(out), "dst="+vip+" ")
}

// TestLiveConntrack: real kernel entries in node-a's table, read live
// through the debug pod (grep of /proc/net/nf_conntrack, filtered on the
// node) and judged: a healthy entry, one answered by a gone endpoint
// (which kube-proxy v1.37.2 cleans only at a UDP endpoint change), and
// those of a deleted UDP Service (which it never cleans, #141371), each
// counted as the kernel lists them; and a sysctl toggled in the node's
// namespace makes its finding appear and clear (issue 31, items 2 and 5).
func TestLiveConntrack(t *testing.T) {
	defer noDebugPods(t)
	const ns, node = "e2e-ct", "node-a"
	defs := withNamespace([]svcDef{
		{name: "dns", ports: []svcPort{{name: "dns", port: 53, target: 5353, proto: "UDP"}}, eps: []endpoint{{ip: "10.244.1.50", node: node}}},
		{name: "gone", ports: []svcPort{{name: "dns", port: 53, target: 5353, proto: "UDP"}}, eps: []endpoint{{ip: "10.244.1.51", node: node}}},
	}, ns)
	createObjects(t, namespaceObjects(ns)...)
	// Its Service is deleted at the end (a namespace is never, with no
	// controller-manager): other tests check that every chain belongs to
	// a Service they made, which is also why this file sorts last.
	defer run(nil, "kubectl", "-n", ns, "delete", "service,endpointslice", "--all", "--wait=false")
	marks := markAll(t)
	objs, svcEvents, sliceEvents := objectsOf(defs)
	createObjects(t, objs...)
	waitAll(t, marks, svcEvents, sliceEvents)
	vip := func(name string) string {
		return strings.TrimSpace(string(kubectl(t, "-n", ns, "get", "service", name, "-o", "jsonpath={.spec.clusterIP}")))
	}
	dnsIP, goneIP := vip("dns"), vip("gone")
	defer inNode(node, "conntrack", "-D", "-p", "udp", "-d", dnsIP)
	defer inNode(node, "conntrack", "-D", "-p", "udp", "-d", goneIP)
	ctInsert(t, node, "10.244.1.77", dnsIP, 41001, "10.244.1.50") // the serving endpoint
	ctInsert(t, node, "10.244.1.77", dnsIP, 41002, "10.244.9.99") // an endpoint that is gone
	ctInsert(t, node, "10.244.1.78", goneIP, 41003, "10.244.1.51")
	ctInsert(t, node, "10.244.1.79", goneIP, 41004, "10.244.1.51")

	// Delete the second Service: a UDP endpoint change, at which kube-proxy
	// v1.37.2 cleans the entry of dns answered by the gone endpoint, and
	// leaves those of the deleted Service (#141371).
	marks = markAll(t)
	kubectl(t, "-n", ns, "delete", "service", "gone")
	kubectl(t, "-n", ns, "delete", "endpointslice", sliceName(defs[1]))
	waitAll(t, marks, 1, 1)
	if n, m := ctCount(t, node, goneIP), ctCount(t, node, dnsIP); n != 2 || m != 1 {
		t.Fatalf("kernel: %d entries to the deleted Service's %s (want the 2 inserted: kube-proxy v1.37.2 leaves them), %d to dns (want 1: it cleaned the stale one)", n, goneIP, m)
	}
	// Answered by a gone endpoint since: kube-proxy cleans it at its next
	// UDP endpoint change, not before.
	ctInsert(t, node, "10.244.1.77", dnsIP, 41005, "10.244.9.99")

	r := liveConntrack(t, node)
	sp, entries, stale, causes := r.group(ns + "/dns:dns")
	if sp == "" || entries != ctCount(t, node, dnsIP) || entries != 2 || stale != 1 || len(causes) != 1 || causes[0] != "noEndpointChange:1" {
		t.Errorf("%s/dns:dns: %d entries (kernel lists %d), %d stale by %q; want 1 stale, kube-proxy's next endpoint change cleans it",
			ns, entries, ctCount(t, node, dnsIP), stale, causes)
	}
	_, entries, stale, causes = r.group(goneIP + ":53")
	if entries != 2 || stale != 2 || len(causes) != 1 || !strings.HasPrefix(causes[0], "deletedService:2") {
		t.Errorf("deleted Service %s:53: %d entries, %d stale by %q; want 2, both of a deleted Service", goneIP, entries, stale, causes)
	}
	if !r.has("staleUDP") || !r.has("staleUDPPending") {
		t.Errorf("problems %+v: want ConntrackStale (the deleted Service) and ConntrackStalePending", r.Problems)
	}

	// A sysctl of the node's namespace (the e2e nodes do not forward: no
	// pod traffic crosses them): forwarding on, then off, then as it was.
	was, err := inNode(node, "sysctl", "-n", "net.ipv4.ip_forward")
	if err != nil {
		t.Fatal(err)
	}
	defer inNode(node, "sysctl", "-qw", "net.ipv4.ip_forward="+strings.TrimSpace(string(was)))
	for _, tc := range []struct {
		value string
		want  bool
	}{{"1", false}, {"0", true}} {
		if _, err := inNode(node, "sysctl", "-qw", "net.ipv4.ip_forward="+tc.value); err != nil {
			t.Fatal(err)
		}
		if got := liveConntrack(t, node).has("forwardingOff"); got != tc.want {
			t.Errorf("net.ipv4.ip_forward=%s in %s: forwardingOff reported %v, want %v", tc.value, node, got, tc.want)
		}
	}
}
