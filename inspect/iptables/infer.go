package iptables

import (
	"strings"

	"github.com/proxyrules/kubectl-proxyrules/inspect"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// tableSet is a set of iptables tables, the candidates a piece of evidence
// leaves for rules printed without their table.
type tableSet uint8

const (
	inRaw tableSet = 1 << iota
	inMangle
	inNAT
	inFilter
	inSecurity

	anyTable = inRaw | inMangle | inNAT | inFilter | inSecurity
)

// Tables are the iptables tables, in the order ambiguous input prefers
// them: filter first, because it is what iptables -S and -L show without -t.
var Tables = []string{kubeproxy.TableFilter, kubeproxy.TableNAT, kubeproxy.TableMangle, "raw", "security"}

var tableBits = map[string]tableSet{
	"raw": inRaw, kubeproxy.TableMangle: inMangle, kubeproxy.TableNAT: inNAT,
	kubeproxy.TableFilter: inFilter, "security": inSecurity,
}

// one returns the single table of s, or the preferred one of several.
func (s tableSet) one() string {
	for _, t := range Tables {
		if s&tableBits[t] != 0 {
			return t
		}
	}
	return kubeproxy.TableFilter
}

func (s tableSet) single() bool { return s != 0 && s&(s-1) == 0 }

// builtinTables: the tables that have each built-in chain.
var builtinTables = map[string]tableSet{
	"PREROUTING":  inRaw | inMangle | inNAT,
	"INPUT":       inMangle | inNAT | inFilter | inSecurity,
	"FORWARD":     inMangle | inFilter | inSecurity,
	"OUTPUT":      anyTable,
	"POSTROUTING": inMangle | inNAT,
}

// tableBuiltins: the exact set of built-in chains of each table, which a
// whole-table listing (-S or -L) shows as policies.
var tableBuiltins = []struct {
	table    string
	builtins string
}{
	{"raw", "OUTPUT PREROUTING"},
	{kubeproxy.TableMangle, "FORWARD INPUT OUTPUT POSTROUTING PREROUTING"},
	{kubeproxy.TableNAT, "INPUT OUTPUT POSTROUTING PREROUTING"},
	{kubeproxy.TableFilter, "FORWARD INPUT OUTPUT"}, // security has the same: filter is far likelier
}

// chainTables are the tables a chain of that name lives in: kube-proxy's
// and the kubelet's (pkg/proxy/iptables/proxier.go, kubelet_network_linux.go)
// and IPVS mode's. Unknown chains could be anywhere.
var chainTables = map[string]tableSet{
	kubeproxy.ChainServices:         inNAT | inFilter,
	kubeproxy.ChainNodePorts:        inNAT | inFilter,
	kubeproxy.ChainExternalServices: inFilter,
	kubeproxy.ChainPostrouting:      inNAT,
	kubeproxy.ChainMarkMasq:         inNAT,
	kubeproxy.ChainMarkDrop:         inNAT,
	kubeproxy.ChainForward:          inFilter,
	kubeproxy.ChainProxyFirewall:    inFilter,
	kubeproxy.ChainFirewall:         inFilter,
	kubeproxy.ChainProxyCanary:      inMangle | inNAT | inFilter,
	kubeproxy.ChainKubeletCanary:    inMangle | inNAT | inFilter,
	kubeproxy.ChainIPTablesHint:     inMangle,
	kubeproxy.ChainIPVSNodePort:     inNAT | inFilter, // pkg/proxy/ipvs: iptablesChains
	kubeproxy.ChainIPVSLoadBalancer: inNAT,
	kubeproxy.ChainIPVSSourceRanges: inFilter,
	kubeproxy.ChainIPVSFilter:       inFilter,
	kubeproxy.ChainIPVSOutFilter:    inFilter,
	"KUBE-LOAD-BALANCER-LOCAL":      inNAT,
}

var chainPrefixTables = []struct {
	prefix string
	tables tableSet
}{
	{kubeproxy.PrefixService, inNAT},
	{kubeproxy.PrefixLocal, inNAT},
	{kubeproxy.PrefixExternal, inNAT},
	{kubeproxy.PrefixFirewall, inNAT},
	{kubeproxy.PrefixEndpoint, inNAT},
	{kubeproxy.PrefixXLB, inNAT},
}

// foreignChainTables: where a few other writers common in posted dumps (AWS
// VPC CNI, Calico, flannel, Docker, CNI portmap) put their chains today. A
// CNI's version or configuration may put them elsewhere, so this is a hint
// for rules nothing else places: it never splits a whole table's listing.
var foreignChainTables = map[string]tableSet{
	"FLANNEL-POSTRTG":      inNAT,
	"FLANNEL-FWD":          inFilter,
	"DOCKER":               inNAT | inFilter,
	"DOCKER-USER":          inFilter,
	"CNI-HOSTPORT-DNAT":    inNAT,
	"CNI-HOSTPORT-SETMARK": inNAT,
	"CNI-HOSTPORT-MASQ":    inNAT,
	"CNI-FORWARD":          inFilter,
	"cali-nat-outgoing":    inNAT,
	"cali-fip-dnat":        inNAT,
	"cali-fip-snat":        inNAT,
}

var foreignPrefixTables = []struct {
	prefix string
	tables tableSet
}{
	// The VPC CNI's chains are both in nat ("iptables -t nat -N
	// AWS-CONNMARK-CHAIN-0"); its mangle rules sit in PREROUTING.
	{"AWS-SNAT-CHAIN-", inNAT},
	{"AWS-CONNMARK-CHAIN-", inNAT},
	{"DOCKER-ISOLATION-", inFilter},
	{"CNI-DN-", inNAT},
	{"cali-fw-", inFilter},
	{"cali-tw-", inFilter},
	{"cali-pri-", inFilter},
	{"cali-pro-", inFilter},
	{"cali-po-", inFilter},
	{"cali-pi-", inFilter},
}

// chainEvidence: the tables a chain of that name can be in, foreign
// writers' habits included.
func chainEvidence(name string) tableSet {
	if s := kubeChainEvidence(name); s != anyTable {
		return s
	}
	if s, ok := foreignChainTables[name]; ok {
		return s
	}
	for _, p := range foreignPrefixTables {
		if strings.HasPrefix(name, p.prefix) {
			return p.tables
		}
	}
	return anyTable
}

// kubeChainEvidence: the tables a chain of that name can be in from what
// iptables fixes (built-in chains) and kube-proxy's and the kubelet's names.
func kubeChainEvidence(name string) tableSet {
	if s, ok := builtinTables[name]; ok {
		return s
	}
	if s, ok := chainTables[name]; ok {
		return s
	}
	for _, p := range chainPrefixTables {
		if strings.HasPrefix(name, p.prefix) {
			return p.tables
		}
	}
	return anyTable
}

// targetTables: the tables in which iptables accepts a target.
var targetTables = map[string]tableSet{
	"DNAT": inNAT, "SNAT": inNAT, "MASQUERADE": inNAT, "REDIRECT": inNAT, "NETMAP": inNAT,
	"NOTRACK": inRaw, "CT": inRaw,
	"TPROXY": inMangle,
	// REJECT and DROP: kube-proxy and iptables (since 1.4) never filter in nat.
	"REJECT": anyTable &^ inNAT, "DROP": anyTable &^ inNAT,
}

// ruleEvidence: the tables a rule of chain can be in, from the chain's name
// and its target (a jump target lives in the same table as the jump).
func ruleEvidence(chain string, r *inspect.IPRule) tableSet {
	return combineEvidence(chainEvidence(chain), targetEvidence(r, chainEvidence))
}

// kubeRuleEvidence is ruleEvidence without foreign writers' habits: what
// iptables itself and kube-proxy's names say.
func kubeRuleEvidence(chain string, r *inspect.IPRule) tableSet {
	return combineEvidence(kubeChainEvidence(chain), targetEvidence(r, kubeChainEvidence))
}

// targetEvidence: the tables iptables accepts r's target in; for a jump,
// the tables its chain's name says; 0 for no target.
func targetEvidence(r *inspect.IPRule, chainEv func(string) tableSet) tableSet {
	if t := targetTables[r.Target]; t != 0 {
		return t
	}
	if r.Target == "" || standardTargets[r.Target] {
		return 0 // MARK, CONNMARK, LOG …: accepted in every table
	}
	return chainEv(r.Target)
}

func combineEvidence(s, t tableSet) tableSet {
	if t == 0 || s&t == 0 {
		return s // a contradiction (a foreign chain with a kube-proxy name?): trust the name
	}
	return s & t
}

// wholeTable reports the table whose exact set of built-in chains the
// policies are, as a whole-table -S or -L shows them.
func wholeTable(policies map[string]bool) (string, bool) {
	if len(policies) < 2 {
		return "", false
	}
	names := make([]string, 0, len(policies))
	for _, n := range []string{"FORWARD", "INPUT", "OUTPUT", "POSTROUTING", "PREROUTING"} {
		if policies[n] {
			names = append(names, n)
		}
	}
	if len(names) != len(policies) {
		return "", false
	}
	key := strings.Join(names, " ")
	for _, tb := range tableBuiltins {
		if tb.builtins == key {
			return tb.table, true
		}
	}
	return "", false
}

// ruleFamily is the family a rule's addresses show; "" when it has none.
func ruleFamily(r *inspect.IPRule) kubeproxy.Family {
	dst := r.Destination().Value
	if strings.Contains(r.Source.Value, ":") || strings.Contains(dst, ":") || strings.HasPrefix(r.ToDestination, "[") {
		return kubeproxy.IPv6
	}
	if r.Source.Value != "" || dst != "" || r.ToDestination != "" {
		return kubeproxy.IPv4
	}
	return ""
}
