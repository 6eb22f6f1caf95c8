package main

// Scenarios about the node rather than the API objects: nftables stale chains
// after churn, foreign rules that use kube-proxy's mark bits, rules left by
// older kube-proxies (legacy iptables backend, KUBE-XLB chains), and a sync
// that fails because of such a leftover. Plain k8s.io/api only; builds against
// every kube-proxy version this generator supports.

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
)

// ForeignMarkRule is one rule of a foreign (CNI-like) ruleset that sets or
// tests packet-mark bits, recorded in meta.json. Rule is the text as
// iptables-save / nft list ruleset print it (checked by `fixturegen expected`).
type ForeignMarkRule struct {
	Mode   string `json:"mode"`   // "iptables" | "nftables"
	Family string `json:"family"` // "IPv4" | "IPv6" | "inet"
	Table  string `json:"table"`
	Chain  string `json:"chain"`
	Rule   string `json:"rule"`
	// Action: "set" (the rule writes the bits) or "test" (it matches on them).
	Action string `json:"action"`
	// Bits: the mark bits the rule sets or tests.
	Bits string `json:"bits"`
	// Clashes: the bits overlap kube-proxy's masquerade mark (1<<masqueradeBit).
	Clashes bool `json:"clashes"`
}

// LeftoverChain is a chain that an older component wrote and nothing current
// writes, references or deletes, recorded in meta.json.
type LeftoverChain struct {
	Mode        string `json:"mode"`
	Family      string `json:"family"`
	Table       string `json:"table"`
	Chain       string `json:"chain"`
	Kind        string `json:"kind"`
	ServicePort string `json:"servicePort,omitempty"`
	Protocol    string `json:"protocol,omitempty"`
	WrittenBy   string `json:"writtenBy"`
	Referenced  bool   `json:"referenced"`
	Note        string `json:"note,omitempty"`
}

// ---------------------------------------------------------------------------
// nft-churn-v1.37

func nftChurnSpec(name string, n int) svcSpec {
	switch name {
	case "sticky":
		// ClientIP affinity: endpoint chains and affinity-* sets.
		s := svcSpec{
			ns: "load", name: "sticky",
			clusterIPs: []string{"10.96.50.1"},
			ports:      []port{{name: "http", port: 80, target: 8080}},
			affinity:   true,
		}
		all := []ep{
			readyEP("10.244.0.201", "node-a", podName("sticky", 0)),
			readyEP("10.244.1.201", "node-b", podName("sticky", 1)),
			readyEP("10.244.2.201", "node-c", podName("sticky", 2)),
			readyEP("10.244.0.202", "node-a", podName("sticky", 3)),
		}
		s.v4 = all[:n]
		return s
	case "grow":
		s := svcSpec{
			ns: "load", name: "grow",
			clusterIPs: []string{"10.96.50.2"},
			ports:      []port{{name: "http", port: 80, target: 8080}},
		}
		all := []ep{
			readyEP("10.244.0.211", "node-a", podName("grow", 0)),
			readyEP("10.244.1.211", "node-b", podName("grow", 1)),
			readyEP("10.244.2.211", "node-c", podName("grow", 2)),
			readyEP("10.244.1.212", "node-b", podName("grow", 3)),
		}
		s.v4 = all[:n]
		return s
	case "gone":
		// Dual-stack NodePort with affinity, deleted by the churn: service-,
		// external- and endpoint- chains in both families go stale.
		return svcSpec{
			ns: "load", name: "gone",
			typ:        v1.ServiceTypeNodePort,
			clusterIPs: []string{"10.96.50.3", "fd00:10:96::32"},
			ports:      []port{{name: "http", port: 80, target: 8080, nodePort: 30900}},
			affinity:   true,
			v4: []ep{
				readyEP("10.244.0.221", "node-a", podName("gone", 0)),
				readyEP("10.244.2.221", "node-c", podName("gone", 1)),
			},
			v6: []ep{
				readyEP("fd00:10:244::221", "node-a", podName("gone", 0)),
				readyEP("fd00:10:244:2::221", "node-c", podName("gone", 1)),
			},
		}
	}
	panic("unknown nft-churn service " + name)
}

func nftChurnObjects() *ObjectSet {
	resourceVersion = 1000
	specs := smallSpecs()
	specs = append(specs, nftChurnSpec("sticky", 4), nftChurnSpec("grow", 2), nftChurnSpec("gone", 0))
	return buildSet(specs)
}

// replaceSlices swaps the EndpointSlices of spec's Service in o for freshly
// built ones (new resourceVersions), as the endpointslice controller updates
// them in place (same names).
func replaceSlices(o *ObjectSet, spec svcSpec) {
	_, slices := spec.build()
	byName := map[string]*discovery.EndpointSlice{}
	for _, sl := range slices {
		sl.ResourceVersion = nextRV()
		byName[sl.Name] = sl
	}
	for k, s := range o.Slices {
		if n := byName[s.Name]; n != nil && s.Namespace == spec.ns {
			o.Slices[k] = n
		}
	}
}

// deleteService removes a Service and its EndpointSlices.
func deleteService(o *ObjectSet, ns, name string) {
	var svcs []*v1.Service
	for _, s := range o.Services {
		if s.Namespace != ns || s.Name != name {
			svcs = append(svcs, s)
		}
	}
	o.Services = svcs
	var sls []*discovery.EndpointSlice
	for _, s := range o.Slices {
		if s.Namespace != ns || s.Labels[discovery.LabelServiceName] != name {
			sls = append(sls, s)
		}
	}
	o.Slices = sls
}

// nftChurn: load/sticky (ClientIP affinity) 4 -> 2 endpoints, load/grow 2 -> 4,
// load/gone (dual-stack NodePort, affinity) deleted.
func nftChurn(before *ObjectSet) *ObjectSet {
	after := before.clone()
	replaceSlices(after, nftChurnSpec("sticky", 2))
	replaceSlices(after, nftChurnSpec("grow", 4))
	deleteService(after, "load", "gone")
	return after
}

// ---------------------------------------------------------------------------
// foreign-mark-v1.37

// foreignMarkIPTables is the CNI-like ruleset (and the old kubelet's unused
// KUBE-MARK-DROP) that already is on the node when kube-proxy starts, as
// iptables-restore --noflush input. Rules are written in the canonical form
// iptables-save prints, so that meta.json's text can be found verbatim in the
// save files.
func foreignMarkIPTables(family v1.IPFamily) string {
	return `*mangle
:PREROUTING - [0:0]
:cali-PREROUTING - [0:0]
-A PREROUTING -m comment --comment "cali:6gwbT8clXdHdC1b1" -j cali-PREROUTING
-A cali-PREROUTING -i cali+ -m comment --comment "cali:nM4dXmXtzHQ7u3dF" -j MARK --set-xmark 0x4000/0x4000
COMMIT
*filter
:FORWARD - [0:0]
:cali-FORWARD - [0:0]
-A FORWARD -m comment --comment "cali:wUHhoiAYhphO9Mso" -j cali-FORWARD
-A cali-FORWARD -m comment --comment "cali:vjrMJCRpqwy5oRoX" -m mark --mark 0x10000/0x10000 -j ACCEPT
-A cali-FORWARD -i cali+ -m comment --comment "cali:Pm5MCCxwE6yIn5b5" -m mark --mark 0x4000/0x4000 -j ACCEPT
COMMIT
*nat
:KUBE-MARK-DROP - [0:0]
-A KUBE-MARK-DROP -j MARK --set-xmark 0x8000/0x8000
COMMIT
`
}

func foreignMarkRules() []ForeignMarkRule {
	var out []ForeignMarkRule
	for _, fam := range []string{"IPv4", "IPv6"} {
		out = append(out,
			ForeignMarkRule{Mode: "iptables", Family: fam, Table: "mangle", Chain: "cali-PREROUTING",
				Rule:   `-A cali-PREROUTING -i cali+ -m comment --comment "cali:nM4dXmXtzHQ7u3dF" -j MARK --set-xmark 0x4000/0x4000`,
				Action: "set", Bits: "0x00004000", Clashes: true},
			ForeignMarkRule{Mode: "iptables", Family: fam, Table: "filter", Chain: "cali-FORWARD",
				Rule:   `-A cali-FORWARD -m comment --comment "cali:vjrMJCRpqwy5oRoX" -m mark --mark 0x10000/0x10000 -j ACCEPT`,
				Action: "test", Bits: "0x00010000", Clashes: false},
			ForeignMarkRule{Mode: "iptables", Family: fam, Table: "filter", Chain: "cali-FORWARD",
				Rule:   `-A cali-FORWARD -i cali+ -m comment --comment "cali:Pm5MCCxwE6yIn5b5" -m mark --mark 0x4000/0x4000 -j ACCEPT`,
				Action: "test", Bits: "0x00004000", Clashes: true},
			// The kubelet (<= 1.27) created it; nothing jumps to it. 0x8000 is
			// not kube-proxy's bit here (masqueradeBit 14).
			ForeignMarkRule{Mode: "iptables", Family: fam, Table: "nat", Chain: "KUBE-MARK-DROP",
				Rule:   `-A KUBE-MARK-DROP -j MARK --set-xmark 0x8000/0x8000`,
				Action: "set", Bits: "0x00008000", Clashes: false},
		)
	}
	out = append(out,
		ForeignMarkRule{Mode: "nftables", Family: "inet", Table: "cni-foo", Chain: "prerouting",
			Rule:   `iifname "foo*" meta mark set meta mark | 0x00004000 comment "mark pod traffic"`,
			Action: "set", Bits: "0x00004000", Clashes: true},
		ForeignMarkRule{Mode: "nftables", Family: "inet", Table: "cni-foo", Chain: "forward",
			Rule:   `meta mark & 0x00010000 != 0x00000000 accept comment "allowed by policy"`,
			Action: "test", Bits: "0x00010000", Clashes: false},
		ForeignMarkRule{Mode: "nftables", Family: "inet", Table: "cni-foo", Chain: "forward",
			Rule:   `iifname "foo*" meta mark & 0x00004000 != 0x00000000 accept comment "marked pod traffic"`,
			Action: "test", Bits: "0x00004000", Clashes: true},
	)
	return out
}

// foreignMarkNFT is loaded with `nft -f` into the nftables-mode namespace
// after kube-proxy's syncs, in the form nft list ruleset prints it.
const foreignMarkNFT = `table inet cni-foo {
	chain prerouting {
		type filter hook prerouting priority mangle; policy accept;
		iifname "foo*" meta mark set meta mark | 0x00004000 comment "mark pod traffic"
	}

	chain forward {
		type filter hook forward priority filter; policy accept;
		meta mark & 0x00010000 != 0x00000000 accept comment "allowed by policy"
		iifname "foo*" meta mark & 0x00004000 != 0x00000000 accept comment "marked pod traffic"
	}
}
`

// ---------------------------------------------------------------------------
// KUBE-XLB leftovers (kube-proxy <= 1.23)

// xlbTarget is the externalTrafficPolicy: Local service port whose v1.23
// KUBE-XLB chain is left on the node, and its local endpoint at v1.23 time.
const (
	xlbSPN      = "shop/ingress:http"
	xlbProto    = "tcp"
	xlbEndpoint = "10.244.0.51:8080"
)

func xlbNames() (xlb, svc, sep string) {
	h := b32hash(xlbSPN+xlbProto, 16)
	return "KUBE-XLB-" + h, "KUBE-SVC-" + h, "KUBE-SEP-" + b32hash(xlbSPN+xlbProto+xlbEndpoint, 16)
}

// xlbSeed is the nat part of kube-proxy v1.23's state for shop/ingress:http as
// v1.23.17 wrote it (pkg/proxy/iptables/proxier.go:1348-1386 there: the
// "Redirect pods" rule via localDetector.JumpIfLocal (-s <clusterCIDR>), the
// LOCAL masquerade and route rules, then writeServiceToEndpointRules to the
// local endpoint's KUBE-SEP chain, with the bare service-port comment of
// appendServiceCommentLocked). Only KUBE-XLB keeps its rules: kube-proxy
// v1.37 rewrites the KUBE-SVC/KUBE-SEP/KUBE-MARK-MASQ chains it shares with
// v1.23, and never touches KUBE-XLB (not one of its prefixes).
func xlbSeed() string {
	xlb, svc, sep := xlbNames()
	return fmt.Sprintf(`*nat
:KUBE-MARK-MASQ - [0:0]
:%[1]s - [0:0]
:%[2]s - [0:0]
:%[3]s - [0:0]
-A %[1]s -m comment --comment "Redirect pods trying to reach external loadbalancer VIP to clusterIP" -s %[4]s -j %[2]s
-A %[1]s -m comment --comment "masquerade LOCAL traffic for %[5]s LB IP" -m addrtype --src-type LOCAL -j KUBE-MARK-MASQ
-A %[1]s -m comment --comment "route LOCAL traffic for %[5]s LB IP to service chain" -m addrtype --src-type LOCAL -j %[2]s
-A %[1]s -m comment --comment %[5]s -j %[3]s
COMMIT
`, xlb, svc, sep, clusterCIDRv4, xlbSPN)
}

func xlbLeftover(note string) LeftoverChain {
	xlb, _, _ := xlbNames()
	return LeftoverChain{
		Mode: "iptables", Family: "IPv4", Table: "nat", Chain: xlb, Kind: "local",
		ServicePort: xlbSPN, Protocol: strings.ToUpper(xlbProto),
		WrittenBy: "kube-proxy v1.23", Referenced: false, Note: note,
	}
}

// kubeletHintSeed: the kubelet's marker of the iptables backend in use (mangle),
// which makes iptables-wrapper pick nft even when the legacy backend holds more
// rules.
const kubeletHintSeed = `*mangle
:KUBE-IPTABLES-HINT - [0:0]
COMMIT
`

// ---------------------------------------------------------------------------
// sync-failure-v1.37

// ingressPodMoved: the local shop/ingress pod is replaced (new IP on the same
// node): kube-proxy wants to delete the old endpoint's KUBE-SEP chain, which the
// v1.23 KUBE-XLB chain still jumps to.
func ingressPodMoved(before *ObjectSet) *ObjectSet {
	after := before.clone()
	for _, s := range smallSpecs() {
		if s.ns == "shop" && s.name == "ingress" {
			s.v4 = []ep{
				readyEP("10.244.0.52", "node-a", podName("ingress", 2)),
				readyEP("10.244.1.51", "node-b", podName("ingress", 1)),
			}
			replaceSlices(after, s)
		}
	}
	return after
}

// ---------------------------------------------------------------------------
// outage-v1.37

// checkoutSpec is shop/checkout, three endpoints in the given condition.
func checkoutSpec(mk func(ip, node, pod string) ep) svcSpec {
	return svcSpec{
		ns: "shop", name: "checkout",
		clusterIPs: []string{"10.96.10.20"},
		ports:      []port{{name: "http", port: 80, target: 8080}},
		v4: []ep{
			mk("10.244.0.161", "node-a", podName("checkout", 0)),
			mk("10.244.1.161", "node-b", podName("checkout", 1)),
			mk("10.244.2.161", "node-c", podName("checkout", 2)),
		},
	}
}

// unreadyEP is an endpoint whose pod fails its readiness probe: not
// ready, not serving, not terminating.
func unreadyEP(ip, node, pod string) ep {
	return ep{ip: ip, node: node, pod: pod}
}

func outageObjects() *ObjectSet {
	resourceVersion = 1000
	return buildSet(append(smallSpecs(), checkoutSpec(readyEP)))
}

// checkoutUnready: every shop/checkout pod fails its readiness probe.
func checkoutUnready(before *ObjectSet) *ObjectSet {
	after := before.clone()
	replaceSlices(after, checkoutSpec(unreadyEP))
	return after
}

func ipv4Only(s string) func(v1.IPFamily) string {
	return func(f v1.IPFamily) string {
		if f == v1.IPv4Protocol {
			return s
		}
		return ""
	}
}

func init() {
	xlb, _, sep := xlbNames()
	scenarios = append(scenarios,
		&Scenario{
			Name: "nft-churn-v1.37",
			Description: "nftables mode (kube-proxy v1.37.2): the small set plus load/sticky (ClientIP affinity, 4 endpoints), load/grow (2 endpoints) and load/gone " +
				"(dual-stack NodePort, ClientIP affinity); synced once, then load/sticky scaled 4->2, load/grow 2->4, load/gone deleted, and synced again " +
				"right away. kube-proxy flushes the chains that are no longer used in that sync and deletes them only in a later sync more than 1s after " +
				"(nftables/proxier.go: staleChains); the ruleset is read right after the second sync, so they are present and empty (meta.json staleChains, " +
				"stale:true in expected.json). Unused affinity-* sets are deleted immediately, and map/set elements of the changed services are already " +
				"updated. objects.json is the state after the churn.",
			MasqueradeBit: 14,
			Modes:         []string{"nftables"},
			Version:       "v1.37",
			Objects:       nftChurnObjects,
			Churn:         nftChurn,
		},
		&Scenario{
			Name: "foreign-mark-v1.37",
			Description: "the small set (kube-proxy v1.37.2, masqueradeBit 14 = 0x4000) next to a foreign CNI-like ruleset that sets and tests mark bits " +
				"(meta.json foreignMarkRules): iptables: cali-PREROUTING (mangle) sets 0x4000 on pod traffic, cali-FORWARD (filter) accepts on 0x10000 " +
				"(no clash) and on 0x4000 (clash), and the kubelet's old unused KUBE-MARK-DROP (nat, 0x8000; kubelet <= 1.27) is still there; these are " +
				"on the node before kube-proxy starts (iptables/foreign-ipv{4,6}.txt, loaded into the fake iptables with --noflush semantics, so " +
				"restore-*.txt, the save files and nft-list.txt all show them next to kube-proxy's rules). nftables: table inet cni-foo " +
				"(nftables/foreign.nft) loaded with nft -f after kube-proxy's sync.",
			MasqueradeBit:    14,
			Modes:            []string{"iptables", "nftables"},
			Version:          "v1.37",
			Objects:          smallObjects,
			IPTablesSeed:     foreignMarkIPTables,
			NFTForeign:       foreignMarkNFT,
			ForeignMarkRules: foreignMarkRules(),
		},
		&Scenario{
			Name: "legacy-leftovers-v1.37",
			Description: "an iptables-nft node (kube-proxy v1.37.2, small set, nft backend) that still has an older kube-proxy's rules in the legacy " +
				"backend: kube-proxy v1.34.3's restore of the same objects (small-v1.34) loaded with iptables-legacy-restore into the same namespace, " +
				"so iptables-nft-save prints \"# Warning: iptables-legacy tables present, use iptables-legacy-save to see them\" and " +
				"save-legacy-ipv{4,6}.txt are those LEGACY leftovers (not the current state). The kubelet's KUBE-IPTABLES-HINT (mangle) is in the nft " +
				"backend, so iptables-wrapper picks nft. The nft backend also holds " + xlb + ", the KUBE-XLB chain kube-proxy v1.23 wrote for " +
				xlbSPN + " (externalTrafficPolicy Local), jumping to the local endpoint's " + sep + ": present before kube-proxy v1.37 started, never " +
				"written, referenced or deleted by it (KUBE-XLB- is not one of its prefixes), so expected.json lists it as kind local, stale:true.",
			MasqueradeBit: 14,
			Modes:         []string{"iptables"},
			Version:       "v1.37",
			Objects:       smallObjects,
			IPTablesSeed: func(f v1.IPFamily) string {
				// the kubelet writes its hint in both families
				return ipv4Only(xlbSeed())(f) + kubeletHintSeed
			},
			LegacyBackend:  "small-v1.34",
			LeftoverChains: []LeftoverChain{xlbLeftover("written by kube-proxy <= 1.23 (KUBE-XLB was replaced by KUBE-EXT/KUBE-SVL in 1.24); current kube-proxy never writes or deletes it, so expected.json marks it stale:true")},
		},
		&Scenario{
			Name: "outage-v1.37",
			Description: "an outage the rules get right (kube-proxy v1.37.2): the small set plus shop/checkout (10.96.10.20:80, 3 endpoints), " +
				"synced once with its endpoints ready; then all three pods fail their readiness probe (ready, serving and terminating false) and " +
				"kube-proxy syncs again: it writes the \"has no endpoints\" reject for shop/checkout, as it should. objects.json is the state " +
				"after the churn.",
			MasqueradeBit: 14,
			Modes:         []string{"iptables", "nftables"},
			Version:       "v1.37",
			Objects:       outageObjects,
			Churn:         checkoutUnready,
		},
		&Scenario{
			Name: "sync-failure-v1.37",
			Description: "iptables mode (kube-proxy v1.37.2), small set, with the v1.23 leftover " + xlb + " (as in legacy-leftovers-v1.37) jumping to " +
				sep + " (shop/ingress's local endpoint " + xlbEndpoint + "). Synced once (full, OK); then that pod is replaced (10.244.0.52), so the " +
				"second sync (partial) deletes " + sep + " (-X), which the leftover chain still references: the IPv4 iptables-restore fails " +
				"(restore_failures_total and partial_restore_failures_total +1), kube-proxy forces a full sync, which fails the same way " +
				"(restore_failures_total +1). The failing restores are checked with the real iptables-{nft,legacy}-restore " +
				"(iptables/failed-restore-ipv4.txt: kube-proxy's input of the last failed sync; failed-restore-{nft,legacy}-ipv4.stderr.txt: what the " +
				"real tools answer when it is applied with --noflush on top of restore-ipv4.txt). The IPv4 rules stay as after the first sync " +
				"(the nat table is never committed), while objects.json is the state after the churn; the IPv6 proxier syncs fine. Modelled on " +
				"kubernetes/kubernetes#132516.",
			MasqueradeBit:  14,
			Modes:          []string{"iptables"},
			Version:        "v1.37",
			Objects:        smallObjects,
			Churn:          ingressPodMoved,
			ExtraSyncs:     1,
			IPTablesSeed:   ipv4Only(xlbSeed()),
			VerifyFailures: true,
			LeftoverChains: []LeftoverChain{xlbLeftover("written by kube-proxy <= 1.23; it still jumps to " + sep + ", so kube-proxy v1.37 cannot delete that chain when the endpoint goes away: every IPv4 sync fails from then on")},
		},
	)
}
