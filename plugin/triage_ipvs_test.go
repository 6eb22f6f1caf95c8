package plugin

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// triage of an IPVS node: the table, ipsets and kube-ipvs0 summarised in
// place of the chains, its problems as findings (issue 32, item 3).
func TestTriageIPVSGolden(t *testing.T) {
	const dir = "../testdata/fixtures/small-v1.37/"
	table, err := os.ReadFile(dir + "ipvs/ipvsadm-Ln.txt")
	if err != nil {
		t.Fatal(err)
	}
	// one real server of shop/web gone, a deleted Service's virtual server left
	faulty := strings.Replace(string(table), "  -> 10.244.1.11:8080             Masq    1      0          0         \n", "", 1) +
		"TCP  10.96.99.99:80 rr\n  -> 10.244.1.99:8080             Masq    1      0          0\n"
	base := []string{"triage", "--from-dump", dir + "ipvs/iptables-save-nft-ipv4.txt", "--from-dump", dir + "ipvs/iptables-save-nft-ipv6.txt",
		"--from-dump", dir + "ipvs/ipset-save.txt", "--from-dump", dir + "ipvs/ip-addr-kube-ipvs0.txt",
		"--from-objects", dir + "objects.json", "--from-config", ipvsConfig, "--node", "node-a", "--node-ip", "10.0.0.10", "--node-ip", "fd00::10"}
	tests := []struct {
		golden, stdin string
		table         string
		wantExit      int
	}{
		{"triage-ipvs-small.txt", "", dir + "ipvs/proc-net-ip_vs.txt", ExitIncomplete}, // no metrics, no conntrack
		{"triage-ipvs-faults.txt", faulty, "-", ExitProblems},
	}
	for _, tc := range tests {
		t.Run(tc.golden, func(t *testing.T) {
			out, errOut, err := runCmd(t, []byte(tc.stdin), append(base, "--from-dump", tc.table)...)
			if code := exitOf(t, err, errOut); code != tc.wantExit {
				t.Errorf("exit %d, want %d\n%s", code, tc.wantExit, out)
			}
			checkGolden(t, tc.golden, []byte(out))
		})
	}
	out, errOut, err := runCmd(t, []byte(faulty), append(base, "--from-dump", "-", "-o", "json")...)
	if code := exitOf(t, err, errOut); code != ExitProblems {
		t.Fatalf("exit %d", code)
	}
	var rep struct {
		IPVS struct {
			Read   bool `json:"read"`
			Counts struct {
				VirtualServers, Unattributed int
			} `json:"counts"`
			Unowned []struct {
				What string `json:"what"`
			} `json:"unowned"`
		} `json:"ipvs"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if !rep.IPVS.Read || rep.IPVS.Counts.VirtualServers != 34 || rep.IPVS.Counts.Unattributed != 1 || len(rep.IPVS.Unowned) != 1 || rep.IPVS.Unowned[0].What != "stale" {
		t.Errorf("ipvs in JSON: %+v", rep.IPVS)
	}
}
