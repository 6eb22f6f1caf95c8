package diagnose_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/diagnose"
	"github.com/proxyrules/kubectl-proxyrules/inspect/metrics"
	"github.com/proxyrules/kubectl-proxyrules/internal/fixture"
)

// An outage the rules get right: every shop/checkout pod failed its
// readiness probe and kube-proxy wrote its "has no endpoints" reject
// (outage-v1.37, kube-proxy's own rules after the churn). The rules are
// right, and still the Service gets no traffic: that is the finding, with
// where to look, in triage and explain, in every form of the rules.
func TestNoneReadyIsAFinding(t *testing.T) {
	dir := fixture.Dir("outage-v1.37")
	objs := fixture.Objects(t, dir)
	for _, form := range fixture.Forms(t, dir) {
		t.Run(form.Name, func(t *testing.T) {
			n := &diagnose.Node{Name: "node-a", Ruleset: fixture.ReadFiles(t, form.Files...), Objects: objs}
			rep := diagnose.Triage(n)
			var about []diagnose.Finding
			for _, f := range rep.Findings {
				if strings.Contains(f.Subject, "shop/checkout") {
					about = append(about, f)
				}
			}
			if len(about) != 1 {
				t.Fatalf("findings about shop/checkout: %+v, want exactly the one", about)
			}
			f := about[0]
			if f.Severity != diagnose.SeverityWarning || f.Kind != diagnose.ProblemNoneReady {
				t.Errorf("finding %+v, want a warning of kind %s", f, diagnose.ProblemNoneReady)
			}
			for _, want := range []string{"0 of 3 endpoints ready", "connection refused (REJECT)", "kubectl get pods -n shop -l app=checkout"} {
				if !strings.Contains(f.Message, want) {
					t.Errorf("message %q lacks %q", f.Message, want)
				}
			}
			if rep.Status != diagnose.StatusProblems {
				t.Errorf("status %s, want problems (exit 2)", rep.Status)
			}
			// The verdict line names the Service and what is wrong.
			if !strings.Contains(rep.Verdict, "service shop/checkout:http") || !strings.Contains(rep.Verdict, ": 0 of 3 endpoints ready") {
				t.Errorf("verdict %q does not name the Service and the outage", rep.Verdict)
			}
			ex, err := diagnose.ExplainService(n, "shop", "checkout", "")
			if err != nil {
				t.Fatal(err)
			}
			if ps := ex.Ports[0].Problems; len(ps) != 1 || ps[0].Kind != diagnose.ProblemNoneReady {
				t.Errorf("explain problems %+v, want the one noneReady", ps)
			}
		})
	}
}

// The same objects against the rules of the first sync, when the pods were
// still ready: kube-proxy has not caught up, so the rules still send to
// the unready endpoints; the readiness finding says what kube-proxy will do.
// Terminating endpoints that still serve are not an outage.
func TestNoneReadyBeforeTheSync(t *testing.T) {
	dir := fixture.Dir("outage-v1.37")
	n := &diagnose.Node{Name: "node-a", Ruleset: fixture.ReadFiles(t, filepath.Join(dir, "iptables", "restore-ipv4.sync1.txt")), Objects: fixture.Objects(t, dir)}
	ex, err := diagnose.ExplainService(n, "shop", "checkout", "")
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]string{}
	for _, p := range ex.Ports[0].Problems {
		kinds[p.Kind] = p.Message
	}
	if !strings.Contains(kinds[diagnose.ProblemNoneReady], "will once it syncs") || kinds[diagnose.ProblemUnexpected] == "" {
		t.Errorf("problems %v, want noneReady (will reject once it syncs) and the unexpected endpoints", kinds)
	}
	small := &diagnose.Node{Name: "node-a", Ruleset: fixture.ReadFiles(t, filepath.Join(fixture.Dir("small-v1.37"), "iptables", "save-nft-ipv4.txt")), Objects: fixture.Objects(t, fixture.Dir("small-v1.37"))}
	draining, err := diagnose.ExplainService(small, "shop", "draining", "")
	if err != nil {
		t.Fatal(err)
	}
	if ps := draining.Ports[0].Problems; len(ps) != 0 {
		t.Errorf("shop/draining (terminating, serving) problems %+v, want none", ps)
	}
}

// withoutService is the fault: the Service and its slices are deleted
// from the API, and kube-proxy did not sync since.
func withoutService(objs *correlate.Objects, ns, name string) *correlate.Objects {
	out := &correlate.Objects{Other: objs.Other}
	for _, s := range objs.Services {
		if s.Namespace != ns || s.Name != name {
			out.Services = append(out.Services, s)
		}
	}
	for _, s := range objs.EndpointSlices {
		if s.Namespace != ns || s.Labels["kubernetes.io/service-name"] != name {
			out.EndpointSlices = append(out.EndpointSlices, s)
		}
	}
	return out
}

func fixtureMetrics(t *testing.T, dir, mode string) *metrics.Metrics {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "metrics-"+mode+".txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := metrics.Parse(f, "metrics")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// A deleted Service that is still routed is named on triage's first screen:
// the Service, its address, where the rules send it, what keeps it there
// and the fix; the rule counts that still count it are its symptom.
func TestDeletedServiceStillRouted(t *testing.T) {
	dir := fixture.Dir("small-v1.37")
	objs := withoutService(fixture.Objects(t, dir), "shop", "web")
	for _, form := range fixture.Forms(t, dir) {
		if !form.Comments {
			// Without comments and without the Service, nothing names
			// the former owner: TestDeletedServiceWithoutComments.
			continue
		}
		t.Run(form.Name, func(t *testing.T) {
			n := &diagnose.Node{Name: "node-a", Ruleset: fixture.ReadFiles(t, form.Files...), Objects: objs,
				Metrics: []*metrics.Metrics{fixtureMetrics(t, dir, form.Mode)}}
			rep := diagnose.Triage(n)
			first := rep.Findings[0]
			if first.Title != "deleted Service shop/web still routed" || first.Severity != diagnose.SeverityError || first.Remedy == "" {
				t.Fatalf("first finding %+v, want the deleted Service as a cause with a fix", first)
			}
			for _, want := range []string{"10.96.10.1:80", "3 endpoints that are gone", "10.244.0.11:8080", "has not synced since", "its last IPv4 sync was at"} {
				if !strings.Contains(first.Message, want) {
					t.Errorf("message %q lacks %q", first.Message, want)
				}
			}
			if !strings.Contains(rep.Verdict, "deleted Service shop/web still routed") {
				t.Errorf("verdict %q does not name the Service", rep.Verdict)
			}
			for _, f := range rep.Findings[1:] {
				if f.Severity != diagnose.SeverityInfo {
					t.Errorf("another finding beside the cause: %+v", f)
				}
			}
			ex, ok := diagnose.ExplainFormerService(n, correlate.FormerServiceMatch{Address: "10.96.10.1", Port: 80}, "")
			if !ok || !ex.Deleted || len(ex.Ports) != 1 {
				t.Fatalf("explain of the deleted Service by its address: %v %+v", ok, ex)
			}
			p := ex.Ports[0]
			if p.ServicePort != "shop/web:http" || len(p.Problems) == 0 || p.Problems[0].Kind != diagnose.ProblemDeletedService {
				t.Errorf("deleted Service's port %s problems %+v", p.ServicePort, p.Problems)
			}
			reached := 0
			for _, e := range p.Endpoints {
				if e.InRules && !e.InSlices {
					reached++
				}
			}
			if reached != 3 {
				t.Errorf("%d endpoints that are gone reached, want 3: %+v", reached, p.Endpoints)
			}
		})
	}
}

// When kube-proxy's restores fail, the deleted Service still routed is a
// symptom of that cause, named as a Service there (not as hashes).
func TestDeletedServiceUnderFailingRestores(t *testing.T) {
	dir := fixture.Dir("sync-failure-v1.37")
	n := &diagnose.Node{Name: "node-a", Ruleset: fixture.ReadFiles(t, filepath.Join(dir, "iptables", "save-nft-ipv4.txt")),
		Objects: withoutService(fixture.Objects(t, dir), "shop", "web"), Metrics: []*metrics.Metrics{fixtureMetrics(t, dir, "iptables")}}
	rep := diagnose.Triage(n)
	first := rep.Findings[0]
	if first.Area != "sync" {
		t.Fatalf("first finding %+v, want the failing restores", first)
	}
	named := false
	for _, s := range first.Symptoms {
		named = named || s.Subject == "service shop/web (deleted)" && strings.Contains(s.Message, "10.96.10.1:80")
	}
	if !named {
		t.Errorf("the deleted Service is not among the restore failure's symptoms: %+v", first.Symptoms)
	}
}

// Without kube-proxy's comments (iptables-nft read through nft) the
// deleted Service's name cannot be recovered, but where its traffic goes
// can: the finding says both.
func TestDeletedServiceWithoutComments(t *testing.T) {
	dir := fixture.Dir("small-v1.37")
	n := &diagnose.Node{Name: "node-a", Ruleset: fixture.ReadFiles(t, filepath.Join(dir, "iptables", "nft-list.txt")),
		Objects: withoutService(fixture.Objects(t, dir), "shop", "web")}
	rep := diagnose.Triage(n)
	first := rep.Findings[0]
	for _, want := range []string{"former owner unknown", "10.96.10.1:80", "3 endpoints that are gone"} {
		if !strings.Contains(first.Message, want) {
			t.Errorf("first finding %q lacks %q", first.Message, want)
		}
	}
}
