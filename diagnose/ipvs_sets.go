package diagnose

import (
	"fmt"
	"strings"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// The ipsets kube-proxy's IPVS mode fills beside its virtual servers,
// against what it should hold for the Services (correlate.ExpectedIPSets):
// a member missing is its Service's problem, a member no Service owns a
// leftover. kube-proxy rewrites every set on every sync, so either means
// it is not syncing or another program changed the set.

// ipsetRole says what kube-proxy's iptables rules use a set for, and how
// bad a missing member is.
func ipsetRole(set string) (Severity, string) {
	name := strings.Replace(set, "KUBE-6-", "KUBE-", 1)
	switch {
	case strings.HasPrefix(name, "KUBE-NODE-PORT"):
		return SeverityError, "its NodePort traffic misses kube-proxy's NodePort rules (KUBE-NODE-PORT): not accepted or not masqueraded as they should be"
	case strings.HasPrefix(name, "KUBE-LOAD-BALANCER"):
		return SeverityError, "its load-balancer traffic misses kube-proxy's rules for it (KUBE-LOAD-BALANCER, the source-range firewall)"
	case strings.HasPrefix(name, "KUBE-EXTERNAL-IP"):
		return SeverityError, "its external-IP traffic misses kube-proxy's rules for it (masquerade, or the Local policy's)"
	case name == "KUBE-HEALTH-CHECK-NODE-PORT":
		return SeverityError, "the load balancer's health checks of this node are not accepted by kube-proxy's filter rules"
	case name == "KUBE-LOOP-BACK":
		return SeverityWarning, "a pod that reaches itself through the Service (hairpin) is not masqueraded, so its reply goes astray"
	case name == "KUBE-CLUSTER-IP":
		return SeverityWarning, "its cluster-IP traffic misses kube-proxy's KUBE-SERVICES rules (masquerade of traffic from outside the cluster)"
	case name == "KUBE-IPVS-IPS":
		return SeverityWarning, "kube-proxy's KUBE-IPVS-FILTER does not treat this address as a Service address of the node"
	}
	return SeverityWarning, "kube-proxy's iptables rules match by this set"
}

// judgeIPSets joins the node's sets with what kube-proxy should have put
// in them, and adds what is wrong to the ports and the unowned list.
func (rep *IPVSReport) judgeIPSets(n *Node) {
	sets := n.Ruleset.IPVS.Sets
	if sets == nil {
		rep.NotChecked = append(rep.NotChecked, Gap{Check: "kube-proxy's ipsets (KUBE-CLUSTER-IP, KUBE-NODE-PORT-*, KUBE-LOOP-BACK, …) against the Services", Reason: "the ipsets were not read",
			Remedy: "--from-dump with ipset save (or ipset list) from the node"})
		return
	}
	present := map[string][]string{}
	for _, s := range sets.Sets {
		members := make([]string, 0, len(s.Members))
		for _, m := range s.Members {
			members = append(members, m.Raw)
		}
		present[s.Name] = members
	}
	in := correlate.IPSetInput{Objects: n.Objects, Node: n.Name, NodeIPs: nodeAddrs(n)}
	if n.Config != nil {
		in.NodePortAddresses = n.Config.NodePortAddresses
	}
	facts := correlate.ClassifyIPSets(correlate.ExpectedIPSets(in), present)
	rep.IPSets = facts
	byPort := map[string]int{}
	for i, p := range rep.Ports {
		byPort[p.ServicePort+" "+string(p.Family)] = i
	}
	for _, s := range facts.Sets {
		fam := kubeproxy.IPv4
		if strings.HasPrefix(s.Name, "KUBE-6-") {
			fam = kubeproxy.IPv6
		}
		sev, role := ipsetRole(s.Name)
		for _, m := range s.Missing {
			for _, o := range m.Owners {
				i, ok := byPort[o.ServicePort+" "+string(fam)]
				if !ok {
					continue // a Service not selected
				}
				what := "lacks"
				if !s.Exists {
					what = "does not exist, so it lacks"
				}
				rep.Ports[i].Problems = append(rep.Ports[i].Problems, Problem{Severity: sev, Kind: ProblemIPSetMissing,
					Message: fmt.Sprintf("ipset %s %s %s: %s; kube-proxy adds it on its next sync", s.Name, what, m.Member, role)})
			}
		}
		if len(s.Unattributed) > 0 && n.Objects != nil {
			rep.Unowned = append(rep.Unowned, unownedMembers(s))
		}
	}
	for i := range rep.Ports {
		sortProblems(rep.Ports[i].Problems)
	}
	if facts.Counts.Members == 0 && len(sets.Sets) == 0 {
		rep.NotChecked = append(rep.NotChecked, Gap{Check: "kube-proxy's ipsets", Reason: "the ipset input holds no set", Remedy: "ipset save from the node"})
	}
}

// ProblemIPSetMissing: a member kube-proxy puts in a set for the Service
// is not there.
const ProblemIPSetMissing = "ipsetMissing"

// UnownedSetMembers: members of a kube-proxy set no Service puts there.
const UnownedSetMembers = "setMembers"

func unownedMembers(s correlate.IPSetSetFacts) IPVSUnowned {
	var names []string
	for _, m := range s.Unattributed {
		w := m.Member
		if m.ServicePort != "" {
			w += " (" + m.ServicePort + ", not in this set)"
		}
		names = append(names, w)
	}
	return IPVSUnowned{VirtualServer: "ipset " + s.Name, RealServers: 0, Severity: SeverityWarning, What: UnownedSetMembers,
		Message: fmt.Sprintf("%d member%s no current Service puts in ipset %s: %s; kube-proxy rewrites its sets on every sync, so it is not syncing or another program added %s",
			len(names), plural(len(names)), s.Name, fewOf(names), map[bool]string{true: "it", false: "them"}[len(names) == 1])}
}
