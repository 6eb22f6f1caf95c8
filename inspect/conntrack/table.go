package conntrack

import (
	"bytes"
	"fmt"
	"io"

	"github.com/proxyrules/kubectl-proxyrules/inspect/internal/scan"
)

// ReadTable reads a conntrack table in any of its text forms, detected per
// line: /proc/net/nf_conntrack, `conntrack -L` and `conntrack -L -o
// extended` (both families; conntrack's "N flow entries have been shown."
// trailer anywhere, as `2>&1` puts it first), also pasted (CRLF, indented,
// shell prompts and the command line itself). keep, when not nil, selects
// the entries kept; the others cost nothing. The entry passed to keep is
// reused: keep must not retain it.
//
// What the caps leave out is in Table.Truncated; lines not understood are
// counted in Table.Warnings. The error is only the reader's.
func ReadTable(r io.Reader, lim Limits, keep func(*Entry) bool) (*Table, error) {
	lim = lim.normalized()
	t := &Table{Shown: -1, Count: -1, Max: -1, Buckets: -1}
	lr := newLineReader(r, lim, &t.Truncated)
	w := scan.Warnings{Max: lim.MaxWarnings}
	var (
		e       Entry
		p       entryParser
		forms   formSet
		shown   int64
		trailer bool
		parsed  int64
	)
	for {
		line, ok := lr.next()
		if !ok {
			break
		}
		line = trimPasted(line)
		if len(line) == 0 {
			continue
		}
		if why := p.parse(&e, line); why != "" {
			if n, ok := trailerCount(line); ok {
				shown += n
				trailer = true
			} else if !isCommandLine(line) {
				w.Line(lr.no, line, why)
			}
			continue
		}
		parsed++
		forms.add(p.prefixed, p.zoneSeen)
		if keep != nil && !keep(&e) {
			continue
		}
		if len(t.Entries) >= lim.MaxEntries {
			t.Truncated.Incomplete = true
			t.Truncated.EntriesLeftOut++
			continue
		}
		if len(t.Entries) == cap(t.Entries) {
			t.Entries = grow(t.Entries, lim.MaxEntries)
		}
		t.Entries = append(t.Entries, e)
	}
	t.Format = forms.format()
	if trailer {
		t.Shown = shown
		if parsed != shown && !t.Truncated.Incomplete {
			w.Add(fmt.Sprintf("conntrack showed %d entries, %d read: the listing is not whole", shown, parsed))
		}
	}
	t.Warnings = append(w.Done(), t.Truncated.warnings(lim)...)
	return t, lr.err
}

// warnings says what the caps left out, each starting INCOMPLETE.
func (tr Truncation) warnings(lim Limits) []string {
	var out []string
	if tr.EntriesLeftOut > 0 {
		out = append(out, fmt.Sprintf("INCOMPLETE: %d entries kept (the cap), %d more left out", lim.MaxEntries, tr.EntriesLeftOut))
	}
	if tr.LongLines > 0 {
		out = append(out, fmt.Sprintf("INCOMPLETE: %d lines over %d bytes left out (%d bytes)", tr.LongLines, lim.MaxLineBytes, tr.LongLineBytes))
	}
	if tr.Unread {
		out = append(out, fmt.Sprintf("INCOMPLETE: reading stopped after %d bytes (the cap); the rest was not read", tr.BytesRead))
	}
	return out
}

// trimPasted drops what a paste adds around a line: spaces, a CR left by
// CRLF, a leading prompt of "$ ", "# " or "> ".
func trimPasted(line []byte) []byte {
	line = bytes.TrimSpace(line)
	for len(line) >= 2 && (line[0] == '$' || line[0] == '#' || line[0] == '>') && (line[1] == ' ' || line[1] == '\t') {
		line = bytes.TrimSpace(line[2:])
	}
	return line
}

var trailerText = []byte(" flow entries have been shown.")

// trailerCount reads conntrack's closing line, "conntrack v1.4.7
// (conntrack-tools): 8 flow entries have been shown.".
func trailerCount(line []byte) (int64, bool) {
	end := bytes.Index(line, trailerText)
	if end < 0 || !bytes.Contains(line[:end], []byte("conntrack")) {
		return 0, false
	}
	start := end
	for start > 0 && line[start-1] >= '0' && line[start-1] <= '9' {
		start--
	}
	n, ok := atou(line[start:end], 1<<62)
	return int64(n), ok
}

// isCommandLine is a line a paste carries that is no entry and no fault:
// the command that printed the table (after a prompt such as
// "root@node:~#"), a bare prompt, or conntrack's other messages.
func isCommandLine(line []byte) bool {
	if last := line[len(line)-1]; bytes.IndexByte(line, ' ') < 0 && (last == '#' || last == '$' || last == '%' || last == '>') {
		return true // a bare prompt: "root@node-a:~#"
	}
	return bytes.Contains(line, []byte("conntrack")) && !bytes.Contains(line, []byte("src="))
}

// formSet notes which forms the entry lines were in.
type formSet struct{ prefixedZone, prefixedNoZone, bare bool }

func (f *formSet) add(prefixed, zone bool) {
	switch {
	case !prefixed:
		f.bare = true
	case zone:
		f.prefixedZone = true
	default:
		f.prefixedNoZone = true
	}
}

func (f formSet) format() Format {
	switch {
	case f.bare && (f.prefixedZone || f.prefixedNoZone):
		return FormatMixed
	case f.bare:
		return FormatDefault
	case f.prefixedNoZone:
		// conntrack prints zone= only when not 0; /proc always does
		return FormatExtended
	case f.prefixedZone:
		return FormatProc
	}
	return ""
}

// grow doubles the entries' room (append grows a big slice by a quarter:
// five times the table's bytes allocated for a million entries, and as many
// page faults), up to the cap.
func grow(es []Entry, limit int) []Entry {
	n := min(max(2*cap(es), 256), limit)
	out := make([]Entry, len(es), n)
	copy(out, es)
	return out
}
