package collect

import (
	"slices"
	"strings"
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// The fixed chains a service-scoped read lists: the built-in chains a
// connection enters by (a walk of the Service's rules starts there), every
// chain kube-proxy counts in each table, and KUBE-FIREWALL (filter INPUT
// and OUTPUT jump to it), in the order they are read.
func TestFixedChains(t *testing.T) {
	for _, tt := range []struct {
		table  string
		chains []string
		want   string
	}{
		{kubeproxy.TableNAT, fixedNATChains, "PREROUTING INPUT OUTPUT POSTROUTING KUBE-SERVICES KUBE-NODEPORTS KUBE-MARK-MASQ KUBE-POSTROUTING"},
		{kubeproxy.TableFilter, fixedFilterChains, "INPUT FORWARD OUTPUT KUBE-SERVICES KUBE-EXTERNAL-SERVICES KUBE-NODEPORTS KUBE-PROXY-FIREWALL KUBE-FORWARD KUBE-FIREWALL"},
	} {
		if got := strings.Join(tt.chains, " "); got != tt.want {
			t.Errorf("%s: fixed chains %q, want %q", tt.table, got, tt.want)
		}
		for _, fc := range kubeproxy.FixedChains {
			if kubeproxy.CountedChain(tt.table, fc.Name) && !slices.Contains(tt.chains, fc.Name) {
				t.Errorf("%s: %s is counted by kube-proxy but not read with a Service", tt.table, fc.Name)
			}
		}
	}
}

// What `iptables-nft -t nat -S CHAIN` prints for a Service default/web:http
// with one endpoint in its slices (10.244.1.5) and one the slices no
// longer name (10.244.1.9), whose rules kube-proxy has not synced away yet.
const (
	listedServices = `-N KUBE-SERVICES
-A KUBE-SERVICES -d 10.96.0.10/32 -p tcp -m comment --comment "default/web:http cluster IP" -m tcp --dport 80 -j KUBE-SVC-WEBHTTPAAAAAAAAAA
-A KUBE-SERVICES -d 10.96.0.11/32 -p tcp -m comment --comment "default/other:http cluster IP" -m tcp --dport 80 -j KUBE-SVC-OTHERAAAAAAAAAAA
-A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS
`
	listedMarkMasq = `-N KUBE-MARK-MASQ
-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000
`
	listedService = `-N KUBE-SVC-WEBHTTPAAAAAAAAAA
-A KUBE-SVC-WEBHTTPAAAAAAAAAA ! -s 10.244.0.0/16 -d 10.96.0.10/32 -p tcp -m comment --comment "default/web:http cluster IP" -m tcp --dport 80 -j KUBE-MARK-MASQ
-A KUBE-SVC-WEBHTTPAAAAAAAAAA -m comment --comment "default/web:http -> 10.244.1.5:8080" -m statistic --mode random --probability 0.50000000000 -j KUBE-SEP-LIVEAAAAAAAAAAAA
-A KUBE-SVC-WEBHTTPAAAAAAAAAA -m comment --comment "default/web:http -> 10.244.1.9:8080" -j KUBE-SEP-GONEAAAAAAAAAAAA
`
	listedLive = `-N KUBE-SEP-LIVEAAAAAAAAAAAA
-A KUBE-SEP-LIVEAAAAAAAAAAAA -s 10.244.1.5/32 -m comment --comment default/web:http -j KUBE-MARK-MASQ
-A KUBE-SEP-LIVEAAAAAAAAAAAA -p tcp -m comment --comment default/web:http -m tcp -j DNAT --to-destination 10.244.1.5:8080
`
	listedGone = `-N KUBE-SEP-GONEAAAAAAAAAAAA
-A KUBE-SEP-GONEAAAAAAAAAAAA -s 10.244.1.9/32 -m comment --comment default/web:http -j KUBE-MARK-MASQ
-A KUBE-SEP-GONEAAAAAAAAAAAA -p tcp -m comment --comment default/web:http -m tcp -j DNAT --to-destination 10.244.1.9:8080
`
	svcWeb  = "KUBE-SVC-WEBHTTPAAAAAAAAAA"
	sepLive = "KUBE-SEP-LIVEAAAAAAAAAAAA"
	sepGone = "KUBE-SEP-GONEAAAAAAAAAAAA"
)

func TestReferencedChains(t *testing.T) {
	tests := []struct {
		name    string
		outputs []string
		owned   []string
		want    string
	}{
		{"the Service's chain: mark chain and both endpoints, the gone one too",
			[]string{listedServices, listedMarkMasq, listedService, listedLive}, []string{svcWeb, sepLive},
			"KUBE-MARK-MASQ " + sepLive + " " + sepGone},
		{"endpoint chains: the mark chain, once",
			[]string{listedLive, listedGone}, []string{sepLive, sepGone}, "KUBE-MARK-MASQ"},
		{"entry and mark chains are not the Service's",
			[]string{listedServices, listedMarkMasq}, []string{svcWeb}, ""},
		{"fixed chains are not followed even when owned, or KUBE-SERVICES would pull in every Service",
			[]string{listedServices, listedMarkMasq}, []string{kubeproxy.ChainServices, kubeproxy.ChainMarkMasq}, ""},
		{"a chain without rules, a missing chain (no output), no final newline",
			[]string{"-N " + svcWeb + "\n", "", strings.TrimSuffix(listedLive, "\n")}, []string{svcWeb, sepLive}, "KUBE-MARK-MASQ"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var outs [][]byte
			for _, o := range tt.outputs {
				outs = append(outs, []byte(o))
			}
			nat, err := parseListedChains(kubeproxy.TableNAT, outs...)
			if err != nil {
				t.Fatal(err)
			}
			owned := map[string]bool{}
			for _, c := range tt.owned {
				owned[c] = true
			}
			if got := strings.Join(ReferencedChains(nat, owned), " "); got != tt.want {
				t.Errorf("ReferencedChains = %q, want %q", got, tt.want)
			}
		})
	}
}

// The -S output is read by the iptables parser: chains, rules and targets.
func TestParseListedChains(t *testing.T) {
	nat, err := parseListedChains(kubeproxy.TableNAT, []byte(listedService), []byte(listedMarkMasq))
	if err != nil {
		t.Fatal(err)
	}
	if nat.Name != kubeproxy.TableNAT || len(nat.Chains) != 2 {
		t.Fatalf("table %q with %d chains, want nat with 2", nat.Name, len(nat.Chains))
	}
	svc := nat.Chain(svcWeb)
	if svc == nil || len(svc.Rules) != 3 {
		t.Fatalf("%s: %+v, want 3 rules", svcWeb, svc)
	}
	if r := svc.Rules[1]; r.Target != sepLive || !r.Random || r.Comment != "default/web:http -> 10.244.1.5:8080" {
		t.Errorf("rule 2: target %q, random %v, comment %q", r.Target, r.Random, r.Comment)
	}
	if r := nat.Chain(kubeproxy.ChainMarkMasq).Rules[0]; r.Target != "MARK" {
		t.Errorf("KUBE-MARK-MASQ jumps to %q, want MARK", r.Target)
	}
}
