package nft

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"unsafe"

	"github.com/proxyrules/kubectl-proxyrules/inspect"
)

// This file reads `nft -j list ruleset` (libnftables JSON schema v1): the
// stream and its framing. jsonparse.go parses one value onto a tape,
// jsonobject.go reads the objects off it, jsonrender.go renders each rule's
// expression list into the text nft itself would list, so that analyzeRule
// sees one syntax whatever the input format (see doc.go).
//
// encoding/json's Decoder is not used: the input is framed by jsonStream
// (the outer object and the "nftables" array, one element at a time) and
// each element is parsed by jsonParser in one pass into a tape: its values
// in document order, each followed by the values it contains, with strings
// that are substrings of the input. The tape is reused from object to
// object, so a parse costs no allocation once it has grown; the renderer
// reads it in place.

// ParseJSON reads `nft -j list ruleset` (or `nft -j list table …`)
// output. It streams: the "nftables" array is decoded one object at a time,
// so the input is never held in memory as a whole. Tables of an
// iptables-nft node become IPTables (see xtables.go); every other table
// becomes an NFTTable. On malformed input it returns what was read before
// the error together with the error.
func ParseJSON(r io.Reader, source string) (*inspect.Ruleset, error) {
	return parseJSON(r, source, readOptions{})
}

// parseJSON is ParseJSON, the path through the input chosen by opt.
func parseJSON(r io.Reader, source string, opt readOptions) (*inspect.Ruleset, error) {
	b := newNFTBuilder(source, inspect.FormatNFTJSON)
	err := parseNFTJSON(r, b, opt)
	return b.finish(), err
}

func parseNFTJSON(r io.Reader, b *builder, opt readOptions) error {
	st := &jsonStream{r: r}
	for len(st.buf)-st.pos < 3 && st.fill(st.pos) {
	}
	if len(st.buf)-st.pos >= 3 && string(st.buf[st.pos:st.pos+3]) == "\ufeff" {
		st.pos += 3 // a byte order mark
	}
	c, err := st.peek()
	if err != nil {
		return fmt.Errorf("nft JSON: %w", err)
	}
	if c != '{' {
		return fmt.Errorf("nft JSON: expected an object, found %q", c)
	}
	st.pos++
	seen := false
	p := &jsonParser{}
	for first := true; ; first = false {
		c, err := st.peek()
		if err != nil {
			return st.wrap(err)
		}
		if c == '}' {
			st.pos++
			break
		}
		if !first {
			if c != ',' {
				return st.wrap(errors.New("expected ',' or '}'"))
			}
			st.pos++
		}
		raw, err := st.value()
		if err != nil {
			return st.wrap(err)
		}
		kv, err := p.parse(string(raw))
		if err != nil || kv.kind != 's' {
			return st.wrap(errors.New("expected a member name"))
		}
		key := kv.str
		if c, err := st.peek(); err != nil || c != ':' {
			return st.wrap(errors.New("expected ':'"))
		}
		st.pos++
		if key != "nftables" {
			if _, err := st.value(); err != nil {
				return st.wrap(err)
			}
			b.warn("ignored top-level key %q", key)
			continue
		}
		seen = true
		if err := jsonArray(st, p, b, opt); err != nil {
			return err
		}
	}
	if c, err := st.peek(); err == nil {
		return st.wrap(fmt.Errorf("unexpected %q after the top-level object", c))
	}
	if !seen {
		return errors.New(`nft JSON: no "nftables" array`)
	}
	return nil
}

// jsonArray reads the "nftables" array: in segments on every core
// (jsonpipe.go) unless opt says one at a time, and then (or from where a
// segment did not end cleanly) one object at a time.
func jsonArray(st *jsonStream, p *jsonParser, b *builder, opt readOptions) error {
	c, err := st.peek()
	if err != nil {
		return st.wrap(err)
	}
	if c != '[' {
		return fmt.Errorf(`nft JSON: "nftables" is not an array`)
	}
	st.pos++
	w := &renderer{}
	start, commaTaken := 0, false
	if !opt.jsonOneAtATime && runtime.GOMAXPROCS(0) > 1 {
		end, err := jsonArrayParallel(st, p, b, w, opt.segmentMin())
		if err != nil {
			return err
		}
		start, commaTaken = end.count, end.commaTaken
	}
	for i := start; ; i++ {
		if i != start || !commaTaken { // else the ',' before it is read
			c, err := st.peek()
			if err != nil {
				return st.wrap(err)
			}
			if c == ']' {
				st.pos++
				return nil
			}
			if i > 0 {
				if c != ',' {
					return st.wrap(errors.New("expected ',' or ']'"))
				}
				st.pos++
			}
		}
		if v, ok := st.object(p); ok {
			b.jsonObject(v, w, i)
			continue
		}
		// Not a whole object: frame it on its own, for the error it has.
		raw, err := st.value()
		if err == nil && len(raw) == 0 {
			err = errors.New("expected a value")
		}
		if err != nil {
			return st.wrap(fmt.Errorf("object %d: %w", i, err))
		}
		// raw is a fresh copy that is never written again: the strings of
		// the parsed tree point into it
		v, err := p.parse(unsafe.String(&raw[0], len(raw)))
		if err != nil {
			return st.wrap(fmt.Errorf("object %d: %w", i, err))
		}
		b.jsonObject(v, w, i)
	}
}

// object parses the object at pos straight from the read buffer, in one
// pass (the strings of the tree point into the buffer, which is never
// written again once read: fill moves on to a new one). ok is false, and
// nothing consumed, when it is not a well-formed object.
func (st *jsonStream) object(p *jsonParser) (*jsonValue, bool) {
	if c, err := st.peek(); err != nil || c != '{' {
		return nil, false
	}
	for {
		v, n, short, err := p.parsePrefix(unsafe.String(&st.buf[st.pos], len(st.buf)-st.pos))
		if err == nil {
			st.pos += n
			return v, true
		}
		if !short {
			return nil, false
		}
		if p.cutAt > 0 { // among the elements a set drops: skip them
			if !st.skipItems(st.pos + p.cutAt) {
				return nil, false
			}
			continue
		}
		if !st.fill(st.pos) {
			return nil, false
		}
	}
}

// skipItems drops the items of an array of set elements past those the
// parser keeps (jsonMaxItems), at buf[at] on, up to the array's closing
// bracket: it reads on and drops them as it goes, so that they cost a
// read buffer rather than their size (10 million elements in one set
// took 695 MB, three times their bytes, held to be parsed again). The
// parser then reads the kept items, a "0" standing for those dropped
// (so that the array is marked cut, as when read whole), and what
// follows. Of the dropped items only strings and brackets are looked
// at. False at the end of the input.
func (st *jsonStream) skipItems(at int) bool {
	depth, inStr, esc, dropped := 0, false, false, false
	for i := at; ; {
		for ; i < len(st.buf); i++ {
			c := st.buf[i]
			switch {
			case inStr:
				if esc {
					esc = false
				} else if c == '\\' {
					esc = true
				} else if c == '"' {
					inStr = false
				}
			case c == '"':
				inStr = true
			case c == '[' || c == '{':
				depth++
			case c == ']' || c == '}':
				if depth == 0 {
					st.closeSkipped(at, i, dropped)
					return true
				}
				depth--
			}
			dropped = dropped || !isJSONSpace(c)
		}
		// buf[at:] is dropped: buf[at] is the next byte of input
		st.base += int64(len(st.buf) - at)
		st.buf = st.buf[:at]
		pos := st.pos
		if !st.fill(st.pos) {
			return false
		}
		at -= pos - st.pos // fill may have moved buf[pos:] to a new buffer
		i = at
	}
}

// closeSkipped puts the "0" that stands for the items dropped (if any)
// between buf[:at], the kept, and buf[end:], the array's closing bracket
// and what follows.
func (st *jsonStream) closeSkipped(at, end int, dropped bool) {
	if !dropped {
		st.base += int64(end - at)
		st.buf = append(st.buf[:at], st.buf[end:]...)
		return
	}
	if end-at < 2 { // no room in place: the bytes from pos to a new buffer
		nb := make([]byte, 0, len(st.buf)-st.pos+2+jsonReadSize)
		nb = append(append(append(nb, st.buf[st.pos:at]...), ",0"...), st.buf[end:]...)
		st.base += int64(end - at - 2 + st.pos)
		st.buf, st.pos = nb, 0
		return
	}
	st.base += int64(end - at - 2)
	copy(st.buf[at:], ",0")
	st.buf = append(st.buf[:at+2], st.buf[end:]...)
}

// jsonStream frames a JSON stream: it returns each value as a fresh
// byte slice, reading r as needed, without holding more than the current
// value (and a read buffer) in memory.
type jsonStream struct {
	r    io.Reader
	buf  []byte
	pos  int   // next unread byte in buf
	base int64 // input offset of buf[0]
	eof  bool
	err  error
}

const jsonReadSize = 256 << 10

// fill reads more input, keeping buf[keep:]. What was read is never
// written again (strings point into it): the input is read into the room
// after it, and when that is short the rest moves to a new buffer. (A
// pipe's reads are short: moving at every read would cost a buffer each.)
func (st *jsonStream) fill(keep int) bool {
	if st.eof {
		return false
	}
	if rest := len(st.buf) - keep; cap(st.buf)-len(st.buf) < jsonReadSize/2 {
		nb := make([]byte, rest, max(2*rest, jsonReadSize)+jsonReadSize)
		copy(nb, st.buf[keep:])
		st.buf = nb
		st.pos -= keep
		st.base += int64(keep)
	}
	n, err := st.r.Read(st.buf[len(st.buf):cap(st.buf)])
	st.buf = st.buf[:len(st.buf)+n]
	if err != nil {
		st.eof = true
		if err != io.EOF {
			st.err = err
		}
	}
	return n > 0 || !st.eof
}

var errNFTJSONEOF = errors.New("unexpected end of input")

// peek skips white space and returns the next byte.
func (st *jsonStream) peek() (byte, error) {
	for {
		for st.pos < len(st.buf) {
			switch c := st.buf[st.pos]; c {
			case ' ', '\t', '\n', '\r':
				st.pos++
			default:
				return c, nil
			}
		}
		if !st.fill(st.pos) {
			if st.err != nil {
				return 0, st.err
			}
			return 0, errNFTJSONEOF
		}
	}
}

// value returns a copy of the next JSON value's bytes. It finds the end of
// the value only (strings, nesting); the tree parser checks the rest.
func (st *jsonStream) value() ([]byte, error) {
	from, to, err := st.extent()
	if err != nil {
		return nil, err
	}
	return st.take(from, to), nil
}

// extent finds the next JSON value, st.buf[from:to], reading as needed.
func (st *jsonStream) extent() (from, to int, err error) {
	c, err := st.peek()
	if err != nil {
		return 0, 0, err
	}
	switch c {
	case ',', ':', '}', ']':
		return 0, 0, fmt.Errorf("expected a value, found %q", c)
	}
	start := st.pos
	i := st.pos
	depth := 0
	inStr, esc := false, false
	for {
		for ; i < len(st.buf); i++ {
			c := st.buf[i]
			if inStr {
				if !esc {
					// a tight loop to the next quote or backslash
					for c != '"' && c != '\\' && i+1 < len(st.buf) {
						i++
						c = st.buf[i]
					}
				}
				switch {
				case esc:
					esc = false
				case c == '\\':
					esc = true
				case c == '"':
					inStr = false
					if depth == 0 {
						return start, i + 1, nil
					}
				}
				continue
			}
			switch c {
			case '"':
				inStr = true
			case '{', '[':
				depth++
			case '}', ']':
				if depth == 0 {
					// the end of an enclosing container ends a scalar
					return start, i, nil
				}
				depth--
				if depth == 0 {
					return start, i + 1, nil
				}
			case ',', ' ', '\t', '\n', '\r', ':':
				if depth == 0 {
					return start, i, nil
				}
			}
		}
		off := i - start
		if !st.fill(start) {
			if depth == 0 && !inStr && off > 0 {
				return st.pos, st.pos + off, nil
			}
			if st.err != nil {
				return 0, 0, st.err
			}
			return 0, 0, errNFTJSONEOF
		}
		start = st.pos
		i = start + off
	}
}

func (st *jsonStream) take(from, to int) []byte {
	out := make([]byte, to-from)
	copy(out, st.buf[from:to])
	st.pos = to
	return out
}

func (st *jsonStream) wrap(err error) error {
	return fmt.Errorf("nft JSON: offset %d: %w", st.base+int64(st.pos), err)
}
