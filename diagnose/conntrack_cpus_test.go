package diagnose_test

import (
	"strings"
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/diagnose"
	"github.com/proxyrules/kubectl-proxyrules/inspect/conntrack"
)

// Without the Node's CPU count, the counters' rows (a row per possible
// CPU, at least those kube-proxy counts) bound what kube-proxy sets: a max
// at or above that bound is checked; one below kube-proxy's min is lowered
// whatever the CPUs; one between is not judged (a false WARNING on a VM
// with more possible than online CPUs), only not checked.
func TestConntrackMaxWithoutNodeCPUs(t *testing.T) {
	perCore, floor := int32(32768), int32(131072)
	for _, tc := range []struct {
		name      string
		max       string
		wantGap   bool
		wantLower bool
		perCore   int32 // 32768 when 0
	}{
		{"max above what the possible CPUs would set", "262144", false, false, 0},
		{"max at kube-proxy's min", "131072", false, false, 0},
		// below min: lowered whatever the CPU count
		{"max below it, and below min", "65536", false, true, 0},
		// 2 rows × 100000 = 200000 at most: 150000 may be right on 1 CPU
		{"max between min and what the possible CPUs would set", "150000", true, false, 100000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// stats() has two CPU rows: 2 × 32768 < min, so the bound is 131072
			perCore := perCore
			if tc.perCore != 0 {
				perCore = tc.perCore
			}
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
			lowered := false
			for _, p := range rep.Problems {
				lowered = lowered || p.Kind == diagnose.ConntrackMaxLowered && strings.Contains(p.Message, "below the 131072 kube-proxy sets")
			}
			if lowered != tc.wantLower {
				t.Errorf("maxLowered %v, want %v\n%s", lowered, tc.wantLower, describe(rep))
			}
		})
	}
}
