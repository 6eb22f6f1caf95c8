package diagnose

import (
	"fmt"
	"sort"
	"strings"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// Status is a report's verdict.
type Status string

const (
	// StatusHealthy: everything the inputs call for was checked, and
	// nothing is wrong.
	StatusHealthy Status = "healthy"
	// StatusProblems: errors or warnings were found.
	StatusProblems Status = "problems"
	// StatusIncomplete: nothing is wrong in what was checked, but some of
	// what the inputs call for could not be checked (see the gaps).
	StatusIncomplete Status = "incomplete"
)

// verdict is the status of a report with problems and gaps.
func verdict(problems bool, gaps []Gap) Status {
	switch {
	case problems:
		return StatusProblems
	case len(gaps) > 0:
		return StatusIncomplete
	}
	return StatusHealthy
}

// Gap is something a report could not check, why, and what would let it.
type Gap struct {
	// Check names what was not checked.
	Check string `json:"check"`
	// Reason says why.
	Reason string `json:"reason"`
	// Remedy is the input that would let it be checked.
	Remedy string `json:"remedy,omitempty"`
}

// Gap kinds, so that each report picks those that concern it.
const (
	gapObjects     = "objects"
	gapFamily      = "family"
	gapFilter      = "filter"
	gapMetrics     = "metrics"
	gapConfig      = "config"
	gapTopology    = "topology"
	gapLocalPolicy = "local"
	gapScope       = "scope"
	gapPartial     = "partial"
)

type gap struct {
	kind string
	Gap
}

// gaps lists what the node's inputs leave unchecked.
func (n *Node) gaps() []gap {
	var out []gap
	add := func(kind, check, reason, remedy string) {
		out = append(out, gap{kind, Gap{check, reason, remedy}})
	}
	mode := DetectMode(n.Ruleset).Detected
	if n.Objects == nil {
		add(gapObjects, "Services, EndpointSlices and stale chains", "no API objects were given", "--from-objects (kubectl get services,endpointslices,nodes -A -o json), or --node on the cluster")
	} else {
		for _, fam := range []kubeproxy.Family{kubeproxy.IPv4, kubeproxy.IPv6} {
			svcs := servicesOfFamily(n.Objects, fam)
			if len(svcs) == 0 || hasRulesOf(n, mode, fam) {
				continue
			}
			add(gapFamily, fmt.Sprintf("%d %s Service%s (%s)", len(svcs), fam, plural(len(svcs)), examples(svcs, 3)),
				fmt.Sprintf("the dump holds no %s %s table", fam, tableWord(mode)), familyRemedy(mode, fam))
		}
		if nv := n.Objects.NodeView(n.Name); !nv.Labeled {
			if svcs := hintedServices(n.Objects); len(svcs) > 0 {
				why, remedy := "the node's Node object (its zone) was not given", "--from-objects with kubectl get nodes -o json (or --node on the cluster)"
				if n.Name == "" {
					why, remedy = "the node is not known", "--node NAME"
				}
				add(gapTopology, fmt.Sprintf("which endpoints of %d Service%s with topology hints this node uses (%s)", len(svcs), plural(len(svcs)), examples(svcs, 3)), why, remedy)
			}
		}
		if n.Name == "" {
			if svcs := localPolicyServices(n.Objects); len(svcs) > 0 {
				add(gapLocalPolicy, fmt.Sprintf("the local endpoints of %d Service%s with a Local traffic policy (%s)", len(svcs), plural(len(svcs)), examples(svcs, 3)), "the node is not known", "--node NAME")
			}
		}
	}
	if mode.Has(kubeproxy.ModeIPTables) && mode != kubeproxy.ModeIPVS { // IPVS mode's filter chains reject nothing of this
		for _, fam := range []kubeproxy.Family{kubeproxy.IPv4, kubeproxy.IPv6} {
			if n.Ruleset.IPTable(fam, kubeproxy.TableNAT) != nil && n.Ruleset.IPTable(fam, kubeproxy.TableFilter) == nil {
				add(gapFilter, fmt.Sprintf("%s \"no endpoints\" rejects, load-balancer firewall drops and health-check ports", fam),
					fmt.Sprintf("the dump holds no %s filter table", fam), "the whole "+saveCommand(fam)+" (not -t nat)")
			}
		}
	}
	for _, t := range n.Ruleset.IPTables {
		if t.Partial {
			add(gapPartial, fmt.Sprintf("the rules of the %s %s table the input does not show (a missing rule or endpoint may be there)", t.Family, t.Name),
				"the input is an excerpt of the table: a grep, one chain's listing, a cut paste, or jumps to chains it leaves out", "the whole "+saveCommand(t.Family)+" (or iptables -t "+t.Name+" -S)")
		}
	}
	if len(n.Metrics) == 0 {
		add(gapMetrics, "rule counts, sync age, sync duration and sync failures", "no kube-proxy metrics were given", "--from-metrics (curl -s 127.0.0.1:10249/metrics on the node)")
	}
	if n.Config == nil {
		add(gapConfig, "the masquerade bit against kube-proxy's masqueradeBit, and its syncPeriod (30s assumed)", "kube-proxy's configuration was not given", "--from-config (kubectl get configmap -n kube-system kube-proxy -o yaml)")
	}
	if n.Scope != "" {
		add(gapScope, "every other Service", "only "+n.Scope+" was read from the node", "collect without a Service")
	}
	return out
}

// gapsOf picks the gaps of the kinds a report cares about.
func gapsOf(all []gap, kinds ...string) []Gap {
	out := []Gap{}
	for _, g := range all {
		for _, k := range kinds {
			if g.kind == k {
				out = append(out, g.Gap)
			}
		}
	}
	return out
}

// hasRulesOf reports whether the dump holds the tables kube-proxy writes
// for fam in the node's mode (either mode when the mode is unknown).
func hasRulesOf(n *Node, mode kubeproxy.Mode, fam kubeproxy.Family) bool {
	if mode == kubeproxy.ModeIPVS && n.Ruleset.HasIPVS() {
		return true // the table holds both families; IPVS's own gaps say the rest
	}
	for _, t := range n.Ruleset.IPTables {
		if t.Family == fam && t.Name == kubeproxy.TableNAT && mode != kubeproxy.ModeNFTables {
			return true
		}
	}
	for _, t := range n.Ruleset.NFTables {
		if t.IsKubeProxy() && t.IPFamily() == fam && mode != kubeproxy.ModeIPTables {
			return true
		}
	}
	return false
}

func tableWord(mode kubeproxy.Mode) string {
	switch mode {
	case kubeproxy.ModeNFTables:
		return "kube-proxy (nftables)"
	case kubeproxy.ModeIPTables, kubeproxy.ModeIPVS:
		return "nat"
	}
	return "kube-proxy"
}

func familyRemedy(mode kubeproxy.Mode, fam kubeproxy.Family) string {
	nftFam := "ip"
	if fam == kubeproxy.IPv6 {
		nftFam = "ip6"
	}
	switch mode {
	case kubeproxy.ModeNFTables:
		return "nft -j list table " + nftFam + " kube-proxy (or nft list ruleset)"
	case kubeproxy.ModeIPTables, kubeproxy.ModeIPVS:
		return saveCommand(fam)
	}
	return saveCommand(fam) + ", or nft list table " + nftFam + " kube-proxy in nftables mode"
}

// servicesOfFamily lists the proxied Services with a cluster IP of fam.
func servicesOfFamily(objs *correlate.Objects, fam kubeproxy.Family) []string {
	return servicesWhere(objs, func(sp *correlate.ServicePort) bool {
		for _, ip := range sp.ClusterIPs {
			if kubeproxy.FamilyOfIP(ip) == fam {
				return true
			}
		}
		return false
	})
}

// hintedServices lists the Services whose ready endpoints all carry
// topology hints, so that a node uses only some of them.
func hintedServices(objs *correlate.Objects) []string {
	return servicesWhere(objs, func(sp *correlate.ServicePort) bool {
		ready := 0
		for _, ep := range sp.Endpoints {
			if !ep.Ready {
				continue
			}
			ready++
			if len(ep.ZoneHints) == 0 && len(ep.NodeHints) == 0 {
				return false
			}
		}
		return ready > 0
	})
}

func localPolicyServices(objs *correlate.Objects) []string {
	return servicesWhere(objs, func(sp *correlate.ServicePort) bool {
		return sp.InternalLocal || sp.ExternalLocal && (sp.NodePort > 0 || len(sp.ExternalIPs) > 0 || len(sp.LoadBalancerIPs) > 0)
	})
}

func servicesWhere(objs *correlate.Objects, pred func(sp *correlate.ServicePort) bool) []string {
	seen := map[string]bool{}
	var out []string
	for _, sp := range objs.ServicePorts() {
		k := sp.Namespace + "/" + sp.Name
		if sp.Proxied && !seen[k] && pred(sp) {
			seen[k] = true
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

func examples(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:n], ", ") + ", …"
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
