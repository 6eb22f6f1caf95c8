package plugin

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestProgressCannotForgeLines: a live read's steps and warnings quote
// names and errors from the cluster and the node (a pod, a DaemonSet, a
// command's stderr): on a terminal, each is one line, escaped, whatever
// the data holds. Before, the steps went to the terminal raw and the
// warnings kept newlines.
func TestProgressCannotForgeLines(t *testing.T) {
	ptmx, pts := openPTY(t)
	p := (&Loader{ErrOut: pts}).progress(false)
	if p.W == nil {
		t.Fatal("no progress on a terminal")
	}
	p.Started = time.Now()
	p.Step("creating pod %s/%s on node %s", "kubectl-proxyrules", "proxyrules-x", "node-a"+forge)
	p.Warning("kube-proxy pod kube-proxy-x" + forge + " is Pending, not Running")
	pts.Close()
	var got bytes.Buffer
	buf := make([]byte, 4096)
	for {
		n, err := ptmx.Read(buf)
		got.Write(buf[:n])
		if err != nil {
			break
		}
	}
	// The terminal ends each line with \r\n; a carriage return of the data
	// would come before it.
	shown := strings.ReplaceAll(got.String(), "\r\n", "\n")
	if n := strings.Count(shown, "\n"); n != 2 {
		t.Errorf("%d lines, want 2: %q", n, shown)
	}
	assertNoForgedLine(t, shown)
}

// Each Write of dataLines is one line: its newline passes, the rest is
// escaped as data.
func TestDataLines(t *testing.T) {
	for in, want := range map[string]string{
		"plain step\n":          "plain step\n",
		"no newline":            "no newline",
		"a" + forge + "\n":      `a\ntriage node/x: HEALTHY \x1b[32mFORGED\x1b[0m\r` + "\n",
		"two\nlines\n":          `two\nlines` + "\n",
		"bidi \u202eevil\x9b\n": `bidi \u202eevil\x9b` + "\n",
	} {
		var b bytes.Buffer
		if n, err := (dataLines{&b}).Write([]byte(in)); err != nil || n != len(in) {
			t.Errorf("Write(%q) = %d, %v", in, n, err)
		}
		if b.String() != want {
			t.Errorf("Write(%q) wrote %q, want %q", in, b.String(), want)
		}
	}
}
