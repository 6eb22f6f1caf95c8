package diagnose_test

import (
	"strings"
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/diagnose"
	"github.com/proxyrules/kubectl-proxyrules/inspect/conntrack"
)

// Without the Node's CPU count, the counters' rows (a row per possible
// CPU, at least those kube-proxy counts) bound what kube-proxy sets: a max
// at or above that bound is checked, one below it is not judged (a false
// WARNING on a VM with more possible than online CPUs), only not checked.
func TestConntrackMaxWithoutNodeCPUs(t *testing.T) {
	perCore, floor := int32(32768), int32(131072)
	for _, tc := range []struct {
		name    string
		max     string
		wantGap bool
	}{
		{"max above what the possible CPUs would set", "262144", false},
		{"max at kube-proxy's min", "131072", false},
		{"max below it", "65536", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// stats() has two CPU rows: 2 × 32768 < min, so the bound is 131072
			c := ctCase{sysctls: map[string]string{conntrack.SysctlMax: tc.max, conntrack.SysctlCount: "10"},
				in: diagnose.ConntrackInputs{MaxPerCore: &perCore, Min: &floor, Before: stats(t, 0, 0, 0), After: stats(t, 0, 0, 0), Interval: 5e9}}
			rep := c.run(t)
			gap := false
			for _, g := range rep.NotChecked {
				gap = gap || strings.Contains(g.Check, "nf_conntrack_max against")
			}
			if gap != tc.wantGap {
				t.Errorf("gap %v, want %v: %+v", gap, tc.wantGap, rep.NotChecked)
			}
			for _, p := range rep.Problems {
				if p.Kind == diagnose.ConntrackMaxLowered {
					t.Errorf("judged without the CPU count: %s", p.Message)
				}
			}
		})
	}
}
