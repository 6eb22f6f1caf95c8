package diagnose_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/diagnose"
	"github.com/proxyrules/kubectl-proxyrules/internal/fixture"
)

// topologyObjects are the topology scenario's Services and slices, with
// its Nodes when withNodes.
func topologyObjects(t *testing.T, withNodes bool) *correlate.Objects {
	dir := fixture.Dir("topology-v1.37")
	objs := fixture.Objects(t, dir)
	if withNodes {
		text, ok := fixture.Text(t, dir, "nodes.json")
		if !ok {
			t.Fatal("no nodes.json")
		}
		nodes, err := correlate.ReadObjects(strings.NewReader(text), "nodes.json")
		if err != nil {
			t.Fatal(err)
		}
		objs.Add(nodes)
	}
	return objs
}

// On rules kube-proxy v1.37.2 wrote after being told node-a is in zone-a,
// every endpoint is expected exactly where kube-proxy programmed it, in
// every form of both modes: no error or warning, and the hinted-away
// endpoints are not called missing.
func TestTopologyExpectationsMatchKubeProxy(t *testing.T) {
	dir := fixture.Dir("topology-v1.37")
	objs := topologyObjects(t, true)
	for _, form := range fixture.Forms(t, dir) {
		t.Run(form.Name, func(t *testing.T) {
			n := &diagnose.Node{Name: "node-a", Ruleset: fixture.ReadFiles(t, form.Files...), Objects: objs}
			modes := map[string]int{}
			for _, svc := range []string{"zonal", "close", "same-node", "same-node-elsewhere", "partial-hints", "other-zones", "zonal-local", "zonal-lb", "zonal-draining", "zonal-dual", "zonal-sticky"} {
				ex, err := diagnose.ExplainService(n, "topo", svc, "")
				if err != nil {
					t.Fatal(err)
				}
				if ex.Zone != "zone-a" {
					t.Fatalf("zone %q", ex.Zone)
				}
				for _, pp := range ex.Ports {
					modes[pp.Topology]++
					for _, p := range pp.Problems {
						if p.Severity != diagnose.SeverityInfo {
							t.Errorf("%s %s %s: %s: %s", svc, pp.Mode, pp.Family, p.Severity, p.Message)
						}
					}
					for _, ep := range pp.Endpoints {
						if ep.Expected != ep.InRules || ep.ExpectedUnknown || ep.Why == "" {
							t.Errorf("%s %s %s %s: expected %v, in rules %v, unknown %v, why %q", svc, pp.Mode, pp.Family, ep.Endpoint, ep.Expected, ep.InRules, ep.ExpectedUnknown, ep.Why)
						}
					}
				}
			}
			if modes["PreferSameZone"] == 0 || modes["PreferSameNode"] == 0 || modes[""] == 0 {
				t.Errorf("topology modes seen: %v", modes)
			}
		})
	}
}

// The cases kube-proxy decides, one by one, with the reason explain gives.
func TestTopologyWhy(t *testing.T) {
	dir := fixture.Dir("topology-v1.37")
	n := &diagnose.Node{Name: "node-a", Ruleset: fixture.ReadFiles(t, dir+"/iptables/save-nft-ipv4.txt"), Objects: topologyObjects(t, true)}
	for _, tc := range []struct {
		svc, endpoint, topology string
		expected                bool
		why                     string
	}{
		{"zonal", "10.244.0.100:8080", "PreferSameZone", true, "hinted for this node's zone (zone-a)"},
		{"zonal", "10.244.1.101:8080", "PreferSameZone", false, "hinted for zone zone-b, not for this node's zone (zone-a)"},
		{"same-node", "10.244.0.120:8080", "PreferSameNode", true, "hinted for this node (node-a)"},
		{"same-node", "10.244.2.122:8080", "PreferSameNode", false, "hinted for node node-c, zone zone-c, not for this node (node-a)"},
		{"same-node-elsewhere", "10.244.1.130:8080", "", true, "ready"},
		{"partial-hints", "10.244.1.141:8080", "", true, "ready"},
		{"other-zones", "10.244.0.150:8080", "", true, "ready"},
		{"zonal-local", "10.244.1.161:8080", "", false, "on node-b: the Local policy uses only this node's endpoints"},
		{"zonal-lb", "10.244.1.171:8080", "PreferSameZone", false, "internal: hinted for zone zone-b"},
		{"zonal-draining", "10.244.0.180:8080", "", false, "terminating: not used while a ready endpoint exists"},
	} {
		ex, err := diagnose.ExplainService(n, "topo", tc.svc, "")
		if err != nil {
			t.Fatal(err)
		}
		pp := ex.Ports[0]
		i := slices.IndexFunc(pp.Endpoints, func(e correlate.EndpointPath) bool { return e.Endpoint == tc.endpoint })
		if i < 0 {
			t.Fatalf("%s: no endpoint %s in %+v", tc.svc, tc.endpoint, pp.Endpoints)
		}
		ep := pp.Endpoints[i]
		if pp.Topology != tc.topology || ep.Expected != tc.expected || !strings.Contains(ep.Why, tc.why) {
			t.Errorf("%s %s: topology %q expected %v why %q; want %q %v %q", tc.svc, tc.endpoint, pp.Topology, ep.Expected, ep.Why, tc.topology, tc.expected, tc.why)
		}
	}
}

// Without the Node object the zone is unknown: never an error for a
// hinted-away endpoint, a note naming the missing input, and the report
// says it is incomplete.
func TestTopologyZoneUnknown(t *testing.T) {
	dir := fixture.Dir("topology-v1.37")
	n := &diagnose.Node{Name: "node-a", Ruleset: fixture.ReadFiles(t, dir+"/nftables/ruleset.json"), Objects: topologyObjects(t, false)}
	ex, err := diagnose.ExplainService(n, "topo", "zonal", "")
	if err != nil {
		t.Fatal(err)
	}
	pp := ex.Ports[0]
	if pp.Topology != "unknown" {
		t.Fatalf("topology %q", pp.Topology)
	}
	for _, p := range pp.Problems {
		if p.Severity != diagnose.SeverityInfo {
			t.Errorf("%s: %s", p.Severity, p.Message)
		}
	}
	if ex.Status != diagnose.StatusIncomplete || len(ex.NotChecked) == 0 || !strings.Contains(ex.NotChecked[0].Remedy, "kubectl get nodes") {
		t.Errorf("status %s, not checked %+v", ex.Status, ex.NotChecked)
	}
	rep := diagnose.Triage(n)
	if rep.Summary[diagnose.SeverityError]+rep.Summary[diagnose.SeverityWarning] != 0 {
		t.Errorf("triage without the zone: %+v", rep.Findings)
	}
}

// An endpoint added in the node's own zone that kube-proxy has not synced
// is an error; one added in another zone is not (kube-proxy rightly leaves
// it out).
func TestTopologyUnsyncedEndpointInZone(t *testing.T) {
	dir := fixture.Dir("topology-v1.37")
	for _, tc := range []struct {
		ip, node string
		missing  bool
	}{{"10.244.0.199", "node-a", true}, {"10.244.1.199", "node-b", false}} {
		objs := topologyObjects(t, true)
		addEndpoint(t, objs, "topo", "zonal", tc.ip, tc.node)
		n := &diagnose.Node{Name: "node-a", Ruleset: fixture.ReadFiles(t, dir+"/iptables/save-nft-ipv4.txt"), Objects: objs}
		rep := diagnose.Triage(n)
		errs := rep.Summary[diagnose.SeverityError]
		if tc.missing {
			if errs != 1 || !strings.Contains(rep.Findings[0].Message, tc.ip+":8080 is in the EndpointSlices") {
				t.Errorf("%s: %d errors, first %+v", tc.ip, errs, rep.Findings)
			}
		} else if errs != 0 || rep.Summary[diagnose.SeverityWarning] != 0 {
			t.Errorf("%s in another zone: %+v", tc.ip, rep.Findings)
		}
	}
}

// addEndpoint adds a ready endpoint, hinted for its own zone, to the
// Service's IPv4 slice.
func addEndpoint(t *testing.T, objs *correlate.Objects, ns, svc, ip, node string) {
	t.Helper()
	for _, s := range objs.EndpointSlices {
		if s.Namespace != ns || s.Labels[discoveryv1.LabelServiceName] != svc || s.AddressType != discoveryv1.AddressTypeIPv4 {
			continue
		}
		var ep discoveryv1.Endpoint
		raw := fmt.Sprintf(`{"addresses":[%q],"conditions":{"ready":true,"serving":true,"terminating":false},"nodeName":%q,"zone":%q,"hints":{"forZones":[{"name":%q}]}}`,
			ip, node, "zone-"+strings.TrimPrefix(node, "node-"), "zone-"+strings.TrimPrefix(node, "node-"))
		if err := json.Unmarshal([]byte(raw), &ep); err != nil {
			t.Fatal(err)
		}
		s.Endpoints = append(s.Endpoints, ep)
		objs.Add(&correlate.Objects{}) // drop the cached service ports
		return
	}
	t.Fatalf("no IPv4 slice of %s/%s", ns, svc)
}
