package plugin

import (
	"fmt"
	"io"
	"strings"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/diagnose"
)

// renderExplainConntrack is explain's conntrack part, under the ports'
// trees: each port's entries, and per cause of its stale ones why, whether
// kube-proxy cleans them, the seconds left and the commands that clear
// them (printed, never run). Nothing when the kernel state was not read:
// explain is about the rules.
func renderExplainConntrack(out io.Writer, t *Terminal, ex *diagnose.ServiceExplanation) {
	sc := ex.Conntrack
	if sc == nil {
		return
	}
	st := t.styles()
	if sc.NotRead {
		fmt.Fprintln(out, st.dim.Render(wrap("conntrack: not read (--from-conntrack, or triage/conntrack --node)", t.Width)))
		return
	}
	if len(sc.Ports) == 0 && len(sc.Other) == 0 {
		line := fmt.Sprintf("conntrack: no entry to this Service among the %d read", sc.Read)
		if sc.Read == 0 {
			line = "conntrack: no entry to this Service"
		}
		fmt.Fprintln(out, st.dim.Render(wrap(line, t.Width)))
		return
	}
	fmt.Fprintln(out, st.header.Render("conntrack")+st.dim.Render(fmt.Sprintf(" (entries to this Service, of %d read)", sc.Read)))
	for _, p := range sc.Ports {
		renderConntrackGroup(out, t, p.ServicePort+"  "+p.Proto+" "+p.Family, p.ConntrackGroup)
	}
	for _, g := range sc.Other {
		renderConntrackGroup(out, t, g.Target+"  "+g.Proto+" (no port of the Service)", g)
	}
}

func renderConntrackGroup(out io.Writer, t *Terminal, title string, g correlate.ConntrackGroup) {
	st := t.styles()
	entries := fmt.Sprintf("%d entries", g.Entries)
	if g.Entries == 1 {
		entries = "1 entry"
	}
	fmt.Fprintln(out, "  "+wrapIndent(fmt.Sprintf("%s: %s, %d stale", title, entries, g.Stale), t.Width-2, 4))
	for _, c := range g.ByCause {
		cleans, style := "kube-proxy cleans", st.warn
		if !c.KubeProxyCleans {
			cleans, style = "kube-proxy does not clean", st.bad
		}
		if g.Proto != "udp" {
			style = st.dim
		}
		left := fmt.Sprintf("%ds", c.Longest)
		if c.Shortest != c.Longest {
			left = fmt.Sprintf("%d-%ds", c.Shortest, c.Longest)
		}
		line := style.Render(fmt.Sprintf("%d stale", c.Entries)) + fmt.Sprintf(", answered by %s, %s left: %s (%s)", strings.Join(c.ReplySources, ", "), left, c.Why, cleans)
		fmt.Fprintln(out, "    "+wrapIndent(line, t.Width-4, 6))
		for _, cmd := range c.Commands {
			fmt.Fprintln(out, "      "+st.dim.Render(cmd))
		}
	}
}
