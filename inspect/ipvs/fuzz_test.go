package ipvs

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// Any input reads without a panic, within the caps, and what is kept is
// whole: every address valid and of its service's family, a fwmark
// service has a mark and no address, counters only where the form has them.
func FuzzRead(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.txt"))
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(procHeader + "FWM  00000001 rr ops persistent 5 80000000\n  -> [fd00::1]:0050 Masq 1 0 0\r\n-a -f 1 -r 1.2.3.4:5 -w\n"))
	f.Add([]byte(rateHeader + "TCP  [::1]:80 1K 2M 3G 4T 18446744073709551615\n"))
	lim := Limits{MaxServices: 4, MaxRealServers: 6, MaxLineBytes: 256, MaxBytes: 1 << 20, MaxWarnings: 3}
	f.Fuzz(func(t *testing.T, in []byte) {
		tab, err := Read(bytes.NewReader(in), lim)
		if err != nil {
			t.Fatal(err)
		}
		reals := 0
		for _, s := range tab.Services {
			reals += len(s.RealServers)
			checkService(t, s)
		}
		if len(tab.Services) > lim.MaxServices || reals > lim.MaxRealServers || len(tab.Warnings) > lim.MaxWarnings+1+6 {
			t.Fatalf("%d services, %d real servers, %d warnings", len(tab.Services), reals, len(tab.Warnings))
		}
	})
}

func checkService(t *testing.T, s Service) {
	t.Helper()
	if s.Protocol == ProtoFWMark {
		if s.FWMark == 0 || s.Addr.IsValid() {
			t.Fatalf("fwmark service %+v", s)
		}
	} else if !s.Addr.IsValid() || family(s.Addr.Addr()) != s.Family || s.FWMark != 0 {
		t.Fatalf("service %+v", s)
	}
	if s.Flags&FlagPersistent == 0 && (s.Timeout != 0 || s.PersistBits != 0) || s.PersistBits > 128 || s.PersistBits < -1 {
		t.Fatalf("persistence of %+v", s)
	}
	for _, r := range s.RealServers {
		if !r.Addr.IsValid() || r.Addr.Addr().Zone() != "" {
			t.Fatalf("real server %+v", r)
		}
		if r.Counters != nil && (r.Forward != "" || r.ActiveConn >= 0 || r.InActConn >= 0) {
			t.Fatalf("real server with counters and connections %+v", r)
		}
	}
}
