// Package kubeproxy is the vocabulary every stage shares: kube-proxy's proxy
// modes, the iptables backends, IP families, table names, the kinds of chain
// kube-proxy writes and the names of its fixed chains and per-service
// prefixes, as kube-proxy v1.37 (pkg/proxy/iptables, pkg/proxy/nftables)
// spells them. It imports nothing of the project: parsers, correlation,
// diagnosis, collection and rendering all use these one definitions.
package kubeproxy

import (
	"fmt"
	"strings"
	"time"
)

// Mode is a proxy mode, as kube-proxy's configuration and /proxyMode say it,
// or as a node's rules show it.
type Mode string

const (
	ModeIPTables    Mode = "iptables"
	ModeNFTables    Mode = "nftables"
	ModeIPVS        Mode = "ipvs"
	ModeKernelspace Mode = "kernelspace" // Windows
	// ModeBoth: the node holds the rules of both iptables and nftables mode.
	ModeBoth Mode = "iptables+nftables"
	// ModeUnknown: nothing tells.
	ModeUnknown Mode = "unknown"
)

// Has reports whether the rules of mode m include those of mode o: both
// holds iptables and nftables; ipvs mode keeps iptables chains.
func (m Mode) Has(o Mode) bool {
	switch {
	case m == o:
		return true
	case m == ModeBoth:
		return o == ModeIPTables || o == ModeNFTables
	case m == ModeIPVS:
		return o == ModeIPTables
	}
	return false
}

// Backend is the iptables backend that holds a table.
type Backend string

const (
	BackendNFT     Backend = "nf_tables"
	BackendLegacy  Backend = "legacy"
	BackendUnknown Backend = ""
)

// Other is the other backend; BackendUnknown stays unknown.
func (b Backend) Other() Backend {
	switch b {
	case BackendNFT:
		return BackendLegacy
	case BackendLegacy:
		return BackendNFT
	}
	return BackendUnknown
}

// Family is an IP family.
type Family string

const (
	IPv4 Family = "IPv4"
	IPv6 Family = "IPv6"
)

// Short is "v4" or "v6".
func (f Family) Short() string {
	switch f {
	case IPv4:
		return "v4"
	case IPv6:
		return "v6"
	}
	return string(f)
}

// FamilyOfIP says which family an address (or CIDR) belongs to.
func FamilyOfIP(ip string) Family {
	if strings.Contains(ip, ":") {
		return IPv6
	}
	return IPv4
}

// iptables tables kube-proxy uses, and nftables mode's table.
const (
	TableNAT    = "nat"
	TableFilter = "filter"
	TableMangle = "mangle"
	// NFTTable is the table kube-proxy's nftables mode writes, in the ip
	// and ip6 families.
	NFTTable = "kube-proxy"
)

// ChainKind says what a kube-proxy chain is for.
type ChainKind string

const (
	KindService  ChainKind = "service"  // KUBE-SVC-, service-
	KindLocal    ChainKind = "local"    // KUBE-SVL-, local-, pre-1.24 KUBE-XLB-
	KindExternal ChainKind = "external" // KUBE-EXT-, external-
	KindFirewall ChainKind = "firewall" // KUBE-FW-, firewall-
	KindEndpoint ChainKind = "endpoint" // KUBE-SEP-, endpoint-
	KindFixed    ChainKind = "fixed"    // KUBE-SERVICES, services, …
	KindUnknown  ChainKind = "unknown"  // a KUBE- chain kube-proxy does not write
)

// kube-proxy's fixed iptables chains (pkg/proxy/iptables/proxier.go).
const (
	ChainServices         = "KUBE-SERVICES"
	ChainExternalServices = "KUBE-EXTERNAL-SERVICES"
	ChainNodePorts        = "KUBE-NODEPORTS"
	ChainPostrouting      = "KUBE-POSTROUTING"
	ChainMarkMasq         = "KUBE-MARK-MASQ"
	ChainForward          = "KUBE-FORWARD"
	ChainProxyFirewall    = "KUBE-PROXY-FIREWALL"
	ChainProxyCanary      = "KUBE-PROXY-CANARY"
	ChainFirewall         = "KUBE-FIREWALL"
	// The kubelet's.
	ChainKubeletCanary = "KUBE-KUBELET-CANARY"
	ChainIPTablesHint  = "KUBE-IPTABLES-HINT"
	ChainMarkDrop      = "KUBE-MARK-DROP" // unused since 1.28
	// IPVS mode's.
	ChainIPVSNodePort     = "KUBE-NODE-PORT"
	ChainIPVSLoadBalancer = "KUBE-LOAD-BALANCER"
	ChainIPVSSourceRanges = "KUBE-SOURCE-RANGES-FIREWALL"
	ChainIPVSFilter       = "KUBE-IPVS-FILTER"
	ChainIPVSOutFilter    = "KUBE-IPVS-OUT-FILTER"
)

// Per-service iptables chain prefixes. KUBE-XLB- is the pre-1.24 name of
// what became KUBE-SVL-/KUBE-EXT-; kube-proxy ≥ 1.24 neither writes nor
// deletes it.
const (
	PrefixKube     = "KUBE-"
	PrefixService  = "KUBE-SVC-"
	PrefixLocal    = "KUBE-SVL-"
	PrefixExternal = "KUBE-EXT-"
	PrefixFirewall = "KUBE-FW-"
	PrefixEndpoint = "KUBE-SEP-"
	PrefixXLB      = "KUBE-XLB-"
)

// Per-service nftables chain prefixes (pkg/proxy/nftables/proxier.go).
const (
	NFTPrefixService  = "service-"
	NFTPrefixLocal    = "local-"
	NFTPrefixExternal = "external-"
	NFTPrefixFirewall = "firewall-"
	NFTPrefixEndpoint = "endpoint-"
	NFTPrefixAffinity = "affinity-"
)

// kube-proxy's fixed nftables chains, maps and sets that explain reads.
const (
	NFTChainServices     = "services"
	NFTChainMasquerading = "masquerading"
	NFTMapServiceIPs     = "service-ips"
	NFTMapServiceNPs     = "service-nodeports"
	NFTMapFirewallIPs    = "firewall-ips"
	NFTMapNoEndpointSvcs = "no-endpoint-services"
	NFTMapNoEndpointNPs  = "no-endpoint-nodeports"
	NFTSetClusterIPs     = "cluster-ips"
)

// FixedChain is one of the iptables chains kube-proxy, the kubelet or IPVS
// mode always write.
type FixedChain struct {
	Name string
	// Owner: "" for kube-proxy's iptables mode, else who writes it.
	Owner string
	// Counted lists the tables in which kube-proxy counts the chain's rules
	// in kubeproxy_sync_proxy_rules_iptables_total.
	Counted []string
}

// FixedChains lists them, kube-proxy's first.
var FixedChains = []FixedChain{
	{ChainServices, "", []string{TableNAT, TableFilter}},
	{ChainExternalServices, "", []string{TableFilter}},
	{ChainNodePorts, "", []string{TableNAT, TableFilter}},
	{ChainPostrouting, "", []string{TableNAT}},
	{ChainMarkMasq, "", []string{TableNAT}},
	{ChainForward, "", []string{TableFilter}},
	{ChainProxyFirewall, "", []string{TableFilter}},
	{ChainProxyCanary, "", nil},
	{ChainFirewall, "", nil}, // counted only for IPv4 with localhostNodePorts
	{ChainKubeletCanary, "kubelet's canary chain", nil},
	{ChainIPTablesHint, "kubelet's hint for iptables-wrapper's backend choice", nil},
	{ChainMarkDrop, "kubelet's drop mark, unused since 1.28", nil},
	{ChainIPVSNodePort, "IPVS mode", nil},
	{ChainIPVSLoadBalancer, "IPVS mode", nil},
	{ChainIPVSSourceRanges, "IPVS mode", nil},
	{ChainIPVSFilter, "IPVS mode", nil},
	{ChainIPVSOutFilter, "IPVS mode", nil},
}

var fixedByName = func() map[string]*FixedChain {
	m := map[string]*FixedChain{}
	for i := range FixedChains {
		m[FixedChains[i].Name] = &FixedChains[i]
	}
	return m
}()

// Fixed returns the fixed chain of that name, or nil.
func Fixed(name string) *FixedChain { return fixedByName[name] }

// CountedChain reports whether kube-proxy counts the rules of a fixed chain
// in that table (per-service nat chains are counted too: see
// IsServiceChainName).
func CountedChain(table, chain string) bool {
	f := fixedByName[chain]
	if f == nil {
		return false
	}
	for _, t := range f.Counted {
		if t == table {
			return true
		}
	}
	return false
}

// BuiltinChains are the chains iptables itself provides.
var BuiltinChains = map[string]bool{
	"PREROUTING": true, "INPUT": true, "FORWARD": true, "OUTPUT": true, "POSTROUTING": true,
}

// IsServiceChainName reports whether an iptables chain is one of kube-proxy's
// per-service nat chains (isServiceChainName in proxier.go): KUBE-SVC-,
// KUBE-SVL-, KUBE-EXT-, KUBE-FW-, KUBE-SEP-. kube-proxy deletes any such
// chain it did not write this sync.
func IsServiceChainName(name string) bool {
	if !strings.HasPrefix(name, PrefixKube) {
		return false
	}
	switch name[5:min(len(name), 9)] {
	case "SVC-", "SVL-", "EXT-", "SEP-":
		return true
	}
	return strings.HasPrefix(name, PrefixFirewall)
}

// HasAnyPrefix reports whether s starts with one of prefixes.
func HasAnyPrefix(s string, prefixes ...string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// kube-proxy's defaults and limits (pkg/proxy/apis/config/v1alpha1,
// pkg/proxy/iptables/proxier.go).
const (
	DefaultMasqueradeBit    = 14
	DefaultSyncPeriod       = 30 * time.Second
	DefaultMinSyncPeriod    = 1 * time.Second
	DefaultConfigSyncPeriod = 15 * time.Minute
	// FullSyncPeriod is the hourly forced full resync (pkg/proxy/util).
	FullSyncPeriod = time.Hour
	// LargeClusterEndpointsThreshold: above it (strictly more endpoints
	// over all service ports) iptables mode drops per-endpoint comments.
	LargeClusterEndpointsThreshold = 1000
	// MetricsPort and HealthzPort are ProxyStatusPort and ProxyHealthzPort.
	MetricsPort = 10249
	HealthzPort = 10256
)

// FormatMark writes a mark the way kube-proxy does (%#08x): 0x00004000.
func FormatMark(v uint32) string { return fmt.Sprintf("%#08x", v) }
