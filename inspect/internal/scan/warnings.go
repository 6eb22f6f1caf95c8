package scan

import (
	"fmt"
	"strconv"
)

// Warnings collects the lines a reader did not understand: the first Max
// quoted, the rest counted.
type Warnings struct {
	Max  int
	list []string
	more int64
}

// Line notes line number no, not understood for why.
func (w *Warnings) Line(no int64, line []byte, why string) {
	if len(w.list) >= w.Max {
		w.more++
		return
	}
	w.list = append(w.list, fmt.Sprintf("line %d not understood (%s): %s", no, why, Quote(line)))
}

// Add adds a warning of the reader's own, past the cap too.
func (w *Warnings) Add(s string) { w.list = append(w.list, s) }

// Done is the warnings, and how many more lines were not understood.
func (w *Warnings) Done() []string {
	if w.more > 0 {
		w.list = append(w.list, fmt.Sprintf("%d more lines not understood", w.more))
	}
	return w.list
}

// Quote shows at most 80 bytes of a line, escaped: the input may be binary.
func Quote(b []byte) string {
	const max = 80
	if len(b) > max {
		return strconv.QuoteToASCII(string(b[:max])) + "…"
	}
	return strconv.QuoteToASCII(string(b))
}
