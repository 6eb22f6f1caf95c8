package diagnose_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/diagnose"
)

// Triage judges the conntrack state when it was read: each fault of
// TestConntrackFaults is one finding of triage, with the same kind and
// severity, its evidence and commands, and a title that names no count
// or address of this node (a sweep groups it across nodes).
func TestTriageConntrackFaults(t *testing.T) {
	for _, tc := range conntrackFaults(t) {
		t.Run(tc.name, func(t *testing.T) {
			n, in := tc.c.node(t)
			n.Kernel = &in
			rep := diagnose.Triage(n)
			if rep.Conntrack == nil {
				t.Fatal("no conntrack section")
			}
			var found []diagnose.Finding
			for _, f := range rep.Findings {
				if f.Area == "conntrack" || f.Area == "kernel" {
					found = append(found, f)
				}
			}
			if len(found) != 1 {
				t.Fatalf("%d conntrack findings, want 1: %+v", len(found), found)
			}
			f := found[0]
			if f.Kind != tc.kind || f.Severity != tc.severity || !strings.Contains(f.Message, tc.message) || f.Evidence == "" {
				t.Errorf("got %s %s %q (evidence %q), want %s %s …%q…", f.Severity, f.Kind, f.Message, f.Evidence, tc.severity, tc.kind, tc.message)
			}
			if tc.command != "" && (len(f.Commands) != 1 || f.Commands[0] != tc.command) {
				t.Errorf("commands %q, want %q", f.Commands, tc.command)
			}
			if f.Title == "" || countFirst.MatchString(f.Title) || strings.Contains(f.Title, "10.244.") {
				t.Errorf("title %q: empty, or it names this node's counts", f.Title)
			}
			if problems := tc.severity != diagnose.SeverityInfo; problems != (rep.Status == diagnose.StatusProblems) {
				t.Errorf("status %s with a %s finding", rep.Status, tc.severity)
			}
		})
	}
}

// A node whose conntrack state was read and is healthy gains no finding
// and no gap from it; one whose state was not read says so, and is
// INCOMPLETE, not HEALTHY.
func TestTriageConntrackHealthyOrNotRead(t *testing.T) {
	n, in := ctCase{}.node(t)
	n.Kernel = &in
	rep := diagnose.Triage(n)
	if rep.Conntrack == nil || rep.Conntrack.Status != diagnose.StatusHealthy {
		t.Fatalf("conntrack section %+v", rep.Conntrack)
	}
	for _, f := range rep.Findings {
		if (f.Area == "conntrack" || f.Area == "kernel") && f.Severity != diagnose.SeverityInfo {
			t.Errorf("finding on a healthy table: %+v", f)
		}
	}
	for _, g := range rep.NotChecked {
		if strings.Contains(g.Check, "conntrack") {
			t.Errorf("gap on a table that was read: %+v", g)
		}
	}

	n.Kernel = nil
	rep = diagnose.Triage(n)
	if rep.Conntrack != nil || rep.Status == diagnose.StatusHealthy {
		t.Errorf("not read: section %v, status %s", rep.Conntrack != nil, rep.Status)
	}
	gap := false
	for _, g := range rep.NotChecked {
		gap = gap || strings.Contains(g.Check, "the conntrack table and the kernel settings") && strings.Contains(g.Remedy, "--from-conntrack")
	}
	if !gap {
		t.Errorf("no gap for the state not read: %+v", rep.NotChecked)
	}
}

// countFirst: a title that starts with a count, or holds a percentage of
// this node's, such as "1 UDP entry" or "95%".
var countFirst = regexp.MustCompile(`^[0-9]|[0-9]+% full \(`)
