//go:build unix

package plugin

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A sweep read offline refuses, at once, a FIFO as its objects (a read
// blocked for as long as no one writes) and a node folder that is a link
// (a bundle read from outside the sweep).
func TestSweepFolderSpecialFiles(t *testing.T) {
	for _, tc := range []struct {
		name string
		swap func(t *testing.T, dir string)
		want string
	}{
		{"objects a FIFO", func(t *testing.T, dir string) {
			objects := filepath.Join(dir, "objects.json")
			if err := os.Remove(objects); err != nil {
				t.Fatal(err)
			}
			if err := syscall.Mkfifo(objects, 0o600); err != nil {
				t.Skipf("mkfifo: %v", err)
			}
		}, "objects.json is a FIFO"},
		{"node folder a link", func(t *testing.T, dir string) {
			elsewhere := filepath.Join(t.TempDir(), "node-c")
			if err := os.Rename(filepath.Join(dir, "nodes", "node-c"), elsewhere); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(elsewhere, filepath.Join(dir, "nodes", "node-c")); err != nil {
				t.Skipf("symlink: %v", err)
			}
		}, "nodes/node-c is a symbolic link"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := sweepFolder(t)
			tc.swap(t, dir)
			type result struct {
				out, errOut string
				err         error
			}
			done := make(chan result, 1)
			go func() {
				out, errOut, err := runCmd(t, nil, "triage", "--from-bundle", dir)
				done <- result{out, errOut, err}
			}()
			select {
			case r := <-done:
				if r.err == nil || !strings.Contains(r.err.Error(), tc.want) {
					t.Errorf("triage of the sweep: %v, want an error saying %q\n%s%s", r.err, tc.want, r.out, r.errOut)
				}
			case <-time.After(10 * time.Second):
				// Unblock a read stuck on the FIFO before failing.
				if f, err := os.OpenFile(filepath.Join(dir, "objects.json"), os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
					f.Close()
				}
				t.Fatalf("triage of the sweep still running after 10 s")
			}
		})
	}
}
