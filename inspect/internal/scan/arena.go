package scan

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"unsafe"
)

// Arena hands out strings carved from large byte chunks. A 300k-rule
// dump would otherwise cost one allocation per rule, or keep the whole
// input alive; the arena keeps only the bytes the model refers to.
//
// Safety: bytes are only ever appended within a chunk's capacity, never
// modified after being handed out, so the strings stay immutable.
type Arena struct {
	chunk []byte
}

const arenaChunk = 1 << 20

func (a *Arena) Add(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if len(a.chunk)+len(b) > cap(a.chunk) {
		a.chunk = make([]byte, 0, max(arenaChunk, len(b)))
	}
	start := len(a.chunk)
	a.chunk = append(a.chunk, b...)
	return unsafe.String(&a.chunk[start], len(b))
}

// Lines reads lines into a reused buffer: the caller must copy what it
// keeps (into an Arena).
type Lines struct {
	br   *bufio.Reader
	long []byte
	line int
	err  error
}

func NewLines(r io.Reader) *Lines {
	return &Lines{br: bufio.NewReaderSize(r, 64<<10)}
}

// Next returns the next line without "\n" or "\r\n"; the slice is valid
// until the following call. ok is false at the end or on error (bl.err).
func (bl *Lines) Next() (line []byte, ok bool) {
	if bl.err != nil {
		return nil, false
	}
	bl.long = bl.long[:0]
	for {
		frag, err := bl.br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			if len(bl.long)+len(frag) > MaxLineLength {
				bl.err = fmt.Errorf("line %d: longer than %d bytes", bl.line+1, MaxLineLength)
				return nil, false
			}
			bl.long = append(bl.long, frag...)
			continue
		}
		if err != nil && err != io.EOF {
			bl.err = err
			return nil, false
		}
		if len(bl.long) > 0 {
			bl.long = append(bl.long, frag...)
			frag = bl.long
		}
		if err == io.EOF && len(frag) == 0 {
			return nil, false
		}
		bl.line++
		if bytes.IndexByte(frag, 0) >= 0 {
			bl.err = fmt.Errorf("line %d: %w", bl.line, ErrBinary)
			return nil, false
		}
		frag = bytes.TrimSuffix(frag, []byte{'\n'})
		frag = bytes.TrimSuffix(frag, []byte{'\r'})
		if err == io.EOF {
			bl.err = io.EOF
		}
		return frag, true
	}
}

// Failure returns the read error, nil at a clean end of input.
func (bl *Lines) Failure() error {
	if bl.err == io.EOF {
		return nil
	}
	return bl.err
}

// Line is the number of the line Next returned last (1-based).
func (bl *Lines) Line() int { return bl.line }
