package diagnose

import (
	"fmt"
	"strings"

	"github.com/proxyrules/kubectl-proxyrules/inspect/metrics"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// IPVS mode's part of `counts`. kube-proxy's IPVS proxier exports no
// count of what it programmed (no iptables_total; its restore-failure
// counter, sync timestamps and durations are there): what can be counted
// is the virtual servers against the Service ports' frontends the objects
// call for. v1.37.2's syncProxyRules (pkg/proxy/ipvs/proxier.go) returns
// after a failed iptables-restore (:1188-1197) before cleanLegacyService
// (:1229) and before setting last_timestamp (:1234): while restores fail,
// virtual servers no longer needed stay and the last sync ages.

// IPVSCountsReport counts the virtual servers against what the Service
// ports call for.
type IPVSCountsReport struct {
	// VirtualServers are the table's; Expected the frontends of the Service
	// ports kube-proxy makes a virtual server for (per family), Present
	// those that have one, Missing those that do not.
	VirtualServers int `json:"virtualServers"`
	Expected       int `json:"expected"`
	Present        int `json:"present"`
	Missing        int `json:"missing"`
	// Stale are the virtual servers no current Service port has; Probes
	// kube-proxy's startup probe; LoopbackNodePorts an older version's.
	Stale             int `json:"stale"`
	Probes            int `json:"probes"`
	LoopbackNodePorts int `json:"loopbackNodePorts"`
	// Unattributed are the virtual servers no owner was looked for (no
	// API objects).
	Unattributed int `json:"unattributed"`
	RealServers  int `json:"realServers"`
	// ExpectedRealServers are the endpoints kube-proxy makes real servers
	// of the present frontends' virtual servers, where the node's view
	// tells them; Difference is VirtualServers − Expected.
	ExpectedRealServers int  `json:"expectedRealServers"`
	Difference          *int `json:"difference"`
	// Compared: the API objects were given; Agree: every frontend has its
	// virtual server and no other is there; Reason says why they differ.
	Compared    bool   `json:"compared"`
	NotCompared string `json:"notCompared,omitempty"`
	Agree       bool   `json:"agree"`
	Reason      string `json:"reason,omitempty"`
	// Incomplete: the table was read only in part.
	Incomplete bool `json:"incomplete,omitempty"`
}

// countIPVS sets the report's IPVS counts when the node has an IPVS table
// and returns whether they show a problem.
func (rep *RuleCounts) countIPVS(n *Node) bool {
	if !n.Ruleset.HasIPVS() {
		return false
	}
	ir := IPVS(n)
	c := &IPVSCountsReport{VirtualServers: ir.Counts.VirtualServers, RealServers: ir.Counts.RealServers, Incomplete: ir.ex.Facts.Incomplete}
	rep.IPVS = c
	if c.Incomplete {
		rep.NotChecked = append(rep.NotChecked, ipvsPartialGap("the virtual servers against the Service ports' frontends"))
	}
	for _, p := range ir.ex.Ports {
		for _, fe := range p.Frontends {
			c.Expected++
			if fe.VirtualServer < 0 {
				c.Missing++
				continue
			}
			c.Present++
			c.ExpectedRealServers += len(fe.Expected)
		}
	}
	for _, u := range ir.Unowned {
		switch u.What {
		case UnownedStale:
			c.Stale++
		case UnownedProbe:
			c.Probes++
		case UnownedLoopbackNodePort:
			c.LoopbackNodePorts++
		}
	}
	c.Unattributed = ir.Counts.Unattributed - c.Stale - c.LoopbackNodePorts
	if n.Objects == nil {
		c.NotCompared = "no API objects given: which virtual servers the Service ports call for is not known; pass --from-objects"
		rep.NotChecked = append(rep.NotChecked, Gap{Check: "the IPVS virtual servers against the Service ports' frontends", Reason: "no API objects were given", Remedy: "--from-objects (kubectl get services,endpointslices -A -o json)"})
		return false
	}
	d := c.VirtualServers - c.Expected
	c.Difference, c.Compared = &d, true
	c.Agree = c.Missing == 0 && c.Stale == 0 && d == c.Probes+c.LoopbackNodePorts
	if c.Agree && d == 0 {
		return false
	}
	c.Reason = ipvsCountsReason(c, rep.Failures, rep.Mode)
	// those past a cap look missing: not a problem then (as triage)
	return c.Missing > 0 && !c.Incomplete || c.Stale > 0
}

// ipvsCountsReason says why the virtual servers are not what the Service
// ports call for.
func ipvsCountsReason(c *IPVSCountsReport, failures []FailureCount, mode kubeproxy.Mode) string {
	var parts []string
	if c.Missing > 0 {
		parts = append(parts, fmt.Sprintf("%d frontend%s of Service ports %s no virtual server (kube-proxy has not programmed %s: see `triage`)", c.Missing, plural(c.Missing), hasHave(c.Missing), itThem(c.Missing)))
	}
	if c.Stale > 0 {
		parts = append(parts, fmt.Sprintf("%d virtual server%s no current Service port has (see `stale`)", c.Stale, plural(c.Stale)))
	}
	if c.Probes > 0 {
		parts = append(parts, fmt.Sprintf("%d is kube-proxy's startup probe (harmless)", c.Probes))
	}
	if c.LoopbackNodePorts > 0 {
		parts = append(parts, fmt.Sprintf("%d NodePort%s on loopback of an older kube-proxy", c.LoopbackNodePorts, plural(c.LoopbackNodePorts)))
	}
	s := strings.Join(parts, "; ")
	failing := false
	for _, f := range failures {
		failing = failing || f.Metric == metrics.RestoreFailures && f.Now != Recovered
	}
	switch {
	case c.Stale > 0 && failing:
		s += ". iptables-restore is failing: in IPVS mode a sync whose restore fails returns before it removes the virtual servers no longer needed, so they stay until a restore succeeds"
	case c.Missing > 0 && failing:
		s += ". iptables-restore is failing: kube-proxy retries the whole sync"
	case (c.Stale > 0 || c.Missing > 0) && mode == kubeproxy.ModeIPVS:
		s += ". kube-proxy adds and removes virtual servers on every sync: if this stays, it is not syncing (see the last sync below) or another program changes the table"
	}
	if c.Incomplete {
		s += ". The table was read only in part: these are the counts of what was read"
	}
	return s
}

func hasHave(n int) string {
	if n == 1 {
		return "has"
	}
	return "have"
}

func itThem(n int) string {
	if n == 1 {
		return "it"
	}
	return "them"
}

// ipvsFailureMeanings says what a failed restore means in IPVS mode, where
// there is no rule count to be wrong.
func ipvsFailureMeanings(failures []FailureCount) {
	for i := range failures {
		if failures[i].Metric == metrics.RestoreFailures {
			failures[i].Meaning = "iptables-restore failed; in IPVS mode the sync then returns before removing the virtual servers no longer needed and before setting last_timestamp, and kube-proxy retries it"
		}
	}
}
