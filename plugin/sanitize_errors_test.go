package plugin

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/proxyrules/kubectl-proxyrules/plugin/collect"
)

// errorLine is what cmd's main prints for err.
func errorLine(err error) string {
	if err == nil {
		return ""
	}
	if _, ok := IsExitError(err); ok {
		return "" // the report said why
	}
	return "error: " + ErrorText(err) + "\n"
}

// assertNoForgedLine fails when shown (everything a command printed) holds
// a raw control byte of the data or a line the data made, or does not
// show the data escaped.
func assertNoForgedLine(t *testing.T, shown string) {
	t.Helper()
	if !strings.Contains(shown, `\ntriage node/x`) || !strings.Contains(shown, `\x1b[32mFORGED\x1b[0m\r`) {
		t.Errorf("the data is not shown, escaped:\n%s", shown)
	}
	for _, line := range strings.Split(shown, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "triage node/x") {
			t.Errorf("the data printed a line of its own: %q", line)
		}
	}
	if strings.Contains(shown, "\x1b[32mFORGED") || strings.Contains(shown, "\r") {
		t.Errorf("a raw escape sequence or carriage return of the data was printed: %q", shown)
	}
}

// replaceOnce replaces old, which must occur once, in objects.
func replaceOnce(t *testing.T, objects, old, new string) string {
	t.Helper()
	if n := strings.Count(objects, old); n != 1 {
		t.Fatalf("the fixture changed: %q occurs %d times", old, n)
	}
	return strings.Replace(objects, old, new, 1)
}

// TestErrorsCannotForgeLines: a name read from a file and quoted by an
// error (a did-you-mean, "exists in namespace", a Service's ports, a sweep's
// node error) reaches the terminal escaped, as main prints the error: it
// cannot print a verdict line of its own, nor colour it. Before, the error
// line kept newlines.
func TestErrorsCannotForgeLines(t *testing.T) {
	const svc = "\"name\": \"web\",\n                \"namespace\": \"shop\","
	serviceName := func(objects string, _ *collect.Manifest) string {
		return replaceOnce(t, objects, svc, "\"name\": \"web"+jsonText(forge)+"\",\n                \"namespace\": \"shop\",")
	}
	serviceNamespace := func(objects string, _ *collect.Manifest) string {
		return replaceOnce(t, objects, svc, "\"name\": \"web\",\n                \"namespace\": \"shop"+jsonText(forge)+"\",")
	}
	portName := func(objects string, _ *collect.Manifest) string {
		const port = "\"name\": \"http\",\n                        \"port\": 80,"
		// The first is shop/web's (the file lists the Services first).
		at := strings.Index(objects, svc)
		if at < 0 {
			t.Fatal("the fixture's Service shop/web moved")
		}
		return objects[:at] + replaceOnce(t, objects[at:at+2000], port, "\"name\": \"http"+jsonText(forge)+"\",\n                        \"port\": 80,") + objects[at+2000:]
	}
	for _, tc := range []struct {
		name   string
		mutate func(string, *collect.Manifest) string
		args   []string
	}{
		{"explain, did you mean", serviceName, []string{"explain", "svc/web", "-n", "shop"}},
		{"explain, exists in namespace", serviceNamespace, []string{"explain", "svc/web", "-n", "default"}},
		{"explain -o json, exists in namespace", serviceNamespace, []string{"explain", "svc/web", "-n", "default", "-o", "json"}},
		{"explain, no such port", portName, []string{"explain", "svc/web", "--port", "nope", "-n", "shop"}},
		{"trace, no such port", portName, []string{"trace", "--to", "svc/web:nope", "-n", "shop"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := forgingBundle(t, tc.mutate)
			out, errOut, err := runCmd(t, nil, append(tc.args, "--from-bundle", dir)...)
			if err == nil {
				t.Fatalf("no error:\n%s", out)
			}
			assertNoForgedLine(t, out+errOut+errorLine(err))
		})
	}
}

// forgingSweep is a sweep folder of one node, which could not be read for
// a reason that holds forge.
func forgingSweep(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "sweep")
	w, err := collect.NewSweepWriter(dir, time.Unix(1795939150, 0))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := os.ReadFile(smallFixture + "objects.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Objects(objs); err != nil {
		t.Fatal(err)
	}
	w.Node("node-d", errors.New("node node-d is not Ready"+forge), "NotReady")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestSweepErrorsCannotForgeLines: a sweep's per-node error, read from its
// folder, is escaped in the summary and in the error of a machine output.
func TestSweepErrorsCannotForgeLines(t *testing.T) {
	dir := forgingSweep(t)
	for _, args := range [][]string{
		{"triage", "--from-bundle", dir},
		{"triage", "--from-bundle", dir, "-o", "json"},
		{"stale", "--from-bundle", dir},
		{"stale", "--from-bundle", dir, "-o", "yaml"},
	} {
		t.Run(strings.Join(args[:1], " ")+" "+strings.Join(args[3:], " "), func(t *testing.T) {
			out, errOut, err := runCmd(t, nil, args...)
			if err == nil {
				t.Fatal("no error")
			}
			shown := errOut + errorLine(err)
			if len(args) == 3 {
				shown = out + shown // JSON and YAML escape their own strings
			}
			assertNoForgedLine(t, shown)
		})
	}
}

// The error line: an error from running a command is escaped as data,
// the plugin's usage texts and cobra's command-line errors keep their
// lines.
func TestErrorText(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"run error", &runError{errors.New("service shop/x not found; did you mean svc/web" + forge + "?")},
			`service shop/x not found; did you mean svc/web\ntriage node/x: HEALTHY \x1b[32mFORGED\x1b[0m\r?`},
		{"wrapped run error", &runError{&ExitError{Code: 1}}, "exit status 1"},
		{"usage", &runError{usageErrorf("trace needs a destination\nUsage: %s", "trace [flags]")}, "trace needs a destination\nUsage: trace [flags]"},
		{"command line", errors.New("unknown command \"mpa\"\n\nDid you mean this?\n\tmap\n"), "unknown command \"mpa\"\n\nDid you mean this?\n\tmap\n"},
		{"command line, escape", errors.New("unknown flag: --x\x1b]0;t\x07"), `unknown flag: --x\x1b]0;t\x07`},
	} {
		if got := ErrorText(tc.err); got != tc.want {
			t.Errorf("%s: ErrorText = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// Whatever a run error says, its line is one line of text: no newline, no
// control character, no bidirectional override, valid UTF-8.
func FuzzErrorText(f *testing.F) {
	f.Add(forge)
	f.Add("\u202e\u009b\xff\x1b[2J")
	f.Fuzz(func(t *testing.T, s string) {
		out := ErrorText(&runError{errors.New(s)})
		if !utf8.ValidString(out) {
			t.Fatalf("ErrorText(%q) = %q: not UTF-8", s, out)
		}
		for _, r := range out {
			if r < 0x20 || r == 0x7f || unsafeRune(r) {
				t.Fatalf("ErrorText(%q) keeps %U", s, r)
			}
		}
	})
}
