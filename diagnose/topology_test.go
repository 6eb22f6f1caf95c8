package diagnose_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"

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

// withoutServices drops the Services (and their slices) named, so that
// the evidence they give is gone.
func withoutServices(objs *correlate.Objects, ns string, names ...string) {
	objs.Services = slices.DeleteFunc(objs.Services, func(s *corev1.Service) bool { return s.Namespace == ns && slices.Contains(names, s.Name) })
	objs.EndpointSlices = slices.DeleteFunc(objs.EndpointSlices, func(s *discoveryv1.EndpointSlice) bool {
		return s.Namespace == ns && slices.Contains(names, s.Labels[discoveryv1.LabelServiceName])
	})
	objs.Add(&correlate.Objects{}) // drop the cached service ports
}

// inZone puts the Node named (a new one when there is none) in zone.
func inZone(objs *correlate.Objects, node, zone string) {
	if n := objs.Node(node); n != nil {
		n.Labels[corev1.LabelTopologyZone] = zone
		return
	}
	n := &corev1.Node{}
	n.Name, n.Labels = node, map[string]string{corev1.LabelTopologyZone: zone}
	objs.Add(&correlate.Objects{Other: []runtime.Object{n}})
}

// node-a's dump (zone-a) judged as another node's: the endpoints its
// zone-hinted and PreferSameNode Services program say whose it is, said
// once, with every disagreement of those Services as its symptom; on the
// right node, or where nothing tells the nodes apart, nothing is said.
func TestTopologyTellsAnotherNode(t *testing.T) {
	dir := fixture.Dir("topology-v1.37")
	local := []string{"zonal-local", "zonal-lb"}             // Local-policy evidence
	sameNode := []string{"same-node", "same-node-elsewhere"} // node hints
	for _, tc := range []struct {
		name       string
		node       string
		nodes      bool              // nodes.json given
		zones      map[string]string // node → zone, changed or added
		drop       []string          // Services left out of the objects
		first      string            // the identity finding; "" for none
		evidence   []string          // in it
		notInIt    []string          // not in it
		notChecked string            // in a gap
	}{
		{name: "right node", node: "node-a", nodes: true},
		{name: "right node, zone not known", node: "node-a"},
		{name: "another zone", node: "node-b", nodes: true, first: "the dump is of node node-a, not node-b",
			evidence: []string{"Local-policy chains of 2 Services", "node hints (topo/same-node) hold the endpoints hinted for node-a", "hold the endpoints hinted for zone-a, none those for node-b's zone (zone-b)"}},
		{name: "another zone, only zones tell", node: "node-c", nodes: true, drop: append(local, sameNode...), first: "the dump is of node node-a, not node-c",
			evidence: []string{"Services with zone hints", "none those for node-c's zone (zone-c), and node-a is the only Node in zone-a"}, notInIt: []string{"Local-policy chains", "node hints"}},
		{name: "another zone of two nodes, only zones tell", node: "node-b", nodes: true, zones: map[string]string{"node-d": "zone-a"}, drop: append(local, sameNode...),
			first: "the dump is of a node in zone-a, not node-b", evidence: []string{"none those for node-b's zone (zone-b)"}, notInIt: []string{"only Node"}},
		{name: "same zone, only PreferSameNode tells", node: "node-b", nodes: true, zones: map[string]string{"node-b": "zone-a"}, drop: local,
			first: "the dump is of node node-a, not node-b", evidence: []string{"node hints (topo/same-node) hold the endpoints hinted for node-a"}, notInIt: []string{"zone hints"}},
		{name: "same zone, nothing tells", node: "node-d", nodes: true, zones: map[string]string{"node-d": "zone-a"}, drop: local},
		{name: "zone not known", node: "node-b", first: "the dump is of node node-a, not node-b",
			evidence: []string{"Local-policy chains", "node hints (topo/same-node)"}, notInIt: []string{"zone hints"}},
		{name: "zone not known, only zones could tell", node: "node-b", drop: append(local, sameNode...),
			notChecked: "that the dump is node-b's, by the zone its rules were written for (the rules of 4 Services with zone hints"},
	} {
		for _, form := range fixture.Forms(t, dir) {
			t.Run(tc.name+"/"+form.Name, func(t *testing.T) {
				objs := topologyObjects(t, tc.nodes)
				for node, zone := range tc.zones {
					inZone(objs, node, zone)
				}
				withoutServices(objs, "topo", tc.drop...)
				rep := diagnose.Triage(&diagnose.Node{Name: tc.node, Ruleset: fixture.ReadFiles(t, form.Files...), Objects: objs})
				for i, f := range rep.Findings {
					if f.Area == "stale" {
						continue // the chains of the Services left out
					}
					if i > 0 || tc.first == "" || f.Area != "identity" {
						if f.Severity != diagnose.SeverityInfo {
							t.Errorf("finding %d: %s %s %s: %s", i, f.Severity, f.Area, f.Subject, f.Message)
						}
						continue
					}
					if f.Title != tc.first {
						t.Errorf("identity %q, want %q", f.Title, tc.first)
					}
					for _, s := range tc.evidence {
						if !strings.Contains(f.Message, s) {
							t.Errorf("identity lacks %q: %s", s, f.Message)
						}
					}
					for _, s := range tc.notInIt {
						if strings.Contains(f.Message, s) {
							t.Errorf("identity has %q: %s", s, f.Message)
						}
					}
				}
				if tc.first != "" && (len(rep.Findings) == 0 || rep.Findings[0].Area != "identity") {
					t.Errorf("no identity finding first: %+v", rep.Findings)
				}
				if tc.notChecked != "" && !slices.ContainsFunc(rep.NotChecked, func(g diagnose.Gap) bool { return strings.Contains(g.Check, tc.notChecked) }) {
					t.Errorf("not checked %+v, want %q", rep.NotChecked, tc.notChecked)
				}
			})
		}
	}
}

// explain of one Service of node-a's dump, judged as another node's: its
// own rules say so once, instead of endpoints missing and unexpected.
func TestTopologyExplainAnotherNode(t *testing.T) {
	dir := fixture.Dir("topology-v1.37")
	for _, tc := range []struct {
		svc, node string
		nodes     bool
		other     string // the problem's start; "" for no problem at all
	}{
		{"zonal", "node-a", true, ""},
		{"zonal", "node-b", true, "the dump is of node node-a, not node-b: the rules of 1 Service with zone hints (topo/zonal) hold the endpoints hinted for zone-a, none those for node-b's zone (zone-b)"},
		{"same-node", "node-b", false, "the dump is of node node-a, not node-b: the rules of 1 Service with node hints (topo/same-node)"},
		{"zonal-local", "node-c", true, "the dump is of node node-a, not node-c: the Local-policy chains of 1 Service (topo/zonal-local)"},
		{"zonal", "node-b", false, ""}, // the zone not known: notes only
	} {
		for _, form := range fixture.Forms(t, dir) {
			t.Run(tc.svc+"/"+tc.node+"/"+form.Name, func(t *testing.T) {
				n := &diagnose.Node{Name: tc.node, Ruleset: fixture.ReadFiles(t, form.Files...), Objects: topologyObjects(t, tc.nodes)}
				ex, err := diagnose.ExplainService(n, "topo", tc.svc, "")
				if err != nil {
					t.Fatal(err)
				}
				var got []diagnose.Problem
				for _, pp := range ex.Ports {
					for _, p := range pp.Problems {
						if p.Severity != diagnose.SeverityInfo {
							got = append(got, p)
						}
					}
				}
				switch {
				case tc.other == "" && len(got) > 0:
					t.Errorf("problems %+v", got)
				case tc.other != "" && (len(got) != 1 || got[0].Kind != diagnose.ProblemOtherNode || !strings.HasPrefix(got[0].Message, tc.other)):
					t.Errorf("problems %+v, want one %s starting %q", got, diagnose.ProblemOtherNode, tc.other)
				}
			})
		}
	}
}
