package plugin

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const drainDir = "../testdata/fixtures/ipvs-drain-v1.37/"

// ipvsDumps are a fixture's IPVS-mode node state as kube-proxy v1.37.2's
// real IPVS proxier wrote it: IPv4 rules, the IPVS table, the ipsets and
// kube-ipvs0's addresses.
func ipvsDumps(dir string) []string {
	var args []string
	for _, f := range []string{"iptables-save-nft-ipv4.txt", "proc-net-ip_vs.txt", "ipset-save.txt", "ip-addr-kube-ipvs0.txt"} {
		args = append(args, "--from-dump", dir+"ipvs/"+f)
	}
	return append(args, "--from-objects", dir+"objects.json", "--node", "node-a", "--node-ip", "10.0.0.10")
}

// TestTraceIPVSGolden: trace in IPVS mode, text and JSON: the iptables
// part walked, then the virtual server's real servers as outcomes with
// their shares (rr), a draining one listed without. Every outcome gets
// through: healthy, with what was not checked said.
func TestTraceIPVSGolden(t *testing.T) {
	tests := []struct {
		golden   string
		args     []string
		wantExit int
	}{
		{"trace-web-ipvs.txt", append([]string{"trace", "--to", "svc/web", "-n", "shop"}, ipvsDumps(smallDir)...), ExitHealthy},
		{"trace-dns-ipvs-draining.json", append([]string{"trace", "--to", "10.96.60.10:53", "-o", "json"}, ipvsDumps(drainDir)...), ExitHealthy},
	}
	for _, tc := range tests {
		t.Run(tc.golden, func(t *testing.T) {
			out, errOut, err := runCmd(t, nil, tc.args...)
			if code := exitOf(t, err, errOut); code != tc.wantExit {
				t.Errorf("exit status %d, want %d\n%s", code, tc.wantExit, errOut)
			}
			checkGolden(t, tc.golden, []byte(out))
		})
	}
}

// TestTraceIPVSJSON: the schema of an IPVS trace: each outcome's real
// server and share, the virtual server's real servers with the draining
// one's weight 0 and no share, and the gap said.
func TestTraceIPVSJSON(t *testing.T) {
	out, errOut, err := runCmd(t, nil, append([]string{"trace", "--to", "10.96.60.10:53", "--from", "node", "-o", "json"}, ipvsDumps(drainDir)...)...)
	if code := exitOf(t, err, errOut); code != ExitHealthy {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rep struct {
		Traces []struct {
			Outcomes []struct {
				Endpoint *string
				IPVS     *struct {
					Service, Scheduler string
					RealServer         string
					Share              *float64
				}
			}
			IPVS *struct {
				VirtualServers []struct {
					Scheduler   string
					RealServers []struct {
						Address  string
						Weight   int
						Share    *float64
						Draining bool
					}
				}
			}
		}
		NotChecked []struct{ Check string }
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%.400s", err, out)
	}
	if len(rep.Traces) != 1 || rep.Traces[0].IPVS == nil || len(rep.Traces[0].IPVS.VirtualServers) != 1 {
		t.Fatalf("no IPVS part: %.800s", out)
	}
	tr := rep.Traces[0]
	var got []string
	for _, o := range tr.Outcomes {
		if o.IPVS == nil || o.IPVS.Share == nil || o.Endpoint == nil || *o.Endpoint != o.IPVS.RealServer {
			t.Errorf("outcome %+v: want its real server and share", o)
			continue
		}
		got = append(got, o.IPVS.RealServer)
	}
	if strings.Join(got, " ") != "10.244.0.60:5353 10.244.2.60:5353" {
		t.Errorf("outcomes %v, want the two real servers of weight 1", got)
	}
	for _, r := range tr.IPVS.VirtualServers[0].RealServers {
		if r.Draining != (r.Address == "10.244.1.60:5353") || r.Draining && (r.Weight != 0 || r.Share != nil) || !r.Draining && (r.Share == nil || *r.Share != 0.5) {
			t.Errorf("real server %+v", r)
		}
	}
	said := false
	for _, g := range rep.NotChecked {
		said = said || g.Check == "the IPVS scheduler's choice"
	}
	if !said {
		t.Errorf("notChecked %+v: the IPVS scheduler's choice is not said", rep.NotChecked)
	}
}

// TestTraceIPVSUnpredictable: under lc (the table edited) the real
// servers are the outcomes with no share, and the scheduler is named as
// not predictable from the rules.
func TestTraceIPVSUnpredictable(t *testing.T) {
	text, err := os.ReadFile(smallDir + "ipvs/proc-net-ip_vs.txt")
	if err != nil {
		t.Fatal(err)
	}
	const web = "TCP  0A600A01:0050 rr"
	if !strings.Contains(string(text), web) {
		t.Fatal("the fixture no longer has shop/web's virtual server")
	}
	proc := filepath.Join(t.TempDir(), "proc-net-ip_vs.txt")
	if err := os.WriteFile(proc, []byte(strings.Replace(string(text), web, "TCP  0A600A01:0050 lc", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"trace", "--to", "10.96.10.1:80"}
	for _, a := range ipvsDumps(smallDir) {
		args = append(args, strings.Replace(a, smallDir+"ipvs/proc-net-ip_vs.txt", proc, 1))
	}
	out, errOut, err := runCmd(t, nil, args...)
	if code := exitOf(t, err, errOut); code != ExitHealthy {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"3 outcomes: ? → 10.244.0.11:8080",
		"scheduler lc: 3 real servers;",
		"not predictable from the rules (lc decides",
		"  10.244.0.11:8080  weight 1  pod web-",
		"(lc) DNAT → 10.244.0.11:8080",
		"(lc) DNAT → 10.244.2.11:8080",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the trace lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "33.3%") {
		t.Errorf("a share under lc:\n%s", out)
	}
}
