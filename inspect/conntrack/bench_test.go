package conntrack

import (
	"bytes"
	"fmt"
	"io"
	"runtime"
	"testing"
)

// genLine writes the i-th entry of a synthetic table in /proc's form: UDP
// and TCP, a tenth IPv6 in full (the longest lines), as a busy node holds.
func genLine(b []byte, i int) []byte {
	switch {
	case i%10 == 9:
		return fmt.Appendf(b, "ipv6     10 udp      17 %d src=fd00:0031:0000:0000:0000:0000:%04x:%04x dst=fd00:0096:0000:0000:0000:0000:0000:000a sport=%d dport=53 [UNREPLIED] src=fd00:0244:0000:0000:0000:0000:0001:0005 dst=fd00:0031:0000:0000:0000:0000:%04x:%04x sport=53 dport=%d mark=0 zone=0 use=2\n",
			i%30, i>>16&0xffff, i&0xffff, 1024+i%60000, i>>16&0xffff, i&0xffff, 1024+i%60000)
	case i%2 == 0:
		return fmt.Appendf(b, "ipv4     2 tcp      6 %d ESTABLISHED src=10.%d.%d.%d dst=10.96.0.%d sport=%d dport=443 src=10.244.1.%d dst=10.%d.%d.%d sport=8443 dport=%d [ASSURED] mark=0 zone=0 use=2\n",
			86000+i%400, i>>16&0xff, i>>8&0xff, i&0xff, i%250+1, 1024+i%60000, i%200+1, i>>16&0xff, i>>8&0xff, i&0xff, 1024+i%60000)
	default:
		return fmt.Appendf(b, "ipv4     2 udp      17 %d src=10.%d.%d.%d dst=10.96.0.10 sport=%d dport=53 src=10.244.2.%d dst=10.%d.%d.%d sport=53 dport=%d [ASSURED] mark=0 zone=0 use=2\n",
			i%120, i>>16&0xff, i>>8&0xff, i&0xff, 1024+i%60000, i%200+1, i>>16&0xff, i>>8&0xff, i&0xff, 1024+i%60000)
	}
}

func genTable(n int) []byte {
	var b []byte
	for i := 0; i < n; i++ {
		b = genLine(b, i)
	}
	return b
}

// repeatReader streams a block n times, without holding more than it.
type repeatReader struct {
	block []byte
	n     int
	off   int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, io.EOF
	}
	k := copy(p, r.block[r.off:])
	if r.off += k; r.off == len(r.block) {
		r.off, r.n = 0, r.n-1
	}
	return k, nil
}

// Lines left out (by the filter or the cap) cost no memory: reading 200,000
// entries (about 40 MB) and keeping none, or one, allocates no more than
// the reader's buffer and a little.
func TestReadTableMemoryBounded(t *testing.T) {
	block := genTable(1000)
	for _, tc := range []struct {
		name string
		lim  Limits
		keep func(*Entry) bool
		kept int
	}{
		{"filtered out", Limits{}, func(*Entry) bool { return false }, 0},
		{"over the cap", Limits{MaxEntries: 1}, nil, 1},
	} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		tab, err := ReadTable(&repeatReader{block: block, n: 200}, tc.lim, tc.keep)
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatal(err)
		}
		if len(tab.Entries) != tc.kept || len(tab.Entries)+int(tab.Truncated.EntriesLeftOut) != 200_000*tc.kept {
			t.Fatalf("%s: kept %d + left out %d, warnings %q", tc.name, len(tab.Entries), tab.Truncated.EntriesLeftOut, tab.Warnings)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 256<<10 {
			t.Errorf("%s: reading 200,000 lines allocated %d bytes", tc.name, alloc)
		}
	}
}

// The synthetic table reads as the entries it was made of.
func TestGeneratedTable(t *testing.T) {
	tab := mustRead(t, genTable(1000), Limits{})
	if len(tab.Entries) != 1000 || len(tab.Warnings) != 0 || tab.Format != FormatProc {
		t.Fatalf("%d entries, warnings %q", len(tab.Entries), tab.Warnings)
	}
	if e := tab.Entries[9]; e.Family != 6 || e.Orig.Src.String() != "fd00:31::9" || e.Reply.Src.String() != "fd00:244::1:5" {
		t.Errorf("entry 9: %s", e)
	}
}

// make bench: go test -run '^$' -bench ReadTable -benchmem ./inspect/conntrack
func BenchmarkReadTable(b *testing.B) {
	in := genTable(1_000_000)
	for _, bc := range []struct {
		name string
		keep func(*Entry) bool
	}{
		{"1M/all-kept", nil},
		{"1M/filtered", func(e *Entry) bool { return e.Proto == "udp" && e.Orig.DPort == 53 && e.Orig.SPort == 1025 }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			b.ReportAllocs()
			for b.Loop() {
				tab, err := ReadTable(bytes.NewReader(in), Limits{}, bc.keep)
				if err != nil || len(tab.Warnings) != 0 {
					b.Fatal(err, tab.Warnings)
				}
			}
		})
	}
}
