package diagnose

import (
	"fmt"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
)

// judgeReadiness names the outages the rules get right: kube-proxy sends a
// Service's new connections to its ready endpoints, or, when none is
// ready, to the terminating ones that still serve; with neither it writes
// a "has no endpoints" reject. The rules are then as they should be, and
// the Service still gets no traffic: the answer is in the pods.
func judgeReadiness(ex *correlate.Explanation, pp *correlate.PortPath) []Problem {
	listed, ready, draining := 0, 0, 0
	for _, e := range pp.Endpoints {
		if !e.InSlices {
			continue
		}
		listed++
		switch {
		case e.Ready == nil || *e.Ready:
			ready++
		case isTrue(e.Serving) && isTrue(e.Terminating):
			draining++
		}
	}
	if ready > 0 || draining > 0 {
		return nil
	}
	outcome := "clients get connection refused (REJECT)"
	if !hasEntry(pp.Entries, "noEndpoints") {
		// The rules still send them somewhere: judged by judgeEndpoints;
		// this says what kube-proxy will do once it catches up.
		outcome = "kube-proxy should reject new connections (REJECT), and will once it syncs"
	}
	if listed == 0 {
		return []Problem{{Severity: SeverityInfo, Kind: ProblemNoEndpoints,
			Message: fmt.Sprintf("no endpoints: the EndpointSlices list none for this port, so %s; %s", outcome, whereToLook(ex, "does the selector match any pod?"))}}
	}
	return []Problem{{Severity: SeverityWarning, Kind: ProblemNoneReady,
		Message: fmt.Sprintf("0 of %d %s ready: %s; %s", listed, "endpoint"+plural(listed), outcome, whereToLook(ex, "check the pods' readiness:"))}}
}

// whereToLook is the command that shows a Service's pods, or its
// EndpointSlices when it has no selector (someone else writes them).
func whereToLook(ex *correlate.Explanation, question string) string {
	if ex.Selector == "" {
		return fmt.Sprintf("the Service has no selector, so its EndpointSlices are written by hand or by a controller: kubectl get endpointslices -n %s -l kubernetes.io/service-name=%s -o yaml", ex.Namespace, ex.Name)
	}
	return fmt.Sprintf("%s kubectl get pods -n %s -l %s", question, ex.Namespace, ex.Selector)
}

func isTrue(b *bool) bool { return b != nil && *b }
