package collect

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
)

// noisyRunner is the fake runner, with stderr printed by every run.
type noisyRunner struct {
	*fakeRunner
	stderr string
}

func (r *noisyRunner) Run(ctx context.Context, t Target, cmds []NodeCommand, sink Sink) (string, error) {
	s, err := r.fakeRunner.Run(ctx, t, cmds, sink)
	return s + r.stderr, err
}

// A node's commands cannot fill the memory or the disk: what they print on
// stderr is kept up to 64 KiB, and each command's output up to its cap (a
// version, the list of tables: 1 MiB).
func TestExecOutputsBounded(t *testing.T) {
	big := strings.Repeat("x", 4<<20)
	for _, tc := range []struct {
		name       string
		output     string // of iptables -V
		stderr     string // of each run
		wantErr    string
		wantStderr string // what the kept stderr ends with
		maxStderr  int
		maxOutput  int
	}{
		{"stderr without end", "iptables v1.8.11 (nf_tables)\n", big, "", "… (truncated)\n", 65 << 10, 1 << 10},
		{"an output without end", big, "", "the output of iptables -V on the node is larger than the cap of 1.0 MB", "", 0, 1 << 20},
		{"both within bounds", "iptables v1.8.11 (nf_tables)\n", "warning: something\n", "", "warning: something\n", 1 << 10, 1 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newFakeRunner()
			r.outputs["iptables -V"] = fakeResult{out: tc.output}
			c := &Collector{Runner: &noisyRunner{r, tc.stderr}, Progress: &Progress{}}
			var out bytes.Buffer
			cmds := []NodeCommand{IPTablesVersion(), NFTVersion()}
			stderr, err := c.run(context.Background(), Target{}, cmds, Sink{
				Open: func(i int) (io.Writer, error) {
					if i == 0 {
						return &out, nil
					}
					return io.Discard, nil
				},
				Done: func(int, int) {},
			})
			if (err == nil) != (tc.wantErr == "") || err != nil && !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("run: %v, want %q", err, tc.wantErr)
			}
			var le *LimitError
			if tc.wantErr != "" && !errors.As(err, &le) {
				t.Errorf("run: %T, want a *LimitError", err)
			}
			if len(stderr) > tc.maxStderr || !strings.HasSuffix(stderr, tc.wantStderr) {
				t.Errorf("stderr kept: %d bytes ending %q, want at most %d ending %q", len(stderr), stderr[max(len(stderr)-20, 0):], tc.maxStderr, tc.wantStderr)
			}
			if out.Len() > tc.maxOutput {
				t.Errorf("iptables -V: %d bytes written, want at most %d", out.Len(), tc.maxOutput)
			}
		})
	}
}

// The remote runner's stderr keeps its first 64 KiB, and never fails the
// stream it is written by.
func TestStderrBuffer(t *testing.T) {
	var b stderrBuffer
	chunk := []byte(strings.Repeat("e", 10<<10) + "\n")
	for range 100 {
		if n, err := b.Write(chunk); n != len(chunk) || err != nil {
			t.Fatalf("Write = %d, %v: a full stderr must not fail the command", n, err)
		}
	}
	if s := b.String(); len(s) != maxStderr+len(truncatedNote) || !strings.HasSuffix(s, "… (truncated)\n") {
		t.Errorf("kept %d bytes ending %q", len(s), s[len(s)-20:])
	}
}
