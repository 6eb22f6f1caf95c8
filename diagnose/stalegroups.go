package diagnose

import (
	"fmt"
	"sort"
	"strings"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// Why a chain is stale: StaleVerdict.Cause and StaleGroup.Cause.
const (
	// StaleCauseReferenced: still jumped to, so traffic can reach it.
	StaleCauseReferenced = "referenced"
	// StaleCauseBlockingLeftover: a KUBE-XLB- leftover still jumping to a
	// chain kube-proxy deletes, which makes every restore fail.
	StaleCauseBlockingLeftover = "blocking-leftover"
	// StaleCauseLeftover: a KUBE-XLB- chain of kube-proxy ≤1.23.
	StaleCauseLeftover = "leftover"
	// StaleCauseMarkDrop: KUBE-MARK-DROP of kubelet ≤1.27.
	StaleCauseMarkDrop = "kubelet-leftover"
	// StaleCauseLargeCluster: large-cluster mode deletes stale chains at
	// most once per syncPeriod.
	StaleCauseLargeCluster = "large-cluster-throttle"
	// StaleCauseNextSync: iptables deletes it on the next sync.
	StaleCauseNextSync = "next-sync"
	// StaleCauseNFTPending: nftables flushes it on the next sync and
	// deletes it on the one after.
	StaleCauseNFTPending = "nftables-pending"
	// StaleCauseFlushed: nftables flushed it and deletes it later.
	StaleCauseFlushed = "nftables-flushed"
)

// StaleGroup is the stale chains of one cause: a title and an
// explanation said once, and the former owners with their chains.
type StaleGroup struct {
	Cause string `json:"cause"`
	// Harmful: someone needs to act (traffic reaches the chains, or they
	// break kube-proxy's restores).
	Harmful bool `json:"harmful"`
	// Title is the cause in a few words; Explanation says what it means
	// and what to do.
	Title       string       `json:"title"`
	Explanation string       `json:"explanation"`
	Chains      int          `json:"chains"`
	Owners      []StaleOwner `json:"owners"`
}

// StaleOwner is one former owner's chains within a group.
type StaleOwner struct {
	// Owner is the Service ("ns/name", when the Service is gone) or the
	// Service port ("ns/name:port"); empty when it could not be recovered.
	Owner string `json:"owner"`
	// State says what became of the owner: "deleted", "port removed",
	// "2 endpoints gone, 3 remain"; empty when not known.
	State  string `json:"state,omitempty"`
	Family string `json:"family"`
	// Kinds counts the chains by kind: "SVC + 20 SEP".
	Kinds  string   `json:"kinds"`
	Chains []string `json:"chains"`
}

// staleCauses orders the groups (harmful first) and words them.
var staleCauses = []struct {
	cause, title, explanation string
	harmful                   bool
}{
	{StaleCauseBlockingLeftover, "HARMFUL (leftovers of kube-proxy ≤1.23 that make every restore fail)",
		"they still jump to chains kube-proxy deletes, and the kernel refuses to delete a chain that is jumped to, so every iptables-restore of kube-proxy fails while they are there. Remove them on the node: iptables -t nat -F CHAIN && iptables -t nat -X CHAIN", true},
	{StaleCauseReferenced, "HARMFUL (still jumped to)",
		"new connections can be sent to a Service or endpoint that is gone. kube-proxy rewrites the referring chains on its next sync of the Service; if they stay, kube-proxy is not syncing (see `counts` and `triage`)", true},
	{StaleCauseLeftover, "leftovers of kube-proxy ≤1.23 (KUBE-XLB-)",
		"KUBE-XLB- became KUBE-EXT-/KUBE-SVL- in 1.24 and newer kube-proxy never deletes them. Harmless while unreferenced; remove them on the node with iptables -t nat -F CHAIN && iptables -t nat -X CHAIN", false},
	{StaleCauseMarkDrop, "leftover KUBE-MARK-DROP of kubelet ≤1.27",
		"IPTablesOwnershipCleanup removed it in 1.28; nothing uses it. Harmless", false},
	{StaleCauseLargeCluster, "not due (large-cluster throttle, ≤ %[1]s)",
		"in large-cluster mode (more than 1000 endpoints) kube-proxy deletes stale chains at most once per syncPeriod (%[1]s); nobody needs to act unless they are still there after %[2]s", false},
	{StaleCauseNextSync, "not due (deleted on kube-proxy's next sync)",
		"unreferenced, so harmless. kube-proxy deletes stale chains on every sync: if they stay after %[2]s, kube-proxy is not syncing or another writer re-creates them", false},
	{StaleCauseNFTPending, "not due (nftables: flushed on the next sync, deleted on the one after)",
		"unreferenced, so harmless; nobody needs to act unless they are still there after %[2]s", false},
	{StaleCauseFlushed, "not due (flushed by kube-proxy, deleted on a later sync)",
		"kube-proxy deletes flushed chains more than 1 s after flushing them (kernels before 6.2 need the delay); harmless", false},
}

// groupStale groups the stale chains by cause, then by former owner, and
// says what became of each owner (objs, when given).
func groupStale(chains []StaleVerdict, objs *correlate.Objects, opts StaleOptions) []StaleGroup {
	states := ownerStates(chains, objs)
	out := []StaleGroup{}
	for _, sc := range staleCauses {
		g := StaleGroup{Cause: sc.cause, Harmful: sc.harmful, Title: sc.title, Explanation: sc.explanation}
		if strings.Contains(sc.title, "%[") {
			g.Title = fmt.Sprintf(sc.title, opts.SyncPeriod)
		}
		if strings.Contains(sc.explanation, "%[") {
			g.Explanation = fmt.Sprintf(sc.explanation, opts.SyncPeriod, 2*opts.SyncPeriod)
		}
		owners := map[string]*StaleOwner{}
		var order []string
		kinds := map[string]map[string]int{}
		for _, c := range chains {
			if c.Cause != sc.cause {
				continue
			}
			g.Chains++
			key, owner := ownerKey(c, states)
			key += " " + c.Family
			o := owners[key]
			if o == nil {
				o = &StaleOwner{Owner: owner, State: states[owner], Family: c.Family, Chains: []string{}}
				if st, ok := states[owner+" "+c.Family]; ok {
					o.State = st
				}
				owners[key] = o
				order = append(order, key)
				kinds[key] = map[string]int{}
			}
			o.Chains = append(o.Chains, c.Chain)
			kinds[key][kindLabel(c.Chain, c.Kind)]++
		}
		if g.Chains == 0 {
			continue
		}
		sort.Strings(order)
		for _, k := range order {
			o := owners[k]
			o.Kinds = kindCounts(kinds[k])
			g.Owners = append(g.Owners, *o)
		}
		out = append(out, g)
	}
	return out
}

// ownerKey is who a stale chain is grouped under: the Service when it is
// gone (all its ports went with it), else the Service port.
func ownerKey(c StaleVerdict, states map[string]string) (key, owner string) {
	if c.ServicePort == "" {
		return "~", ""
	}
	ns, name, _, _ := correlate.ParseServicePortName(c.ServicePort)
	if states[ns+"/"+name] == "deleted" {
		return ns + "/" + name, ns + "/" + name
	}
	return c.ServicePort, c.ServicePort
}

// ownerStates says, for the former owners of the chains, what became of
// them: a Service "deleted", a port "port removed", or how many of a
// port's endpoints are gone and how many remain.
func ownerStates(chains []StaleVerdict, objs *correlate.Objects) map[string]string {
	states := map[string]string{}
	if objs == nil {
		return states
	}
	services := map[string]bool{}
	for _, s := range objs.Services {
		services[s.Namespace+"/"+s.Name] = true
	}
	ports := map[string]bool{}
	endpoints := map[string]int{} // "ns/name:port family"
	for _, sp := range objs.ServicePorts() {
		ports[sp.String()] = true
		for _, ep := range sp.Endpoints {
			fam := kubeproxy.IPv4
			if ep.IPv6 {
				fam = kubeproxy.IPv6
			}
			endpoints[sp.String()+" "+string(fam)]++
		}
	}
	gone := map[string]int{}
	for _, c := range chains {
		if c.ServicePort == "" {
			continue
		}
		ns, name, _, _ := correlate.ParseServicePortName(c.ServicePort)
		svc := ns + "/" + name
		portKnown := ports[c.ServicePort]
		switch {
		case !services[svc]:
			states[svc] = "deleted"
		case !portKnown:
			states[c.ServicePort] = "port removed"
		case c.Kind == kubeproxy.KindEndpoint:
			gone[c.ServicePort+" "+c.Family]++
		}
	}
	for key, n := range gone {
		states[key] = fmt.Sprintf("%d endpoint%s gone, %d remain", n, plural(n), endpoints[key])
	}
	return states
}

// kindLabel is the short name of a chain's kind as its name shows it:
// SVC, SVL, EXT, FW, SEP, XLB (iptables) or service, endpoint, …
// (nftables).
func kindLabel(chain string, kind kubeproxy.ChainKind) string {
	if n, ok := correlate.ParseNFTName(chain); ok {
		return strings.TrimSuffix(n.Prefix, "-")
	}
	if rest, ok := strings.CutPrefix(chain, "KUBE-"); ok {
		if label, _, ok := strings.Cut(rest, "-"); ok {
			return label
		}
	}
	return string(kind)
}

// kindOrder orders kind labels as kube-proxy's chains go: service, local,
// external, firewall, endpoint.
var kindOrder = map[string]int{
	"SVC": 1, "service": 1, "SVL": 2, "local": 2, "XLB": 2, "EXT": 3, "external": 3,
	"FW": 4, "firewall": 4, "SEP": 5, "endpoint": 5,
}

// kindCounts words the chains of one owner by kind: "SVC + EXT + 20 SEP"
// (iptables) or "service + 2 endpoint" (nftables).
func kindCounts(kinds map[string]int) string {
	labels := make([]string, 0, len(kinds))
	for l := range kinds {
		labels = append(labels, l)
	}
	sort.Slice(labels, func(i, j int) bool {
		a, b := kindOrder[labels[i]], kindOrder[labels[j]]
		if a != b {
			return a < b
		}
		return labels[i] < labels[j]
	})
	parts := make([]string, len(labels))
	for i, l := range labels {
		parts[i] = l
		if n := kinds[l]; n > 1 {
			parts[i] = fmt.Sprintf("%d %s", n, l)
		}
	}
	return strings.Join(parts, " + ")
}
