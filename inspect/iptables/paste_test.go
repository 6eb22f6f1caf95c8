package iptables

import (
	"strings"
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/inspect"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// The inputs below have the shapes of rule text posted in public issues,
// blogs and study notes (EKS, kind, minikube, Calico, Canal, AWS VPC CNI
// clusters; iptables 1.4 to 1.8), rewritten with this project's names.

func readString(t *testing.T, s string, opts Options) *inspect.Ruleset {
	t.Helper()
	rs, err := Read(strings.NewReader(s), "paste", opts)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	return rs
}

// tables lists "family/table:chains:rules" per table.
func tables(rs *inspect.Ruleset) []string {
	var out []string
	for _, t := range rs.IPTables {
		out = append(out, string(t.Family)+"/"+t.Name)
	}
	return out
}

func chainOf(t *testing.T, rs *inspect.Ruleset, fam kubeproxy.Family, table, chain string) *inspect.IPChain {
	t.Helper()
	tb := rs.IPTable(fam, table)
	if tb == nil {
		t.Fatalf("no %s/%s table: %v", fam, table, tables(rs))
	}
	c := tb.Chain(chain)
	if c == nil {
		t.Fatalf("no chain %s in %s/%s", chain, fam, table)
	}
	return c
}

func warnings(rs *inspect.Ruleset) string { return strings.Join(rs.Dumps[0].Warnings, "\n") }

func TestReadListings(t *testing.T) {
	tests := []struct {
		name  string
		input string
		check func(t *testing.T, rs *inspect.Ruleset)
	}{{
		name: "iptables 1.6 without -n: all, anywhere, port names, MARK set, en dashes in the command",
		input: "# iptables –t nat –L\n" +
			"Chain KUBE-SEP-G3MLSGWVLUPEIMXS (1 references)\n" +
			"target     prot opt source               destination\n" +
			"MARK       all  --  172.16.16.2          anywhere             /* default/webpod-service: */ MARK set 0x4d415351\n" +
			"DNAT       tcp  --  anywhere             anywhere             /* default/webpod-service: */ tcp to:172.16.16.2:80\n" +
			"\n" +
			"Chain KUBE-SERVICES (2 references)\n" +
			"target     prot opt source               destination\n" +
			"KUBE-SVC-N4RX4VPNP4ATLCGG  tcp  --  anywhere             192.168.3.237        /* default/webpod-service: cluster IP */ tcp dpt:http\n" +
			"KUBE-NODEPORTS  all  --  anywhere             anywhere             /* kubernetes service nodeports; NOTE: this must be the last rule in this chain */ ADDRTYPE match dst-type LOCAL\n",
		check: func(t *testing.T, rs *inspect.Ruleset) {
			sep := chainOf(t, rs, kubeproxy.IPv4, "nat", "KUBE-SEP-G3MLSGWVLUPEIMXS").Rules
			if m := sep[0].SetMark(); sep[0].Source.Value != "172.16.16.2/32" || m == nil || m.Value != 0x4d415351 || m.Mask != 0xffffffff {
				t.Errorf("MARK rule: %+v %+v", sep[0], sep[0].More)
			}
			if sep[1].ToDestination != "172.16.16.2:80" || sep[1].Protocol != "tcp" || sep[1].Comment != "default/webpod-service:" {
				t.Errorf("DNAT rule: %+v", sep[1])
			}
			svc := chainOf(t, rs, kubeproxy.IPv4, "nat", "KUBE-SERVICES").Rules
			if svc[0].DPort().Value != "80" || svc[0].Destination().Value != "192.168.3.237/32" || svc[0].Target != "KUBE-SVC-N4RX4VPNP4ATLCGG" {
				t.Errorf("service rule: %+v %+v", svc[0], svc[0].More)
			}
			if svc[1].More == nil || svc[1].More.DstType.Value != "LOCAL" {
				t.Errorf("nodeports rule: %+v", svc[1])
			}
			if c := rs.IPTable(kubeproxy.IPv4, "nat").Chain("KUBE-SVC-N4RX4VPNP4ATLCGG"); c == nil || !c.OnlyReferenced {
				t.Errorf("jump target not marked referenced: %+v", c)
			}
			if w := warnings(rs); !strings.Contains(w, "names, not addresses") || strings.Contains(w, "inferred") {
				t.Errorf("warnings: %s", w)
			}
		},
	}, {
		name: "EKS -nvL: rounded counters, AWS chains, interfaces, a cut",
		input: "[ec2-user@ip-192-168-12-7 ~]$ sudo iptables -t nat -nvL\n" +
			"Chain POSTROUTING (policy ACCEPT 2062K packets, 124M bytes)\n" +
			" pkts bytes target     prot opt in     out     source               destination\n" +
			"2142K  129M KUBE-POSTROUTING  all  --  *      *       0.0.0.0/0            0.0.0.0/0            /* kubernetes postrouting rules */\n" +
			"1750K  105M AWS-SNAT-CHAIN-0  all  --  *      *       0.0.0.0/0            0.0.0.0/0            /* AWS SNAT CHAIN */\n" +
			"\n" +
			"Chain AWS-SNAT-CHAIN-0 (1 references)\n" +
			" pkts bytes target     prot opt in     out     source               destination\n" +
			"    0     0 SNAT       all  --  *      !vlan+  0.0.0.0/0            0.0.0.0/0            /* AWS, SNAT */ ADDRTYPE match dst-type !LOCAL to:192.168.12.7 random-fully\n" +
			"....\n",
		check: func(t *testing.T, rs *inspect.Ruleset) {
			post := chainOf(t, rs, kubeproxy.IPv4, "nat", "POSTROUTING")
			if post.Policy != "ACCEPT" || post.Packets != 2062000 || post.Bytes != 124000000 || post.Rules[0].More.Packets != 2142000 {
				t.Errorf("POSTROUTING: %+v", post)
			}
			r := chainOf(t, rs, kubeproxy.IPv4, "nat", "AWS-SNAT-CHAIN-0").Rules[0]
			if r.Target != "SNAT" || !r.RandomFully() || !r.More.OutIface.Not || r.More.OutIface.Value != "vlan+" || !r.More.DstType.Not {
				t.Errorf("SNAT rule: %+v %+v", r, r.More)
			}
			if !rs.IPTable(kubeproxy.IPv4, "nat").Partial {
				t.Error("a listing cut with .... must be partial")
			}
			if w := warnings(rs); !strings.Contains(w, "rounded") || !strings.Contains(w, `"...."`) {
				t.Errorf("warnings: %s", w)
			}
		},
	}, {
		name: "old ip6tables: no opt column; old -v: any interfaces",
		input: "Chain KUBE-SERVICES (2 references)\n" +
			"target     prot opt source               destination\n" +
			"KUBE-SVC-XPGD46QRK7WJZT7O  tcp      ::/0                 fd00:10:96::41       /* ns1/svc1:p80 cluster IP */ tcp dpt:80\n" +
			"           all      ::/0                 ::/0                 /* no target */\n" +
			"\n" +
			"$ iptables -t nat -L -v\n" +
			"Chain KUBE-SEP-NCDBIYVKEUM6V7JV (1 references)\n" +
			" pkts bytes target     prot opt in     out     source               destination\n" +
			"    0     0 KUBE-MARK-MASQ  all  --  any    any     192.168.75.33        anywhere             /* kube-system/kube-dns:dns */\n",
		check: func(t *testing.T, rs *inspect.Ruleset) {
			r := chainOf(t, rs, kubeproxy.IPv6, "nat", "KUBE-SERVICES").Rules
			if len(r) != 2 || r[0].Destination().Value != "fd00:10:96::41/128" || r[0].DPort().Value != "80" || r[1].Target != "" || r[1].Comment != "no target" {
				t.Errorf("ip6tables rows: %+v", r)
			}
			m := chainOf(t, rs, kubeproxy.IPv4, "nat", "KUBE-SEP-NCDBIYVKEUM6V7JV").Rules[0]
			if m.Source.Value != "192.168.75.33/32" || m.More != nil && (m.More.InIface.Set() || m.More.OutIface.Set()) {
				t.Errorf("any interfaces: %+v %+v", m, m.More)
			}
		},
	}, {
		name: "line numbers that skip; rows without a Chain header (grep)",
		input: "$ iptables -t nat -L KUBE-SVC-67NZLRHBNDSAWJRO -n --line-numbers\n" +
			"Chain KUBE-SVC-67NZLRHBNDSAWJRO (1 references)\n" +
			"num  target     prot opt source               destination\n" +
			"1    KUBE-MARK-MASQ  6    -- !10.244.0.0/16        10.96.10.1           /* shop/web:http cluster IP */ tcp dpt:80\n" +
			"3    KUBE-SEP-EPVTA2RHFPHQF37H  0    --  0.0.0.0/0            0.0.0.0/0            /* shop/web:http -> 10.244.1.11:8080 */ statistic mode random probability 0.50000000000\n" +
			"$ iptables -t nat -L -n | grep KUBE-SEP-BTZ\n" +
			"KUBE-SEP-BTZNBNILETY57XCS  0    --  0.0.0.0/0            0.0.0.0/0            /* shop/web:http -> 10.244.2.11:8080 */\n" +
			"$ iptables -t nat -L KUBE-SVC-BBBB -n | grep SEP\n" +
			"KUBE-SEP-BTZNBNILETY57XCS  0    --  0.0.0.0/0            0.0.0.0/0            /* shop/web:http -> 10.244.2.11:8080 */\n",
		check: func(t *testing.T, rs *inspect.Ruleset) {
			r := chainOf(t, rs, kubeproxy.IPv4, "nat", "KUBE-SVC-67NZLRHBNDSAWJRO").Rules
			if len(r) != 2 || !r[0].Source.Not || r[1].Probability != 0.5 || !r[1].Random {
				t.Errorf("rules: %+v", r)
			}
			if w := warnings(rs); !strings.Contains(w, "from rule 2") || !strings.Contains(w, "1 rows without their Chain header") {
				t.Errorf("warnings: %s", w)
			}
			// The command names the chain the grep'd rows are from.
			if r := chainOf(t, rs, kubeproxy.IPv4, "nat", "KUBE-SVC-BBBB").Rules; len(r) != 1 || r[0].Target != "KUBE-SEP-BTZNBNILETY57XCS" {
				t.Errorf("KUBE-SVC-BBBB: %+v", r)
			}
		},
	}, {
		name: "kube-ovn dual stack: grep -A after the chain, old ip6tables, match-set",
		input: "$ sudo ip6tables -t nat -nL |grep POSTROUT -A 10\n" +
			"Chain POSTROUTING (policy ACCEPT)\n" +
			"target     prot opt source               destination\n" +
			"RETURN     all      ::/0                 ::/0                 ! match-set ovn60subnets src ! match-set ovn60other-node src match-set ovn60subnets-nat dst\n" +
			"KUBE-POSTROUTING  all      ::/0                 ::/0                 /* kubernetes postrouting rules */\n",
		check: func(t *testing.T, rs *inspect.Ruleset) {
			r := chainOf(t, rs, kubeproxy.IPv6, "nat", "POSTROUTING").Rules
			const want = "-m set ! --match-set ovn60subnets src -m set ! --match-set ovn60other-node src -m set --match-set ovn60subnets-nat dst -j RETURN"
			if len(r) != 2 || r[0].Text != want || r[1].Comment != "kubernetes postrouting rules" {
				t.Errorf("rules %q %+v", r[0].Text, r)
			}
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.check(t, readString(t, tc.input, Options{})) })
	}
}

// pasteCase is a paste of iptables rules and what must be read from it.
type pasteCase struct {
	name  string
	input string
	opts  Options
	check func(t *testing.T, rs *inspect.Ruleset)
}

// rulesAndExcerptsCases are pastes of -S output, save excerpts and mixes.
var rulesAndExcerptsCases = []pasteCase{{
	name: "iptables-save | grep KUBE: three tables without headers",
	input: "$ sudo iptables-save | grep KUBE\n" +
		":KUBE-IPTABLES-HINT - [0:0]\n:KUBE-KUBELET-CANARY - [0:0]\n" +
		":KUBE-FIREWALL - [0:0]\n:KUBE-KUBELET-CANARY - [0:0]\n:KUBE-SERVICES - [0:0]\n" +
		"-A INPUT -j KUBE-FIREWALL\n" +
		"-A KUBE-SERVICES -d 10.96.10.9/32 -p tcp -m comment --comment \"shop/empty:http has no endpoints\" -m tcp --dport 80 -j REJECT --reject-with icmp-port-unreachable\n" +
		":KUBE-KUBELET-CANARY - [0:0]\n:KUBE-SERVICES - [0:0]\n:KUBE-SVC-67NZLRHBNDSAWJRO - [0:0]\n" +
		"-A PREROUTING -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES\n" +
		"-A KUBE-SERVICES -d 10.96.10.1/32 -p tcp -m comment --comment \"shop/web:http cluster IP\" -m tcp --dport 80 -j KUBE-SVC-67NZLRHBNDSAWJRO\n" +
		"-A KUBE-SVC-67NZLRHBNDSAWJRO -m comment --comment \"shop/web:http -> 10.244.0.11:8080\" -m statistic --mode random --probability 0.33333333349 -j KUBE-SEP-GXKVICYM64SODBWJ\n",
	check: func(t *testing.T, rs *inspect.Ruleset) {
		if got := strings.Join(tables(rs), " "); got != "IPv4/mangle IPv4/filter IPv4/nat" {
			t.Fatalf("tables %s", got)
		}
		if n := len(chainOf(t, rs, kubeproxy.IPv4, "mangle", "KUBE-KUBELET-CANARY").Rules); n != 0 {
			t.Errorf("mangle canary has %d rules", n)
		}
		if r := chainOf(t, rs, kubeproxy.IPv4, "filter", "KUBE-SERVICES").Rules; len(r) != 1 || r[0].Target != "REJECT" {
			t.Errorf("filter KUBE-SERVICES: %+v", r)
		}
		if r := chainOf(t, rs, kubeproxy.IPv4, "nat", "KUBE-SERVICES").Rules; len(r) != 1 || r[0].Target != "KUBE-SVC-67NZLRHBNDSAWJRO" {
			t.Errorf("nat KUBE-SERVICES: %+v", r)
		}
		if c := chainOf(t, rs, kubeproxy.IPv4, "nat", "KUBE-SEP-GXKVICYM64SODBWJ"); !c.OnlyReferenced || len(c.Rules) != 0 {
			t.Errorf("referenced chain: %+v", c)
		}
		if rs.Dumps[0].Format != inspect.FormatIPTablesExcerpt {
			t.Errorf("format %s", rs.Dumps[0].Format)
		}
	},
}, {
	name: "-A lines of two tables, no declarations: cut where the evidence changes table",
	input: "-A KUBE-SERVICES -d 10.96.10.9/32 -p tcp -m comment --comment \"shop/empty:http has no endpoints\" -m tcp --dport 80 -j REJECT --reject-with icmp-port-unreachable\r\n" +
		"-A KUBE-SERVICES -d 10.96.10.1/32 -p tcp -m comment --comment \"shop/web:http cluster IP\" -m tcp --dport 80 -j KUBE-SVC-67NZLRHBNDSAWJRO\r\n" +
		"-A KUBE-SERVICES -m comment --comment \"kubernetes service nodeports; NOTE: this must be the last rule in this chain\" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS\r\n",
	check: func(t *testing.T, rs *inspect.Ruleset) {
		if n := len(chainOf(t, rs, kubeproxy.IPv4, "filter", "KUBE-SERVICES").Rules); n != 1 {
			t.Errorf("filter KUBE-SERVICES has %d rules", n)
		}
		if n := len(chainOf(t, rs, kubeproxy.IPv4, "nat", "KUBE-SERVICES").Rules); n != 2 {
			t.Errorf("nat KUBE-SERVICES has %d rules", n)
		}
	},
}, {
	name: "iptables -S -v of a whole table: policies with counters, -c in the rules",
	input: "    -P INPUT ACCEPT -c 10 600\n    -P FORWARD DROP -c 0 0\n    -P OUTPUT ACCEPT -c 5 300\n" +
		"    -N KUBE-FORWARD\n" +
		"    -A FORWARD -m comment --comment \"kubernetes forwarding rules\" -c 7 420 -j KUBE-FORWARD\n" +
		"    -A KUBE-FORWARD -m conntrack --ctstate INVALID -c 0 0 -j DROP\n",
	check: func(t *testing.T, rs *inspect.Ruleset) {
		tb := rs.IPTable(kubeproxy.IPv4, "filter")
		if tb == nil || tb.Partial {
			t.Fatalf("filter: %+v (%v)", tb, tables(rs))
		}
		if c := tb.Chain("INPUT"); c.Policy != "ACCEPT" || c.Packets != 10 || c.Bytes != 600 {
			t.Errorf("INPUT: %+v", c)
		}
		if c := tb.Chain("FORWARD"); c.Policy != "DROP" {
			t.Errorf("FORWARD: %+v", c)
		}
		r := tb.Chain("FORWARD").Rules[0]
		if r.More.Packets != 7 || r.More.Bytes != 420 || r.Text != `-m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD` {
			t.Errorf("rule: %q %+v", r.Text, r.More)
		}
		if rs.Dumps[0].Format != inspect.FormatIPTablesRules {
			t.Errorf("format %s", rs.Dumps[0].Format)
		}
	},
}, {
	name:  "a chain whose table nothing tells: filter, with a warning",
	input: "-A OUTPUT -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES\n",
	check: func(t *testing.T, rs *inspect.Ruleset) {
		chainOf(t, rs, kubeproxy.IPv4, "filter", "OUTPUT")
		if w := warnings(rs); !strings.Contains(w, "pass the table (--table)") {
			t.Errorf("warnings: %s", w)
		}
	},
}, {
	name:  "the same, with Options.Table",
	input: "-A OUTPUT -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES\n",
	opts:  Options{Table: "nat", Family: kubeproxy.IPv6},
	check: func(t *testing.T, rs *inspect.Ruleset) {
		chainOf(t, rs, kubeproxy.IPv6, "nat", "OUTPUT")
		if w := warnings(rs); strings.Contains(w, "--table") || strings.Contains(w, "inferred") {
			t.Errorf("warnings: %s", w)
		}
	},
}, {
	name: "a command line's -t wins over Options.Table; ip6tables is IPv6",
	input: "root@node-a:~# ip6tables -t nat -S KUBE-NODEPORTS\n-N KUBE-NODEPORTS\n" +
		"root@node-a:~# iptables -S KUBE-NODEPORTS\n-N KUBE-NODEPORTS\n-A KUBE-NODEPORTS -p tcp -m comment --comment \"shop/ingress:http health check node port\" -m tcp --dport 32001 -j ACCEPT\n",
	opts: Options{Table: "mangle"},
	check: func(t *testing.T, rs *inspect.Ruleset) {
		if got := strings.Join(tables(rs), " "); got != "IPv6/nat IPv4/filter" {
			t.Errorf("tables %s", got)
		}
	},
}, {
	name: "several -S outputs, one chain pasted twice, text between them",
	input: "Here is KUBE-SVC:\n\n-N KUBE-SVC-67NZLRHBNDSAWJRO\n" +
		"-A KUBE-SVC-67NZLRHBNDSAWJRO -m comment --comment \"shop/web:http -> 10.244.0.11:8080\" -j KUBE-SEP-GXKVICYM64SODBWJ\n" +
		"and its endpoint\nchain:\n" +
		"-N KUBE-SEP-GXKVICYM64SODBWJ\n" +
		"-A KUBE-SEP-GXKVICYM64SODBWJ -p tcp -m comment --comment \"shop/web:http\" -m tcp -j DNAT --to-destination 10.244.0.11:8080\n" +
		"-N KUBE-SVC-67NZLRHBNDSAWJRO\n" +
		"-A KUBE-SVC-67NZLRHBNDSAWJRO -m comment --comment \"shop/web:http -> 10.244.0.11:8080\" -j KUBE-SEP-GXKVICYM64SODBWJ\n",
	check: func(t *testing.T, rs *inspect.Ruleset) {
		if n := len(chainOf(t, rs, kubeproxy.IPv4, "nat", "KUBE-SVC-67NZLRHBNDSAWJRO").Rules); n != 1 {
			t.Errorf("KUBE-SVC has %d rules", n)
		}
		if c := chainOf(t, rs, kubeproxy.IPv4, "nat", "KUBE-SEP-GXKVICYM64SODBWJ"); c.OnlyReferenced || len(c.Rules) != 1 {
			t.Errorf("KUBE-SEP: %+v", c)
		}
		w := warnings(rs)
		for _, want := range []string{`line 1: skipped, not iptables rules: "Here is KUBE-SVC:"`, `lines 5-6: 2 lines skipped`, "listed again"} {
			if !strings.Contains(w, want) {
				t.Errorf("warnings lack %q: %s", want, w)
			}
		}
	},
}, {
	name: "a save dump, then -S and -L of the same table: one table, the dump's rules kept",
	input: "*nat\n:KUBE-SERVICES - [0:0]\n:KUBE-MARK-MASQ - [0:0]\n-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000\nCOMMIT\n" +
		"# iptables -t nat -S KUBE-MARK-MASQ\n-N KUBE-MARK-MASQ\n-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000\n" +
		"# iptables -t nat -L KUBE-POSTROUTING -n\nChain KUBE-POSTROUTING (1 references)\n" +
		"target     prot opt source               destination\n" +
		"RETURN     0    --  0.0.0.0/0            0.0.0.0/0            mark match ! 0x4000/0x4000\n",
	check: func(t *testing.T, rs *inspect.Ruleset) {
		if got := strings.Join(tables(rs), " "); got != "IPv4/nat" {
			t.Fatalf("tables %s", got)
		}
		if n := len(chainOf(t, rs, kubeproxy.IPv4, "nat", "KUBE-MARK-MASQ").Rules); n != 1 {
			t.Errorf("KUBE-MARK-MASQ has %d rules", n)
		}
		if m := chainOf(t, rs, kubeproxy.IPv4, "nat", "KUBE-POSTROUTING").Rules[0].MarkMatch(); m == nil || !m.Not || m.Mask != 0x4000 {
			t.Errorf("mark match %+v", m)
		}
		if rs.Dumps[0].Format != inspect.FormatIPTablesMixed || rs.Dumps[0].Rules != 2 {
			t.Errorf("dump %+v", rs.Dumps[0])
		}
	},
}, {
	name: "Calico and kube-proxy in one -S: foreign chains kept",
	input: "-P PREROUTING ACCEPT\n-P INPUT ACCEPT\n-P OUTPUT ACCEPT\n-P POSTROUTING ACCEPT\n" +
		"-N cali-nat-outgoing\n-N KUBE-POSTROUTING\n" +
		"-A POSTROUTING -m comment --comment \"cali:O3lYWMrLQYEMJtB5\" -j cali-POSTROUTING\n" +
		"-A cali-nat-outgoing -m comment --comment \"cali:flqWnvo8yq4ULQLa\" -m set --match-set cali40masq-ipam-pools src -m set ! --match-set cali40all-ipam-pools dst -j MASQUERADE --random-fully\n",
	check: func(t *testing.T, rs *inspect.Ruleset) {
		r := chainOf(t, rs, kubeproxy.IPv4, "nat", "cali-nat-outgoing").Rules[0]
		if r.More == nil || r.More.MatchSet.Value == "" || !r.RandomFully() {
			t.Errorf("calico rule %+v", r)
		}
		// The -N line of cali-POSTROUTING was left out of the paste.
		if c := chainOf(t, rs, kubeproxy.IPv4, "nat", "cali-POSTROUTING"); !c.OnlyReferenced || !rs.IPTables[0].Partial {
			t.Errorf("an undeclared jump target: %+v, partial %v", c, rs.IPTables[0].Partial)
		}
	},
}}

func TestReadRulesAndExcerpts(t *testing.T) {
	for _, tc := range rulesAndExcerptsCases {
		t.Run(tc.name, func(t *testing.T) { tc.check(t, readString(t, tc.input, tc.opts)) })
	}
}

func TestReadErrors(t *testing.T) {
	if _, err := Read(strings.NewReader("-N X\n"), "x", Options{Table: "natt"}); err == nil || !strings.Contains(err.Error(), "unknown iptables table") {
		t.Errorf("bad Options.Table: %v", err)
	}
	_, err := Read(strings.NewReader("$ iptables -t nat -L -n | grep SEP\nKUBE-SEP-X  0    --  0.0.0.0/0            0.0.0.0/0\n"), "x", Options{})
	if err == nil || !strings.Contains(err.Error(), "without their Chain header") {
		t.Errorf("rows without chains: %v", err)
	}
}

func TestParseCommandLine(t *testing.T) {
	tests := []struct {
		line string
		ok   bool
		want command
	}{
		{"$ iptables -t nat -S KUBE-SERVICES", true, command{iptables: true, family: kubeproxy.IPv4, table: "nat", rules: true, chain: "KUBE-SERVICES"}},
		{"root@node-a:~# ip6tables-legacy -nvL -t mangle", true, command{iptables: true, family: kubeproxy.IPv6, backend: kubeproxy.BackendLegacy, table: "mangle", list: true}},
		{"[root@ip-10-0-1-7 ~]# iptables-nft-save | grep KUBE", true, command{iptables: true, family: kubeproxy.IPv4, backend: kubeproxy.BackendNFT, save: true, filtered: true}},
		{"/ # iptables -tnat -L KUBE-NODEPORTS", true, command{iptables: true, family: kubeproxy.IPv4, table: "nat", list: true, chain: "KUBE-NODEPORTS"}},
		{"$ kubectl -n kube-system exec kube-proxy-x -- iptables -t nat -S", true, command{iptables: true, family: kubeproxy.IPv4, table: "nat", rules: true}},
		{"sh-5.1# sudo iptables --table=filter --list-rules", true, command{iptables: true, family: kubeproxy.IPv4, table: "filter", rules: true}},
		{"$ cat rules.txt", true, command{}},
		{"# iptables -L -t nat|grep nginx", true, command{iptables: true, family: kubeproxy.IPv4, table: "nat", list: true, filtered: true}},
		{"$ sudo iptables -t nat -L PREROUTING -vn", true, command{iptables: true, family: kubeproxy.IPv4, table: "nat", list: true, chain: "PREROUTING"}},
		{"(⎈|kind-kind:default) [root@node-a ~]# iptables -t nat -S", true, command{iptables: true, family: kubeproxy.IPv4, table: "nat", rules: true}},
		{"(⎈|ctx:ns) user@host:~$ sudo iptables-save -t nat", true, command{iptables: true, family: kubeproxy.IPv4, table: "nat", save: true}},
		{"user@MacBook-Pro ~ % kubectl exec -n kube-system kube-proxy-x -- iptables -t nat -L -n -v", true, command{iptables: true, family: kubeproxy.IPv4, table: "nat", list: true}},
		{"❯ ip6tables -t nat -S", true, command{iptables: true, family: kubeproxy.IPv6, table: "nat", rules: true}},
		{"~/src ❯ iptables -nvL", true, command{iptables: true, family: kubeproxy.IPv4, list: true}},
		{"➜  ~ sudo iptables -t nat -S", true, command{iptables: true, family: kubeproxy.IPv4, table: "nat", rules: true}},
		{"➜  repo git:(main) ✗ iptables -t mangle -S", true, command{iptables: true, family: kubeproxy.IPv4, table: "mangle", rules: true}},
		{"node-a:~ # iptables -t nat -S", true, command{iptables: true, family: kubeproxy.IPv4, table: "nat", rules: true}},
		{"root@node:/# iptables -t nat -S", true, command{iptables: true, family: kubeproxy.IPv4, table: "nat", rules: true}},
		{"(venv) user@host:~/repo (main)$ iptables -S", true, command{iptables: true, family: kubeproxy.IPv4, rules: true}},
		{"➜  ~ these are the rules", false, command{}},
		{"➜", false, command{}},
		{"(⎈|ctx:ns) a paragraph about # signs", false, command{}},
		{"Note: 50% of connections go to each endpoint", false, command{}},
		{"user@host said # iptables rules below", false, command{}},
		{"# Generated by iptables-save v1.8.9 on x", false, command{}},
		{"# Completed on Sun Nov 29", false, command{}},
		{"# iptables rules of node-a", false, command{}},
		{"# this is a comment", false, command{}},
		{"KUBE-SEP-X  0 -- 0.0.0.0/0 0.0.0.0/0 /* $ x */", false, command{}},
		{"-A KUBE-SVC-X -m comment --comment \"# x\" -j Y", false, command{}},
	}
	for _, tc := range tests {
		got, ok := parseCommandLine(tc.line)
		got.text, got.program = "", ""
		if ok != tc.ok || got != tc.want {
			t.Errorf("%q: %+v %v, want %+v %v", tc.line, got, ok, tc.want, tc.ok)
		}
	}
}

func TestParseListRow(t *testing.T) {
	tests := []struct {
		line     string
		cols     listColumns
		haveCols bool
		want     listRow
	}{
		{"KUBE-SVC-X  6    --  0.0.0.0/0            10.96.0.1            /* c */ tcp dpt:443", listColumns{}, true,
			listRow{target: "KUBE-SVC-X", prot: "6", source: "0.0.0.0/0", dest: "10.96.0.1", extension: "/* c */ tcp dpt:443"}},
		{"           0    --  0.0.0.0/0            0.0.0.0/0            /* no target */", listColumns{}, true,
			listRow{prot: "0", source: "0.0.0.0/0", dest: "0.0.0.0/0", extension: "/* no target */"}},
		{"2      120K   7200K KUBE-SEP-X  0    --  eth0   !cali+  ::/0 ::/0", listColumns{num: true, counters: true, ifaces: true}, true,
			listRow{num: 2, hasNum: true, packets: "120K", bytes: "7200K", target: "KUBE-SEP-X", prot: "0", in: "eth0", out: "!cali+", source: "::/0", dest: "::/0"}},
		// No header line: the leading numbers and interfaces are guessed.
		{"   12   720 DNAT       tcp  --  *      *       0.0.0.0/0            0.0.0.0/0            tcp to:10.0.0.1:80", listColumns{}, false,
			listRow{packets: "12", bytes: "720", target: "DNAT", prot: "tcp", in: "*", out: "*", source: "0.0.0.0/0", dest: "0.0.0.0/0", extension: "tcp to:10.0.0.1:80"}},
	}
	for _, tc := range tests {
		got, ok := parseListRow(tc.line, tc.cols, tc.haveCols)
		if !ok || got != tc.want {
			t.Errorf("%q:\n got %+v %v\nwant %+v", tc.line, got, ok, tc.want)
		}
	}
	for _, bad := range []string{"-A KUBE-SVC-X -j Y", "Every 2.0s: iptables -L", "hello world this is text", "1 2 3"} {
		if got, ok := parseListRow(bad, listColumns{}, false); ok {
			t.Errorf("%q read as a row: %+v", bad, got)
		}
	}
}
