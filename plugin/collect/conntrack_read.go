package collect

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/inspect/conntrack"
)

// readConntrackBefore reads the sysctls and the counters a first time, in
// one exec, before the rules. A refused or failed exec (an admission
// policy applied before these reads existed) is a warning: the rules are
// still read.
func (c *Collector) readConntrackBefore(ctx context.Context, w *bundleWriter, t Target) error {
	ct := &ConntrackRead{Total: -1}
	w.man.Conntrack = ct
	cmds := []NodeCommand{SysctlsCommand(), ConntrackStatsCommand(idStatsBefore)}
	c.Progress.Step("reading the conntrack counters and the sysctls")
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
	if s, err := conntrack.ReadSysctls(&res.outs[0]); err == nil {
		if n, ok := s.Int(conntrack.SysctlCount); ok && n >= 0 {
			ct.Total = n
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

// readConntrack reads, after the rules, the table's entries that mention
// a Service (ServiceConntrackFilter: objects are only needed here, so
// their listing goes on while the rules are read), then the counters a
// second time, not sooner than the interval (Options.StatsInterval) after
// the first, in one exec: the table's walk (seconds on a node with a
// million entries) is part of the wait between the counters' reads, and
// its size is the kernel's nf_conntrack_count read with the sysctls: no
// second walk with wc -l.
func (c *Collector) readConntrack(ctx context.Context, w *bundleWriter, t Target, objects *correlate.Objects) error {
	ct := w.man.Conntrack
	if ct == nil || ct.Skipped {
		return nil // refused before: not asked again
	}
	if len(ct.Stats) > 0 {
		interval := c.StatsInterval
		if interval <= 0 {
			interval = conntrackStatsInterval
		}
		if d := ct.Stats[0].At.Add(interval).Sub(c.clock()); d > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-c.waitFor(d):
			}
		}
	}
	filter := ServiceConntrackFilter(objects)
	ct.Filter, ct.Patterns, ct.MaxEntries = filter.Mode, len(filter.Patterns), filter.MaxEntries
	cmds := []NodeCommand{ConntrackTableCommand(filter), ConntrackStatsCommand(idStatsAfter)}
	const table, after = 0, 1 // indices in cmds
	c.Progress.Step("reading the conntrack table (entries of %d Service addresses and NodePorts, %s, at most %d)", len(filter.Patterns), filter.Mode, filter.MaxEntries)
	res, stderr, err := c.runConntrack(ctx, w, t, cmds, table)
	if err != nil {
		return c.conntrackFailed(ctx, w, err, t, stderr)
	}
	tf := res.file(table, cmds[table])
	tf.Bytes, tf.Seconds = res.lines.n, res.seconds
	ct.Kept = res.lines.lines
	ct.Capped = ct.Kept >= int64(filter.MaxEntries)
	// grep exits 1 when no entry matches: an empty table, no failure.
	if res.rcs[table] > 1 || res.rcs[table] < 0 {
		tf.Error = fmt.Sprintf("exit status %d", res.rcs[table])
		w.warn("the conntrack table was not read (%s%s): %s needs root in the node's network namespace and a kernel with NF_CONNTRACK_PROCFS; stale-entry checks are skipped",
			tf.Error, stderrHint(stderr, failedCommands(res.rcs)), conntrackProc)
	} else {
		tf.Error = "" // the table's output is in its file, not outs
	}
	w.add(tf)
	if err := w.write(res.file(after, cmds[after]), res.outs[after].Bytes()); err != nil {
		return err
	}
	if res.outs[after].Len() > 0 {
		ct.Stats = append(ct.Stats, ConntrackStatsRead{Path: cmds[after].FileName(), At: res.at[after].UTC()})
	}
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
