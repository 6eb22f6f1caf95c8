package diagnose

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"time"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/inspect/conntrack"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// ConntrackInputs are a node's conntrack readings; each may be missing,
// and the report says what that leaves unchecked.
type ConntrackInputs struct {
	// Table is the conntrack table as read (filtered and capped on the
	// node); nil when not read.
	Table *conntrack.Table
	// Before and After are two reads of /proc/net/stat/nf_conntrack,
	// Interval apart.
	Before, After *conntrack.Stats
	Interval      time.Duration
	// Sysctls are the settings bundle (conntrack.BundleCommand).
	Sysctls *conntrack.Sysctls
	// ServiceCIDRs, when known besides the ServiceCIDR objects, tell a
	// deleted Service's address (correlate.ConntrackInput).
	ServiceCIDRs []netip.Prefix
	// CPUs is the node's CPU count; 0: the Node object's capacity.
	CPUs int
	// MaxPerCore and Min are kube-proxy's conntrack.maxPerCore and
	// conntrack.min; nil MaxPerCore: not known, nf_conntrack_max is not
	// judged (kind, for one, sets maxPerCore 0: kube-proxy leaves it).
	MaxPerCore, Min *int32
	// LocalhostNodePorts, when set, says whether the rules accept
	// localhost NodePorts; else kube-proxy's configuration, else the nat
	// table (LocalhostNodePortsFromDump) tell.
	LocalhostNodePorts *bool
}

// ConntrackReport is the conntrack diagnosis of one node.
type ConntrackReport struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Node       string `json:"node,omitempty"`
	// Facts are the table joined with the Services (nil without a table).
	Facts    *correlate.ConntrackFacts `json:"facts,omitempty"`
	Problems []ConntrackProblem        `json:"problems"`
	// Summary is the report in a few numbers (triage's line, a sweep's
	// columns).
	Summary ConntrackSummary `json:"summary"`
	// Reconciler is kube-proxy's conntrack cleanup by its metrics (nil
	// when no metrics were given; empty: it has not run).
	Reconciler []ConntrackReconciler `json:"reconciler"`
	// Status: problems when an error or warning was found; incomplete
	// when an input was missing (NotChecked).
	Status     Status `json:"status"`
	NotChecked []Gap  `json:"notChecked"`
}

// ConntrackProblem is one finding: what shows it, what it breaks, how to
// fix it.
type ConntrackProblem struct {
	Severity Severity `json:"severity"`
	Kind     string   `json:"kind"` // Conntrack*
	Subject  string   `json:"subject,omitempty"`
	Message  string   `json:"message"`
	// Evidence is what was read; Consequence what it breaks.
	Evidence    string `json:"evidence"`
	Consequence string `json:"consequence"`
	Remedy      string `json:"remedy"`
	// Commands clear stale entries: printed, never run.
	Commands []string `json:"commands,omitempty"`
}

// Conntrack problem kinds.
const (
	ConntrackStale         = "staleUDP"             // kube-proxy will not clean them
	ConntrackStalePending  = "staleUDPPending"      // kube-proxy will, at its next cleanup
	ConntrackStaleTCP      = "staleTCP"             // TCP/SCTP entries to gone endpoints
	ConntrackNoServicePort = "noServicePort"        // entries to a cluster IP on no port of it
	ConntrackTableFull     = "tableFull"            // count ≥ max
	ConntrackTableNearFull = "tableNearFull"        // count ≥ 90% of max
	ConntrackDrops         = "drops"                // insert_failed/drop grew between two reads
	ConntrackEarlyDrops    = "earlyDrops"           // early_drop grew
	ConntrackMaxLowered    = "maxLowered"           // max below kube-proxy's target
	ConntrackForwarding    = "forwardingOff"        // ip_forward / IPv6 forwarding 0
	ConntrackBridgeNF      = "bridgeNFOff"          // bridge-nf-call-ip(6)tables 0 with br_netfilter
	ConntrackRouteLocalnet = "routeLocalnetOff"     // route_localnet 0, localhost NodePorts on
	ConntrackPortRange     = "nodePortInLocalPorts" // #111823
	ConntrackTCPBeLiberal  = "tcpBeLiberal"         // not as kube-proxy's config sets it
	ConntrackTableCapped   = "tableCapped"          // the read left entries out
)

// Conntrack diagnoses the node's conntrack table, its counters and the
// kernel settings Services depend on.
func Conntrack(n *Node, in ConntrackInputs) *ConntrackReport {
	rep := &ConntrackReport{APIVersion: APIVersion, Kind: "ConntrackReport", Node: n.Name, Problems: []ConntrackProblem{}, NotChecked: []Gap{}}
	mode := conntrackMode(n)
	if in.Table == nil {
		rep.NotChecked = append(rep.NotChecked, Gap{Check: "stale conntrack entries of Services (UDP to gone endpoints, deleted Services)",
			Reason: "the conntrack table was not read", Remedy: "--from-conntrack (cat /proc/net/nf_conntrack on the node, or conntrack -L -o extended)"})
	} else {
		runs, known := reconciler(n)
		if known {
			rep.Reconciler = append([]ConntrackReconciler{}, runs...)
		}
		rep.Facts = correlate.FindConntrack(correlate.ConntrackInput{Objects: n.Objects, NodeIPs: nodeAddrs(n), Mode: mode,
			ServiceCIDRs: in.ServiceCIDRs, Table: in.Table})
		rep.staleProblems(n)
		rep.cappedGap(in.Table)
		if n.Objects == nil {
			rep.NotChecked = append(rep.NotChecked, Gap{Check: "which conntrack entries target a Service, and whether their endpoints serve",
				Reason: "no API objects were given", Remedy: "--from-objects (kubectl get services,endpointslices,nodes -A -o json)"})
		}
	}
	rep.cleanupVersionGap(n)
	rep.pressure(n, in)
	rep.settings(n, in, mode)
	rep.summarize(in)
	sort.SliceStable(rep.Problems, func(i, j int) bool { return rep.Problems[i].Severity.rank() < rep.Problems[j].Severity.rank() })
	problems := false
	for _, p := range rep.Problems {
		problems = problems || p.Severity != SeverityInfo
	}
	rep.Status = verdict(problems, rep.NotChecked)
	return rep
}

// conntrackMode is kube-proxy's mode: its configuration's, else the rules'.
func conntrackMode(n *Node) kubeproxy.Mode {
	if n.Config != nil && n.Config.Mode != "" {
		return n.Config.Mode
	}
	if n.Ruleset == nil {
		return kubeproxy.ModeUnknown
	}
	return DetectMode(n.Ruleset).Detected
}

func nodeAddrs(n *Node) []netip.Addr {
	var out []netip.Addr
	for _, s := range n.nodeView().IPs {
		if a, err := netip.ParseAddr(s); err == nil {
			out = append(out, a)
		}
	}
	return out
}

func (rep *ConntrackReport) add(p ConntrackProblem) { rep.Problems = append(rep.Problems, p) }

func (rep *ConntrackReport) cappedGap(t *conntrack.Table) {
	if !t.Truncated.Incomplete && !t.Truncated.Unread && t.Truncated.LongLines == 0 {
		return
	}
	what := []string{}
	if t.Truncated.EntriesLeftOut > 0 {
		what = append(what, fmt.Sprintf("%d entries over the cap", t.Truncated.EntriesLeftOut))
	}
	if t.Truncated.Unread {
		what = append(what, fmt.Sprintf("everything after %d bytes", t.Truncated.BytesRead))
	}
	if t.Truncated.LongLines > 0 {
		what = append(what, fmt.Sprintf("%d lines too long", t.Truncated.LongLines))
	}
	if len(what) == 0 { // capped on the node (grep -m): it stopped there, uncounted
		left := "how many more the table holds is unknown"
		if n := int64(len(t.Entries)); t.Count >= n {
			left = fmt.Sprintf("up to %d more of the table's %d entries were not read", t.Count-n, t.Count)
		}
		what = append(what, fmt.Sprintf("the read stopped at its cap, %d entries; %s", len(t.Entries), left))
	}
	rep.NotChecked = append(rep.NotChecked, Gap{Check: "the conntrack entries the read left out (INCOMPLETE: " + strings.Join(what, ", ") + ")",
		Reason: "the table was read capped", Remedy: "read it filtered to the Service addresses, or with a higher cap"})
}

// staleProblems judges each Service port's stale entries by why
// kube-proxy leaves them (correlate.Cause*).
func (rep *ConntrackReport) staleProblems(n *Node) {
	partial := n.Objects != nil && n.Objects.LeftOut.Count > 0 || n.Scope != "" || n.Select != nil
	deleted := false
	for _, g := range rep.Facts.Groups {
		if g.ServicePort != "" && !n.selected(g.ServicePort) {
			continue
		}
		deleted = deleted || g.Deleted && g.Stale > 0
		for _, s := range g.ByCause {
			p := staleProblem(g, s, partial)
			if ev := reconcilerEvidence(rep.Reconciler, rep.Reconciler != nil); ev != "" && p.Kind == ConntrackStalePending {
				p.Evidence += "; " + ev
			}
			if p.Kind == ConntrackStale || p.Kind == ConntrackStalePending {
				rep.Summary.StaleUDP += s.Entries
			}
			rep.add(p)
		}
	}
	if partial && deleted {
		rep.NotChecked = append(rep.NotChecked, Gap{Check: "whether entries to a cluster IP no Service has are a deleted Service's (judged WARNING, not ERROR)",
			Reason: "not every Service was read (a selection, a scope, or objects left out)", Remedy: "read every Service"})
	}
}

func staleProblem(g correlate.ConntrackGroup, s correlate.StaleConntrack, partial bool) ConntrackProblem {
	proto := strings.ToUpper(g.Proto)
	what := fmt.Sprintf("%d %s entr%s to %s", s.Entries, proto, ies(s.Entries), g.Target)
	if g.Deleted {
		what += " (a cluster IP no Service has)"
	}
	p := ConntrackProblem{Subject: g.Target, Commands: s.Commands,
		Message: fmt.Sprintf("%s: answered by no serving endpoint (%s); %s", what, strings.Join(s.ReplySources, ", "), s.Why),
		Evidence: fmt.Sprintf("%d entr%s, reply source %s, %s left (longest %ds, shortest %ds)",
			s.Entries, ies(s.Entries), strings.Join(s.ReplySources, ", "), secondsRange(s), s.Longest, s.Shortest),
		Consequence: "packets of these flows keep going to an endpoint that is gone; a client that keeps its source port (DNS resolvers, statsd) refreshes the entry with every packet and never reaches a new endpoint",
		Remedy:      "delete the entries (the commands, on the node from a pod with the host network and conntrack-tools); clients then reach a serving endpoint"}
	switch {
	case s.Cause == correlate.CauseUDPOnly || s.Cause == correlate.CauseNotServicePort:
		p.Severity, p.Kind = SeverityInfo, ConntrackStaleTCP
		p.Consequence = "an established flow to a gone endpoint fails on its own (resets or timeouts); new connections are unaffected"
		if s.Cause == correlate.CauseNotServicePort {
			p.Kind = ConntrackNoServicePort
			p.Consequence = "a removed port of the Service, or a client trying one it never had: nothing forwards them"
		}
	case s.KubeProxyCleans:
		p.Severity, p.Kind = SeverityWarning, ConntrackStalePending
		p.Remedy = "kube-proxy deletes them after its next sync that changes a UDP Service's endpoints; if they stay, delete them (the commands)"
	case g.Deleted && s.NotDNATed == s.Entries:
		// not DNATed: no endpoint is involved, the packets go nowhere
		p.Severity, p.Kind = SeverityInfo, ConntrackNoServicePort
		p.Consequence = "not DNATed: nothing forwards them; if a new Service takes the address, these flows miss it until they expire"
	case g.Deleted && partial:
		p.Severity, p.Kind = SeverityWarning, ConntrackStale
	default:
		p.Severity, p.Kind = SeverityError, ConntrackStale
	}
	return p
}

func secondsRange(s correlate.StaleConntrack) string {
	if s.Longest == s.Shortest {
		return fmt.Sprintf("%ds", s.Longest)
	}
	return fmt.Sprintf("%d–%ds", s.Shortest, s.Longest)
}

func ies(n int) string {
	if n == 1 {
		return "y"
	}
	return "ies"
}
