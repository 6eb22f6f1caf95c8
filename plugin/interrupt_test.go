//go:build linux

package plugin

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// TestCancelStopsLoadAndAnalysis: a cancelled command (the first Ctrl-C)
// returns at once from a parse or an analysis that does not look at its
// context, leaving it to end with the process (cmd's
// TestFirstInterruptStopsParse holds the whole command to that).
func TestCancelStopsLoadAndAnalysis(t *testing.T) {
	dump, err := os.ReadFile(smallFixture + "iptables/save-nft-ipv4.txt")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		// run starts the work; started is closed once it is under way.
		run func(ctx context.Context, t *testing.T, started chan<- struct{}) error
	}{
		{"parse", func(ctx context.Context, t *testing.T, started chan<- struct{}) error {
			// The dump comes through a FIFO that stops halfway: the
			// parse waits for the rest, as a slow one computes.
			fifo := filepath.Join(t.TempDir(), "rules.txt")
			if err := syscall.Mkfifo(fifo, 0o600); err != nil {
				t.Skipf("mkfifo: %v", err)
			}
			go func() {
				w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
				if err != nil {
					return
				}
				t.Cleanup(func() { w.Close() }) // the abandoned parse ends
				w.Write(dump[:len(dump)/2])
				close(started)
			}()
			ld := &Loader{ErrOut: io.Discard}
			_, err := ld.Load(ctx, Request{Files: InputFiles{Dumps: []string{fifo}}})
			return err
		}},
		{"analysis", func(ctx context.Context, t *testing.T, started chan<- struct{}) error {
			release := make(chan struct{})
			t.Cleanup(func() { close(release) })
			var out bytes.Buffer
			o := &analysisOptions{IOStreams: genericiooptions.IOStreams{Out: &out, ErrOut: io.Discard}, ctx: ctx, loader: &Loader{ErrOut: io.Discard}}
			req := Request{Files: InputFiles{Dumps: []string{smallFixture + "iptables/save-nft-ipv4.txt"}}}
			return o.runRequest(req, func(*Loaded) (built, error) {
				close(started)
				<-release // an analysis that takes long
				return built{}, errors.New("the analysis ran to its end")
			})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			started := make(chan struct{})
			done := make(chan error, 1)
			go func() { done <- tc.run(ctx, t, started) }()
			select {
			case <-started:
			case err := <-done:
				t.Fatalf("ended before it was cancelled: %v", err)
			case <-time.After(20 * time.Second):
				t.Fatal("did not start")
			}
			cancel()
			select {
			case err := <-done:
				if !errors.Is(err, context.Canceled) {
					t.Errorf("err = %v, want context.Canceled", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the cancelled command did not return")
			}
		})
	}
}
