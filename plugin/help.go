package plugin

import (
	"bytes"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Flag groups for --help: flags that only matter when a node is read live
// (or swept), and output flags, are listed apart from the rest, so that
// someone reading a saved dump sees what applies to them first.
const (
	flagGroupKey    = "proxyrules.group"
	flagGroupLive   = "live"
	flagGroupSweep  = "sweep"
	flagGroupOutput = "output"
	// flagGroupKernel: the saved conntrack state (conntrackinput.go).
	flagGroupKernel = "kernel"
	helpWidth       = 80
)

// flagGroupTitles orders the groups after the command's own flags.
var flagGroupTitles = []struct{ group, title string }{
	{flagGroupKernel, "Kernel state flags (conntrack table, counters, sysctls saved from the node):"},
	{flagGroupLive, "Live flags (reading a node through the cluster; ignored with --from-*):"},
	{flagGroupSweep, "Sweep flags (many nodes, one debug pod each):"},
	{flagGroupOutput, "Output flags:"},
}

// groupFlags puts the named flags of cmd in a help group.
func groupFlags(cmd *cobra.Command, group string, names ...string) {
	for _, n := range names {
		_ = cmd.Flags().SetAnnotation(n, flagGroupKey, []string{group})
	}
}

// flagsOf renders the flags of fs in group ("" for those in none), wrapped
// at helpWidth columns.
func flagsOf(fs *pflag.FlagSet, group string) string {
	sub := pflag.NewFlagSet("", pflag.ContinueOnError)
	fs.VisitAll(func(f *pflag.Flag) {
		g := ""
		if v := f.Annotations[flagGroupKey]; len(v) > 0 {
			g = v[0]
		}
		if g == group {
			sub.AddFlag(f)
		}
	})
	return strings.TrimRight(sub.FlagUsagesWrapped(helpWidth), " \n")
}

// groupedFlagsTemplate is the flags part of the usage template: the
// command's flags, then each group that has any, then the global flags.
func groupedFlagsTemplate() string {
	var b strings.Builder
	b.WriteString(`{{if .HasAvailableLocalFlags}}{{with flagsOf .LocalFlags ""}}

Flags:
{{.}}{{end}}`)
	for _, g := range flagGroupTitles {
		b.WriteString(`{{with flagsOf .LocalFlags "` + g.group + `"}}

` + g.title + `
{{.}}{{end}}`)
	}
	b.WriteString(`{{end}}{{if .HasAvailableInheritedFlags}}

Global Flags:
{{flagsOf .InheritedFlags ""}}{{end}}`)
	return b.String()
}

// useGroupedHelp makes root's usage (and every sub-command's) list its
// flags in groups, wrapped at 80 columns.
func useGroupedHelp(root *cobra.Command) {
	cobra.AddTemplateFunc("flagsOf", flagsOf)
	t := root.UsageTemplate()
	start := strings.Index(t, "{{if .HasAvailableLocalFlags}}")
	end := strings.Index(t, "{{if .HasHelpSubCommands}}")
	if start < 0 || end < start {
		return // cobra changed its template: keep its own
	}
	root.SetUsageTemplate(t[:start] + groupedFlagsTemplate() + t[end:])
}

// useWrappedHelp wraps every line of --help at helpWidth columns: a long
// example command continues with a backslash, as in a shell; a comment as
// a comment; anything else under its own indentation (a command's summary
// under the summaries' column).
func useWrappedHelp(root *cobra.Command) {
	help := root.HelpFunc()
	root.SetHelpFunc(func(c *cobra.Command, args []string) {
		out := c.OutOrStdout()
		var buf bytes.Buffer
		c.SetOut(&buf)
		help(c, args)
		c.SetOut(out)
		_, _ = io.WriteString(out, wrapHelp(buf.String(), helpWidth))
	})
}

func wrapHelp(text string, width int) string {
	var b strings.Builder
	section := ""
	for _, line := range strings.SplitAfter(text, "\n") {
		body := strings.TrimRight(line, "\n")
		if body != "" && !strings.HasPrefix(body, " ") && strings.HasSuffix(body, ":") {
			section = body
		}
		if utf8.RuneCountInString(body) <= width {
			b.WriteString(line)
			continue
		}
		indent := len(body) - len(strings.TrimLeft(body, " "))
		trimmed := body[indent:]
		lead, cont, tail := strings.Repeat(" ", indent), "", ""
		switch {
		case strings.HasPrefix(trimmed, "#"):
			cont = lead + "# "
		case section == "Examples:":
			cont, tail = lead+"    ", " \\"
		case strings.HasSuffix(section, "Commands:"):
			if i := strings.Index(trimmed, "  "); i > 0 {
				col := indent + i + len(trimmed[i:]) - len(strings.TrimLeft(trimmed[i:], " "))
				cont = strings.Repeat(" ", col)
			}
		default:
			cont = lead + "  "
		}
		b.WriteString(wrapLine(body, cont, tail, width))
		if strings.HasSuffix(line, "\n") {
			b.WriteString("\n")
		}
	}
	return b.String()
}

// wrapLine breaks one line at spaces: each piece but the last ends with
// tail, each but the first starts with cont. A word longer than the width
// stays whole.
func wrapLine(line, cont, tail string, width int) string {
	var out []string
	cur := ""
	for i, w := range strings.Split(line, " ") { // empty words keep runs of spaces
		next := cur + " " + w
		if i == 0 {
			next = w
		}
		// Break only after a word of the piece's own: never inside the
		// indentation, nor right after the continuation's "#".
		hasWord := strings.TrimSpace(cur) != "" && strings.TrimSpace(cur) != strings.TrimSpace(cont)
		if hasWord && utf8.RuneCountInString(next)+utf8.RuneCountInString(tail) > width {
			out = append(out, cur+tail)
			next = cont + w
		}
		cur = next
	}
	return strings.Join(append(out, cur), "\n")
}
