package plugin

import (
	"fmt"
	"io"
	"net/netip"

	"github.com/charmbracelet/lipgloss/tree"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/diagnose"
)

// renderExplainIPVS prints an IPVS node's explanation: each port's
// frontends, their virtual servers and real servers, and the endpoints
// not used on this node.
func renderExplainIPVS(out io.Writer, t *Terminal, ex *diagnose.ServiceExplanation) {
	for _, p := range ex.IPVS {
		fmt.Fprintln(out, trimTrailing(explainIPVSTree(t, p).String()))
	}
}

func explainIPVSTree(t *Terminal, p diagnose.IPVSPortReport) *tree.Tree {
	st := t.styles()
	root := t.newTree(st.header.Render(fitParts(t.Width, "  ", " ", p.ServicePort, "ipvs", string(p.Family))))
	nodeOf := map[netip.AddrPort]string{}
	for _, e := range p.Endpoints {
		nodeOf[e.Addr] = e.Node
	}
	used := map[netip.AddrPort]bool{}
	avail := t.Width - treeIndent2
	for _, fe := range p.Frontends {
		head := fe.Kind + " " + fe.Addr
		switch {
		case fe.VirtualServer == "":
			head += ": no virtual server"
		default:
			head += ": " + fe.VirtualServer
		}
		if fe.Local {
			head += " (Local policy)"
		}
		if fe.Inferred {
			head += " (an address of the node not given)"
		}
		fr := t.newTree(fitParts(t.Width-treeIndent1, "  ", " ", head))
		for _, rs := range fe.RealServers {
			fr.Child(fitParts(avail, "  ", "  ", rs.Addr.String(), realServerWords(rs, nodeOf[rs.Addr])))
			if rs.Expected {
				used[rs.Addr] = true
			}
		}
		if fe.VirtualServer != "" && len(fe.RealServers) == 0 {
			fr.Child(st.dim.Render("no real server"))
		}
		for _, e := range fe.Expected {
			used[e] = true
		}
		root.Child(fr)
	}
	var unused []string
	for _, e := range p.Endpoints {
		if !used[e.Addr] {
			unused = append(unused, fitParts(avail, "  ", "  ", e.Addr.String(), e.Node)+"\n"+st.dim.Render(wrap(e.Why, avail)))
		}
	}
	if len(unused) > 0 {
		nr := t.newTree("not used on this node")
		for _, u := range unused {
			nr.Child(u)
		}
		root.Child(nr)
	}
	return root
}

// realServerWords says what a real server is: its weight and connections
// as read, and whether it is an endpoint kube-proxy uses here.
func realServerWords(rs correlate.IPVSRealServer, node string) string {
	s := fmt.Sprintf("weight %d", rs.Weight)
	if rs.ActiveConn+rs.InActConn > 0 {
		s += fmt.Sprintf(", %d active/%d inactive", rs.ActiveConn, rs.InActConn)
	}
	switch {
	case rs.Expected:
		s += ", endpoint in use"
	case rs.Endpoint:
		s += ", endpoint not used here"
	default:
		s += ", not an endpoint"
	}
	if node != "" {
		s += "  " + node
	}
	return s
}
