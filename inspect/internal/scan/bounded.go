package scan

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// boundedBuffer is Bounded's buffer; it also bounds a line.
const boundedBuffer = 64 << 10

// Bounded cuts an input into lines in place in its buffer: a line over
// MaxLine is skipped without being held, and reading stops after MaxBytes
// (0: no cap). It never fails on content; Err is only the reader's.
type Bounded struct {
	br       *bufio.Reader
	maxLine  int
	maxBytes int64
	long     bool
	// Read is the bytes consumed; No the number of the last line returned.
	Read, No int64
	// LongLines counts the lines skipped for their length; Unread is set
	// when the byte cap stopped reading before the end.
	LongLines int64
	Unread    bool
	Err       error
}

// NewBounded reads r; maxLine is capped at the buffer's size.
func NewBounded(r io.Reader, maxLine int, maxBytes int64) *Bounded {
	return &Bounded{br: bufio.NewReaderSize(r, boundedBuffer), maxLine: min(maxLine, boundedBuffer), maxBytes: maxBytes}
}

// Next returns the next line without its line end, valid until the next
// call; ok is false at the end of the input.
func (b *Bounded) Next() (line []byte, ok bool) {
	for {
		if b.maxBytes > 0 && b.Read >= b.maxBytes {
			if _, err := b.br.Peek(1); err == nil {
				b.Unread = true
			}
			return nil, false
		}
		s, err := b.br.ReadSlice('\n')
		b.Read += int64(len(s))
		if errors.Is(err, bufio.ErrBufferFull) {
			if !b.long {
				b.No++
				b.LongLines++
			}
			b.long = true
			continue
		}
		wasLong := b.long
		b.long = false
		if len(s) == 0 {
			return b.stop(err)
		}
		if b.maxBytes > 0 && b.Read > b.maxBytes {
			// the cap cuts this line: it is left out with the rest
			b.Read -= int64(len(s))
			b.Unread = true
			return nil, false
		}
		if !wasLong {
			b.No++
			if len(s) > b.maxLine {
				b.LongLines++
				wasLong = true
			}
		}
		if wasLong {
			if err != nil {
				return b.stop(err)
			}
			continue
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return b.stop(err)
		}
		return bytes.TrimRight(s, "\r\n"), true
	}
}

func (b *Bounded) stop(err error) ([]byte, bool) {
	if b.Err == nil && err != nil && !errors.Is(err, io.EOF) {
		b.Err = err
	}
	return nil, false
}

// TrimPasted trims spaces and the "$ ", "# " or "> " prompts a paste puts
// before a line.
func TrimPasted(line string) string {
	line = trimSpace(line)
	for len(line) >= 2 && (line[0] == '$' || line[0] == '#' || line[0] == '>') && (line[1] == ' ' || line[1] == '\t') {
		line = trimSpace(line[2:])
	}
	return line
}

func trimSpace(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t' || s[0] == '\r') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t' || s[len(s)-1] == '\r') {
		s = s[:len(s)-1]
	}
	return s
}

// IsPrompt is a bare shell prompt, "[root@node-a ~]#" or "node$".
func IsPrompt(line string) bool {
	if line == "" {
		return false
	}
	last := line[len(line)-1]
	if last != '#' && last != '$' && last != '%' && last != '>' {
		return false
	}
	return !bytes.ContainsAny([]byte(line), " \t") || line[0] == '[' && len(line) > 2 && line[len(line)-2] == ']'
}

// IsCommand says whether a pasted line runs command (after any prompt,
// sudo or path): "[root@node-a ~]# ipset list", "$ sudo /sbin/ipset save".
func IsCommand(line, command string) bool {
	for _, f := range bytes.Fields([]byte(line)) {
		if string(f) == command || bytes.HasSuffix(f, []byte("/"+command)) {
			return true
		}
	}
	return false
}
