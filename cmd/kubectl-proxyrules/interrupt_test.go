//go:build linux

package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/proxyrules/kubectl-proxyrules/internal/synth"
)

var built struct {
	once sync.Once
	dir  string
	err  error
}

// binary is the command built once for the tests that signal it.
func binary(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	built.once.Do(func() {
		built.dir, built.err = os.MkdirTemp("", "proxyrules-cmd-test-")
		if built.err != nil {
			return
		}
		out, err := exec.Command("go", "build", "-o", filepath.Join(built.dir, "kubectl-proxyrules"), ".").CombinedOutput()
		if err != nil {
			built.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return filepath.Join(built.dir, "kubectl-proxyrules")
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// bigDump is an iptables-save dump of 40,000 Services of 10 endpoints
// (132 MB): on one core its parse takes several times the bound below
// (10 s for triage on the machine the test was written on).
func bigDump(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := (synth.Cluster{Services: 40000, Endpoints: 10}).WriteIPTablesSave(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// archiveOf is a .tar.gz bundle of node-a holding rules as its ruleset.
func archiveOf(t *testing.T, rules []byte) []byte {
	t.Helper()
	manifest, _ := json.Marshal(map[string]any{"apiVersion": "proxyrules.kubectl.io/v1alpha1", "kind": "Bundle", "node": "node-a", "scope": "full",
		"files": []map[string]any{{"path": "rules.txt", "kind": "ruleset", "bytes": len(rules)}}})
	var buf bytes.Buffer
	gz, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	tw := tar.NewWriter(gz)
	for _, f := range []struct {
		name string
		data []byte
	}{{"node-a/bundle.json", manifest}, {"node-a/rules.txt", rules}} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o600, Size: int64(len(f.data)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(f.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// reading says whether process pid holds open a file named base, whole
// (size bytes): the parse has it, or the extraction has just written it.
func reading(pid int, base string, size int) bool {
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	for _, fd := range fds {
		target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if err != nil || filepath.Base(target) != base {
			continue
		}
		if st, err := os.Stat(target); err == nil && st.Size() == int64(size) {
			return true
		}
	}
	return false
}

// TestFirstInterruptStopsParse: the first Ctrl-C during the parse of a big
// dump ends the command within a bound (the parse alone takes several
// times as long: before, it ran to its end and printed the report), says
// "interrupted", exits 130 and leaves nothing in $TMPDIR (a bundle's
// archive is extracted there). The command runs on one core, where the
// parse competes with the signal for it: the hardest case.
func TestFirstInterruptStopsParse(t *testing.T) {
	bin := binary(t)
	rules := bigDump(t)
	inputs := t.TempDir()
	dump := filepath.Join(inputs, "big-iptables-save.txt")
	archive := filepath.Join(inputs, "node-a.tar.gz")
	if err := os.WriteFile(dump, rules, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(archive, archiveOf(t, rules), 0o600); err != nil {
		t.Fatal(err)
	}
	const bound = 2 * time.Second
	for _, tc := range []struct {
		name string
		args []string
		file string // the file the parse reads
	}{
		{"map --from-dump", []string{"map", "--from-dump", dump}, filepath.Base(dump)},
		{"triage --from-bundle archive", []string{"triage", "--from-bundle", archive}, "rules.txt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmp := t.TempDir()
			cmd := exec.Command(bin, tc.args...)
			cmd.Env = append(os.Environ(), "TMPDIR="+tmp, "GOMAXPROCS=1")
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			for start := time.Now(); !reading(cmd.Process.Pid, tc.file, len(rules)); time.Sleep(10 * time.Millisecond) {
				if time.Since(start) > 60*time.Second {
					cmd.Process.Kill()
					t.Fatalf("the parse did not start; stderr: %s", stderr.String())
				}
			}
			time.Sleep(300 * time.Millisecond) // well into the parse
			cmd.Process.Signal(syscall.SIGINT)
			signalled := time.Now()
			var err error
			select {
			case err = <-done:
			case <-time.After(60 * time.Second):
				cmd.Process.Kill()
				t.Fatal("the command did not end")
			}
			took := time.Since(signalled)
			t.Logf("ended %v after Ctrl-C", took.Round(time.Millisecond))
			if took > bound {
				t.Errorf("the command ended %v after Ctrl-C, want < %v", took.Round(time.Millisecond), bound)
			}
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 130 {
				t.Errorf("exit %v, want 130; stderr: %s", err, stderr.String())
			}
			if !strings.Contains(stderr.String(), "interrupted") {
				t.Errorf("stderr does not say interrupted: %q", stderr.String())
			}
			if stdout.Len() > 0 {
				t.Errorf("a report was printed: the parse was not cut short (%d bytes)", stdout.Len())
			}
			if left, _ := os.ReadDir(tmp); len(left) > 0 {
				t.Errorf("left in $TMPDIR: %v", left)
			}
		})
	}
}
