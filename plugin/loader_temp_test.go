package plugin

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A live read first removes the folders `proxyrules-<digits>` that a
// killed read left in the temporary directory (an hour old), and leaves
// nothing of its own when it fails; a fresh one (another command's) and
// an archive's extraction folder are left alone.
func TestLoadLiveRemovesStaleTemps(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	old := time.Now().Add(-2 * time.Hour)
	dirs := map[string]bool{ // name → removed
		"proxyrules-1234567":        true,
		"proxyrules-7654321":        false, // fresh
		"proxyrules-bundle-1234567": false, // an extraction's: OpenBundle's to clean
	}
	for name := range dirs {
		p := filepath.Join(tmp, name)
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
		if name != "proxyrules-7654321" {
			if err := os.Chtimes(p, old, old); err != nil {
				t.Fatal(err)
			}
		}
	}
	// no cluster: the read fails after making its folder
	_, err := (&Loader{ErrOut: io.Discard}).Load(context.Background(), Request{Node: "node-a"})
	if err == nil {
		t.Fatal("a live read without a cluster succeeded")
	}
	ents, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	left := map[string]bool{}
	for _, e := range ents {
		left[e.Name()] = true
	}
	for name, removed := range dirs {
		if left[name] == removed {
			t.Errorf("%s: removed %v, want %v", name, !left[name], removed)
		}
		delete(left, name)
	}
	if len(left) > 0 {
		t.Errorf("left in the temporary directory: %v", left)
	}
}
