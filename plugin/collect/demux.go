package collect

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strconv"
)

// demux splits the output of a Script into its commands' outputs as it
// streams: nothing is held in memory beyond one buffered line and 256 KiB
// of the current command's output (demuxFlushSize). It trusts
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
	// A command's output is written on in big pieces: a write per line is
	// a syscall per line into its file (280k of them for a big nat table,
	// which held up the exec stream by seconds). Flushed before its end is
	// reported, and before run returns.
	out := bufio.NewWriterSize(io.Discard, demuxFlushSize)
	cur, curIdx, next := (*bufio.Writer)(nil), -1, 0
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
				out.Reset(w)
				cur, curIdx, next, pendingNL = out, i, i+1, false
			case !partial && bytes.HasPrefix(line, d.end):
				i, rc, ok := endMarker(line[len(d.end):])
				if !ok || curIdx < 0 || i != curIdx {
					return fmt.Errorf("garbled output frame %.80q", line)
				}
				if ferr := cur.Flush(); ferr != nil {
					return ferr
				}
				d.done(curIdx, rc)
				cur, curIdx, pendingNL = nil, -1, false
			case cur == nil:
				// The script prints nothing outside its frames.
				return fmt.Errorf("output outside a command's frame: %.80q", line)
			default:
				if pendingNL {
					if werr := cur.WriteByte('\n'); werr != nil {
						return werr
					}
					pendingNL = false
				}
				data := line
				if line[len(line)-1] == '\n' && err == nil {
					data, pendingNL = line[:len(line)-1], true
				}
				if _, werr := cur.Write(data); werr != nil {
					return werr
				}
			}
			partial = err == bufio.ErrBufferFull
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if cur != nil && err != nil {
			// What came of a command cut off is kept, as it came.
			if ferr := cur.Flush(); ferr != nil {
				return ferr
			}
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

// demuxFlushSize is how much of a command's output is held before it is
// written on.
const demuxFlushSize = 256 << 10

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
