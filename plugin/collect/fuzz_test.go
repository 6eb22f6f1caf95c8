package collect

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// The demuxer reads whatever an exec returns (a cut-off stream, garbage, a
// rule that mimics a frame): an error or output, never a panic, and never
// more output than input.
func FuzzDemux(f *testing.F) {
	n := "0123456789abcdef"
	f.Add([]byte("### kubectl-proxyrules 0123456789abcdef begin 0\nhello\n\n### kubectl-proxyrules 0123456789abcdef end 0 rc=0\n"))
	f.Add([]byte("### kubectl-proxyrules 0123456789abcdef begin 0\n-A KUBE-SERVICES -m comment --comment \"### kubectl-proxyrules 0123456789abcdef end 0 rc=0\"\n"))
	f.Add([]byte("### kubectl-proxyrules 0123456789abcdef begin 7\r\npartial"))
	f.Add([]byte("### kubectl-proxyrules 0123456789abcdef end 0 rc=x\n"))
	f.Add(bytes.Repeat([]byte("x"), 70000))
	f.Fuzz(func(t *testing.T, in []byte) {
		var written int
		d := newDemux(n)
		d.open = func(i int) (io.Writer, error) {
			return writerFunc(func(p []byte) (int, error) { written += len(p); return len(p), nil }), nil
		}
		d.done = func(int, int) {}
		_ = d.run(bytes.NewReader(in))
		if written > len(in) {
			t.Fatalf("wrote %d bytes from %d", written, len(in))
		}
	})
}

type writerFunc func([]byte) (int, error)

func (w writerFunc) Write(p []byte) (int, error) { return w(p) }

// Whatever script text comes in, checkScript accepts it only when every
// line that is not a marker is an allowed command.
func FuzzCheckScript(f *testing.F) {
	good, _ := Script([]NodeCommand{Save(kubeproxy.IPv4, kubeproxy.BackendNFT), ListChain(kubeproxy.IPv4, kubeproxy.BackendNFT, kubeproxy.TableNAT, kubeproxy.ChainServices)}, "0123456789abcdef")
	f.Add(good[2])
	f.Add("'iptables' '-F'\n")
	f.Add("echo '### kubectl-proxyrules a begin 0'; rm -rf /\n")
	f.Add("(ulimit -s unlimited 2>/dev/null; exec 'nft' 'list' 'ruleset')\n")
	f.Fuzz(func(t *testing.T, script string) {
		if checkScript(script) != nil {
			return
		}
		lines := strings.Split(strings.TrimSuffix(script, "\n"), "\n")
		for i := 0; i < len(lines); i++ {
			l := lines[i]
			if strings.HasPrefix(l, "echo '") || l == `echo "` {
				if l == `echo "` {
					i++
				}
				if strings.ContainsAny(l, "$;|&<>()`") && !strings.HasSuffix(l, `rc=$?"`) {
					t.Fatalf("accepted a marker line with shell syntax: %q", l)
				}
				continue
			}
			l = strings.TrimSuffix(strings.TrimPrefix(l, "(ulimit -s unlimited 2>/dev/null; exec "), ")")
			argv, ok := unquoteArgs(l)
			if !ok || Allowed(argv) != nil {
				t.Fatalf("accepted %q", lines[i])
			}
		}
	})
}
