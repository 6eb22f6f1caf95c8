package ipvs

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/proxyrules/kubectl-proxyrules/inspect/internal/scan"
)

// Read reads an IPVS table in any of the forms doc.go lists, detected from
// the text. What the caps left out is in Table.Truncated; lines not
// understood are in Table.Warnings, and the rest is kept. The error is only
// the reader's.
func Read(r io.Reader, lim Limits) (*Table, error) {
	lim = lim.normalized()
	t := &Table{ConnTableSize: -1}
	lr := newLineReader(r, lim, &t.Truncated)
	p := parser{t: t, lim: lim, w: scan.Warnings{Max: lim.MaxWarnings}, cur: -1, saved: map[string]int{}}
	for {
		line, ok := lr.next()
		if !ok {
			break
		}
		p.lastBad = false
		p.line(lr.no, line)
	}
	if lr.unterminated && p.lastBad {
		// a line cut short: what followed it in the table is not here
		t.Truncated.Incomplete, t.Truncated.CutLine = true, true
	}
	t.Format = p.forms.format()
	t.Warnings = append(p.w.Done(), p.notes()...)
	return t, lr.err
}

// header is what the header lines (or a pasted command) said of the
// listing below them.
type header uint8

const (
	hdrNone  header = iota
	hdrProc         // the kernel's header: single-spaced "-> RemoteAddress:Port Forward"
	hdrList         // ipvsadm -Ln
	hdrStats        // ipvsadm --stats
	hdrRate         // ipvsadm --rate
)

type parser struct {
	t     *Table
	lim   Limits
	w     scan.Warnings
	hdr   header
	forms formSet
	// cur is the index of the service real servers are added to, -1 when
	// none; curLeftOut is set when that service was left out by the cap.
	cur        int
	curLeftOut bool
	curBad     bool // the last service line was not understood
	reals      int
	saved      map[string]int // save form: service key -> index
	names      int64          // lines with host or port names
	guessed    bool           // counters read without a header saying which
	f          []string       // the fields of the current line
	lastBad    bool           // the last line was not understood
}

// appendFields splits s at runs of spaces and tabs, into dst.
func appendFields(dst []string, s string) []string {
	for i := 0; i < len(s); {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
		j := i
		for j < len(s) && s[j] != ' ' && s[j] != '\t' {
			j++
		}
		if j > i {
			dst = append(dst, s[i:j])
		}
		i = j
	}
	return dst
}

func (p *parser) line(no int64, raw []byte) {
	line := trimPasted(raw)
	if len(line) == 0 || p.headerLine(line) {
		return
	}
	// one string per line; the fields are its substrings, in a reused slice
	p.f = appendFields(p.f[:0], string(line))
	f := p.f
	var why string
	switch {
	case f[0] == "->":
		why = p.realServerLine(f)
	case f[0] == "TCP" || f[0] == "UDP" || f[0] == "SCTP" || f[0] == "FWM":
		if why = p.serviceLine(f); why != "" {
			// the real servers below belong to this line, not the one before
			p.cur, p.curLeftOut, p.curBad = -1, false, true
		}
	case f[0] == "-A" || f[0] == "-a":
		why = p.saveLine(f)
	case isCommandLine(line):
		p.commandHint(string(line))
		return
	default:
		why = "not an IPVS line"
	}
	if why == errName {
		p.names++
	}

	if why != "" {
		p.lastBad = true
		p.w.Line(no, line, why)
	}
}

// headerLine reads the header lines of both the kernel and ipvsadm.
func (p *parser) headerLine(line []byte) bool {
	if line[0] != 'I' && line[0] != 'P' && !bytes.HasPrefix(line, []byte("-> R")) {
		return false
	}
	s := string(line)
	switch {
	case strings.HasPrefix(s, "IP Virtual Server version "):
		rest := strings.TrimPrefix(s, "IP Virtual Server version ")
		ver, size, _ := strings.Cut(rest, " ")
		p.t.Version = ver
		if n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimPrefix(size, "(size="), ")"), 10, 64); err == nil {
			p.t.ConnTableSize = n
		}
	case strings.HasPrefix(s, "Prot LocalAddress:Port"):
		switch {
		case strings.Contains(s, " Conns "):
			p.hdr = hdrStats
		case strings.Contains(s, " CPS "):
			p.hdr = hdrRate
		default:
			p.hdr = hdrList // until the next line says the kernel's
		}
	case strings.HasPrefix(s, "-> RemoteAddress:Port"):
		if strings.HasPrefix(s, "-> RemoteAddress:Port Forward") {
			p.hdr = hdrProc
		}
	default:
		return false
	}
	return true
}

// commandHint notes the form a pasted command asks for: its header would
// say the same, but a paste may have lost it.
func (p *parser) commandHint(cmd string) {
	switch {
	case strings.Contains(cmd, "--stats"):
		p.hdr = hdrStats
	case strings.Contains(cmd, "--rate"):
		p.hdr = hdrRate
	case strings.Contains(cmd, "/proc/net/ip_vs"):
		p.hdr = hdrProc
	case strings.Contains(cmd, "ipvsadm"):
		p.hdr = hdrNone
	}
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

// isCommandLine is a line a paste carries that is no output and no fault:
// the command that printed the table (after any prompt, "[root@vm01 ~]#
// ipvsadm -L -n"), or a bare prompt.
func isCommandLine(line []byte) bool {
	if last := line[len(line)-1]; bytes.IndexByte(line, ' ') < 0 && (last == '#' || last == '$' || last == '%' || last == '>') {
		return true
	}
	return bytes.Contains(line, []byte("ipvsadm")) || bytes.Contains(line, []byte("/proc/net/ip_vs"))
}

// notes says what the caps left out, each starting INCOMPLETE, and what
// the reader had to assume.
func (p *parser) notes() []string {
	var out []string
	tr := p.t.Truncated
	if p.names > 0 {
		out = append(out, fmt.Sprintf("%d lines show host or port names (ipvsadm without -n): list with -n to read them", p.names))
	}
	if p.guessed {
		out = append(out, "counters without the header that names them: read as --stats")
	}
	if tr.ServicesLeftOut > 0 {
		out = append(out, fmt.Sprintf("INCOMPLETE: %d services kept (the cap), %d more left out", p.lim.MaxServices, tr.ServicesLeftOut))
	}
	if tr.RealServersLeftOut > 0 {
		out = append(out, fmt.Sprintf("INCOMPLETE: %d real servers left out (the cap of %d, or their service was)", tr.RealServersLeftOut, p.lim.MaxRealServers))
	}
	if tr.LongLines > 0 {
		out = append(out, fmt.Sprintf("INCOMPLETE: %d lines over %d bytes left out", tr.LongLines, p.lim.MaxLineBytes))
	}
	if tr.Unread {
		out = append(out, fmt.Sprintf("INCOMPLETE: reading stopped after %d bytes (the cap); the rest was not read", tr.BytesRead))
	}
	if tr.CutLine {
		out = append(out, "INCOMPLETE: the input ends in the middle of a line (a cut paste?): what followed it in the table is not here")
	}
	return out
}

// formSet notes which forms the lines were in.
type formSet struct{ proc, list, stats, rate, save bool }

func (f formSet) format() Format {
	var got []Format
	for _, c := range []struct {
		on bool
		f  Format
	}{{f.proc, FormatProc}, {f.list, FormatList}, {f.stats, FormatStats}, {f.rate, FormatRate}, {f.save, FormatSave}} {
		if c.on {
			got = append(got, c.f)
		}
	}
	switch len(got) {
	case 0:
		return ""
	case 1:
		return got[0]
	}
	return FormatMixed
}
