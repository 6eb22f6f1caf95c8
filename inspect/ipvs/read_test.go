package ipvs

import (
	"bytes"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustRead(t testing.TB, in []byte, lim Limits) *Table {
	t.Helper()
	tab, err := Read(bytes.NewReader(in), lim)
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

var ap = netip.MustParseAddrPort

// rs is a real server as the list and /proc forms show it.
func rs(addr string, fwd Forward, w int32, act, inact int64) RealServer {
	return RealServer{Addr: ap(addr), Forward: fwd, Weight: w, ActiveConn: act, InActConn: inact}
}

// saved is a real server as ipvsadm -Sn shows it: no connection counts.
func saved(addr string, fwd Forward, w int32) RealServer {
	return RealServer{Addr: ap(addr), Forward: fwd, Weight: w, ActiveConn: -1, InActConn: -1}
}

func svc(proto Protocol, addr, sched string, reals ...RealServer) Service {
	return Service{Protocol: proto, Addr: ap(addr), Family: 4, Scheduler: sched, RealServers: reals}
}

func persistent(s Service, timeout uint32, bits int) Service {
	s.Flags |= FlagPersistent
	s.Timeout, s.PersistBits = timeout, bits
	return s
}

func stats(rate bool, v ...uint64) *Counters {
	return &Counters{Rate: rate, Conns: v[0], InPkts: v[1], OutPkts: v[2], InBytes: v[3], OutBytes: v[4]}
}

func withStats(r RealServer, c *Counters) RealServer {
	r.Forward, r.ActiveConn, r.InActConn, r.Counters = "", -1, -1, c
	return r
}

// The fixtures are real listings (testdata/README.md): each reads whole,
// in its form, to the services it shows.
func TestReadFixtures(t *testing.T) {
	kubernetesSvc := persistent(svc(ProtoTCP, "10.254.0.1:443", "rr", rs("192.168.123.250:6443", ForwardMasq, 1, 0, 0)), 10800, 32)
	affinity := persistent(svc(ProtoTCP, "10.254.226.105:8080", "rr",
		rs("172.20.135.8:8080", ForwardMasq, 1, 0, 0), rs("172.20.166.130:8080", ForwardMasq, 1, 0, 0),
		rs("172.20.104.9:8080", ForwardMasq, 1, 0, 0)), 10800, 32)
	zero := stats(false, 0, 0, 0, 0, 0)
	statsSvc := svc(ProtoTCP, "9.111.255.240:80", "",
		withStats(rs("9.111.255.32:80", "", 0, 0, 0), zero), withStats(rs("9.111.255.167:80", "", 0, 0, 0), zero))
	statsSvc.Counters = zero
	for _, tc := range []struct {
		file     string
		format   Format
		services []Service
		warnings []string // substrings, in order
	}{
		{file: "proc-ip_vs-mruby-ipvs.txt", format: FormatProc, services: []Service{
			svc(ProtoTCP, "10.0.0.1:80", "wrr", rs("192.168.0.2:80", ForwardTunnel, 1, 0, 0), rs("192.168.0.1:80", ForwardMasq, 3, 0, 0)),
		}},
		{file: "ipvsadm-Ln-kube-proxy-readme.txt", format: FormatList, services: []Service{
			persistent(svc(ProtoTCP, "10.0.0.1:443", "rr", rs("192.168.0.1:6443", ForwardMasq, 1, 1, 0)), 10800, 32),
			svc(ProtoTCP, "10.0.0.10:53", "rr", rs("172.17.0.2:53", ForwardMasq, 1, 0, 0)),
			svc(ProtoUDP, "10.0.0.10:53", "rr", rs("172.17.0.2:53", ForwardMasq, 1, 0, 0)),
		}},
		{file: "ipvsadm-Ln-Sn-persistent-kube-router.txt", format: FormatMixed, services: []Service{
			kubernetesSvc, affinity, savedForm(kubernetesSvc), savedForm(affinity),
		}},
		{file: "ipvsadm-session-stats-save.txt", format: FormatMixed, services: []Service{
			statsSvc,
			svc(ProtoTCP, "9.111.255.240:80", "rr", saved("9.111.255.32:80", ForwardMasq, 1), saved("9.111.255.167:80", ForwardMasq, 1)),
		}},
		{file: "ipvsadm-L-names-kube-router-415.txt", warnings: []string{
			`line 4 not understood (a host or port name, not a number): "TCP  ip-10-0-62-121.ec2.internal: rr"`,
			`line 5 not understood (its service line was not understood)`,
			"line 6", "line 7", "line 8", "line 9", "line 10", "line 11", "line 12",
			"7 lines show host or port names (ipvsadm without -n): list with -n",
		}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			tab := mustRead(t, readFixture(t, tc.file), Limits{})
			if tab.Format != tc.format || tab.Version != "1.2.1" || tab.ConnTableSize != 4096 || tab.Truncated.Incomplete {
				t.Errorf("format %q version %q size %d truncated %+v", tab.Format, tab.Version, tab.ConnTableSize, tab.Truncated)
			}
			checkWarnings(t, tab.Warnings, tc.warnings)
			checkServices(t, tab.Services, tc.services)
		})
	}
}

// savedForm is s as ipvsadm -Sn shows it: no connection counts.
func savedForm(s Service) Service {
	out := s
	out.RealServers = nil
	for _, r := range s.RealServers {
		r.ActiveConn, r.InActConn = -1, -1
		out.RealServers = append(out.RealServers, r)
	}
	return out
}

func checkWarnings(t *testing.T, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d warnings, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i := range want {
		if !strings.Contains(got[i], want[i]) {
			t.Errorf("warning %d = %q, want it to contain %q", i, got[i], want[i])
		}
	}
}

func checkServices(t *testing.T, got, want []Service) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d services, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("service %d:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}
}

// The two larger fixtures: the shape of the table and the lines that
// carry something the small ones do not.
func TestReadFixtureShapes(t *testing.T) {
	t.Run("opsnull", func(t *testing.T) {
		tab := mustRead(t, readFixture(t, "ipvsadm-Ln-opsnull-251.txt"), Limits{})
		if tab.Format != FormatList || len(tab.Warnings) != 0 {
			t.Fatalf("format %q warnings %q", tab.Format, tab.Warnings)
		}
		if got := realCounts(tab); !reflect.DeepEqual(got, []int{4, 1, 1, 2, 2, 1, 3}) {
			t.Errorf("real servers per service %v", got)
		}
		want := persistent(svc(ProtoTCP, "10.254.0.1:443", "rr",
			rs("172.16.16.81:6443", ForwardMasq, 1, 0, 0), rs("172.16.16.82:6443", ForwardMasq, 1, 0, 0)), 10800, 32)
		checkServices(t, tab.Services[3:4], []Service{want})
	})
	t.Run("kube-router stats", func(t *testing.T) {
		tab := mustRead(t, readFixture(t, "ipvsadm-Ln-stats-kube-router-160.txt"), Limits{})
		// the shell loop around the command: three lines that are no
		// output; its ipvsadm line is passed over as a command
		checkWarnings(t, tab.Warnings, []string{`line 1 not understood (not an IPVS line): "for i in`, `line 2 `, `line 4 `})
		if tab.Format != FormatStats {
			t.Errorf("format %q", tab.Format)
		}
		if got := realCounts(tab); !reflect.DeepEqual(got, []int{1, 1, 8}) {
			t.Fatalf("real servers per service %v", got)
		}
		busy := tab.Services[2]
		if busy.Addr != ap("10.3.0.42:80") || !reflect.DeepEqual(busy.Counters, stats(false, 14209, 111769, 74613, 7207174, 8334358)) {
			t.Errorf("service %+v counters %+v", busy, busy.Counters)
		}
		if last := busy.RealServers[7]; !reflect.DeepEqual(last, withStats(rs("10.2.1.29:80", "", 0, 0, 0), stats(false, 3, 18, 12, 1161, 1341))) {
			t.Errorf("last real server %+v", last)
		}
	})
}

func realCounts(tab *Table) []int {
	var out []int
	for _, s := range tab.Services {
		out = append(out, len(s.RealServers))
	}
	return out
}

// A paste changes nothing: CRLF, indentation and a prompt before each line
// read to the same table.
func TestReadPasted(t *testing.T) {
	in := readFixture(t, "ipvsadm-Ln-opsnull-251.txt")
	want := mustRead(t, in, Limits{})
	for name, edit := range map[string]func(string) string{
		"crlf":     func(l string) string { return l + "\r" },
		"indented": func(l string) string { return "    " + l },
		"prompt":   func(l string) string { return "$ " + l },
		"tabs":     func(l string) string { return strings.ReplaceAll(l, "    ", "\t") },
	} {
		t.Run(name, func(t *testing.T) {
			lines := strings.Split(strings.TrimSuffix(string(in), "\n"), "\n")
			for i := range lines {
				lines[i] = edit(lines[i])
			}
			got := mustRead(t, []byte(strings.Join(lines, "\n")), Limits{})
			got.Truncated.BytesRead = want.Truncated.BytesRead // the paste is longer
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got %+v\nwant %+v", got, want)
			}
		})
	}
}

// A paste cut in the middle of a line is incomplete: the virtual servers
// after the cut are not there, and must not be judged missing. A whole
// line without its final newline is not.
func TestReadCutLine(t *testing.T) {
	const head = "IP Virtual Server version 1.2.1 (size=4096)\nProt LocalAddress:Port Scheduler Flags\n  -> RemoteAddress:Port           Forward Weight ActiveConn InActConn\nTCP  10.96.0.1:443 rr\n  -> 10.0.0.2:6443                Masq    1      0          0\n"
	for _, tc := range []struct {
		name, text string
		cut        bool
	}{
		{"whole", head, false},
		{"no final newline", strings.TrimSuffix(head, "\n"), false},
		{"cut in a real server", head + "TCP  10.96.0.10:53 rr\n  -> 10.244.0.2:5", true},
		{"cut in a service", head + "TCP  10.96.0.1", true},
	} {
		tab, err := Read(strings.NewReader(tc.text), DefaultLimits())
		if err != nil {
			t.Fatal(err)
		}
		if tab.Truncated.CutLine != tc.cut || tab.Truncated.Incomplete != tc.cut {
			t.Errorf("%s: truncation %+v, want cut %v", tc.name, tab.Truncated, tc.cut)
		}
		if tc.cut && !strings.Contains(strings.Join(tab.Warnings, "\n"), "middle of a line") {
			t.Errorf("%s: warnings %q", tc.name, tab.Warnings)
		}
	}
}
