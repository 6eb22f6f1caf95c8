package collect

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// read probes the node, then reads what the scope needs.
// listing has the API objects a service-scoped read takes the Service's
// chain names from, and the conntrack reads their addresses (waited for
// only there: the listing goes on while the rest is read); metricsPort is
// where kube-proxy answers.
func (c *Collector) read(ctx context.Context, w *bundleWriter, t Target, listing *pendingObjects, metricsPort int) error {
	get, closeForward := c.metricsGetter(t, metricsPort)
	defer closeForward()
	stopProbe := c.Timings.Start(PhaseProbe)
	probe, err := c.askMode(ctx, w, metricsPort, get)
	withRead := err == nil && probeWithRead(probe)
	if err == nil && !withRead {
		probe, err = c.probeNode(ctx, t, probe)
	}
	stopProbe(0)
	if err != nil {
		return err
	}
	w.man.ProxyMode, w.man.Backend = probe.ProxyMode, probe.Backend
	// The conntrack counters' first read (and the sysctls) before the
	// rules; the table and the second after them: their reads are the
	// wait between. Only for the commands that judge them: the second
	// read waits for the first to be some seconds old.
	if c.Kernel {
		stop := c.Timings.Start(PhaseKernel)
		err := c.readConntrackBefore(ctx, w, t)
		stop(0)
		if err != nil {
			return err
		}
	}
	// A first scrape of /metrics before the rules are read, the second
	// after: what changed between them is kube-proxy's recent sync rate
	// and duration, which the lifetime means hide.
	var before bytes.Buffer
	start := time.Now()
	stopMetrics := c.Timings.Start(PhaseMetrics)
	err = get(ctx, "/metrics", &before)
	stopMetrics(int64(before.Len()))
	if err == nil {
		f := BundleFile{Path: "metrics-before.txt", Kind: KindMetrics, Command: fmt.Sprintf("GET 127.0.0.1:%d/metrics", metricsPort), Seconds: time.Since(start).Seconds()}
		if err := w.write(f, before.Bytes()); err != nil {
			return err
		}
	} else if ctx.Err() != nil {
		return ctx.Err()
	}
	if withRead {
		if probe, err = c.readProbedRules(ctx, w, t, probe); err != nil {
			return err
		}
		w.man.Backend = probe.Backend
	} else if err := c.readRules(ctx, w, t, probe, listing); err != nil {
		return err
	}
	if c.Kernel {
		objects, err := listing.wait()
		if err != nil {
			return err
		}
		stop := c.Timings.Start(PhaseKernel)
		err = c.readConntrack(ctx, w, t, objects)
		stop(0)
		if err != nil {
			return err
		}
	}
	stopMetrics = c.Timings.Start(PhaseMetrics)
	defer func() { stopMetrics(0) }()
	for _, ep := range []struct{ path, file, kind string }{
		{"/metrics", "metrics.txt", KindMetrics},
		{"/configz", "configz.json", KindConfig},
	} {
		var buf bytes.Buffer
		start := time.Now()
		if err := get(ctx, ep.path, &buf); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if refused := portForwardRefused(err); refused != "" {
				w.warn("kube-proxy's metrics and configuration were not read: %s to pod %s/%s (RBAC: create pods/portforward in namespace %s, "+
					"which the opt-in `kubectl apply -f %smetrics/` grants); counts and config checks are skipped", refused, t.Namespace, t.Pod, t.Namespace, RBACFile)
				break
			}
			w.warn("kube-proxy's %s did not answer: %s (kube-proxy serves it on metricsBindAddress, 127.0.0.1:%d by default; counts and config checks are skipped)", ep.path, firstLine(err.Error()), metricsPort)
			continue
		}
		f := BundleFile{Path: ep.file, Kind: ep.kind, Command: fmt.Sprintf("GET 127.0.0.1:%d%s", metricsPort, ep.path), Seconds: time.Since(start).Seconds()}
		if err := w.write(f, buf.Bytes()); err != nil {
			return err
		}
	}
	return nil
}

// readRules reads the rules: only a Service's chains where that is
// faster (readService), else the whole tables (FullPlan).
func (c *Collector) readRules(ctx context.Context, w *bundleWriter, t Target, probe Probe, listing *pendingObjects) error {
	stopRead, files := c.Timings.Start(PhaseRead), w.fileCount()
	defer func() { stopRead(w.bytesSince(files)) }()
	if c.ServiceName != "" {
		objects, err := listing.wait()
		if err != nil {
			return err
		}
		if done, err := c.readService(ctx, w, t, probe, objects); done || err != nil {
			return err
		}
	}
	if err := c.runToFiles(ctx, w, t, nil, FullPlan(probe, c.Reader), "reading the node's rules"); err != nil {
		return err
	}
	c.noteMode(w, probe)
	return nil
}

// noteMode records what the read says of the mode the probe took.
func (c *Collector) noteMode(w *bundleWriter, probe Probe) {
	if probe.ProxyMode == kubeproxy.ModeIPVS {
		w.noteIPVS(probe)
	}
	if probe.fromConfig && !w.readNFTTable(kubeproxy.NFTTable) {
		w.man.ProxyMode = "" // the ConfigMap said nftables; the node has no such table
	}
}

// readProbedRules reads the whole tables in nftables mode with the probe
// in the same exec (probeWithRead): kube-proxy's tables and the legacy
// backend's first, then whatever else the probe found to read (its chains
// in iptables-nft, or iptables-nft's tables where nft would not run).
// It returns the probe's findings. A Service's read is the same: on
// nftables nodes it reads the whole tables (ChainPlan).
func (c *Collector) readProbedRules(ctx context.Context, w *bundleWriter, t Target, mode Probe) (Probe, error) {
	stopRead, files := c.Timings.Start(PhaseRead), w.fileCount()
	defer func() { stopRead(w.bytesSince(files)) }()
	pc := newProbeCommands(mode)
	first := FullPlan(assumedNFTProbe(mode), c.Reader)
	if err := c.runToFiles(ctx, w, t, pc, first, "probing the node and reading its rules"); err != nil {
		return mode, err
	}
	probe := pc.finish(mode)
	done := map[string]bool{}
	for _, cmd := range first {
		done[cmd.ID] = true
	}
	var rest []NodeCommand
	for _, cmd := range FullPlan(probe, c.Reader) {
		if !done[cmd.ID] {
			rest = append(rest, cmd)
		}
	}
	if len(rest) > 0 {
		if err := c.runToFiles(ctx, w, t, nil, rest, "reading what the probe found besides"); err != nil {
			return probe, err
		}
	}
	c.noteMode(w, probe)
	return probe, nil
}

// metricsGetter returns the GET of kube-proxy's endpoints that one read
// uses: through one Forward opened at the first request and closed by done,
// reopened after a request that got no answer (the connection may be gone).
func (c *Collector) metricsGetter(t Target, port int) (get GetFunc, done func()) {
	var open GetFunc
	var refused error // a port-forward the API server refused: not asked again
	closeOpen := func() {}
	get = func(ctx context.Context, path string, w io.Writer) error {
		if refused != nil {
			return refused
		}
		if open == nil {
			g, d, err := c.Runner.Forward(ctx, t, port)
			if portForwardRefused(err) != "" {
				refused = err
			}
			if err != nil {
				return err
			}
			open, closeOpen = g, d
		}
		err := open(ctx, path, w)
		var terr *transportError
		if errors.As(err, &terr) {
			closeOpen()
			open, closeOpen = nil, func() {}
		}
		return err
	}
	return get, func() { closeOpen() }
}

// readNFTTable says whether an nftables table of that name was read, in
// either family.
func (w *bundleWriter) readNFTTable(name string) bool {
	for _, f := range w.files() {
		if f.Kind == KindRuleset && f.Bytes > 0 && f.Error == "" && strings.HasPrefix(f.Command, "nft") && strings.HasSuffix(f.Command, " "+name) {
			return true
		}
	}
	return false
}

func (c *Collector) execError(ctx context.Context, err error, t Target, stderr string) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var over *LimitError
	if errors.As(err, &over) {
		return err // an output larger than its cap says so itself
	}
	msg := err.Error()
	// Through the WebSocket upgrade a refusal arrives as text, not a Status.
	if apierrors.IsForbidden(err) || strings.Contains(msg, "is forbidden") {
		verb := "create"
		if strings.Contains(msg, "cannot get resource") {
			verb = "get" // the WebSocket upgrade is a GET
		}
		return &Forbidden{Verb: verb, Resource: "pods/exec", Namespace: t.Namespace, Why: "run the read commands in pod " + t.Pod,
			Hint: "Exec needs both get (WebSocket) and create (SPDY) on pods/exec", Err: err}
	}
	msg = firstLine(msg)
	if s := strings.TrimSpace(stderr); s != "" {
		msg += ": " + firstLine(s)
	}
	return fmt.Errorf("exec in %s/%s failed: %s", t.Namespace, t.Pod, msg)
}

// runToFiles runs cmds in one exec, streaming each output into its file.
// A failed nft -j (an nft built without JSON) is retried as text, unless
// the probe's nft --version failed in the same exec (recordRun).
// The probe's commands pc, when not nil, run first in the same exec, into
// its own buffers.
func (c *Collector) runToFiles(ctx context.Context, w *bundleWriter, t Target, pc *probeCommands, cmds []NodeCommand, what string) error {
	var pre []NodeCommand
	preSink := Sink{Open: func(int) (io.Writer, error) { return io.Discard, nil }, Done: func(int, int) {}}
	if pc != nil {
		pre, preSink = pc.cmds, pc.sink()
	}
	c.Progress.Step("%s (%d commands in one exec)", what, len(pre)+len(cmds))
	files := make([]*os.File, len(cmds))
	counters := make([]*countingWriter, len(cmds))
	starts := make([]time.Time, len(cmds))
	rcs := make([]int, len(cmds))
	for i := range rcs {
		rcs[i] = -1
	}
	defer func() {
		for _, f := range files {
			if f != nil {
				f.Close()
			}
		}
	}()
	stderr, err := c.run(ctx, t, append(slices.Clip(pre), cmds...), Sink{
		Open: func(i int) (io.Writer, error) {
			if i < len(pre) {
				return preSink.Open(i)
			}
			i -= len(pre)
			if files[i] == nil {
				f, err := w.create(cmds[i].FileName())
				if err != nil {
					return nil, err
				}
				files[i] = f
			} else if err := restart(files[i]); err != nil { // run again after a cut
				return nil, err
			}
			f := files[i]
			starts[i] = time.Now()
			counters[i] = &countingWriter{w: c.teeOutput(cmds[i], f), progress: c.Progress, label: strings.Join(cmds[i].Argv, " "), last: time.Now()}
			return counters[i], nil
		},
		Done: func(i, rc int) {
			if i < len(pre) {
				preSink.Done(i, rc)
				return
			}
			i -= len(pre)
			c.teeEnd(cmds[i], rc)
			rcs[i] = rc
			if counters[i] != nil {
				counters[i].finish(time.Since(starts[i]))
			}
		},
	})
	if err != nil {
		return c.execError(ctx, err, t, stderr)
	}
	if retry := recordRun(w, t, pc, cmds, rcs, counters, stderr); len(retry) > 0 {
		return c.runToFiles(ctx, w, t, nil, retry, "reading again what failed")
	}
	return nil
}

// recordRun records the files of an exec's commands, warns of those that
// failed, and returns the fallbacks to run for them.
func recordRun(w *bundleWriter, t Target, pc *probeCommands, cmds []NodeCommand, rcs []int, counters []*countingWriter, stderr string) (retry []NodeCommand) {
	// nft --version failed in this exec (an image without nft): its
	// failed listings are not tried again as text, which would fail too.
	noNFT, warnedNFT := pc != nil && pc.rcs[probeNFTVersion] > 0, false
	failed := failedCommands(rcs)
	if pc != nil {
		failed += failedCommands(pc.rcs)
	}
	for i, cmd := range cmds {
		bf := BundleFile{Path: cmd.FileName(), Kind: cmd.Kind, Command: strings.Join(cmd.Argv, " ")}
		if counters[i] != nil {
			bf.Bytes, bf.Seconds = counters[i].n, counters[i].seconds
		}
		if rcs[i] != 0 {
			status := fmt.Sprintf("exit status %d", rcs[i])
			bf.Error = status
			if noNFT && cmd.Program == "nft" {
				bf.Error += " (nft --version failed too: not read again)"
				bf.Kind = KindFailed
				if !warnedNFT {
					w.warn("nft does not run in pod %s/%s (nft --version: exit status %d): kube-proxy's nftables tables could not be read "+
						"(an image with nft is needed for nftables mode; --image picks another)", t.Namespace, t.Pod, pc.rcs[probeNFTVersion])
				}
				warnedNFT = true
			} else if len(cmd.Fallback) > 0 {
				var names []string
				for _, f := range cmd.Fallback {
					f.Optional = f.Optional || cmd.Optional
					retry = append(retry, f)
					names = append(names, strings.Join(f.Argv, " "))
				}
				bf.Error += " (read again with " + strings.Join(names, ", ") + ")"
				bf.Kind = KindFailed // kept for the record, not read
				if !cmd.Optional {
					w.warn("%s failed (%s)%s: reading with %s instead", bf.Command, status, stderrHint(stderr, failed), strings.Join(names, ", "))
				}
			} else if bf.Bytes == 0 && !cmd.Optional {
				w.warn("%s failed (%s)%s", bf.Command, bf.Error, stderrHint(stderr, failed))
			}
		}
		w.add(bf)
	}
	return retry
}

// run runs cmds in as few execs as their scripts fit (Batches): one exec
// for the usual handful, a few for a Service with thousands of endpoints.
// The sink sees the indices of cmds. Each command's output is capped
// (outputCap), and so is the stderr kept (maxStderr).
func (c *Collector) run(ctx context.Context, t Target, cmds []NodeCommand, sink Sink) (string, error) {
	var stderr stderrBuffer
	var over *LimitError
	off := 0
	for _, batch := range Batches(cmds) {
		base := off
		bs := Sink{
			Open: func(i int) (io.Writer, error) {
				w, err := sink.Open(base + i)
				if err != nil {
					return nil, err
				}
				return &cappedOutput{w: w, left: outputCap(cmds[base+i]), cmd: cmds[base+i], over: &over}, nil
			},
			Done: func(i, rc int) { sink.Done(base+i, rc) },
		}
		s, err := c.Runner.Run(ctx, t, batch, bs)
		if over != nil {
			return stderr.String(), over
		}
		if err != nil && ctx.Err() == nil && brokenConnection(err) {
			// The connection broke under the exec (the API server or the
			// kubelet went away mid-stream): the commands only read, so
			// they run once more, each output starting afresh.
			c.Progress.Step("the exec was cut (%s): running it again", firstLine(err.Error()))
			s, err = c.Runner.Run(ctx, t, batch, bs)
		}
		stderr.Write([]byte(s))
		if over != nil {
			return stderr.String(), over
		}
		if err != nil {
			return stderr.String(), err
		}
		off += len(batch)
	}
	return stderr.String(), nil
}

// stderrHint is what a failed command printed, ": first line", for its
// warning. The commands of an exec share one stderr: with more than one
// failed (failedCommands), which line is whose cannot be told, so the
// hint gives the exec's first lines as such instead of one as the
// command's.
func stderrHint(stderr string, failed int) string {
	s := strings.TrimSpace(stderr)
	if s == "" {
		return ""
	}
	if failed <= 1 {
		return ": " + firstLine(s)
	}
	lines := strings.SplitN(s, "\n", 4)
	for i := range lines {
		lines[i] = strconv.Quote(strings.TrimSpace(lines[i]))
	}
	if len(lines) > 3 {
		lines[3] = "…"
	}
	return fmt.Sprintf("; %d commands of the same exec failed, whose stderr says %s", failed, strings.Join(lines, ", "))
}

// failedCommands counts the commands that exited non-zero among rcs
// (-1: not run).
func failedCommands(rcs ...[]int) int {
	n := 0
	for _, list := range rcs {
		for _, rc := range list {
			if rc > 0 {
				n++
			}
		}
	}
	return n
}

// countingWriter counts bytes and reports progress for big outputs.
type countingWriter struct {
	w        io.Writer
	n        int64
	progress *Progress
	label    string
	last     time.Time
	seconds  float64
}

func (cw *countingWriter) Write(p []byte) (int, error) {
	n, err := cw.w.Write(p)
	cw.n += int64(n)
	if time.Since(cw.last) > time.Second {
		cw.last = time.Now()
		cw.progress.Bytes(cw.label, cw.n)
	}
	return n, err
}

func (cw *countingWriter) finish(d time.Duration) {
	cw.seconds = d.Seconds()
	cw.progress.Done(cw.label, cw.n, d)
}

// brokenConnection reports whether an exec failed because its connection
// broke, not because of what it ran or who ran it.
func brokenConnection(err error) bool {
	msg := err.Error()
	for _, s := range []string{"connection reset by peer", "broken pipe", "use of closed network connection", "unexpected EOF", "websocket: close 1006"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// restart empties a file being written, for its output to start afresh.
func restart(f *os.File) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err := f.Seek(0, io.SeekStart)
	return err
}

// portForwardRefused says how the API server refused a port-forward (RBAC
// or an admission policy), or "" for any other error. The refusal arrives
// as the text of a failed connection upgrade, not as a typed API error.
func portForwardRefused(err error) string {
	if err == nil {
		return ""
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, `"pods/portforward"`) && isRBAC(err):
		return "you may not port-forward"
	case strings.Contains(msg, "ValidatingAdmissionPolicy"):
		return "an admission policy refused the port-forward"
	}
	return ""
}
