package diagnose_test

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/diagnose"
	"github.com/proxyrules/kubectl-proxyrules/inspect/metrics"
	"github.com/proxyrules/kubectl-proxyrules/internal/fixture"
)

// A failure counter only grows: triage judges the present from the sync
// timestamps and from two scrapes, not from the counter's value. On
// kube-proxy 1.37's own healthy node (small-v1.37, iptables-nft) with
// restore failures in its past:
func TestTriageFailureCounters(t *testing.T) {
	dir := fixture.Dir("small-v1.37")
	form := fixture.Forms(t, dir)[0]
	text, _ := fixture.Text(t, dir, "metrics-iptables.txt")
	stamp := func(text, name string) float64 {
		m := regexp.MustCompile(`(?m)^` + name + `\{ip_family="IPv4"\} (\S+)$`).FindStringSubmatch(text)
		if m == nil {
			t.Fatalf("no IPv4 %s in the fixture's metrics", name)
		}
		v, _ := strconv.ParseFloat(m[1], 64)
		return v
	}
	set := func(text, name string, v float64) string {
		return regexp.MustCompile(`(?m)^`+name+`\{ip_family="IPv4"\} \S+$`).ReplaceAllString(text, fmt.Sprintf(`%s{ip_family="IPv4"} %f`, name, v))
	}
	synced, queued := stamp(text, metrics.LastSync), stamp(text, metrics.LastQueued)
	if synced < queued {
		t.Fatal("the fixture's last sync is not after its last queued one")
	}
	failures := func(text string, n int) string {
		return text + fmt.Sprintf("# TYPE %s counter\n%s{ip_family=\"IPv4\"} %d\n", metrics.RestoreFailures, metrics.RestoreFailures, n)
	}
	shifted := func(text string, by float64) string {
		return set(set(text, metrics.LastSync, synced+by), metrics.LastQueued, queued+by)
	}
	for _, tc := range []struct {
		name     string
		scrapes  []string // the earlier first
		severity diagnose.Severity
		status   diagnose.Status
		message  string
	}{
		{name: "3 failures, the last sync succeeded after the last one queued", scrapes: []string{failures(text, 3)},
			severity: diagnose.SeverityInfo, status: diagnose.StatusHealthy, message: "failed 3 times since kube-proxy started, not now: the last sync succeeded"},
		{name: "the same counter in two scrapes 30 s apart", scrapes: []string{failures(text, 3), failures(shifted(text, 30), 3)},
			severity: diagnose.SeverityInfo, status: diagnose.StatusHealthy, message: "did not grow between the two scrapes"},
		{name: "the counter grew between two scrapes", scrapes: []string{failures(text, 3), failures(shifted(text, 30), 5)},
			severity: diagnose.SeverityError, status: diagnose.StatusProblems, message: "grew by 2 between the two scrapes"},
		{name: "a sync queued 5 s after the last success, one scrape", scrapes: []string{failures(set(text, metrics.LastQueued, synced+5), 3)},
			severity: diagnose.SeverityWarning, status: diagnose.StatusProblems, message: "whether it fails now is not known"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := node(t, dir, form)
			n.Metrics = nil
			for i, s := range tc.scrapes {
				m, err := metrics.Parse(strings.NewReader(s), fmt.Sprintf("scrape %d", i))
				if err != nil {
					t.Fatal(err)
				}
				n.Metrics = append(n.Metrics, m)
				n.At, _ = m.Newest()
			}
			rep := diagnose.Triage(n)
			var found []string
			for _, f := range rep.Findings {
				if text := f.Title + " " + f.Message + fmt.Sprint(f.Symptoms); strings.Contains(text, metrics.RestoreFailures) || strings.Contains(f.Title, "syncs fail") {
					found = append(found, fmt.Sprintf("%s: %s", f.Severity, text))
					if f.Severity != tc.severity || !strings.Contains(text, tc.message) {
						t.Errorf("%s %s, want %s saying %q", f.Severity, text, tc.severity, tc.message)
					}
				} else if f.Severity != diagnose.SeverityInfo {
					t.Errorf("another finding: %s %s", f.Severity, f.Message)
				}
			}
			if len(found) != 1 {
				t.Errorf("%d findings on the restore failures, want 1: %v", len(found), found)
			}
			if rep.Status != tc.status {
				t.Errorf("status %s, want %s", rep.Status, tc.status)
			}
		})
	}
}
