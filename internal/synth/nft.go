package synth

import (
	"bufio"
	"fmt"
	"io"
	"strings"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
)

// The nftables node: the same Services and endpoints as kube-proxy 1.37's
// nftables proxier writes them into `table ip kube-proxy` (one service
// chain per port holding a numgen DNAT map, the service-ips verdict map,
// the cluster-ips and hairpin sets), as nft 1.0.6 lists them. The fixed
// chains and rules are those of testdata/fixtures/large-v1.37.

// LocalNode is the node the generated rules come from.
const LocalNode = "node-000"

type nftService struct {
	chain, clusterIP string
	endpoints        []string // ip
}

func (c Cluster) nftServices() []nftService {
	out := make([]nftService, c.Services)
	for i := range out {
		base := correlate.NFTServiceBase("bench", c.name(i), "tcp", "http")
		s := nftService{chain: "service-" + base, clusterIP: c.clusterIP(i)}
		for j := 0; j < c.Endpoints; j++ {
			s.endpoints = append(s.endpoints, c.podIP(i, j))
		}
		out[i] = s
	}
	return out
}

// localEndpoints are the endpoints on LocalNode (the hairpin set).
func (c Cluster) localEndpoints() []string {
	var out []string
	for i := 0; i < c.Services; i++ {
		for j := 0; j < c.Endpoints; j++ {
			if c.nodeOf(i, j) == LocalNode {
				out = append(out, c.podIP(i, j))
			}
		}
	}
	return out
}

// WriteNFTJSON writes `nft -j list ruleset` of the node.
func (c Cluster) WriteNFTJSON(w io.Writer) error {
	bw := bufio.NewWriterSize(w, 1<<16)
	svcs := c.nftServices()
	bw.WriteString(`{"nftables": [{"metainfo": {"version": "1.0.6", "release_name": "Lester Gooch #5", "json_schema_version": 1}}, {"table": {"family": "ip", "name": "kube-proxy", "handle": 3}}`)
	bw.WriteString(`, {"set": {"family": "ip", "name": "hairpin-connections", "table": "kube-proxy", "type": ["ipv4_addr", "ipv4_addr", "inet_proto", "inet_service"], "handle": 34, "comment": "service hairpin connections", "elem": [`)
	for k, ip := range c.localEndpoints() {
		if k > 0 {
			bw.WriteString(", ")
		}
		fmt.Fprintf(bw, `{"concat": ["%s", "%s", "tcp", 8080]}`, ip, ip)
	}
	bw.WriteString(`]}}, {"set": {"family": "ip", "name": "cluster-ips", "table": "kube-proxy", "type": "ipv4_addr", "handle": 37, "comment": "Active ClusterIPs", "elem": [`)
	for i, s := range svcs {
		if i > 0 {
			bw.WriteString(", ")
		}
		fmt.Fprintf(bw, `"%s"`, s.clusterIP)
	}
	bw.WriteString(`]}}, ` + nftFixedSetsJSON + `, {"map": {"family": "ip", "name": "service-ips", "table": "kube-proxy", "type": ["ipv4_addr", "inet_proto", "inet_service"], "handle": 56, "comment": "ClusterIP, ExternalIP and LoadBalancer IP traffic", "map": "verdict", "elem": [`)
	for i, s := range svcs {
		if i > 0 {
			bw.WriteString(", ")
		}
		fmt.Fprintf(bw, `[{"concat": ["%s", "tcp", 80]}, {"goto": {"target": "%s"}}]`, s.clusterIP, s.chain)
	}
	bw.WriteString(`]}}, {"map": {"family": "ip", "name": "service-nodeports", "table": "kube-proxy", "type": ["inet_proto", "inet_service"], "handle": 57, "comment": "NodePort traffic", "map": "verdict"}}, `)
	bw.WriteString(nftFixedChainsJSON)
	handle := 100
	for _, s := range svcs {
		fmt.Fprintf(bw, `, {"chain": {"family": "ip", "table": "kube-proxy", "name": "%s", "handle": %d}}`, s.chain, handle)
		handle++
	}
	bw.WriteString(", " + nftFixedRulesJSON)
	for _, s := range svcs {
		fmt.Fprintf(bw, `, {"rule": {"family": "ip", "table": "kube-proxy", "chain": "%s", "handle": %d, "expr": [{"match": {"op": "==", "left": {"meta": {"key": "l4proto"}}, "right": "tcp"}}, {"dnat": {"family": "ip", "addr": {"map": {"key": {"numgen": {"mode": "random", "mod": %d, "offset": 0}}, "data": {"set": [`, s.chain, handle, len(s.endpoints))
		handle++
		for j, ip := range s.endpoints {
			if j > 0 {
				bw.WriteString(", ")
			}
			fmt.Fprintf(bw, `[%d, {"concat": ["%s", 8080]}]`, j, ip)
		}
		bw.WriteString(`]}}}}}]}}`)
	}
	bw.WriteString("]}\n")
	return bw.Flush()
}

// WriteNFTText writes `nft list ruleset` of the node.
func (c Cluster) WriteNFTText(w io.Writer) error {
	bw := bufio.NewWriterSize(w, 1<<16)
	svcs := c.nftServices()
	elements := func(items []string) {
		bw.WriteString("\t\telements = { ")
		for k, it := range items {
			if k > 0 {
				bw.WriteString(",\n\t\t\t     ")
			}
			bw.WriteString(it)
		}
		bw.WriteString(" }\n")
	}
	bw.WriteString("table ip kube-proxy {\n\tcomment \"rules for kube-proxy\"\n")
	bw.WriteString("\tset hairpin-connections {\n\t\ttype ipv4_addr . ipv4_addr . inet_proto . inet_service\n\t\tcomment \"service hairpin connections\"\n")
	var items []string
	for _, ip := range c.localEndpoints() {
		items = append(items, ip+" . "+ip+" . tcp . 8080")
	}
	elements(items)
	bw.WriteString("\t}\n\n\tset cluster-ips {\n\t\ttype ipv4_addr\n\t\tcomment \"Active ClusterIPs\"\n")
	items = items[:0]
	for _, s := range svcs {
		items = append(items, s.clusterIP)
	}
	elements(items)
	bw.WriteString("\t}\n\n" + nftFixedSetsText)
	bw.WriteString("\tmap service-ips {\n\t\ttype ipv4_addr . inet_proto . inet_service : verdict\n\t\tcomment \"ClusterIP, ExternalIP and LoadBalancer IP traffic\"\n")
	items = items[:0]
	for _, s := range svcs {
		items = append(items, s.clusterIP+" . tcp . 80 : goto "+s.chain)
	}
	elements(items)
	bw.WriteString("\t}\n\n\tmap service-nodeports {\n\t\ttype inet_proto . inet_service : verdict\n\t\tcomment \"NodePort traffic\"\n\t}\n\n")
	bw.WriteString(nftFixedChainsText)
	var m strings.Builder
	for _, s := range svcs {
		m.Reset()
		for j, ip := range s.endpoints {
			if j > 0 {
				m.WriteString(", ")
			}
			fmt.Fprintf(&m, "%d : %s . 8080", j, ip)
		}
		fmt.Fprintf(bw, "\n\tchain %s {\n\t\tmeta l4proto tcp dnat ip to numgen random mod %d map { %s }\n\t}\n", s.chain, len(s.endpoints), m.String())
	}
	bw.WriteString("}\n")
	return bw.Flush()
}

const nftFixedSetsJSON = `{"set": {"family": "ip", "name": "nodeport-ips", "table": "kube-proxy", "type": "ipv4_addr", "handle": 40, "comment": "IPs that accept NodePort traffic", "elem": ["10.0.0.10"]}}, {"map": {"family": "ip", "name": "no-endpoint-services", "table": "kube-proxy", "type": ["ipv4_addr", "inet_proto", "inet_service"], "handle": 41, "comment": "vmap to drop or reject packets to services with no endpoints", "map": "verdict"}}, {"map": {"family": "ip", "name": "no-endpoint-nodeports", "table": "kube-proxy", "type": ["inet_proto", "inet_service"], "handle": 42, "comment": "vmap to drop or reject packets to service nodeports with no endpoints", "map": "verdict"}}, {"map": {"family": "ip", "name": "firewall-ips", "table": "kube-proxy", "type": ["ipv4_addr", "inet_proto", "inet_service"], "handle": 54, "comment": "destinations that are subject to LoadBalancerSourceRanges", "map": "verdict"}}`

const nftFixedChainsJSON = `{"chain": {"family": "ip", "table": "kube-proxy", "name": "filter-prerouting-pre-dnat", "handle": 9, "type": "filter", "hook": "prerouting", "prio": -110, "policy": "accept"}}, {"chain": {"family": "ip", "table": "kube-proxy", "name": "filter-output-pre-dnat", "handle": 10, "type": "filter", "hook": "output", "prio": -110, "policy": "accept"}}, {"chain": {"family": "ip", "table": "kube-proxy", "name": "filter-input", "handle": 11, "type": "filter", "hook": "input", "prio": 0, "policy": "accept"}}, {"chain": {"family": "ip", "table": "kube-proxy", "name": "filter-forward", "handle": 12, "type": "filter", "hook": "forward", "prio": 0, "policy": "accept"}}, {"chain": {"family": "ip", "table": "kube-proxy", "name": "filter-output", "handle": 13, "type": "filter", "hook": "output", "prio": 0, "policy": "accept"}}, {"chain": {"family": "ip", "table": "kube-proxy", "name": "nat-prerouting", "handle": 14, "type": "nat", "hook": "prerouting", "prio": -100, "policy": "accept"}}, {"chain": {"family": "ip", "table": "kube-proxy", "name": "nat-output", "handle": 15, "type": "nat", "hook": "output", "prio": -100, "policy": "accept"}}, {"chain": {"family": "ip", "table": "kube-proxy", "name": "nat-postrouting", "handle": 16, "type": "nat", "hook": "postrouting", "prio": 100, "policy": "accept"}}, {"chain": {"family": "ip", "table": "kube-proxy", "name": "nodeport-endpoints-check", "handle": 17}}, {"chain": {"family": "ip", "table": "kube-proxy", "name": "service-endpoints-check", "handle": 19}}, {"chain": {"family": "ip", "table": "kube-proxy", "name": "firewall-check", "handle": 23}}, {"chain": {"family": "ip", "table": "kube-proxy", "name": "services", "handle": 26}}, {"chain": {"family": "ip", "table": "kube-proxy", "name": "masquerading", "handle": 29}}, {"chain": {"family": "ip", "table": "kube-proxy", "name": "cluster-ips-check", "handle": 31}}, {"chain": {"family": "ip", "table": "kube-proxy", "name": "reject-chain", "handle": 43}}`

const nftFixedRulesJSON = `{"rule": {"family": "ip", "table": "kube-proxy", "chain": "filter-prerouting-pre-dnat", "handle": 24, "expr": [{"match": {"op": "in", "left": {"ct": {"key": "state"}}, "right": "new"}}, {"jump": {"target": "firewall-check"}}]}}, {"rule": {"family": "ip", "table": "kube-proxy", "chain": "filter-output-pre-dnat", "handle": 25, "expr": [{"match": {"op": "in", "left": {"ct": {"key": "state"}}, "right": "new"}}, {"jump": {"target": "firewall-check"}}]}}, {"rule": {"family": "ip", "table": "kube-proxy", "chain": "filter-input", "handle": 18, "expr": [{"match": {"op": "in", "left": {"ct": {"key": "state"}}, "right": "new"}}, {"jump": {"target": "nodeport-endpoints-check"}}]}}, {"rule": {"family": "ip", "table": "kube-proxy", "chain": "filter-input", "handle": 20, "expr": [{"match": {"op": "in", "left": {"ct": {"key": "state"}}, "right": "new"}}, {"jump": {"target": "service-endpoints-check"}}]}}, {"rule": {"family": "ip", "table": "kube-proxy", "chain": "filter-forward", "handle": 21, "expr": [{"match": {"op": "in", "left": {"ct": {"key": "state"}}, "right": "new"}}, {"jump": {"target": "service-endpoints-check"}}]}}, {"rule": {"family": "ip", "table": "kube-proxy", "chain": "filter-forward", "handle": 32, "expr": [{"match": {"op": "in", "left": {"ct": {"key": "state"}}, "right": "new"}}, {"jump": {"target": "cluster-ips-check"}}]}}, {"rule": {"family": "ip", "table": "kube-proxy", "chain": "filter-output", "handle": 22, "expr": [{"match": {"op": "in", "left": {"ct": {"key": "state"}}, "right": "new"}}, {"jump": {"target": "service-endpoints-check"}}]}}, {"rule": {"family": "ip", "table": "kube-proxy", "chain": "filter-output", "handle": 33, "expr": [{"match": {"op": "in", "left": {"ct": {"key": "state"}}, "right": "new"}}, {"jump": {"target": "cluster-ips-check"}}]}}, {"rule": {"family": "ip", "table": "kube-proxy", "chain": "nat-prerouting", "handle": 28, "expr": [{"jump": {"target": "services"}}]}}, {"rule": {"family": "ip", "table": "kube-proxy", "chain": "nat-output", "handle": 27, "expr": [{"jump": {"target": "services"}}]}}, {"rule": {"family": "ip", "table": "kube-proxy", "chain": "nat-postrouting", "handle": 30, "expr": [{"jump": {"target": "masquerading"}}]}}, {"rule": {"family": "ip", "table": "kube-proxy", "chain": "nodeport-endpoints-check", "handle": 46, "expr": [{"match": {"op": "==", "left": {"payload": {"protocol": "ip", "field": "daddr"}}, "right": "@nodeport-ips"}}, {"vmap": {"key": {"concat": [{"meta": {"key": "l4proto"}}, {"payload": {"protocol": "th", "field": "dport"}}]}, "data": "@no-endpoint-nodeports"}}]}}, {"rule": {"family": "ip", "table": "kube-proxy", "chain": "service-endpoints-check", "handle": 45, "expr": [{"vmap": {"key": {"concat": [{"payload": {"protocol": "ip", "field": "daddr"}}, {"meta": {"key": "l4proto"}}, {"payload": {"protocol": "th", "field": "dport"}}]}, "data": "@no-endpoint-services"}}]}}, {"rule": {"family": "ip", "table": "kube-proxy", "chain": "firewall-check", "handle": 55, "expr": [{"vmap": {"key": {"concat": [{"payload": {"protocol": "ip", "field": "daddr"}}, {"meta": {"key": "l4proto"}}, {"payload": {"protocol": "th", "field": "dport"}}]}, "data": "@firewall-ips"}}]}}, {"rule": {"family": "ip", "table": "kube-proxy", "chain": "services", "handle": 58, "comment": "masquerade clusterIP traffic from outside cluster", "expr": [{"match": {"op": "==", "left": {"payload": {"protocol": "ip", "field": "daddr"}}, "right": "@cluster-ips"}}, {"match": {"op": "!=", "left": {"payload": {"protocol": "ip", "field": "saddr"}}, "right": {"prefix": {"addr": "10.244.0.0", "len": 16}}}}, {"mangle": {"key": {"meta": {"key": "mark"}}, "value": {"|": [{"meta": {"key": "mark"}}, 16384]}}}]}}, {"rule": {"family": "ip", "table": "kube-proxy", "chain": "services", "handle": 59, "expr": [{"vmap": {"key": {"concat": [{"payload": {"protocol": "ip", "field": "daddr"}}, {"meta": {"key": "l4proto"}}, {"payload": {"protocol": "th", "field": "dport"}}]}, "data": "@service-ips"}}]}}, {"rule": {"family": "ip", "table": "kube-proxy", "chain": "services", "handle": 60, "expr": [{"match": {"op": "==", "left": {"payload": {"protocol": "ip", "field": "daddr"}}, "right": "@nodeport-ips"}}, {"vmap": {"key": {"concat": [{"meta": {"key": "l4proto"}}, {"payload": {"protocol": "th", "field": "dport"}}]}, "data": "@service-nodeports"}}]}}, {"rule": {"family": "ip", "table": "kube-proxy", "chain": "masquerading", "handle": 35, "expr": [{"match": {"op": "!=", "left": {"&": [{"meta": {"key": "mark"}}, 16384]}, "right": 0}}, {"mangle": {"key": {"meta": {"key": "mark"}}, "value": {"^": [{"meta": {"key": "mark"}}, 16384]}}}, {"masquerade": {"flags": "fully-random"}}]}}, {"rule": {"family": "ip", "table": "kube-proxy", "chain": "masquerading", "handle": 36, "expr": [{"match": {"op": "in", "left": {"ct": {"key": "status"}}, "right": "dnat"}}, {"match": {"op": "==", "left": {"concat": [{"payload": {"protocol": "ip", "field": "saddr"}}, {"payload": {"protocol": "ip", "field": "daddr"}}, {"meta": {"key": "l4proto"}}, {"payload": {"protocol": "th", "field": "dport"}}]}, "right": "@hairpin-connections"}}, {"masquerade": {"flags": "fully-random"}}]}}, {"rule": {"family": "ip", "table": "kube-proxy", "chain": "cluster-ips-check", "handle": 38, "comment": "Reject traffic to invalid ports of ClusterIPs", "expr": [{"match": {"op": "==", "left": {"payload": {"protocol": "ip", "field": "daddr"}}, "right": "@cluster-ips"}}, {"reject": {"type": "icmp", "expr": "port-unreachable"}}]}}, {"rule": {"family": "ip", "table": "kube-proxy", "chain": "cluster-ips-check", "handle": 39, "comment": "Drop traffic to unallocated ClusterIPs", "expr": [{"match": {"op": "==", "left": {"payload": {"protocol": "ip", "field": "daddr"}}, "right": {"prefix": {"addr": "10.96.0.0", "len": 16}}}}, {"drop": null}]}}, {"rule": {"family": "ip", "table": "kube-proxy", "chain": "reject-chain", "handle": 44, "expr": [{"reject": {"type": "icmp", "expr": "port-unreachable"}}]}}`

const nftFixedSetsText = `	set nodeport-ips {
		type ipv4_addr
		comment "IPs that accept NodePort traffic"
		elements = { 10.0.0.10 }
	}

	map no-endpoint-services {
		type ipv4_addr . inet_proto . inet_service : verdict
		comment "vmap to drop or reject packets to services with no endpoints"
	}

	map no-endpoint-nodeports {
		type inet_proto . inet_service : verdict
		comment "vmap to drop or reject packets to service nodeports with no endpoints"
	}

	map firewall-ips {
		type ipv4_addr . inet_proto . inet_service : verdict
		comment "destinations that are subject to LoadBalancerSourceRanges"
	}

`

const nftFixedChainsText = `	chain filter-prerouting-pre-dnat {
		type filter hook prerouting priority dstnat - 10; policy accept;
		ct state new jump firewall-check
	}

	chain filter-output-pre-dnat {
		type filter hook output priority -110; policy accept;
		ct state new jump firewall-check
	}

	chain filter-input {
		type filter hook input priority filter; policy accept;
		ct state new jump nodeport-endpoints-check
		ct state new jump service-endpoints-check
	}

	chain filter-forward {
		type filter hook forward priority filter; policy accept;
		ct state new jump service-endpoints-check
		ct state new jump cluster-ips-check
	}

	chain filter-output {
		type filter hook output priority filter; policy accept;
		ct state new jump service-endpoints-check
		ct state new jump cluster-ips-check
	}

	chain nat-prerouting {
		type nat hook prerouting priority dstnat; policy accept;
		jump services
	}

	chain nat-output {
		type nat hook output priority -100; policy accept;
		jump services
	}

	chain nat-postrouting {
		type nat hook postrouting priority srcnat; policy accept;
		jump masquerading
	}

	chain nodeport-endpoints-check {
		ip daddr @nodeport-ips meta l4proto . th dport vmap @no-endpoint-nodeports
	}

	chain service-endpoints-check {
		ip daddr . meta l4proto . th dport vmap @no-endpoint-services
	}

	chain firewall-check {
		ip daddr . meta l4proto . th dport vmap @firewall-ips
	}

	chain services {
		ip daddr @cluster-ips ip saddr != 10.244.0.0/16 meta mark set meta mark | 0x00004000 comment "masquerade clusterIP traffic from outside cluster"
		ip daddr . meta l4proto . th dport vmap @service-ips
		ip daddr @nodeport-ips meta l4proto . th dport vmap @service-nodeports
	}

	chain masquerading {
		meta mark & 0x00004000 != 0x00000000 meta mark set meta mark ^ 0x00004000 masquerade fully-random
		ct status dnat ip saddr . ip daddr . meta l4proto . th dport @hairpin-connections masquerade fully-random
	}

	chain cluster-ips-check {
		ip daddr @cluster-ips reject comment "Reject traffic to invalid ports of ClusterIPs"
		ip daddr 10.96.0.0/16 drop comment "Drop traffic to unallocated ClusterIPs"
	}

	chain reject-chain {
		comment "helper for @no-endpoint-services / @no-endpoint-nodeports"
		reject
	}
`
