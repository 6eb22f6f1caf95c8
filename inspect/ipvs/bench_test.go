package ipvs

import (
	"bytes"
	"fmt"
	"testing"
)

// genList writes a synthetic ipvsadm -Ln of n services with three real
// servers each, the shape of kube-proxy's table on a large cluster (a
// benchmark input, not a fixture).
func genList(n int) []byte {
	b := []byte(listHeader)
	for i := 0; i < n; i++ {
		b = fmt.Appendf(b, "TCP  10.96.%d.%d:%d rr\n", i>>8&0xff, i&0xff, 80+i%1000)
		for j := 0; j < 3; j++ {
			b = fmt.Appendf(b, "  -> 10.244.%d.%d:8080              Masq    1      0          0         \n", j, i&0xff)
		}
	}
	return b
}

func BenchmarkRead(b *testing.B) {
	for _, n := range []int{1000, 50000} {
		in := genList(n)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			b.ReportAllocs()
			for b.Loop() {
				tab, err := Read(bytes.NewReader(in), Limits{})
				if err != nil || len(tab.Services) != n {
					b.Fatal(err, len(tab.Services))
				}
			}
		})
	}
}
