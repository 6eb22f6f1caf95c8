package collect

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
)

// readConntrackBefore reads the sysctls and the counters a first time, in
// one exec. A refused or failed exec (an admission policy applied before
// these reads existed) is a warning: the rules are still read.
func (c *Collector) readConntrackBefore(ctx context.Context, w *bundleWriter, t Target) error {
	ct := &ConntrackRead{Total: -1}
	w.man.Conntrack = ct
	cmds := []NodeCommand{SysctlsCommand(), ConntrackStatsCommand(idStatsBefore)}
	res, stderr, err := c.runConntrack(ctx, w, t, cmds, -1)
	if err != nil {
		return c.conntrackFailed(ctx, w, err, t, stderr)
	}
	for i, cmd := range cmds {
		// grep exits 2 when a sysctl's file is absent (net/bridge/ without
		// br_netfilter) and still prints the others: only an empty
		// output is a failure.
		if err := w.write(res.file(i, cmd), res.outs[i].Bytes()); err != nil {
			return err
		}
		if cmd.Kind == KindConntrackStats && res.outs[i].Len() > 0 {
			ct.Stats = append(ct.Stats, ConntrackStatsRead{Path: cmd.FileName(), At: res.at[i].UTC()})
		}
	}
	return nil
}

// conntrackFailed turns a failed conntrack exec into a warning, unless
// the read as a whole is over (ctx) or a cap was hit.
func (c *Collector) conntrackFailed(ctx context.Context, w *bundleWriter, err error, t Target, stderr string) error {
	err = c.execError(ctx, err, t, stderr)
	var over *LimitError
	if ctx.Err() != nil || errors.As(err, &over) {
		return err
	}
	w.man.Conntrack.Skipped = true
	w.warn("the conntrack state was not read: %s (if an admission policy refused it, it predates these reads: kubectl apply -f deploy/ again); conntrack checks are skipped", firstLine(err.Error()))
	return nil
}

// readConntrack reads, after the rules: the counters a second time (not
// sooner than conntrackStatsInterval after the first), the table's size,
// and its entries that mention a Service (ServiceConntrackFilter).
func (c *Collector) readConntrack(ctx context.Context, w *bundleWriter, t Target, objects *correlate.Objects) error {
	ct := w.man.Conntrack
	if ct == nil || ct.Skipped {
		return nil // refused before: not asked again
	}
	if len(ct.Stats) > 0 {
		if d := ct.Stats[0].At.Add(conntrackStatsInterval).Sub(c.clock()); d > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(d):
			}
		}
	}
	filter := ServiceConntrackFilter(objects)
	ct.Filter, ct.Patterns, ct.MaxEntries = filter.Mode, len(filter.Patterns), filter.MaxEntries
	cmds := []NodeCommand{ConntrackStatsCommand(idStatsAfter), ConntrackCountCommand(), ConntrackTableCommand(filter)}
	const stats, count, table = 0, 1, 2 // indices in cmds
	c.Progress.Step("reading the conntrack table (entries of %d Service addresses and NodePorts, %s, at most %d)", len(filter.Patterns), filter.Mode, filter.MaxEntries)
	res, stderr, err := c.runConntrack(ctx, w, t, cmds, table)
	if err != nil {
		return c.conntrackFailed(ctx, w, err, t, stderr)
	}
	for _, i := range []int{stats, count} {
		if err := w.write(res.file(i, cmds[i]), res.outs[i].Bytes()); err != nil {
			return err
		}
	}
	if res.outs[stats].Len() > 0 {
		ct.Stats = append(ct.Stats, ConntrackStatsRead{Path: cmds[stats].FileName(), At: res.at[stats].UTC()})
	}
	if n, ok := wcCount(res.outs[count].String()); ok {
		ct.Total = n
	}
	tf := res.file(table, cmds[table])
	tf.Bytes, tf.Seconds = res.lines.n, res.seconds
	ct.Kept = res.lines.lines
	ct.Capped = ct.Kept >= int64(filter.MaxEntries)
	// grep exits 1 when no entry matches: an empty table, no failure.
	if res.rcs[table] > 1 || res.rcs[table] < 0 {
		tf.Error = fmt.Sprintf("exit status %d", res.rcs[table])
		w.warn("the conntrack table was not read (%s%s): %s needs root in the node's network namespace and a kernel with NF_CONNTRACK_PROCFS; stale-entry checks are skipped",
			tf.Error, stderrHint(stderr), conntrackProc)
	} else {
		tf.Error = "" // the table's output is in its file, not outs
	}
	w.add(tf)
	return nil
}

// conntrackRun is what one exec of the conntrack reads gave.
type conntrackRun struct {
	outs    []bytes.Buffer
	rcs     []int
	at      []time.Time
	lines   lineCounter // the table's output
	seconds float64
}

func (r *conntrackRun) file(i int, cmd NodeCommand) BundleFile {
	f := BundleFile{Path: cmd.FileName(), Kind: cmd.Kind, Command: strings.Join(cmd.Argv, " ")}
	if r.rcs[i] != 0 && r.outs[i].Len() == 0 {
		f.Error = fmt.Sprintf("exit status %d", r.rcs[i])
	}
	return f
}

// runConntrack runs cmds in one exec: the table's output (cmds[table], if
// table >= 0) streams into its file, counted in lines; the others, small,
// are held.
func (c *Collector) runConntrack(ctx context.Context, w *bundleWriter, t Target, cmds []NodeCommand, table int) (*conntrackRun, string, error) {
	res := &conntrackRun{outs: make([]bytes.Buffer, len(cmds)), rcs: make([]int, len(cmds)), at: make([]time.Time, len(cmds))}
	for i := range res.rcs {
		res.rcs[i] = -1
	}
	var f *os.File
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	stderr, err := c.run(ctx, t, cmds, Sink{
		Open: func(i int) (io.Writer, error) {
			res.at[i] = c.clock()
			if i != table {
				res.outs[i].Reset()
				return &res.outs[i], nil
			}
			if f == nil {
				var err error
				if f, err = w.create(cmds[i].FileName()); err != nil {
					return nil, err
				}
			} else if err := restart(f); err != nil { // run again after a cut
				return nil, err
			}
			res.lines = lineCounter{w: f}
			return &res.lines, nil
		},
		Done: func(i, rc int) {
			res.rcs[i] = rc
			if i == table {
				res.seconds = c.clock().Sub(res.at[i]).Seconds()
			}
		},
	})
	return res, stderr, err
}

// lineCounter counts the bytes and lines written through it.
type lineCounter struct {
	w        io.Writer
	n, lines int64
}

func (l *lineCounter) Write(p []byte) (int, error) {
	n, err := l.w.Write(p)
	l.n += int64(n)
	l.lines += int64(bytes.Count(p[:n], []byte{'\n'}))
	return n, err
}

// wcCount reads `wc -l FILE`'s "12345 /proc/net/nf_conntrack".
func wcCount(out string) (int64, bool) {
	fields := strings.Fields(out)
	if len(fields) == 0 {
		return 0, false
	}
	n, err := strconv.ParseInt(fields[0], 10, 64)
	return n, err == nil && n >= 0
}
