package conntrack

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func addFixtureSeeds(f *testing.F, pattern string) {
	files, _ := filepath.Glob(filepath.Join("testdata", pattern))
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// Any input reads without a panic, within the caps, and every entry kept
// is whole (one family throughout) and reads back from its text to itself.
func FuzzReadTable(f *testing.F) {
	addFixtureSeeds(f, "*conntrack*.txt")
	f.Add([]byte(goodLine + "\r\n" + strings.Repeat("x", 600) + "\n\x00"))
	lim := Limits{MaxEntries: 5, MaxLineBytes: 512, MaxBytes: 1 << 20, MaxWarnings: 3}
	f.Fuzz(func(t *testing.T, in []byte) {
		tab, err := ReadTable(bytes.NewReader(in), lim, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(tab.Entries) > lim.MaxEntries || len(tab.Warnings) > lim.MaxWarnings+1+1+3 {
			t.Fatalf("%d entries, %d warnings", len(tab.Entries), len(tab.Warnings))
		}
		for _, e := range tab.Entries {
			fam6 := e.Family == 6
			for _, a := range []bool{e.Orig.Src.Is6(), e.Orig.Dst.Is6(), e.Reply.Src.Is6(), e.Reply.Dst.Is6()} {
				if a != fam6 || (e.Family != 4 && e.Family != 6) {
					t.Fatalf("family %d with addresses %s", e.Family, e)
				}
			}
			back, err := ReadTable(strings.NewReader(e.String()), Limits{}, nil)
			if err != nil || len(back.Entries) != 1 || !reflect.DeepEqual(back.Entries[0], e) {
				t.Fatalf("%s read back as %+v, warnings %q", e, back.Entries, back.Warnings)
			}
		}
	})
}

// Any input reads without a panic; every CPU row is the header's width, and
// nothing changed between a read and itself.
func FuzzReadStats(f *testing.F) {
	addFixtureSeeds(f, "stat-*.txt")
	f.Add([]byte("entries drop\n1 2\nzz\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		s, err := ReadStats(bytes.NewReader(in))
		if err != nil {
			t.Fatal(err)
		}
		for _, row := range s.CPUs {
			if len(row) != len(s.Columns) {
				t.Fatalf("row of %d for %d columns", len(row), len(s.Columns))
			}
		}
		for col, d := range Diff(s, s) {
			if d != 0 {
				t.Fatalf("%s changed by %d against itself", col, d)
			}
		}
	})
}

// Any input reads without a panic; values are one line of single-spaced
// words, and a port range read is in order.
func FuzzReadSysctls(f *testing.F) {
	addFixtureSeeds(f, "sysctls.txt")
	f.Add([]byte("net.ipv4.ip_forward = 1\ngrep: /proc/sys/net/bridge/x: No such file or directory\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		s, err := ReadSysctls(bytes.NewReader(in))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range s.Values {
			if strings.ContainsAny(v, "\n\r\t") || strings.Contains(v, "  ") || k == "" {
				t.Fatalf("%q = %q", k, v)
			}
		}
		if lo, hi, ok := s.PortRange(); ok && lo > hi {
			t.Fatalf("range %d-%d", lo, hi)
		}
	})
}
