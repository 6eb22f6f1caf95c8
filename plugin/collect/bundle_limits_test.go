package collect

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// kindFiles lists files as "kind:path:bytes".
func kindFiles(spec ...string) (string, map[string]int) {
	var list []string
	sizes := map[string]int{}
	for _, s := range spec {
		parts := strings.Split(s, ":")
		var n int
		fmt.Sscan(parts[2], &n)
		sizes[parts[1]] = n
		list = append(list, fmt.Sprintf(`{"path":%q,"kind":%q,"bytes":%d}`, parts[1], parts[0], n))
	}
	return `{"kind":"Bundle","node":"node-a","files":[` + strings.Join(list, ",") + `]}`, sizes
}

// many is n files of kind, each of size bytes.
func many(kind string, n, size int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("%s:%s-%02d.txt:%d", kind, kind, i, size))
	}
	return out
}

// writeKindBundle writes the bundle spec lists as a directory, or as an
// archive with bundle.json first.
func writeKindBundle(t *testing.T, archive bool, spec []string) string {
	t.Helper()
	manifest, sizes := kindFiles(spec...)
	work := t.TempDir()
	if archive {
		entries := []tarEntry{{name: "node-a/" + ManifestFile, body: manifest}}
		for p, n := range sizes {
			entries = append(entries, tarEntry{name: "node-a/" + p, body: strings.Repeat("x", n)})
		}
		name := filepath.Join(work, "node-a.tar.gz")
		writeTarGz(t, name, entries...)
		return name
	}
	for p, n := range sizes {
		if err := os.WriteFile(filepath.Join(work, p), []byte(strings.Repeat("x", n)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(work, ManifestFile), []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	return work
}

// A bundle lists at most a few files of each kind, together within a
// small multiple of the cap on one (a 146 KB archive listing 31 metrics
// files of 64 MiB each took the process out of memory): more is refused
// before anything is parsed, a directory as an archive, and nothing is
// left in $TMPDIR.
func TestOpenBundleKindBounds(t *testing.T) {
	lim100 := Limits{File: func(string) int64 { return 100 }, Total: 1 << 20}
	rules := []string{"ruleset:rules.txt:10"}
	tests := []struct {
		name string
		spec []string
		lim  Limits
		want string // "" when it opens
	}{
		{"31 metrics files", append(rules, many(KindMetrics, 31, 10)...), DefaultLimits, "lists 31 metrics files, more than the 4"},
		{"5 metrics files", append(rules, many(KindMetrics, 5, 10)...), DefaultLimits, "lists 5 metrics files, more than the 4"},
		{"17 rulesets", many(KindRuleset, 17, 10), DefaultLimits, "lists 17 ruleset files, more than the 16"},
		{"5 config files", append(rules, many(KindConfig, 5, 10)...), DefaultLimits, "lists 5 config files"},
		{"3 objects files", append(rules, many(KindObjects, 3, 10)...), DefaultLimits, "lists 3 objects files"},
		{"metrics over twice the cap together", append(rules, many(KindMetrics, 3, 80)...), lim100, "the metrics files of"},
		{"objects over the cap together", append(rules, many(KindObjects, 2, 60)...), lim100, "the objects files of"},
		{"at the bounds", append(append(many(KindRuleset, 16, 10), many(KindMetrics, 4, 50)...), many(KindObjects, 2, 50)...), lim100, ""},
		{"what collect writes", append(append(many(KindRuleset, 10, 10), many(KindMetrics, 2, 10)...), "config:configz.json:10", "objects:objects.json:10"), DefaultLimits, ""},
	}
	for _, tt := range tests {
		for _, archive := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s archive=%v", tt.name, archive), func(t *testing.T) {
				tmp := isolateTemp(t)
				b, err := OpenBundle(context.Background(), writeKindBundle(t, archive, tt.spec), tt.lim)
				if tt.want == "" {
					if err != nil {
						t.Fatalf("OpenBundle: %v", err)
					}
					b.Close()
					return
				}
				if err == nil {
					b.Close()
					t.Fatalf("OpenBundle succeeded, want an error saying %q", tt.want)
				}
				if !strings.Contains(err.Error(), tt.want) {
					t.Errorf("OpenBundle: %v\nwant it to say %q", err, tt.want)
				}
				if left := dirEntries(t, tmp); len(left) > 0 {
					t.Errorf("left in the temporary directory: %v", left)
				}
			})
		}
	}
}

// Opening an archive first removes the extraction folders a killed process
// left (older than an hour), and only those: not a fresh one (another
// command may be reading it), not a link, not a folder named otherwise.
func TestOpenBundleRemovesStaleTemps(t *testing.T) {
	tmp := isolateTemp(t)
	old := time.Now().Add(-2 * time.Hour)
	elsewhere := t.TempDir()
	dirs := map[string]bool{ // name → removed
		"proxyrules-bundle-1234567": true,
		"proxyrules-bundle-7654321": false, // fresh
		"proxyrules-bundle-x1":      false, // not a name OpenBundle gives
		"proxyrules-9999":           false, // a live collection's: not this one's
		"other-123":                 false,
	}
	for name := range dirs {
		p := filepath.Join(tmp, name)
		if err := os.MkdirAll(filepath.Join(p, "sub"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(p, "sub", "metrics.txt"), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		if name != "proxyrules-bundle-7654321" {
			if err := os.Chtimes(p, old, old); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.Chtimes(elsewhere, old, old); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(tmp, "proxyrules-bundle-5555")
	if err := os.Symlink(elsewhere, link); err != nil {
		t.Fatal(err)
	}
	b, err := OpenBundle(context.Background(), writeKindBundle(t, true, []string{"ruleset:rules.txt:10"}), DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	for name, removed := range dirs {
		if _, err := os.Stat(filepath.Join(tmp, name)); (err == nil) == removed {
			t.Errorf("%s: removed %v, want %v", name, err != nil, removed)
		}
	}
	if _, err := os.Lstat(link); err != nil {
		t.Errorf("a link named as an extraction folder was removed: %v", err)
	}
	if _, err := os.Stat(elsewhere); err != nil {
		t.Errorf("what a link points at was removed: %v", err)
	}
}
