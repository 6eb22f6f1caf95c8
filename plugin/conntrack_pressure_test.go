package plugin

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/diagnose"
)

// conntrack on what the kernel wrote while hack/gen-conntrack-pressure.sh
// filled a namespace's table (testdata/conntrack/README.md), beside
// small-v1.37's node-a: the table's fill and the drop counters, read
// offline as a bundle's files are, judged with their figures (the drops
// summed over both CPUs' lines). The before and after reads are five
// seconds apart (conntrackStats).
func TestConntrackPressureRealKernel(t *testing.T) {
	const f = "../testdata/fixtures/small-v1.37/"
	const c = "testdata/conntrack/"
	base := []string{"conntrack", "-o", "json", "--from-dump", f + "iptables/save-nft-ipv4.txt", "--from-objects", f + "objects.json",
		"--from-config", f + "configz-iptables.json", "--node", "node-a"}
	judged := []string{diagnose.ConntrackTableFull, diagnose.ConntrackTableNearFull, diagnose.ConntrackDrops, diagnose.ConntrackEarlyDrops}
	for _, tc := range []struct {
		name     string
		sysctls  string
		stats    []string
		kinds    []string          // of judged, in the report's order
		evidence map[string]string // kind → what its message says
	}{
		{"near-full, quiet counters", "pressure-sysctls-near.txt", []string{"pressure-stats-1.txt", "pressure-stats-1.txt"},
			[]string{diagnose.ConntrackTableNearFull},
			map[string]string{diagnose.ConntrackTableNearFull: "the conntrack table is 92% full (7537 of 8192)"}},
		{"full, evicting and dropping", "pressure-sysctls-full.txt", []string{"pressure-stats-1.txt", "pressure-stats-2.txt"},
			[]string{diagnose.ConntrackTableFull, diagnose.ConntrackDrops, diagnose.ConntrackEarlyDrops},
			map[string]string{diagnose.ConntrackTableFull: "the conntrack table is full (8192 of 8192)",
				diagnose.ConntrackDrops:      "conntrack is dropping packets now: drop +578 in 5s (115.6/s)",
				diagnose.ConntrackEarlyDrops: "early_drop +422 in 5s (84.4/s)"}},
		{"full of assured entries, dropping only", "pressure-sysctls-full.txt", []string{"pressure-stats-3.txt", "pressure-stats-4.txt"},
			[]string{diagnose.ConntrackTableFull, diagnose.ConntrackDrops},
			map[string]string{diagnose.ConntrackDrops: "conntrack is dropping packets now: drop +500 in 5s (100.0/s)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append(append(slices.Clone(base), "--from-sysctls", c+tc.sysctls), conntrackStats(t, tc.stats...)...)
			out, errOut, err := runCmd(t, nil, args...)
			if code := exitOf(t, err, errOut); code != ExitProblems {
				t.Errorf("exit status %d, want %d\n%s", code, ExitProblems, errOut)
			}
			var rep diagnose.ConntrackReport
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatal(err)
			}
			var kinds []string
			for _, p := range rep.Problems {
				if !slices.Contains(judged, p.Kind) {
					continue
				}
				kinds = append(kinds, p.Kind)
				if want, ok := tc.evidence[p.Kind]; ok && !strings.Contains(p.Message, want) {
					t.Errorf("%s: %q, want it to say %q", p.Kind, p.Message, want)
				}
			}
			if !slices.Equal(kinds, tc.kinds) {
				t.Errorf("kinds %q, want %q", kinds, tc.kinds)
			}
		})
	}
}
