package plugin

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/muesli/termenv"
	"github.com/spf13/cobra"
)

// Text from a bundle, the API objects or a dump is untrusted: a Service
// name or a warning in bundle.json can carry terminal escape sequences
// (OSC 52 writes the clipboard, others move the cursor or retitle the
// window). Everything printed as text passes through sanitize or a
// sanitizingWriter: control characters other than tab and newline, DEL,
// the C1 controls, invalid UTF-8 and Unicode's bidirectional overrides are
// shown escaped (\x1b, \u202e), never sent raw.

// sanitize escapes what a terminal would act on in untrusted text.
func sanitize(s string) string {
	if !needsEscape(s) {
		return s
	}
	var b strings.Builder
	w := &sanitizingWriter{w: &b}
	w.Write([]byte(s))
	w.flush()
	return b.String()
}

// ErrorText is err as the command's "error:" line shows it. An error from
// running a command may quote data (a Service or chain name in a
// did-you-mean, a rule, a node's output, a bundle's node): it is escaped
// as data, newlines included, so that a name cannot print a line of its
// own, except a usage text a command writes itself. An error from the
// command line (cobra's, a mistyped flag) quotes only what was typed and
// keeps its lines (cobra's suggestions).
func ErrorText(err error) string {
	var run *runError
	var usage *usageError
	if errors.As(err, &run) && !errors.As(err, &usage) {
		return escapeData(err.Error())
	}
	return sanitize(err.Error())
}

// runError is an error a command's RunE returned (markRunErrors).
type runError struct{ error }

func (e *runError) Unwrap() error { return e.error }

// markRunErrors marks the errors c and its sub-commands return from
// running, for ErrorText.
func markRunErrors(c *cobra.Command) {
	if run := c.RunE; run != nil {
		c.RunE = func(cmd *cobra.Command, args []string) error {
			if err := run(cmd, args); err != nil {
				return &runError{err}
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		markRunErrors(sub)
	}
}

// usageError is a command's own text of how to call it: its lines are
// the plugin's, and it quotes no data.
type usageError struct{ error }

func (e *usageError) Unwrap() error { return e.error }

func usageErrorf(format string, args ...any) error {
	return &usageError{fmt.Errorf(format, args...)}
}

// dataLines writes lines each written whole by one Write, as
// collect.Progress writes its steps and warnings: what a line says is data
// (a pod's or node's name, a command's error on the node), escaped, and
// only its final newline passes. A Write of several lines shows the inner
// newlines escaped: never a line the data made.
type dataLines struct{ w io.Writer }

func (d dataLines) Write(p []byte) (int, error) {
	line, nl := bytes.CutSuffix(p, []byte("\n"))
	s := escapeData(string(line))
	if nl {
		s += "\n"
	}
	if _, err := io.WriteString(d.w, s); err != nil {
		return 0, err
	}
	return len(p), nil
}

// escapeData is sanitize for one piece of data set among the plugin's own
// lines (a name, a message or a rule read from a file): its newlines,
// carriage returns and tabs are escaped too (\n, \r, \t), and so is ESC
// whatever the terminal. The sanitizing writer lets the plugin's own
// newlines and colours through and cannot tell them from the data's: a
// Service named "web\ntriage node/x: HEALTHY" would forge a line.
func escapeData(s string) string {
	if !needsEscapeData(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\r':
			b.WriteString(`\r`)
		case c == '\t':
			b.WriteString(`\t`)
		case c < 0x20 || c == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, c)
		case c < 0x80:
			b.WriteByte(c)
		default:
			r, n := utf8.DecodeRuneInString(s[i:])
			switch {
			case r == utf8.RuneError && n == 1:
				fmt.Fprintf(&b, `\x%02x`, c)
			case unsafeRune(r):
				q := strconv.QuoteRuneToASCII(r)
				b.WriteString(q[1 : len(q)-1])
			default:
				b.WriteString(s[i : i+n])
			}
			i += n
			continue
		}
		i++
	}
	return b.String()
}

func needsEscapeData(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f {
			return true
		}
	}
	return false
}

func needsEscape(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 && c != '\t' && c != '\n' || c >= 0x7f {
			return true
		}
	}
	return false
}

// newSanitizingWriter wraps the text output; on a terminal that shows
// colour, the plugin's own styles (SGR sequences of bold, faint and
// foreground colours) pass, and nothing else does.
func newSanitizingWriter(w io.Writer, t *Terminal) *sanitizingWriter {
	return &sanitizingWriter{w: w, keepSGR: t != nil && t.Renderer != nil && t.Renderer.ColorProfile() != termenv.Ascii}
}

// sanitizingWriter escapes as sanitize does, as the text streams: a
// sequence or a UTF-8 character cut between two writes is held back until
// the next.
type sanitizingWriter struct {
	w       io.Writer
	keepSGR bool
	pending []byte
}

func (s *sanitizingWriter) Write(p []byte) (int, error) {
	buf := append(s.pending, p...)
	s.pending = nil
	var out []byte
	i := 0
	for i < len(buf) {
		c := buf[i]
		switch {
		case c == 0x1b && s.keepSGR:
			n, complete := sgrLength(buf[i:])
			if !complete {
				s.pending = append([]byte(nil), buf[i:]...)
				i = len(buf)
				continue
			}
			if n > 0 {
				out = append(out, buf[i:i+n]...)
				i += n
				continue
			}
			out = append(out, `\x1b`...)
			i++
		case c < 0x20 && c != '\t' && c != '\n' || c == 0x7f:
			out = fmt.Appendf(out, `\x%02x`, c)
			i++
		case c < 0x80:
			out = append(out, c)
			i++
		default:
			if !utf8.FullRune(buf[i:]) {
				s.pending = append([]byte(nil), buf[i:]...)
				i = len(buf)
				continue
			}
			r, n := utf8.DecodeRune(buf[i:])
			switch {
			case r == utf8.RuneError && n == 1:
				out = fmt.Appendf(out, `\x%02x`, c)
			case unsafeRune(r):
				out = append(out, strconv.QuoteRuneToASCII(r)[1:len(strconv.QuoteRuneToASCII(r))-1]...)
			default:
				out = append(out, buf[i:i+n]...)
			}
			i += n
		}
	}
	if _, err := s.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// flush writes what a cut sequence held back, escaped.
func (s *sanitizingWriter) flush() {
	if len(s.pending) == 0 {
		return
	}
	rest := s.pending
	s.pending = nil
	keep := s.keepSGR
	s.keepSGR = false
	s.Write(rest)
	s.keepSGR = keep
}

// unsafeRune: the C1 controls and the bidirectional formatting characters
// (which make a terminal show text in another order than it is).
func unsafeRune(r rune) bool {
	return r >= 0x80 && r <= 0x9f || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 || r == 0x200e || r == 0x200f || r == 0x061c
}

// sgrLength is the length of the SGR sequence at b[0] (ESC [ params m) if
// it only sets what the plugin's styles set, 0 if it is anything else;
// complete is false when b ends before the sequence could be told.
func sgrLength(b []byte) (n int, complete bool) {
	if len(b) < 2 {
		return 0, false
	}
	if b[1] != '[' {
		return 0, true
	}
	for i := 2; i < len(b) && i < 64; i++ {
		switch c := b[i]; {
		case c == 'm':
			if allowedSGR(string(b[2:i])) {
				return i + 1, true
			}
			return 0, true
		case c >= '0' && c <= '9' || c == ';':
		default:
			return 0, true
		}
	}
	if len(b) >= 64 {
		return 0, true
	}
	return 0, false
}

// allowedSGR accepts reset, bold, faint, italic, underline, their resets
// and foreground colours (16, 256): never conceal, blink, reverse or
// backgrounds, which could hide text.
func allowedSGR(params string) bool {
	if params == "" {
		return true
	}
	ps := strings.Split(params, ";")
	for i := 0; i < len(ps); i++ {
		n, err := strconv.Atoi(ps[i])
		if err != nil {
			return false
		}
		switch {
		case n <= 4, n >= 22 && n <= 24, n >= 30 && n <= 37, n == 39, n >= 90 && n <= 97:
		case n == 38 && i+2 < len(ps) && ps[i+1] == "5":
			if c, err := strconv.Atoi(ps[i+2]); err != nil || c > 255 {
				return false
			}
			i += 2
		default:
			return false
		}
	}
	return true
}
