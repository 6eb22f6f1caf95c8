package diagnose

import (
	"net/netip"
	"strconv"
	"strings"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// ipvsMode: the node's Services are judged from its IPVS table.
func ipvsMode(n *Node) bool { return DetectMode(n.Ruleset).Detected == kubeproxy.ModeIPVS }

// explainIPVS puts the Service's IPVS ports (port: a name or number, ""
// for all) in place of the walk of its iptables rules, and returns what
// could not be checked.
func (rep *ServiceExplanation) explainIPVS(ir *IPVSReport, port string) []Gap {
	rep.Ports = []PortReport{}
	rep.IPVS = []IPVSPortReport{}
	for _, p := range ir.Ports {
		if p.Namespace == rep.Namespace && p.Name == rep.Name && ipvsPortIs(p, port) {
			rep.IPVS = append(rep.IPVS, p)
		}
	}
	return ir.NotChecked
}

// ipvsPortIs: p is the port asked for by name or number ("" is any).
func ipvsPortIs(p IPVSPortReport, port string) bool {
	if port == "" || strings.HasSuffix(p.ServicePort, ":"+port) {
		return true
	}
	for _, fe := range p.Frontends {
		if ap, err := netip.ParseAddrPort(fe.Addr); err == nil && fe.Kind == correlate.FrontendClusterIP {
			return strconv.Itoa(int(ap.Port())) == port
		}
	}
	return false
}
