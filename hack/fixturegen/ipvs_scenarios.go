//go:build kpipvs && !kp134

package main

// The scenarios with an IPVS fixture (ipvs/ in their folder), and the two
// scenarios only the IPVS generator writes. Kept out of the other builds so
// that `fixturegen list` and their fixtures stay as they are.

import (
	v1 "k8s.io/api/core/v1"
)

// ipvsScenario is what the IPVS run of a scenario does besides feeding
// the objects to the proxier.
type ipvsScenario struct {
	// own: only the IPVS generator writes this scenario (its objects.json
	// and meta.json come from this build, meta.json gets an "ipvs" section).
	own bool
	// loopback: the node addresses kube-proxy <= v1.21 gave the proxier for
	// NodePorts (loopback included; see ipvs_netlink.go).
	loopback bool
	// conns: connections the kernel holds on real servers before the
	// churn's sync (what makes a removed TCP server drain).
	conns []rsConns
	// shape says how the IPVS state differs from what kube-proxy v1.37.2
	// writes on its own node (meta.json ipvs.shape), "" when it does not.
	shape string
}

// rsConns are the connection counters of one real server.
type rsConns struct {
	proto            string // "TCP", "UDP", "SCTP"
	vip              string
	vport            uint16
	rip              string
	rport            uint16
	active, inactive int
}

// ipvsScenarios lists the scenarios hack/gen-fixtures-ipvs.sh generates.
var ipvsScenarios = map[string]*ipvsScenario{
	"small-v1.37":     {},
	"topology-v1.37":  {},
	"nft-churn-v1.37": {},
	// masqueradeBit 15: IPVS mode marks with the iptables bit
	"masq-bit15-v1.37": {},
	// every pod of shop/checkout unready: its virtual server keeps no real server
	"outage-v1.37": {},
	"ipvs-drain-v1.37": {own: true, conns: []rsConns{
		// a client's open TCP connection to the pod that goes away
		{proto: "TCP", vip: drainVIP, vport: 53, rip: drainGone, rport: 5353, active: 1},
		// a UDP flow to it: IPVS counts UDP connections as inactive
		{proto: "UDP", vip: drainVIP, vport: 53, rip: drainGone, rport: 5353, inactive: 1},
	}},
	"ipvs-loopback-v1.37": {own: true, loopback: true, shape: "kube-proxy v1.37.2's IPVS proxier, its node address set " +
		"widened to what kube-proxy <= v1.21 used for NodePorts (" + loopbackWhy + "), so every NodePort also has a " +
		"virtual server on 127.0.0.1 and [::1]; everything else (real servers, ipsets, iptables) is v1.37.2's."},
}

const (
	drainVIP  = "10.96.60.10"
	drainGone = "10.244.1.60"
)

func drainSpec(n int) svcSpec {
	all := []ep{
		readyEP("10.244.0.60", "node-a", podName("dns", 0)),
		readyEP("10.244.2.60", "node-c", podName("dns", 2)),
		readyEP(drainGone, "node-b", podName("dns", 1)),
	}
	return svcSpec{
		ns: "drain", name: "dns",
		clusterIPs: []string{drainVIP},
		ports: []port{
			{name: "dns-tcp", port: 53, target: 5353, proto: v1.ProtocolTCP},
			{name: "dns", port: 53, target: 5353, proto: v1.ProtocolUDP},
		},
		v4: all[:n],
	}
}

func drainObjects() *ObjectSet {
	resourceVersion = 1000
	return buildSet([]svcSpec{drainSpec(3)})
}

// drainChurn: the pod 10.244.1.60 is deleted; the EndpointSlice controller
// drops it from the slice.
func drainChurn(before *ObjectSet) *ObjectSet {
	after := before.clone()
	replaceSlices(after, drainSpec(2))
	return after
}

func init() {
	scenarios = append(scenarios,
		&Scenario{
			Name: "ipvs-drain-v1.37",
			Description: "IPVS mode (kube-proxy v1.37.2), graceful termination: drain/dns (" + drainVIP + ", 53/TCP dns-tcp and 53/UDP dns, " +
				"3 endpoints on 5353); synced once; then, with one open TCP connection (ActiveConn 1) and one UDP flow (InActConn 1) " +
				"to pod " + drainGone + " on the kernel's real servers, that pod is deleted and kube-proxy syncs again: the TCP real " +
				"server stays at weight 0 with its connection (draining; kube-proxy reaps it once its connections are gone, checked " +
				"every minute), the UDP one is deleted at once. meta.json ipvs.drainingRealServers / removedRealServers list them; " +
				"ipvs/*.sync1.txt are the table before. objects.json is the state after the churn.",
			MasqueradeBit: 14,
			Modes:         []string{"ipvs"},
			Version:       "v1.37",
			Objects:       drainObjects,
			Churn:         drainChurn,
		},
		&Scenario{
			Name: "ipvs-loopback-v1.37",
			Description: "IPVS mode, the small set, with the loopback NodePort virtual servers (127.0.0.1:NODEPORT, [::1]:NODEPORT) " +
				"kube-proxy <= v1.21 created: rendered by kube-proxy v1.37.2's real IPVS proxier given the node addresses v1.21 " +
				"gave it (loopback included), not by v1.21 itself (see meta.json ipvs.shape and testdata/fixtures/README.md). " +
				"meta.json ipvs.unattributedVirtualServers lists the loopback virtual servers: no Service frontend of an IPVS " +
				"node answers there.",
			MasqueradeBit: 14,
			Modes:         []string{"ipvs"},
			Version:       "v1.37",
			Objects:       smallObjects,
		},
	)
}
