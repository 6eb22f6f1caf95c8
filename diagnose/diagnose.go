// Package diagnose judges what a node's rules say: for one node, every
// analysis (triage, explain, stale, masquerade, rule counts, proxy mode and
// backend) and the report it writes, with each finding's severity.
//
// It reads the inspect model, the correlate joins, metrics and kube-proxy's
// configuration, and knows no command line, cluster client or terminal:
// package plugin turns flags into a Node and reports into text.
package diagnose

import (
	"net/netip"
	"slices"
	"strings"
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
	// NameEvidence says how the dump showed it, when it was inferred.
	Name         string
	NameEvidence string
	Ruleset      *inspect.Ruleset
	Metrics      []*metrics.Metrics
	// Objects are the Services and EndpointSlices; nil when not given.
	Objects *correlate.Objects
	// Addresses are the node's addresses given besides its Node
	// object's (--node-ip): what its node ports and local addresses are.
	Addresses []netip.Addr
	Config    *kpconfig.Config
	// CollectionNotes are what reading the node noted (a bundle's warnings).
	CollectionNotes []string
	// At is the time ages are judged against; zero when unknown. AtSource
	// says where it comes from ("--at", "collectedAt", "the newest metric
	// timestamp, a lower bound", "now").
	At       time.Time
	AtSource string
	// Scope is "" when the node's whole rulesets were read, else what was
	// read ("service shop/web").
	Scope string
	// Select, when set, limits the Service parts of the reports (map,
	// stale, triage's Services) to the Services it accepts: -n, -l.
	// Chains no current or former Service owns are left out then.
	Select func(namespace, name string) bool
	// Kernel is the node's conntrack state beside the rules (table,
	// counters, sysctls); nil when none was read. Triage judges it
	// (diagnose.Conntrack) or says it was not checked.
	Kernel *ConntrackInputs
	// KubeProxyVersion is the node's kube-proxy version ("v1.37.2"), ""
	// when not known (from its image's tag).
	KubeProxyVersion string

	res *correlate.Result
	// ipvs is the IPVS report, built once per Node (ipvs.go): triage,
	// map, stale and counts each read it.
	ipvs *IPVSReport
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
	// Kind says what is wrong, for programs (see ProblemKinds); Endpoints
	// names the endpoints concerned.
	Kind      string   `json:"kind,omitempty"`
	Endpoints []string `json:"endpoints,omitempty"`
}

// Problem kinds of a Service port's path.
const (
	ProblemNoEntry           = "noEntry"            // no rule catches an address of the Service
	ProblemEmptyChain        = "emptyChain"         // a chain of the port exists without rules
	ProblemMissingEndpoints  = "missingEndpoints"   // expected endpoints no rule reaches
	ProblemExtraEndpoints    = "extraEndpoints"     // endpoints in the rules, not in the slices
	ProblemTerminating       = "terminatingInRules" // terminating endpoints still get new connections
	ProblemUnexpected        = "unexpectedEndpoints"
	ProblemShares            = "shares"            // shares do not add up to 1
	ProblemNoReject          = "noReject"          // no usable endpoint, no reject rule
	ProblemNoEndpoints       = "noEndpoints"       // the slices list none (informational)
	ProblemNoneReady         = "noneReady"         // endpoints listed, none ready or serving: an outage the rules get right
	ProblemRejectedWithReady = "rejectedWithReady" // rejected as "no endpoints" despite ready ones
	ProblemMisnamed          = "misnamedChain"     // a chain's name belongs to another endpoint
	ProblemSourceRanges      = "sourceRanges"      // loadBalancerSourceRanges not as programmed
	ProblemRemovedJump       = "removedJump"       // an endpoint chain is there, the jump to it is gone
	ProblemAffinityUnkept    = "affinityUnkept"    // ClientIP affinity recorded, but no rule reads the record
	ProblemDropped           = "dropped"           // the walk's connections are dropped or rejected where they should not be
	ProblemNoMasquerade      = "noMasquerade"      // external traffic of a Cluster policy is not masqueraded
)

// nodeView is the node as correlate sees it: its Node object, and the
// addresses given.
func (n *Node) nodeView() correlate.NodeView {
	nv := n.Objects.NodeView(n.Name)
	for _, a := range n.Addresses {
		if s := a.String(); !slices.Contains(nv.IPs, s) {
			nv.IPs = append(nv.IPs, s)
		}
	}
	return nv
}

// attribution is the node's chains attributed, computed once per Node.
func (n *Node) attribution() *correlate.Result {
	if n.res == nil {
		n.res = correlate.Attribute(n.Ruleset, n.Objects)
	}
	return n.res
}

// selected says whether the Service port "ns/name[:port]" is selected.
func (n *Node) selected(servicePort string) bool {
	if n.Select == nil {
		return true
	}
	ns, rest, ok := strings.Cut(servicePort, "/")
	if !ok {
		return false
	}
	name, _, _ := strings.Cut(rest, ":")
	return n.Select(ns, name)
}
