//go:build kpipvs && !kp134

package main

import (
	"fmt"
	"net"
	"strings"

	utilipvs "k8s.io/kubernetes/pkg/proxy/ipvs/util"
)

// fakeDest finds the FakeIPVS real server c names: the fake's own pointer
// (GetRealServers returns them, fake.go:180-189), so what is set on it is
// what kube-proxy's next GetRealServers sees, as it would read the kernel.
func (run *ipvsRun) fakeDest(c rsConns) (*utilipvs.RealServer, error) {
	vss, err := run.ipvs.GetVirtualServers()
	if err != nil {
		return nil, err
	}
	for _, vs := range vss {
		if !strings.EqualFold(vs.Protocol, c.proto) || vs.Port != c.vport || !vs.Address.Equal(net.ParseIP(c.vip)) {
			continue
		}
		rss, err := run.ipvs.GetRealServers(vs)
		if err != nil {
			return nil, err
		}
		for _, rs := range rss {
			if rs.Port == c.rport && rs.Address.Equal(net.ParseIP(c.rip)) {
				return rs, nil
			}
		}
	}
	return nil, nil
}

// setConns gives real servers the connections the kernel holds
// (datapath-facts §5.5: set ActiveConn on the fake before the removal sync).
func (run *ipvsRun) setConns(conns []rsConns) error {
	for _, c := range conns {
		rs, err := run.fakeDest(c)
		if err != nil {
			return err
		}
		if rs == nil {
			return fmt.Errorf("ipvs: no real server %s %s:%d -> %s:%d to give connections", c.proto, c.vip, c.vport, c.rip, c.rport)
		}
		rs.ActiveConn, rs.InactiveConn = c.active, c.inactive
	}
	return nil
}

// keepConns puts the counters back on the real servers that are still
// there: kube-proxy sets a draining server's weight with UpdateRealServer,
// which FakeIPVS does as delete + add (fake.go:218-224, counters lost),
// while the kernel edits the destination in place and keeps its
// connections (ip_vs_ctl.c ip_vs_edit_dest -> __ip_vs_update_dest).
func (run *ipvsRun) keepConns(conns []rsConns) {
	for _, c := range conns {
		if rs, err := run.fakeDest(c); err == nil && rs != nil {
			rs.ActiveConn, rs.InactiveConn = c.active, c.inactive
		}
	}
}
