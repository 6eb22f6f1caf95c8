package plugin

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/diagnose"
	"github.com/proxyrules/kubectl-proxyrules/internal/fixture"
	"github.com/proxyrules/kubectl-proxyrules/internal/netnstest"
)

// awsVPCCNINAT is what the AWS VPC CNI adds to nat (pkg/networkutils:
// both its chains in nat, CONNMARK targets; node-a's address).
const awsVPCCNINAT = `*nat
:AWS-SNAT-CHAIN-0 - [0:0]
:AWS-CONNMARK-CHAIN-0 - [0:0]
-A PREROUTING -i eni+ -m comment --comment "AWS, outbound connections" -m state --state NEW -j AWS-CONNMARK-CHAIN-0
-A PREROUTING -m comment --comment "AWS, CONNMARK" -j CONNMARK --restore-mark --nfmask 0x80 --ctmask 0x80
-A AWS-CONNMARK-CHAIN-0 ! -d 10.0.0.0/16 -m comment --comment "AWS CONNMARK CHAIN, VPC CIDR" -j CONNMARK --set-xmark 0x80/0x80
-A AWS-SNAT-CHAIN-0 ! -d 10.0.0.0/16 -m comment --comment "AWS SNAT CHAIN" -j RETURN
-A AWS-SNAT-CHAIN-0 ! -o vlan+ -m comment --comment "AWS, SNAT" -m addrtype ! --dst-type LOCAL -j SNAT --to-source 10.0.0.10 --random-fully
-A POSTROUTING -m comment --comment "AWS SNAT CHAIN" -j AWS-SNAT-CHAIN-0
COMMIT
`

// removedDNSJump is kube-dns:dns-tcp's jump to its last endpoint: without
// it, the endpoint gets nothing and the shares add up to 50 %.
const removedDNSJump = `-A KUBE-SVC-ERIFXISQEP7F7OF4 -m comment --comment "kube-system/kube-dns:dns-tcp -> 10.244.1.2:53"`

var nfacct = regexp.MustCompile(` -m nfacct --nfacct-name +\S+`)

// natPastes loads small-v1.37's rules (kube-proxy's own), the VPC CNI's
// and, with fault, kube-dns's removed jump into a network namespace, and
// returns the nat table as the real iptables prints it in each form a
// user pastes.
func natPastes(t *testing.T, fault bool) []paste {
	ns := netnstest.New(t, "iptables-nft", "iptables-nft-restore", "iptables-nft-save")
	restore, err := os.ReadFile(filepath.Join(fixture.Dir("small-v1.37"), "iptables", "restore-ipv4.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	removed := 0
	for _, l := range strings.Split(string(nfacct.ReplaceAll(restore, nil)), "\n") {
		if fault && strings.HasPrefix(l, removedDNSJump) {
			removed++
			continue
		}
		kept = append(kept, l)
	}
	if fault && removed != 1 {
		t.Fatalf("the fault's rule is %d times in the fixture", removed)
	}
	if _, err := ns.Run([]byte(strings.Join(kept, "\n")), "iptables-nft-restore"); err != nil {
		t.Fatal(err)
	}
	if _, err := ns.Run([]byte(awsVPCCNINAT), "iptables-nft-restore", "--noflush"); err != nil {
		t.Fatal(err)
	}
	run := func(prog string, args ...string) string {
		out, err := ns.Run(nil, prog, args...)
		if err != nil {
			t.Fatal(err)
		}
		return string(out)
	}
	S := run("iptables-nft", "-t", "nat", "-S")
	save := run("iptables-nft-save", "-t", "nat")
	_, section, _ := strings.Cut(save, "*nat\n")
	return []paste{
		{"-S", S},
		{"-L -n", run("iptables-nft", "-t", "nat", "-L", "-n")},
		{"-L -n -v", run("iptables-nft", "-t", "nat", "-L", "-n", "-v")},
		{"iptables-save -t nat", save},
		{"save section", section},
		{"kube-ps1 prompt, -S", "(⎈|kind-kind:default) [root@node-a ~]# iptables -t nat -S\n" + S},
		{"zsh prompt, -L -n -v", "user@laptop ~ % kubectl -n kube-system exec kube-proxy-x -- iptables -t nat -L -n -v\n" +
			run("iptables-nft", "-t", "nat", "-L", "-n", "-v")},
	}
}

type paste struct{ name, text string }

// TestTriageWholeNATPaste: a complete nat table, pasted in any form with
// a CNI's chains in it, is the whole table: a deleted endpoint jump is an
// error (exit 2), not "not checked" (exit 3); without the fault there is no
// error (the filter table's rejects are not checked).
func TestTriageWholeNATPaste(t *testing.T) {
	objects := filepath.Join(fixture.Dir("small-v1.37"), "objects.json")
	for _, fault := range []bool{true, false} {
		pastes := natPastes(t, fault)
		for _, p := range pastes {
			t.Run(map[bool]string{true: "fault", false: "healthy"}[fault]+"/"+p.name, func(t *testing.T) {
				file := filepath.Join(t.TempDir(), "paste.txt")
				if err := os.WriteFile(file, []byte(p.text), 0o644); err != nil {
					t.Fatal(err)
				}
				args := []string{"triage", "--from-dump", file, "--from-objects", objects, "--node", "node-a"}
				out, errOut, err := runCmd(t, nil, append(args, "-o", "json")...)
				want := map[bool]int{true: ExitProblems, false: ExitIncomplete}[fault]
				if code := exitOf(t, err, errOut); code != want {
					t.Errorf("exit %d, want %d", code, want)
				}
				var rep diagnose.TriageReport
				if err := json.Unmarshal([]byte(out), &rep); err != nil {
					t.Fatal(err)
				}
				var errs []string
				for _, f := range rep.Findings {
					if f.Severity == diagnose.SeverityError {
						errs = append(errs, f.Subject+": "+f.Message)
					}
				}
				if fault != (len(errs) > 0) {
					t.Errorf("errors %q", errs)
				}
				for _, e := range errs {
					if !strings.HasPrefix(e, "kube-system/kube-dns:dns-tcp") {
						t.Errorf("an error not of the fault: %s", e)
					}
				}
				for _, g := range rep.NotChecked {
					if strings.Contains(g.Check+g.Reason, "excerpt") || strings.Contains(g.Check+g.Remedy, "mangle") {
						t.Errorf("read as an excerpt: %s: %s", g.Check, g.Reason)
					}
				}
				if strings.Contains(errOut, "skipped") {
					t.Errorf("a line was skipped: %s", errOut)
				}
			})
		}
	}
}
