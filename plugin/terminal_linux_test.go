package plugin

import (
	"fmt"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// openPTY returns the two ends of a new pseudo-terminal, or skips.
func openPTY(t *testing.T) (ptmx, pts *os.File) {
	t.Helper()
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { ptmx.Close() })
	if err := unix.IoctlSetPointerInt(int(ptmx.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Skipf("no pseudo-terminal: unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(int(ptmx.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Skipf("no pseudo-terminal: ptsname: %v", err)
	}
	pts, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { pts.Close() })
	if err := unix.IoctlSetWinsize(int(pts.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 40, Col: 132}); err != nil {
		t.Fatal(err)
	}
	return ptmx, pts
}

// On a real terminal --color=auto colours, unless NO_COLOR, TERM=dumb or CI
// says otherwise; the width is the terminal's.
func TestTerminalPTY(t *testing.T) {
	_, pts := openPTY(t)
	for _, tc := range []struct {
		name        string
		env         map[string]string
		color       string
		wantEscapes bool
	}{
		{name: "auto", color: "auto", wantEscapes: true},
		{name: "never", color: "never"},
		{name: "always", color: "always", wantEscapes: true},
		{name: "NO_COLOR", color: "auto", env: map[string]string{"NO_COLOR": "1"}},
		{name: "TERM=dumb", color: "auto", env: map[string]string{"TERM": "dumb"}},
		{name: "CI", color: "auto", env: map[string]string{"CI": "true"}},
		{name: "NO_COLOR and always", color: "always", env: map[string]string{"NO_COLOR": "1"}, wantEscapes: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clearColorEnv(t)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			term, err := NewTerminal(pts, tc.color)
			if err != nil {
				t.Fatal(err)
			}
			if out := styled(term); hasEscape(out) != tc.wantEscapes {
				t.Errorf("escape codes %v, want %v: %q", hasEscape(out), tc.wantEscapes, out)
			}
			if !term.Rich {
				t.Errorf("Rich=false on a terminal")
			}
			if term.Width != 132 {
				t.Errorf("width %d, want the terminal's 132", term.Width)
			}
		})
	}
}
