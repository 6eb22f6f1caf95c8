package plugin

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"
	"golang.org/x/term"
)

// Terminal decides how text output looks: colour only on a terminal (or
// with --color=always), NO_COLOR honoured, plain columns in pipes.
type Terminal struct {
	// Rich is set when stdout is a terminal: lipgloss tables and trees.
	Rich bool
	// Width is the terminal width (80 when unknown).
	Width    int
	Renderer *lipgloss.Renderer
	// NoHeaders (--no-headers): tables print their rows only.
	NoHeaders bool
}

// NewTerminal inspects out. color is auto, always or never.
func NewTerminal(out io.Writer, color string) (*Terminal, error) {
	t := &Terminal{Width: 80}
	fd, isFile := fdOf(out)
	tty := isFile && term.IsTerminal(fd)
	if tty {
		if w, _, err := term.GetSize(fd); err == nil && w > 0 {
			t.Width = w
		}
	}
	t.Rich = tty
	t.Renderer = lipgloss.NewRenderer(out)
	switch strings.ToLower(color) {
	case "", "auto":
		if !tty || os.Getenv("NO_COLOR") != "" || os.Getenv("TERM") == "dumb" {
			t.Renderer.SetColorProfile(termenv.Ascii)
		} else {
			t.Renderer.SetColorProfile(termenv.NewOutput(out).EnvColorProfile())
		}
	case "always":
		t.Renderer.SetColorProfile(termenv.ANSI256)
		t.Rich = true
	case "never":
		t.Renderer.SetColorProfile(termenv.Ascii)
	default:
		return nil, fmt.Errorf("--color must be one of %s, not %q", strings.Join(ColorModes, ", "), color)
	}
	return t, nil
}

func fdOf(w io.Writer) (int, bool) {
	if f, ok := w.(*os.File); ok {
		return int(f.Fd()), true
	}
	return 0, false
}

// styles used by the renderers.
type styles struct {
	header, dim, bad, good, warn, group lipgloss.Style
}

func (t *Terminal) styles() styles {
	r := t.Renderer
	return styles{
		header: r.NewStyle().Bold(true),
		dim:    r.NewStyle().Faint(true),
		bad:    r.NewStyle().Foreground(lipgloss.Color("1")).Bold(true),
		good:   r.NewStyle().Foreground(lipgloss.Color("2")),
		warn:   r.NewStyle().Foreground(lipgloss.Color("3")),
		group:  r.NewStyle().Bold(true).Foreground(lipgloss.Color("4")),
	}
}
