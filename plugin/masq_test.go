package plugin

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/diagnose"
)

// masq on faults injected into kube-proxy's own rules (small-v1.37): the
// problem names the use of the mark that differs, the evidence and a fix
// follow, bits are labelled right, and no rule is cut before its mark.
func TestMasqFaults(t *testing.T) {
	const small = "../testdata/fixtures/small-v1.37/"
	read := func(p string) string {
		data, err := os.ReadFile(small + p)
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	save4, nftText := read("iptables/save-nft-ipv4.txt"), read("nftables/ruleset.txt")
	const markMasq = "-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000"
	for _, c := range []struct {
		name, golden, dump, config string
		mark, problem, fix         string
	}{
		{"KUBE-MARK-MASQ sets bit 15", "masq-fault-set-bit15.txt", strings.Replace(save4, markMasq, strings.ReplaceAll(markMasq, "0x4000", "0x8000"), 1), small + "kube-proxy-configmap-iptables.yaml",
			"set 0x00008000 (bit 15), tested and cleared 0x00004000 (bit 14)",
			"KUBE-MARK-MASQ sets 0x00008000 (bit 15) but KUBE-POSTROUTING tests and clears 0x00004000 (bit 14), as kube-proxy is configured (iptables.masqueradeBit 14)",
			"find who rewrote KUBE-MARK-MASQ"},
		{"KUBE-POSTROUTING tests bit 15", "", strings.Replace(save4, "! --mark 0x4000/0x4000 -j RETURN", "! --mark 0x8000/0x8000 -j RETURN", 1), "",
			"set and cleared 0x00004000 (bit 14), tested 0x00008000 (bit 15)",
			"KUBE-POSTROUTING tests 0x00008000 (bit 15) but KUBE-MARK-MASQ sets and KUBE-POSTROUTING clears 0x00004000 (bit 14)",
			"find who rewrote KUBE-POSTROUTING"},
		{"configured bit 15", "", save4, "../testdata/fixtures/masq-bit15-v1.37/kube-proxy-configmap-iptables.yaml",
			"0x00004000 (bit 14)",
			"kube-proxy's configuration (../testdata/fixtures/masq-bit15-v1.37/kube-proxy-configmap-iptables.yaml) sets iptables.masqueradeBit 15 (0x00008000) but KUBE-MARK-MASQ sets and KUBE-POSTROUTING tests and clears 0x00004000 (bit 14)",
			"to program bit 15"},
		{"nftables masquerading clears bit 15", "", strings.ReplaceAll(nftText, "meta mark ^ 0x00004000", "meta mark ^ 0x00008000"), "",
			"set and tested 0x00004000 (bit 14), cleared 0x00008000 (bit 15)",
			"masquerading clears 0x00008000 (bit 15) but the rules of services and 7 more chains set and masquerading tests 0x00004000 (bit 14)",
			"find who rewrote masquerading"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dump := filepath.Join(t.TempDir(), "dump.txt")
			if err := os.WriteFile(dump, []byte(c.dump), 0o600); err != nil {
				t.Fatal(err)
			}
			args := []string{"masq", "--from-dump", dump}
			if c.config != "" {
				args = append(args, "--from-config", c.config)
			}
			out, _, err := runCmd(t, nil, args...)
			if code, _ := IsExitError(err); code != ExitProblems {
				t.Fatalf("exit %v, want %d\n%s", err, ExitProblems, out)
			}
			flat := strings.Join(strings.Fields(out), " ")
			for _, want := range []string{"mark " + c.mark + " random-fully", "problem " + c.problem, " evidence ", " fix ", c.fix} {
				if !strings.Contains(flat, want) {
					t.Errorf("no %q in\n%s", want, out)
				}
			}
			if strings.Contains(out, "not a single bit") {
				t.Errorf("a single bit called not one:\n%s", out)
			}
			var rep diagnose.MasqueradeReport
			js, _, _ := runCmd(t, nil, append(args, "-o", "json")...)
			if err := json.Unmarshal([]byte(js), &rep); err != nil {
				t.Fatal(err)
			}
			for _, f := range rep.Families {
				refs := append(append(append([]diagnose.RuleRef{}, f.SetBy...), f.TestedBy...), f.ClearedBy...)
				for _, fd := range f.Findings {
					for _, u := range fd.Evidence {
						refs = append(refs, diagnose.RuleRef{Rule: u.Rule, Mark: u.Mark})
					}
				}
				for _, ref := range refs {
					if shown := upToMark(ref.Rule, ref.Mark); !strings.Contains(flat, strings.Join(strings.Fields(shown), " ")) {
						t.Errorf("rule cut before its mark %s: %q not in\n%s", ref.Mark, shown, out)
					}
				}
			}
			if c.golden != "" {
				checkGolden(t, c.golden, []byte(out))
			}
		})
	}
}

// upToMark is rule up to the end of the last number equal to mark.
func upToMark(rule, mark string) string {
	want, _ := strconv.ParseUint(strings.TrimPrefix(mark, "0x"), 16, 32)
	end := 0
	for _, loc := range markToken.FindAllStringIndex(rule, -1) {
		if v, err := strconv.ParseUint(rule[loc[0]+2:loc[1]], 16, 32); err == nil && v == want {
			end = loc[1]
		}
	}
	return rule[:end]
}
