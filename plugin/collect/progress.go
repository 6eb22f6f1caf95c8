package collect

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// Progress reports slow steps on stderr. A nil *Progress, or one without W
// (stderr is not a terminal), prints only warnings.
type Progress struct {
	W    io.Writer // progress lines; nil when quiet
	Warn io.Writer // warnings, always shown
	// Started is when collection began, for elapsed times.
	Started time.Time
	// mu keeps lines whole: the objects are listed while the pod starts.
	mu sync.Mutex
}

// Step says what is happening now.
func (p *Progress) Step(format string, args ...any) {
	if p == nil || p.W == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.W, "%s %s\n", p.elapsed(), fmt.Sprintf(format, args...))
}

// Bytes reports a stream's size so far.
func (p *Progress) Bytes(label string, n int64) {
	p.Step("  %s: %s so far", label, HumanBytes(n))
}

// Done reports a finished stream.
func (p *Progress) Done(label string, n int64, d time.Duration) {
	p.Step("  %s: %s in %s", label, HumanBytes(n), d.Round(10*time.Millisecond))
}

// Warning prints a warning.
func (p *Progress) Warning(msg string) {
	if p == nil || p.Warn == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.Warn, "warning: %s\n", msg)
}

func (p *Progress) elapsed() string {
	if p.Started.IsZero() {
		p.Started = time.Now()
	}
	return fmt.Sprintf("[%5.1fs]", time.Since(p.Started).Seconds())
}

// HumanBytes renders a size as B, kB or MB.
func HumanBytes(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f kB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
