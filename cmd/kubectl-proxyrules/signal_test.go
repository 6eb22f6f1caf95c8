//go:build linux

package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// bundleArchive is a .tar.gz bundle with one big ruleset: it compresses to
// little and takes a while to extract.
func bundleArchive(t *testing.T) []byte {
	t.Helper()
	rules := bytes.Repeat([]byte("-A KUBE-SERVICES -j ACCEPT\n"), 2<<20)
	manifest, _ := json.Marshal(map[string]any{"apiVersion": "proxyrules.kubectl.io/v1alpha1", "kind": "Bundle", "node": "node-a", "scope": "full",
		"files": []map[string]any{{"path": "rules.txt", "kind": "ruleset", "bytes": len(rules)}}})
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, f := range []struct {
		name string
		data []byte
	}{{"node-a/bundle.json", manifest}, {"node-a/rules.txt", rules}} {
		tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o600, Size: int64(len(f.data)), Typeflag: tar.TypeReg})
		tw.Write(f.data)
	}
	tw.Close()
	gz.Close()
	return buf.Bytes()
}

// TestSignalsRemoveExtractedFiles: a hang-up or a Ctrl-C while a bundle is
// extracted stops the command (exit 130), and a second Ctrl-C, which quits
// at once, still removes what was extracted: nothing is left in $TMPDIR.
// The archive comes through a FIFO so that the extraction is caught halfway.
func TestSignalsRemoveExtractedFiles(t *testing.T) {
	bin := binary(t)
	archive := bundleArchive(t)
	for _, tc := range []struct {
		name    string
		signals []syscall.Signal
	}{
		{"hang-up", []syscall.Signal{syscall.SIGHUP}},
		{"SIGTERM", []syscall.Signal{syscall.SIGTERM}},
		{"second Ctrl-C", []syscall.Signal{syscall.SIGINT, syscall.SIGINT}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmp := t.TempDir()
			fifo := filepath.Join(t.TempDir(), "node-a.tar.gz")
			if err := syscall.Mkfifo(fifo, 0o600); err != nil {
				t.Skipf("mkfifo: %v", err)
			}
			cmd := exec.Command(bin, "map", "--from-bundle", fifo)
			cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			// Half the archive: the extraction starts, then waits for more.
			go w.Write(archive[:len(archive)/2])
			extracting := func() bool {
				found, _ := filepath.Glob(filepath.Join(tmp, "proxyrules-bundle-*", "rules.txt"))
				if len(found) == 0 {
					return false
				}
				st, err := os.Stat(found[0])
				return err == nil && st.Size() > 0
			}
			for start := time.Now(); !extracting(); time.Sleep(10 * time.Millisecond) {
				if time.Since(start) > 20*time.Second {
					t.Fatalf("the extraction did not start; stderr: %s", stderr.String())
				}
			}
			for i, s := range tc.signals {
				if i > 0 {
					time.Sleep(100 * time.Millisecond)
				}
				cmd.Process.Signal(s)
			}
			if len(tc.signals) == 1 {
				// The extraction notices at its next read.
				w.Close()
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				var ee *exec.ExitError
				if !errors.As(err, &ee) || ee.ExitCode() != 130 {
					t.Errorf("exit %v, want 130; stderr: %s", err, stderr.String())
				}
			case <-time.After(20 * time.Second):
				cmd.Process.Kill()
				t.Fatalf("%v did not stop the command", tc.signals)
			}
			if !strings.Contains(stderr.String(), "interrupted") {
				t.Errorf("stderr does not say interrupted: %s", stderr.String())
			}
			if left, _ := os.ReadDir(tmp); len(left) > 0 {
				t.Errorf("left in $TMPDIR: %v", left)
			}
		})
	}
}
