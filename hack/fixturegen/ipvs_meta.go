//go:build kpipvs && !kp134

package main

// meta.json's "ipvs" section, written only for the scenarios the IPVS
// generator owns (ipvsScenario.own): what of the final IPVS table is not a
// current Service's frontend or endpoint, and why.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
)

type ipvsMeta struct {
	// Shape: how the table differs from what kube-proxy v1.37.2 writes on
	// its own node; absent when it does not.
	Shape string `json:"shape,omitempty"`
	// LoopbackNodePortsLastVersion: the last kube-proxy that created
	// loopback NodePort virtual servers.
	LoopbackNodePortsLastVersion string `json:"loopbackNodePortsLastVersion,omitempty"`
	// UnattributedVirtualServers are no current Service port's frontend.
	UnattributedVirtualServers []ipvsVirtualRef `json:"unattributedVirtualServers"`
	// DrainingRealServers: weight 0, kept by kube-proxy while the kernel
	// holds connections to them; not an endpoint of the current slices.
	DrainingRealServers []ipvsRealRef `json:"drainingRealServers"`
	// RemovedRealServers: real servers that had connections before the
	// last sync and are gone after it (UDP/SCTP: no graceful termination).
	RemovedRealServers []ipvsRealRef `json:"removedRealServers"`
}

type ipvsVirtualRef struct {
	Protocol string `json:"protocol"`
	Addr     string `json:"addr"` // as ipvsadm -Ln prints it
	Note     string `json:"note"`
}

type ipvsRealRef struct {
	Protocol      string `json:"protocol"`
	VirtualServer string `json:"virtualServer"`
	RealServer    string `json:"realServer"`
	Weight        int    `json:"weight"`
	ActiveConn    int    `json:"activeConn"`
	InActConn     int    `json:"inActConn"`
	Note          string `json:"note"`
}

// ipvsMetaFile is meta.json with the ipvs section.
type ipvsMetaFile struct {
	meta
	IPVS *ipvsMeta `json:"ipvs,omitempty"`
}

// ipvsFacts derives the section from the final table (and the connections
// set before the last sync).
func ipvsFacts(svcs []ipvsService, x *ipvsScenario) *ipvsMeta {
	m := &ipvsMeta{Shape: x.shape, UnattributedVirtualServers: []ipvsVirtualRef{},
		DrainingRealServers: []ipvsRealRef{}, RemovedRealServers: []ipvsRealRef{}}
	if x.loopback {
		m.LoopbackNodePortsLastVersion = "v1.21.14"
	}
	for _, s := range svcs {
		if s.Addr.IsLoopback() {
			m.UnattributedVirtualServers = append(m.UnattributedVirtualServers, ipvsVirtualRef{s.Proto, ipvsadmAddr(s.Addr, s.Port),
				"a NodePort on the loopback address, as kube-proxy <= v1.21 created them (never reachable, kubernetes/kubernetes#96879)"})
		}
		for _, d := range s.Dests {
			if d.Weight == 0 {
				m.DrainingRealServers = append(m.DrainingRealServers, ipvsRealRef{s.Proto, ipvsadmAddr(s.Addr, s.Port), ipvsadmAddr(d.Addr, d.Port),
					d.Weight, d.ActiveConn, d.InactiveConn, "its endpoint was removed while it had connections: kube-proxy set weight 0 and deletes it once they are gone (graceful_termination.go:147-194)"})
			}
		}
	}
	for _, c := range x.conns {
		if findDest(svcs, c) == nil {
			// weight and counts as before the sync (kube-proxy's weight is 1)
			m.RemovedRealServers = append(m.RemovedRealServers, ipvsRealRef{c.proto, ipvsadmAddr(net.ParseIP(c.vip), c.vport), ipvsadmAddr(net.ParseIP(c.rip), c.rport),
				1, c.active, c.inactive, "its endpoint was removed; " + c.proto + " has no graceful termination, so kube-proxy deleted it at once with its connections (weight and counts are from before the sync, ipvs/*.sync1.txt)"})
		}
	}
	sort.Slice(m.UnattributedVirtualServers, func(i, j int) bool {
		a, b := m.UnattributedVirtualServers[i], m.UnattributedVirtualServers[j]
		return a.Protocol+" "+a.Addr < b.Protocol+" "+b.Addr
	})
	return m
}

func findDest(svcs []ipvsService, c rsConns) *ipvsDest {
	for i := range svcs {
		s := &svcs[i]
		if s.Proto != c.proto || s.Port != c.vport || !s.Addr.Equal(net.ParseIP(c.vip)) {
			continue
		}
		for k := range s.Dests {
			if d := &s.Dests[k]; d.Port == c.rport && d.Addr.Equal(net.ParseIP(c.rip)) {
				return d
			}
		}
	}
	return nil
}

// writeIPVSMeta adds the ipvs section to the scenario's meta.json (written
// by `fixturegen objects`). A scenario that is not the IPVS generator's own
// cannot carry one: its final table must then be all frontends and
// endpoints.
func writeIPVSMeta(out string, m *ipvsMeta, x *ipvsScenario) error {
	if !x.own {
		if len(m.UnattributedVirtualServers)+len(m.DrainingRealServers)+len(m.RemovedRealServers) > 0 {
			return fmt.Errorf("ipvs: the table has what meta.json would have to explain: %+v", m)
		}
		return nil
	}
	path := filepath.Join(out, "meta.json")
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var f ipvsMetaFile
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	f.IPVS = m
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(&f); err != nil {
		return err
	}
	return writeFile(path, buf.Bytes())
}
