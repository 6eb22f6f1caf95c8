package diagnose_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/proxyrules/kubectl-proxyrules/diagnose"
	"github.com/proxyrules/kubectl-proxyrules/inspect/conntrack"
)

// healthyKernel is the conntrack state of a node with nothing wrong beside
// its rules: an empty table, the counters of the real kernel read twice
// (inspect/conntrack/testdata: no drop between them) and the settings
// kube-proxy v1.37.2 leaves (healthySysctls).
func healthyKernel(t *testing.T) *diagnose.ConntrackInputs {
	t.Helper()
	table, err := conntrack.ReadTable(strings.NewReader(""), conntrack.Limits{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	in := &diagnose.ConntrackInputs{Table: table, Sysctls: sysctlBundle(t, healthySysctls()), Interval: 5 * time.Second, CPUs: 4}
	for i, name := range []string{"stat-before.txt", "stat-after.txt"} {
		f, err := os.Open("../inspect/conntrack/testdata/" + name)
		if err != nil {
			t.Fatal(err)
		}
		st, err := conntrack.ReadStats(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			in.Before = st
		} else {
			in.After = st
		}
	}
	return in
}
