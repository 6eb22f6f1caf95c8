package plugin

import (
	"errors"
	"io"
	"path/filepath"
	"sync"

	"github.com/proxyrules/kubectl-proxyrules/inspect/input"
)

// streamParse parses a live read's ruleset outputs as they arrive
// (collect.RulesTee): the rules of a big node take seconds to come, and
// their parse then runs beside the read instead of after it. A parse is
// used only when its output came whole, from a command that succeeded,
// within the cap on dumps; anything else is read from the bundle's file
// as before, which says what went wrong.
type streamParse struct {
	dir  string
	read func(io.Reader, string) (*input.Input, error)
	cap  int64

	mu   sync.Mutex
	runs map[string]*streamRun // by path in the bundle
}

// streamRun is the parse of one output.
type streamRun struct {
	q    *chunkQueue
	done chan struct{}
	in   *input.Input
	err  error
	// ended: End was called, ok: with success; spoiled: bytes were lost
	// (the parse stopped reading, or the cap was passed).
	ended, ok, spoiled bool
	n                  int64
}

var errStreamGiveUp = errors.New("stream parse given up")

func newStreamParse(dir string, table string, cap int64) *streamParse {
	return &streamParse{dir: dir, read: readOptions(table).Read, cap: cap, runs: map[string]*streamRun{}}
}

// Begin starts the parse of path, giving up one begun before (a cut
// exec runs again from the start).
func (s *streamParse) Begin(path string) io.Writer {
	r := &streamRun{q: newChunkQueue(), done: make(chan struct{})}
	s.mu.Lock()
	if old := s.runs[path]; old != nil {
		old.q.close(errStreamGiveUp)
	}
	s.runs[path] = r
	s.mu.Unlock()
	source := filepath.Join(s.dir, filepath.FromSlash(path)) // the name the bundle's file has
	go func() {
		defer close(r.done)
		r.in, r.err = s.read(r.q, source)
		// What comes after the parse returned is dropped: the read goes
		// on into the file whatever the parse did.
		r.q.stopReading()
	}()
	return &streamWriter{s: s, r: r}
}

// End closes the output of path.
func (s *streamParse) End(path string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.runs[path]; r != nil && !r.ended {
		r.ended, r.ok = true, ok
		r.q.close(io.EOF)
	}
}

// stop gives up every parse whose output did not end (the read failed or
// was cut short); those that did end finish.
func (s *streamParse) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.runs {
		if !r.ended {
			r.q.close(errStreamGiveUp)
		}
	}
}

// parsed is the parse of the bundle file name (as the input set names
// it), when it can stand for reading the file.
func (s *streamParse) parsed(name string) (*input.Input, bool) {
	if s == nil {
		return nil, false
	}
	rel, err := filepath.Rel(s.dir, name)
	if err != nil {
		return nil, false
	}
	s.mu.Lock()
	r := s.runs[filepath.ToSlash(rel)]
	s.mu.Unlock()
	if r == nil {
		return nil, false
	}
	<-r.done
	s.mu.Lock()
	defer s.mu.Unlock()
	if !r.ended || !r.ok || r.spoiled || r.err != nil {
		return nil, false
	}
	return r.in, true
}

// streamWriter feeds one parse and never fails: the bytes also go to the
// bundle's file, and a parse that lost some is not used.
type streamWriter struct {
	s *streamParse
	r *streamRun
}

func (w *streamWriter) Write(p []byte) (int, error) {
	w.s.mu.Lock()
	spoiled := w.r.spoiled
	w.r.n += int64(len(p))
	if w.r.n > w.s.cap {
		w.r.spoiled = true
	}
	w.s.mu.Unlock()
	if spoiled {
		return len(p), nil
	}
	if !w.r.q.push(p) {
		w.s.mu.Lock()
		w.r.spoiled = true
		w.s.mu.Unlock()
	}
	return len(p), nil
}

// chunkQueue hands the stream's bytes to the parse without ever making
// the stream wait: a parse that blocked its writer (a pipe) held up the
// exec's stream, and so the node's own read, by seconds on a big node.
// Memory: what the parse has not taken yet, at most the output.
type chunkQueue struct {
	mu      sync.Mutex
	ready   *sync.Cond
	chunks  [][]byte
	head    []byte // the chunk being read
	err     error  // io.EOF when closed whole
	stopped bool   // the parse returned: pushes are dropped
}

func newChunkQueue() *chunkQueue {
	q := &chunkQueue{}
	q.ready = sync.NewCond(&q.mu)
	return q
}

// push queues a copy of p; false when the parse no longer reads.
func (q *chunkQueue) push(p []byte) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.stopped || q.err != nil {
		return false
	}
	q.chunks = append(q.chunks, append([]byte(nil), p...))
	q.ready.Signal()
	return true
}

// close ends the stream: err is io.EOF for a whole output.
func (q *chunkQueue) close(err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.err == nil {
		q.err = err
	}
	q.ready.Broadcast()
}

// stopReading drops what is queued and what comes.
func (q *chunkQueue) stopReading() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.stopped, q.chunks, q.head = true, nil, nil
}

func (q *chunkQueue) Read(p []byte) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.head) == 0 {
		if len(q.chunks) > 0 {
			q.head, q.chunks[0] = q.chunks[0], nil
			q.chunks = q.chunks[1:]
			continue
		}
		if q.err != nil {
			return 0, q.err
		}
		q.ready.Wait()
	}
	n := copy(p, q.head)
	q.head = q.head[n:]
	return n, nil
}
