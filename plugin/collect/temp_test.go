package collect

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// MkdirTemp in the temporary directory first removes the folders of its
// own pattern that a killed process left (older than an hour), as a live
// read's `proxyrules-` folder is made, and only those: not a fresh one
// (another command may be reading it), not another pattern's, not a
// link, not a folder named otherwise, nothing outside the temporary
// directory.
func TestMkdirTempRemovesStaleTemps(t *testing.T) {
	tests := []struct {
		name, dir, pattern string
		removed            []string // of staleDirs
	}{
		{"live read", "", "proxyrules-", []string{"proxyrules-1234567"}},
		{"archive", "", bundleTempPrefix, []string{"proxyrules-bundle-1234567"}},
		{"not in the temporary directory", "elsewhere", "proxyrules-", nil},
		{"not the plugin's", "", "other-", nil},
	}
	staleDirs := []string{"proxyrules-1234567", "proxyrules-bundle-1234567", "proxyrules-x1", "proxyrules-", "other-123"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tmp := isolateTemp(t)
			old := time.Now().Add(-2 * time.Hour)
			for _, name := range append(staleDirs, "proxyrules-7654321") {
				p := filepath.Join(tmp, name)
				if err := os.MkdirAll(filepath.Join(p, "sub"), 0o700); err != nil {
					t.Fatal(err)
				}
				if name == "proxyrules-7654321" {
					continue // fresh
				}
				if err := os.Chtimes(p, old, old); err != nil {
					t.Fatal(err)
				}
			}
			target := t.TempDir()
			if err := os.Chtimes(target, old, old); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, filepath.Join(tmp, "proxyrules-5555")); err != nil {
				t.Fatal(err)
			}
			dir := tt.dir
			if dir != "" {
				dir = filepath.Join(tmp, dir)
				if err := os.Mkdir(dir, 0o700); err != nil {
					t.Fatal(err)
				}
			}
			made, err := MkdirTemp(dir, tt.pattern)
			if err != nil {
				t.Fatal(err)
			}
			defer RemoveTemp(made)
			for _, name := range append(staleDirs, "proxyrules-7654321", "proxyrules-5555") {
				want := false
				for _, r := range tt.removed {
					want = want || r == name
				}
				if _, err := os.Lstat(filepath.Join(tmp, name)); (err != nil) != want {
					t.Errorf("%s: removed %v, want %v", name, err != nil, want)
				}
			}
			if _, err := os.Stat(target); err != nil {
				t.Errorf("what a link points at was removed: %v", err)
			}
		})
	}
}
