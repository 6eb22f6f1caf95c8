package inspect

import (
	"bytes"
	"io"
	"io/fs"
)

// SizeHinter is a reader that knows how many bytes it has left, or about
// (the plugin's capped and sniffing readers pass their file's size on).
type SizeHinter interface {
	SizeHint() int64
}

// InputSize is what r says it holds in bytes: its SizeHint, the size of a
// regular file, or a bytes or strings reader's Len; 0 when it does not
// say. Readers that must hold their input whole allocate it once with it.
func InputSize(r io.Reader) int64 {
	switch v := r.(type) {
	case SizeHinter:
		return v.SizeHint()
	case interface{ Stat() (fs.FileInfo, error) }:
		if st, err := v.Stat(); err == nil && st.Mode().IsRegular() {
			return st.Size()
		}
	case interface{ Len() int }:
		return int64(v.Len())
	}
	return 0
}

// ReadAll reads r to its end: into one allocation when r says its size,
// else in chunks that grow, then copied into one slice of the exact size
// (one copy of the input, where io.ReadAll's growing slice copies it about
// twice). The one allocation of a large input is advised huge pages, as a
// block is (allocBlock): the 30 MB of objects read whole cost map 7,300
// page faults in small pages.
func ReadAll(r io.Reader) ([]byte, error) {
	if size := InputSize(r); size > 0 && size < 1<<40 {
		buf := bytes.NewBuffer(allocBlock[byte](int(size)+bytes.MinRead, 1)[:0])
		_, err := buf.ReadFrom(r)
		return buf.Bytes(), err
	}
	var chunks [][]byte
	size := 256 << 10
	total := 0
	var err error
	for err == nil {
		c := make([]byte, size)
		n := 0
		for n < len(c) && err == nil {
			var m int
			m, err = r.Read(c[n:])
			n += m
		}
		chunks = append(chunks, c[:n])
		total += n
		size = min(2*size, 16<<20)
	}
	if err == io.EOF {
		err = nil
	}
	if len(chunks) == 1 {
		return chunks[0], err
	}
	out := make([]byte, 0, total)
	for _, c := range chunks {
		out = append(out, c...)
	}
	return out, err
}
