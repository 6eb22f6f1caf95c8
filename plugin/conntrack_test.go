package plugin

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/proxyrules/kubectl-proxyrules/diagnose"
	"github.com/proxyrules/kubectl-proxyrules/plugin/collect"
)

// conntrackStats copies the counters' reads into a folder with their
// times five seconds apart (the rates come from the files' times).
func conntrackStats(t *testing.T, names ...string) []string {
	t.Helper()
	dir := t.TempDir()
	at := time.Date(2026, 12, 5, 3, 0, 0, 0, time.UTC)
	var args []string
	for i, name := range names {
		b, err := os.ReadFile(filepath.Join("testdata", "conntrack", name))
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		when := at.Add(time.Duration(i) * 5 * time.Second)
		if err := os.Chtimes(path, when, when); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--from-conntrack-stats", path)
	}
	return args
}

// conntrack on small-v1.37's node-a (kube-proxy's own rules and objects):
// a healthy table, and one with each fault injected: a stale DNS entry
// kube-proxy will clean, a deleted Service's entry it will not, a TCP
// entry to a gone endpoint, a nearly full table dropping packets,
// forwarding off, NodePorts inside the ephemeral port range.
func TestConntrackGolden(t *testing.T) {
	const f = "../testdata/fixtures/small-v1.37/"
	const c = "testdata/conntrack/"
	base := []string{"conntrack", "--from-dump", f + "iptables/save-nft-ipv4.txt", "--from-objects", f + "objects.json",
		"--from-config", f + "configz-iptables.json", "--from-metrics", f + "metrics-iptables.txt", "--node", "node-a"}
	for _, tc := range []struct {
		golden string
		args   []string
		stats  []string
		exit   int
		kinds  []string
	}{
		{"conntrack-healthy.txt", []string{"--from-conntrack", c + "healthy-table.txt", "--from-sysctls", c + "sysctls-healthy.txt"},
			[]string{"stats-1.txt", "stats-2.txt"}, ExitHealthy, nil},
		{"conntrack-faults.txt", []string{"--from-conntrack", c + "faulty-table.txt", "--from-sysctls", c + "sysctls-faulty.txt"},
			[]string{"stats-1.txt", "stats-2-drops.txt"}, ExitProblems,
			[]string{diagnose.ConntrackStale, diagnose.ConntrackDrops, diagnose.ConntrackForwarding, diagnose.ConntrackStalePending,
				diagnose.ConntrackTableNearFull, diagnose.ConntrackPortRange, diagnose.ConntrackStaleTCP}},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			args := append(append(slices.Clone(base), tc.args...), conntrackStats(t, tc.stats...)...)
			out, errOut, err := runCmd(t, nil, args...)
			if code := exitOf(t, err, errOut); code != tc.exit {
				t.Errorf("exit status %d, want %d\n%s", code, tc.exit, errOut)
			}
			checkGolden(t, tc.golden, []byte(out))
			out, _, _ = runCmd(t, nil, append(args, "-o", "json")...)
			var rep diagnose.ConntrackReport
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatal(err)
			}
			var kinds []string
			for _, p := range rep.Problems {
				kinds = append(kinds, p.Kind)
			}
			if rep.Kind != "ConntrackReport" || !slices.Equal(kinds, tc.kinds) {
				t.Errorf("-o json: kind %s, problems %q, want %q", rep.Kind, kinds, tc.kinds)
			}
		})
	}
}

// Kernel state alone, without a ruleset, will do for conntrack, and only
// for it: the other commands still want the rules.
func TestConntrackWithoutRules(t *testing.T) {
	const c = "testdata/conntrack/"
	args := []string{"--from-conntrack", c + "faulty-table.txt", "--from-objects", "../testdata/fixtures/small-v1.37/objects.json", "--node", "node-a"}
	out, errOut, err := runCmd(t, nil, append([]string{"conntrack", "-o", "json"}, args...)...)
	if code := exitOf(t, err, errOut); code != ExitProblems {
		t.Fatalf("conntrack without rules: exit %d\n%s", code, errOut)
	}
	var rep diagnose.ConntrackReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil || rep.Facts == nil || len(rep.Facts.Groups) != 3 {
		t.Fatalf("conntrack without rules: %v, facts %+v", err, rep.Facts)
	}
	if _, _, err = runCmd(t, nil, append([]string{"triage"}, args...)...); err == nil || !strings.Contains(err.Error(), "the inputs hold no ruleset") {
		t.Errorf("triage without rules: %v, want the inputs hold no ruleset", err)
	}
}

// A live read whose grep matched no entry (a quiet node) leaves an empty
// table file in the bundle: that is a table read and empty, not a table
// not read (which would make every quiet node INCOMPLETE).
func TestConntrackEmptyTableInBundle(t *testing.T) {
	const f = "../testdata/fixtures/small-v1.37/"
	dir := t.TempDir()
	writeBundle(t, dir, [][2]string{
		{f + "iptables/save-nft-ipv4.txt", collect.KindRuleset},
		{f + "objects.json", collect.KindObjects},
		{"testdata/conntrack/empty-table.txt", collect.KindConntrack},
		{"testdata/conntrack/sysctls-healthy.txt", collect.KindSysctls},
	})
	// as a folder, and as the archive collect writes (which holds no
	// empty file: the manifest says the table is empty)
	archive := filepath.Join(t.TempDir(), "b.tar.gz")
	if err := collect.WriteTarGz(dir, archive); err != nil {
		t.Fatal(err)
	}
	for _, from := range []string{dir, archive} {
		out, errOut, err := runCmd(t, nil, "conntrack", "--from-bundle", from, "-o", "json")
		exitOf(t, err, errOut)
		var rep diagnose.ConntrackReport
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("%s: %v\n%s%s", from, err, out, errOut)
		}
		if rep.Facts == nil || rep.Facts.Read != 0 {
			t.Errorf("%s: facts %+v, want an empty table read", from, rep.Facts)
		}
		for _, g := range rep.NotChecked {
			if strings.Contains(g.Reason, "table was not read") {
				t.Errorf("%s: empty table taken as not read: %+v", from, g)
			}
		}
	}
}
