package ipvs

import (
	"strings"
	"testing"
)

// These lines are built here from the format strings of the kernel
// (ip_vs_info_seq_show: "%s  %08X:%04X %s %s", "%s  [%pI6]:%04X %s ",
// "FWM  %08X %s %s", "persistent %d %08X", "  -> %08X:%04X      %-7s %-6d
// %-10d %-10d") and of ipvsadm (print_title, print_service_entry,
// print_largenum), for the forms no published listing shows whole
// (testdata/README.md): IPv6, fwmark, ops, a persistence netmask, --rate,
// rounded counters and the save form's options. They are not outputs of a
// node. ipvsadm's strings were checked in the Debian ipvsadm 1.31 binary
// ("FWM  %d IPv6", " persistent %u", " mask %s", " ops", "-A %s -s %s",
// " -p %u", " -M %s", "-a %s -r %s %s -w %d", "%8lluK", the --stats and
// --rate headers).
const (
	procHeader = "IP Virtual Server version 1.2.1 (size=4096)\nProt LocalAddress:Port Scheduler Flags\n  -> RemoteAddress:Port Forward Weight ActiveConn InActConn\n"
	listHeader = "IP Virtual Server version 1.2.1 (size=4096)\nProt LocalAddress:Port Scheduler Flags\n  -> RemoteAddress:Port           Forward Weight ActiveConn InActConn\n"
	rateHeader = "IP Virtual Server version 1.2.1 (size=4096)\nProt LocalAddress:Port                 CPS    InPPS   OutPPS    InBPS   OutBPS\n  -> RemoteAddress:Port\n"
)

func fam6(s Service) Service { s.Family = 6; return s }

func TestReadForms(t *testing.T) {
	fwm := Service{Protocol: ProtoFWMark, FWMark: 1, Family: 4, Scheduler: "rr", RealServers: []RealServer{rs("10.244.1.2:8443", ForwardMasq, 1, 0, 0)}}
	fwm6 := fwm
	fwm6.Family, fwm6.RealServers = 6, nil
	ops := svc(ProtoUDP, "10.96.0.10:53", "rr")
	ops.Flags = FlagOnePacket
	rounded := stats(true, 1, 125426000, 0, 13034000000, 0)
	rounded.Rounded = true
	rateSvc := svc(ProtoTCP, "10.96.0.1:443", "", withStats(rs("10.244.1.2:8443", "", 0, 0, 0), stats(true, 2, 18, 12, 1161, 1341)))
	rateSvc.Counters = rounded
	rateOnly := svc(ProtoTCP, "10.96.0.1:443", "")
	rateOnly.Counters = stats(true, 1, 2, 3, 4, 5)
	extra := persistent(svc(ProtoTCP, "10.96.0.1:443", "sh", saved("10.244.1.2:8443", ForwardRoute, 0)), 60, 24)
	extra.Extra = []string{"-b sh-fallback,sh-port", "--pe sip"}
	for _, tc := range []struct {
		name, in string
		format   Format
		want     []Service
	}{
		{"proc IPv4 persistent with netmask", procHeader +
			"TCP  0A600001:01BB rr  persistent 10800 FFFFFF00\n  -> 0AF40102:20FB      Masq    1      0          0         \n",
			FormatProc, []Service{persistent(svc(ProtoTCP, "10.96.0.1:443", "rr", rs("10.244.1.2:8443", ForwardMasq, 1, 0, 0)), 10800, 24)}},
		{"proc IPv6, netmask byte-swapped", procHeader +
			"TCP  [fd00:0000:0000:0000:0000:0000:0000:000a]:01BB rr persistent 10800 80000000\n" +
			"  -> [fd00:0000:0000:0000:0000:0000:0001:0005]:20FB      Local   1      2          3         \n",
			FormatProc, []Service{fam6(persistent(svc(ProtoTCP, "[fd00::a]:443", "rr", rs("[fd00::1:5]:8443", ForwardLocal, 1, 2, 3)), 10800, 128))}},
		{"proc IPv6 without a header", "UDP  [fd00:0000:0000:0000:0000:0000:0000:000a]:0035 rr \n",
			FormatProc, []Service{fam6(svc(ProtoUDP, "[fd00::a]:53", "rr"))}},
		{"proc fwmark and ops", procHeader + "FWM  00000001 rr \n  -> 0AF40102:20FB      Masq    1      0          0\nUDP  0A60000A:0035 rr ops \n",
			FormatProc, []Service{fwm, ops}},
		{"list IPv6 and fwmark", listHeader + "TCP  [fd00::a]:443 rr\n  -> [fd00::1:5]:8443             Route   0      0          7\nFWM  1 IPv6 rr\n",
			FormatList, []Service{fam6(svc(ProtoTCP, "[fd00::a]:443", "rr", rs("[fd00::1:5]:8443", ForwardRoute, 0, 0, 7))), fwm6}},
		{"list IPv6 port of four digits", listHeader + "TCP  [fd00::a]:8080 rr\n",
			FormatList, []Service{fam6(svc(ProtoTCP, "[fd00::a]:8080", "rr"))}},
		{"list header over a full IPv6 address", listHeader + "TCP  [fd00:1111:2222:3333:4444:5555:6666:7777]:8080 rr\n",
			FormatList, []Service{fam6(svc(ProtoTCP, "[fd00:1111:2222:3333:4444:5555:6666:7777]:8080", "rr"))}},
		{"the pasted command names the counters", "$ ipvsadm -Ln --rate | grep -A1 10.96.0.1:443\nTCP  10.96.0.1:443  1 2 3 4 5\n",
			FormatRate, []Service{rateOnly}},
		{"list mask and ops", listHeader + "UDP  10.96.0.10:53 rr ops\nTCP  10.96.0.1:443 rr persistent 60 mask 255.255.0.0\n",
			FormatList, []Service{ops, persistent(svc(ProtoTCP, "10.96.0.1:443", "rr"), 60, 16)}},
		{"rate, rounded", rateHeader + "TCP  10.96.0.1:443                      1  125426K        0   13034M        0\n" +
			"  -> 10.244.1.2:8443                      2       18       12     1161     1341\n",
			FormatRate, []Service{rateSvc}},
		{"save: UDP, IPv6, fwmark, options", "-A -u [fd00::a]:53 -s rr\n-a -u [fd00::a]:53 -r [fd00::1:5]:53 -m -w 1\n" +
			"-A -f 1 -s rr\n-a -f 1 -r 10.244.1.2:8443 -m -w 1\n" +
			"-A -t 10.96.0.1:443 -s sh -p 60 -M 255.255.255.0 -b sh-fallback,sh-port --pe sip\n-a -t 10.96.0.1:443 -r 10.244.1.2:8443 -g -w 0\n",
			FormatSave, []Service{
				fam6(svc(ProtoUDP, "[fd00::a]:53", "rr", saved("[fd00::1:5]:53", ForwardMasq, 1))),
				{Protocol: ProtoFWMark, FWMark: 1, Family: 4, Scheduler: "rr", RealServers: []RealServer{saved("10.244.1.2:8443", ForwardMasq, 1)}},
				extra,
			}},
		// ipvsadm-save writes -6 after a firewall mark only; an address is its own family
		{"save: IPv6 fwmark", "-A -f 1 -6 -s rr\n-A -t [fd00::a]:53 -6 -s rr\n",
			FormatSave, []Service{fwm6, fam6(svc(ProtoTCP, "[fd00::a]:53", "rr"))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tab := mustRead(t, []byte(tc.in), Limits{})
			if tab.Format != tc.format || len(tab.Warnings) != 0 {
				t.Errorf("format %q, warnings %q", tab.Format, tab.Warnings)
			}
			checkServices(t, tab.Services, tc.want)
		})
	}
}

// A line not understood is reported and the rest kept.
func TestReadPartial(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		services int
		warnings []string
	}{
		{"real server first", "  -> 10.244.1.2:8443   Masq 1 0 0\nTCP  10.96.0.1:443 rr\n", 1,
			[]string{"(a real server before any service)"}},
		{"bad port", listHeader + "TCP  10.96.0.1:99999 rr\n  -> 10.244.1.2:8443   Masq 1 0 0\nTCP  10.96.0.2:80 rr\n", 1,
			[]string{"line 4 not understood (bad port)", "line 5 not understood (its service line was not understood)"}},
		{"bad real server", "TCP  10.96.0.1:443 rr\n  -> 10.244.1.2:8443   Masq x 0 0\n  -> 10.244.1.3:8443   Masq 1 0 0\n", 1,
			[]string{"(bad forward, weight or connection counts)"}},
		{"garbage", "TCP  10.96.0.1:443 rr\n\x00\xff\nhello\n", 1,
			[]string{`line 2 not understood (not an IPVS line): "\x00\xff"`, "line 3"}},
		{"save without its service", "-a -t 10.96.0.1:443 -r 10.244.1.2:8443 -m -w 1\n", 0,
			[]string{"(a real server of a service not listed before it)"}},
		{"-6 on an IPv4 address", "-A -t 10.96.0.1:443 -6 -s rr\n", 0,
			[]string{"(-6 given for an IPv4 service address)"}},
		{"counters without a header", "TCP  10.96.0.1:443  1 2 3 4 5\n", 1,
			[]string{"counters without the header that names them: read as --stats"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tab := mustRead(t, []byte(tc.in), Limits{})
			if len(tab.Services) != tc.services {
				t.Errorf("%d services, want %d", len(tab.Services), tc.services)
			}
			checkWarnings(t, tab.Warnings, tc.warnings)
		})
	}
}

// The caps keep what came first, count the rest and say so.
func TestReadLimits(t *testing.T) {
	in := readFixture(t, "ipvsadm-Ln-opsnull-251.txt")
	for _, tc := range []struct {
		name     string
		lim      Limits
		services int
		reals    int
		trunc    Truncation
		warning  string
	}{
		{"services", Limits{MaxServices: 2}, 2, 5, Truncation{Incomplete: true, ServicesLeftOut: 5, RealServersLeftOut: 9, BytesRead: int64(len(in))},
			"INCOMPLETE: 2 services kept (the cap), 5 more left out"},
		{"real servers", Limits{MaxRealServers: 3}, 7, 3, Truncation{Incomplete: true, RealServersLeftOut: 11, BytesRead: int64(len(in))},
			"INCOMPLETE: 11 real servers left out"},
		{"long lines", Limits{MaxLineBytes: 40}, 7, 0, Truncation{Incomplete: true, LongLines: 16, BytesRead: int64(len(in))},
			"INCOMPLETE: 16 lines over 40 bytes left out"},
		{"bytes", Limits{MaxBytes: 300}, 1, 1, Truncation{Incomplete: true, Unread: true, BytesRead: 280},
			"INCOMPLETE: reading stopped after 280 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tab := mustRead(t, in, tc.lim)
			n := 0
			for _, c := range realCounts(tab) {
				n += c
			}
			if len(tab.Services) != tc.services || n != tc.reals || tab.Truncated != tc.trunc {
				t.Errorf("%d services, %d real servers, %+v", len(tab.Services), n, tab.Truncated)
			}
			if w := strings.Join(tab.Warnings, "\n"); !strings.Contains(w, tc.warning) {
				t.Errorf("warnings %q, want %q", w, tc.warning)
			}
		})
	}
}

// A line longer than the reader's buffer is skipped whole, and the next
// line read.
func TestReadLineOverBuffer(t *testing.T) {
	in := "TCP  10.96.0.1:443 rr\n" + strings.Repeat("x", 3*readBufferSize) + "\n  -> 10.244.1.2:8443   Masq 1 0 0\n"
	tab := mustRead(t, []byte(in), Limits{})
	if tab.Truncated.LongLines != 1 || len(tab.Services) != 1 || len(tab.Services[0].RealServers) != 1 {
		t.Errorf("%+v %+v", tab.Truncated, tab.Services)
	}
}
