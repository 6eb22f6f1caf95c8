package diagnose

import (
	"fmt"
	"slices"

	"github.com/proxyrules/kubectl-proxyrules/inspect/conntrack"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// ConntrackIPVSSettings: in IPVS mode, a net.ipv4.vs.* setting kube-proxy
// sets at start is not as it sets it, or ip_vs is not loaded.
const ConntrackIPVSSettings = "ipvsSettings"

// ipvsSetting is one of the net.ipv4.vs.* settings kube-proxy v1.37.2's
// IPVS proxier sets at start (pkg/proxy/ipvs/proxier.go, datapath facts
// §5.2), and what it breaks when it is not so.
type ipvsSetting struct {
	name        string
	severity    Severity
	consequence string
}

var ipvsSettings = []ipvsSetting{
	{conntrack.SysctlIPVSConntrack, SeverityError,
		"IPVS-forwarded packets skip conntrack, so kube-proxy's iptables masquerade (KUBE-POSTROUTING) never sees them: NodePorts, external IPs and hairpin connections that need SNAT fail"},
	{conntrack.SysctlIPVSExpireNodestConn, SeverityWarning,
		"connections to a real server that was removed are not expired: their packets keep going to the gone endpoint until the client gives up"},
	{conntrack.SysctlIPVSExpireQuiescent, SeverityWarning,
		"with sessionAffinity (IPVS persistence) clients stay on a terminating real server (weight 0) until the affinity times out"},
}

// ipvs judges the net.ipv4.vs.* settings when kube-proxy is in IPVS mode.
// conn_reuse_mode is read but not judged: kube-proxy sets it only on
// kernels 4.1 to 5.9, which the sysctls do not tell.
func (rep *ConntrackReport) ipvs(s *conntrack.Sysctls, mode kubeproxy.Mode) {
	if mode != kubeproxy.ModeIPVS {
		return
	}
	if slices.Contains(s.Absent, conntrack.SysctlIPVSConntrack) {
		rep.add(ConntrackProblem{Severity: SeverityError, Kind: ConntrackIPVSSettings, Subject: "ip_vs",
			Message:     "kube-proxy is in IPVS mode but the ip_vs module is not loaded: /proc/sys/net/ipv4/vs/ is absent",
			Evidence:    conntrack.SysctlPath(conntrack.SysctlIPVSConntrack) + ": No such file or directory",
			Consequence: "kube-proxy cannot program virtual servers: no Service works through it on this node",
			Remedy:      "modprobe ip_vs ip_vs_rr ip_vs_wrr ip_vs_sh (and load them at boot), then restart kube-proxy; or run it in nftables mode (IPVS mode is deprecated since 1.35)"})
		return
	}
	for _, st := range ipvsSettings {
		v, ok := s.Int(st.name)
		switch {
		case !ok:
			rep.notRead(st.name, st.name+" in IPVS mode")
		case v != 1:
			rep.add(ConntrackProblem{Severity: st.severity, Kind: ConntrackIPVSSettings, Subject: st.name,
				Message:     fmt.Sprintf("%s is %d: kube-proxy's IPVS mode sets it to 1 at start, and something changed it since", st.name, v),
				Evidence:    fmt.Sprintf("%s = %d", st.name, v),
				Consequence: st.consequence,
				Remedy:      fmt.Sprintf("sysctl -w %s=1 (and find what set it: a sysctl.d file, a DaemonSet), or restart kube-proxy", st.name)})
		}
	}
}
