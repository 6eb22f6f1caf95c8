package ipset

import (
	"bytes"
	"fmt"
	"testing"
)

// A large cluster's KUBE-CLUSTER-IP: 100,000 members in a save.
func BenchmarkReadSave100k(b *testing.B) {
	var in bytes.Buffer
	in.WriteString("create KUBE-CLUSTER-IP hash:ip,port family inet hashsize 1024 maxelem 262144 bucketsize 12 initval 0xcaaecbf1\n")
	for i := 0; i < 100_000; i++ {
		fmt.Fprintf(&in, "add KUBE-CLUSTER-IP 10.%d.%d.%d,tcp:%d\n", 96+i>>16, i>>8&255, i&255, 80+i%1000)
	}
	b.SetBytes(int64(in.Len()))
	b.ReportAllocs()
	for b.Loop() {
		s, err := Read(bytes.NewReader(in.Bytes()), Limits{})
		if err != nil || s.Members() != 100_000 {
			b.Fatal(err, s.Members())
		}
	}
}
