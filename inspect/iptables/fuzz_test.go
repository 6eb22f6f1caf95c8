package iptables

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// checkModel fails on a model the readers must never build: rule counts
// that disagree, chains listed twice in a table, rules of a chain the
// input never showed, a table without name or family.
func checkModel(t *testing.T, s string, opts Options) {
	rs, err := Read(strings.NewReader(s), "fuzz", opts)
	if err != nil {
		return
	}
	n := 0
	for _, tb := range rs.IPTables {
		if tb.Name == "" || tb.Family == "" {
			t.Fatalf("table %q family %q", tb.Name, tb.Family)
		}
		seen := map[string]bool{}
		for _, c := range tb.Chains {
			if seen[c.Name] {
				t.Fatalf("chain %s twice in %s", c.Name, tb.Name)
			}
			seen[c.Name] = true
			if c.OnlyReferenced && len(c.Rules) > 0 {
				t.Fatalf("only referenced chain %s has %d rules", c.Name, len(c.Rules))
			}
			for _, r := range c.Rules {
				if r == nil {
					t.Fatalf("nil rule in %s", c.Name)
				}
			}
			n += len(c.Rules)
		}
	}
	if n != rs.Dumps[0].Rules {
		t.Fatalf("rule count %d != dump count %d", n, rs.Dumps[0].Rules)
	}
}

// seed adds the first bytes of a committed real-tool listing.
func seed(f *testing.F, name string) {
	data, err := os.ReadFile(filepath.Join("testdata", "forms", "small-v1.37", name))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(string(data[:min(len(data), 4096)]))
}

// FuzzReadRules: iptables -S output and -A excerpts.
func FuzzReadRules(f *testing.F) {
	seed(f, "ipv4-S-nat.txt")
	seed(f, "ipv4-Sv-nat.txt")
	seed(f, "ipv6-S-nat-svc.txt")
	f.Add(":KUBE-IPTABLES-HINT - [0:0]\n:KUBE-KUBELET-CANARY - [0:0]\n-A INPUT -j KUBE-FIREWALL\n:KUBE-SERVICES - [0:0]\n-A KUBE-SERVICES -j KUBE-SVC-X\n")
	f.Add("-P INPUT ACCEPT -c 1 2\n-N A\n-A A -c 3 4 -j B\n-N A\n-A A -g A\n[0:0] -A X -j Y\n")
	f.Fuzz(func(t *testing.T, s string) { checkModel(t, s, Options{}) })
}

// FuzzReadListing: iptables -L output.
func FuzzReadListing(f *testing.F) {
	seed(f, "ipv4-L-nat.txt")
	seed(f, "ipv4-Lvx-nat.txt")
	seed(f, "ipv4-Lv.txt")
	seed(f, "ipv6-Lv-mangle.txt")
	f.Add("Chain X (1 references)\n num pkts bytes target prot opt in out source destination\n1 2K 3M Y all -- * !e 0.0.0.0/0 ::/0 [goto] /* a */ recent: CHECK seconds: x name: side: statistic mode random ! probability\n")
	f.Add("Chain X (policy ACCEPT)\nMARK 0 -- anywhere anywhere MARK xset 0x1/ CONNMARK restore nfmask ~0x1 ctmask\n")
	f.Fuzz(func(t *testing.T, s string) { checkModel(t, s, Options{}) })
}

// FuzzReadPaste: several forms, prompts, text and CRLF in one input, with
// and without Options.Table.
func FuzzReadPaste(f *testing.F) {
	f.Add("$ iptables -t nat -S KUBE-SVC-A\r\n-N KUBE-SVC-A\r\n-A KUBE-SVC-A -j KUBE-SEP-B\r\nsome text\r\n# iptables -L -n\r\nChain INPUT (policy DROP)\r\ntarget prot opt source destination\r\nACCEPT all -- 0.0.0.0/0 0.0.0.0/0\r\n*nat\r\n:KUBE-SEP-B - [0:0]\r\nCOMMIT\r\n....\r\n", "")
	f.Add("[root@h ~]# ip6tables -t mangle -nvL | grep X\n    0 0 X 0 -- * * ::/0 ::/0\n", "nat")
	f.Add("(⎈|kind-kind:default) [root@node-a ~]# iptables -t nat -S\n-P PREROUTING ACCEPT\n-P INPUT ACCEPT\n-P OUTPUT ACCEPT\n-P POSTROUTING ACCEPT\n-N AWS-CONNMARK-CHAIN-0\n-A AWS-CONNMARK-CHAIN-0 -j CONNMARK --set-xmark 0x80/0x80\n", "")
	f.Add(":PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n:AWS-SNAT-CHAIN-0 - [0:0]\n-A POSTROUTING -j AWS-SNAT-CHAIN-0\nCOMMIT\n➜  ~ iptables -S\n-P INPUT ACCEPT\n", "")
	f.Fuzz(func(t *testing.T, s, table string) {
		opts := Options{}
		if tableBits[table] != 0 {
			opts.Table = table
		}
		checkModel(t, s, opts)
	})
}

// FuzzParseCommandLine: prompts of every style, and lines that only look
// like one; a recognised command line has a command.
func FuzzParseCommandLine(f *testing.F) {
	for _, s := range []string{
		"(⎈|kind-kind:default) [root@node-a ~]# iptables -t nat -S", "➜  repo git:(main) ✗ sudo iptables -L -n",
		"user@host ~ % iptables-save -t nat", "~/src ❯ ip6tables -S", "node-a:~ # iptables -t nat -S",
		"(venv) user@host:~/repo (main)$ iptables -S", "((( ➜", "➜", "(x) ➜ ✗", "❯", "a:~ % ❯ #",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cmd, ok := parseCommandLine(s)
		if ok && strings.TrimSpace(cmd.text) == "" {
			t.Fatalf("%q: a command line without a command", s)
		}
		if !ok && cmd != (command{}) {
			t.Fatalf("%q: not a command line, but %+v", s, cmd)
		}
	})
}
