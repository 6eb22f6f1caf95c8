package inspect

import (
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
