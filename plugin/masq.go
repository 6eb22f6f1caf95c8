package plugin

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/proxyrules/kubectl-proxyrules/diagnose"
)

const masqExample = `  # The masquerade mark kube-proxy programmed, and what else uses that bit
  %[1]s masq --node ip-10-0-1-7

  # ... in a saved dump
  %[1]s masq --from-dump iptables-save.txt

  # ... checked against kube-proxy's configuration
  kubectl get configmap -n kube-system kube-proxy -o yaml > kube-proxy-cm.yaml
  %[1]s masq --from-dump ruleset.json --from-config kube-proxy-cm.yaml -o json

  # The mark on every node (a node that differs stands out)
  %[1]s masq --all-nodes`

// NewCmdMasq builds `masq`.
func NewCmdMasq(name string, streams genericiooptions.IOStreams, kube *genericclioptions.ConfigFlags) *cobra.Command {
	o := &MasqOptions{analysisOptions{IOStreams: streams}}
	cmd := &cobra.Command{
		Use:   "masq (--node NAME... | --all-nodes | --node-selector LABELS | --from-bundle DIR | --from-dump FILE [--from-config FILE])",
		Short: "Check kube-proxy's masquerade mark: bit, rules, --random-fully, clashes with other marks",
		Long: `Check the masquerade (SNAT) mark kube-proxy programmed: the bit and mark as set
(KUBE-MARK-MASQ, or nftables' inline "mark set") and as tested and cleared
(KUBE-POSTROUTING, or the masquerading chain, in both the 1.35 and 1.36+
shapes), whether MASQUERADE is --random-fully / fully-random, whether the mark
set and the mark tested agree, and every other rule in the dump (other CNIs,
the kubelet's old KUBE-MARK-DROP) that sets or tests an overlapping bit. With
--from-config it also checks the programmed bit against kube-proxy's
masqueradeBit. Marks are compared numerically (0x4000 = 0x00004000).

Use it when replies to Service traffic go missing or come back from the wrong
source address, typically after installing another CNI or network agent.

` + sweepHelp + exitStatusHelp,
		Example: fmt.Sprintf(masqExample, name),
		Args:    cobra.NoArgs,
		RunE:    runAnalysis(o),
	}
	o.addFlags(cmd, kube, false)
	o.Sweep.AddFlags(cmd)
	return cmd
}

// MasqOptions are the options of `masq`.
type MasqOptions struct{ analysisOptions }

// Run checks the masquerade mark.
func (o *MasqOptions) Run() error {
	return o.run(func(l *Loaded) (built, error) {
		rep := diagnose.Masquerade(l.Node)
		return built{report: rep, status: rep.Status, notChecked: rep.NotChecked,
			render: func(out io.Writer, t *Terminal) error { return renderMasq(out, t, rep.Families) },
			rows: func() rows {
				return rows{kind: "family", items: anySlice(rep.Families), name: func(i int) string {
					return string(rep.Families[i].Mode) + "/" + string(rep.Families[i].Family)
				}}
			}}, nil
	})
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func renderMasq(out io.Writer, t *Terminal, reps []diagnose.MasqReport) error {
	st := t.styles()
	if len(reps) == 0 {
		fmt.Fprintln(out, "no kube-proxy rules in the dump: nothing to check")
		return nil
	}
	for _, r := range reps {
		head := fmt.Sprintf("%s %s", r.Mode, r.Family)
		if r.Backend != "" {
			head += " (" + string(r.Backend) + ")"
		}
		bit := "not a single bit"
		if r.MasqueradeBit >= 0 {
			bit = fmt.Sprintf("bit %d", r.MasqueradeBit)
		}
		fmt.Fprintln(out, st.group.Render(head)+"  "+st.dim.Render(r.Shape))
		fmt.Fprintf(out, "  mark          %s (%s)\n", r.Mark, bit)
		fmt.Fprintf(out, "  random-fully  %s\n", yesNo(r.RandomFully))
		agree := st.good.Render("yes")
		if !r.Agree {
			agree = st.bad.Render("no")
		}
		fmt.Fprintf(out, "  set = tested  %s\n", agree)
		if r.ConfigBit != nil {
			ok := st.good.Render("agrees")
			if r.ConfigAgrees != nil && !*r.ConfigAgrees {
				ok = st.bad.Render("DISAGREES")
			}
			fmt.Fprintf(out, "  config        masqueradeBit %d: %s\n", *r.ConfigBit, ok)
		}
		for _, g := range []struct {
			label string
			refs  []diagnose.RuleRef
		}{{"set by", r.SetBy}, {"tested by", r.TestedBy}, {"cleared by", r.ClearedBy}} {
			for i, ref := range g.refs {
				label := ""
				if i == 0 {
					label = g.label
				}
				fmt.Fprintf(out, "  %-12s  %s\n", label, st.dim.Render(fitRule(ref.Table+" "+ref.Chain+": "+ref.Rule, t.Width-16)))
			}
		}
		if r.SetByTotal > len(r.SetBy) {
			fmt.Fprintf(out, "  %-12s  %s\n", "", st.dim.Render(fmt.Sprintf("… %d rules set it in all", r.SetByTotal)))
		}
		if len(r.Conflicts) == 0 {
			fmt.Fprintln(out, "  conflicts     "+st.good.Render("none: no other rule uses an overlapping mark bit"))
		}
		for _, c := range r.Conflicts {
			fmt.Fprintln(out, "  "+st.bad.Render("conflict")+"      "+wrapIndent(fmt.Sprintf("%s %s %s/%s (%s %s %s): %s", c.Owner, c.Op, c.Value, c.Mask, c.Table, c.Chain, c.Rule, c.Reason), t.Width-16, 16))
		}
		for _, p := range r.Problems {
			fmt.Fprintln(out, "  "+st.bad.Render("problem")+"       "+wrapIndent(p, t.Width-16, 16))
		}
		for _, n := range r.Notes {
			fmt.Fprintln(out, "  "+st.dim.Render("note")+"          "+wrapIndent(n, t.Width-16, 16))
		}
	}
	return nil
}

// fitRule shortens a long rule to width columns.
func fitRule(s string, width int) string {
	if width < 20 || len(s) <= width {
		return s
	}
	return s[:width-1] + "…"
}

// wrapIndent wraps s and indents the continuation lines by n spaces.
func wrapIndent(s string, width, n int) string {
	lines := strings.Split(wrap(s, width), "\n")
	for i := 1; i < len(lines); i++ {
		lines[i] = strings.Repeat(" ", n) + lines[i]
	}
	return strings.Join(lines, "\n")
}
