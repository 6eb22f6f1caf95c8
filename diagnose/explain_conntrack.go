package diagnose

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// explain's part of the node's conntrack state: the entries of the
// explained Service, per port and IP family, beside its rules. Right rules
// do not help a UDP client whose entry still points to a gone endpoint, so
// its stale UDP entries are problems of the explanation, judged as
// Conntrack judges them (staleProblem); TCP ones are notes. Without a
// table (n.Kernel nil) explain says nothing of it: it is about the rules.

// ServiceConntrack is one Service's conntrack entries on the node.
type ServiceConntrack struct {
	// NotRead: kernel state was given, but not the table.
	NotRead bool `json:"notRead,omitempty"`
	// Read is how many entries the table held as read (filtered to the
	// Service on the node when read live by explain).
	Read int `json:"read"`
	// Ports are the entries of each port and family that has some.
	Ports []PortConntrack `json:"ports"`
	// Other are the entries to a cluster IP of the Service on a port
	// (or protocol) it does not have.
	Other []correlate.ConntrackGroup `json:"other,omitempty"`
}

// PortConntrack is a Service port's entries in one IP family: how many,
// how many are stale, and per cause why, whether kube-proxy cleans them,
// the seconds left and the conntrack -D commands (printed, never run).
type PortConntrack struct {
	Family string `json:"family"`
	correlate.ConntrackGroup
}

// explainConntrackFacts joins the node's conntrack table with its
// Services, once for all the Services explained; nil without a table.
func explainConntrackFacts(n *Node) *correlate.ConntrackFacts {
	if n.Kernel == nil || n.Kernel.Table == nil {
		return nil
	}
	return correlate.FindConntrack(correlate.ConntrackInput{Objects: n.Objects, NodeIPs: nodeAddrs(n), Mode: conntrackMode(n),
		ServiceCIDRs: n.Kernel.ServiceCIDRs, Table: n.Kernel.Table})
}

// addExplainConntrack adds to rep its Service's conntrack entries (facts
// of n, explainConntrackFacts), their problems to its ports, and a gap
// when the read left entries out. Nothing when n has no kernel state.
func addExplainConntrack(n *Node, facts *correlate.ConntrackFacts, rep *ServiceExplanation) {
	if n.Kernel == nil {
		return
	}
	if facts == nil {
		rep.Conntrack = &ServiceConntrack{NotRead: true, Ports: []PortConntrack{}}
		return
	}
	sc := &ServiceConntrack{Read: facts.Read, Ports: []PortConntrack{}}
	rep.Conntrack = sc
	partial := n.Objects != nil && n.Objects.LeftOut.Count > 0 || n.Scope != "" || n.Select != nil
	svc := rep.Namespace + "/" + rep.Name
	claimed := make([]bool, len(facts.Entries))
	for i := range rep.Ports {
		pp := &rep.Ports[i]
		// Two passes, so that the port's entries (up to the live read's
		// 50,000) are copied once, not regrown.
		count := 0
		for j := range facts.Entries {
			if !claimed[j] && portEntry(rep, pp, &facts.Entries[j]) {
				claimed[j] = true // one report per port and family (both modes' rules: the first)
				count++
			}
		}
		if count == 0 {
			continue
		}
		mine := make([]correlate.ConntrackEntry, 0, count)
		for j := range facts.Entries {
			if claimed[j] && portEntry(rep, pp, &facts.Entries[j]) {
				mine = append(mine, facts.Entries[j])
			}
		}
		for _, g := range correlate.GroupConntrack(mine) {
			g.ServicePort = pp.ServicePort // a deleted Service's group has none
			sc.Ports = append(sc.Ports, PortConntrack{Family: pp.Family, ConntrackGroup: g})
			for _, s := range g.ByCause {
				pp.Problems = append(pp.Problems, explainStaleProblem(g, s, partial))
			}
		}
		sortProblems(pp.Problems)
	}
	var other []correlate.ConntrackEntry
	for j := range facts.Entries {
		if e := &facts.Entries[j]; e.Cause == correlate.CauseNotServicePort && e.ServicePort == svc {
			other = append(other, *e)
		}
	}
	sc.Other = correlate.GroupConntrack(other)
	if len(sc.Other) == 0 {
		sc.Other = nil
	}
	if t := n.Kernel.Table; t.Truncated.Incomplete || t.Truncated.Unread || t.Truncated.LongLines > 0 {
		rep.NotChecked = append(rep.NotChecked, Gap{Check: "stale conntrack entries of " + svc + " beyond what was read (INCOMPLETE)",
			Reason: "the conntrack table was read capped", Remedy: "read it filtered to the Service (explain --node does), or with a higher cap"})
	}
}

// portEntry: e is an entry of pp's port and family. A deleted Service
// (ExplainFormerService) has no port of its own among the Services: its
// entries are the deleted ones to its cluster IPs and port.
func portEntry(rep *ServiceExplanation, pp *PortReport, e *correlate.ConntrackEntry) bool {
	if !strings.EqualFold(e.Proto, pp.Protocol) || entryFamily(e) != pp.Family {
		return false
	}
	if rep.Deleted {
		return e.Deleted && e.Dst.Port() == uint16(pp.Port) &&
			slices.ContainsFunc(rep.ClusterIPs, func(ip string) bool { a, err := netip.ParseAddr(ip); return err == nil && a.Unmap() == e.Dst.Addr() })
	}
	return !e.Deleted && e.Cause != correlate.CauseNotServicePort && e.ServicePort == pp.ServicePort
}

func entryFamily(e *correlate.ConntrackEntry) string {
	if e.Dst.Addr().Is6() {
		return string(kubeproxy.IPv6)
	}
	return string(kubeproxy.IPv4)
}

// explainStaleProblem is a group's stale entries of one cause as a problem
// of the port, with Conntrack's severity and kind.
func explainStaleProblem(g correlate.ConntrackGroup, s correlate.StaleConntrack, partial bool) Problem {
	cp := staleProblem(g, s, partial)
	proto := strings.ToUpper(g.Proto)
	msg := fmt.Sprintf("%d %s conntrack entr%s answered by no serving endpoint (%s), %s left: %s", s.Entries, proto, ies(s.Entries),
		strings.Join(s.ReplySources, ", "), secondsRange(s), s.Why)
	if cp.Severity != SeverityInfo {
		msg += fmt.Sprintf("; clients that keep their source port (DNS resolvers) keep sending to the gone endpoint while the entry lives: clear %s with the conntrack -D command%s shown", map[bool]string{true: "it", false: "them"}[s.Entries == 1], map[bool]string{true: "", false: "s"}[len(s.Commands) == 1])
	}
	return Problem{Severity: cp.Severity, Kind: cp.Kind, Message: msg, Endpoints: slices.Clone(s.ReplySources)}
}
