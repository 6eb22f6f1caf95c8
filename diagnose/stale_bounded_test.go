package diagnose_test

import (
	"fmt"
	"strings"
	"testing"

	"sigs.k8s.io/knftables"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/diagnose"
	"github.com/proxyrules/kubectl-proxyrules/internal/fixture"
)

// A set holding many stale cluster IPs (issue 30, item 5: a million of them
// made a million ERROR findings, 1.7 GB): kube-proxy's own rules of
// small-v1.37 with addresses no Service has added to cluster-ips. The
// first MaxStaleElementsListed are listed, one finding each; the rest are
// one ERROR finding that counts them exactly, in triage and in stale.
func TestStaleElementsBounded(t *testing.T) {
	dir := fixture.Dir("small-v1.37")
	limit := correlate.MaxStaleElementsListed
	for _, tc := range []struct {
		name         string
		added        int
		listed, more int
	}{
		{"a few", 3, 3, 0},
		{"at the bound", limit, limit, 0},
		{"one past", limit + 1, limit, 1},
		{"many", 5000, limit, 5000 - limit},
	} {
		for _, form := range fixture.Forms(t, dir) {
			if form.Mode != "nftables" {
				continue
			}
			t.Run(tc.name+"/"+form.Name, func(t *testing.T) {
				n := node(t, dir, form)
				injected := 0
				for _, tab := range n.Ruleset.NFTables {
					if s := tab.Set("cluster-ips"); s != nil && string(tab.IPFamily()) == "IPv4" {
						for i := range tc.added {
							s.Elements = append(s.Elements, &knftables.Element{Set: "cluster-ips", Key: []string{fmt.Sprintf("10.99.%d.%d", i/250, 1+i%250)}})
						}
						injected++
					}
				}
				if injected != 1 {
					t.Fatalf("%d IPv4 tables with cluster-ips", injected)
				}
				rep := diagnose.Stale(n, diagnose.StaleOptions{})
				listed, more := 0, 0
				for _, e := range rep.Elements {
					switch {
					case e.More > 0:
						more += e.More
						if e.Element != "" || !e.Referenced || !strings.Contains(e.Reason, fmt.Sprintf("and %d more stale elements of cluster-ips", e.More)) {
							t.Errorf("closing item %+v", e)
						}
					case e.Map == "cluster-ips":
						listed++
					}
				}
				if listed != tc.listed || more != tc.more {
					t.Errorf("stale: %d listed and %d more, want %d and %d", listed, more, tc.listed, tc.more)
				}
				tri := diagnose.Triage(n)
				listed, more = 0, 0
				for _, f := range allFindings(tri) {
					switch {
					case f.Area == "stale" && f.Subject == "cluster-ips":
						more++
						if f.Severity != diagnose.SeverityError || f.Count != tc.more || !strings.Contains(f.Message, fmt.Sprintf("and %d more", tc.more)) {
							t.Errorf("closing finding %+v", f)
						}
					case f.Area == "stale" && strings.HasPrefix(f.Subject, "cluster-ips 10.99."):
						listed++
						if f.Severity != diagnose.SeverityError {
							t.Errorf("finding %+v", f)
						}
					}
				}
				if wantMore := min(tc.more, 1); listed != tc.listed || more != wantMore {
					t.Errorf("triage: %d findings listed and %d closing, want %d and %d", listed, more, tc.listed, wantMore)
				}
			})
		}
	}
}

// allFindings are the findings and the symptoms under them.
func allFindings(rep *diagnose.TriageReport) []diagnose.Finding {
	var out []diagnose.Finding
	for _, f := range rep.Findings {
		out = append(out, f)
		for _, s := range f.Symptoms {
			out = append(out, diagnose.Finding{Severity: s.Severity, Area: s.Area, Subject: s.Subject, Message: s.Message})
		}
	}
	return out
}
