package plugin

import (
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/proxyrules/kubectl-proxyrules/diagnose"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
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
		fmt.Fprintln(out, st.group.Render(head)+"  "+st.dim.Render(r.Shape))
		fmt.Fprintf(out, "  mark          %s\n", wrapIndent(markLine(&r), t.Width-16, 16))
		fmt.Fprintf(out, "  random-fully  %s\n", yesNo(r.RandomFully))
		agree := st.good.Render("yes")
		if !r.Agree {
			agree = st.bad.Render("no")
		}
		fmt.Fprintf(out, "  set = tested  %s\n", agree)
		if r.ConfigBit != nil {
			fmt.Fprintf(out, "  config        masqueradeBit %d: %s\n", *r.ConfigBit, configWords(st, &r))
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
				fmt.Fprintf(out, "  %-12s  %s\n", label, dimLines(st, fitRule(ref.Table+" "+ref.Chain+": "+ref.Rule, ref.Mark, t.Width-16)))
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
			renderMasqFinding(out, t, r.Findings, p)
		}
		for _, n := range r.Notes {
			fmt.Fprintln(out, "  "+st.dim.Render("note")+"          "+wrapIndent(n, t.Width-16, 16))
		}
	}
	return nil
}

// renderMasqFinding prints the evidence and the fix of problem p: the uses
// of the mark that agree with each other, and what to do.
func renderMasqFinding(out io.Writer, t *Terminal, fs []diagnose.MasqFinding, p string) {
	st := t.styles()
	for _, f := range fs {
		if f.Problem != p {
			continue
		}
		for i, u := range f.Evidence {
			label := ""
			if i == 0 {
				label = "evidence"
			}
			fmt.Fprintf(out, "  %-12s  %s\n", label, dimLines(st, fitRule(useLine(u), u.Mark, t.Width-16)))
		}
		if f.More > 0 {
			fmt.Fprintf(out, "  %-12s  %s\n", "", st.dim.Render(fmt.Sprintf("… %d more %s", f.More, pluralWord(f.More, "rule", "rules"))))
		}
		if f.Remedy != "" {
			fmt.Fprintln(out, "  "+st.good.Render("fix")+"           "+wrapIndent(f.Remedy, t.Width-16, 16))
		}
		return
	}
}

func pluralWord(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// useLine is one use of the mark: "nat KUBE-POSTROUTING tests: RULE", or
// "configured: iptables.masqueradeBit: 15 in FILE".
func useLine(u diagnose.MarkUse) string {
	if u.Op == diagnose.OpConfigured {
		return "configured: " + u.Rule + " in " + u.Source
	}
	return u.Table + " " + u.Chain + " " + u.Op + ": " + u.Rule
}

// configWords says which of the rules use the configured bit: "agrees",
// "DISAGREES", or "as tested and cleared, not as set".
func configWords(st styles, r *diagnose.MasqReport) string {
	if r.ConfigAgrees != nil && *r.ConfigAgrees {
		return st.good.Render("agrees")
	}
	if *r.ConfigBit < 0 || *r.ConfigBit > 31 {
		return st.bad.Render("DISAGREES")
	}
	want := uint32(1) << uint(*r.ConfigBit)
	var as, not []string
	for _, g := range markRefs(r) {
		same, other := false, false
		for _, ref := range g.refs {
			v, err := strconv.ParseUint(strings.TrimPrefix(ref.Mark, "0x"), 16, 32)
			same = same || err == nil && uint32(v) == want
			other = other || err != nil || uint32(v) != want
		}
		if same {
			as = append(as, g.op)
		}
		if other {
			not = append(not, g.op)
		}
	}
	if len(as) == 0 {
		return st.bad.Render("DISAGREES")
	}
	return st.bad.Render("as " + strings.Join(as, " and ") + ", not as " + strings.Join(not, " and "))
}

// markLine labels the mark by what each kind of rule uses: "0x00004000
// (bit 14)" when they agree, else "set 0x00008000 (bit 15), tested and
// cleared 0x00004000 (bit 14)".
func markLine(r *diagnose.MasqReport) string {
	var order []string
	ops := map[string][]string{}
	for _, g := range markRefs(r) {
		seen := map[string]bool{}
		for _, ref := range g.refs {
			if ref.Mark == "" || seen[ref.Mark] {
				continue
			}
			seen[ref.Mark] = true
			if ops[ref.Mark] == nil {
				order = append(order, ref.Mark)
			}
			ops[ref.Mark] = append(ops[ref.Mark], g.op)
		}
	}
	label := func(m string) string {
		v, err := strconv.ParseUint(strings.TrimPrefix(m, "0x"), 16, 32)
		if err != nil {
			return m
		}
		return m + " (" + diagnose.MarkBits(uint32(v)) + ")"
	}
	switch len(order) {
	case 0:
		if r.Mark == "" {
			return "not seen"
		}
		return label(r.Mark)
	case 1:
		return label(order[0])
	}
	var parts []string
	for _, m := range order {
		parts = append(parts, strings.Join(ops[m], " and ")+" "+label(m))
	}
	return strings.Join(parts, ", ")
}

// markRefs are the rules that set, test and clear the mark, by what they
// do; KUBE-FORWARD's accept of marked packets only when nothing else tests
// it (it is evidence, the masquerading is the story).
func markRefs(r *diagnose.MasqReport) []struct {
	op   string
	refs []diagnose.RuleRef
} {
	var tested []diagnose.RuleRef
	for _, ref := range r.TestedBy {
		if ref.Chain != kubeproxy.ChainForward {
			tested = append(tested, ref)
		}
	}
	if len(tested) == 0 {
		tested = r.TestedBy
	}
	return []struct {
		op   string
		refs []diagnose.RuleRef
	}{{"set", r.SetBy}, {"tested", tested}, {"cleared", r.ClearedBy}}
}

// markToken finds hexadecimal numbers in rule text.
var markToken = regexp.MustCompile(`0x[0-9a-fA-F]+`)

// dimLines renders the lines of a wrapped rule dim, each on its own (a
// block would be padded), the continuations under the first.
func dimLines(st styles, lines []string) string {
	for i, l := range lines {
		lines[i] = st.dim.Render(l)
	}
	return strings.Join(lines, "\n"+strings.Repeat(" ", 16))
}

// fitRule fits a rule to width columns, never cutting it before the last
// number equal to mark (the mark the line is evidence of): a rule whose
// mark lies beyond the width is wrapped instead.
func fitRule(s, mark string, width int) []string {
	rs := []rune(s)
	if width < 20 || len(rs) <= width {
		return []string{s}
	}
	end := 0
	if want, err := strconv.ParseUint(strings.TrimPrefix(mark, "0x"), 16, 32); err == nil {
		for _, loc := range markToken.FindAllStringIndex(s, -1) {
			if v, err := strconv.ParseUint(s[loc[0]+2:loc[1]], 16, 32); err == nil && v == want {
				end = len([]rune(s[:loc[1]]))
			}
		}
	}
	if end < width {
		return []string{string(rs[:width-1]) + "…"}
	}
	return strings.Split(wrap(s, width), "\n")
}

// wrapIndent wraps s and indents the continuation lines by n spaces.
func wrapIndent(s string, width, n int) string {
	lines := strings.Split(wrap(s, width), "\n")
	for i := 1; i < len(lines); i++ {
		lines[i] = strings.Repeat(" ", n) + lines[i]
	}
	return strings.Join(lines, "\n")
}
