package plugin

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// Help, examples and golden output must not depend on how the test binary is
// called (os.Args[0] is plugin.test here): name the tree as kubectl does.
func init() {
	rootName = func() string { return "kubectl proxyrules" }
}

func testStreams() genericiooptions.IOStreams {
	return genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &bytes.Buffer{}, ErrOut: &bytes.Buffer{}}
}

// commandTree builds the whole tree as a user sees it, cobra's generated
// help and completion commands included, and returns every visible command.
func commandTree(t *testing.T) []*cobra.Command {
	t.Helper()
	root := NewCmdRoot(testStreams())
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	var all []*cobra.Command
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Hidden {
			return
		}
		all = append(all, c)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	return all
}

// commandArgs is the path of c below the root: ["completion", "bash"].
func commandArgs(c *cobra.Command) []string {
	var args []string
	for ; c.HasParent(); c = c.Parent() {
		args = append([]string{c.Name()}, args...)
	}
	return args
}

func helpGoldenName(c *cobra.Command) string {
	return "help-" + strings.Join(strings.Fields(c.CommandPath()), "-") + ".txt"
}

// cobraGenerated are the commands cobra writes: help, completion and its
// per-shell sub-commands. They have no Example.
func cobraGenerated(c *cobra.Command) bool {
	args := commandArgs(c)
	return len(args) > 0 && (args[0] == "help" || args[0] == "completion")
}

// TestHelpGolden compares `--help` of every command with
// testdata/golden/help-<command path>.txt; a new command needs
// `go test ./plugin -run TestHelpGolden -update`.
func TestHelpGolden(t *testing.T) {
	t.Setenv("COLUMNS", "40") // help must not follow the terminal width
	want := map[string]bool{}
	for _, c := range commandTree(t) {
		name := helpGoldenName(c)
		want[name] = true
		t.Run(strings.Join(append([]string{"root"}, commandArgs(c)...), "/"), func(t *testing.T) {
			out, errOut, err := runCmd(t, nil, append(commandArgs(c), "--help")...)
			if err != nil {
				t.Fatalf("--help: %v\n%s", err, errOut)
			}
			if errOut != "" {
				t.Errorf("--help wrote to stderr: %q", errOut)
			}
			if strings.Contains(out, "plugin.test") {
				t.Errorf("help names the test binary:\n%s", out)
			}
			checkGolden(t, name, []byte(out))
		})
	}
	// Golden files of commands that no longer exist.
	files, _ := filepath.Glob(filepath.Join("testdata", "golden", "help-*.txt"))
	sort.Strings(files)
	for _, f := range files {
		if want[filepath.Base(f)] {
			continue
		}
		if *update {
			if err := os.Remove(f); err != nil {
				t.Error(err)
			}
			continue
		}
		t.Errorf("%s belongs to no command (run go test ./plugin -run TestHelpGolden -update)", f)
	}
}

// TestHelpTeaches fails when a command lacks a one-line Short, a Long that
// says more, or an Example written for the way the plugin is invoked.
func TestHelpTeaches(t *testing.T) {
	for _, c := range commandTree(t) {
		path := c.CommandPath()
		if cobraGenerated(c) {
			continue
		}
		switch {
		case strings.TrimSpace(c.Short) == "":
			t.Errorf("%s: no Short", path)
		case strings.Contains(c.Short, "\n"):
			t.Errorf("%s: Short is not one line: %q", path, c.Short)
		case strings.HasSuffix(c.Short, "."):
			t.Errorf("%s: Short ends with a full stop (cobra lists it in a table): %q", path, c.Short)
		}
		if strings.TrimSpace(c.Long) == "" {
			t.Errorf("%s: no Long", path)
		} else if strings.TrimSpace(c.Long) == strings.TrimSpace(c.Short) {
			t.Errorf("%s: Long only repeats Short", path)
		}
		if strings.TrimSpace(c.Example) == "" {
			t.Errorf("%s: no Example", path)
			continue
		}
		if !strings.Contains(c.Example, "kubectl proxyrules") && !strings.Contains(c.Example, "kubectl-proxyrules") {
			t.Errorf("%s: Example does not show how to run the plugin:\n%s", path, c.Example)
		}
		for _, line := range strings.Split(c.Example, "\n") {
			if line != "" && !strings.HasPrefix(line, "  ") {
				t.Errorf("%s: Example line not indented by two spaces like kubectl's: %q", path, line)
			}
		}
	}
}

// The root command's name follows the binary: help says
// "kubectl proxyrules", cobra's completion scripts register kubectl-proxyrules.
func TestRootNames(t *testing.T) {
	root := NewCmdRoot(testStreams())
	if got := root.Name(); got != "kubectl-proxyrules" {
		t.Errorf("root.Name() = %q, want kubectl-proxyrules", got)
	}
	if got := root.CommandPath(); got != "kubectl proxyrules" {
		t.Errorf("root.CommandPath() = %q, want \"kubectl proxyrules\"", got)
	}
	out, _, err := runCmd(t, nil, "completion", "bash")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "complete -o default -F __start_kubectl-proxyrules kubectl-proxyrules") {
		t.Errorf("bash completion does not register kubectl-proxyrules:\n%.400s", out)
	}
	for _, shell := range []string{"zsh", "fish", "powershell"} {
		out, _, err := runCmd(t, nil, "completion", shell)
		if err != nil || !strings.Contains(out, "kubectl-proxyrules") {
			t.Errorf("completion %s: %v\n%.300s", shell, err, out)
		}
	}
}
