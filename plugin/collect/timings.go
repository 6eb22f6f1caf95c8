package collect

import (
	"fmt"
	"io"
	"sort"
	"sync"
	"time"
)

// The phases of a command that --timings reports, in the order a live
// read meets them. Phases may overlap (the objects are listed while the
// debug pod starts); each is timed from the command's start.
const (
	PhaseAPI         = "api"          // the Node, kube-proxy's pod and ConfigMap, access checks
	PhaseListObjects = "list-objects" // Services and EndpointSlices
	PhasePodStart    = "pod-start"    // debug pod created until Running
	PhaseProbe       = "probe"        // proxy mode, backends, tables
	PhaseMetrics     = "metrics"      // kube-proxy's /metrics and /configz
	PhaseRead        = "read"         // the rules, on the node and over the exec stream
	PhaseKernel      = "kernel"       // conntrack and sysctls
	PhasePodDelete   = "pod-delete"   // debug pod deleted
	PhaseParse       = "parse"        // inputs into the rule model and objects
	PhaseAnalyse     = "analyse"      // the report
	PhaseRender      = "render"       // the report printed
)

// Timings records how long each phase of one command took (--timings):
// whether a slow command waits on the API server, the pod, the node or
// itself. A nil *Timings records nothing. Safe for concurrent use.
type Timings struct {
	mu     sync.Mutex
	start  time.Time
	phases []Phase
}

// Phase is one timed step: when it began and how long it took, from the
// command's start, and the bytes it moved when it moved any.
type Phase struct {
	Name  string
	Start time.Duration
	Took  time.Duration
	Bytes int64
}

// NewTimings starts the clock of one command.
func NewTimings() *Timings { return &Timings{start: time.Now()} }

// Start begins a phase; the returned func ends it, with the bytes moved.
func (t *Timings) Start(name string) (stop func(bytes int64)) {
	if t == nil {
		return func(int64) {}
	}
	began := time.Now()
	return func(bytes int64) {
		t.mu.Lock()
		defer t.mu.Unlock()
		t.phases = append(t.phases, Phase{Name: name, Start: began.Sub(t.start), Took: time.Since(began), Bytes: bytes})
	}
}

// Phases are the phases recorded so far, in the order they began.
func (t *Timings) Phases() []Phase {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	out := append([]Phase(nil), t.phases...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Start < out[j].Start })
	return out
}

// Write prints the phases, one a line: name, start, duration, bytes, then
// the total since the command began. A phase that ran more than once (a
// sweep's nodes, a read retried) is a line each.
func (t *Timings) Write(w io.Writer) {
	if t == nil {
		return
	}
	fmt.Fprintf(w, "timings: %-12s %8s %8s\n", "phase", "start", "took")
	for _, p := range t.Phases() {
		line := fmt.Sprintf("timings: %-12s %7.3fs %7.3fs", p.Name, p.Start.Seconds(), p.Took.Seconds())
		if p.Bytes > 0 {
			line += "  " + HumanBytes(p.Bytes)
		}
		fmt.Fprintln(w, line)
	}
	fmt.Fprintf(w, "timings: %-12s %8s %7.3fs\n", "total", "", time.Since(t.start).Seconds())
}
