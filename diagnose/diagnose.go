// Package diagnose judges what a node's rules say: for one node, every
// analysis (triage, explain, stale, masquerade, rule counts, proxy mode and
// backend) and the report it writes, with each finding's severity.
//
// It reads the inspect model, the correlate joins, metrics and kube-proxy's
// configuration, and knows no command line, cluster client or terminal:
// package plugin turns flags into a Node and reports into text.
package diagnose

import (
	"time"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/inspect"
	"github.com/proxyrules/kubectl-proxyrules/inspect/kpconfig"
	"github.com/proxyrules/kubectl-proxyrules/inspect/metrics"
)

// APIVersion is the apiVersion of every machine-readable report.
const APIVersion = "proxyrules.kubectl.io/v1alpha1"

// Node is what one node's diagnosis reads.
type Node struct {
	// Name is the node the rules come from; Local traffic policies need it.
	Name    string
	Ruleset *inspect.Ruleset
	Metrics []*metrics.Metrics
	// Objects are the Services and EndpointSlices; nil when not given.
	Objects *correlate.Objects
	Config  *kpconfig.Config
	// CollectionNotes are what reading the node noted (a bundle's warnings).
	CollectionNotes []string
	// At is the time ages are judged against; zero when unknown.
	At time.Time

	res *correlate.Result
}

// Severity orders findings: errors first.
type Severity string

const (
	SeverityError   Severity = "error"
	SeverityWarning Severity = "warning"
	SeverityInfo    Severity = "info"
)

func (s Severity) rank() int {
	switch s {
	case SeverityError:
		return 0
	case SeverityWarning:
		return 1
	}
	return 2
}

// Problem is one finding, in words an on-call engineer can act on.
type Problem struct {
	Severity Severity `json:"severity"`
	Message  string   `json:"message"`
}

// attribution is the node's chains attributed, computed once per Node.
func (n *Node) attribution() *correlate.Result {
	if n.res == nil {
		n.res = correlate.Attribute(n.Ruleset, n.Objects)
	}
	return n.res
}
