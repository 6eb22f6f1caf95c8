package correlate_test

import (
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
)

// On every fixture kube-proxy has synced the objects it was given, so every
// service port of every form explains without an error, and the shares of
// each route add up to 1.
func TestExplainHealthyFixtures(t *testing.T) {
	for _, dir := range scenarios(t) {
		objs := loadObjects(t, dir)
		for _, form := range forms(dir) {
			if strings.Contains(dir, "sync-failure") {
				continue // the rules lag the objects on purpose: TestExplainFailedSync
			}
			t.Run(filepath.Base(dir)+"/"+form.name, func(t *testing.T) {
				rs := readDumps(t, form.files...)
				seen := map[string]bool{}
				ports := 0
				for _, sp := range objs.ServicePorts() {
					if seen[sp.Namespace+"/"+sp.Name] {
						continue
					}
					seen[sp.Namespace+"/"+sp.Name] = true
					ex, err := correlate.Explain(rs, objs, correlate.ExplainOptions{Namespace: sp.Namespace, Name: sp.Name, Node: "node-a"})
					if err != nil {
						t.Fatal(err)
					}
					for _, pp := range ex.Ports {
						ports++
						for _, p := range pp.Problems {
							if p.Severity == correlate.SeverityError {
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

func explainOne(t *testing.T, dumps []string, objectsDir, ns, name string) []correlate.PortPath {
	t.Helper()
	rs := readDumps(t, dumps...)
	ex, err := correlate.Explain(rs, loadObjects(t, objectsDir), correlate.ExplainOptions{Namespace: ns, Name: name, Node: "node-a"})
	if err != nil {
		t.Fatal(err)
	}
	return ex.Ports
}

func problemsOf(pps []correlate.PortPath) string {
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
	dir := filepath.Join(fixtureRoot, "large-churn-v1.37")
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
	dir := filepath.Join(fixtureRoot, "large-v1.37")
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
	dir := filepath.Join(fixtureRoot, "small-v1.37")
	rs := readDumps(t, filepath.Join(dir, "iptables", "save-nft-ipv4.txt"))
	objs := loadObjects(t, dir)
	if _, err := correlate.Explain(rs, objs, correlate.ExplainOptions{Namespace: "nope", Name: "nope"}); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("unknown service: %v", err)
	}
	if _, err := correlate.Explain(rs, nil, correlate.ExplainOptions{Namespace: "shop", Name: "web"}); err == nil {
		t.Error("explain without objects must fail")
	}
}

// sync-failure: kube-proxy could not apply the replacement of shop/ingress's
// local pod (10.244.0.51 → .52), so the rules still send external traffic to
// the old address.
func TestExplainFailedSync(t *testing.T) {
	dir := filepath.Join(fixtureRoot, "sync-failure-v1.37")
	pps := explainOne(t, []string{filepath.Join(dir, "iptables", "save-nft-ipv4.txt")}, dir, "shop", "ingress")
	p := problemsOf(pps)
	if !strings.Contains(p, "10.244.0.51:8080 is in the rules but not in the EndpointSlices") || !strings.Contains(p, "10.244.0.52:8080 is in the EndpointSlices") {
		t.Errorf("problems:\n%s", p)
	}
}
