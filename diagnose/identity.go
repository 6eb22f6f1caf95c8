package diagnose

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// NodeIdentity says which node the rules come from: the name given (--node,
// or a bundle's), the one the dump itself points to, and how.
type NodeIdentity struct {
	Given string `json:"given,omitempty"`
	// Inferred is the node whose endpoints the dump's Local-policy chains
	// reach, or whose node hints (PreferSameNode) its rules follow;
	// Evidence says which chains.
	Inferred string `json:"inferred,omitempty"`
	// InferredZone is the zone whose hinted endpoints the dump's rules
	// hold, where that is not the given node's zone.
	InferredZone string `json:"inferredZone,omitempty"`
	Evidence     string `json:"evidence,omitempty"`
	// Unknown: the given name matches no Node object and no endpoint's
	// node in the objects.
	Unknown bool `json:"unknown,omitempty"`
	// Mismatch: the dump points to another node than the one given.
	Mismatch bool `json:"mismatch,omitempty"`

	// hinted are the Services with topology hints: their verdicts are
	// judged for the given node, so a mismatch explains them.
	hinted map[string]bool
	// unchecked says what of the identity the input could not check.
	unchecked []Gap
}

// IdentifyNode infers the node from the dump and checks the given name
// against it and against the objects. Only rules that hold one node's
// choice tell a node apart: Local-policy chains (that node's own
// endpoints) and the endpoints topology hints select for it.
func IdentifyNode(given string, n *Node) NodeIdentity {
	if n.Objects == nil {
		return NodeIdentity{Given: given}
	}
	return identifyFrom(given, n, correlate.ExplainAll(n.Ruleset, n.Objects, correlate.NodeView{}))
}

// votes maps a node (or a zone) to the Services whose rules point to it.
type votes map[string]map[string]bool

func (v votes) add(key, svc string) {
	if v[key] == nil {
		v[key] = map[string]bool{}
	}
	v[key][svc] = true
}

// ranked lists the keys, most Services first.
func (v votes) ranked() []string {
	names := keys(v)
	sort.SliceStable(names, func(i, j int) bool { return len(v[names[i]]) > len(v[names[j]]) })
	return names
}

// evidence is what the dump's rules say of the node that wrote them.
type evidence struct {
	local votes // node → Services whose Local-policy chains reach its endpoints
	// sameNode: node → Services whose rules hold the endpoints hinted for
	// it, other than those the node judged would program too.
	sameNode votes
	// sameZone: zone → Services whose rules hold the endpoints hinted for
	// it, not those the node judged (in another zone) would program;
	// ownZone: its own zone → Services whose rules are its zone's;
	// undecided: zone → Services whose rules are that zone's, the node's
	// zone not known.
	sameZone, ownZone, undecided votes
}

// gather reads the evidence off every Service's explanation, made for
// the node judged (or for none).
func gather(n *Node, explained []*correlate.Explanation) evidence {
	ev := evidence{votes{}, votes{}, votes{}, votes{}, votes{}}
	for _, ex := range explained {
		svc := ex.Namespace + "/" + ex.Name
		for i := range ex.Ports {
			pp := &ex.Ports[i]
			byEP := map[string]string{}
			for _, ep := range pp.Endpoints {
				byEP[ep.Endpoint] = ep.NodeName
			}
			for _, hop := range pp.LocalHops {
				if node := byEP[hop]; node != "" {
					ev.local.add(node, svc)
				}
			}
			// An excerpt may not show every endpoint the rules hold.
			if pp.Mode == string(kubeproxy.ModeIPTables) && partialTables(n, kubeproxy.Family(pp.Family)) {
				continue
			}
			if fit := pp.TopologyFit(); fit != nil {
				ev.addFit(fit, ex)
			}
		}
	}
	return ev
}

// addFit counts a port whose rules hold the endpoints some zone's or
// node's hints select. Rules the node judged would program too say
// nothing against it (another node of its zone writes the same).
func (ev evidence) addFit(fit *correlate.TopologyFit, ex *correlate.Explanation) {
	svc := ex.Namespace + "/" + ex.Name
	if fit.Agrees {
		if slices.Contains(fit.Nodes, ex.Node) {
			ev.sameNode.add(ex.Node, svc)
		}
		if slices.Contains(fit.Zones, ex.Zone) {
			ev.ownZone.add(ex.Zone, svc)
		}
		return
	}
	for _, node := range fit.Nodes {
		ev.sameNode.add(node, svc)
	}
	for _, z := range fit.Zones {
		switch {
		case fit.Undecided:
			ev.undecided.add(z, svc)
		case z != ex.Zone:
			ev.sameZone.add(z, svc)
		}
	}
}

// identifyFrom is IdentifyNode on the explanations of every Service, made
// for the given node (or for none).
func identifyFrom(given string, n *Node, explained []*correlate.Explanation) NodeIdentity {
	id := NodeIdentity{Given: given}
	if n.Objects == nil {
		return id
	}
	ev := gather(n, explained)
	nodes := votes{}
	for _, v := range []votes{ev.local, ev.sameNode} {
		for node, svcs := range v {
			for svc := range svcs {
				nodes.add(node, svc)
			}
		}
	}
	ranked := nodes.ranked()
	if len(ranked) > 0 {
		id.Inferred = ranked[0]
		id.Evidence = ev.nodeText(ranked)
	}
	if given == "" {
		return id
	}
	id.Unknown = !nodeNamed(n.Objects, given)
	forGiven := len(nodes[given]) > 0
	id.Mismatch = id.Inferred != "" && id.Inferred != given && !forGiven
	if !forGiven {
		id.checkZone(n.Objects, ev)
	}
	if id.Mismatch {
		id.hinted = map[string]bool{}
		for _, svc := range hintedServices(n.Objects) {
			id.hinted[svc] = true
		}
	}
	return id
}

// checkZone holds the zones the dump's zone-hinted rules were written for
// against the given node's zone.
func (id *NodeIdentity) checkZone(objs *correlate.Objects, ev evidence) {
	nv := objs.NodeView(id.Given)
	against, undecided := ev.sameZone, ev.undecided
	if !nv.Labeled {
		// Zones a node's hints settled say nothing of a zone not known.
		against, undecided = votes{}, votes{}
		for _, v := range []votes{ev.sameZone, ev.undecided} {
			for z, svcs := range v {
				for svc := range svcs {
					undecided.add(z, svc)
				}
			}
		}
	}
	what := func(v votes) (string, string) {
		zones := v.ranked()
		svcs := keys(v[zones[0]])
		return zones[0], fmt.Sprintf("%d Service%s with zone hints (%s) hold the endpoints hinted for %s", len(svcs), plural(len(svcs)), examples(svcs, 3), zones[0])
	}
	switch {
	case len(against) > 0 && len(ev.ownZone) == 0:
		zone, text := what(against)
		id.Mismatch, id.InferredZone = true, zone
		mine := fmt.Sprintf("none those for %s's zone (%s)", id.Given, nv.Zone)
		if nv.Zone == "" {
			mine = id.Given + " has no zone label, so its kube-proxy ignores zone hints"
		}
		if id.Inferred == "" {
			if id.Inferred = onlyNodeIn(objs, zone); id.Inferred != "" {
				mine += fmt.Sprintf(", and %s is the only Node in %s", id.Inferred, zone)
			}
		}
		id.Evidence = joinNonEmpty("; ", id.Evidence, "the rules of "+text+", "+mine)
	case len(undecided) > 0 && !id.Mismatch:
		_, text := what(undecided)
		id.unchecked = append(id.unchecked, Gap{Check: "that the dump is " + id.Given + "'s, by the zone its rules were written for (the rules of " + text + ")",
			Reason: id.Given + "'s Node object (its zone) was not given", Remedy: "--from-objects with kubectl get node " + id.Given + " -o json"})
	}
}

// nodeText says which Services point to the first of ranked, and which
// other nodes others point to.
func (ev evidence) nodeText(ranked []string) string {
	top := ranked[0]
	var parts []string
	if svcs := keys(ev.local[top]); len(svcs) > 0 {
		parts = append(parts, fmt.Sprintf("the Local-policy chains of %d Service%s (%s) reach endpoints on %s", len(svcs), plural(len(svcs)), examples(svcs, 3), top))
	}
	if svcs := keys(ev.sameNode[top]); len(svcs) > 0 {
		parts = append(parts, fmt.Sprintf("the rules of %d Service%s with node hints (%s) hold the endpoints hinted for %s", len(svcs), plural(len(svcs)), examples(svcs, 3), top))
	}
	text := strings.Join(parts, "; ")
	if len(ranked) > 1 {
		text += fmt.Sprintf("; those of %d other%s reach %s", len(ranked)-1, plural(len(ranked)-1), strings.Join(ranked[1:], ", "))
	}
	return text
}

// mismatchCause is the finding that the dump is of another node; its
// symptoms are the verdicts that depend on the node.
func (id NodeIdentity) mismatchCause() Finding {
	who, remedy := "node "+id.Inferred, fmt.Sprintf("pass --node %s, or the dump of %s", id.Inferred, id.Given)
	if id.Inferred == "" {
		who, remedy = "a node in "+id.InferredZone, fmt.Sprintf("pass --node with a node of %s, or the dump of %s", id.InferredZone, id.Given)
	}
	verdicts := "every Local-policy verdict"
	if len(id.hinted) > 0 {
		verdicts = "every Local-policy and topology verdict"
	}
	title := fmt.Sprintf("the dump is of %s, not %s", who, id.Given)
	return Finding{Severity: SeverityError, Area: "identity", Subject: id.Given, Title: title,
		Message: fmt.Sprintf("%s: %s; %s below is judged for %s and is wrong if the dump is %s's", title, id.Evidence, verdicts, id.Given, strings.TrimPrefix(who, "node ")),
		Remedy:  remedy}
}

// explains says whether a finding of a Service is a symptom of a mismatch:
// its verdict depends on which node the rules are judged for.
func (id NodeIdentity) explains(r *raw) bool {
	return r.local || id.hinted[r.service]
}

// onlyNodeIn is the one Node object in zone, or "" when there are none
// or several.
func onlyNodeIn(objs *correlate.Objects, zone string) string {
	found := ""
	for _, o := range objs.Other {
		if node, ok := o.(*corev1.Node); ok && node.Labels[corev1.LabelTopologyZone] == zone {
			if found != "" {
				return ""
			}
			found = node.Name
		}
	}
	return found
}

func joinNonEmpty(sep string, parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, sep)
}

// nodeNamed reports whether a Node object or an endpoint names node.
func nodeNamed(objs *correlate.Objects, node string) bool {
	if objs.Node(node) != nil {
		return true
	}
	for _, sp := range objs.ServicePorts() {
		for _, ep := range sp.Endpoints {
			if ep.NodeName == node {
				return true
			}
		}
	}
	// With the Node objects given, a name none of them has is unknown;
	// without, only the endpoints can tell.
	return false
}

func nodeObjects(objs *correlate.Objects) int {
	n := 0
	for _, o := range objs.Other {
		if _, ok := o.(*corev1.Node); ok {
			n++
		}
	}
	return n
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
