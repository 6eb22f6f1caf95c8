package diagnose

import "fmt"

// IPVS mode in the sweeps: an IPVS node's stale virtual servers count in
// its STALE and HARMFUL cells, its virtual servers that are not what the
// Service ports call for in its DRIFT cell, and both group across nodes by
// what they are (a stale one by its former owner, so that the same
// leftover on many nodes is one cause).

// staleVirtualServers counts r's stale virtual servers; each is harmful
// (connections to its address still go to its real servers).
func staleVirtualServers(r *StaleReport) (stale, harmful int) {
	for _, v := range r.VirtualServers {
		if v.What == UnownedStale {
			stale++
			harmful++
		}
	}
	return stale, harmful
}

// staleIPVS adds r's stale virtual servers as causes, one per former
// owner, and says the node is in IPVS mode.
func (a *sweepAdd) staleIPVS(r *StaleReport) {
	if !r.IPVSRead {
		return
	}
	a.row.Mode = "ipvs"
	a.row.LargeClusterMode = nil // the IPVS proxier has none
	for _, v := range r.VirtualServers {
		switch {
		case v.What != UnownedStale:
		case v.FormerOwner == "unknown":
			a.cause(SeverityWarning, "stale: IPVS virtual servers no current Service port has, of an unknown owner")
		default:
			a.cause(SeverityWarning, fmt.Sprintf("stale: IPVS virtual servers of %s, which no current Service port has", v.FormerOwner))
		}
	}
}

// countsIPVS adds r's IPVS counts as causes.
func (a *sweepAdd) countsIPVS(r *RuleCounts) {
	c := r.IPVS
	if c != nil {
		a.row.LargeClusterMode = nil // the IPVS proxier has none
	}
	if c == nil || !c.Compared {
		return
	}
	if c.Missing > 0 && !c.Incomplete {
		a.cause(SeverityError, "IPVS: frontends of Service ports without a virtual server")
	}
	if c.Stale > 0 {
		a.cause(SeverityWarning, "IPVS: virtual servers no current Service port has")
	}
}

// ipvsDrift is 1 when the virtual servers are not what the Service ports
// call for (as a table whose count differs is 1).
func ipvsDrift(r *RuleCounts) int {
	if c := r.IPVS; c != nil && c.Compared && !c.Agree {
		return 1
	}
	return 0
}
