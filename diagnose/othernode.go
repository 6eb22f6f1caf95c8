package diagnose

import (
	"fmt"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
)

// ProblemOtherNode: a port's rules are what another node programs, not
// the node the dump was given as (see NodeIdentity).
const ProblemOtherNode = "otherNode"

// otherNode says, for explain, where one Service's own rules show the dump
// is of another node than the one named: what its Local-policy chains
// reach, or the endpoints another zone's or node's hints select. The
// endpoints it then finds missing or unexpected are judged for the wrong
// node: they are said once, as that, not as errors of their own.
func otherNode(n *Node, rep *ServiceExplanation) {
	if n.Name == "" || n.NameEvidence != "" || n.Objects == nil {
		return // no name given, or the dump's own
	}
	id := identifyFrom(n.Name, n, []*correlate.Explanation{rep.Explanation})
	if !id.Mismatch || id.Unknown {
		return
	}
	c := id.mismatchCause()
	said := false
	for i := range rep.Ports {
		pp := &rep.Ports[i]
		kept := pp.Problems[:0:0]
		var eps []string
		for _, p := range pp.Problems {
			if p.Kind == ProblemMissingEndpoints || p.Kind == ProblemUnexpected {
				eps = append(eps, p.Endpoints...)
				continue
			}
			kept = append(kept, p)
		}
		if eps == nil {
			continue
		}
		p := Problem{Severity: SeverityError, Kind: ProblemOtherNode, Endpoints: eps,
			Message: fmt.Sprintf("%s; %s", c.Message, c.Remedy)}
		if said {
			p.Severity, p.Message = SeverityInfo, c.Title+" (see above): the endpoints judged missing or unexpected here are judged for "+n.Name
		}
		said = true
		pp.Problems = append([]Problem{p}, kept...)
	}
}
