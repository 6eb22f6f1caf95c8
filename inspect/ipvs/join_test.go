package ipvs_test

import (
	"strings"
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/inspect/ipvs"
)

// Forms of one table joined: a service and a real server are one across
// forms, and what one form lacks the other fills in.
func TestJoin(t *testing.T) {
	read := func(s string) *ipvs.Table {
		tab, err := ipvs.Read(strings.NewReader(s), ipvs.DefaultLimits())
		if err != nil {
			t.Fatal(err)
		}
		return tab
	}
	stats := read("Prot LocalAddress:Port               Conns   InPkts  OutPkts  InBytes OutBytes\n" +
		"  -> RemoteAddress:Port\n" +
		"TCP  10.96.0.1:443                        7       70       60     7000     6000\n" +
		"  -> 10.0.0.2:6443                        7       70       60     7000     6000\n")
	list := read("Prot LocalAddress:Port Scheduler Flags\n" +
		"  -> RemoteAddress:Port           Forward Weight ActiveConn InActConn\n" +
		"TCP  10.96.0.1:443 rr persistent 10800\n" +
		"  -> 10.0.0.2:6443                Masq    0      3          1\n" +
		"  -> 10.0.0.3:6443                Masq    1      0          0\n" +
		"UDP  10.96.0.10:53 rr\n")
	got := ipvs.Join(stats, nil, list)
	if got.Format != ipvs.FormatMixed || len(got.Services) != 2 {
		t.Fatalf("joined: format %s, %d services; want mixed, 2", got.Format, len(got.Services))
	}
	s := got.Services[0]
	if s.Scheduler != "rr" || s.Flags&ipvs.FlagPersistent == 0 || s.Timeout != 10800 || s.Counters == nil || s.Counters.Conns != 7 {
		t.Errorf("service: %+v; want the list's scheduler and persistence with the stats' counters", s)
	}
	if len(s.RealServers) != 2 {
		t.Fatalf("real servers %+v; want 10.0.0.2 once and 10.0.0.3", s.RealServers)
	}
	r := s.RealServers[0]
	if r.Forward != ipvs.ForwardMasq || r.Weight != 0 || r.ActiveConn != 3 || r.Counters == nil || r.Counters.InPkts != 70 {
		t.Errorf("real server %+v; want Masq, weight 0, 3 active, the stats' counters", r)
	}
	if ipvs.Join() != nil || ipvs.Join(nil) != nil {
		t.Error("Join of no table is not nil")
	}
	// the inputs are not changed
	if len(list.Services[0].RealServers) != 2 || list.Services[0].Counters != nil {
		t.Errorf("Join changed its input: %+v", list.Services[0])
	}
}
