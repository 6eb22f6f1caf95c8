package plugin

import (
	"io"
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/diagnose"
	"github.com/proxyrules/kubectl-proxyrules/internal/synth"
)

// BenchmarkPrintMachine writes map's report of 5,000 Services × 20
// endpoints (105k chains, 40 MB of JSON) as JSON and YAML.
func BenchmarkPrintMachine(b *testing.B) {
	f, err := synth.Cluster{Services: 5000, Endpoints: 20}.WriteFiles(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	l, err := loadRequest(Request{Files: InputFiles{Dumps: []string{f.IPTablesSave}, Objects: []string{f.Objects}}, Node: synth.LocalNode})
	if err != nil {
		b.Fatal(err)
	}
	report := withCollection{diagnose.MapChains(l.Node), nil}
	for _, format := range []string{"json", "yaml"} {
		b.Run(format, func(b *testing.B) {
			out := &countingWriter{}
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				out.n = 0
				if err := printMachine(out, format, report); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(out.n)
		})
	}
}

var _ io.Writer = (*countingWriter)(nil)
