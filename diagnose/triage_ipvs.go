package diagnose

import "fmt"

// ipvsKinds are IPVS problems that mean the table lags (or lost) what the
// EndpointSlices say, as driftKinds are for the rules.
var ipvsDriftKinds = map[string]bool{ProblemNoVirtualServer: true, ProblemWeightZero: true}

// ipvsFindings adds the IPVS report's problems as triage findings, each
// Service port's under area "service" as the rules' are, and returns
// what it could not check.
func ipvsFindings(rep *IPVSReport, add addRaw) []Gap {
	for _, p := range rep.Ports {
		for _, pr := range p.Problems {
			tag := tagService
			if driftKinds[pr.Kind] || ipvsDriftKinds[pr.Kind] {
				tag = tagDrift
			}
			add(&raw{Finding: Finding{Severity: pr.Severity, Area: "service", Subject: fmt.Sprintf("%s (ipvs %s)", p.ServicePort, p.Family)},
				tag: tag, kind: pr.Kind, endpoints: pr.Endpoints, family: p.Family, service: p.Namespace + "/" + p.Name, local: p.LocalPolicy}, "%s", pr.Message)
		}
	}
	for _, u := range rep.Unowned {
		add(&raw{Finding: Finding{Severity: u.Severity, Area: "stale", Subject: "virtual server " + u.VirtualServer}, tag: tagOther}, "%s", u.Message)
	}
	return rep.NotChecked
}
