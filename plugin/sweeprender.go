package plugin

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/lipgloss"

	"github.com/proxyrules/kubectl-proxyrules/diagnose"
)

// maxCauseNodes is how many node names a cause line lists.
const maxCauseNodes = 8

// renderSweep prints a sweep's summary: a line, the table of nodes (worst
// first), the causes across nodes, the nodes that could not be read, and
// the verdict.
func renderSweep(out io.Writer, t *Terminal, command string, s *diagnose.SweepSummary, took time.Duration) {
	st := t.styles()
	counts := map[diagnose.Status]int{}
	for _, r := range s.Rows {
		if r.Error == "" {
			counts[r.Status]++
		}
	}
	of := "of"
	if strings.HasPrefix(command, "svc ") {
		of = "on"
	}
	head := fmt.Sprintf("%s %s %d node%s: %s", command, of, s.Nodes, plural(s.Nodes), statusText(st, s.Status))
	var parts []string
	if n := counts[diagnose.StatusProblems]; n > 0 {
		parts = append(parts, fmt.Sprintf("%d with problems", n))
	}
	if n := counts[diagnose.StatusIncomplete]; n > 0 {
		parts = append(parts, fmt.Sprintf("%d incomplete", n))
	}
	if n := counts[diagnose.StatusHealthy]; n > 0 {
		parts = append(parts, fmt.Sprintf("%d healthy", n))
	}
	if s.Failed > 0 {
		parts = append(parts, fmt.Sprintf("%d not read", s.Failed))
	}
	fmt.Fprintln(out, wrapIndent(head+"  "+st.dim.Render("("+strings.Join(parts, ", ")+"; "+seconds(took.Seconds())+")"), t.Width, 2))

	if strings.HasPrefix(command, "svc ") {
		renderServiceSweep(out, t, s)
	} else {
		renderSweepTable(out, t, s)
	}
	var failed []diagnose.SweepRow
	for _, r := range s.Rows {
		if r.Error != "" {
			failed = append(failed, r)
		}
	}
	if len(failed) > 0 {
		fmt.Fprintln(out)
		fmt.Fprintln(out, st.header.Render("not read"))
		for _, r := range failed {
			fmt.Fprintln(out, "  "+wrapIndent(fmt.Sprintf("%s (%s): %s", r.Node, r.Reason, r.Error), t.Width-2, 4))
		}
	}
	fmt.Fprintln(out)
	verdict := fmt.Sprintf("verdict: %s", statusText(st, s.Status))
	switch {
	case counts[diagnose.StatusProblems] > 0:
		verdict += fmt.Sprintf(" on %d of %d nodes", counts[diagnose.StatusProblems], s.Nodes)
	case s.Failed > 0:
		verdict += fmt.Sprintf(": %d of %d nodes could not be read", s.Failed, s.Nodes)
	}
	fmt.Fprintln(out, verdict+fmt.Sprintf(" (exit %d)", sweepExit(s)))
}

// nodeList names nodes, the first maxCauseNodes of them.
func nodeList(nodes []string) string {
	if len(nodes) > maxCauseNodes {
		return strings.Join(nodes[:maxCauseNodes], ", ") + fmt.Sprintf(", … (+%d)", len(nodes)-maxCauseNodes)
	}
	return strings.Join(nodes, ", ")
}

// renderServiceSweep prints one Service on many nodes: the nodes that agree
// collapsed into one line each, with what they have wrong.
func renderServiceSweep(out io.Writer, t *Terminal, s *diagnose.SweepSummary) {
	st := t.styles()
	for _, g := range s.Groups {
		who := nodeList(g.Nodes)
		if len(g.Nodes) > 1 {
			who = fmt.Sprintf("%d nodes (%s)", len(g.Nodes), who)
		}
		what := "programmed as its EndpointSlices say"
		switch {
		case len(g.Causes) > 0:
			what = "programmed differently:"
		case g.Status == diagnose.StatusIncomplete:
			what = "nothing wrong in what could be checked (see -o json: notChecked)"
		}
		fmt.Fprintln(out, wrapIndent(statusText(st, g.Status)+" "+who+": "+what, t.Width, 2))
		for _, c := range g.Causes {
			fmt.Fprintln(out, "  - "+wrapIndent(c, t.Width-4, 4))
		}
	}
}

// renderSweepTable prints a row per node, worst first, then the causes
// across nodes.
func renderSweepTable(out io.Writer, t *Terminal, s *diagnose.SweepSummary) {
	st := t.styles()
	headers := []string{"NODE", "STATUS", "MODE", "BACKEND", "LARGE", "STALE", "HARMFUL", "MISSING", "EXTRA", "MASQ", "DRIFT", "CT-USE", "CT-STALE", "SYSCTL", "TIME"}
	rows := make([][]string, 0, len(s.Rows))
	for _, r := range s.Rows {
		status := string(r.Status)
		if r.Error != "" {
			status = "not read"
		}
		rows = append(rows, []string{r.Node, status, r.Mode, r.Backend, boolCell(r.LargeClusterMode), intCell(r.Stale), intCell(r.Harmful),
			intCell(r.MissingEndpoints), intCell(r.ExtraEndpoints), r.Masquerade, intCell(r.Drift),
			percentCell(r.ConntrackUse), intCell(r.StaleUDP), intCell(r.KernelSettings), seconds(r.Seconds)})
	}
	headers, rows = fitColumns(headers, rows, t.Width, "BACKEND", "LARGE", "TIME", "HARMFUL", "MASQ", "MODE", "SYSCTL", "CT-USE")
	status := -1
	for i, h := range headers {
		if h == "STATUS" {
			status = i
		}
	}
	_ = renderTableStyled(out, t, headers, rows, status, func(cell string) lipgloss.Style {
		switch cell {
		case string(diagnose.StatusHealthy):
			return st.good
		case string(diagnose.StatusIncomplete):
			return st.warn
		}
		return st.bad
	})

	if len(s.Causes) > 0 {
		fmt.Fprintln(out)
		fmt.Fprintln(out, st.header.Render("causes across nodes"))
	}
	for _, c := range s.Causes {
		line := fmt.Sprintf("%s: %s", nodeList(c.Nodes), c.Title)
		if len(c.Nodes) > 1 {
			line = fmt.Sprintf("%d nodes (%s): %s", len(c.Nodes), nodeList(c.Nodes), c.Title)
		}
		fmt.Fprintln(out, severityStyle(st, c.Severity).Render(fmt.Sprintf("%-7s", strings.ToUpper(string(c.Severity))))+" "+wrapIndent(line, t.Width-8, 8))
	}
}

func sweepExit(s *diagnose.SweepSummary) int {
	if s.Failed == s.Nodes {
		return ExitCouldNotRun
	}
	return exitCode(s.Status)
}

func intCell(v *int) string {
	if v == nil {
		return ""
	}
	return strconv.Itoa(*v)
}

func percentCell(v *int64) string {
	if v == nil {
		return ""
	}
	return strconv.FormatInt(*v, 10) + "%"
}

func boolCell(v *bool) string {
	switch {
	case v == nil:
		return ""
	case *v:
		return "yes"
	}
	return "no"
}
