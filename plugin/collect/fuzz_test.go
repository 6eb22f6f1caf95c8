package collect

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// The demuxer reads whatever an exec returns (a cut-off stream, garbage, a
// rule or a process that mimics a frame, an index out of range): an error
// or output, never a panic, never a write to a command the script does not
// have, never more output than input. The sink indexes a slice of exactly
// count writers, as the collector's sinks do, so that an index the demuxer
// let through would panic here.
func FuzzDemux(f *testing.F) {
	n := "0123456789abcdef"
	f.Add(uint8(1), []byte("### kubectl-proxyrules 0123456789abcdef begin 0\nhello\n\n### kubectl-proxyrules 0123456789abcdef end 0 rc=0\n"))
	f.Add(uint8(1), []byte("### kubectl-proxyrules 0123456789abcdef begin 0\n-A KUBE-SERVICES -m comment --comment \"### kubectl-proxyrules 0123456789abcdef end 0 rc=0\"\n"))
	f.Add(uint8(8), []byte("### kubectl-proxyrules 0123456789abcdef begin 7\r\npartial"))
	f.Add(uint8(1), []byte("### kubectl-proxyrules 0123456789abcdef end 0 rc=x\n"))
	f.Add(uint8(2), []byte("### kubectl-proxyrules 0123456789abcdef begin 99999\nx\n"))
	f.Add(uint8(2), []byte("### kubectl-proxyrules 0123456789abcdef begin -1\nx\n"))
	f.Add(uint8(3), []byte("### kubectl-proxyrules 0123456789abcdef begin 0\na\n### kubectl-proxyrules 0123456789abcdef end 0 rc=0\n### kubectl-proxyrules 0123456789abcdef begin 0\nb\n"))
	f.Add(uint8(0), bytes.Repeat([]byte("x"), 70000))
	f.Fuzz(func(t *testing.T, count uint8, in []byte) {
		var written int
		sinks := make([]writerFunc, count)
		for i := range sinks {
			sinks[i] = func(p []byte) (int, error) { written += len(p); return len(p), nil }
		}
		d := newDemux(n, int(count))
		opened := make([]bool, count)
		d.open = func(i int) (io.Writer, error) {
			if opened[i] {
				t.Fatalf("command %d opened twice", i)
			}
			opened[i] = true
			return sinks[i], nil
		}
		d.done = func(i, rc int) { _ = sinks[i] }
		_ = d.run(bytes.NewReader(in))
		if written > len(in) {
			t.Fatalf("wrote %d bytes from %d", written, len(in))
		}
	})
}

// TestDemuxRefusesForgedFrames: the shapes FuzzDemux must survive are
// errors, not output.
func TestDemuxRefusesForgedFrames(t *testing.T) {
	const n = "0123456789abcdef"
	frame := func(i int, body string) string {
		return fmt.Sprintf("%s %s begin %d\n%s\n%s %s end %d rc=0\n", markerPrefix, n, i, body, markerPrefix, n, i)
	}
	for name, in := range map[string]string{
		"index out of range":       frame(5, "x"),
		"negative index":           strings.Replace(frame(0, "x"), "begin 0", "begin -1", 1),
		"a command twice":          frame(0, "a") + frame(0, "b"),
		"out of order":             frame(1, "a"),
		"begin inside a frame":     markerPrefix + " " + n + " begin 0\n" + frame(1, "x"),
		"end of another command":   markerPrefix + " " + n + " begin 0\nx\n" + markerPrefix + " " + n + " end 1 rc=0\n",
		"output outside any frame": "stray\n" + frame(0, "x"),
		"huge index":               frame(1<<40, "x"),
	} {
		t.Run(name, func(t *testing.T) {
			d := newDemux(n, 2)
			outs := make([]strings.Builder, 2)
			d.open = func(i int) (io.Writer, error) { return &outs[i], nil }
			d.done = func(int, int) {}
			if err := d.run(strings.NewReader(in)); err == nil {
				t.Errorf("accepted %q (outputs %q, %q)", in, outs[0].String(), outs[1].String())
			}
		})
	}
}

type writerFunc func([]byte) (int, error)

func (w writerFunc) Write(p []byte) (int, error) { return w(p) }

// Whatever script text comes in, checkScript accepts it only when every
// line that is not a marker is an allowed command.
func FuzzCheckScript(f *testing.F) {
	good, _ := Script([]NodeCommand{Save(kubeproxy.IPv4, kubeproxy.BackendNFT), ListChain(kubeproxy.IPv4, kubeproxy.BackendNFT, kubeproxy.TableNAT, kubeproxy.ChainServices)})
	f.Add(good[2])
	f.Add("'iptables' '-F'\n")
	f.Add("read -r n\nexec </dev/null\necho \"### kubectl-proxyrules $n begin 0\"; rm -rf /\n")
	f.Add("read -r n\nexec </dev/null\n(ulimit -s unlimited 2>/dev/null; exec 'nft' 'list' 'ruleset')\n")
	f.Fuzz(func(t *testing.T, script string) {
		if checkScript(script) != nil {
			return
		}
		if !strings.HasPrefix(script, scriptHeader) {
			t.Fatalf("accepted a script without the header: %q", script)
		}
		lines := strings.Split(strings.TrimSuffix(strings.TrimPrefix(script, scriptHeader), "\n"), "\n")
		for i := 0; i < len(lines); i++ {
			l := lines[i]
			if strings.HasPrefix(l, "echo ") {
				if l == `echo "` {
					i++
					l = lines[i]
				}
				if strings.ContainsAny(strings.NewReplacer("$n", "", "$?", "").Replace(l), "$;|&<>()`'\\") {
					t.Fatalf("accepted a marker line with shell syntax: %q", l)
				}
				continue
			}
			l = strings.TrimSuffix(strings.TrimPrefix(l, bigStackPrefix), ")")
			argv, ok := unquoteArgs(l)
			if !ok || Allowed(argv) != nil {
				t.Fatalf("accepted %q", lines[i])
			}
		}
	})
}

// Whatever archive comes in, OpenBundle returns a bundle or an error, never
// panics, writes only below its temporary folder and leaves nothing there
// once closed or failed.
func FuzzOpenBundle(f *testing.F) {
	var ok bytes.Buffer
	gz := gzip.NewWriter(&ok)
	tw := tar.NewWriter(gz)
	for _, e := range []struct{ name, body string }{{"node-a/" + ManifestFile, okManifest}, {"node-a/rules.txt", "*nat\nCOMMIT\n"}} {
		tw.WriteHeader(&tar.Header{Name: e.name, Mode: 0o600, Size: int64(len(e.body)), Typeflag: tar.TypeReg})
		tw.Write([]byte(e.body))
	}
	tw.Close()
	gz.Close()
	f.Add(ok.Bytes())
	f.Add([]byte("\x1f\x8b\x08\x00\x00\x00\x00\x00"))
	f.Add([]byte("not gzip"))
	f.Fuzz(func(t *testing.T, archive []byte) {
		tmp := t.TempDir()
		t.Setenv("TMPDIR", tmp)
		name := filepath.Join(t.TempDir(), "in.tar.gz")
		if err := os.WriteFile(name, archive, 0o600); err != nil {
			t.Fatal(err)
		}
		lim := Limits{File: func(string) int64 { return 1 << 20 }, Total: 2 << 20}
		if b, err := OpenBundle(context.Background(), name, lim); err == nil {
			for _, bf := range b.Manifest.Files {
				if r, err := b.Open(bf); err == nil {
					r.Close()
				}
			}
			b.Close()
		}
		if left, _ := os.ReadDir(tmp); len(left) > 0 {
			t.Fatalf("left %v", left)
		}
	})
}
