package diagnose

import "strings"

// conntrackFindings judges the node's conntrack state beside the rules
// when it was read (Conntrack) and adds its problems; it returns what was
// not checked: the whole of it when nothing was read, else the gaps of
// its report.
func conntrackFindings(n *Node, rep *TriageReport, add addRaw) []Gap {
	if n.Kernel == nil {
		return []Gap{{
			Check:  "the conntrack table and the kernel settings Services depend on (stale UDP entries, a full table, forwarding off, NodePorts in the ephemeral range)",
			Reason: "the node's conntrack state was not read",
			Remedy: "--from-conntrack, --from-conntrack-stats (twice, seconds apart) and --from-sysctls, a bundle written by collect, or a live read (triage --node NAME)",
		}}
	}
	rep.Conntrack = Conntrack(n, *n.Kernel)
	for _, p := range rep.Conntrack.Problems {
		f := Finding{Severity: p.Severity, Area: conntrackArea(p.Kind), Subject: p.Subject, Title: conntrackTitle(p),
			Kind: p.Kind, Remedy: p.Remedy, Evidence: p.Evidence, Commands: p.Commands}
		msg := p.Message
		if p.Consequence != "" {
			msg += ". Consequence: " + p.Consequence
		}
		add(&raw{Finding: f, tag: tagOther}, "%s", msg)
	}
	return rep.Conntrack.NotChecked
}

// conntrackArea: the settings are the kernel's, the rest the table's.
func conntrackArea(kind string) string {
	switch kind {
	case ConntrackForwarding, ConntrackBridgeNF, ConntrackRouteLocalnet, ConntrackPortRange, ConntrackTCPBeLiberal, ConntrackIPVSSettings:
		return "kernel"
	}
	return "conntrack"
}

// conntrackTitle is the cause in a few words, the same on every node it
// is found on (no counts, no addresses of one node), so that a sweep
// groups it across nodes.
func conntrackTitle(p ConntrackProblem) string {
	switch p.Kind {
	case ConntrackStale:
		return "stale UDP conntrack entries of " + p.Subject + " that kube-proxy will not clean"
	case ConntrackStalePending:
		return "stale UDP conntrack entries of " + p.Subject + " (kube-proxy cleans them at its next endpoint change)"
	case ConntrackStaleTCP:
		return "conntrack entries of " + p.Subject + " to gone endpoints (TCP: not cleaned)"
	case ConntrackNoServicePort:
		return "conntrack entries to " + p.Subject + " that no Service port serves"
	case ConntrackTableFull:
		return "the conntrack table is full: new connections are dropped"
	case ConntrackTableNearFull:
		return "the conntrack table is 90% full or more"
	case ConntrackDrops:
		return "conntrack is dropping packets now (insert_failed, drop)"
	case ConntrackEarlyDrops:
		return "conntrack evicts entries to make room (early_drop)"
	case ConntrackMaxLowered:
		return "nf_conntrack_max is below what kube-proxy's configuration sets"
	case ConntrackForwarding:
		return "forwarding is off (" + p.Subject + " = 0)"
	case ConntrackBridgeNF:
		return p.Subject + " = 0 while br_netfilter is loaded"
	case ConntrackRouteLocalnet:
		return "route_localnet = 0 while the rules accept localhost NodePorts"
	case ConntrackPortRange:
		return "NodePorts inside ip_local_port_range (#111823)"
	case ConntrackTCPBeLiberal:
		return "tcp_be_liberal differs from kube-proxy's configuration"
	case ConntrackIPVSSettings:
		if p.Subject == "ip_vs" {
			return "IPVS mode without the ip_vs module"
		}
		return p.Subject + " is not as kube-proxy's IPVS mode sets it"
	}
	return strings.TrimSpace("conntrack " + p.Subject + ": " + firstClause(p.Message))
}
