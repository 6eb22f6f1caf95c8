package plugin

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/diagnose"
)

const conntrackExample = `  # Stale UDP entries (DNS above all), table pressure and the sysctls Services need, on one node
  %[1]s conntrack --node ip-10-0-1-7

  # ... from what was saved on the node
  cat /proc/net/nf_conntrack > ct.txt                           # on the node (or conntrack -L -o extended)
  cat /proc/net/stat/nf_conntrack > st1.txt; sleep 5; cat /proc/net/stat/nf_conntrack > st2.txt
  grep -H . /proc/sys/net/netfilter/nf_conntrack_* /proc/sys/net/ipv4/ip_forward > sysctls.txt
  %[1]s conntrack --from-conntrack ct.txt --from-conntrack-stats st1.txt --from-conntrack-stats st2.txt \
      --from-sysctls sysctls.txt --from-objects objects.json --node node-a

  # Which nodes hold stale entries of kube-system/kube-dns
  %[1]s conntrack --all-nodes -n kube-system -l k8s-app=kube-dns`

// NewCmdConntrack builds `conntrack`.
func NewCmdConntrack(name string, streams genericiooptions.IOStreams, kube *genericclioptions.ConfigFlags) *cobra.Command {
	o := &ConntrackOptions{analysisOptions{IOStreams: streams}}
	cmd := &cobra.Command{
		Use:   "conntrack (--node NAME... | --all-nodes | --node-selector LABELS | --from-bundle DIR | --from-conntrack FILE [--from-objects FILE])",
		Short: "Stale conntrack entries of Services, a full conntrack table, and the sysctls Services depend on",
		Long: `Look beside the rules: the node's conntrack table, its counters and the
kernel settings that make correct rules useless.

- stale UDP entries: entries to a Service's cluster IP, external IP,
  load-balancer IP or NodePort whose reply comes from an address that is no
  longer a serving endpoint (DNS clients keep sending to a gone pod), per
  Service port, with the time they have left, whether kube-proxy's own
  cleanup removes them in this version and why not (a deleted Service, a
  NodePort of a Service at zero endpoints, TCP), and the conntrack -D command
  that would clear them, printed, never run;
- TCP entries to endpoints that are gone, as notes;
- table pressure: count/max at or above 90 % (new connections are dropped at
  100 %), insert_failed or drop growing between two reads, a max below what
  kube-proxy's configuration sets;
- settings that break Services: forwarding off, bridge-nf-call-iptables 0
  with br_netfilter loaded, route_localnet 0 with localhost NodePorts,
  NodePorts inside ip_local_port_range, tcp_be_liberal against kube-proxy's
  configuration.

Live, the table is read filtered on the node to Service addresses and
NodePorts, and capped: a capped read says so (INCOMPLETE, with how much was
left out).

` + sweepHelp + exitStatusHelp,
		Example: fmt.Sprintf(conntrackExample, name),
		Args:    cobra.NoArgs,
		RunE:    runAnalysis(o),
	}
	o.addFlags(cmd, kube, false)
	o.Sweep.AddFlags(cmd)
	return cmd
}

// ConntrackOptions are the options of `conntrack`.
type ConntrackOptions struct{ analysisOptions }

// Run diagnoses the node's conntrack state.
func (o *ConntrackOptions) Run() error {
	req := o.request()
	req.Kernel, req.KernelOnly = true, true // the table, counters and sysctls alone will do
	return o.runRequest(req, func(l *Loaded) (built, error) {
		rep := diagnose.Conntrack(l.Node, conntrackInputs(l)) // also when nothing was read: it says so
		return built{report: rep, status: rep.Status, notChecked: rep.NotChecked,
			render: func(out io.Writer, t *Terminal) error { return renderConntrack(out, t, rep) },
			rows: func() rows {
				return rows{kind: "problem", items: anySlice(rep.Problems), name: func(i int) string {
					return rep.Problems[i].Kind + "/" + rep.Problems[i].Subject
				}}
			}}, nil
	})
}

// conntrackInputs are what was loaded for diagnose.Conntrack: the first and
// last of the counters' reads give the rates.
func conntrackInputs(l *Loaded) diagnose.ConntrackInputs {
	in := diagnose.ConntrackInputs{Table: l.Conntrack, Sysctls: l.Sysctls}
	if n := len(l.ConntrackStats); n > 0 {
		first, last := l.ConntrackStats[0], l.ConntrackStats[n-1]
		in.After = last.Stats
		if n > 1 {
			in.Before = first.Stats
			if !first.At.IsZero() && !last.At.IsZero() {
				in.Interval = last.At.Sub(first.At)
			}
		}
	}
	if l.Config != nil {
		in.MaxPerCore, in.Min = l.Config.Conntrack.MaxPerCore, l.Config.Conntrack.Min
	}
	return in
}

func renderConntrack(out io.Writer, t *Terminal, rep *diagnose.ConntrackReport) error {
	st := t.styles()
	title := "conntrack"
	if rep.Node != "" {
		title += " node/" + rep.Node
	}
	sev := map[diagnose.Severity]int{}
	for _, p := range rep.Problems {
		sev[p.Severity]++
	}
	fmt.Fprintf(out, "%s: %s  %s\n", st.header.Render(title), statusText(st, rep.Status),
		st.dim.Render(fmt.Sprintf("(%s, %s, %s)", count(sev[diagnose.SeverityError], "error"), count(sev[diagnose.SeverityWarning], "warning"), count(sev[diagnose.SeverityInfo], "note"))))
	if f := rep.Facts; f != nil {
		fmt.Fprintf(out, "entries read: %d, of Services: %d", f.Read, len(f.Entries))
		if len(f.ServiceRange.Prefixes) > 0 {
			fmt.Fprintf(out, " (deleted Services looked for in %s, from %s)", prefixes(f), f.ServiceRange.Source)
		}
		fmt.Fprintln(out)
		if line := diagnose.ReconcilerLine(rep); line != "" {
			fmt.Fprintln(out, wrapIndent(line, t.Width, 2))
		}
		renderConntrackGroups(out, t, f.Groups)
	}
	for _, p := range rep.Problems {
		label := st.bad.Render(strings.ToUpper(string(p.Severity)))
		if p.Severity != diagnose.SeverityError {
			label = st.warn.Render(strings.ToUpper(string(p.Severity)))
		}
		fmt.Fprintln(out, label+"  "+wrapIndent(p.Message, t.Width-2, 2))
		for _, kv := range [][2]string{{"evidence", p.Evidence}, {"consequence", p.Consequence}, {"fix", p.Remedy}} {
			if kv[1] != "" {
				fmt.Fprintf(out, "  %-12s %s\n", kv[0], wrapIndent(kv[1], t.Width-15, 15))
			}
		}
		for _, c := range p.Commands {
			fmt.Fprintf(out, "  %-12s %s\n", "", st.dim.Render(c))
		}
	}
	return nil
}

// renderConntrackGroups is a table of the Service ports with entries.
func renderConntrackGroups(out io.Writer, t *Terminal, groups []correlate.ConntrackGroup) {
	if len(groups) == 0 {
		return
	}
	rows := [][]string{}
	for _, g := range groups {
		target := g.Target
		if g.Deleted {
			target += " (deleted)"
		}
		stale, why := strconv.Itoa(g.Stale), "-"
		var causes []string
		for _, c := range g.ByCause {
			cleans := "kube-proxy cleans"
			if !c.KubeProxyCleans {
				cleans = "kube-proxy does not clean"
			}
			causes = append(causes, fmt.Sprintf("%d %s (%s; %ds-%ds left)", c.Entries, c.Why, cleans, c.Shortest, c.Longest))
		}
		if len(causes) > 0 {
			why = strings.Join(causes, "; ")
		}
		rows = append(rows, []string{target, g.Proto, strconv.Itoa(g.Entries), stale, why})
	}
	_ = renderTable(out, t, []string{"SERVICE PORT", "PROTO", "ENTRIES", "STALE", "WHY"}, rows, -1)
}

func prefixes(f *correlate.ConntrackFacts) string {
	var s []string
	for _, p := range f.ServiceRange.Prefixes {
		s = append(s, p.String())
	}
	return strings.Join(s, ", ")
}

// conntrackLine is triage's line on the conntrack state: the table's use,
// the stale UDP entries, the settings in the way; or that it was not read.
func conntrackLine(rep *diagnose.ConntrackReport) string {
	if rep == nil {
		return "conntrack: not read (see not checked)"
	}
	s := rep.Summary
	use := "table size not read"
	if s.Count != nil && s.Max != nil {
		use = fmt.Sprintf("%d of %d entries", *s.Count, *s.Max)
		if s.UsePercent != nil {
			use += fmt.Sprintf(" (%d%%)", *s.UsePercent)
		}
	}
	entries := "entries"
	if s.StaleUDP == 1 {
		entries = "entry"
	}
	return fmt.Sprintf("conntrack: %s, %d stale UDP %s of Services, %s in the way", use, s.StaleUDP, entries, count(s.Settings, "kernel setting"))
}
