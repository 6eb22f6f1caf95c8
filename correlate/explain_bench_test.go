package correlate_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/inspect"
	"github.com/proxyrules/kubectl-proxyrules/inspect/iptables"
	"github.com/proxyrules/kubectl-proxyrules/inspect/nft"
	"github.com/proxyrules/kubectl-proxyrules/internal/synth"
)

// BenchmarkExplainAll explains every Service (what triage does) on nodes
// of 1,250, 2,500 and 5,000 Services × 20 endpoints, iptables and
// nftables: the time per Service must not grow with the cluster.
func BenchmarkExplainAll(b *testing.B) {
	for _, mode := range []string{"iptables", "nftables"} {
		for _, n := range []int{1250, 2500, 5000} {
			b.Run(fmt.Sprintf("%s-%d", mode, n), func(b *testing.B) {
				c := synth.Cluster{Services: n, Endpoints: 20}
				var dump bytes.Buffer
				var rs *inspect.Ruleset
				var err error
				if mode == "iptables" {
					if err = c.WriteIPTablesSave(&dump); err == nil {
						rs, err = iptables.Parse(&dump, "bench")
					}
				} else if err = c.WriteNFTJSON(&dump); err == nil {
					rs, err = nft.ParseJSON(&dump, "bench")
				}
				if err != nil {
					b.Fatal(err)
				}
				objs := c.Objects()
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if got := correlate.ExplainAll(rs, objs, correlate.NodeView{Name: synth.LocalNode}); len(got) != n {
						b.Fatalf("%d explained", len(got))
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/service")
			})
		}
	}
}
