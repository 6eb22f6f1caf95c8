package ipset

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Any input reads without a panic, within the caps, and what is kept is
// whole: a member's fields are those of its set's type or none.
func FuzzRead(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.txt"))
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("$ ipset list\r\nName: A\nType: hash:ip,port,net\nMembers:\n1.2.3.4,tcp:80,::/0\n\ncreate A hash:ip\nadd A 1.2.3.4 comment \"x"))
	lim := Limits{MaxSets: 3, MaxMembers: 5, MaxLineBytes: 256, MaxBytes: 1 << 20, MaxWarnings: 3}
	f.Fuzz(func(t *testing.T, in []byte) {
		s, err := Read(bytes.NewReader(in), lim)
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Sets) > lim.MaxSets || s.Members() > lim.MaxMembers || len(s.Warnings) > lim.MaxWarnings+1+5+2*len(s.Sets) { // per set: a count that differs, two types
			t.Fatalf("%d sets, %d members, %d warnings", len(s.Sets), s.Members(), len(s.Warnings))
		}
		for _, set := range s.Sets {
			for _, m := range set.Members {
				if m.HasPort && m.Proto == "" && set.Type != "bitmap:port" || m.IP2.IsValid() && !m.IP.IsValid() || m.Net.IsValid() && !m.HasPort ||
					strings.HasSuffix(set.Type, ",net") && m.IP.IsValid() && !m.Net.IsValid() {
					t.Fatalf("set %s %s: member %+v", set.Name, set.Type, m)
				}
			}
		}
		for _, line := range bytes.Split(in, []byte("\n")) {
			IsIPSetLine(string(line))
		}
	})
}
