package ifaddr

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// Any input reads without a panic, within the caps, and what is kept is
// whole: valid prefixes, each once, without zones.
func FuzzRead(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.txt"))
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("$ ip a\r\n7: kube-ipvs0: <> mtu 1 state UP\n    inet 10.0.0.1 peer 10.0.0.2/24 scope global\n    inet6 fe80::1%eth0/64\n"))
	lim := Limits{MaxAddrs: 5, MaxLineBytes: 256, MaxBytes: 1 << 20, MaxWarnings: 3}
	f.Fuzz(func(t *testing.T, in []byte) {
		l, err := Read(bytes.NewReader(in), KubeIPVS0, lim)
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Warnings) > lim.MaxWarnings+1+5 {
			t.Fatalf("%d warnings", len(l.Warnings))
		}
		if i := l.Interface; i != nil {
			seen := map[string]bool{}
			if i.Name != KubeIPVS0 || len(i.Addrs) > lim.MaxAddrs {
				t.Fatalf("%+v", i)
			}
			for _, a := range i.Addrs {
				if !a.IsValid() || a.Addr().Zone() != "" || seen[a.String()] {
					t.Fatalf("address %v of %+v", a, i)
				}
				seen[a.String()] = true
			}
		}
		for _, line := range bytes.Split(in, []byte("\n")) {
			IsLine(string(line))
		}
	})
}
