package correlate_test

import (
	"bytes"
	"runtime"
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/inspect/iptables"
	"github.com/proxyrules/kubectl-proxyrules/internal/synth"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// BenchmarkParseAndAttribute measures the whole offline path on a node with
// 5,000 Services × 20 endpoints in large-cluster mode (~310k rules, ~30 MB):
// parse the iptables-save dump, then attribute every chain.
func BenchmarkParseAndAttribute(b *testing.B) {
	c := synth.Cluster{Services: 5000, Endpoints: 20}
	var dump bytes.Buffer
	if err := c.WriteIPTablesSave(&dump); err != nil {
		b.Fatal(err)
	}
	objs := c.Objects()
	data := dump.Bytes()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rs, err := iptables.Parse(bytes.NewReader(data), "bench")
		if err != nil {
			b.Fatal(err)
		}
		// Fresh Objects each time: the service-port cache must not hide
		// the cost of joining the API objects.
		res := correlate.Attribute(rs, &correlate.Objects{Services: objs.Services, EndpointSlices: objs.EndpointSlices})
		if want := 9 + 5000*21; len(res.Chains) != want-4 { // built-in chains are not kube-proxy's
			b.Fatalf("attributed %d chains, want %d", len(res.Chains), want-4)
		}
		for _, ch := range res.Chains {
			if ch.Kind != kubeproxy.KindFixed && ch.ServicePort == "" {
				b.Fatalf("chain %s not attributed", ch.Chain)
			}
		}
	}
	b.ReportMetric(float64(len(data))/1e6, "dumpMB")
	b.StopTimer()
	// Bytes allocated by one parse + attribute, as a multiple of the dump.
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	rs, _ := iptables.Parse(bytes.NewReader(data), "bench")
	correlate.Attribute(rs, &correlate.Objects{Services: objs.Services, EndpointSlices: objs.EndpointSlices})
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(len(data)), "alloc/dump")
}

// BenchmarkStaleAfterDelete: a fifth of the Services deleted, their 21,000
// chains lingering (large-cluster mode), and every endpoint chain jumping to
// KUBE-MARK-MASQ: the reference graph must stay linear in the chains.
func BenchmarkStaleAfterDelete(b *testing.B) {
	c := synth.Cluster{Services: 5000, Endpoints: 20}
	var dump bytes.Buffer
	if err := c.WriteIPTablesSave(&dump); err != nil {
		b.Fatal(err)
	}
	rs, err := iptables.Parse(bytes.NewReader(dump.Bytes()), "bench")
	if err != nil {
		b.Fatal(err)
	}
	all := c.Objects()
	objs := &correlate.Objects{Services: all.Services[1000:], EndpointSlices: all.EndpointSlices[1000:]}
	res := correlate.Attribute(rs, objs)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rep := correlate.FindStale(rs, res, objs)
		if len(rep.Chains) != 1000*21 {
			b.Fatalf("%d stale chains, want %d", len(rep.Chains), 1000*21)
		}
	}
}
