package plugin

import (
	"fmt"
	"io"
	"strings"

	"github.com/charmbracelet/lipgloss"

	"github.com/proxyrules/kubectl-proxyrules/diagnose"
)

// renderTraceIPVS prints what IPVS did on a trace (IPVS mode): the virtual
// server, its scheduler, its real servers with their weights and shares,
// and what was not checked.
func renderTraceIPVS(out io.Writer, t *Terminal, pt diagnose.PacketTrace) {
	if pt.IPVS == nil {
		return
	}
	for _, l := range pt.IPVS.Lines {
		// a real server's line keeps its indent and columns when it fits
		if body := strings.TrimLeft(l, " "); body != l {
			if lipgloss.Width(l) > t.Width {
				l = "    " + strings.ReplaceAll(wrap(body, t.Width-4), "\n", "\n    ")
			}
			fmt.Fprintln(out, l)
			continue
		}
		fmt.Fprintln(out, wrap(l, t.Width))
	}
}

// outcomeShare is an outcome's share column: the scheduler's name, in
// parentheses, where it picks a real server by what the rules do not say.
func outcomeShare(o diagnose.TraceOutcome) string {
	if o.IPVS != nil && o.IPVS.RealServer != nil && !o.IPVS.Predictable {
		return "(" + o.IPVS.Scheduler + ")"
	}
	return o.Probability.Percent()
}
