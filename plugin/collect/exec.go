package collect

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
)

// Target is the container commands run in.
type Target struct {
	Namespace, Pod, Container string
}

// Sink receives the outputs of a batch of commands as they stream.
type Sink struct {
	// Open may be called again for a command when its exec is run again
	// (its connection was cut): the output starts afresh.
	Open func(i int) (io.Writer, error)
	Done func(i int, rc int)
}

// Runner runs read-only commands in a pod and reads HTTP endpoints the pod's
// network reaches. The remote runner is the only code that talks to a node;
// tests use a local one.
type Runner interface {
	// Run runs cmds (each passes Check) in one round trip where the image
	// has a shell, one by one otherwise. Messages the commands print on
	// stderr are returned with the error of the batch, if any.
	Run(ctx context.Context, t Target, cmds []NodeCommand, sink Sink) (stderr string, err error)
	// Forward opens a way to http://127.0.0.1:PORT in the pod's network:
	// get fetches a path there, as often as the caller asks, until done.
	Forward(ctx context.Context, t Target, port int) (get GetFunc, done func(), err error)
}

// GetFunc fetches a path of an HTTP server reached through a Forward.
type GetFunc func(ctx context.Context, path string, w io.Writer) error

// RemoteRunner execs through the API server (pods/exec, pods/portforward),
// over WebSocket with a fall back to SPDY, as kubectl does.
type RemoteRunner struct {
	Config *rest.Config
	Client kubernetes.Interface
}

func nonce() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Run implements Runner. The script's nonce goes to the shell on stdin.
func (r *RemoteRunner) Run(ctx context.Context, t Target, cmds []NodeCommand, sink Sink) (string, error) {
	for _, c := range cmds {
		if err := c.Check(); err != nil {
			return "", err
		}
	}
	argv, err := Script(cmds)
	if err != nil {
		return "", err
	}
	n := nonce()
	var stderr stderrBuffer
	pr, pw := io.Pipe()
	d := newDemux(n, len(cmds))
	d.open, d.done = sink.Open, sink.Done
	demuxed := make(chan error, 1)
	go func() {
		err := d.run(pr)
		pr.CloseWithError(err) // unblocks the stream if the sink failed
		demuxed <- err
	}()
	err = r.stream(ctx, t, argv, strings.NewReader(n+"\n"), pw, &stderr)
	pw.CloseWithError(err)
	if derr := <-demuxed; err == nil {
		err = derr
	}
	if err != nil && noShell(err, stderr.String()) {
		// An image without sh: one exec per command.
		return r.runEach(ctx, t, cmds, sink)
	}
	return stderr.String(), err
}

func (r *RemoteRunner) runEach(ctx context.Context, t Target, cmds []NodeCommand, sink Sink) (string, error) {
	var all stderrBuffer
	for i, c := range cmds {
		w, err := sink.Open(i)
		if err != nil {
			return all.String(), err
		}
		err = r.stream(ctx, t, c.Argv, nil, w, &all)
		rc := 0
		if err != nil {
			if ctx.Err() != nil {
				return all.String(), ctx.Err()
			}
			rc = exitCode(err)
		}
		sink.Done(i, rc)
	}
	return all.String(), nil
}

func noShell(err error, stderr string) bool {
	s := err.Error() + " " + stderr
	return strings.Contains(s, `"sh"`) && (strings.Contains(s, "not found") || strings.Contains(s, "no such file"))
}

// exitCode reads a command's exit status from an exec error (1 when the
// status is unknown, as kwok reports it).
func exitCode(err error) int {
	type exitStatus interface{ ExitStatus() int }
	if e, ok := err.(exitStatus); ok {
		return e.ExitStatus()
	}
	return 1
}

// stream is the one place a command reaches a node. argv is either an
// allowed command or a Script of allowed commands.
func (r *RemoteRunner) stream(ctx context.Context, t Target, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if err := allowedOrScript(argv); err != nil {
		return err
	}
	req := r.Client.CoreV1().RESTClient().Post().Resource("pods").Namespace(t.Namespace).Name(t.Pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: t.Container, Command: argv, Stdin: stdin != nil, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	spdyExec, err := remotecommand.NewSPDYExecutor(r.Config, "POST", req.URL())
	if err != nil {
		return err
	}
	wsExec, err := remotecommand.NewWebSocketExecutor(r.Config, "GET", req.URL().String())
	if err != nil {
		return err
	}
	exec, err := remotecommand.NewFallbackExecutor(wsExec, spdyExec, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return err
	}
	return exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: stdout, Stderr: stderr})
}

// allowedOrScript accepts an allowed command, or sh -c with a script that
// Script would write for allowed commands. The script is parsed back, not
// trusted: every command line in it must be allowed.
func allowedOrScript(argv []string) error {
	if len(argv) == 3 && argv[0] == "sh" && argv[1] == "-c" {
		return checkScript(argv[2])
	}
	return Allowed(argv)
}

// The lines of a script other than commands, exactly as Script writes them.
var (
	beginLine = regexp.MustCompile(`^echo "` + markerPrefix + ` \$n begin [0-9]{1,6}"$`)
	endLine   = regexp.MustCompile(`^` + markerPrefix + ` \$n end [0-9]{1,6} rc=\$\?"$`)
)

// checkScript verifies a script line by line against the shape Script
// writes: its header, marker echoes, and allowed commands, optionally in
// the big-stack subshell.
func checkScript(s string) error {
	if !strings.HasPrefix(s, scriptHeader) {
		return fmt.Errorf("refusing to run a script that does not start as Script writes it")
	}
	lines := strings.Split(strings.TrimSuffix(strings.TrimPrefix(s, scriptHeader), "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		switch {
		case beginLine.MatchString(l):
		case l == `echo "` && i+1 < len(lines) && endLine.MatchString(lines[i+1]):
			i++
		default:
			cmd := l
			if strings.HasPrefix(cmd, bigStackPrefix) && strings.HasSuffix(cmd, ")") {
				cmd = strings.TrimSuffix(strings.TrimPrefix(cmd, bigStackPrefix), ")")
			}
			argv, ok := unquoteArgs(cmd)
			if !ok {
				return fmt.Errorf("refusing to run a script line that is not a quoted command: %.80q", l)
			}
			if err := Allowed(argv); err != nil {
				return err
			}
		}
	}
	return nil
}

// unquoteArgs reads 'a' 'b' 'c' as written by shellQuote (no embedded
// quotes: allowed arguments have none).
func unquoteArgs(s string) ([]string, bool) {
	var out []string
	for _, f := range strings.Split(s, " ") {
		if len(f) < 2 || f[0] != '\'' || f[len(f)-1] != '\'' || strings.Contains(f[1:len(f)-1], "'") {
			return nil, false
		}
		out = append(out, f[1:len(f)-1])
	}
	return out, len(out) > 0
}

// Forward implements Runner with one port-forward to the pod (kube-proxy's
// metrics listen on the node's loopback, which only the pod's network
// namespace reaches; no curl is needed in the image). Each GET is a stream
// of the one connection, where a port-forward per request would cost a TLS
// handshake with the API server and one from it to the kubelet.
func (r *RemoteRunner) Forward(ctx context.Context, t Target, port int) (get GetFunc, done func(), err error) {
	quietOnce.Do(quietClosedListeners)
	req := r.Client.CoreV1().RESTClient().Post().Resource("pods").Namespace(t.Namespace).Name(t.Pod).SubResource("portforward")
	transport, upgrader, err := spdy.RoundTripperFor(r.Config)
	if err != nil {
		return nil, nil, err
	}
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, "POST", req.URL())
	if ws, err := portforward.NewSPDYOverWebsocketDialer(req.URL(), r.Config); err == nil {
		dialer = portforward.NewFallbackDialer(ws, dialer, func(err error) bool {
			return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
		})
	}
	pfCtx, cancel := context.WithCancel(ctx)
	ready := make(chan struct{})
	pfErr := &lockedBuffer{}
	pf, err := portforward.NewOnAddressesWithContext(pfCtx, dialer, []string{"127.0.0.1"}, []string{fmt.Sprintf("0:%d", port)}, ready, io.Discard, pfErr)
	if err != nil {
		cancel()
		return nil, nil, err
	}
	forwarded := make(chan error, 1)
	go func() { forwarded <- pf.ForwardPorts() }()
	select {
	case <-ready:
	case err := <-forwarded:
		cancel()
		return nil, nil, fmt.Errorf("port-forward to %s/%s:%d: %w", t.Namespace, t.Pod, port, err)
	case <-ctx.Done():
		cancel()
		return nil, nil, ctx.Err()
	}
	ports, err := pf.GetPorts()
	if err != nil || len(ports) == 0 {
		cancel()
		return nil, nil, fmt.Errorf("port-forward to %s/%s:%d: no local port", t.Namespace, t.Pod, port)
	}
	local := ports[0].Local
	get = func(ctx context.Context, path string, w io.Writer) error {
		seen := pfErr.Len()
		err := getLoopback(ctx, local, port, path, w)
		var terr *transportError
		if msg := strings.TrimSpace(pfErr.Since(seen)); errors.As(err, &terr) && msg != "" {
			// The port-forward says why better than the local connection.
			err = fmt.Errorf("GET 127.0.0.1:%d%s on the node: %s", port, path, firstLine(msg))
		}
		return err
	}
	done = func() {
		cancel()
		pf.Close()
	}
	return get, done, nil
}

// lockedBuffer collects what the port-forward writes from its goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Len()
}

// Since returns what was written after the first n bytes.
func (b *lockedBuffer) Since(n int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n > b.buf.Len() {
		return ""
	}
	return string(b.buf.Bytes()[n:])
}

// transportError is a GET that got no answer.
type transportError struct{ msg string }

func (e *transportError) Error() string { return e.msg }

// MaxHTTPBody bounds what one GET through the port-forward may return: the
// metrics of a node with 5,000 Services are well under 1 MB.
var MaxHTTPBody int64 = 64 << 20

// getLoopback fetches http://127.0.0.1:LOCAL/PATH, the local end of a
// port-forward, into w. A redirect is an error, never followed: it would
// leave the port-forward and go from the user's machine to wherever it
// points (169.254.169.254, ...). The body is capped at MaxHTTPBody.
func getLoopback(ctx context.Context, local uint16, port int, path string, w io.Writer) error {
	hctx, hcancel := context.WithTimeout(ctx, 60*time.Second)
	defer hcancel()
	url := fmt.Sprintf("http://127.0.0.1:%d%s", local, path)
	hreq, err := http.NewRequestWithContext(hctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	client := &http.Client{
		Transport:     &http.Transport{DisableKeepAlives: true, Proxy: nil},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	resp, err := client.Do(hreq)
	if err != nil {
		return &transportError{fmt.Sprintf("GET 127.0.0.1:%d%s on the node: %s", port, path, firstLine(err.Error()))}
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		return fmt.Errorf("GET 127.0.0.1:%d%s on the node: %s to %q, not followed: the plugin reads only what answers on the node's loopback", port, path, resp.Status, resp.Header.Get("Location"))
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET 127.0.0.1:%d%s on the node: %s", port, path, resp.Status)
	}
	n, err := io.Copy(w, io.LimitReader(resp.Body, MaxHTTPBody+1))
	if err == nil && n > MaxHTTPBody {
		return &LimitError{What: fmt.Sprintf("the answer to GET 127.0.0.1:%d%s", port, path), Limit: MaxHTTPBody}
	}
	return err
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}
