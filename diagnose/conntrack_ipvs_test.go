package diagnose_test

import (
	"strings"
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/diagnose"
	"github.com/proxyrules/kubectl-proxyrules/inspect/conntrack"
	"github.com/proxyrules/kubectl-proxyrules/inspect/kpconfig"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// In IPVS mode the net.ipv4.vs.* settings kube-proxy sets at start are
// held to 1, and their absence (ip_vs not loaded) is an error; in any
// other mode they are not judged.
func TestConntrackIPVSSettings(t *testing.T) {
	ipvs := func(c *kpconfig.Config) { c.Mode = kubeproxy.ModeIPVS }
	set := func(conntrackV, nodest, quiescent string) map[string]string {
		return map[string]string{conntrack.SysctlIPVSConntrack: conntrackV, conntrack.SysctlIPVSExpireNodestConn: nodest,
			conntrack.SysctlIPVSExpireQuiescent: quiescent, conntrack.SysctlIPVSConnReuseMode: "1"}
	}
	for _, tc := range []struct {
		name    string
		config  func(*kpconfig.Config)
		sysctls map[string]string
		want    []string // severity subject
		wantGap bool
	}{
		{"IPVS mode as kube-proxy sets it", ipvs, set("1", "1", "1"), nil, false},
		{"vs.conntrack reset", ipvs, set("0", "1", "1"), []string{"error " + conntrack.SysctlIPVSConntrack}, false},
		{"expire settings reset", ipvs, set("1", "0", "0"),
			[]string{"warning " + conntrack.SysctlIPVSExpireNodestConn, "warning " + conntrack.SysctlIPVSExpireQuiescent}, false},
		{"ip_vs not loaded", ipvs, map[string]string{}, []string{"error ip_vs"}, false},
		{"a bundle from before these were read", ipvs, map[string]string{conntrack.SysctlIPVSConntrack: ""}, nil, true},
		{"iptables mode: not judged", nil, set("0", "0", "0"), nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := ctCase{config: tc.config, sysctls: tc.sysctls}.run(t)
			var got []string
			for _, p := range rep.Problems {
				if p.Kind == diagnose.ConntrackIPVSSettings {
					got = append(got, string(p.Severity)+" "+p.Subject)
					if p.Evidence == "" || p.Consequence == "" || p.Remedy == "" {
						t.Errorf("%s: evidence %q consequence %q remedy %q", p.Subject, p.Evidence, p.Consequence, p.Remedy)
					}
				}
			}
			if strings.Join(got, ", ") != strings.Join(tc.want, ", ") {
				t.Errorf("got %q, want %q\n%s", got, tc.want, describe(rep))
			}
			gap := false
			for _, g := range rep.NotChecked {
				gap = gap || strings.Contains(g.Check, "in IPVS mode")
			}
			if gap != tc.wantGap {
				t.Errorf("gap %v, want %v: %+v", gap, tc.wantGap, rep.NotChecked)
			}
		})
	}
}
