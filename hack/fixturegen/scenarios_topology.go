package main

// The topology scenario: Services with trafficDistribution (and the hints
// the EndpointSlice controller writes for it) on a node whose zone kube-proxy
// knows, so that kube-proxy's own CategorizeEndpoints decides which endpoints
// the node programs.

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func zoneOf(node string) string { return "zone-" + strings.TrimPrefix(node, "node-") }

// hinted gives endpoints the hints the EndpointSlice controller writes:
// PreferSameZone/PreferClose hint each endpoint for its own zone,
// PreferSameNode for its own node and zone.
func hinted(mode string, eps ...ep) []ep {
	out := make([]ep, len(eps))
	for i, e := range eps {
		if e.node != "" {
			e.zoneHints = []string{zoneOf(e.node)}
			if mode == v1.ServiceTrafficDistributionPreferSameNode {
				e.nodeHints = []string{e.node}
			}
		}
		out[i] = e
	}
	return out
}

func topoEP(i int, node, app string) ep {
	n := strings.TrimPrefix(node, "node-")
	sub := map[string]int{"a": 0, "b": 1, "c": 2}[n]
	return readyEP(fmt.Sprintf("10.244.%d.%d", sub, 100+i), node, podName(app, i))
}

func topologySpecs() []svcSpec {
	zone, near, node := v1.ServiceTrafficDistributionPreferSameZone, v1.ServiceTrafficDistributionPreferClose, v1.ServiceTrafficDistributionPreferSameNode
	three := func(app string, base int) []ep {
		return []ep{topoEP(base, "node-a", app), topoEP(base+1, "node-b", app), topoEP(base+2, "node-c", app)}
	}
	six := func(app string, base int) []ep {
		return append(three(app, base), three(app, base+3)...)
	}
	unhinted := func(eps []ep, i int) []ep {
		eps[i].zoneHints, eps[i].nodeHints = nil, nil
		return eps
	}
	otherZones := func(eps []ep) []ep {
		for i := range eps {
			eps[i].zoneHints = []string{"zone-b"}
			if eps[i].node == "node-c" {
				eps[i].zoneHints = []string{"zone-c"}
			}
		}
		return eps
	}
	notReadyA := func(eps []ep) []ep {
		for i := range eps {
			if eps[i].node == "node-a" {
				eps[i] = termEP(eps[i].ip, eps[i].node, eps[i].pod)
				eps[i].zoneHints = []string{"zone-a"}
			}
		}
		return eps
	}
	return []svcSpec{
		{ // two endpoints per zone, each hinted for its own zone: node-a uses zone-a's two
			ns: "topo", name: "zonal", clusterIPs: []string{"10.96.50.1"}, ports: []port{{name: "http", port: 80, target: 8080}},
			trafficDistribution: zone, v4: hinted(zone, six("zonal", 0)...),
		},
		{ // PreferClose, the older name of PreferSameZone
			ns: "topo", name: "close", clusterIPs: []string{"10.96.50.2"}, ports: []port{{name: "http", port: 80, target: 8080}},
			trafficDistribution: near, v4: hinted(near, three("close", 10)...),
		},
		{ // node hints: node-a uses its own endpoint only
			ns: "topo", name: "same-node", clusterIPs: []string{"10.96.50.3"}, ports: []port{{name: "http", port: 80, target: 8080}},
			trafficDistribution: node, v4: hinted(node, three("same-node", 20)...),
		},
		{ // node hints but none for node-a: zone hints decide, and none is for zone-a either: every endpoint
			ns: "topo", name: "same-node-elsewhere", clusterIPs: []string{"10.96.50.4"}, ports: []port{{name: "http", port: 80, target: 8080}},
			trafficDistribution: node, v4: hinted(node, topoEP(30, "node-b", "same-node-elsewhere"), topoEP(31, "node-c", "same-node-elsewhere")),
		},
		{ // one ready endpoint without a hint: kube-proxy ignores the hints
			ns: "topo", name: "partial-hints", clusterIPs: []string{"10.96.50.5"}, ports: []port{{name: "http", port: 80, target: 8080}},
			trafficDistribution: zone, v4: unhinted(hinted(zone, three("partial-hints", 40)...), 2),
		},
		{ // no hint for zone-a: kube-proxy ignores the hints
			ns: "topo", name: "other-zones", clusterIPs: []string{"10.96.50.6"}, ports: []port{{name: "http", port: 80, target: 8080}},
			trafficDistribution: zone, v4: otherZones(hinted(zone, three("other-zones", 50)...)),
		},
		{ // internalTrafficPolicy Local: the node's own endpoints, hints ignored
			ns: "topo", name: "zonal-local", clusterIPs: []string{"10.96.50.7"}, ports: []port{{name: "http", port: 80, target: 8080}},
			itpLocal: true, trafficDistribution: zone, v4: otherZones(hinted(zone, three("zonal-local", 60)...)),
		},
		{ // LoadBalancer, externalTrafficPolicy Local: internal traffic by zone, external by node
			ns: "topo", name: "zonal-lb", typ: v1.ServiceTypeLoadBalancer, clusterIPs: []string{"10.96.50.8"},
			ports: []port{{name: "http", port: 80, target: 8080, nodePort: 31180}}, lbIPs: []string{"198.51.100.50"},
			etpLocal: true, hcNodePort: 32050, trafficDistribution: zone, v4: hinted(zone, six("zonal-lb", 70)...),
		},
		{ // zone-a's endpoint is terminating: the ready ones have no hint for zone-a, so all ready ones are used
			ns: "topo", name: "zonal-draining", clusterIPs: []string{"10.96.50.9"}, ports: []port{{name: "http", port: 80, target: 8080}},
			trafficDistribution: zone, v4: notReadyA(hinted(zone, three("zonal-draining", 80)...)),
		},
		{ // dual-stack, hinted in both families
			ns: "topo", name: "zonal-dual", clusterIPs: []string{"10.96.50.10", "fd00:10:96::50:a"}, ports: []port{{name: "http", port: 80, target: 8080}},
			trafficDistribution: zone, v4: hinted(zone, three("zonal-dual", 90)...),
			v6: hinted(zone, readyEP("fd00:10:244::190", "node-a", podName("zonal-dual", 0)), readyEP("fd00:10:244:1::190", "node-b", podName("zonal-dual", 1))),
		},
		{ // ClientIP affinity with zone hints (nftables: per-endpoint chains)
			ns: "topo", name: "zonal-sticky", clusterIPs: []string{"10.96.50.11"}, ports: []port{{name: "http", port: 80, target: 8080}},
			affinity: true, trafficDistribution: zone, v4: hinted(zone, six("zonal-sticky", 100)...),
		},
	}
}

func topologyObjects() *ObjectSet {
	resourceVersion = 1000
	specs := smallSpecs()[:2] // default/kubernetes and kube-dns, as on every cluster
	return buildSet(append(specs, topologySpecs()...))
}

// nodeObjects are the cluster's Nodes as `kubectl get nodes -o json` shows
// them: node-a with the scenario's labels, the others in their zones.
func nodeObjects(sc *Scenario) []any {
	var out []any
	for _, name := range []string{"node-a", "node-b", "node-c"} {
		labels := map[string]string{"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
			v1.LabelTopologyZone: zoneOf(name), v1.LabelTopologyRegion: "region-1"}
		if name == nodeName {
			labels = sc.NodeLabels
		}
		out = append(out, &v1.Node{
			TypeMeta:   metav1.TypeMeta{Kind: "Node", APIVersion: "v1"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, UID: uid("Node", "", name), ResourceVersion: nextRV(), CreationTimestamp: fixedTime},
			Status: v1.NodeStatus{Addresses: []v1.NodeAddress{
				{Type: v1.NodeInternalIP, Address: nodes[name].v4}, {Type: v1.NodeInternalIP, Address: nodes[name].v6},
				{Type: v1.NodeHostName, Address: name}}},
		})
	}
	return out
}
