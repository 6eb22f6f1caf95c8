//go:build kpipvs && !kp134

package main

import (
	"net"
	"strings"
	"testing"
)

func testIPVSServices() []ipvsService {
	return []ipvsService{
		{Addr: net.ParseIP("fd00:10:96::1"), Proto: "TCP", Port: 80, Sched: "rr", Persistent: true, Timeout: 10800, Netmask: 128,
			Dests: []ipvsDest{{Addr: net.ParseIP("fd00:10:244:1::2"), Port: 8080, Fwd: "Masq", Weight: 1}}},
		{Addr: net.ParseIP("10.96.0.10"), Proto: "UDP", Port: 53, Sched: "rr", Netmask: 0xffffffff,
			Dests: []ipvsDest{
				{Addr: net.ParseIP("10.244.1.3"), Port: 53, Fwd: "Masq", Weight: 1},
				{Addr: net.ParseIP("10.244.1.2"), Port: 53, Fwd: "Masq", Weight: 0, ActiveConn: 2, InactiveConn: 11},
			}},
		{Addr: net.ParseIP("10.96.0.1"), Proto: "TCP", Port: 443, Sched: "rr", Persistent: true, Timeout: 10800, Netmask: 0xffffffff,
			Dests: []ipvsDest{{Addr: net.ParseIP("10.0.0.10"), Port: 6443, Fwd: "Masq", Weight: 1}}},
	}
}

// The expected texts are written from the kernel's and ipvsadm's format
// strings (see ipvs_render.go), column by column.
func TestRenderIPVS(t *testing.T) {
	tests := []struct {
		name   string
		render func([]ipvsService) string
		want   []string
	}{
		{"proc-net-ip_vs", renderProcNetIPVS, []string{
			"IP Virtual Server version 1.2.1 (size=4096)",
			"Prot LocalAddress:Port Scheduler Flags",
			"  -> RemoteAddress:Port Forward Weight ActiveConn InActConn",
			"TCP  0A600001:01BB rr  persistent 10800 FFFFFFFF",
			"  -> 0A00000A:192B      Masq    1      0          0         ",
			"UDP  0A60000A:0035 rr  ",
			"  -> 0AF40102:0035      Masq    0      2          11        ",
			"  -> 0AF40103:0035      Masq    1      0          0         ",
			"TCP  [fd00:0010:0096:0000:0000:0000:0000:0001]:0050 rr persistent 10800 80000000",
			"  -> [fd00:0010:0244:0001:0000:0000:0000:0002]:1F90      Masq    1      0          0         ",
		}},
		{"ipvsadm -Ln", renderIPVSAdmList, []string{
			"IP Virtual Server version 1.2.1 (size=4096)",
			"Prot LocalAddress:Port Scheduler Flags",
			"  -> RemoteAddress:Port           Forward Weight ActiveConn InActConn",
			"TCP  10.96.0.1:443 rr persistent 10800",
			"  -> 10.0.0.10:6443               Masq    1      0          0         ",
			"UDP  10.96.0.10:53 rr",
			"  -> 10.244.1.2:53                Masq    0      2          11        ",
			"  -> 10.244.1.3:53                Masq    1      0          0         ",
			"TCP  [fd00:10:96::1]:80 rr persistent 10800",
			"  -> [fd00:10:244:1::2]:8080      Masq    1      0          0         ",
		}},
		{"ipvsadm -Sn", renderIPVSAdmSave, []string{
			"-A -t 10.96.0.1:443 -s rr -p 10800",
			"-a -t 10.96.0.1:443 -r 10.0.0.10:6443 -m -w 1",
			"-A -u 10.96.0.10:53 -s rr",
			"-a -u 10.96.0.10:53 -r 10.244.1.2:53 -m -w 0",
			"-a -u 10.96.0.10:53 -r 10.244.1.3:53 -m -w 1",
			"-A -t [fd00:10:96::1]:80 -s rr -p 10800",
			"-a -t [fd00:10:96::1]:80 -r [fd00:10:244:1::2]:8080 -m -w 1",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			svcs := testIPVSServices()
			sortIPVS(svcs)
			got := tc.render(svcs)
			want := strings.Join(tc.want, "\n") + "\n"
			if got != want {
				t.Errorf("got:\n%q\nwant:\n%q", got, want)
			}
		})
	}
}

// libipvs compares addresses with `int r = ntohl(a) - ntohl(b)`, which wraps:
// 10.0.0.1 sorts after 192.168.0.1 (the difference exceeds 2^31).
func TestSortIPVSWraps(t *testing.T) {
	tests := []struct {
		a, b string
		want []string
	}{
		{"10.0.0.1", "192.168.0.1", []string{"192.168.0.1", "10.0.0.1"}},
		{"10.0.0.1", "100.64.0.1", []string{"10.0.0.1", "100.64.0.1"}},
	}
	for _, tc := range tests {
		svcs := []ipvsService{
			{Addr: net.ParseIP(tc.a), Proto: "TCP", Port: 80},
			{Addr: net.ParseIP(tc.b), Proto: "TCP", Port: 80},
		}
		sortIPVS(svcs)
		got := []string{svcs[0].Addr.String(), svcs[1].Addr.String()}
		if got[0] != tc.want[0] || got[1] != tc.want[1] {
			t.Errorf("sort(%s, %s) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}
