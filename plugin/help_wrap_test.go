package plugin

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// Every line of every command's --help fits 80 columns, and the flags that
// only matter live (or in a sweep) are listed apart from the rest.
func TestHelpFitsAndGroups(t *testing.T) {
	for _, c := range commandTree(t) {
		args := append(strings.Fields(c.CommandPath())[2:], "--help") // "kubectl proxyrules …"
		out, _, err := runCmd(t, nil, args...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		for _, line := range strings.Split(out, "\n") {
			if n := utf8.RuneCountInString(line); n > helpWidth {
				t.Errorf("%s --help: %d columns: %q", c.CommandPath(), n, line)
			}
		}
		if c.Flags().Lookup("image") == nil {
			continue
		}
		flags, live := strings.Index(out, "\nFlags:\n"), strings.Index(out, "\nLive flags (")
		image, fromDump := strings.Index(out, "--image string"), strings.Index(out, "--from-dump")
		if flags < 0 || live < flags || image < live || fromDump > live {
			t.Errorf("%s --help: --image is not under the live flags, apart from --from-dump:\n%s", c.CommandPath(), out)
		}
	}
}

func TestWrapHelpLine(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"example continues with a backslash", "Examples:\n  kubectl proxyrules map --from-dump a-long-file-name.txt --from-objects objects.json\n",
			"Examples:\n  kubectl proxyrules map --from-dump a-long-file-name.txt --from-objects \\\n      objects.json\n"},
		{"comment continues as a comment", "Examples:\n  # a comment that goes on and on and on past the eightieth column of the help text\n",
			"Examples:\n  # a comment that goes on and on and on past the eightieth column of the help\n  # text\n"},
		{"command summary under its column", "Available Commands:\n  explain     Show the path a packet for a Service takes on the node, against its slices\n",
			"Available Commands:\n  explain     Show the path a packet for a Service takes on the node, against\n              its slices\n"},
		{"short lines untouched", "Usage:\n  kubectl proxyrules [command]\n", "Usage:\n  kubectl proxyrules [command]\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := wrapHelp(tc.in, 80); got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

// A mistyped flag is answered as cobra answers a mistyped sub-command.
func TestFlagSuggestions(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
		not  string
	}{
		{[]string{"triage", "--nod", "x"}, []string{"unknown flag: --nod", "Did you mean this?", "--node\n"}, "--from-dump"},
		{[]string{"explain", "--from-dmp", "x"}, []string{"Did you mean this?\n\t--from-dump"}, "--node"},
		{[]string{"map", "--kubeconfg=x"}, []string{"--kubeconfig"}, ""},
		{[]string{"stale", "--zzzzzz"}, []string{"unknown flag: --zzzzzz", "see 'kubectl proxyrules stale --help'"}, "Did you mean"},
	} {
		_, _, err := runCmd(t, nil, tc.args...)
		if err == nil {
			t.Fatalf("%v: no error", tc.args)
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: %q lacks %q", tc.args, err, w)
			}
		}
		if tc.not != "" && strings.Contains(err.Error(), tc.not) {
			t.Errorf("%v: %q suggests %q", tc.args, err, tc.not)
		}
	}
}
