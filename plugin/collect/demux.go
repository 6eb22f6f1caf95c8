package collect

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strconv"
)

// demux splits the output of a Script into its commands' outputs as it
// streams: nothing is held in memory beyond one buffered line. It trusts
// nothing it reads: a frame must open and close in order, for a command
// the script has, and any other shape is an error (never a panic, never a
// write to a command that does not exist).
type demux struct {
	begin, end []byte
	count      int                            // commands in the script
	open       func(i int) (io.Writer, error) // where command i's output goes
	done       func(i int, rc int)            // command i ended with status rc
}

// run reads r to the end. A command whose end marker never comes (the exec
// was cut off) is reported as done with rc -1.
func (d *demux) run(r io.Reader) error {
	br := bufio.NewReaderSize(r, 64<<10)
	cur, curIdx, next := io.Writer(nil), -1, 0
	var pendingNL bool // a newline held back: the one before the end marker is the script's
	partial := false   // the previous read ended mid-line
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			switch {
			case !partial && bytes.HasPrefix(line, d.begin):
				i, ok := markerIndex(line[len(d.begin):])
				if !ok || curIdx >= 0 || i != next || i >= d.count {
					return fmt.Errorf("garbled output frame %.80q (command %d of %d expected)", line, next, d.count)
				}
				w, oerr := d.open(i)
				if oerr != nil {
					return oerr
				}
				cur, curIdx, next, pendingNL = w, i, i+1, false
			case !partial && bytes.HasPrefix(line, d.end):
				i, rc, ok := endMarker(line[len(d.end):])
				if !ok || curIdx < 0 || i != curIdx {
					return fmt.Errorf("garbled output frame %.80q", line)
				}
				d.done(curIdx, rc)
				cur, curIdx, pendingNL = nil, -1, false
			case cur == nil:
				// The script prints nothing outside its frames.
				return fmt.Errorf("output outside a command's frame: %.80q", line)
			default:
				if pendingNL {
					if _, werr := cur.Write([]byte{'\n'}); werr != nil {
						return werr
					}
					pendingNL = false
				}
				out := line
				if line[len(line)-1] == '\n' && err == nil {
					out, pendingNL = line[:len(line)-1], true
				}
				if _, werr := cur.Write(out); werr != nil {
					return werr
				}
			}
			partial = err == bufio.ErrBufferFull
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err == io.EOF {
			if curIdx >= 0 {
				d.done(curIdx, -1)
			}
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// markerIndex reads " N\n".
func markerIndex(b []byte) (int, bool) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || len(b) > 6 {
		return 0, false
	}
	n, err := strconv.Atoi(string(b))
	return n, err == nil && n >= 0
}

// endMarker reads " N rc=RC\n".
func endMarker(b []byte) (i, rc int, ok bool) {
	f := bytes.Fields(b)
	if len(f) != 2 || !bytes.HasPrefix(f[1], []byte("rc=")) {
		return 0, 0, false
	}
	i, err1 := strconv.Atoi(string(f[0]))
	rc, err2 := strconv.Atoi(string(f[1][3:]))
	return i, rc, err1 == nil && err2 == nil
}

// newDemux reads the output of a Script of count commands run with nonce.
func newDemux(nonce string, count int) *demux {
	return &demux{
		begin: []byte(markerPrefix + " " + nonce + " begin"),
		end:   []byte(markerPrefix + " " + nonce + " end"),
		count: count,
	}
}
