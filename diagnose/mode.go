package diagnose

import (
	"fmt"
	"strings"

	"github.com/proxyrules/kubectl-proxyrules/inspect"
	"github.com/proxyrules/kubectl-proxyrules/inspect/metrics"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// ModeDetection is the proxy mode as the node shows it.
type ModeDetection struct {
	// Detected: iptables, nftables, ipvs, iptables+nftables, or unknown.
	Detected    kubeproxy.Mode `json:"detected"`
	Evidence    []string       `json:"evidence"`
	FromConfig  kubeproxy.Mode `json:"fromConfig,omitempty"`
	FromMetrics kubeproxy.Mode `json:"fromMetrics,omitempty"`
}

// DetectMode tells the proxy mode from the rules present: iptables mode by
// its per-service chains (or KUBE-SERVICES with KUBE-MARK-MASQ and no IPVS
// chain), IPVS mode by KUBE-NODE-PORT/KUBE-LOAD-BALANCER, nftables mode by
// a non-empty kube-proxy table. It is the one mode detector every report
// uses.
func DetectMode(rs *inspect.Ruleset) ModeDetection {
	d := ModeDetection{Evidence: []string{}}
	ipt, nft, ipvs := false, false, false
	for _, t := range rs.IPTables {
		if t == nil || t.Name != kubeproxy.TableNAT {
			continue
		}
		svcChains := 0
		for _, c := range t.Chains {
			if strings.HasPrefix(c.Name, kubeproxy.PrefixService) {
				svcChains++
			}
		}
		switch {
		case svcChains > 0 || t.Chain(kubeproxy.ChainServices) != nil && t.Chain(kubeproxy.ChainMarkMasq) != nil && t.Chain(kubeproxy.ChainIPVSNodePort) == nil:
			ipt = true
			d.Evidence = append(d.Evidence, fmt.Sprintf("%s nat (%s): KUBE-SERVICES and %d KUBE-SVC- chains", t.Family, orUnknown(string(t.Backend)), svcChains))
		case t.Chain(kubeproxy.ChainIPVSNodePort) != nil || t.Chain(kubeproxy.ChainIPVSLoadBalancer) != nil:
			ipvs = true
			d.Evidence = append(d.Evidence, fmt.Sprintf("%s nat: IPVS chains KUBE-NODE-PORT/KUBE-LOAD-BALANCER", t.Family))
		}
	}
	for _, t := range rs.NFTables {
		if t != nil && t.IsKubeProxy() && len(t.Chains) > 0 {
			nft = true
			d.Evidence = append(d.Evidence, fmt.Sprintf("table %s kube-proxy with %d chains", t.Family, len(t.Chains)))
		}
	}
	if rs.HasIPVS() {
		// the virtual server table itself: IPVS mode whatever the iptables
		// side shows (a listing pasted alone has none)
		ipvs = true
		d.Evidence = append(d.Evidence, fmt.Sprintf("IPVS table (%s) with %d virtual servers", rs.IPVS.Table.Format, len(rs.IPVS.Table.Services)))
	} else if rs.HasIPSets() && rs.IPVS.Sets.Set("KUBE-CLUSTER-IP") != nil {
		ipvs = true // only IPVS mode fills kube-proxy's ipsets
		d.Evidence = append(d.Evidence, "kube-proxy's ipsets (KUBE-CLUSTER-IP)")
	}
	switch {
	case ipt && nft:
		d.Detected = kubeproxy.ModeBoth
	case ipt:
		d.Detected = kubeproxy.ModeIPTables
	case nft:
		d.Detected = kubeproxy.ModeNFTables
	case ipvs:
		d.Detected = kubeproxy.ModeIPVS
	default:
		d.Detected = kubeproxy.ModeUnknown
	}
	return d
}

func orUnknown(s string) string {
	if s == "" {
		return "backend unknown"
	}
	return s
}

// ModeFromMetrics says which proxier registered the metrics; "" when they
// do not tell.
func ModeFromMetrics(m *metrics.Metrics) kubeproxy.Mode {
	if m == nil {
		return ""
	}
	has := func(n string) bool { return m.Families[n] != nil && len(m.Families[n].Metric) > 0 }
	switch {
	case has(metrics.IPTablesTotal) || has(metrics.PartialRestoreFailures):
		return kubeproxy.ModeIPTables
	case has(metrics.NFTSyncFailures) || has(metrics.NFTCleanupFailures):
		return kubeproxy.ModeNFTables
	case has(metrics.FullSyncDuration):
		// iptables mode sets iptables_total on its first sync, which
		// also observes this histogram
		return kubeproxy.ModeNFTables
	case has(metrics.RestoreFailures) || has(metrics.SyncDuration):
		return kubeproxy.ModeIPVS
	}
	return ""
}
