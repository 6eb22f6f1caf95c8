//go:build e2e

package e2e

import (
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
)

// The Services the suite creates, and an oracle of the chains kube-proxy
// writes for them, computed here from kube-proxy's naming and traffic-policy
// rules (pkg/proxy/{iptables,nftables}/proxier.go, pkg/proxy/topology.go) and
// independent of the plugin's code.

const (
	nsScenario = "e2e-svc"
	nsLoad     = "e2e-load"
	loadSvcs   = 11  // Services in nsLoad ...
	loadEPs    = 100 // ... with this many endpoints each: 1100 in all, so kube-proxy's large-cluster mode (> 1000)
)

type svcPort struct {
	name   string // "" for the single unnamed port
	port   int32
	target int32
	proto  string // TCP, UDP
}

type endpoint struct {
	ip   string
	node string // "" for an endpoint on no node of this cluster
}

type svcDef struct {
	ns, name     string
	typ          string // ClusterIP (default), NodePort, LoadBalancer
	headless     bool
	ports        []svcPort
	eps          []endpoint
	externalIPs  []string
	lbIngress    string // status.loadBalancer.ingress[0].ip
	sourceRanges []string
	eTPLocal     bool
	iTPLocal     bool
	affinity     bool
}

func (s svcDef) key() string { return s.ns + "/" + s.name }

// podIPs hands out pod IPs from each node's podCIDR.
type podIPs struct{ next map[string]int }

func (p *podIPs) on(node string) endpoint {
	if p.next == nil {
		p.next = map[string]int{}
	}
	p.next[node]++
	third := map[string]int{"node-a": 1, "node-b": 2}[node]
	return endpoint{ip: fmt.Sprintf("10.244.%d.%d", third, 10+p.next[node]), node: node}
}

// scenarioServices: every Service type and traffic policy.
func scenarioServices() []svcDef {
	var ips podIPs
	a, b := func() endpoint { return ips.on("node-a") }, func() endpoint { return ips.on("node-b") }
	http := svcPort{name: "http", port: 80, target: 8080, proto: "TCP"}
	return []svcDef{
		{name: "clusterip", ports: []svcPort{http, {name: "dns", port: 53, target: 5353, proto: "UDP"}}, eps: []endpoint{a(), a(), b()}},
		{name: "unnamed", ports: []svcPort{{port: 8080, target: 8080, proto: "TCP"}}, eps: []endpoint{a(), b()}},
		{name: "nodeport", typ: "NodePort", ports: []svcPort{http}, eps: []endpoint{a(), b()}},
		{name: "lb", typ: "LoadBalancer", ports: []svcPort{{name: "https", port: 443, target: 8443, proto: "TCP"}},
			eps: []endpoint{a(), b()}, lbIngress: "198.51.100.10", sourceRanges: []string{"203.0.113.0/25", "192.168.77.0/24"}},
		{name: "externalip", ports: []svcPort{http}, eps: []endpoint{b(), b()}, externalIPs: []string{"198.51.100.20"}},
		{name: "etp-local", typ: "LoadBalancer", ports: []svcPort{http}, eps: []endpoint{a(), b(), b()},
			lbIngress: "198.51.100.11", eTPLocal: true},
		{name: "etp-local-remote", typ: "NodePort", ports: []svcPort{http}, eps: []endpoint{b()}, eTPLocal: true},
		{name: "itp-local", ports: []svcPort{http}, eps: []endpoint{a(), b()}, iTPLocal: true},
		{name: "itp-local-remote", ports: []svcPort{http}, eps: []endpoint{b()}, iTPLocal: true},
		{name: "affinity", ports: []svcPort{http}, eps: []endpoint{a(), b()}, affinity: true},
		{name: "headless", headless: true, ports: []svcPort{http}, eps: []endpoint{a(), b()}},
		{name: "no-endpoints", ports: []svcPort{http}},
		{name: "deleted", ports: []svcPort{http}, eps: []endpoint{a(), a(), b()}},
		{name: "scaled", ports: []svcPort{http}, eps: []endpoint{a(), a(), b(), b()}},
	}
}

// loadServices: 1100 endpoints on no node of ours (other nodes' pods).
func loadServices() []svcDef {
	var defs []svcDef
	for i := 0; i < loadSvcs; i++ {
		d := svcDef{ns: nsLoad, name: fmt.Sprintf("load-%02d", i),
			ports: []svcPort{{name: "http", port: 80, target: 8080, proto: "TCP"}}}
		for j := 0; j < loadEPs; j++ {
			d.eps = append(d.eps, endpoint{ip: fmt.Sprintf("10.244.%d.%d", 100+i, 1+j)})
		}
		defs = append(defs, d)
	}
	return defs
}

func withNamespace(defs []svcDef, ns string) []svcDef {
	for i := range defs {
		if defs[i].ns == "" {
			defs[i].ns = ns
		}
	}
	return defs
}

// --- objects -----------------------------------------------------------------------

func namespaceObjects(ns string) []any {
	return []any{
		map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}},
		map[string]any{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": map[string]any{"name": "default", "namespace": ns}},
	}
}

func serviceObject(d svcDef) map[string]any {
	var ports []any
	for _, p := range d.ports {
		sp := map[string]any{"port": p.port, "targetPort": p.target, "protocol": p.proto}
		if p.name != "" {
			sp["name"] = p.name
		}
		ports = append(ports, sp)
	}
	spec := map[string]any{"ports": ports, "selector": map[string]any{"app": d.name}}
	if d.typ != "" {
		spec["type"] = d.typ
	}
	if d.headless {
		spec["clusterIP"] = "None"
	}
	if len(d.externalIPs) > 0 {
		spec["externalIPs"] = d.externalIPs
	}
	if len(d.sourceRanges) > 0 {
		spec["loadBalancerSourceRanges"] = d.sourceRanges
	}
	if d.eTPLocal {
		spec["externalTrafficPolicy"] = "Local"
	}
	if d.iTPLocal {
		spec["internalTrafficPolicy"] = "Local"
	}
	if d.affinity {
		spec["sessionAffinity"] = "ClientIP"
	}
	return map[string]any{
		"apiVersion": "v1", "kind": "Service",
		"metadata": map[string]any{"name": d.name, "namespace": d.ns, "labels": map[string]any{"app": d.name}},
		"spec":     spec,
	}
}

func sliceName(d svcDef) string { return d.name + "-e2e01" }

// sliceObject is the EndpointSlice the (absent) EndpointSlice controller
// would write for d. nil when d has no endpoints.
func sliceObject(d svcDef) map[string]any {
	if len(d.eps) == 0 {
		return nil
	}
	var ports []any
	for _, p := range d.ports {
		ep := map[string]any{"port": p.target, "protocol": p.proto, "name": p.name}
		ports = append(ports, ep)
	}
	return map[string]any{
		"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
		"metadata": map[string]any{
			"name": sliceName(d), "namespace": d.ns,
			"labels": sliceLabels(d),
		},
		"addressType": "IPv4",
		"ports":       ports,
		"endpoints":   endpointObjects(d.eps),
	}
}

// sliceLabels are the EndpointSlice controller's labels; kube-proxy does not
// watch slices labelled headless (nor headless Services).
func sliceLabels(d svcDef) map[string]any {
	l := map[string]any{
		"kubernetes.io/service-name":             d.name,
		"endpointslice.kubernetes.io/managed-by": "e2e.proxyrules.kubectl.io",
	}
	if d.headless {
		l["service.kubernetes.io/headless"] = ""
	}
	return l
}

func endpointObjects(eps []endpoint) []any {
	var out []any
	for _, e := range eps {
		ep := map[string]any{
			"addresses":  []string{e.ip},
			"conditions": map[string]any{"ready": true, "serving": true, "terminating": false},
		}
		if e.node != "" {
			ep["nodeName"] = e.node
		}
		out = append(out, ep)
	}
	return out
}

// --- the oracle ------------------------------------------------------------------

// owner is what a chain name stands for.
type owner struct {
	servicePort string // ns/name:port, or ns/name for an unnamed port
	protocol    string // TCP, UDP
	endpoint    string // ip:port, endpoint chains only
	kind        string // service, local, external, firewall, endpoint
}

func spn(d svcDef, p svcPort) string {
	if p.name == "" {
		return d.key()
	}
	return d.key() + ":" + p.name
}

func b32sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return base32.StdEncoding.EncodeToString(sum[:])
}

// iptablesNames: every chain name iptables mode could write for d, by name.
func iptablesNames(d svcDef) map[string]owner {
	names := map[string]owner{}
	for _, p := range d.ports {
		sp, proto := spn(d, p), strings.ToLower(p.proto)
		h := b32sha(sp + proto)[:16]
		for prefix, kind := range map[string]string{"KUBE-SVC-": "service", "KUBE-SVL-": "local", "KUBE-EXT-": "external", "KUBE-FW-": "firewall"} {
			names[prefix+h] = owner{servicePort: sp, protocol: p.proto, kind: kind}
		}
		for _, e := range d.eps {
			ep := net.JoinHostPort(e.ip, strconv.Itoa(int(p.target)))
			names["KUBE-SEP-"+b32sha(sp + proto + ep)[:16]] = owner{servicePort: sp, protocol: p.proto, endpoint: ep, kind: "endpoint"}
		}
	}
	return names
}

// nftablesNames: the same for nftables mode.
func nftablesNames(d svcDef) map[string]owner {
	names := map[string]owner{}
	hashed := func(s string) string { return b32sha(s)[:8] + "-" + s }
	for _, p := range d.ports {
		sp, proto := spn(d, p), strings.ToLower(p.proto)
		base := hashed(fmt.Sprintf("%s/%s/%s/%s", d.ns, d.name, proto, p.name))
		for prefix, kind := range map[string]string{"service-": "service", "local-": "local", "external-": "external", "firewall-": "firewall"} {
			names[prefix+base] = owner{servicePort: sp, protocol: p.proto, kind: kind}
		}
		for _, e := range d.eps {
			ep := net.JoinHostPort(e.ip, strconv.Itoa(int(p.target)))
			name := "endpoint-" + hashed(fmt.Sprintf("%s/%s/%s/%s__%s/%d", d.ns, d.name, proto, p.name, e.ip, p.target))
			names[name] = owner{servicePort: sp, protocol: p.proto, endpoint: ep, kind: "endpoint"}
		}
	}
	return names
}

func allNames(mode string, defs []svcDef) map[string]owner {
	all := map[string]owner{}
	for _, d := range defs {
		names := iptablesNames(d)
		if mode == "nftables" {
			names = nftablesNames(d)
		}
		for k, v := range names {
			all[k] = v
		}
	}
	return all
}

// expectedChains: the chains kube-proxy writes for defs on node, following
// its traffic-policy rules (CategorizeEndpoints, usesClusterPolicyChain, ...).
func expectedChains(mode, node string, defs []svcDef) map[string]owner {
	want := map[string]owner{}
	for _, d := range defs {
		if d.headless {
			continue // kube-proxy ignores headless Services
		}
		names := iptablesNames(d)
		if mode == "nftables" {
			names = nftablesNames(d)
		}
		byKind := map[string]string{}
		for name, o := range names {
			if o.kind != "endpoint" {
				byKind[o.servicePort+"|"+o.kind] = name
			}
		}
		epChain := map[string]string{}
		for name, o := range names {
			if o.kind == "endpoint" {
				epChain[o.servicePort+"|"+o.endpoint] = name
			}
		}
		external := d.typ == "NodePort" || d.typ == "LoadBalancer" || len(d.externalIPs) > 0 || d.lbIngress != ""
		usesCluster := !d.iTPLocal || external
		usesLocal := d.iTPLocal || (d.eTPLocal && external)
		for _, p := range d.ports {
			sp := spn(d, p)
			var cluster, local []endpoint
			if usesCluster {
				cluster = d.eps
			}
			if usesLocal {
				for _, e := range d.eps {
					if e.node == node {
						local = append(local, e)
					}
				}
			}
			hasEndpoints := len(cluster) > 0 || (usesLocal && len(d.eps) > 0)
			add := func(kind string) { want[byKind[sp+"|"+kind]] = names[byKind[sp+"|"+kind]] }
			if len(cluster) > 0 {
				add("service")
			}
			if len(local) > 0 {
				add("local")
			}
			if hasEndpoints && external {
				add("external")
			}
			lbFW := d.typ == "LoadBalancer" && d.lbIngress != "" && len(d.sourceRanges) > 0
			if lbFW && (hasEndpoints || mode == "nftables") {
				add("firewall")
			}
			// Endpoint chains: every locally reachable endpoint in iptables
			// mode; in nftables mode only with ClientIP affinity.
			if mode == "iptables" || d.affinity {
				reach := cluster
				if len(cluster) == 0 {
					reach = local
				}
				for _, e := range reach {
					name := epChain[sp+"|"+net.JoinHostPort(e.ip, strconv.Itoa(int(p.target)))]
					want[name] = names[name]
				}
			}
		}
	}
	return want
}

// minus: the names in a that are not in b.
func minus(a, b map[string]owner) map[string]owner {
	out := map[string]owner{}
	for k, v := range a {
		if _, ok := b[k]; !ok {
			out[k] = v
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
