package plugin

import (
	"strconv"
	"strings"
	"testing"
)

// TestTimingsFlag: --timings prints each phase the command went through on
// stderr, in order, with a total no smaller than any phase, and leaves
// the report on stdout as it was.
func TestTimingsFlag(t *testing.T) {
	const fx = "../testdata/fixtures/small-v1.37/"
	args := []string{"triage", "--from-dump", fx + "iptables/save-nft-ipv4.txt", "--from-objects", fx + "objects.json", "-o", "json"}
	plain, _, _ := runCmd(t, nil, args...)
	out, errOut, _ := runCmd(t, nil, append(args, "--timings")...)
	if out != plain {
		t.Error("--timings changed the report")
	}
	var names []string
	var total, longest float64
	for _, line := range strings.Split(strings.TrimSpace(errOut), "\n") {
		f := strings.Fields(strings.TrimPrefix(line, "timings:"))
		if !strings.HasPrefix(line, "timings:") || len(f) < 2 {
			t.Fatalf("stderr line %q is not a timing", line)
		}
		secs, err := strconv.ParseFloat(strings.TrimSuffix(f[len(f)-1], "s"), 64)
		switch {
		case f[0] == "phase":
			continue
		case err != nil:
			t.Fatalf("line %q: %v", line, err)
		case f[0] == "total":
			total = secs
		default:
			names = append(names, f[0])
			longest = max(longest, secs)
		}
	}
	if got := strings.Join(names, " "); got != "parse analyse render" {
		t.Errorf("phases %q, want parse analyse render", got)
	}
	if total < longest || total <= 0 {
		t.Errorf("total %.3fs, longest phase %.3fs", total, longest)
	}
	if _, errOut, _ := runCmd(t, nil, args...); strings.Contains(errOut, "timings:") {
		t.Error("timings printed without --timings")
	}
}
