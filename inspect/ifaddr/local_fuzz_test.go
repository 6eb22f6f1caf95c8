package ifaddr

import (
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// Any input reads without a panic, within the caps, and what is kept is
// whole: sorted addresses, each once, of the file's family, Kube within
// Addrs.
func FuzzReadLocal(f *testing.F) {
	for _, name := range []string{"fib_trie.txt", "fib_trie-rules.txt", "if_inet6.txt"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("$ cat /proc/net/fib_trie\r\nId 7:\n |-- 10.0.0.1\n  /32 scope=9 LOCAL tos=4\n  /0 host LOCAL\n"))
	lim := Limits{MaxAddrs: 5, MaxLineBytes: 256, MaxBytes: 1 << 20, MaxWarnings: 3}
	f.Fuzz(func(t *testing.T, in []byte) {
		fib, err := ReadFIBTrie(bytes.NewReader(in), lim)
		if err != nil {
			t.Fatal(err)
		}
		v6, err := ReadIfInet6(bytes.NewReader(in), lim)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range []*LocalListing{fib, v6} {
			if len(l.Warnings) > lim.MaxWarnings+1+4 {
				t.Fatalf("%d warnings", len(l.Warnings))
			}
			a := l.Local
			for _, list := range [][]netip.Addr{a.Addrs, a.Kube, a.Unusable, a.KubeUnusable} {
				if len(list) > lim.MaxAddrs || !slices.IsSortedFunc(list, netip.Addr.Compare) || len(slices.Compact(slices.Clone(list))) != len(list) {
					t.Fatalf("%s: %v", l.Format, list)
				}
				for _, x := range list {
					if !x.IsValid() || x.Is4() != (l.Format == FormatFIBTrie) || x.Zone() != "" {
						t.Fatalf("%s: address %v", l.Format, x)
					}
				}
			}
			for _, k := range a.Kube {
				if !slices.Contains(a.Addrs, k) {
					t.Fatalf("kube-ipvs0's %v not local", k)
				}
			}
			if len(a.Ranges) > maxRanges {
				t.Fatalf("%d ranges", len(a.Ranges))
			}
		}
		for _, line := range bytes.Split(in, []byte("\n")) {
			IsFIBTrieLine(string(line))
			IsIfInet6Line(string(line))
		}
	})
}

// A large cluster's node: 50,000 cluster IPs on kube-ipvs0, in
// fib_trie's merged Main: and Local: (each leaf printed twice) and in
// if_inet6.
func BenchmarkReadFIBTrie50k(b *testing.B) {
	var in bytes.Buffer
	for _, table := range []string{"Main:", "Local:"} {
		fmt.Fprintf(&in, "%s\n  +-- 0.0.0.0/0 3 0 4\n", table)
		for i := 0; i < 50_000; i++ {
			fmt.Fprintf(&in, "           |-- 10.%d.%d.%d\n              /32 host LOCAL\n", 96+i>>16, i>>8&255, i&255)
		}
	}
	bench(b, in.Bytes(), func() (*LocalListing, error) { return ReadFIBTrie(bytes.NewReader(in.Bytes()), Limits{}) })
}

func BenchmarkReadIfInet6_50k(b *testing.B) {
	var in bytes.Buffer
	for i := 0; i < 50_000; i++ {
		fmt.Fprintf(&in, "fd00001000960000000000000000%04x 03 80 00 82 kube-ipvs0\n", i)
	}
	bench(b, in.Bytes(), func() (*LocalListing, error) { return ReadIfInet6(bytes.NewReader(in.Bytes()), Limits{}) })
}

func bench(b *testing.B, in []byte, read func() (*LocalListing, error)) {
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		l, err := read()
		if err != nil || len(l.Local.Addrs) != 50_000 {
			b.Fatal(err, len(l.Local.Addrs))
		}
	}
}
