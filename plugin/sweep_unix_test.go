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
// (a bundle read from outside the sweep): swept, and one node read from it
// (by --node, or by its node folder).
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
		for _, args := range [][]string{{"triage", "--from-bundle", "{dir}"}, {"map", "--from-bundle", "{dir}", "--node", "node-c"},
			{"map", "--from-bundle", "{dir}/nodes/node-c"}} {
			t.Run(tc.name+"/"+strings.Join(args[:len(args)-1], " "), func(t *testing.T) {
				dir := sweepFolder(t)
				tc.swap(t, dir)
				refusedAtOnce(t, dir, strings.Fields(strings.ReplaceAll(strings.Join(args, " "), "{dir}", dir)), tc.want)
			})
		}
	}
}

// refusedAtOnce runs args and fails unless they end with an error saying
// want within 10 s (a read stuck on a FIFO is unblocked first).
func refusedAtOnce(t *testing.T, dir string, args []string, want string) {
	t.Helper()
	type result struct {
		out, errOut string
		err         error
	}
	done := make(chan result, 1)
	go func() {
		out, errOut, err := runCmd(t, nil, args...)
		done <- result{out, errOut, err}
	}()
	select {
	case r := <-done:
		if r.err == nil || !strings.Contains(r.err.Error(), want) {
			t.Errorf("%s: %v, want an error saying %q\n%s%s", args[0], r.err, want, r.out, r.errOut)
		}
	case <-time.After(10 * time.Second):
		// Unblock a read stuck on the FIFO before failing.
		if f, err := os.OpenFile(filepath.Join(dir, "objects.json"), os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
		t.Fatalf("%v still running after 10 s", args)
	}
}
