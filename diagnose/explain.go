package diagnose

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// ServiceExplanation is explain's report for one Service: the path its
// packets take (package correlate) with the problems found on each port.
type ServiceExplanation struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
	*correlate.Explanation
	// Lookup is the chain explain was asked about, when it was given a
	// chain name instead of the Service's.
	Lookup *correlate.Lookup `json:"lookup,omitempty"`
	// Deleted: the Service is gone from the API objects; it was rebuilt
	// from the chains the rules still have for it (ExplainFormerService).
	Deleted bool         `json:"deleted,omitempty"`
	Ports   []PortReport `json:"ports"`
	// Status: healthy, problems, or incomplete (NotChecked says what).
	Status     Status `json:"status"`
	NotChecked []Gap  `json:"notChecked"`
	// Conntrack is the Service's conntrack entries on the node, when its
	// kernel state was read (explain_conntrack.go).
	Conntrack *ServiceConntrack `json:"conntrack,omitempty"`
	// IPVS, in IPVS mode, is each port's virtual servers judged; Ports is
	// then empty: IPVS mode's iptables chains name no endpoint
	// (explain_ipvs.go).
	IPVS []IPVSPortReport `json:"ipvs,omitempty"`
}

// PortReport is one port's path and what is wrong with it.
type PortReport struct {
	correlate.PortPath
	Problems []Problem `json:"problems"`
}

// ExplainService explains one Service of the node.
func ExplainService(n *Node, namespace, name, port string) (*ServiceExplanation, error) {
	ex, err := correlate.Explain(n.Ruleset, n.Objects, correlate.ExplainOptions{Namespace: namespace, Name: name, Port: port, Node: n.nodeView()})
	if err != nil {
		return nil, err
	}
	rep, unchecked := judgeOn(n, ex)
	otherNode(n, rep)
	rep.APIVersion, rep.Kind = APIVersion, "ServiceExplanation"
	if ipvsMode(n) {
		unchecked = rep.explainIPVS(IPVS(n), port)
	}
	rep.NotChecked = append(explainGaps(n, ex), unchecked...)
	addExplainConntrack(n, explainConntrackFacts(n), rep)
	rep.Status = verdict(rep.hasProblems(), rep.NotChecked)
	return rep, nil
}

// ServiceExplanationList is explain's report for several Services (-l, or
// every Service of -n): one explanation each.
type ServiceExplanationList struct {
	APIVersion string                `json:"apiVersion"`
	Kind       string                `json:"kind"`
	Items      []*ServiceExplanation `json:"items"`
	// Status is the worst of the items'; NotChecked what none could check.
	Status     Status `json:"status"`
	NotChecked []Gap  `json:"notChecked"`
}

// ExplainServices explains every Service of the objects that n.Select
// accepts (all when it is nil) and that kube-proxy writes rules for.
func ExplainServices(n *Node) *ServiceExplanationList {
	list := &ServiceExplanationList{APIVersion: APIVersion, Kind: "ServiceExplanationList", Items: []*ServiceExplanation{}, NotChecked: []Gap{}}
	if n.Objects == nil {
		list.NotChecked = append(list.NotChecked, Gap{"the Services", "no Services and EndpointSlices were given", "--from-objects (kubectl get services,endpointslices -A -o json)"})
		list.Status = verdict(false, list.NotChecked)
		return list
	}
	problems, incomplete := false, false
	facts := explainConntrackFacts(n)
	var ipvsRep *IPVSReport
	if ipvsMode(n) {
		ipvsRep = IPVS(n)
	}
	for _, ex := range correlate.ExplainAll(n.Ruleset, n.Objects, n.nodeView()) {
		if !n.selected(ex.Namespace + "/" + ex.Name) {
			continue
		}
		rep, unchecked := judgeOn(n, ex)
		otherNode(n, rep)
		rep.APIVersion, rep.Kind = APIVersion, "ServiceExplanation"
		if ipvsRep != nil {
			unchecked = rep.explainIPVS(ipvsRep, "")
		}
		rep.NotChecked = append(explainGaps(n, ex), unchecked...)
		addExplainConntrack(n, facts, rep)
		rep.Status = verdict(rep.hasProblems(), rep.NotChecked)
		problems = problems || rep.Status == StatusProblems
		incomplete = incomplete || rep.Status == StatusIncomplete
		list.Items = append(list.Items, rep)
	}
	switch {
	case problems:
		list.Status = StatusProblems
	case incomplete:
		list.Status = StatusIncomplete
	default:
		list.Status = StatusHealthy
	}
	return list
}

func (rep *ServiceExplanation) hasProblems() bool {
	for _, pp := range rep.IPVS {
		for _, p := range pp.Problems {
			if p.Severity != SeverityInfo {
				return true
			}
		}
	}
	for _, pp := range rep.Ports {
		for _, p := range pp.Problems {
			if p.Severity != SeverityInfo {
				return true
			}
		}
	}
	return false
}

// explainGaps says what explaining this Service could not check: a family
// of its cluster IPs the dump has no table for, iptables' filter table,
// its topology or its local endpoints.
func explainGaps(n *Node, ex *correlate.Explanation) []Gap {
	out := []Gap{}
	if len(ex.ClusterIPs) == 0 {
		return out // headless, ExternalName: nothing to check
	}
	mode := DetectMode(n.Ruleset).Detected
	svc := ex.Namespace + "/" + ex.Name
	for _, fam := range []kubeproxy.Family{kubeproxy.IPv4, kubeproxy.IPv6} {
		has := false
		for _, ip := range ex.ClusterIPs {
			has = has || kubeproxy.FamilyOfIP(ip) == fam
		}
		if !has {
			continue
		}
		if !hasRulesOf(n, mode, fam) {
			out = append(out, Gap{fmt.Sprintf("%s's %s rules", svc, fam), fmt.Sprintf("the dump holds no %s %s table", fam, tableWord(mode)), familyRemedy(mode, fam)})
		} else if mode.Has(kubeproxy.ModeIPTables) && mode != kubeproxy.ModeIPVS && n.Ruleset.IPTable(fam, kubeproxy.TableFilter) == nil {
			out = append(out, Gap{fmt.Sprintf("%s's %s \"no endpoints\" rejects and load-balancer firewall drops", svc, fam), fmt.Sprintf("the dump holds no %s filter table", fam), "the whole " + saveCommand(fam) + " (not -t nat)"})
		}
	}
	topology, local := false, false
	for _, pp := range ex.Ports {
		topology = topology || pp.Topology == correlate.TopologyUnknown
		local = local || pp.LocalPolicy && !pp.NodeKnown
	}
	if topology {
		g := Gap{"which of " + svc + "'s endpoints this node uses (topology hints)", "the node's Node object (its zone) was not given", "--from-objects with kubectl get nodes -o json (or --node on the cluster)"}
		if n.Name == "" {
			g.Reason, g.Remedy = "the node is not known", "--node NAME"
		}
		out = append(out, g)
	}
	if local {
		out = append(out, Gap{svc + "'s local endpoints (Local traffic policy)", "the node is not known", "--node NAME"})
	}
	return out
}

func judgeExplanation(ex *correlate.Explanation) *ServiceExplanation {
	rep := &ServiceExplanation{Explanation: ex, Ports: make([]PortReport, 0, len(ex.Ports))}
	for i := range ex.Ports {
		ps := append(judgePort(&ex.Ports[i]), judgeReadiness(ex, &ex.Ports[i])...)
		sortProblems(ps)
		rep.Ports = append(rep.Ports, PortReport{PortPath: ex.Ports[i], Problems: ps})
	}
	return rep
}

// absenceKinds are the problems that rest on a rule not being there.
var absenceKinds = map[string]bool{
	ProblemNoEntry: true, ProblemMissingEndpoints: true, ProblemEmptyChain: true, ProblemRemovedJump: true,
	ProblemNoReject: true, ProblemShares: true, ProblemSourceRanges: true,
}

// judgeOn judges an explanation against the node's input: where a table is
// only an excerpt (pasted rule lines, one chain's listing), a rule it does
// not show proves nothing, so the problems that rest on absence are not
// reported but listed as not checked.
func judgeOn(n *Node, ex *correlate.Explanation) (*ServiceExplanation, []Gap) {
	rep := judgeExplanation(ex)
	var unchecked []Gap
	for i := range rep.Ports {
		pp := &rep.Ports[i]
		var reason, remedy string
		switch {
		case pp.Mode == string(kubeproxy.ModeIPTables) && partialTables(n, kubeproxy.Family(pp.Family)):
			reason, remedy = "the "+pp.Family+" rules are an excerpt, and what it does not show may hold it", "the whole "+saveCommand(kubeproxy.Family(pp.Family))
		case pp.Mode == string(kubeproxy.ModeIPTables) && pp.InternalExpected == 0 &&
			n.Ruleset.IPTable(kubeproxy.Family(pp.Family), kubeproxy.TableFilter) == nil:
			// Without endpoints its entry is filter's reject (a whole
			// `iptables -t nat -S` does not show it).
			reason, remedy = "the dump holds no "+pp.Family+" filter table, where kube-proxy rejects a Service without endpoints", "the whole "+saveCommand(kubeproxy.Family(pp.Family))+" (not -t nat)"
		case truncatedRoute(&pp.PortPath):
			// The walk stopped before the last branches: an endpoint it
			// did not reach may be reached by one it did not follow.
			reason, remedy = truncatedReason, truncatedRemedy
		default:
			continue
		}
		kept := pp.Problems[:0:0]
		for _, p := range pp.Problems {
			if absenceKinds[p.Kind] && p.Severity != SeverityInfo {
				what, _, _ := strings.Cut(p.Message, ": ")
				unchecked = append(unchecked, Gap{Check: fmt.Sprintf("%s (%s %s): %s", pp.ServicePort, pp.Mode, pp.Family, what),
					Reason: reason, Remedy: remedy})
				continue
			}
			kept = append(kept, p)
		}
		pp.Problems = kept
	}
	return rep, unchecked
}

const (
	truncatedReason = "the rules branch more ways than a walk follows (unknown matches that fork every branch?): only the first ways were walked"
	truncatedRemedy = "trace the entry to see what forks it"
)

func truncatedRoute(pp *correlate.PortPath) bool {
	for _, r := range pp.Routes {
		if r.Truncated {
			return true
		}
	}
	return false
}

// partialTables: the family's nat or filter table is only part of the
// node's.
func partialTables(n *Node, fam kubeproxy.Family) bool {
	for _, t := range n.Ruleset.IPTables {
		if t.Family == fam && t.Partial && (t.Name == kubeproxy.TableNAT || t.Name == kubeproxy.TableFilter) {
			return true
		}
	}
	return false
}

// judgePort says what is wrong with one port's path, most severe first.
func judgePort(pp *correlate.PortPath) []Problem {
	ps := []Problem{}
	problem := func(sev Severity, kind string, eps []string, format string, args ...any) {
		ps = append(ps, Problem{Severity: sev, Message: fmt.Sprintf(format, args...), Kind: kind, Endpoints: eps})
	}
	nft := pp.Mode == string(kubeproxy.ModeNFTables)
	for _, m := range pp.Missing {
		switch {
		case m.Kind == "clusterIP" && nft:
			problem(SeverityError, ProblemNoEntry, nil, "no service-ips element for the cluster IP %s: kube-proxy has not programmed this service port on this node", m.Address)
		case m.Kind == "clusterIP":
			problem(SeverityError, ProblemNoEntry, nil, "no KUBE-SERVICES rule for the cluster IP %s: kube-proxy has not programmed this service port on this node (is kube-proxy running and syncing?)", m.Address)
		case m.Kind == "nodePort" && nft:
			problem(SeverityError, ProblemNoEntry, nil, "no service-nodeports element for node port %s", m.Address)
		case m.Kind == "nodePort":
			problem(SeverityError, ProblemNoEntry, nil, "no KUBE-NODEPORTS rule for node port %s", m.Address)
		default:
			problem(SeverityWarning, ProblemNoEntry, nil, "no rule for external/load-balancer IP %s", m.Address)
		}
	}
	for _, c := range pp.EmptyChains {
		problem(SeverityWarning, ProblemEmptyChain, nil, "chain %s exists but is empty", c)
	}
	if fw := pp.Firewall; fw != nil {
		switch {
		case fw.Chain == "":
			problem(SeverityError, ProblemSourceRanges, nil, "loadBalancerSourceRanges (%s) are not programmed: no %s filter chain, so the load balancer's traffic reaches the service from anywhere", strings.Join(fw.Expected, ", "), pp.Family)
		default:
			if len(fw.Missing) > 0 {
				problem(SeverityError, ProblemSourceRanges, nil, "%s does not let %s through although loadBalancerSourceRanges allow %s: that traffic is dropped", fw.Chain, strings.Join(fw.Missing, ", "), them(fw.Missing))
			}
			if len(fw.Extra) > 0 {
				problem(SeverityError, ProblemSourceRanges, nil, "%s lets %s through although loadBalancerSourceRanges do not allow %s: traffic that should be dropped reaches the service", fw.Chain, strings.Join(fw.Extra, ", "), them(fw.Extra))
			}
		}
	}
	judgeEndpoints(pp, problem)
	for _, h := range pp.Misnamed {
		if h.NameSays != "" {
			problem(SeverityError, ProblemMisnamed, []string{h.Endpoint}, "%s DNATs to %s, but its name says %s", h.Chain, h.Endpoint, h.NameSays)
		} else {
			problem(SeverityError, ProblemMisnamed, []string{h.Endpoint}, "%s DNATs to %s, but its name belongs to a different endpoint or service port", h.Chain, h.Endpoint)
		}
	}
	sortProblems(ps)
	return ps
}

// judgeEndpoints compares the endpoints the routes reach with the slices.
func judgeEndpoints(pp *correlate.PortPath, problem func(Severity, string, []string, string, ...any)) {
	var internalSum, externalSum float64
	haveInternal, haveExternal := false, false
	for _, r := range pp.Routes {
		if len(r.Hops) == 0 {
			continue
		}
		if r.Traffic == "internal" {
			haveInternal, internalSum = true, r.ShareSum
		} else {
			haveExternal, externalSum = true, r.ShareSum
		}
	}
	var missing, extra, terminating, unexpected []string
	var emptied, orphaned []string
	inSlices := 0
	for _, p := range pp.Endpoints {
		if p.InSlices {
			inSlices++
		}
		switch {
		case p.ExpectedUnknown:
			// Topology decides, and the input cannot: neither missing
			// nor unexpected.
		case p.Expected && !p.InRules && pp.EmptyEndpointChains[p.Endpoint] != "":
			emptied = append(emptied, p.Endpoint)
		case p.Expected && !p.InRules && pp.OrphanChains[p.Endpoint] != "":
			orphaned = append(orphaned, p.Endpoint)
		case p.Expected && !p.InRules:
			missing = append(missing, p.Endpoint)
		case p.InRules && !p.InSlices:
			extra = append(extra, p.Endpoint)
		case p.InRules && !p.Expected && p.Terminating != nil && *p.Terminating:
			terminating = append(terminating, p.Endpoint)
		case p.InRules && !p.Expected && pp.LocalPolicy && !pp.NodeKnown:
			// Without the node, local-only expectations are unknown.
		case p.InRules && !p.Expected:
			unexpected = append(unexpected, p.Endpoint)
		}
	}
	for _, ep := range emptied {
		c := pp.EmptyEndpointChains[ep]
		problem(SeverityError, ProblemEmptyChain, []string{ep}, "endpoint chain %s of %s is empty (flushed by hand or by another program?): the kernel skips it, so %s gets no new connections and %s; kube-proxy rewrites it only when this Service's endpoints change or on its next full sync", c, ep, ep, emptiedShare(pp, c))
	}
	for _, ep := range orphaned {
		problem(SeverityError, ProblemRemovedJump, []string{ep}, "endpoint chain %s of %s is there, but no rule sends new connections to it any more (deleted by hand or by another program?): %s gets no new connections%s; kube-proxy restores the jump only when this Service's endpoints change or on its next full sync", pp.OrphanChains[ep], ep, ep, orphanedShare(pp))
	}
	for _, ep := range slices.Sorted(maps.Keys(pp.AffinityUnkept)) {
		problem(SeverityError, ProblemAffinityUnkept, []string{ep}, "ClientIP affinity is not kept for %s: its endpoint chain records its clients, but no rule of %s sends a client with that record back to it (deleted by hand or by another program?): a returning client is spread over the endpoints as a new one is; kube-proxy restores the rule only when this Service's endpoints change or on its next full sync", ep, pp.AffinityUnkept[ep])
	}
	// A rule that drops the traffic before it reaches kube-proxy's chains
	// is the cause; the endpoints it keeps from their connections are its
	// symptom, listed with it.
	if len(missing) > 0 && !foreignVerdict(pp) {
		problem(SeverityError, ProblemMissingEndpoints, missing, "%s in the EndpointSlices and should be programmed, but no rule reaches %s: propagation lag or a failed sync", listEndpoints(missing), them(missing))
	}
	judgeRouteOutcomes(pp, missing, problem)
	if len(extra) > 0 {
		problem(SeverityError, ProblemExtraEndpoints, extra, "%s in the rules but not in the EndpointSlices: connections may go to pods that are gone", listEndpoints(extra))
	}
	if len(terminating) > 0 {
		problem(SeverityWarning, ProblemTerminating, terminating, "%s terminating but still %s new connections", listEndpoints(terminating), gets(terminating))
	}
	if len(unexpected) > 0 {
		problem(SeverityWarning, ProblemUnexpected, unexpected, "%s %s connections although kube-proxy would not program %s (not ready, not local under a Local policy, or hinted for another zone or node)", nameEndpoints(unexpected), gets(unexpected), them(unexpected))
	}
	if pp.LocalPolicy && !pp.NodeKnown {
		problem(SeverityInfo, "", nil, "the traffic policy is Local: pass --node to check which endpoints are local")
	}
	if pp.Topology == correlate.TopologyUnknown {
		what := "the node's zone is not known: pass its Node object (kubectl get nodes -o json) with --from-objects"
		if !pp.NodeKnown {
			what = "the node is not known: pass --node"
		}
		problem(SeverityInfo, "", nil, "the EndpointSlices carry topology hints, so this node uses only some endpoints, but %s; which endpoints belong in the rules was not checked", what)
	}
	if haveInternal && math.Abs(internalSum-1) > 1e-6 && !routeOthersJudged(pp, "internal") {
		problem(SeverityError, ProblemShares, nil, "the endpoint shares of cluster-IP traffic add up to %.4f, not 1: some new connections match no endpoint", internalSum)
	}
	if haveExternal && math.Abs(externalSum-1) > 1e-6 && !routeOthersJudged(pp, "external") {
		problem(SeverityError, ProblemShares, nil, "the endpoint shares of external traffic add up to %.4f, not 1", externalSum)
	}
	expectedAny := pp.InternalExpected > 0
	rejects := hasEntry(pp.Entries, "noEndpoints") || hasEntry(pp.Entries, "noLocalEndpoints")
	if !expectedAny && !haveInternal && !rejects && len(pp.Entries) > 0 {
		problem(SeverityWarning, ProblemNoReject, nil, "the service has no usable endpoints but no \"has no endpoints\" reject rule")
	}
	if expectedAny && hasEntry(pp.Entries, "noEndpoints") {
		problem(SeverityError, ProblemRejectedWithReady, nil, "connections are rejected as \"no endpoints\" although the EndpointSlices have ready endpoints: kube-proxy has not caught up")
	}
}

// judgeRouteOutcomes judges what the walks found besides endpoints: new
// connections dropped or rejected by a rule kube-proxy does not write, or
// by kube-proxy's own while endpoints are there for that traffic;
// external traffic of a Cluster policy that is not masqueraded.
func judgeRouteOutcomes(pp *correlate.PortPath, kept []string, problem func(Severity, string, []string, string, ...any)) {
	for _, r := range pp.Routes {
		for _, o := range r.Other {
			if o.Verdict != "drop" && o.Verdict != "reject" || o.Share < 1e-9 {
				continue
			}
			verb := verdictVerb(o.Verdict)
			who := routeName(r)
			switch {
			case !o.KubeProxys:
				msg := fmt.Sprintf("%.1f%% of new connections to %s are %s by %s, a rule kube-proxy does not write: %s", o.Share*100, who, verb, o.Chain, o.Rule)
				if len(kept) > 0 {
					msg += fmt.Sprintf("; so %s no new connections from there", nameEndpoints(kept)+" "+gets(kept))
				}
				problem(SeverityError, ProblemDropped, kept, "%s", msg)
			case judgedChain(pp, o.Via):
				// Its cause, the emptied endpoint chain, is judged on its own.
			case len(pp.OrphanChains) > 0 && len(r.Hops) == 0 && o.Via == "":
				// No endpoint left to go to, each of them judged on its
				// own (orphanedShare says where its connections go).
			case routeExpectsEndpoints(pp, r):
				problem(SeverityError, ProblemDropped, nil, "%.1f%% of new connections to %s are %s by kube-proxy's %s although endpoints are there for them: kube-proxy has not caught up (%s)", o.Share*100, who, verb, o.Chain, o.Rule)
			}
		}
		if r.Traffic == "external" && r.From == "outside" && !pp.LocalPolicy && walkedDNAT(r) && !r.Masquerade {
			problem(SeverityWarning, ProblemNoMasquerade, nil, "external connections to %s are not masqueraded although the external policy is Cluster: the endpoint answers the client from its own address, which the client does not expect (the masquerade mark set and the one POSTROUTING tests differ? see masq)", r.Address)
		}
	}
}

// orphanedShare says, when no route reaches any endpoint any more, where
// the new connections go instead.
func orphanedShare(pp *correlate.PortPath) string {
	for _, r := range pp.Routes {
		if len(r.Hops) > 0 {
			return ""
		}
	}
	lost := lostShares(pp, func(o correlate.RouteOutcome) bool { return o.Via == "" })
	if len(lost) == 0 {
		return ""
	}
	return " (with no endpoint reached, " + strings.Join(lost, "; ") + ")"
}

// judgedChain: chain is an endpoint chain found emptied, whose problem
// names what becomes of its share.
func judgedChain(pp *correlate.PortPath, chain string) bool {
	for _, c := range pp.EmptyEndpointChains {
		if chain != "" && c == chain {
			return true
		}
	}
	return false
}

// emptiedShare says where the share of an emptied endpoint chain goes, as
// the walks found it: down the rest of iptables' cascade to the next
// endpoint, or (nftables' vmap goto, the last of a cascade) out of the
// service's chains to a verdict of its own.
func emptiedShare(pp *correlate.PortPath, chain string) string {
	lost := lostShares(pp, func(o correlate.RouteOutcome) bool { return o.Via == chain })
	if len(lost) == 0 {
		return "its share goes to the next endpoint"
	}
	return "its share is lost: " + strings.Join(lost, "; ")
}

// lostShares says, for the routes' outcomes other than a DNAT that keep
// picks, which share of new connections gets which verdict where.
func lostShares(pp *correlate.PortPath, keep func(correlate.RouteOutcome) bool) []string {
	var lost []string
	for _, r := range pp.Routes {
		for _, o := range r.Other {
			if o.Share < 1e-9 || !keep(o) {
				continue
			}
			where := " by " + o.Chain
			if o.Verdict == "accept" && o.Rule == "" {
				where = "" // the end of the tables: nobody decided
			}
			lost = append(lost, fmt.Sprintf("%.1f%% of new connections to %s are %s%s", o.Share*100, routeName(r), verdictVerb(o.Verdict), where))
		}
	}
	return lost
}

// verdictVerb says a verdict as what happens to the connections.
func verdictVerb(v string) string {
	if w, ok := map[string]string{"drop": "dropped", "reject": "rejected", "accept": "accepted un-DNATed"}[v]; ok {
		return w
	}
	return v
}

// walkedDNAT: some of the route's endpoints were reached by a DNAT the
// walk saw (not only named by their chains).
func walkedDNAT(r correlate.Route) bool {
	for _, h := range r.Hops {
		if !h.ByName {
			return true
		}
	}
	return false
}

// foreignVerdict: some route's connections are dropped or rejected by a
// rule kube-proxy does not write.
func foreignVerdict(pp *correlate.PortPath) bool {
	for _, r := range pp.Routes {
		for _, o := range r.Other {
			if (o.Verdict == "drop" || o.Verdict == "reject") && !o.KubeProxys && o.Share > 1e-9 {
				return true
			}
		}
	}
	return false
}

// routeOthersJudged: the route's shares fall short because of outcomes
// judged on their own (a drop, a reject), not because rules are missing.
func routeOthersJudged(pp *correlate.PortPath, traffic string) bool {
	for _, r := range pp.Routes {
		if r.Traffic != traffic {
			continue
		}
		for _, o := range r.Other {
			if o.Verdict == "drop" || o.Verdict == "reject" {
				return true
			}
		}
	}
	return false
}

// routeExpectsEndpoints: kube-proxy should send this route's traffic to
// endpoints (cluster traffic when some are expected; external traffic
// from outside unless a Local policy has none here).
func routeExpectsEndpoints(pp *correlate.PortPath, r correlate.Route) bool {
	if r.Traffic == "internal" {
		return pp.InternalExpected > 0
	}
	for _, ep := range pp.Endpoints {
		if ep.Expected && (!pp.LocalPolicy || ep.Local || r.From != "outside") {
			return true
		}
	}
	return false
}

// routeName: "the cluster IP 10.96.10.1:80 (from a pod)".
func routeName(r correlate.Route) string {
	name := map[string]string{"clusterIP": "the cluster IP", "nodePort": "the node port", "externalIP": "the external IP", "loadBalancerIP": "the load-balancer IP"}[r.Entry]
	if name == "" {
		name = r.Traffic + " traffic to"
	}
	name += " " + r.Address
	switch r.From {
	case "pod":
		return name + " (from a pod)"
	case "node":
		return name + " (from the node)"
	}
	return name
}

func hasEntry(entries []correlate.Entry, kind string) bool {
	for _, e := range entries {
		if e.Kind == kind {
			return true
		}
	}
	return false
}

func sortProblems(ps []Problem) {
	sort.SliceStable(ps, func(i, j int) bool { return ps[i].Severity.rank() < ps[j].Severity.rank() })
}

// listEndpoints names a few endpoints: "endpoint 10.0.0.1:80 is" or
// "4 endpoints (10.0.0.1:80, 10.0.0.2:80, 10.0.0.3:80 and 1 more) are".
func listEndpoints(eps []string) string {
	if len(eps) == 1 {
		return nameEndpoints(eps) + " is"
	}
	return nameEndpoints(eps) + " are"
}

// nameEndpoints is listEndpoints without the verb.
func nameEndpoints(eps []string) string {
	if len(eps) == 1 {
		return "endpoint " + eps[0]
	}
	return fmt.Sprintf("%d endpoints (%s)", len(eps), fewOf(eps))
}

// fewOf names the first three items and counts the rest: "a, b, c and 2
// more".
func fewOf(items []string) string {
	if len(items) <= 3 {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:3], ", "), len(items)-3)
}

func them(eps []string) string {
	if len(eps) == 1 {
		return "it"
	}
	return "them"
}

func gets(eps []string) string {
	if len(eps) == 1 {
		return "gets"
	}
	return "get"
}

// ProblemDeletedService: the Service is gone from the API, its rules are
// not.
const ProblemDeletedService = "deletedService"

// ExplainFormerService explains a Service the API objects no longer hold
// but whose chains the rules still have (a deleted Service still routed):
// the Service is rebuilt from its stale chains (correlate.FormerService)
// and its path walked like any other. ok is false when no stale chain
// matches: the Service is simply not there.
func ExplainFormerService(n *Node, m correlate.FormerServiceMatch, port string) (rep *ServiceExplanation, ok bool) {
	if n.Objects == nil {
		return nil, false
	}
	svc := correlate.FormerService(correlate.FindStale(n.Ruleset, n.attribution(), n.Objects), m)
	if svc == nil {
		return nil, false
	}
	with := *n
	with.res = nil // the rebuilt Service owns its chains again
	with.Objects = &correlate.Objects{Services: append(append([]*corev1.Service{}, n.Objects.Services...), svc),
		EndpointSlices: n.Objects.EndpointSlices, Other: n.Objects.Other}
	ex, err := correlate.Explain(with.Ruleset, with.Objects, correlate.ExplainOptions{Namespace: svc.Namespace, Name: svc.Name, Port: port, Node: with.nodeView()})
	if err != nil {
		return nil, false
	}
	rep, unchecked := judgeOn(&with, ex)
	rep.APIVersion, rep.Kind, rep.Deleted = APIVersion, "ServiceExplanation", true
	for i := range rep.Ports {
		pp := &rep.Ports[i]
		kept := []Problem{{Severity: SeverityError, Kind: ProblemDeletedService,
			Message: fmt.Sprintf("Service %s/%s is not in the API objects (deleted), but the %s rules still route %s: kube-proxy removes them at its next sync, so it has not synced since (see triage for why)", svc.Namespace, svc.Name, pp.Family, pp.ServicePort)}}
		for _, p := range pp.Problems {
			if p.Kind != ProblemNoEndpoints && p.Kind != ProblemNoneReady {
				kept = append(kept, p) // its endpoints went with it: no pods to look at
			}
		}
		pp.Problems = kept
	}
	rep.NotChecked = append(explainGaps(&with, ex), unchecked...)
	addExplainConntrack(n, explainConntrackFacts(n), rep) // n: the deleted Service's entries are the deleted ones
	rep.Status = verdict(true, rep.NotChecked)
	return rep, true
}
