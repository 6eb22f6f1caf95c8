package plugin

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/diagnose"
)

// explain svc/kube-dns on small-v1.37's node-a, whose rules are right:
// with a table where a DNS client's entry is answered by a gone pod,
// explain shows the entry and its command and exits 2; without the table
// it is as before (healthy, exit 0, no conntrack part).
func TestExplainConntrackGolden(t *testing.T) {
	const small = "../testdata/fixtures/small-v1.37/"
	base := []string{"explain", "svc/kube-dns", "-n", "kube-system", "--from-dump", small + "iptables/save-nft-ipv4.txt",
		"--from-objects", small + "objects.json", "--node", "node-a"}
	table := []string{"--from-conntrack", "testdata/conntrack/faulty-table.txt"}
	for _, tc := range []struct {
		name   string
		args   []string
		golden string
		exit   int
		kinds  []string
	}{
		{"stale DNS entry", table, "explain-conntrack-stale-dns.txt", ExitProblems, []string{diagnose.ConntrackStalePending}},
		{"no kernel state", nil, "", ExitHealthy, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append(slices.Clone(base), tc.args...)
			out, errOut, err := runCmd(t, nil, args...)
			if code := exitOf(t, err, errOut); code != tc.exit {
				t.Errorf("exit status %d, want %d\n%s", code, tc.exit, errOut)
			}
			if tc.golden != "" {
				checkGolden(t, tc.golden, []byte(out))
			}
			out, _, _ = runCmd(t, nil, append(args, "-o", "json")...)
			var ex diagnose.ServiceExplanation
			if err := json.Unmarshal([]byte(out), &ex); err != nil {
				t.Fatal(err)
			}
			var kinds []string
			for _, pp := range ex.Ports {
				for _, p := range pp.Problems {
					kinds = append(kinds, p.Kind)
				}
			}
			if !slices.Equal(kinds, tc.kinds) {
				t.Errorf("problems %q, want %q", kinds, tc.kinds)
			}
			if (ex.Conntrack != nil) != (tc.args != nil) {
				t.Errorf("conntrack part %+v, want one only with the table", ex.Conntrack)
			}
			if ex.Conntrack != nil && (len(ex.Conntrack.Ports) != 1 || ex.Conntrack.Ports[0].Stale != 1 || len(ex.Conntrack.Ports[0].ByCause) != 1 ||
				!slices.Equal(ex.Conntrack.Ports[0].ByCause[0].Commands, []string{"conntrack -D -p udp --orig-dst 10.96.0.10 --orig-port-dst 53 --reply-src 10.244.7.7"})) {
				t.Errorf("conntrack part %+v", ex.Conntrack)
			}
		})
	}
}
