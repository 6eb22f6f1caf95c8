package collect

import (
	"bytes"
	"fmt"
	"io"
	"strings"
)

// What the commands on a node print is bounded as it streams: a command
// (or the node under it) that prints without end fills neither the memory
// nor the disk.
const (
	// maxStderr is the most of the commands' stderr kept: a few lines
	// say why a command failed.
	maxStderr = 64 << 10
	// maxChainOutput bounds one chain listed with -S (a Service with
	// 10,000 endpoints lists some 2 MB); maxInfoOutput a version or the
	// list of tables, which are held in memory.
	maxChainOutput = 64 << 20
	maxInfoOutput  = 1 << 20
)

// truncatedNote ends stderr that was cut at maxStderr.
const truncatedNote = "\n… (truncated)\n"

// stderrBuffer keeps the first maxStderr bytes written to it; the rest is
// dropped, never refused (refusing would fail the command).
type stderrBuffer struct {
	buf     bytes.Buffer
	dropped bool
}

func (b *stderrBuffer) Write(p []byte) (int, error) {
	if room := maxStderr - b.buf.Len(); len(p) > room {
		b.buf.Write(p[:max(room, 0)])
		b.dropped = true
		return len(p), nil
	}
	return b.buf.Write(p)
}

// String is what was kept, with a note when some was dropped.
func (b *stderrBuffer) String() string {
	if b.dropped {
		return b.buf.String() + truncatedNote
	}
	return b.buf.String()
}

// outputCap is the most one command's stdout may hold: a dump the cap on
// a bundle's ruleset, anything else far less.
func outputCap(c NodeCommand) int64 {
	if ipvsOutputCapped(c.ID) {
		return maxIPVSOutput
	}
	switch c.Kind {
	case KindRuleset:
		return DefaultLimits.File(KindRuleset)
	case KindChains:
		return maxChainOutput
	case KindConntrack, KindConntrackStats, KindSysctls:
		return DefaultLimits.File(c.Kind)
	}
	return maxInfoOutput
}

// cappedOutput passes a command's output on until its cap, then fails the
// write with a LimitError, which it also keeps in over: a runner may report
// the failed stream in its own words.
type cappedOutput struct {
	w    io.Writer
	left int64
	cmd  NodeCommand
	over **LimitError
}

func (c *cappedOutput) Write(p []byte) (int, error) {
	if int64(len(p)) <= c.left {
		n, err := c.w.Write(p)
		c.left -= int64(n)
		return n, err
	}
	n, err := c.w.Write(p[:c.left])
	c.left -= int64(n)
	if err != nil {
		return n, err
	}
	e := &LimitError{What: fmt.Sprintf("the output of %s on the node", strings.Join(c.cmd.Argv, " ")), Limit: outputCap(c.cmd)}
	*c.over = e
	return n, e
}
