package conntrack

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

func mustStats(t testing.TB, in []byte) *Stats {
	t.Helper()
	s, err := ReadStats(bytes.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The fixtures: the namespace's counters before anything and after its
// eight entries (two CPUs; the kernel prints the entry count on each).
func TestReadStatsFixtures(t *testing.T) {
	before := mustStats(t, readFixture(t, "stat-before.txt"))
	after := mustStats(t, readFixture(t, "stat-after.txt"))
	wantCols := strings.Fields("entries clashres found new invalid ignore delete chainlength insert insert_failed drop early_drop icmp_error expect_new expect_create expect_delete search_restart")
	for _, s := range []*Stats{before, after} {
		if !reflect.DeepEqual(s.Columns, wantCols) || len(s.CPUs) != 2 || len(s.Warnings) != 0 {
			t.Fatalf("columns %q, %d CPUs, warnings %q", s.Columns, len(s.CPUs), s.Warnings)
		}
	}
	if n, _ := after.Total(StatEntries); n != 8 {
		t.Errorf("entries %d, want 8 (a gauge, not summed over CPUs)", n)
	}
	if n, _ := after.Total("insert"); n != 6 {
		t.Errorf("insert %d, want 6 (3 on each CPU)", n)
	}
	d := Diff(before, after)
	if d[StatEntries] != 8 || d["insert"] != 6 || d[StatInsertFailed] != 0 || d[StatDrop] != 0 || len(d) != len(wantCols) {
		t.Errorf("diff %v", d)
	}
	if _, ok := after.Total("searched"); ok {
		t.Error("a column this kernel lacks has a total")
	}
}

func TestReadStatsVariants(t *testing.T) {
	// the column set of kernels before 5.x (searched, delete_list, ...)
	old := "entries  searched found new invalid ignore delete delete_list insert insert_failed drop early_drop icmp_error  expect_new expect_create expect_delete search_restart\n" +
		"000000ff  00000000 00000010 00000020 00000001 00000002 00000003 00000004 00000005 00000006 00000007 00000008 00000000  00000000 00000000 00000000 00000000\n" +
		"000000ff  00000000 00000010 00000020 00000001 00000002 00000003 00000004 00000005 00000006 00000007 00000008 00000000  00000000 00000000 00000000 00000000\n"
	for _, tc := range []struct {
		name      string
		in        string
		totals    map[string]uint64
		cpus      int
		nwarnings int
	}{
		{"old kernel", old, map[string]uint64{"entries": 255, "searched": 0, "found": 32, "delete_list": 8, "insert_failed": 12, "drop": 14, "early_drop": 16}, 2, 0},
		{"CRLF", strings.ReplaceAll(old, "\n", "\r\n"), map[string]uint64{"entries": 255, "insert_failed": 12}, 2, 0},
		{"short row", old + "00000001 00000002\n", map[string]uint64{"entries": 255}, 2, 1},
		{"not hex", old + strings.Replace(strings.Split(old, "\n")[1], "00000010", "0000001g", 1) + "\n", map[string]uint64{"found": 32}, 2, 1},
		{"no header", "00000001 00000002\n", nil, 0, 2},
		{"binary", "\x00\xff\x01\n", nil, 0, 2},
		{"empty", "", nil, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := mustStats(t, []byte(tc.in))
			if len(s.CPUs) != tc.cpus || len(s.Warnings) != tc.nwarnings {
				t.Errorf("%d CPUs, warnings %q", len(s.CPUs), s.Warnings)
			}
			for col, want := range tc.totals {
				if got, ok := s.Total(col); !ok || got != want {
					t.Errorf("%s = %d (%v), want %d", col, got, ok, want)
				}
			}
		})
	}
}

func TestDiff(t *testing.T) {
	mk := func(cols string, rows ...[]uint64) *Stats { return &Stats{Columns: strings.Fields(cols), CPUs: rows} }
	for _, tc := range []struct {
		name          string
		before, after *Stats
		want          map[string]int64
	}{
		{"growth", mk("entries drop", []uint64{10, 1}, []uint64{10, 2}), mk("entries drop", []uint64{12, 4}, []uint64{12, 2}), map[string]int64{"entries": 2, "drop": 3}},
		{"gauge falls", mk("entries drop", []uint64{10, 1}), mk("entries drop", []uint64{4, 1}), map[string]int64{"entries": -6, "drop": 0}},
		{"32-bit wrap", mk("entries insert_failed", []uint64{1, 0xfffffffe}), mk("entries insert_failed", []uint64{1, 3}), map[string]int64{"entries": 0, "insert_failed": 5}},
		{"CPU came online", mk("entries drop", []uint64{1, 5}), mk("entries drop", []uint64{1, 5}, []uint64{1, 2}), map[string]int64{"entries": 0, "drop": 2}},
		{"column only after", mk("entries", []uint64{1}), mk("entries drop", []uint64{1, 5}), map[string]int64{"entries": 0}},
		{"no rows before", mk("entries drop"), mk("entries drop", []uint64{1, 5}), map[string]int64{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Diff(tc.before, tc.after); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
