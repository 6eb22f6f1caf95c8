package diagnose

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// StaleReport is what `stale` reports: the chains and elements no current
// Service or endpoint owns, each judged.
type StaleReport struct {
	APIVersion string                   `json:"apiVersion,omitempty"`
	Kind       string                   `json:"kind,omitempty"`
	Node       string                   `json:"node,omitempty"`
	Chains     []StaleVerdict           `json:"stale"`
	Elements   []correlate.StaleElement `json:"elements"`
	// LargeClusterMode per family, from the API objects (> 1000 endpoints).
	LargeClusterMode map[string]bool `json:"largeClusterMode,omitempty"`
	Notes            []string        `json:"notes"`
	// Groups are the chains by cause, then by former owner.
	Groups []StaleGroup `json:"groups"`
	// Status: problems when traffic still reaches a stale chain or
	// element, or one should be gone already; incomplete without the API
	// objects (only leftovers of older versions can be told then).
	Status     Status `json:"status"`
	NotChecked []Gap  `json:"notChecked"`
	// VirtualServers are the IPVS virtual servers no current Service port
	// has (IPVS mode); IPVSRead: an IPVS table was read (ipvs_stale.go).
	VirtualServers []StaleVirtualServer `json:"virtualServers"`
	IPVSRead       bool                 `json:"ipvsRead,omitempty"`
}

// StaleVerdict is a stale chain and whether anyone needs to act.
type StaleVerdict struct {
	correlate.StaleChain
	// NotDueYet: kube-proxy will remove it on its own; nobody needs to act.
	NotDueYet bool   `json:"notDueYet"`
	Reason    string `json:"reason"`
	// Cause groups chains that are stale for the same reason (see
	// StaleCause*).
	Cause string `json:"cause"`
}

// StaleOptions tune the "not due yet" judgement.
type StaleOptions struct {
	// SyncPeriod is kube-proxy's syncPeriod (30s when unknown).
	SyncPeriod time.Duration
}

// Stale finds and judges the node's stale chains and elements.
func Stale(n *Node, opts StaleOptions) *StaleReport {
	assumed := false
	switch {
	case opts.SyncPeriod > 0:
	case n.Config != nil && n.Config.SyncPeriod > 0:
		opts.SyncPeriod = n.Config.SyncPeriod
	default:
		opts.SyncPeriod, assumed = kubeproxy.DefaultSyncPeriod, true
	}
	found := correlate.FindStale(n.Ruleset, n.attribution(), n.Objects)
	rep := &StaleReport{Chains: []StaleVerdict{}, Elements: found.Elements, Notes: []string{}, LargeClusterMode: correlate.LargeClusterMode(n.Objects)}
	if !found.HaveObjects {
		rep.Notes = append(rep.Notes, "no API objects given: only leftovers of older versions can be told; pass --from-objects (or use --node on a cluster) to find chains no current Service owns")
	}
	if n.Select != nil {
		var kept []correlate.StaleElement
		for _, e := range rep.Elements {
			if e.Owner != "" && n.selected(e.Owner) {
				kept = append(kept, e)
			}
		}
		rep.Elements = append([]correlate.StaleElement{}, kept...)
	}
	for _, c := range found.Chains {
		if n.Select != nil && (c.ServicePort == "" || !n.selected(c.ServicePort)) {
			continue
		}
		v := StaleVerdict{StaleChain: c}
		v.Cause, v.Reason, v.NotDueYet = staleReason(c, rep.LargeClusterMode[c.Family], opts)
		rep.Chains = append(rep.Chains, v)
	}
	// A leftover that jumps to a chain kube-proxy deletes is no longer
	// harmless: it makes every restore fail.
	for _, b := range blockingLeftovers(rep) {
		for i := range rep.Chains {
			if c := &rep.Chains[i]; c.Chain == b.leftover.Chain && c.Family == b.leftover.Family {
				c.Cause = StaleCauseBlockingLeftover
				c.Reason = fmt.Sprintf("left by kube-proxy ≤1.23 (KUBE-XLB- became KUBE-EXT-/KUBE-SVL- in 1.24) for %s, and it still jumps to %s, which kube-proxy deletes: the kernel refuses to delete a referenced chain, so every restore fails while it is there. Remove it with `iptables -t nat -F %[3]s && iptables -t nat -X %[3]s` on the node", orUnknownOwner(c.ServicePort), b.target.Chain, c.Chain)
			}
		}
	}
	rep.Groups = groupStale(rep.Chains, n.Objects, opts)
	rep.NotChecked = gapsOf(n.gaps(), gapObjects, gapPartial)
	if assumed && slices.ContainsFunc(rep.Chains, func(c StaleVerdict) bool { return c.Cause == StaleCauseLargeCluster }) {
		rep.NotChecked = append(rep.NotChecked, syncPeriodGap("when the stale chains are due"))
	}
	problems := len(blockingLeftovers(rep)) > 0
	for _, c := range rep.Chains {
		problems = problems || c.Referenced || !c.Leftover && !c.NotDueYet
	}
	problems = problems || len(rep.Elements) > 0
	problems = rep.staleIPVS(n) || problems
	rep.Status = verdict(problems, rep.NotChecked)
	return rep
}

func staleReason(s correlate.StaleChain, largeMode bool, opts StaleOptions) (cause, reason string, notDue bool) {
	owner := "a Service port that no longer exists"
	if s.ServicePort != "" {
		owner = s.ServicePort
		if s.Endpoint != "" {
			owner += " → " + s.Endpoint
		}
	}
	nft := s.Mode == string(kubeproxy.ModeNFTables)
	switch {
	case strings.HasPrefix(s.Chain, kubeproxy.PrefixXLB):
		return StaleCauseLeftover, fmt.Sprintf("left by kube-proxy ≤1.23 (KUBE-XLB- became KUBE-EXT-/KUBE-SVL- in 1.24) for %s; newer kube-proxy never deletes it. Harmless if unreferenced; remove it with `iptables -t nat -F %[2]s && iptables -t nat -X %[2]s` on the node", owner, s.Chain), false
	case s.Chain == kubeproxy.ChainMarkDrop:
		return StaleCauseMarkDrop, "created by kubelet ≤1.27 (IPTablesOwnershipCleanup removed it in 1.28); nothing uses it. Harmless", false
	case s.Referenced:
		return StaleCauseReferenced, fmt.Sprintf("owned by %s but still reached from %s: new connections can be sent to a Service or endpoint that is gone. kube-proxy rewrites the referring chain on its next sync of that Service; if this stays, kube-proxy is not syncing (see `counts`/`triage`)", owner, strings.Join(s.ReferencedBy, ", ")), false
	case nft && s.Flushed:
		return StaleCauseFlushed, fmt.Sprintf("flushed by kube-proxy (was %s); it deletes flushed chains on a later sync, more than 1 s after flushing them (kernels before 6.2 need the delay)", owner), true
	case nft:
		return StaleCauseNFTPending, fmt.Sprintf("was %s; kube-proxy flushes it on its next sync and deletes it on the one after", owner), true
	case largeMode:
		return StaleCauseLargeCluster, fmt.Sprintf("was %s; in large-cluster mode (more than 1000 endpoints) kube-proxy deletes stale chains at most once per syncPeriod (%s), so it lingers for up to that long", owner, opts.SyncPeriod), true
	default:
		return StaleCauseNextSync, fmt.Sprintf("was %s; unreferenced, so harmless. kube-proxy deletes stale chains on every sync: if it stays, kube-proxy is not syncing or another writer re-creates it", owner), true
	}
}

func orUnknownOwner(spn string) string {
	if spn == "" {
		return "a Service port that no longer exists"
	}
	return spn
}

// syncPeriodGap says a judgement used the default syncPeriod because
// kube-proxy's configuration was not given.
func syncPeriodGap(what string) Gap {
	return Gap{Check: fmt.Sprintf("%s, judged with kube-proxy's default syncPeriod (%s assumed)", what, kubeproxy.DefaultSyncPeriod),
		Reason: "kube-proxy's configuration was not given", Remedy: "--from-config (kubectl get configmap -n kube-system kube-proxy -o yaml)"}
}
