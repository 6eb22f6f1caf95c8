package ipvs

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// lineReader cuts the input into lines in place in its buffer, skipping a
// line over the cap without holding it and stopping at the byte cap.
type lineReader struct {
	br    *bufio.Reader
	lim   Limits
	trunc *Truncation
	read  int64
	no    int64 // number of the last line returned
	err   error // the read error that ended the input, nil at EOF
	long  bool  // inside a line longer than the buffer
	// unterminated: the last line returned had no line end (the input
	// stops in it: a cut paste, or a file without a final newline)
	unterminated bool
}

func newLineReader(r io.Reader, lim Limits, trunc *Truncation) *lineReader {
	return &lineReader{br: bufio.NewReaderSize(r, readBufferSize), lim: lim, trunc: trunc}
}

// next returns the next line without its line end, valid until the next
// call; ok is false at the end of the input.
func (lr *lineReader) next() (line []byte, ok bool) {
	for {
		if lr.lim.MaxBytes > 0 && lr.read >= lr.lim.MaxBytes {
			if _, err := lr.br.Peek(1); err == nil {
				lr.trunc.Incomplete, lr.trunc.Unread = true, true
			}
			return lr.stop(nil)
		}
		b, err := lr.br.ReadSlice('\n')
		lr.read += int64(len(b))
		if errors.Is(err, bufio.ErrBufferFull) {
			lr.skipped(!lr.long)
			lr.long = true
			continue
		}
		wasLong := lr.long
		lr.long = false
		if len(b) == 0 {
			return lr.stop(err)
		}
		if lr.lim.MaxBytes > 0 && lr.read > lr.lim.MaxBytes {
			// the cap cuts this line: it is left out with the rest
			lr.trunc.Incomplete, lr.trunc.Unread = true, true
			lr.read -= int64(len(b))
			return lr.stop(nil)
		}
		if !wasLong {
			lr.no++
		}
		if wasLong || len(b) > lr.lim.MaxLineBytes {
			if !wasLong {
				lr.skipped(false)
				lr.trunc.LongLines++
			}
			if err != nil {
				return lr.stop(err)
			}
			continue
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return lr.stop(err)
		}
		lr.unterminated = b[len(b)-1] != '\n'
		return bytes.TrimRight(b, "\r\n"), true
	}
}

func (lr *lineReader) skipped(first bool) {
	lr.trunc.Incomplete = true
	if first {
		lr.no++
		lr.trunc.LongLines++
	}
}

func (lr *lineReader) stop(err error) ([]byte, bool) {
	if lr.err == nil && err != nil && !errors.Is(err, io.EOF) {
		lr.err = err
	}
	lr.trunc.BytesRead = lr.read
	return nil, false
}
