package plugin

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/lipgloss/tree"

	"github.com/proxyrules/kubectl-proxyrules/diagnose"
)

// severityStyle colours a problem by severity.
func severityStyle(st styles, s diagnose.Severity) lipgloss.Style {
	switch s {
	case diagnose.SeverityError:
		return st.bad
	case diagnose.SeverityWarning:
		return st.warn
	}
	return st.dim
}

// newTree returns a lipgloss tree styled with the terminal's renderer, so
// that colour follows --color and NO_COLOR.
func (t *Terminal) newTree(root string) *tree.Tree {
	return tree.Root(root).
		EnumeratorStyle(t.Renderer.NewStyle().Faint(true).PaddingRight(1)).
		ItemStyle(t.Renderer.NewStyle()).
		RootStyle(t.Renderer.NewStyle())
}

// wrap breaks s into lines of at most width columns (at spaces).
func wrap(s string, width int) string {
	if width < 20 {
		width = 20
	}
	var out []string
	for _, para := range strings.Split(s, "\n") {
		line := ""
		for _, w := range strings.Fields(para) {
			if line != "" && lipgloss.Width(line)+1+lipgloss.Width(w) > width {
				out = append(out, line)
				line = w
				continue
			}
			if line != "" {
				line += " "
			}
			line += w
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

func percent(f float64) string {
	return fmt.Sprintf("%5.1f%%", f*100)
}

// trimTrailing removes the spaces lipgloss pads blocks with, so that text
// output has no trailing whitespace.
func trimTrailing(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return strings.Join(lines, "\n")
}
