package diagnose_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/proxyrules/kubectl-proxyrules/diagnose"
	"github.com/proxyrules/kubectl-proxyrules/inspect/conntrack"
)

// pressureDir holds what the kernel wrote while
// hack/gen-conntrack-pressure.sh filled a namespace's table
// (nf_conntrack_max lowered to 8192): near-full, full with unassured
// entries and new flows evicting them or dropped, full with only assured
// ones and every new flow dropped.
const pressureDir = "../plugin/testdata/conntrack"

func realStats(t *testing.T, name string) *conntrack.Stats {
	t.Helper()
	f, err := os.Open(filepath.Join(pressureDir, name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, err := conntrack.ReadStats(f)
	if err != nil || len(s.Warnings) > 0 || len(s.CPUs) < 2 {
		t.Fatalf("%s: %v %q, %d CPUs", name, err, s.Warnings, len(s.CPUs))
	}
	return s
}

func realSysctls(t *testing.T, name string) *conntrack.Sysctls {
	t.Helper()
	f, err := os.Open(filepath.Join(pressureDir, name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, err := conntrack.ReadSysctls(f)
	if err != nil || len(s.Warnings) > 0 {
		t.Fatalf("%s: %v %q", name, err, s.Warnings)
	}
	return s
}

// pressureKinds are the kinds the table's fill and counters decide.
var pressureKinds = []string{diagnose.ConntrackTableFull, diagnose.ConntrackTableNearFull,
	diagnose.ConntrackDrops, diagnose.ConntrackEarlyDrops, diagnose.ConntrackMaxLowered}

// The pressure verdicts on the real kernel's counters and sysctls, on
// small-v1.37's node-a (kube-proxy's own rules, objects and configuration:
// maxPerCore 32768 on 8 CPUs sets 262144, so the real 8192 is lowered in
// every case). The figures are the files': drop 345 on CPU 0 and 233 on
// CPU 1 (578: the sum over CPUs, what the senders saw refused), early_drop
// 255 + 167 = 422; with only assured entries drop +500 and early_drop +0.
func TestConntrackPressureRealKernel(t *testing.T) {
	for _, tc := range []struct {
		name          string
		sysctls       string
		before, after string
		kinds         []string
		evidence      map[string]string // kind → what its evidence says
		notInEvidence []string          // what no evidence may say
	}{
		{name: "near-full, counters still", sysctls: "pressure-sysctls-near.txt", before: "pressure-stats-1.txt", after: "pressure-stats-1.txt",
			kinds: []string{diagnose.ConntrackTableNearFull, diagnose.ConntrackMaxLowered},
			evidence: map[string]string{diagnose.ConntrackTableNearFull: "net.netfilter.nf_conntrack_count = 7537, net.netfilter.nf_conntrack_max = 8192",
				diagnose.ConntrackMaxLowered: "net.netfilter.nf_conntrack_max = 8192"}},
		{name: "full, unassured evicted and new flows dropped", sysctls: "pressure-sysctls-full.txt", before: "pressure-stats-1.txt", after: "pressure-stats-2.txt",
			kinds: []string{diagnose.ConntrackTableFull, diagnose.ConntrackDrops, diagnose.ConntrackEarlyDrops, diagnose.ConntrackMaxLowered},
			evidence: map[string]string{diagnose.ConntrackTableFull: "net.netfilter.nf_conntrack_count = 8192, net.netfilter.nf_conntrack_max = 8192",
				diagnose.ConntrackDrops:      "drop +578 in 5s (115.6/s)",
				diagnose.ConntrackEarlyDrops: "early_drop +422 in 5s (84.4/s)"},
			notInEvidence: []string{"insert_failed"}},
		{name: "full of assured entries: dropped, none evicted", sysctls: "pressure-sysctls-full.txt", before: "pressure-stats-3.txt", after: "pressure-stats-4.txt",
			kinds:         []string{diagnose.ConntrackTableFull, diagnose.ConntrackDrops, diagnose.ConntrackMaxLowered},
			evidence:      map[string]string{diagnose.ConntrackDrops: "drop +500 in 5s (100.0/s)"},
			notInEvidence: []string{"insert_failed", "early_drop"}},
		{name: "full, counters still while the table was refilled", sysctls: "pressure-sysctls-full.txt", before: "pressure-stats-2.txt", after: "pressure-stats-3.txt",
			kinds: []string{diagnose.ConntrackTableFull, diagnose.ConntrackMaxLowered}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, in := ctCase{}.node(t)
			in.Table = nil
			in.Sysctls = realSysctls(t, tc.sysctls)
			in.Before, in.After, in.Interval = realStats(t, tc.before), realStats(t, tc.after), 5*time.Second
			rep := diagnose.Conntrack(n, in)
			var kinds []string
			for _, p := range rep.Problems {
				if !slices.Contains(pressureKinds, p.Kind) {
					continue
				}
				kinds = append(kinds, p.Kind)
				if want, ok := tc.evidence[p.Kind]; ok && !strings.Contains(p.Evidence, want) {
					t.Errorf("%s evidence %q, want it to say %q", p.Kind, p.Evidence, want)
				}
				for _, not := range tc.notInEvidence {
					if strings.Contains(p.Evidence, not) {
						t.Errorf("%s evidence %q names %s, which did not grow", p.Kind, p.Evidence, not)
					}
				}
			}
			slices.Sort(kinds)
			want := slices.Sorted(slices.Values(tc.kinds))
			if !slices.Equal(kinds, want) {
				t.Errorf("pressure kinds %q, want %q\n%s", kinds, want, describe(rep))
			}
		})
	}
}

// The counters the judgement reads, straight from the files: the kernel
// writes entries (the namespace's count) on every CPU's line, and drop and
// early_drop per CPU.
func TestConntrackPressureRealCounters(t *testing.T) {
	for _, tc := range []struct {
		before, after         string
		entries, drop, early  int64
		cpu0Drop, cpu1Drop    uint64
		totalDrop, totalEarly uint64
	}{
		{"pressure-stats-1.txt", "pressure-stats-2.txt", 8192 - 7537, 578, 422, 345, 233, 578, 422},
		{"pressure-stats-3.txt", "pressure-stats-4.txt", 0, 500, 0, 645, 433, 1078, 422},
	} {
		before, after := realStats(t, tc.before), realStats(t, tc.after)
		d := conntrack.Diff(before, after)
		if d[conntrack.StatEntries] != tc.entries || d[conntrack.StatDrop] != tc.drop || d[conntrack.StatEarlyDrop] != tc.early || d[conntrack.StatInsertFailed] != 0 {
			t.Errorf("%s → %s: entries %+d drop %+d early_drop %+d insert_failed %+d; want %+d %+d %+d 0", tc.before, tc.after,
				d[conntrack.StatEntries], d[conntrack.StatDrop], d[conntrack.StatEarlyDrop], d[conntrack.StatInsertFailed], tc.entries, tc.drop, tc.early)
		}
		drop, _ := after.Total(conntrack.StatDrop)
		early, _ := after.Total(conntrack.StatEarlyDrop)
		entries, _ := after.Total(conntrack.StatEntries)
		col := slices.Index(after.Columns, conntrack.StatDrop)
		if drop != tc.totalDrop || early != tc.totalEarly || entries != 8192 || after.CPUs[0][col] != tc.cpu0Drop || after.CPUs[1][col] != tc.cpu1Drop {
			t.Errorf("%s: drop %d (CPUs %d, %d), early_drop %d, entries %d", tc.after, drop, after.CPUs[0][col], after.CPUs[1][col], early, entries)
		}
	}
}

// pressure-stats-2 was read with every entry unassured, yet drop grew
// beside early_drop (578 and 422): a drop does not mean nothing was
// evictable, the kernel looks near the new flow's hash only
// (NF_CT_EVICTION_RANGE, 8 buckets), and the consequence says so.
func TestConntrackEarlyDropConsequence(t *testing.T) {
	n, in := ctCase{}.node(t)
	in.Table = nil
	in.Sysctls = realSysctls(t, "pressure-sysctls-full.txt")
	in.Before, in.After, in.Interval = realStats(t, "pressure-stats-1.txt"), realStats(t, "pressure-stats-2.txt"), 5*time.Second
	rep := diagnose.Conntrack(n, in)
	early := ""
	for _, p := range rep.Problems {
		if p.Kind == diagnose.ConntrackEarlyDrops {
			early = p.Consequence
		}
	}
	if !strings.Contains(early, "near its hash bucket") || strings.Contains(early, "when none can be") {
		t.Errorf("earlyDrops consequence %q: drop grew while every entry was evictable", early)
	}
}
