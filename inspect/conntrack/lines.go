package conntrack

import (
	"bufio"
	"errors"
	"io"
)

// lineReader cuts an input into lines in place in its buffer (no copy of
// the input), skipping lines over the cap without holding them and
// stopping at the byte cap. Shared by the three readers.
type lineReader struct {
	br    *bufio.Reader
	lim   Limits
	trunc *Truncation
	read  int64 // bytes consumed
	no    int64 // line number of the last line returned
	err   error // the read error that ended the input, nil at EOF
}

func newLineReader(r io.Reader, lim Limits, trunc *Truncation) *lineReader {
	return &lineReader{br: bufio.NewReaderSize(r, readBufferSize), lim: lim, trunc: trunc}
}

// next returns the next line without its line end (LF or CRLF), valid
// until the following call; ok is false at the end of the input.
func (lr *lineReader) next() (line []byte, ok bool) {
	for {
		if lr.lim.MaxBytes > 0 && lr.read >= lr.lim.MaxBytes {
			lr.stopAtByteCap()
			return nil, false
		}
		b, err := lr.br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			lr.skipLong(int64(len(b)))
			continue
		}
		if len(b) == 0 {
			lr.end(err)
			return nil, false
		}
		lr.read += int64(len(b))
		lr.no++
		if lr.lim.MaxBytes > 0 && lr.read > lr.lim.MaxBytes {
			// the cap cuts this line: it is left out with the rest
			lr.trunc.Incomplete = true
			lr.trunc.Unread = true
			lr.trunc.BytesRead = lr.read - int64(len(b))
			lr.read = lr.lim.MaxBytes
			return nil, false
		}
		if len(b) > lr.lim.MaxLineBytes {
			lr.trunc.Incomplete = true
			lr.trunc.LongLines++
			lr.trunc.LongLineBytes += int64(len(b))
			if err != nil {
				lr.end(err)
				return nil, false
			}
			continue
		}
		if err != nil && !errors.Is(err, io.EOF) {
			lr.end(err)
			return nil, false
		}
		return trimLineEnd(b), true
	}
}

// skipLong discards the rest of a line longer than the buffer.
func (lr *lineReader) skipLong(n int64) {
	lr.no++
	lr.trunc.Incomplete = true
	lr.trunc.LongLines++
	for {
		lr.read += n
		lr.trunc.LongLineBytes += n
		if lr.lim.MaxBytes > 0 && lr.read >= lr.lim.MaxBytes {
			return
		}
		b, err := lr.br.ReadSlice('\n')
		n = int64(len(b))
		if !errors.Is(err, bufio.ErrBufferFull) {
			lr.read += n
			lr.trunc.LongLineBytes += n
			if err != nil && !errors.Is(err, io.EOF) {
				lr.err = err
			}
			return
		}
	}
}

func (lr *lineReader) stopAtByteCap() {
	if lr.trunc.Unread {
		return
	}
	// Only input left over makes the read incomplete.
	if _, err := lr.br.Peek(1); err == nil {
		lr.trunc.Incomplete = true
		lr.trunc.Unread = true
	}
	lr.trunc.BytesRead = lr.read
}

func (lr *lineReader) end(err error) {
	if lr.err == nil && err != nil && !errors.Is(err, io.EOF) {
		lr.err = err
	}
	lr.trunc.BytesRead = lr.read
}

func trimLineEnd(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

// fields splits at runs of spaces and tabs, into dst (reused).
func fields(dst [][]byte, line []byte) [][]byte {
	dst = dst[:0]
	for i := 0; i < len(line); {
		for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
			i++
		}
		j := i
		for j < len(line) && line[j] != ' ' && line[j] != '\t' {
			j++
		}
		if j > i {
			dst = append(dst, line[i:j])
		}
		i = j
	}
	return dst
}
