package plugin

import (
	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"slices"
	"strings"

	"github.com/charmbracelet/lipgloss"
)

// columnGap is the space between table columns.
const columnGap = 2

// tableWidth is the width a table of these cells takes, columns
// columnGap apart.
func tableWidth(headers []string, rows [][]string) int {
	widths := columnWidths(headers, rows)
	total := 0
	for _, w := range widths {
		total += w
	}
	return total + columnGap*max(len(widths)-1, 0)
}

func columnWidths(headers []string, rows [][]string) []int {
	n := len(headers)
	for _, r := range rows {
		n = max(n, len(r))
	}
	widths := make([]int, n)
	for c, h := range headers {
		widths[c] = lipgloss.Width(h)
	}
	for _, r := range rows {
		for c, cell := range r {
			widths[c] = max(widths[c], lipgloss.Width(cell))
		}
	}
	return widths
}

// fitColumns drops columns until the table fits width: first the columns
// whose cells are all empty, then those of dropOrder (header names), in
// that order, until it fits. Names are never cut: a table whose kept
// columns are still too wide is returned as it is.
func fitColumns(headers []string, rows [][]string, width int, dropOrder ...string) ([]string, [][]string) {
	drop := func(col int) {
		headers = slices.Delete(slices.Clone(headers), col, col+1)
		out := make([][]string, len(rows))
		for i, r := range rows {
			if col < len(r) {
				r = slices.Delete(slices.Clone(r), col, col+1)
			}
			out[i] = r
		}
		rows = out
	}
	for c := len(headers) - 1; c >= 0; c-- {
		empty := true
		for _, r := range rows {
			empty = empty && (c >= len(r) || r[c] == "")
		}
		if empty && len(rows) > 0 {
			drop(c)
		}
	}
	for _, name := range dropOrder {
		if tableWidth(headers, rows) <= width {
			break
		}
		if c := slices.Index(headers, name); c >= 0 {
			drop(c)
		}
	}
	return headers, rows
}

// elideMiddle shortens s to width cells by replacing its middle with "…",
// keeping both ends (the prefix and hash of a chain name, and the endpoint
// at its end). Only for terminals: pipes get whole names.
func elideMiddle(s string, width int) string {
	r := []rune(s)
	if len(r) <= width || width < 5 {
		return s
	}
	head := (width - 1) / 2
	tail := width - 1 - head
	return string(r[:head]) + "…" + string(r[len(r)-tail:])
}

// fitParts joins parts with sep, starting a new line (indented by indent)
// before a part that would pass width. Parts are never cut: a name longer
// than a line gets a line of its own.
func fitParts(width int, indent, sep string, parts ...string) string {
	var b strings.Builder
	lineW := 0
	for i, p := range parts {
		if p == "" {
			continue
		}
		w := lipgloss.Width(p)
		switch {
		case i == 0 || lineW == 0:
		case lineW+lipgloss.Width(sep)+w > width:
			b.WriteString("\n" + indent)
			lineW = lipgloss.Width(indent)
		default:
			b.WriteString(sep)
			lineW += lipgloss.Width(sep)
		}
		b.WriteString(p)
		lineW += w
	}
	return b.String()
}

// chainName is a chain's name as text output shows it: whole in pipes
// (to be copied into iptables -L or nft list chain), its middle elided on
// a terminal too narrow for it.
func (t *Terminal) chainName(name string, avail int) string {
	if !t.Rich || avail <= 0 || lipgloss.Width(name) <= avail {
		return name
	}
	// An nftables name keeps its prefix and hash whole: what identifies it.
	if n, ok := correlate.ParseNFTName(name); ok {
		head := n.Prefix + n.Hash + "-"
		if avail > len(head)+5 {
			return head + elideMiddle(name[len(head):], avail-len(head))
		}
	}
	return elideMiddle(name, avail)
}
