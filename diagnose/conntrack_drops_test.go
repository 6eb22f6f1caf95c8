package diagnose_test

import (
	"strings"
	"testing"
	"time"

	"github.com/proxyrules/kubectl-proxyrules/diagnose"
)

// A lost clash counts in insert_failed and in drop (nf_ct_resolve_clash):
// only drops beyond insert_failed are a full table's, and only those call
// for a larger nf_conntrack_max.
func TestConntrackDropCauses(t *testing.T) {
	for _, tc := range []struct {
		name                string
		insertFailed, drop  int
		wantFull, wantClash bool
	}{
		{"a full table", 0, 50, true, false},
		{"lost clashes only", 40, 40, false, true},
		{"both", 10, 50, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := ctCase{in: diagnose.ConntrackInputs{Before: stats(t, 0, 0, 0), After: stats(t, tc.insertFailed, tc.drop, 0), Interval: 5 * time.Second}}.run(t)
			var p *diagnose.ConntrackProblem
			for i := range rep.Problems {
				if rep.Problems[i].Kind == diagnose.ConntrackDrops {
					p = &rep.Problems[i]
				}
			}
			if p == nil {
				t.Fatalf("no drops problem:\n%s", describe(rep))
			}
			if full := strings.Contains(p.Remedy, "raise nf_conntrack_max"); full != tc.wantFull {
				t.Errorf("full-table remedy %v, want %v: %q", full, tc.wantFull, p.Remedy)
			}
			if clash := strings.Contains(p.Remedy, "single-request-reopen"); clash != tc.wantClash {
				t.Errorf("clash remedy %v, want %v: %q", clash, tc.wantClash, p.Remedy)
			}
		})
	}
}
