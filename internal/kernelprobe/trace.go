package kernelprobe

import (
	"bufio"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TraceTable is the table Trace adds (family ip or ip6) and deletes.
const TraceTable = "proxyrules_trace"

// Trace sends ONE flow of p (Flows is ignored) with nft tracing on for its
// 5-tuple and returns the `nft monitor trace` lines of it ("trace id …"),
// as the node namespace saw them: every nf_tables chain, rule and verdict
// the packet met after the trace table's priority -400 chains on
// prerouting (pod and outside flows) and output (node flows). nftables-mode
// rules and iptables-nft rules (nf_tables rules too) show; legacy
// iptables rules are not nf_tables and never appear. A DNAT rule shows
// "(verdict accept)", a reject "(verdict drop)"; the trace table's own
// chains come first. The observation of the flow is logged. Skips the test
// when nft is missing.
func (l *Lab) Trace(t testing.TB, p Probe) []string {
	t.Helper()
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("kernel probe skipped: nft not installed (make test-deps installs it)")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	p.Flows = 1
	src := l.traceSource(t, &p)
	fam := "ip"
	if p.Dst.Addr().Is6() {
		fam = "ip6"
	}
	l.addTraceTable(t, fam, src, p)
	defer func() {
		if _, err := l.run(nil, "nft", "delete", "table", fam, TraceTable); err != nil {
			t.Errorf("kernel probe: trace: %v", err)
		}
	}()
	mon := l.startMonitor(t)
	defer mon.stop()
	mon.waitListening(t, l, fam)

	obs := l.Send(t, p)
	t.Logf("kernel probe: traced flow %v → %v: %s %v (%s)", obs[0].Src, p.Dst, obs[0].Verdict, obs[0].Endpoint, obs[0].Raw)
	trace := mon.collectTrace()
	mon.stop()
	return trace
}

// traceSource fixes the flow's source port (when p leaves it to the lab)
// and returns its source address, which the trace rule must name.
func (l *Lab) traceSource(t testing.TB, p *Probe) netip.Addr {
	t.Helper()
	if p.SrcPort0 == 0 {
		port, wrapped := l.ports(1)
		if wrapped {
			l.FlushConntrack(t)
		}
		p.SrcPort0 = uint16(port)
	}
	_, src, err := l.source(*p)
	if err != nil {
		t.Fatalf("kernel probe: trace: %v", err)
	}
	if !src.IsValid() {
		// The node's own flow, source left to the kernel: ask it.
		src = l.routeSrc(t, p.Dst.Addr())
	}
	return src
}

// addTraceTable (re)creates the trace table, whose chains set nftrace on
// the flow's 5-tuple before any other chain sees it.
func (l *Lab) addTraceTable(t testing.TB, fam string, src netip.Addr, p Probe) {
	t.Helper()
	match := fmt.Sprintf("%[1]s saddr %[2]s %[1]s daddr %[3]s %[4]s sport %[5]d %[4]s dport %[6]d meta nftrace set 1",
		fam, src, p.Dst.Addr(), p.Proto, p.SrcPort0, p.Dst.Port())
	table := fam + " " + TraceTable
	l.Run(t, []byte(fmt.Sprintf(`table %[1]s {}
delete table %[1]s
table %[1]s {
	chain prerouting {
		type filter hook prerouting priority -400; policy accept;
		%[2]s
	}
	chain output {
		type filter hook output priority -400; policy accept;
		%[2]s
	}
}
`, table, match)), "nft", "-f", "-")
}

// nftMonitor is a running `nft monitor` in the node and its lines.
type nftMonitor struct {
	cmd     *exec.Cmd
	lines   chan string
	stopped bool
}

// startMonitor starts `nft monitor` (all events, not only traces, so that
// waitListening can see a chain added).
func (l *Lab) startMonitor(t testing.TB) *nftMonitor {
	t.Helper()
	mon := exec.Command("ip", "netns", "exec", l.Node, "nft", "monitor")
	stdout, err := mon.StdoutPipe()
	if err != nil {
		t.Fatalf("kernel probe: trace: %v", err)
	}
	if err := mon.Start(); err != nil {
		t.Fatalf("kernel probe: trace: starting nft monitor: %v", err)
	}
	m := &nftMonitor{cmd: mon, lines: make(chan string, 1024)}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for sc.Scan() {
			m.lines <- sc.Text()
		}
		close(m.lines)
	}()
	return m
}

// stop ends the monitor, once.
func (m *nftMonitor) stop() {
	if !m.stopped {
		m.stopped = true
		_ = m.cmd.Process.Kill()
		for range m.lines { // to EOF: the reader may be blocked on a full channel
		}
		_ = m.cmd.Wait()
	}
}

// waitListening adds chains to the trace table until the monitor shows
// one: then it is listening, and the flow may be sent.
func (m *nftMonitor) waitListening(t testing.TB, l *Lab, fam string) {
	t.Helper()
	for i := 0; i < 50; i++ {
		name := fmt.Sprintf("ready%d", i)
		l.Run(t, nil, "nft", "add", "chain", fam, TraceTable, name)
		if m.saw(t, name, 100*time.Millisecond) {
			return
		}
	}
	t.Fatal("kernel probe: trace: nft monitor did not start listening in 5s")
}

// saw reports whether the monitor shows the trace table's chain name
// within timeout.
func (m *nftMonitor) saw(t testing.TB, name string, timeout time.Duration) bool {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case line, ok := <-m.lines:
			if !ok {
				t.Fatal("kernel probe: trace: nft monitor ended before listening")
			}
			if strings.Contains(line, TraceTable) && strings.Contains(line, name) {
				return true
			}
		case <-deadline:
			return false
		}
	}
}

// collectTrace collects the trace events, which come as the packet goes,
// until quiet.
func (m *nftMonitor) collectTrace() []string {
	var trace []string
	quiet := 300 * time.Millisecond
	end := time.After(2 * time.Second)
	timer := time.NewTimer(time.Second)
	for {
		select {
		case line, ok := <-m.lines:
			if !ok {
				return trace
			}
			if strings.HasPrefix(line, "trace id ") {
				trace = append(trace, line)
				timer.Reset(quiet)
			}
		case <-timer.C:
			return trace
		case <-end:
			return trace
		}
	}
}

// routeSrc is the source address the node's kernel picks for dst.
func (l *Lab) routeSrc(t testing.TB, dst netip.Addr) netip.Addr {
	t.Helper()
	out := l.Run(t, nil, "ip", "route", "get", dst.String())
	f := strings.Fields(string(out))
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "src" {
			if a, err := netip.ParseAddr(f[i+1]); err == nil {
				return a
			}
		}
	}
	t.Fatalf("kernel probe: trace: no source address for %v in the node: %s", dst, out)
	return netip.Addr{}
}
