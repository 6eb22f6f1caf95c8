package plugin

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/charmbracelet/lipgloss"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/diagnose"
)

// IPVS mode's text forms of map, stale, counts and diff.

// ipvsMapRows are the map's virtual servers with an owner, one row per real
// server (a virtual server without any has one row): what each Service
// port's frontends send where.
func ipvsMapRows(m *diagnose.ChainMap, wide bool) (headers []string, rows [][]string) {
	headers = []string{"SERVICE", "FRONTEND", "VIRTUAL SERVER", "REAL SERVER", "WEIGHT", "STATUS"}
	if wide {
		headers = []string{"SERVICE", "FRONTEND", "FAMILY", "VIRTUAL SERVER", "REAL SERVER", "FORWARD", "WEIGHT", "ACTIVE", "INACTIVE", "STATUS"}
	}
	for _, vs := range m.VirtualServers {
		if vs.Kind != correlate.VirtualServiceServicePort && !wide {
			continue // listed below the table
		}
		owner, fe := vs.ServicePort, vs.Frontend
		if owner == "" {
			owner, fe = "-", ipvsWhat(vs.Kind)
			if vs.Unowned != "" && vs.Unowned != diagnose.UnownedProbe {
				fe = vs.Unowned // stale, loopbackNodePort
			}
		}
		if vs.AddrInferred && wide {
			fe += " (inferred)" // an address not known to be the node's
		}
		if len(vs.RealServers) == 0 {
			row := []string{owner, fe, vsAddr(&vs), "-", "", "no real server"}
			if wide {
				row = []string{owner, fe, vs.Family, vs.VirtualServer, "-", "", "", "", "", "no real server"}
			}
			rows = append(rows, row)
			continue
		}
		for _, rs := range vs.RealServers {
			status := realServerStatus(&vs, &rs)
			w := strconv.Itoa(int(rs.Weight))
			if wide {
				rows = append(rows, []string{owner, fe, vs.Family, vs.VirtualServer, rs.Addr.String(), rs.Forward, w, conns(rs.ActiveConn), conns(rs.InActConn), status})
				continue
			}
			rows = append(rows, []string{owner, fe, vsAddr(&vs), rs.Addr.String(), w, status})
		}
	}
	return headers, rows
}

// vsAddr is a virtual server's protocol and address (its scheduler and
// persistence are kube-proxy's alike for all: -o wide shows them).
func vsAddr(vs *diagnose.MapVirtualServer) string {
	if vs.FWMark != 0 {
		return fmt.Sprintf("FWM %d", vs.FWMark)
	}
	return vs.Protocol + " " + vs.Addr.String()
}

func conns(n int64) string {
	if n < 0 {
		return "-"
	}
	return strconv.FormatInt(n, 10)
}

// ipvsWhat names a virtual server no Service port has.
func ipvsWhat(kind string) string {
	if kind == correlate.VirtualServiceProbe {
		return "kube-proxy probe"
	}
	return "no owner"
}

// realServerStatus says what is odd about a real server: not an endpoint
// of its virtual server's Service port, or at weight 0 (no new
// connections).
func realServerStatus(vs *diagnose.MapVirtualServer, rs *correlate.IPVSRealServer) string {
	var s []string
	if vs.Kind == correlate.VirtualServiceServicePort && !rs.Endpoint {
		s = append(s, "not an endpoint")
	}
	if rs.Weight == 0 {
		s = append(s, "weight 0")
	}
	return strings.Join(s, ",")
}

// renderMapIPVS prints the virtual servers: the table, those without an
// owner below it, and their summary.
func renderMapIPVS(out io.Writer, t *Terminal, m *diagnose.ChainMap, wide bool) error {
	headers, rows := ipvsMapRows(m, wide)
	if !wide && !t.NoHeaders {
		renderMapIPVSGrouped(out, t, headers, rows)
		ipvsMapSections(out, t, m)
		_, err := fmt.Fprintln(out, ipvsSummaryLine(m))
		return err
	}
	if !wide {
		headers, rows = fitColumns(headers, rows, t.Width, "WEIGHT", "FRONTEND")
	}
	if len(rows) > 0 {
		if err := renderTable(out, t, headers, rows, len(headers)-1); err != nil {
			return err
		}
	}
	if t.NoHeaders {
		return nil
	}
	_, err := fmt.Fprintln(out, ipvsSummaryLine(m))
	return err
}

// renderMapIPVSGrouped prints the plain rows under a heading per Service
// port, a virtual server's name once: what each Service port's frontends
// send where, in 80 columns (-o wide and --no-headers keep a row each).
func renderMapIPVSGrouped(out io.Writer, t *Terminal, headers []string, rows [][]string) {
	if len(rows) == 0 {
		return
	}
	st := t.styles()
	service, weight, status := slices.Index(headers, "SERVICE"), slices.Index(headers, "WEIGHT"), slices.Index(headers, "STATUS")
	var cells [][]string
	var heads []string // the heading before each row, "" for none
	prevSP, prevVS := "", ""
	for _, r := range rows {
		head := ""
		if r[service] != prevSP {
			head, prevSP, prevVS = r[service], r[service], ""
		}
		fe, vs := r[1], r[2]
		if vs == prevVS {
			fe, vs = "", ""
		} else {
			prevVS = vs
		}
		rs := r[3]
		if w := r[weight]; w != "" && w != "1" && w != "0" {
			rs += " (weight " + w + ")" // kube-proxy's is 1; 0 is a status
		}
		heads, cells = append(heads, head), append(cells, []string{fe, vs, rs, r[status]})
	}
	lines := strings.Split(strings.TrimSuffix(alignColumns(cells, "  ", func(row, col int) lipgloss.Style {
		if col == 3 && cells[row][3] != "" {
			return st.bad
		}
		return t.Renderer.NewStyle()
	}), "\n"), "\n")
	for i, line := range lines {
		if heads[i] != "" {
			fmt.Fprintln(out, st.group.Render(heads[i]))
		}
		fmt.Fprintln(out, line)
	}
}

// ipvsMapSections lists the probe and the virtual servers no Service port
// has, below the plain table.
func ipvsMapSections(out io.Writer, t *Terminal, m *diagnose.ChainMap) {
	st := t.styles()
	var probe, loopback, unowned []string
	for _, vs := range m.VirtualServers {
		line := fmt.Sprintf("  %s → %s", vs.VirtualServer, count(len(vs.RealServers), "real server"))
		switch {
		case vs.Kind == correlate.VirtualServiceProbe:
			probe = append(probe, line)
		case vs.Unowned == diagnose.UnownedLoopbackNodePort:
			loopback = append(loopback, line)
		case vs.Kind == correlate.VirtualServiceUnattributed:
			unowned = append(unowned, line)
		}
	}
	if len(probe) > 0 {
		fmt.Fprintln(out, st.dim.Render(fmt.Sprintf("%d kube-proxy startup probe (harmless):", len(probe))))
		fmt.Fprintln(out, strings.Join(probe, "\n"))
	}
	if len(loopback) > 0 {
		fmt.Fprintln(out, st.dim.Render(fmt.Sprintf("%d NodePort%s on loopback (an older kube-proxy's; see `stale`):", len(loopback), plural(len(loopback)))))
		fmt.Fprintln(out, strings.Join(loopback, "\n"))
	}
	if len(unowned) > 0 {
		title := fmt.Sprintf("%d without an owner (no current Service port has them; see `stale`):", len(unowned))
		if !m.Summary.ObjectsGiven {
			title = fmt.Sprintf("%d without an owner (pass --from-objects):", len(unowned))
		}
		fmt.Fprintln(out, st.warn.Render(title))
		fmt.Fprintln(out, strings.Join(unowned, "\n"))
	}
}

// ipvsSummaryLine counts the virtual and real servers attributed, in lines
// that fit 80 columns.
func ipvsSummaryLine(m *diagnose.ChainMap) string {
	c := m.Summary.IPVS
	line := fmt.Sprintf("%s: %d attributed, %d kube-proxy probe, %d without owner\n%s: %d endpoints, %d not",
		count(c.VirtualServers, "IPVS virtual server"), c.Attributed-c.Probes, c.Probes, c.Unattributed,
		count(c.RealServers, "real server"), c.Endpoints, c.NotEndpoints-probeRealServers(m))
	if c.Unattributed > 0 {
		line += fmt.Sprintf(", %d of virtual servers without owner", c.RealServers-c.Endpoints-c.NotEndpoints)
	}
	if m.Summary.IPVSIncomplete {
		line += "\nthe IPVS table was read only in part: these are the counts of what was read"
	}
	return line
}

// probeRealServers are the real servers of the probe (it has none when
// kube-proxy left it as it creates it), counted apart from the Service
// ports'.
func probeRealServers(m *diagnose.ChainMap) int {
	n := 0
	for _, vs := range m.VirtualServers {
		if vs.Kind == correlate.VirtualServiceProbe {
			n += len(vs.RealServers)
		}
	}
	return n
}

// renderStaleIPVS lists the virtual servers no current Service port has,
// by what they are, each with its former owner and where it sends
// connections.
func renderStaleIPVS(out io.Writer, t *Terminal, rep *diagnose.StaleReport) {
	st := t.styles()
	for _, g := range []struct {
		what, title string
	}{
		{diagnose.UnownedStale, "stale IPVS virtual server%s (no current Service port has %s):"},
		{diagnose.UnownedLoopbackNodePort, "IPVS NodePort virtual server%s on loopback (an older kube-proxy's%s):"},
		{diagnose.UnownedProbe, "kube-proxy startup probe%s (harmless%s):"},
	} {
		var vss []diagnose.StaleVirtualServer
		for _, v := range rep.VirtualServers {
			if v.What == g.what {
				vss = append(vss, v)
			}
		}
		if len(vss) == 0 {
			continue
		}
		style := st.dim
		if g.what == diagnose.UnownedStale {
			style = st.bad
		}
		them := "it"
		if len(vss) > 1 {
			them = "them"
		}
		if g.what != diagnose.UnownedStale {
			them = ""
		}
		fmt.Fprintln(out, style.Render(fmt.Sprintf("%d "+g.title, len(vss), plural(len(vss)), them)))
		for _, v := range vss {
			to := "no real server"
			if len(v.RealServerAddrs) > 0 {
				to = strings.Join(v.RealServerAddrs, ", ")
			}
			fmt.Fprintln(out, "  "+wrapIndent(fmt.Sprintf("%s → %s", v.VirtualServer, to), t.Width-2, 4))
			if g.what == diagnose.UnownedStale {
				owner := "former owner: " + v.FormerOwner
				if v.OwnerEvidence != "" {
					owner += " (" + v.OwnerEvidence + ")"
				}
				fmt.Fprintln(out, "    "+wrapIndent(owner, t.Width-4, 4))
				// the message counts this one's real servers
				fmt.Fprintln(out, trimTrailing(indent(st.dim.Render(wrap(v.Message, t.Width-4)), "    ")))
			}
		}
		if g.what != diagnose.UnownedStale {
			fmt.Fprintln(out, trimTrailing(indent(st.dim.Render(wrap(vss[0].Message, t.Width-2)), "  ")))
		}
	}
}

// renderCountsIPVS says the virtual servers against what the Service
// ports call for.
func renderCountsIPVS(out io.Writer, t *Terminal, c *diagnose.IPVSCountsReport) {
	if c == nil {
		return
	}
	st := t.styles()
	agree := st.dim.Render("not compared")
	switch {
	case c.Compared && c.Agree:
		agree = st.good.Render("agree")
	case c.Compared:
		agree = st.bad.Render("DIFFER")
	}
	line := fmt.Sprintf("IPVS: %s in the table", count(c.VirtualServers, "virtual server"))
	if c.Compared {
		line += fmt.Sprintf(", %d expected (the Service ports' frontends): %d present, %d missing, %d stale, %s", c.Expected, c.Present, c.Missing, c.Stale, count(c.Probes, "probe"))
		if c.LoopbackNodePorts > 0 {
			line += fmt.Sprintf(", %d loopback NodePort%s", c.LoopbackNodePorts, plural(c.LoopbackNodePorts))
		}
	}
	fmt.Fprintln(out, wrapIndent(line+": "+agree, t.Width-2, 2))
	rs := count(c.RealServers, "real server")
	if c.Compared {
		rs += fmt.Sprintf(" (%d endpoints expected in the present virtual servers, where this node's view tells)", c.ExpectedRealServers)
	}
	fmt.Fprintln(out, "  "+wrapIndent(rs, t.Width-2, 2))
	switch {
	case c.NotCompared != "":
		fmt.Fprintln(out, "  "+wrapIndent("not compared: "+c.NotCompared, t.Width-2, 2))
	case c.Reason != "":
		fmt.Fprintln(out, "  "+wrapIndent(c.Reason, t.Width-2, 2))
	}
}

// unownedVirtualServersDiffer: an IPVS virtual server no Service port has
// is on one side of the diff only.
func unownedVirtualServersDiffer(d *diagnose.NodeDiff) bool {
	u := d.UnownedVirtualServers
	return u != nil && len(u.OnlyA)+len(u.OnlyB) > 0
}
