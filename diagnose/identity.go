package diagnose

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
)

// NodeIdentity says which node the rules come from: the name given (--node,
// or a bundle's), the one the dump itself points to, and how.
type NodeIdentity struct {
	Given string `json:"given,omitempty"`
	// Inferred is the node whose endpoints the dump's Local-policy chains
	// reach; Evidence says which chains.
	Inferred string `json:"inferred,omitempty"`
	Evidence string `json:"evidence,omitempty"`
	// Unknown: the given name matches no Node object and no endpoint's
	// node in the objects.
	Unknown bool `json:"unknown,omitempty"`
	// Mismatch: the dump points to another node than the one given.
	Mismatch bool `json:"mismatch,omitempty"`
}

// IdentifyNode infers the node from the dump and checks the given name
// against it and against the objects. Only kube-proxy's Local-policy
// chains tell a node apart: they hold that node's own endpoints.
func IdentifyNode(given string, n *Node) NodeIdentity {
	if n.Objects == nil {
		return NodeIdentity{Given: given}
	}
	return identifyFrom(given, n, correlate.ExplainAll(n.Ruleset, n.Objects, correlate.NodeView{}))
}

// identifyFrom is IdentifyNode on the explanations of every Service, with
// any node view: which endpoints the Local-policy chains reach and where
// the slices put them do not depend on it.
func identifyFrom(given string, n *Node, explained []*correlate.Explanation) NodeIdentity {
	id := NodeIdentity{Given: given}
	if n.Objects == nil {
		return id
	}
	votes := map[string]map[string]bool{} // node → services whose local chains reach it
	for _, ex := range explained {
		for _, pp := range ex.Ports {
			byEP := map[string]string{}
			for _, ep := range pp.Endpoints {
				byEP[ep.Endpoint] = ep.NodeName
			}
			for _, hop := range pp.LocalHops {
				node := byEP[hop]
				if node == "" {
					continue
				}
				if votes[node] == nil {
					votes[node] = map[string]bool{}
				}
				votes[node][ex.Namespace+"/"+ex.Name] = true
			}
		}
	}
	var names []string
	for node := range votes {
		names = append(names, node)
	}
	sort.Slice(names, func(i, j int) bool {
		if a, b := len(votes[names[i]]), len(votes[names[j]]); a != b {
			return a > b
		}
		return names[i] < names[j]
	})
	if len(names) > 0 {
		id.Inferred = names[0]
		svcs := keys(votes[names[0]])
		id.Evidence = fmt.Sprintf("the Local-policy chains of %d Service%s (%s) reach endpoints on %s", len(svcs), plural(len(svcs)), examples(svcs, 3), names[0])
		if len(names) > 1 {
			id.Evidence += fmt.Sprintf("; those of %d other%s reach %s", len(names)-1, plural(len(names)-1), strings.Join(names[1:], ", "))
		}
	}
	if given != "" {
		id.Mismatch = id.Inferred != "" && id.Inferred != given && len(votes[given]) == 0
		id.Unknown = !nodeNamed(n.Objects, given)
	}
	return id
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

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
