package metrics

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"
)

// lines writes line(i) for i from 0 until n lines or size bytes, whichever
// comes first (n or size 0: no bound of that kind).
func lines(n, size int, line func(i int) string) string {
	var b strings.Builder
	for i := 0; (n == 0 || i < n) && (size == 0 || b.Len() < size); i++ {
		b.WriteString(line(i))
	}
	return b.String()
}

// padTo ends text with a sample whose label value makes it size bytes.
func padTo(size int, text string) string {
	return text + labelsLine("pad", 1, strings.Repeat("x", size-len(text)-len(labelsLine("pad", 1, ""))))
}

func labelsLine(name string, n int, value string) string {
	var b strings.Builder
	b.WriteString(name + "{")
	for j := range n {
		fmt.Fprintf(&b, "l%d=%q,", j, value)
	}
	b.WriteString("} 1\n")
	return b.String()
}

// readCounter counts the bytes the parser asked for.
type readCounter struct {
	r io.Reader
	n int
}

func (r *readCounter) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.n += n
	return n, err
}

// An input over a cap on samples, labels or comment lines is refused with
// an error that names the cap, and parsing stops there: the rest of the
// input is never read. At the caps it parses.
func TestParseCaps(t *testing.T) {
	gauge := func(i int) string { return fmt.Sprintf("m{i=\"%d\"} 1\n", i) }
	// '=', '{' and escaped quotes inside a value are not labels.
	tricky := labelsLine("m", MaxLabelsPerSample, `a=b{"c"}=`)
	tests := []struct {
		name, text string
		// cut is where the cap is crossed: nothing much past it is read.
		cut  int
		want string
	}{
		{"samples", lines(2*MaxSamples, 0, gauge), len(lines(MaxSamples+1, 0, gauge)), fmt.Sprintf("more than %d samples", MaxSamples)},
		{"labels on one sample", labelsLine("m", MaxLabelsPerSample+1, "v") + lines(MaxSamples, 0, gauge), 400, fmt.Sprintf("more than %d labels on one sample", MaxLabelsPerSample)},
		{"labels in all", lines(2*MaxLabelPairs/10, 0, func(int) string { return labelsLine("m", 10, "v") }), len(labelsLine("m", 10, "v")) * (MaxLabelPairs/10 + 1), fmt.Sprintf("more than %d labels in all", MaxLabelPairs)},
		{"comment lines", lines(2*MaxMetadataLines, 0, func(i int) string { return fmt.Sprintf("# HELP m%d h\n", i) }), 20 * (MaxMetadataLines + 1), "more than 20000 comment lines"},
		{"at the caps", "# TYPE m gauge\n" + lines(MaxSamples-1, 0, gauge) + tricky, 0, ""},
		{"escaped quote at the caps", labelsLine("m", MaxLabelsPerSample, `x\"y=z`), 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc := &readCounter{r: strings.NewReader(tt.text)}
			m, err := Parse(rc, "metrics.txt")
			if tt.want == "" {
				if err != nil {
					t.Fatalf("under the caps: %v", err)
				}
				if got := len(m.Families["m"].Metric); got == 0 {
					t.Errorf("no samples read")
				}
				return
			}
			var le *LimitError
			if !errors.As(err, &le) || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "metrics.txt") {
				t.Fatalf("error %v, want a LimitError saying %q", err, tt.want)
			}
			// The parser reads through a 4 KiB buffer; the reader 32 KiB at a time at most.
			if rc.n > tt.cut+64<<10 {
				t.Errorf("read %d bytes of %d, the cap is crossed at %d", rc.n, len(tt.text), tt.cut)
			}
		})
	}
}

// metricsCap is the plugin's default size cap on a metrics file.
const metricsCap = 16 << 20

// allocBound is how many times the size cap on a metrics file parsing
// one allocates at most, whatever it holds: the caps on samples and labels
// bound the shapes dense in objects (a short file of many samples costs
// far more than its size), the size cap the rest (stated in the README).
const allocBound = 12

// Parsing a metrics input of the shapes that cost most within the caps
// (at the size cap, or at the cap on samples) allocates at most
// allocBound times the size cap; one past the caps on samples and labels
// is refused before it costs more.
func TestParseMemoryBound(t *testing.T) {
	if raceEnabled {
		t.Skip("allocations are measured without the race detector, whose instrumentation allocates too")
	}
	pad := strings.Repeat("x", 120)
	tests := []struct{ name, text string }{
		{"most samples", lines(MaxSamples, metricsCap, func(i int) string {
			return fmt.Sprintf("kubeproxy_sync_proxy_rules_iptables_total{ip_family=\"IPv4\",table=\"t%d\",p=%q} 1\n", i, pad)
		})},
		{"most labels", padTo(metricsCap, lines(MaxLabelPairs/MaxLabelsPerSample-1, 0, func(i int) string {
			return labelsLine(fmt.Sprintf("m%d", i%100), MaxLabelsPerSample, "")
		}))},
		{"most families", lines(MaxMetadataLines/2, 0, func(i int) string {
			return fmt.Sprintf("# HELP m%d %s\n# TYPE m%d gauge\nm%d 1\n", i, strings.Repeat("h", metricsCap/(MaxMetadataLines/2)-50), i, i)
		})},
		{"short samples", lines(MaxSamples, 0, func(i int) string { return fmt.Sprintf("m{i=\"%d\"} 1\n", i) })},
		{"histograms", "# TYPE h histogram\n" + lines(MaxSamples-1, metricsCap, func(i int) string {
			return fmt.Sprintf("h_bucket{s=\"%d\",p=%q,le=\"%d\"} %d\n", i/20, pad, i%20, i%20)
		})},
		{"one long value", padTo(metricsCap, "")},
		// Over the caps on samples and labels: refused as they are read.
		{"16 MiB of short samples", lines(0, metricsCap-20, func(i int) string { return fmt.Sprintf("m{i=\"%d\"} 1\n", i) })},
		{"16 MiB of labels", lines(0, metricsCap-300, func(i int) string { return labelsLine("m", MaxLabelsPerSample, "") })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if len(tt.text) > metricsCap {
				t.Fatalf("the input is %d bytes, over the cap of %d", len(tt.text), metricsCap)
			}
			r := strings.NewReader(tt.text)
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			m, err := Parse(r, tt.name)
			runtime.ReadMemStats(&after)
			var le *LimitError
			if err != nil && !errors.As(err, &le) {
				t.Fatal(err)
			}
			runtime.KeepAlive(m)
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("%s: %d bytes, %.1f× its size, %.1f× the cap allocated", tt.name, len(tt.text), float64(alloc)/float64(len(tt.text)), float64(alloc)/metricsCap)
			if alloc > allocBound*metricsCap {
				t.Errorf("parsing %d bytes allocated %d, more than %d× the cap", len(tt.text), alloc, allocBound)
			}
		})
	}
}

// failingReader fails after its text, as a cap on the input's size does.
type failingReader struct {
	r   io.Reader
	err error
}

func (f *failingReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err == io.EOF {
		return n, f.err
	}
	return n, err
}

// The input's own error (the plugin's cap on its size) is returned as it
// is, not as "not Prometheus metrics".
func TestParseReadError(t *testing.T) {
	capErr := errors.New("metrics.txt is larger than the cap of 16 MiB on metrics inputs")
	_, err := Parse(&failingReader{r: strings.NewReader("# TYPE m gauge\nm 1\nm{a=\"b"), err: capErr}, "metrics.txt")
	if !errors.Is(err, capErr) || strings.Contains(err.Error(), "not Prometheus metrics") {
		t.Errorf("Parse: %v, want %q as it is", err, capErr)
	}
}
