package plugin

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestStreamParse: a ruleset parsed as it streams in is the parse of the
// file, and only a whole output of a command that succeeded stands for
// the file: a failed, unfinished, cut or oversized output is read from
// the file instead, as before.
func TestStreamParse(t *testing.T) {
	const path = "iptables-nft-save.txt"
	data, err := os.ReadFile("../testdata/fixtures/small-v1.37/iptables/save-nft-ipv4.txt")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	name := filepath.Join(dir, path)
	want, err := readOptions("").Read(bytes.NewReader(data), name)
	if err != nil {
		t.Fatal(err)
	}
	feed := func(s *streamParse, b []byte) {
		w := s.Begin(path)
		for len(b) > 0 { // in pieces, as an exec stream delivers
			n := min(len(b), 4093)
			if m, err := w.Write(b[:n]); m != n || err != nil {
				t.Fatalf("Write = %d, %v", m, err)
			}
			b = b[n:]
		}
	}
	tests := []struct {
		name   string
		run    func(s *streamParse)
		cap    int64
		wantOK bool
	}{
		{name: "whole", wantOK: true, run: func(s *streamParse) { feed(s, data); s.End(path, true) }},
		{name: "cut, then again whole", wantOK: true, run: func(s *streamParse) {
			feed(s, data[:len(data)/2])
			feed(s, data)
			s.End(path, true)
		}},
		{name: "command failed", run: func(s *streamParse) { feed(s, data); s.End(path, false) }},
		{name: "never ended", run: func(s *streamParse) { feed(s, data[:len(data)/3]); s.stop() }},
		{name: "over the cap", cap: int64(len(data) / 2), run: func(s *streamParse) { feed(s, data); s.End(path, true) }},
		{name: "garbage", run: func(s *streamParse) { feed(s, []byte("\x00\x01binary\n")); s.End(path, true) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cap := tc.cap
			if cap == 0 {
				cap = 1 << 30
			}
			s := newStreamParse(dir, "", cap)
			tc.run(s)
			got, ok := s.parsed(name)
			if ok != tc.wantOK {
				t.Fatalf("parsed: ok = %v, want %v", ok, tc.wantOK)
			}
			if ok && !reflect.DeepEqual(got, want) {
				t.Errorf("the streamed parse differs from the file's")
			}
			if _, ok := s.parsed(filepath.Join(dir, "other.txt")); ok {
				t.Error("a file never streamed counts as parsed")
			}
		})
	}
	var none *streamParse // offline: no stream
	if _, ok := none.parsed(name); ok {
		t.Error("a nil stream parsed something")
	}
}
