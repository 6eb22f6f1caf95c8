package metrics

import (
	"bytes"
	"fmt"
	"io"
)

// Prometheus' parser keeps every sample as a tree of small objects, some
// fifty times the bytes of a line of a few labels: a size cap alone lets a
// file of short lines cost gigabytes. kube-proxy's /metrics holds a few
// hundred samples (a few thousand on a big node), some 200 families, at
// most three labels a sample; these caps are far above that and bound what
// any input under the size cap costs to parse.
const (
	MaxSamples         = 50_000
	MaxLabelsPerSample = 16
	MaxLabelPairs      = 200_000 // of all the samples together
	MaxMetadataLines   = 20_000  // `# HELP`, `# TYPE` and other comments
)

// LimitError is an input over one of the caps above, found while it is
// read: parsing stops there.
type LimitError struct {
	Source string
	What   string // "samples", "labels on one sample", ...
	Limit  int
	Line   int
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("%s: more than %d %s (line %d): kube-proxy's /metrics holds a few thousand samples of at most a few labels; refusing to parse it",
		e.Source, e.Limit, e.What, e.Line)
}

// countingReader counts what Prometheus' parser would keep as bytes go
// through it to the parser, and fails the read that crosses a cap, so the
// parser stops within a buffer of the line at fault. It follows the text
// format's lexical structure only: a line that starts with '#' is a
// comment, '=' outside double quotes inside braces ends a label name.
type countingReader struct {
	r      io.Reader
	source string

	// where the previous read left off
	midLine, comment, inQuote, escaped, inBraces bool
	lineLabels                                   int

	line, samples, labels, meta int
	err                         *LimitError
	// readErr is the input's own error (a cap on its size): the parser
	// would report it as "not Prometheus metrics".
	readErr error
}

func (c *countingReader) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.r.Read(p)
	if c.scan(p[:n]) {
		return n, c.err
	}
	if err != nil && err != io.EOF {
		c.readErr = err
	}
	return n, err
}

// scan counts b; it reports whether a cap was crossed.
func (c *countingReader) scan(b []byte) bool {
	for i := 0; i < len(b); i++ {
		ch := b[i]
		if !c.midLine {
			switch ch {
			case ' ', '\t':
				continue
			case '\n':
				c.line++
				continue
			case '#':
				c.comment = true
				c.meta++
			default:
				c.samples++
			}
			c.midLine = true
			if c.over() {
				return true
			}
		}
		if c.comment {
			j := bytes.IndexByte(b[i:], '\n')
			if j < 0 {
				return false
			}
			i += j
			ch = '\n'
		}
		if c.lexeme(ch) && c.over() {
			return true
		}
	}
	return false
}

// lexeme follows one byte of a line; it reports whether a label was counted.
func (c *countingReader) lexeme(ch byte) bool {
	switch {
	case ch == '\n':
		c.line++
		c.midLine, c.comment, c.inQuote, c.escaped, c.inBraces, c.lineLabels = false, false, false, false, false, 0
	case c.escaped:
		c.escaped = false
	case c.inQuote:
		switch ch {
		case '\\':
			c.escaped = true
		case '"':
			c.inQuote = false
		}
	case ch == '"':
		c.inQuote = true
	case ch == '{':
		c.inBraces = true
	case ch == '}':
		c.inBraces = false
	case ch == '=' && c.inBraces:
		c.lineLabels++
		c.labels++
		return true
	}
	return false
}

// over sets c.err when a count is past its cap.
func (c *countingReader) over() bool {
	what, limit := "", 0
	switch {
	case c.samples > MaxSamples:
		what, limit = "samples", MaxSamples
	case c.lineLabels > MaxLabelsPerSample:
		what, limit = "labels on one sample", MaxLabelsPerSample
	case c.labels > MaxLabelPairs:
		what, limit = "labels in all", MaxLabelPairs
	case c.meta > MaxMetadataLines:
		what, limit = "comment lines (# HELP, # TYPE)", MaxMetadataLines
	default:
		return false
	}
	c.err = &LimitError{Source: c.source, What: what, Limit: limit, Line: c.line + 1}
	return true
}
