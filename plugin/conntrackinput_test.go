package plugin

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/proxyrules/kubectl-proxyrules/inspect/conntrack"
	"github.com/proxyrules/kubectl-proxyrules/plugin/collect"
)

const conntrackFixtures = "../inspect/conntrack/testdata/"

// The conntrack inputs reach Loaded from the flags, stdin (pasted) and
// several files joined.
func TestLoadConntrackFlags(t *testing.T) {
	dump := smallFixture + "iptables/save-nft-ipv4.txt"
	pasted := "root@node-a:~# conntrack -L\n" + readString(t, conntrackFixtures+"conntrack-L.txt")
	tests := []struct {
		name    string
		files   InputFiles
		stdin   string
		entries int
		format  conntrack.Format
		max     int64 // the table's Max from the sysctls, -1 without
		stats   int
	}{
		{"proc with sysctls and two stats", InputFiles{Conntrack: []string{conntrackFixtures + "proc-nf_conntrack.txt"},
			ConntrackStats: []string{conntrackFixtures + "stat-before.txt", conntrackFixtures + "stat-after.txt"},
			Sysctls:        []string{conntrackFixtures + "sysctls.txt"}}, "", 8, conntrack.FormatProc, 262144, 2},
		{"conntrack -L pasted on stdin", InputFiles{Conntrack: []string{"-"}}, pasted, 8, conntrack.FormatDefault, -1, 0},
		{"two listings joined", InputFiles{Conntrack: []string{conntrackFixtures + "proc-nf_conntrack.txt", conntrackFixtures + "conntrack-L-ipv6.txt"}},
			"", 11, conntrack.FormatMixed, -1, 0},
		{"extended IPv6", InputFiles{Conntrack: []string{conntrackFixtures + "conntrack-L-extended-ipv6.txt"}}, "", 3, conntrack.FormatExtended, -1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.files.Dumps = []string{dump}
			ld := &Loader{ErrOut: &strings.Builder{}, In: strings.NewReader(tt.stdin)}
			l, err := ld.Load(context.Background(), Request{Files: tt.files, Node: "node-a"})
			if err != nil {
				t.Fatal(err)
			}
			ct := l.Conntrack
			if ct == nil || len(ct.Entries) != tt.entries || ct.Format != tt.format || ct.Max != tt.max || ct.Truncated.Incomplete {
				t.Fatalf("table %+v; want %d entries, format %s, max %d, whole", ct, tt.entries, tt.format, tt.max)
			}
			if len(ct.Warnings) > 0 {
				t.Errorf("warnings %q", ct.Warnings)
			}
			if len(l.ConntrackStats) != tt.stats {
				t.Errorf("%d stats reads, want %d", len(l.ConntrackStats), tt.stats)
			}
			if (tt.max >= 0) != (l.Sysctls != nil) {
				t.Errorf("sysctls %v", l.Sysctls)
			}
		})
	}
}

// Two reads of the counters give rates: they come in time order, with
// their times (a file's modification time).
func TestLoadConntrackStatsTimes(t *testing.T) {
	dir := t.TempDir()
	before, after := filepath.Join(dir, "before"), filepath.Join(dir, "after")
	writeFile(t, before, readString(t, conntrackFixtures+"stat-before.txt"))
	writeFile(t, after, readString(t, conntrackFixtures+"stat-after.txt"))
	t0 := time.Date(2026, 12, 5, 6, 0, 0, 0, time.UTC)
	if err := os.Chtimes(before, t0, t0); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(after, t0.Add(5*time.Second), t0.Add(5*time.Second)); err != nil {
		t.Fatal(err)
	}
	req := Request{Files: InputFiles{Dumps: []string{smallFixture + "iptables/save-nft-ipv4.txt"}, ConntrackStats: []string{after, before}}}
	l, err := loadRequest(req)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.ConntrackStats) != 2 || l.ConntrackStats[0].Source != before || !l.ConntrackStats[1].At.Equal(t0.Add(5*time.Second)) {
		t.Fatalf("stats %+v; want before then after", l.ConntrackStats)
	}
	if d := conntrack.Diff(l.ConntrackStats[0].Stats, l.ConntrackStats[1].Stats); d[conntrack.StatEntries] != 8 {
		t.Errorf("diff %v", d)
	}
}

// A bundle's conntrack files reach Loaded, with the counters' times from
// the manifest and the node-side cap as INCOMPLETE; files given with the
// flags win over the bundle's.
func TestLoadConntrackBundle(t *testing.T) {
	at := time.Date(2026, 12, 5, 6, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name        string
		capped      bool
		userTable   bool
		wantEntries int
	}{
		{"whole", false, false, 8},
		{"capped on the node", true, false, 8},
		{"--from-conntrack wins", true, true, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeBundle(t, dir, [][2]string{
				{smallFixture + "iptables/save-nft-ipv4.txt", collect.KindRuleset},
				{conntrackFixtures + "proc-nf_conntrack.txt", collect.KindConntrack},
				{conntrackFixtures + "stat-before.txt", collect.KindConntrackStats},
				{conntrackFixtures + "stat-after.txt", collect.KindConntrackStats},
				{conntrackFixtures + "sysctls.txt", collect.KindSysctls},
			})
			b, err := collect.OpenBundle(context.Background(), dir, collect.DefaultLimits)
			if err != nil {
				t.Fatal(err)
			}
			m := b.Manifest
			b.Close()
			m.Conntrack = &collect.ConntrackRead{Filter: "exact", Patterns: 3, MaxEntries: 8, Kept: 8, Capped: tc.capped, Total: 1000,
				Stats: []collect.ConntrackStatsRead{{Path: "stat-after.txt", At: at.Add(4 * time.Second)}, {Path: "stat-before.txt", At: at}}}
			if err := os.Remove(filepath.Join(dir, collect.ManifestFile)); err != nil {
				t.Fatal(err)
			}
			if err := collect.WriteManifest(dir, &m); err != nil {
				t.Fatal(err)
			}
			req := Request{Files: InputFiles{Bundles: []string{dir}}}
			if tc.userTable {
				req.Files.Conntrack = []string{conntrackFixtures + "conntrack-L-ipv6.txt"}
			}
			l, err := loadRequest(req)
			if err != nil {
				t.Fatal(err)
			}
			ct := l.Conntrack
			if ct == nil || len(ct.Entries) != tc.wantEntries || ct.Max != 262144 {
				t.Fatalf("table %+v; want %d entries, max 262144", ct, tc.wantEntries)
			}
			capped := tc.capped && !tc.userTable
			if ct.Truncated.Incomplete != capped || capped != (len(ct.Warnings) == 1 && strings.Contains(ct.Warnings[0], "INCOMPLETE: the conntrack table was read filtered (exact) and capped on the node at 8 entries: 8 kept of 1000")) {
				t.Errorf("incomplete %v, warnings %q; want capped %v", ct.Truncated.Incomplete, ct.Warnings, capped)
			}
			if len(l.ConntrackStats) != 2 || !l.ConntrackStats[0].At.Equal(at) || !l.ConntrackStats[1].At.Equal(at.Add(4*time.Second)) {
				t.Errorf("stats %+v; want the manifest's times, in order", l.ConntrackStats)
			}
			if l.Sysctls == nil || l.Sysctls.Values[conntrack.SysctlIPForward] != "0" {
				t.Errorf("sysctls %+v", l.Sysctls)
			}
		})
	}
}

// The conntrack inputs are read under the conntrack cap, which
// --max-input-size sets.
func TestConntrackCap(t *testing.T) {
	caps, err := parseCaps("conntrack=100")
	if err != nil {
		t.Fatal(err)
	}
	if defaultCaps[capConntrack] != 256<<20 || !strings.Contains(defaultCaps.String(), "conntrack=256Mi") {
		t.Errorf("default caps %s", defaultCaps)
	}
	for _, files := range []InputFiles{
		{Conntrack: []string{conntrackFixtures + "proc-nf_conntrack.txt"}},
		{ConntrackStats: []string{conntrackFixtures + "stat-after.txt"}},
		{Sysctls: []string{conntrackFixtures + "sysctls.txt"}},
	} {
		files.Dumps = []string{smallFixture + "iptables/save-nft-ipv4.txt"}
		_, err := (&Loader{Caps: caps, ErrOut: &strings.Builder{}}).Load(context.Background(), Request{Files: files})
		if err == nil || !strings.Contains(err.Error(), "--max-input-size conntrack=200") || strings.Count(err.Error(), conntrackFixtures) != 1 {
			t.Errorf("%+v: %v; want the conntrack cap's error", files, err)
		}
	}
	// A bundle's conntrack files too.
	if got := caps.bundleLimits(false).File(collect.KindConntrack); got != 100 {
		t.Errorf("a bundle's table capped at %d", got)
	}
}

func readString(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func writeFile(t *testing.T, name, data string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}
