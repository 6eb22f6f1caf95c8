package plugin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/inspect/metrics"
	"github.com/proxyrules/kubectl-proxyrules/plugin/collect"
)

// metricsOf writes kube-proxy's /metrics (the fixture's) followed by more:
// padding to size bytes (a comment line), or extra lines.
func metricsOf(t *testing.T, size int, extra string) string {
	t.Helper()
	data, err := os.ReadFile(smallFixture + "metrics-iptables.txt")
	if err != nil {
		t.Fatal(err)
	}
	text := string(data) + extra
	if size > 0 {
		text += "# " + strings.Repeat("p", size-len(text)-3) + "\n"
	}
	name := filepath.Join(t.TempDir(), "metrics.txt")
	if err := os.WriteFile(name, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return name
}

// A metrics file is capped at 16 MiB by default (kube-proxy's /metrics is
// under 1 MB; 64 MiB of it took 3.7 GB to parse), a bundle's as a file's,
// and within that at metrics.MaxSamples samples: each refused with an error that
// names the cap, and the flag when there is one.
func TestMetricsCaps(t *testing.T) {
	dump := smallFixture + "iptables/save-nft-ipv4.txt"
	var samples strings.Builder
	samples.WriteString("# TYPE padding gauge\n")
	for i := 0; i <= metrics.MaxSamples; i++ {
		samples.WriteString("padding{i=\"" + itoa(int64(i)) + "\"} 1\n")
	}
	tests := []struct {
		name, file string
		want       []string // nil: it is read
	}{
		{"one byte over 16 MiB", metricsOf(t, 16<<20+1, ""), []string{"larger than the cap", "on metrics inputs", "--max-input-size metrics=32Mi"}},
		{"16 MiB", metricsOf(t, 16<<20, ""), nil},
		{"a sample over the cap", metricsOf(t, 0, samples.String()), []string{"metrics.txt: more than " + itoa(metrics.MaxSamples) + " samples", "refusing to parse it"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, errOut, err := runCmd(t, nil, "map", "--node", "node-a", "--from-dump", dump, "--from-metrics", tt.file)
			if tt.want == nil {
				if err != nil {
					t.Errorf("%v\n%s", err, errOut)
				}
				return
			}
			if err == nil {
				t.Fatalf("read, want an error saying %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
	if got := collect.DefaultLimits.File(collect.KindMetrics); got != defaultCaps[capMetrics] {
		t.Errorf("a bundle's metrics are capped at %d, a file's at %d", got, defaultCaps[capMetrics])
	}
}
