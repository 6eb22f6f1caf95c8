package plugin

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// styled renders a sample of every style the renderers use.
func styled(t *Terminal) string {
	s := t.styles()
	var b strings.Builder
	for _, st := range []string{
		s.header.Render("SERVICE PORT"), s.dim.Render("fixed"), s.bad.Render("stale"),
		s.good.Render("ok"), s.warn.Render("no owner"), s.group.Render("ns1/svc1:p80"),
	} {
		b.WriteString(st)
		b.WriteByte('\n')
	}
	return b.String()
}

// clearColorEnv removes the environment that changes colour detection, so
// the tests do not depend on the developer's shell or on CI.
func clearColorEnv(t *testing.T) {
	t.Helper()
	for _, k := range []string{"NO_COLOR", "CLICOLOR", "CLICOLOR_FORCE", "COLORTERM", "CI", "GOOGLE_CLOUD_SHELL"} {
		t.Setenv(k, "")
		os.Unsetenv(k) // t.Setenv restores the old value
	}
	t.Setenv("TERM", "xterm-256color")
}

func hasEscape(s string) bool { return strings.Contains(s, "\x1b[") }

func TestTerminalNotATerminal(t *testing.T) {
	for _, tc := range []struct {
		color, noColor string
		wantEscapes    bool
		wantRich       bool
	}{
		{color: "auto"},
		{color: ""}, // the flag's zero value is auto
		{color: "never"},
		{color: "always", wantEscapes: true, wantRich: true},
		{color: "ALWAYS", wantEscapes: true, wantRich: true},
		{color: "auto", noColor: "1"},
		{color: "never", noColor: "1"},
		// An explicit --color=always wins over NO_COLOR, as no-color.org asks of
		// command-line arguments.
		{color: "always", noColor: "1", wantEscapes: true, wantRich: true},
	} {
		clearColorEnv(t)
		if tc.noColor != "" {
			t.Setenv("NO_COLOR", tc.noColor)
		}
		var buf bytes.Buffer
		term, err := NewTerminal(&buf, tc.color)
		if err != nil {
			t.Fatalf("--color=%s: %v", tc.color, err)
		}
		out := styled(term)
		if got := hasEscape(out); got != tc.wantEscapes {
			t.Errorf("--color=%q NO_COLOR=%q into a bytes.Buffer: escape codes %v, want %v: %q", tc.color, tc.noColor, got, tc.wantEscapes, out)
		}
		if term.Rich != tc.wantRich {
			t.Errorf("--color=%q into a bytes.Buffer: Rich=%v, want %v", tc.color, term.Rich, tc.wantRich)
		}
		if term.Width != 80 {
			t.Errorf("--color=%q into a bytes.Buffer: width %d, want 80", tc.color, term.Width)
		}
		if !strings.Contains(out, "SERVICE PORT") {
			t.Errorf("styled text lost: %q", out)
		}
	}
}

// A pipe is an *os.File that is not a terminal: plain, whatever TERM says.
func TestTerminalPipe(t *testing.T) {
	clearColorEnv(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	term, err := NewTerminal(w, "auto")
	if err != nil {
		t.Fatal(err)
	}
	if out := styled(term); hasEscape(out) || term.Rich {
		t.Errorf("pipe with --color=auto: rich=%v %q", term.Rich, out)
	}
}

func TestTerminalBadMode(t *testing.T) {
	_, err := NewTerminal(&bytes.Buffer{}, "sometimes")
	if err == nil || !strings.Contains(err.Error(), "auto, always, never") {
		t.Errorf("--color=sometimes: %v, want an error listing the modes", err)
	}
}
