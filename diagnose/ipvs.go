package diagnose

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/inspect/ipvs"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// IPVS mode's own verdicts: each Service port's virtual servers and their
// real servers against the EndpointSlices, the virtual servers no Service
// owns, and the scheduler and persistence against the configuration and
// sessionAffinity. What kube-proxy v1.37.2 programs: see correlate's
// ipvs.go and ipvs_explain.go.

// Problem kinds of IPVS mode (besides the shared ones: missing, extra,
// unexpected and terminating endpoints, no endpoints).
const (
	ProblemNoVirtualServer   = "noVirtualServer"   // a frontend of a Service has no virtual server
	ProblemWeightZero        = "weightZero"        // an endpoint in use has weight 0: no new connections
	ProblemDraining          = "draining"          // a removed TCP endpoint at weight 0 with connections (informational)
	ProblemDrainedNotRemoved = "drainedNotRemoved" // a weight-0 real server that should be gone
	ProblemWeight            = "weight"            // a weight kube-proxy never sets
	ProblemForward           = "forward"           // a forwarding method other than Masq
	ProblemScheduler         = "scheduler"         // the scheduler is not the configured one
	ProblemPersistence       = "persistence"       // persistence does not match sessionAffinity
)

// IPVSReport is a node's IPVS table judged.
type IPVSReport struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Node       string `json:"node,omitempty"`
	// Read: an IPVS table was read; Format is the form(s) it was read in.
	Read   bool                 `json:"read"`
	Format string               `json:"format,omitempty"`
	Counts correlate.IPVSCounts `json:"counts"`
	Ports  []IPVSPortReport     `json:"ports"`
	// Unowned are the virtual servers no current Service port has.
	Unowned []IPVSUnowned `json:"unowned"`
	// IPSets are kube-proxy's ipsets joined with the Services (nil when
	// none was read; ipvs_sets.go).
	IPSets     *correlate.IPSetFacts `json:"ipsets,omitempty"`
	NotChecked []Gap                 `json:"notChecked"`

	ex *correlate.IPVSExplanation
}

// IPVSPortReport is one Service port in one family.
type IPVSPortReport struct {
	ServicePort string               `json:"servicePort"`
	Namespace   string               `json:"namespace"`
	Name        string               `json:"name"`
	Family      kubeproxy.Family     `json:"family"`
	Frontends   []IPVSFrontendReport `json:"frontends"`
	// Endpoints are the port's endpoints of this family, each with why
	// kube-proxy uses it here or not.
	Endpoints []correlate.IPVSEndpoint `json:"endpoints"`
	Problems  []Problem                `json:"problems"`
	// LocalPolicy: a Local traffic policy applies to some frontend.
	LocalPolicy bool `json:"localPolicy,omitempty"`
}

// IPVSFrontendReport is one frontend and its virtual server as read.
type IPVSFrontendReport struct {
	Kind string `json:"kind"`
	Addr string `json:"addr"`
	// VirtualServer is the virtual server as ipvsadm names it ("TCP
	// 10.96.0.1:443 rr persistent 10800"); "" when there is none.
	VirtualServer string                     `json:"virtualServer"`
	Local         bool                       `json:"local,omitempty"`
	Inferred      bool                       `json:"inferred,omitempty"`
	RealServers   []correlate.IPVSRealServer `json:"realServers"`
	Expected      []netip.AddrPort           `json:"expected"`
}

// IPVSUnowned is a virtual server no current Service port has.
type IPVSUnowned struct {
	VirtualServer string   `json:"virtualServer"`
	RealServers   int      `json:"realServers"`
	Severity      Severity `json:"severity"`
	// What: stale (a deleted Service's or port's), probe (kube-proxy's
	// startup probe), or loopbackNodePort (an older kube-proxy's).
	What    string `json:"what"`
	Message string `json:"message"`
}

// What an unowned virtual server is.
const (
	UnownedStale            = "stale"
	UnownedProbe            = "probe"
	UnownedLoopbackNodePort = "loopbackNodePort"
)

// IPVS judges the node's IPVS table; Read is false when none was read.
// It is built once per Node and shared: callers only read it.
func IPVS(n *Node) *IPVSReport {
	if n.ipvs == nil {
		n.ipvs = buildIPVS(n)
	}
	return n.ipvs
}

func buildIPVS(n *Node) *IPVSReport {
	rep := &IPVSReport{APIVersion: APIVersion, Kind: "IPVS", Node: n.Name, Ports: []IPVSPortReport{}, Unowned: []IPVSUnowned{}, NotChecked: []Gap{}}
	if !n.Ruleset.HasIPVS() {
		rep.NotChecked = append(rep.NotChecked, ipvsNotRead())
		return rep
	}
	t := n.Ruleset.IPVS.Table
	rep.Read, rep.Format = true, string(t.Format)
	in := correlate.IPVSExplainInput{IPVSInput: correlate.IPVSInput{Objects: n.Objects, NodeIPs: nodeAddrs(n), Table: t}, Node: n.nodeView()}
	if n.Config != nil {
		in.NodePortAddresses = n.Config.NodePortAddresses
	}
	ex := correlate.ExplainIPVS(in)
	rep.ex, rep.Counts = ex, ex.Facts.Counts
	for _, p := range ex.Ports {
		if !n.selected(p.ServicePort) {
			continue
		}
		rep.Ports = append(rep.Ports, judgeIPVSPort(n, ex, p))
	}
	rep.Unowned = unownedVirtualServers(n, ex)
	rep.judgeIPSets(n)
	rep.judgeBindings(n)
	rep.NotChecked = append(rep.NotChecked, ipvsReportGaps(n, ex)...)
	return rep
}

func ipvsNotRead() Gap {
	return Gap{Check: "the IPVS virtual servers and real servers of every Service", Reason: "no IPVS table was read (kube-proxy runs in IPVS mode: its iptables rules do not name the endpoints)",
		Remedy: "--from-dump with cat /proc/net/ip_vs or ipvsadm -Ln from the node (or --node on the cluster)"}
}

// ipvsIssue is a problem of one frontend, merged with the same problem of
// the port's other frontends into one Problem naming them all.
type ipvsIssue struct {
	sev    Severity
	kind   string
	eps    []string
	format string // with {vs} where the frontends go
}

func judgeIPVSPort(n *Node, ex *correlate.IPVSExplanation, p correlate.IPVSPort) IPVSPortReport {
	r := IPVSPortReport{ServicePort: p.ServicePort, Namespace: p.Namespace, Name: p.Name, Family: p.Family, Frontends: []IPVSFrontendReport{},
		Endpoints: p.Endpoints, Problems: []Problem{}}
	var issues []ipvsIssue
	var where [][]string // per issue, the frontends
	note := func(is ipvsIssue, fe string) {
		for i, have := range issues {
			if have.sev == is.sev && have.kind == is.kind && have.format == is.format && slices.Equal(have.eps, is.eps) {
				where[i] = append(where[i], fe)
				return
			}
		}
		issues, where = append(issues, is), append(where, []string{fe})
	}
	for _, fe := range p.Frontends {
		r.LocalPolicy = r.LocalPolicy || fe.Local
		fr := IPVSFrontendReport{Kind: fe.Kind, Addr: fe.Addr.String(), Local: fe.Local, Inferred: fe.Inferred, RealServers: []correlate.IPVSRealServer{}, Expected: fe.Expected}
		name := fe.Kind + " " + fe.Addr.String()
		if fe.VirtualServer < 0 {
			if !ex.Facts.Incomplete {
				note(ipvsIssue{SeverityError, ProblemNoVirtualServer, nil, "no IPVS virtual server for {vs}: kube-proxy has not programmed it on this node (is kube-proxy running and syncing?)"}, name)
			}
			r.Frontends = append(r.Frontends, fr)
			continue
		}
		vs := &ex.Facts.VirtualServers[fe.VirtualServer]
		fr.VirtualServer, fr.RealServers = virtualServerName(vs), vs.RealServers
		for _, is := range judgeVirtualServer(n, p, fe, vs, ex.Facts.Incomplete) {
			note(is, name)
		}
		r.Frontends = append(r.Frontends, fr)
	}
	for i, is := range issues {
		r.Problems = append(r.Problems, Problem{Severity: is.sev, Kind: is.kind, Endpoints: is.eps,
			Message: strings.ReplaceAll(is.format, "{vs}", joinFrontends(where[i]))})
	}
	r.Problems = append(r.Problems, ipvsEndpointNotes(p)...)
	sortProblems(r.Problems)
	return r
}

func joinFrontends(fes []string) string {
	if len(fes) <= 3 {
		return strings.Join(fes, ", ")
	}
	return fmt.Sprintf("%s and %d more frontends", strings.Join(fes[:3], ", "), len(fes)-3)
}

// judgeVirtualServer judges one frontend's virtual server: its settings,
// then its real servers against the endpoints kube-proxy uses there.
func judgeVirtualServer(n *Node, p correlate.IPVSPort, fe correlate.IPVSFrontend, vs *correlate.IPVSVirtualServer, incomplete bool) []ipvsIssue {
	var out []ipvsIssue
	if vs.Scheduler != "" { // the --stats and --rate forms show neither
		if n.Config != nil && vs.Scheduler != n.Config.IPVSScheduler {
			out = append(out, ipvsIssue{SeverityWarning, ProblemScheduler, nil, fmt.Sprintf("{vs} schedules with %s, but kube-proxy is configured with %s: kube-proxy updates a virtual server whose scheduler differs on its next sync, so the configuration changed without a restart or another program changed it", vs.Scheduler, n.Config.IPVSScheduler)})
		}
		switch {
		case p.AffinitySeconds > 0 && vs.Persistence == 0:
			out = append(out, ipvsIssue{SeverityWarning, ProblemPersistence, nil, fmt.Sprintf("the Service has ClientIP session affinity (%d s), but {vs} is not persistent: a returning client may go to another endpoint; kube-proxy sets it on its next sync", p.AffinitySeconds)})
		case vs.Persistence > 0 && p.AffinitySeconds == 0:
			out = append(out, ipvsIssue{SeverityWarning, ProblemPersistence, nil, fmt.Sprintf("{vs} is persistent (%d s), but the Service has no session affinity: clients stick to one endpoint", vs.Persistence)})
		case vs.Persistence > 0 && int64(vs.Persistence) != int64(p.AffinitySeconds):
			out = append(out, ipvsIssue{SeverityWarning, ProblemPersistence, nil, fmt.Sprintf("{vs} is persistent for %d s, but the Service's ClientIP affinity is %d s", vs.Persistence, p.AffinitySeconds)})
		}
	}
	var missing, extra, unexpected, terminating, weight0, drainingKnown, drainingUnknown, gone, oddWeight, oddForward []string
	for _, ap := range fe.Missing {
		if !incomplete { // a cut table may have lost them: a gap says so
			missing = append(missing, ap.String())
		}
	}
	for _, rs := range vs.RealServers {
		ep := rs.Addr.String()
		if rs.Forward != "" && rs.Forward != string(ipvs.ForwardMasq) {
			oddForward = append(oddForward, ep+" ("+rs.Forward+")")
		}
		switch {
		case fe.Unknown && rs.Endpoint:
			// which endpoints this frontend uses cannot be told (a gap)
		case rs.Expected && rs.Weight == 0:
			weight0 = append(weight0, ep)
		case rs.Expected && rs.Weight != 1:
			oddWeight = append(oddWeight, fmt.Sprintf("%s (weight %d)", ep, rs.Weight))
		case rs.Expected:
		case rs.Weight == 0 && vs.Protocol != "TCP":
			gone = append(gone, ep)
		case rs.Weight == 0 && rs.ActiveConn < 0:
			drainingUnknown = append(drainingUnknown, ep)
		case rs.Weight == 0 && rs.ActiveConn+rs.InActConn > 0:
			drainingKnown = append(drainingKnown, fmt.Sprintf("%s (%d active, %d inactive)", ep, rs.ActiveConn, rs.InActConn))
		case rs.Weight == 0:
			gone = append(gone, ep)
		case !rs.Endpoint:
			extra = append(extra, ep)
		case endpointTerminating(p, rs.Addr):
			terminating = append(terminating, ep)
		default:
			unexpected = append(unexpected, ep)
		}
	}
	add := func(sev Severity, kind string, eps []string, format string, args ...any) {
		if len(eps) > 0 {
			out = append(out, ipvsIssue{sev, kind, eps, fmt.Sprintf(format, args...)})
		}
	}
	add(SeverityError, ProblemMissingEndpoints, missing, "%s in the EndpointSlices and should be %s of {vs}, but %s not: propagation lag or a failed sync", listEndpoints(missing), realServersWord(missing), isAre(len(missing)))
	add(SeverityError, ProblemExtraEndpoints, extra, "%s of {vs} %s not in the EndpointSlices: connections may go to pods that are gone", realServersOf(extra), isAre(len(extra)))
	add(SeverityError, ProblemWeightZero, weight0, "%s of {vs} %s at weight 0, so %s no new connections although kube-proxy uses %s here (it sets weight 1): kube-proxy has not caught up since %s came back", realServersOf(weight0), isAre(len(weight0)), gets(weight0), them(weight0), them(weight0))
	add(SeverityWarning, ProblemTerminating, terminating, "%s terminating but still %s of {vs} at a weight above 0: %s new connections", listEndpoints(terminating), realServersWord(terminating), gets(terminating))
	add(SeverityWarning, ProblemUnexpected, unexpected, "%s of {vs} %s there although kube-proxy would not use %s here (not ready, not local under a Local policy, or hinted for another zone or node)", realServersOf(unexpected), isAre(len(unexpected)), them(unexpected))
	add(SeverityInfo, ProblemDraining, drainingKnown, "%s of {vs} %s at weight 0 with connections: a removed endpoint draining (graceful termination) gets no new connections, and kube-proxy removes it once they close", realServersOf(drainingKnown), isAre(len(drainingKnown)))
	add(SeverityInfo, ProblemDraining, drainingUnknown, "%s of {vs} %s at weight 0: a removed endpoint draining, or one that should be gone; this form shows no connection counts (read /proc/net/ip_vs or ipvsadm -Ln to tell)", realServersOf(drainingUnknown), isAre(len(drainingUnknown)))
	add(SeverityWarning, ProblemDrainedNotRemoved, gone, "%s of {vs} %s at weight 0 %s: kube-proxy removes a drained TCP real server within a minute and a UDP or SCTP one at once, so its graceful termination is stuck or kube-proxy is not running", realServersOf(gone), isAre(len(gone)), noConnsWhy(vs.Protocol))
	add(SeverityWarning, ProblemWeight, oddWeight, "%s of {vs}: kube-proxy sets weight 1, so another program changed %s", realServersOf(oddWeight), them(oddWeight))
	add(SeverityWarning, ProblemForward, oddForward, "%s of {vs} %s not forwarded with Masq (NAT), the only method kube-proxy uses: another program changed %s", realServersOf(oddForward), isAre(len(oddForward)), them(oddForward))
	return out
}

func noConnsWhy(proto string) string {
	if proto == "TCP" {
		return "and no connections"
	}
	return "(" + proto + ")"
}

func realServersOf(eps []string) string {
	if len(eps) == 1 {
		return "real server " + eps[0]
	}
	return fmt.Sprintf("%d real servers (%s)", len(eps), fewOf(eps))
}

func realServersWord(eps []string) string {
	if len(eps) == 1 {
		return "a real server"
	}
	return "real servers"
}

func endpointTerminating(p correlate.IPVSPort, ap netip.AddrPort) bool {
	for _, e := range p.Endpoints {
		if e.Addr == ap {
			return strings.HasPrefix(e.Why, "terminating")
		}
	}
	return false
}

// ipvsEndpointNotes say what the EndpointSlices themselves hold, when no
// endpoint is usable: the outage is not the rules' fault.
func ipvsEndpointNotes(p correlate.IPVSPort) []Problem {
	for _, fe := range p.Frontends {
		if len(fe.Expected) > 0 || fe.Unknown {
			return nil
		}
	}
	if len(p.Endpoints) == 0 {
		return []Problem{{Severity: SeverityInfo, Kind: ProblemNoEndpoints, Message: "the EndpointSlices list no endpoints: its virtual servers have no real server, so connections to them reach no endpoint"}}
	}
	return []Problem{{Severity: SeverityWarning, Kind: ProblemNoneReady, Message: fmt.Sprintf("none of its %d endpoints is ready or serving: its virtual servers have no real server to send connections to (the pods' readiness, not the rules)", len(p.Endpoints))}}
}

func virtualServerName(vs *correlate.IPVSVirtualServer) string {
	s := vs.Protocol + " " + vs.Addr.String()
	if vs.FWMark != 0 {
		s = fmt.Sprintf("FWM %d", vs.FWMark)
	}
	if vs.Scheduler != "" {
		s += " " + vs.Scheduler
	}
	if vs.Persistence > 0 {
		s += fmt.Sprintf(" persistent %d", vs.Persistence)
	}
	return s
}

// unownedVirtualServers judges the virtual servers no Service port has.
func unownedVirtualServers(n *Node, ex *correlate.IPVSExplanation) []IPVSUnowned {
	out := []IPVSUnowned{}
	nodePorts := map[string]bool{}
	if n.Objects != nil {
		for _, sp := range n.Objects.ServicePorts() {
			if sp.NodePort > 0 {
				nodePorts[fmt.Sprintf("%s/%d", strings.ToUpper(sp.Proto()), sp.NodePort)] = true
			}
		}
	}
	for i := range ex.Facts.VirtualServers {
		vs := &ex.Facts.VirtualServers[i]
		u := IPVSUnowned{VirtualServer: virtualServerName(vs), RealServers: len(vs.RealServers)}
		switch {
		case vs.Kind == correlate.VirtualServiceProbe:
			u.What, u.Severity = UnownedProbe, SeverityInfo
			u.Message = "kube-proxy's startup probe (it creates and deletes this virtual server to test IPVS, #114669): harmless"
		case vs.Kind != correlate.VirtualServiceUnattributed:
			continue
		case vs.Addr.Addr().IsLoopback() && nodePorts[fmt.Sprintf("%s/%d", vs.Protocol, vs.Addr.Port())]:
			u.What, u.Severity = UnownedLoopbackNodePort, SeverityInfo
			u.Message = "a NodePort on loopback, which only older kube-proxy versions create: this node's kube-proxy is older than the rules this tool knows best, or it left them behind when it was upgraded"
		case n.Objects == nil:
			continue
		default:
			u.What, u.Severity = UnownedStale, SeverityWarning
			u.Message = fmt.Sprintf("no current Service port has this virtual server (a deleted Service's or port's): kube-proxy removes the ones it no longer needs on every sync, so it is not syncing, or another program made it (#78421); connections to it still go to its %d real server%s", len(vs.RealServers), plural(len(vs.RealServers)))
		}
		out = append(out, u)
	}
	return out
}

// ipvsReportGaps say what the IPVS verdicts could not check.
func ipvsReportGaps(n *Node, ex *correlate.IPVSExplanation) []Gap {
	var out []Gap
	if ex.Facts.Incomplete {
		out = append(out, Gap{Check: "virtual servers and real servers missing from the table", Reason: "the IPVS table was read only in part (a cap, or a cut paste)", Remedy: "the whole cat /proc/net/ip_vs"})
	}
	if n.Config == nil {
		out = append(out, Gap{Check: "each virtual server's scheduler against kube-proxy's ipvs.scheduler", Reason: "kube-proxy's configuration was not given", Remedy: "--from-config"})
	}
	unknown := 0
	for _, p := range ex.Ports {
		for _, fe := range p.Frontends {
			if fe.Unknown {
				unknown++
				break
			}
		}
	}
	if unknown > 0 {
		out = append(out, Gap{Check: fmt.Sprintf("the real servers of %d Service port%s whose endpoints depend on the node (Local policy) or its zone (topology hints)", unknown, plural(unknown)),
			Reason: "the node or its zone is not known", Remedy: "--node NAME with its Node object in --from-objects"})
	}
	if len(ex.NodeIPs) == 0 && hasNodePorts(n) {
		out = append(out, Gap{Check: "NodePort virtual servers missing on the node's addresses", Reason: "the node's addresses are not known", Remedy: "--node NAME with its Node object, or --node-ip"})
	}
	return out
}

func hasNodePorts(n *Node) bool {
	if n.Objects == nil {
		return false
	}
	for _, sp := range n.Objects.ServicePorts() {
		if sp.Proxied && sp.NodePort > 0 {
			return true
		}
	}
	return false
}
