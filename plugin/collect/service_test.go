package collect

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// overlong is a chain name nft takes (an iptables-nft chain made with nft
// may be longer than iptables' 28 characters) but kube-proxy never writes,
// and the plugin's gate refuses.
const overlong = "KUBE-SOMEONE-ELSES-RATHER-LONG-CHAIN"

// A service-scoped read follows the Service's own chains round by round:
// each round lists what the last one jumped to that no round has listed.
func TestChainWalk(t *testing.T) {
	const (
		fw             = "KUBE-FW-WEBHTTPAAAAAAAAAAA"
		listedMarkDrop = "-N KUBE-MARK-DROP\n-A KUBE-MARK-DROP -j MARK --set-xmark 0x8000/0x8000\n"
		// kube-proxy before 1.28 dropped traffic from outside
		// loadBalancerSourceRanges through the kubelet's KUBE-MARK-DROP.
		listedFirewall = "-N " + fw + "\n" +
			"-A " + fw + " -s 203.0.113.0/24 -m comment --comment \"default/web:http loadbalancer IP\" -j " + svcWeb + "\n" +
			"-A " + fw + " -m comment --comment \"default/web:http loadbalancer IP\" -j KUBE-MARK-DROP\n"
	)
	tests := []struct {
		name          string
		serviceChains []string
		listed        map[string]string // nat chain → its -S output
		// wantRounds are the nat chains of rounds 2, 3, …
		wantRounds [][]string
		// wantSkipped are jump targets not read: no name the plugin may list.
		wantSkipped []string
	}{
		{
			name:          "an endpoint the slices no longer name is read; KUBE-MARK-MASQ is not followed",
			serviceChains: []string{svcWeb, sepLive},
			listed: map[string]string{kubeproxy.ChainServices: listedServices, kubeproxy.ChainMarkMasq: listedMarkMasq,
				svcWeb: listedService, sepLive: listedLive, sepGone: listedGone},
			wantRounds: [][]string{{sepGone}},
		},
		{
			name:          "nothing the objects do not name",
			serviceChains: []string{sepLive},
			listed:        map[string]string{kubeproxy.ChainServices: listedServices, kubeproxy.ChainMarkMasq: listedMarkMasq, sepLive: listedLive},
		},
		{
			name:          "a fixed chain round 1 does not list is read, once",
			serviceChains: []string{fw, svcWeb, sepLive},
			listed: map[string]string{fw: listedFirewall, svcWeb: listedService, sepLive: listedLive, sepGone: listedGone,
				kubeproxy.ChainMarkDrop: listedMarkDrop},
			wantRounds: [][]string{{kubeproxy.ChainMarkDrop, sepGone}},
		},
	}
	tests = append(tests, struct {
		name          string
		serviceChains []string
		listed        map[string]string
		wantRounds    [][]string
		wantSkipped   []string
	}{
		name:          "a jump to a KUBE- chain the plugin may not list is skipped, the rest is read",
		serviceChains: []string{svcWeb, sepLive},
		listed: map[string]string{svcWeb: listedService + "-A " + svcWeb + " -j " + overlong + "\n-A " + svcWeb + " -j KUBE-lower\n",
			sepLive: listedLive, sepGone: listedGone},
		wantRounds:  [][]string{{sepGone}},
		wantSkipped: []string{overlong, "KUBE-lower"},
	})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			walk := newChainWalk(tt.serviceChains)
			cmds := FirstChains(kubeproxy.IPv4, tt.serviceChains)
			walk.list(cmds)
			var rounds [][]string
			var skippedAll []string
			for round := 1; len(cmds) > 0 && round <= maxRounds; round++ {
				var nat []NodeCommand
				var outs [][]byte
				for _, cmd := range cmds {
					if cmd.Table == kubeproxy.TableNAT {
						nat, outs = append(nat, cmd), append(outs, []byte(tt.listed[cmd.Chain]))
					}
				}
				next, skipped, err := walk.next(kubeproxy.IPv4, nat, outs)
				if err != nil {
					t.Fatal(err)
				}
				skippedAll = append(skippedAll, skipped...)
				var chains []string
				for _, cmd := range next {
					if want := "iptables-nft -t nat -S " + cmd.Chain; strings.Join(cmd.Argv, " ") != want {
						t.Errorf("round %d runs %q, want %q", round+1, cmd.Argv, want)
					}
					chains = append(chains, cmd.Chain)
				}
				if len(chains) > 0 {
					rounds = append(rounds, chains)
				}
				cmds = next
			}
			if diff := cmp.Diff(tt.wantRounds, rounds); diff != "" {
				t.Errorf("rounds after the first (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantSkipped, skippedAll); diff != "" {
				t.Errorf("skipped (-want +got):\n%s", diff)
			}
		})
	}
}
