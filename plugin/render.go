package plugin

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/lipgloss/table"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/diagnose"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// renderTable prints rows as a lipgloss table on a terminal and as plain
// kubectl-style columns elsewhere (pipes keep grep and awk working).
// statusCol is the column whose non-empty cells are highlighted; -1 for none.
func renderTable(out io.Writer, t *Terminal, headers []string, rows [][]string, statusCol int) error {
	st := t.styles()
	return renderTableStyled(out, t, headers, rows, statusCol, func(string) lipgloss.Style { return st.bad })
}

// renderTableStyled is renderTable with the status column's non-empty cells
// styled by statusStyle.
func renderTableStyled(out io.Writer, t *Terminal, headers []string, rows [][]string, statusCol int, statusStyle func(cell string) lipgloss.Style) error {
	if !t.Rich || t.NoHeaders {
		var buf strings.Builder
		tw := tabwriter.NewWriter(&buf, 0, 8, 2, ' ', 0)
		if !t.NoHeaders {
			fmt.Fprintln(tw, strings.Join(headers, "\t"))
		}
		for _, r := range rows {
			fmt.Fprintln(tw, strings.Join(r, "\t"))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		for _, line := range strings.SplitAfter(buf.String(), "\n") {
			if line == "" {
				continue
			}
			if _, err := io.WriteString(out, strings.TrimRight(line, " \n")+"\n"); err != nil {
				return err
			}
		}
		return nil
	}
	st := t.styles()
	tbl := table.New().
		Border(lipgloss.HiddenBorder()).
		BorderTop(false).BorderBottom(false).BorderLeft(false).BorderRight(false).
		BorderColumn(false).BorderHeader(false).
		Headers(headers...).
		Rows(rows...).
		StyleFunc(func(row, col int) lipgloss.Style {
			base := t.Renderer.NewStyle().PaddingRight(2)
			if row == table.HeaderRow {
				return st.header.PaddingRight(2)
			}
			if col == statusCol && row >= 0 && row < len(rows) && rows[row][col] != "" {
				return statusStyle(rows[row][col]).PaddingRight(2)
			}
			if col == 0 && row > 0 && row < len(rows) && rows[row][0] == rows[row-1][0] {
				return st.dim.PaddingRight(2)
			}
			return base
		})
	_, err := fmt.Fprintln(out, tbl.Render())
	return err
}

func renderChainMap(out io.Writer, t *Terminal, m *diagnose.ChainMap, wide bool) error {
	if t.Rich && !wide && !t.NoHeaders {
		return renderChainMapGrouped(out, t, m)
	}
	headers, rows := mapRows(m, wide)
	if wide {
		if len(rows) > 0 {
			if err := renderTable(out, t, headers, rows, len(headers)-1); err != nil {
				return err
			}
		}
		if t.NoHeaders {
			return nil
		}
	} else {
		// One table per family when there are two: the ip and ip6
		// tables hold chains of the same name, and a heading says which
		// is which in less width than a column.
		byFamily, families := splitByFamily(headers, rows)
		for _, fam := range families {
			if len(families) > 1 && !t.NoHeaders {
				fmt.Fprintln(out, t.styles().group.Render(fam))
			}
			h, r := fitMapTable(m, headers, byFamily[fam], t.Width)
			if err := renderTable(out, t, h, r, -1); err != nil {
				return err
			}
		}
		if t.NoHeaders {
			return nil // the rows only, for scripts
		}
		mapSections(out, t, m)
	}
	_, err := fmt.Fprintln(out, summaryLine(m, wide))
	return err
}

// splitByFamily sorts the plain map rows by their FAM cell.
func splitByFamily(headers []string, rows [][]string) (map[string][][]string, []string) {
	col := slices.Index(headers, "FAM")
	out := map[string][][]string{}
	var families []string
	for _, r := range rows {
		fam := r[col]
		if out[fam] == nil {
			families = append(families, fam)
		}
		out[fam] = append(out[fam], r)
	}
	sort.Strings(families)
	for i, f := range families {
		if f == "v4" || f == "v6" {
			families[i] = "IP" + f
			out["IP"+f] = out[f]
		}
	}
	return out, families
}

// renderChainMapGrouped prints one block per service port, which fits an
// 80-column terminal: the owner once as a heading, then its chains.
func renderChainMapGrouped(out io.Writer, t *Terminal, m *diagnose.ChainMap) error {
	st := t.styles()
	chains := groupedChains(m.Chains)
	for i := 0; i < len(chains); {
		j := i
		for j < len(chains) && chains[j].ServicePort == chains[i].ServicePort && chains[j].Protocol == chains[i].Protocol &&
			(chains[i].Kind == kubeproxy.KindFixed) == (chains[j].Kind == kubeproxy.KindFixed) {
			j++
		}
		group := chains[i:j]
		i = j
		if group[0].Kind == kubeproxy.KindFixed {
			continue // summarised below; -o wide lists them
		}
		heading := group[0].ServicePort
		if heading == "" {
			heading = "(no owner found)"
		}
		if p := group[0].Protocol; p != "" {
			heading += " " + st.dim.Render(p)
		}
		fmt.Fprintln(out, st.group.Render(heading))
		rows := make([][]string, 0, len(group))
		for _, c := range group {
			rows = append(rows, []string{familyShort(c.Family), string(c.Kind), c.Chain, c.Endpoint, chainStatus(&c)})
		}
		// A terminal too narrow for a whole name gets its middle elided
		// (the prefix and hash stay); pipes never come here.
		if over := tableWidth(nil, rows) - t.Width; over > 0 {
			chainW := columnWidths(nil, rows)[2]
			for _, r := range rows {
				r[2] = elideMiddle(r[2], max(chainW-over, 24))
			}
		}
		fmt.Fprint(out, alignColumns(rows, "  ", func(row, col int) lipgloss.Style {
			if col == 4 && rows[row][4] != "" {
				return st.bad
			}
			return t.Renderer.NewStyle()
		}))
	}
	_, err := fmt.Fprintln(out, summaryLine(m, false))
	return err
}

// shortChainName drops the readable part of an nftables per-service name
// (the heading already says which service port it is); the hash stays.
func shortChainName(c correlate.ChainOwner) string {
	if c.Mode != string(kubeproxy.ModeNFTables) {
		return c.Chain
	}
	if n, ok := correlate.ParseNFTName(c.Chain); ok {
		return n.Prefix + n.Hash + "-…"
	}
	return c.Chain
}

// alignColumns lays rows out in columns two spaces apart, styling each cell
// without letting the style's escape codes upset the widths.
func alignColumns(rows [][]string, indent string, style func(row, col int) lipgloss.Style) string {
	var widths []int
	for _, r := range rows {
		for c, cell := range r {
			if c >= len(widths) {
				widths = append(widths, 0)
			}
			widths[c] = max(widths[c], lipgloss.Width(cell))
		}
	}
	var b strings.Builder
	for i, r := range rows {
		var line strings.Builder
		line.WriteString(indent)
		for c, cell := range r {
			line.WriteString(style(i, c).Render(cell))
			if c < len(r)-1 {
				line.WriteString(strings.Repeat(" ", widths[c]-lipgloss.Width(cell)+2))
			}
		}
		b.WriteString(strings.TrimRight(line.String(), " "))
		b.WriteByte('\n')
	}
	return b.String()
}
