package diagnose_test

import (
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/diagnose"
	"github.com/proxyrules/kubectl-proxyrules/inspect/iptables"
	"github.com/proxyrules/kubectl-proxyrules/internal/fixture"
)

// On every fixture kube-proxy has synced the objects it was given, so every
// service port of every form explains without an error, and the shares of
// each route add up to 1.
func TestExplainHealthyFixtures(t *testing.T) {
	for _, dir := range fixture.Scenarios(t) {
		objs := fixture.Objects(t, dir)
		for _, form := range fixture.Forms(t, dir) {
			if strings.Contains(dir, "sync-failure") {
				continue // the rules lag the objects on purpose: TestExplainFailedSync
			}
			t.Run(filepath.Base(dir)+"/"+form.Name, func(t *testing.T) {
				rs := fixture.ReadFiles(t, form.Files...)
				seen := map[string]bool{}
				ports := 0
				for _, sp := range objs.ServicePorts() {
					if seen[sp.Namespace+"/"+sp.Name] {
						continue
					}
					seen[sp.Namespace+"/"+sp.Name] = true
					ex, err := diagnose.ExplainService(&diagnose.Node{Name: "node-a", Ruleset: rs, Objects: objs}, sp.Namespace, sp.Name, "")
					if err != nil {
						t.Fatal(err)
					}
					for _, pp := range ex.Ports {
						ports++
						for _, p := range pp.Problems {
							if p.Severity == diagnose.SeverityError {
								t.Errorf("%s %s %s: %s", pp.ServicePort, pp.Mode, pp.Family, p.Message)
							}
						}
						for _, r := range pp.Routes {
							if len(r.Hops) > 0 && math.Abs(r.ShareSum-1) > 1e-6 {
								t.Errorf("%s %s route: shares add up to %v", pp.ServicePort, r.Traffic, r.ShareSum)
							}
						}
					}
				}
				if ports == 0 {
					t.Fatal("no service port explained")
				}
			})
		}
	}
}

func explainOne(t *testing.T, dumps []string, objectsDir, ns, name string) []diagnose.PortReport {
	t.Helper()
	rs := fixture.ReadFiles(t, dumps...)
	ex, err := diagnose.ExplainService(&diagnose.Node{Name: "node-a", Ruleset: rs, Objects: fixture.Objects(t, objectsDir)}, ns, name, "")
	if err != nil {
		t.Fatal(err)
	}
	return ex.Ports
}

func problemsOf(pps []diagnose.PortReport) string {
	var s []string
	for _, pp := range pps {
		for _, p := range pp.Problems {
			s = append(s, string(p.Severity)+": "+p.Message)
		}
	}
	return strings.Join(s, "\n")
}

// The rules of the first sync against the objects of the second: svc-001
// lost endpoints (still in the rules), svc-002 gained some (not yet in the
// rules). explain must say exactly that.
func TestExplainStaleRulesAgainstNewObjects(t *testing.T) {
	dir := filepath.Join(fixture.Root, "large-churn-v1.37")
	sync1 := []string{filepath.Join(dir, "iptables", "restore-ipv4.sync1.txt")}

	down := explainOne(t, sync1, dir, "load", "svc-001")
	if len(down) != 1 {
		t.Fatalf("ports: %d", len(down))
	}
	extra := 0
	for _, ep := range down[0].Endpoints {
		if ep.InRules && !ep.InSlices {
			extra++
		}
	}
	if extra == 0 || !strings.Contains(problemsOf(down), "in the rules but not in the EndpointSlices") {
		t.Errorf("scale-down not reported: %d extra endpoints\n%s", extra, problemsOf(down))
	}

	up := explainOne(t, sync1, dir, "load", "svc-002")
	missing := 0
	for _, ep := range up[0].Endpoints {
		if ep.InSlices && ep.Expected && !ep.InRules {
			missing++
		}
	}
	if missing == 0 || !strings.Contains(problemsOf(up), "no rule reaches them") {
		t.Errorf("scale-up not reported: %d missing endpoints\n%s", missing, problemsOf(up))
	}
	// Shares in the rules still add up: the cascade is consistent.
	for _, r := range up[0].Routes {
		if math.Abs(r.ShareSum-1) > 1e-6 {
			t.Errorf("route %s shares %v", r.Traffic, r.ShareSum)
		}
	}
}

// Every endpoint of a 20-endpoint service gets 1/20, whether the cascade is
// read from iptables-save, from the restore input or through nft.
func TestExplainSharesFromProbabilityCascade(t *testing.T) {
	dir := filepath.Join(fixture.Root, "large-v1.37")
	for _, f := range []string{"iptables/save-nft-ipv4.txt", "iptables/restore-ipv4.txt", "iptables/nft-list.txt", "nftables/ruleset.json"} {
		pps := explainOne(t, []string{filepath.Join(dir, f)}, dir, "load", "svc-000")
		for _, pp := range pps {
			if pp.Family != "IPv4" {
				continue
			}
			if len(pp.Endpoints) != 20 {
				t.Fatalf("%s: %d endpoints", f, len(pp.Endpoints))
			}
			for _, ep := range pp.Endpoints {
				if math.Abs(ep.Share-0.05) > 1e-6 || !ep.InRules || !ep.InSlices {
					t.Errorf("%s: %+v", f, ep)
				}
			}
		}
	}
}

func TestExplainErrors(t *testing.T) {
	dir := filepath.Join(fixture.Root, "small-v1.37")
	rs := fixture.ReadFiles(t, filepath.Join(dir, "iptables", "save-nft-ipv4.txt"))
	objs := fixture.Objects(t, dir)
	if _, err := diagnose.ExplainService(&diagnose.Node{Ruleset: rs, Objects: objs}, "nope", "nope", ""); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("unknown service: %v", err)
	}
	if _, err := diagnose.ExplainService(&diagnose.Node{Ruleset: rs, Objects: nil}, "shop", "web", ""); err == nil {
		t.Error("explain without objects must fail")
	}
}

// sync-failure: kube-proxy could not apply the replacement of shop/ingress's
// local pod (10.244.0.51 → .52), so the rules still send external traffic to
// the old address.
func TestExplainFailedSync(t *testing.T) {
	dir := filepath.Join(fixture.Root, "sync-failure-v1.37")
	pps := explainOne(t, []string{filepath.Join(dir, "iptables", "save-nft-ipv4.txt")}, dir, "shop", "ingress")
	p := problemsOf(pps)
	if !strings.Contains(p, "10.244.0.51:8080 is in the rules but not in the EndpointSlices") || !strings.Contains(p, "10.244.0.52:8080 is in the EndpointSlices") {
		t.Errorf("problems:\n%s", p)
	}
}

// internalTrafficPolicy Local with ready endpoints on other nodes only:
// kube-proxy writes no nat entry and DROPs the cluster IP in filter
// KUBE-SERVICES ("has no local endpoints"). The rule below is what
// kube-proxy v1.37.2 wrote on the e2e cluster's node-a for this Service.
func TestExplainInternalLocalNoLocalEndpoints(t *testing.T) {
	objects := `{"apiVersion":"v1","kind":"List","items":[
{"apiVersion":"v1","kind":"Service","metadata":{"name":"itp-local-remote","namespace":"e2e-svc"},
 "spec":{"clusterIP":"10.96.95.86","clusterIPs":["10.96.95.86"],"internalTrafficPolicy":"Local","ipFamilies":["IPv4"],
  "ports":[{"name":"http","port":80,"protocol":"TCP","targetPort":8080}],"type":"ClusterIP"}},
{"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice","metadata":{"name":"itp-local-remote-1","namespace":"e2e-svc","labels":{"kubernetes.io/service-name":"itp-local-remote"}},
 "addressType":"IPv4","endpoints":[{"addresses":["10.244.2.21"],"conditions":{"ready":true,"serving":true,"terminating":false},"nodeName":"node-b"}],
 "ports":[{"name":"http","port":8080,"protocol":"TCP"}]}]}`
	// With the built-in chains' jumps kube-proxy writes, so that the walk
	// meets the DROP as a pod's connection does.
	rules := `*filter
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:KUBE-SERVICES - [0:0]
-A FORWARD -m conntrack --ctstate NEW -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A OUTPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A KUBE-SERVICES -d 10.96.95.86/32 -p tcp -m comment --comment "e2e-svc/itp-local-remote:http has no local endpoints" -m tcp --dport 80 -j DROP
COMMIT
*nat
:PREROUTING ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:KUBE-SERVICES - [0:0]
-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
COMMIT
`
	objs, err := correlate.ReadObjects(strings.NewReader(objects), "objects.json")
	if err != nil {
		t.Fatal(err)
	}
	rs, err := iptables.Parse(strings.NewReader(rules), "node-a")
	if err != nil {
		t.Fatal(err)
	}
	ex, err := diagnose.ExplainService(&diagnose.Node{Name: "node-a", Ruleset: rs, Objects: objs}, "e2e-svc", "itp-local-remote", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(ex.Ports) != 1 {
		t.Fatalf("%d ports", len(ex.Ports))
	}
	pp := ex.Ports[0]
	found := false
	for _, e := range pp.Entries {
		found = found || e.Kind == "noLocalEndpoints" && e.Address == "10.96.95.86:80" && e.Target == "DROP"
	}
	if !found {
		t.Errorf("entries %+v, want the noLocalEndpoints DROP of 10.96.95.86:80", pp.Entries)
	}
	for _, p := range pp.Problems {
		if p.Severity != diagnose.SeverityInfo {
			t.Errorf("%s: %s", p.Severity, p.Message)
		}
	}
	// The walk reaches kube-proxy's DROP, and knows it for kube-proxy's.
	if len(pp.Routes) == 0 || len(pp.Routes[0].Other) != 1 || pp.Routes[0].Other[0].Verdict != "drop" || !pp.Routes[0].Other[0].KubeProxys {
		t.Errorf("routes %+v, want the cluster IP dropped by kube-proxy's rule", pp.Routes)
	}
	// Without the DROP, kube-proxy did not program the Service: an error.
	rs, _ = iptables.Parse(strings.NewReader("*filter\n:KUBE-SERVICES - [0:0]\nCOMMIT\n*nat\n:KUBE-SERVICES - [0:0]\nCOMMIT\n"), "node-a")
	ex, _ = diagnose.ExplainService(&diagnose.Node{Name: "node-a", Ruleset: rs, Objects: objs}, "e2e-svc", "itp-local-remote", "")
	if !strings.Contains(problemsOf(ex.Ports), "error: no KUBE-SERVICES rule for the cluster IP 10.96.95.86:80") {
		t.Errorf("without any rule: %s", problemsOf(ex.Ports))
	}
}
