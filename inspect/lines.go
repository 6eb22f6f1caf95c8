package inspect

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
)

// MaxLineLength bounds a single input line. kube-proxy's longest lines are
// a few hundred bytes; nft can print long element lists on one line.
const MaxLineLength = 16 << 20

const blockSize = 1 << 20

// lineReader yields the lines of r as strings that share one backing string
// per block of input, so that the values the parsers keep (rule text,
// comments, addresses) are substrings and cost no copies.
type lineReader struct {
	r     io.Reader
	buf   []byte
	block string // the current block, complete lines only
	pos   int
	line  int
	err   error
	eof   bool
}

func newLineReader(r io.Reader) *lineReader {
	return &lineReader{r: r}
}

// errBinary is returned for input that contains NUL bytes.
var errBinary = errors.New("input looks binary (NUL byte)")

// next returns the next line without its line ending ("\n" or "\r\n").
// ok is false at the end of input or on error (see lr.err).
func (lr *lineReader) next() (line string, ok bool) {
	for {
		if lr.pos < len(lr.block) {
			rest := lr.block[lr.pos:]
			i := strings.IndexByte(rest, '\n')
			if i < 0 {
				// The last line of the input, without a newline.
				line = rest
				lr.pos = len(lr.block)
			} else {
				line = rest[:i]
				lr.pos += i + 1
			}
			lr.line++
			if n := len(line); n > 0 && line[n-1] == '\r' {
				line = line[:n-1]
			}
			return line, true
		}
		if lr.eof || lr.err != nil {
			return "", false
		}
		lr.fill()
	}
}

// fill reads the next block: everything up to the last newline read.
func (lr *lineReader) fill() {
	for {
		if len(lr.buf) > MaxLineLength {
			lr.err = fmt.Errorf("line %d: longer than %d bytes", lr.line+1, MaxLineLength)
			return
		}
		start := len(lr.buf)
		if cap(lr.buf)-start < blockSize/2 {
			nb := make([]byte, start, start+blockSize)
			copy(nb, lr.buf)
			lr.buf = nb
		}
		n, err := lr.r.Read(lr.buf[start:cap(lr.buf)])
		lr.buf = lr.buf[:start+n]
		if bytes.IndexByte(lr.buf[start:], 0) >= 0 {
			lr.err = fmt.Errorf("line %d: %w", lr.line+1+bytes.Count(lr.buf[:start], []byte{'\n'}), errBinary)
			return
		}
		if err == io.EOF {
			lr.eof = true
			lr.block, lr.pos = string(lr.buf), 0
			lr.buf = lr.buf[:0]
			return
		}
		if err != nil {
			lr.err = err
			return
		}
		if i := bytes.LastIndexByte(lr.buf, '\n'); i >= 0 && len(lr.buf) >= blockSize/2 {
			lr.block, lr.pos = string(lr.buf[:i+1]), 0
			// string() copied the block, so the buffer can be reused.
			rest := copy(lr.buf, lr.buf[i+1:])
			lr.buf = lr.buf[:rest]
			return
		}
	}
}
