package ifaddr

import (
	"bytes"
	"fmt"
	"testing"
)

// A large cluster's kube-ipvs0: 50,000 addresses in ip addr show.
func BenchmarkReadAddr50k(b *testing.B) {
	var in bytes.Buffer
	in.WriteString("5: kube-ipvs0: <BROADCAST,NOARP> mtu 1500 qdisc noop state DOWN group default\n    link/ether 4e:2b:b0:a5:d0:20 brd ff:ff:ff:ff:ff:ff\n")
	for i := 0; i < 50_000; i++ {
		fmt.Fprintf(&in, "    inet 10.%d.%d.%d/32 scope global kube-ipvs0\n       valid_lft forever preferred_lft forever\n", 96+i>>16, i>>8&255, i&255)
	}
	b.SetBytes(int64(in.Len()))
	b.ReportAllocs()
	for b.Loop() {
		l, err := Read(bytes.NewReader(in.Bytes()), KubeIPVS0, Limits{})
		if err != nil || len(l.Interface.Addrs) != 50_000 {
			b.Fatal(err)
		}
	}
}
