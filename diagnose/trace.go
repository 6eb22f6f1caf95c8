package diagnose

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"

	"sigs.k8s.io/knftables"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/evaluate"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// TraceRequest is what `trace` asks: where a new connection from a source
// goes on the node.
type TraceRequest struct {
	// To is an address (Dst, Protocol) or a Service (Namespace, Service,
	// Port: a name or number, "" for every port): every entry of it.
	Dst       netip.AddrPort
	Protocol  string
	Namespace string
	Service   string
	Port      string
	// From is "node", "pod", "outside", an IP address, or "" (a pod on
	// the node for cluster IPs, a client outside for the others).
	From string
	// Origin, when set, says where a connection from the IP From starts
	// (else the node's addresses, its pod ranges and the EndpointSlices
	// tell).
	Origin evaluate.Origin
	// InIface is the interface the packet comes in on, when known.
	InIface string
	// NodeIPs are the node's addresses given on the command line, besides
	// those its Node object lists.
	NodeIPs []netip.Addr
	// Pinned: the client's ClientIP-affinity records, when known.
	Pinned map[string]bool
}

// TraceReport is trace's report: one trace per entry.
type TraceReport struct {
	APIVersion string        `json:"apiVersion"`
	Kind       string        `json:"kind"`
	Node       string        `json:"node,omitempty"`
	Traces     []PacketTrace `json:"traces"`
	// Status: problems when some new connections are dropped or
	// rejected, incomplete when some outcome could not be evaluated,
	// else healthy.
	Status     Status `json:"status"`
	NotChecked []Gap  `json:"notChecked"`
}

// PacketTrace is the outcomes of one new connection.
type PacketTrace struct {
	// Entry: clusterIP, nodePort, externalIP, loadBalancerIP, or address.
	Entry       string      `json:"entry"`
	ServicePort string      `json:"servicePort,omitempty"`
	Packet      TracePacket `json:"packet"`
	// Summary is the outcomes in one sentence; Cases its parts, one per
	// case the walk had to tell apart (a new client, a returning one).
	Summary  string         `json:"summary"`
	Cases    []string       `json:"-"`
	Outcomes []TraceOutcome `json:"outcomes"`
	// Affinity: ClientIP affinity applies (its timeout, what the walk
	// assumed of the client).
	Affinity    *TraceAffinity         `json:"affinity,omitempty"`
	NotModelled []evaluate.NotModelled `json:"notModelled"`
	Truncated   bool                   `json:"truncated,omitempty"`
	// Confirm are commands that would show the kernel's answer on the
	// node; they add a rule, so the plugin never runs them.
	Confirm []string `json:"confirm"`
	// IPVS: the virtual services the connection met (IPVS mode).
	IPVS *TraceIPVS `json:"ipvs,omitempty"`
}

// TracePacket is the connection walked.
type TracePacket struct {
	Protocol    string `json:"protocol"`
	Source      string `json:"source"`
	Destination string `json:"destination"`
	// From: node (a process on it), pod (a pod on it), outside.
	From        string `json:"from"`
	InInterface string `json:"inInterface,omitempty"`
}

// TraceOutcome is one way the connection goes.
type TraceOutcome struct {
	// Endpoint is where it is DNATed to, null when it is not.
	Endpoint    *string          `json:"endpoint"`
	Probability evaluate.Prob    `json:"probability"`
	Exact       string           `json:"exactProbability"`
	Verdict     evaluate.Verdict `json:"verdict"`
	Masquerade  bool             `json:"masquerade"`
	Mark        string           `json:"mark"`
	Reject      string           `json:"reject,omitempty"`
	Delivery    string           `json:"delivery,omitempty"`
	// Destination is where the packet goes (the original destination
	// when not DNATed).
	Destination string `json:"destination"`
	// The endpoint as the EndpointSlices describe it.
	Pod          string `json:"pod,omitempty"`
	EndpointNode string `json:"endpointNode,omitempty"`
	Ready        *bool  `json:"ready,omitempty"`
	// InSlices: the EndpointSlices list the endpoint (false: the rules
	// send traffic to an endpoint the slices do not have).
	InSlices *bool `json:"inSlices,omitempty"`
	// NamedEndpoint: an unknown outcome that ended in an endpoint chain
	// whose DNAT nft does not show (iptables-nft's IPv6) goes, by the
	// chain's name, to this endpoint.
	NamedEndpoint string                `json:"namedEndpoint,omitempty"`
	Assumes       []evaluate.Assumption `json:"assumes"`
	Path          []TraceHop            `json:"path"`
	// IPVS: the virtual service that scheduled it and the real server
	// picked (IPVS mode).
	IPVS *evaluate.IPVSChoice `json:"ipvs,omitempty"`
}

// TraceHop is one rule of a path, with the Service port or endpoint its
// chain belongs to.
type TraceHop struct {
	evaluate.Hop
	ServicePort string `json:"servicePort,omitempty"`
	Endpoint    string `json:"endpoint,omitempty"`
}

// TraceAffinity is ClientIP affinity on a trace.
type TraceAffinity struct {
	TimeoutSeconds int `json:"timeoutSeconds,omitempty"`
	// Known: the input says which records the client has (nftables
	// lists the affinity sets' members); else both were walked.
	Known bool `json:"known"`
}

// Trace walks the request's connections through the node's rules.
func Trace(n *Node, req TraceRequest) (*TraceReport, error) {
	rep := &TraceReport{APIVersion: APIVersion, Kind: "Trace", Node: n.Name, Traces: []PacketTrace{}, NotChecked: []Gap{}}
	nodeIPs := traceNodeIPs(n, req)
	entries, err := traceEntries(n, req, nodeIPs)
	if err != nil {
		return nil, err
	}
	ev := evaluate.New(n.Ruleset, traceEvalNode(n, nodeIPs))
	labels := correlate.NewTraceLabels(n.Objects)
	problems, unknown := false, false
	for _, e := range entries {
		labels.Learn(e.ServicePort)
		pkt, err := tracePacket(n, req, e, nodeIPs)
		if err != nil {
			return nil, err
		}
		res := ev.Walk(pkt, evaluate.Options{Pinned: req.Pinned})
		pt := labelTrace(res, e, labels)
		pt.Confirm = confirmCommands(n, pkt)
		labelIPVS(n, &pt, res, labels)
		for _, o := range pt.Outcomes {
			switch o.Verdict {
			case evaluate.VerdictDrop, evaluate.VerdictReject:
				problems = true
			case evaluate.VerdictUnknown:
				unknown = true
			}
		}
		rep.Traces = append(rep.Traces, pt)
	}
	rep.NotChecked = append(rep.NotChecked, traceGaps(n, nodeIPs, rep)...)
	switch {
	case problems:
		rep.Status = StatusProblems
	case unknown || len(rep.NotChecked) > 0:
		rep.Status = StatusIncomplete
	default:
		rep.Status = StatusHealthy
	}
	rep.NotChecked = append(rep.NotChecked, traceIPVSGaps(rep)...)
	return rep, nil
}

// traceNodeIPs are the node's addresses: given, its Node object's, else
// the nftables nodeport-ips set's.
func traceNodeIPs(n *Node, req TraceRequest) []netip.Addr {
	ips := append(append([]netip.Addr{}, req.NodeIPs...), n.Addresses...)
	for _, a := range n.Objects.NodeAddresses(n.Name) {
		if !containsAddr(ips, a) {
			ips = append(ips, a)
		}
	}
	if len(ips) > 0 {
		return ips
	}
	for _, t := range n.Ruleset.NFTables {
		if !t.IsKubeProxy() {
			continue
		}
		if s := t.Set("nodeport-ips"); s != nil {
			for _, el := range s.Elements {
				if len(el.Key) == 1 {
					if a, err := netip.ParseAddr(el.Key[0]); err == nil {
						ips = append(ips, a)
					}
				}
			}
		}
	}
	return ips
}

func containsAddr(list []netip.Addr, a netip.Addr) bool {
	for _, b := range list {
		if b == a {
			return true
		}
	}
	return false
}

// traceEntries are the connections to walk: every entry of the Service
// asked for, or the address.
func traceEntries(n *Node, req TraceRequest, nodeIPs []netip.Addr) ([]correlate.TraceEntry, error) {
	if req.Service == "" {
		proto := req.Protocol
		if proto == "" {
			proto = "tcp"
		}
		return []correlate.TraceEntry{correlate.EntryAt(n.Objects, req.Dst, proto, nodeIPs)}, nil
	}
	if n.Objects == nil {
		return nil, fmt.Errorf("trace svc/%s needs the Services and EndpointSlices (--from-objects, or a cluster); or trace an address: --to IP:PORT", req.Service)
	}
	svc, err := correlate.ResolveService(n.Objects, req.Namespace, req.Service)
	if err != nil {
		return nil, err
	}
	var out []correlate.TraceEntry
	var ports []string
	for _, sp := range n.Objects.ServicePorts() {
		if sp.Namespace != svc.Namespace || sp.Name != svc.Name {
			continue
		}
		ports = append(ports, portLabel(sp))
		if req.Port != "" && req.Port != sp.PortName && req.Port != fmt.Sprint(sp.Port) {
			continue
		}
		if !sp.Proxied {
			return nil, fmt.Errorf("service %s/%s is headless or ExternalName: kube-proxy writes no rules for it, its clients reach the pods directly", sp.Namespace, sp.Name)
		}
		out = append(out, correlate.ServiceEntries(sp, nodeIPs)...)
	}
	if len(out) == 0 {
		if req.Port != "" {
			return nil, &correlate.PortNotFoundError{Namespace: svc.Namespace, Name: svc.Name, Port: req.Port, Ports: ports}
		}
		return nil, fmt.Errorf("service %s/%s has no ports: kube-proxy writes no rules for it", svc.Namespace, svc.Name)
	}
	return out, nil
}

func portLabel(sp *correlate.ServicePort) string {
	if sp.PortName != "" {
		return sp.PortName
	}
	return fmt.Sprint(sp.Port)
}

// tracePacket is the connection from the request's source to e.
func tracePacket(n *Node, req TraceRequest, e correlate.TraceEntry, nodeIPs []netip.Addr) (evaluate.Packet, error) {
	fam := kubeproxy.IPv4
	if e.Dst.Addr().Is6() {
		fam = kubeproxy.IPv6
	}
	p := evaluate.Packet{Family: fam, Protocol: e.Protocol, Dst: e.Dst, InIface: req.InIface}
	from := req.From
	if from == "" {
		from = "pod"
		if e.Kind != "clusterIP" && e.Kind != "address" {
			from = "outside"
		}
	}
	sameFamily := func(a netip.Addr) bool { return a.Is6() == (fam == kubeproxy.IPv6) }
	var src netip.Addr
	switch from {
	case "node":
		// The source a process gets is the one its route picks: the
		// destination itself for one of the node's own addresses
		// (loopback's 127.0.0.1 for 127/8), else the node's address.
		p.Origin = evaluate.FromNode
		switch dst := e.Dst.Addr().Unmap(); {
		case dst.IsLoopback():
			src = netip.MustParseAddr("127.0.0.1")
			if fam == kubeproxy.IPv6 {
				src = netip.IPv6Loopback()
			}
		case containsAddr(nodeIPs, dst) || ipvsBound(n, dst):
			src = dst
		default:
			for _, a := range nodeIPs {
				if sameFamily(a) {
					src = a
					break
				}
			}
		}
		if !src.IsValid() {
			return p, fmt.Errorf("the node's %s address is not known: pass --node-ip, or --from IP", fam)
		}
	case "pod":
		p.Origin = evaluate.FromPod
		for _, c := range append(append(n.Objects.PodCIDRsOf(n.Name), configClusterCIDRs(n)...), rulesClusterCIDRs(n)...) {
			if sameFamily(c.Addr()) {
				src = correlate.PodSource(c, n.Objects)
				break
			}
		}
		if !src.IsValid() {
			return p, fmt.Errorf("no pod address of the node is known (its Node object's podCIDRs, kube-proxy's clusterCIDR): pass --from with a pod's IP")
		}
	case "outside":
		// a client the load balancer's source ranges allow, when it has
		// any (as explain walks it)
		p.Origin = evaluate.FromOutside
		src = netip.MustParseAddr("203.0.113.1")
		if fam == kubeproxy.IPv6 {
			src = netip.MustParseAddr("2001:db8::1")
		}
		if e.ServicePort != nil {
			src = correlate.ExternalSource(e.ServicePort, fam)
		}
	default:
		a, err := netip.ParseAddr(from)
		if err != nil {
			return p, fmt.Errorf("--from takes node, pod, outside or an IP address, not %q", from)
		}
		src = a.Unmap()
		if !sameFamily(src) {
			return p, fmt.Errorf("--from %s is not an %s address, and %s is", from, fam, e.Dst.Addr())
		}
		switch {
		case req.Origin != "":
			p.Origin = req.Origin
		case src.IsLoopback() || containsAddr(nodeIPs, src):
			// only the node itself sends from loopback
			p.Origin = evaluate.FromNode
		case inAny(src, n.Objects.PodCIDRsOf(n.Name)) || n.Objects.EndpointOnNode(src, n.Name):
			p.Origin = evaluate.FromPod
		default:
			p.Origin = evaluate.FromOutside
		}
	}
	p.Src = netip.AddrPortFrom(src, 40000)
	return p, nil
}

func inAny(a netip.Addr, ps []netip.Prefix) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// configClusterCIDRs are kube-proxy's configured clusterCIDR.
func configClusterCIDRs(n *Node) []netip.Prefix {
	var out []netip.Prefix
	if n.Config == nil {
		return out
	}
	for _, c := range strings.Split(n.Config.ClusterCIDR, ",") {
		if p, err := netip.ParsePrefix(strings.TrimSpace(c)); err == nil {
			out = append(out, p.Masked())
		}
	}
	return out
}

// rulesClusterCIDRs are the cluster CIDRs kube-proxy's masquerade rules
// name: `! -s CIDR … -j KUBE-MARK-MASQ` (iptables), `ip saddr != CIDR …
// mark set` in services (nftables).
func rulesClusterCIDRs(n *Node) []netip.Prefix {
	var out []netip.Prefix
	add := func(s string) {
		if p, err := netip.ParsePrefix(s); err == nil && !slices.Contains(out, p.Masked()) {
			out = append(out, p.Masked())
		}
	}
	for _, t := range n.Ruleset.IPTables {
		if t.Name != kubeproxy.TableNAT {
			continue
		}
		for _, c := range t.Chains {
			if !strings.HasPrefix(c.Name, kubeproxy.PrefixService) || len(c.Rules) == 0 {
				continue
			}
			if r := c.Rules[0]; r.Target == kubeproxy.ChainMarkMasq && r.Source.Not {
				add(r.Source.Value)
				break
			}
		}
	}
	for _, t := range n.Ruleset.NFTables {
		if !t.IsKubeProxy() {
			continue
		}
		if c := t.Chain("services"); c != nil {
			for _, r := range c.Rules {
				if r.Info.SaddrNot && r.Info.HasMarkSet && len(r.Info.Saddr) == 1 {
					add(r.Info.Saddr[0])
				}
			}
		}
	}
	for _, c := range ipvsClusterCIDRs(n) {
		add(c)
	}
	return out
}

// labelTrace turns a walk into the report's trace: outcomes labelled with
// their endpoints and the owners of their chains, and summed up.
func labelTrace(res *evaluate.Result, e correlate.TraceEntry, labels *correlate.TraceLabels) PacketTrace {
	pt := PacketTrace{Entry: e.Kind, Packet: TracePacket{Protocol: res.Packet.Protocol, Source: res.Packet.Src.String(),
		Destination: res.Packet.Dst.String(), From: string(res.Packet.Origin), InInterface: res.Packet.InIface},
		Outcomes: []TraceOutcome{}, NotModelled: res.NotModelled, Truncated: res.Truncated}
	if e.ServicePort != nil {
		pt.ServicePort = e.ServicePort.String()
	}
	for _, o := range res.Outcomes {
		to := TraceOutcome{Probability: o.Probability, Exact: o.Probability.String(), Verdict: o.Verdict, Masquerade: o.Masquerade,
			Mark: fmt.Sprintf("%#x", o.Mark), Reject: o.Reject, Delivery: o.Delivery, Destination: o.Destination.String(),
			Assumes: nonNil(o.Assumes), Path: make([]TraceHop, 0, len(o.Path))}
		ipvsOutcome(&to, o)
		if o.DNAT {
			ep := o.Destination.String()
			to.Endpoint = &ep
			labels.LearnEndpoint(ep)
			if l, ok := labels.Endpoint(ep); ok {
				to.Pod, to.EndpointNode = l.Pod, l.Node
				to.Ready, to.InSlices = &l.Ready, ptrTrue()
			} else if e.ServicePort != nil {
				f := false
				to.InSlices = &f
			}
		}
		if o.Verdict == evaluate.VerdictUnknown {
			to.NamedEndpoint = labels.OutcomeEndpoint(o)
		}
		comment := ""
		for _, h := range o.Path {
			owner := labels.Chain(h.Chain, comment)
			to.Path = append(to.Path, TraceHop{Hop: h, ServicePort: owner.ServicePort, Endpoint: owner.Endpoint})
			comment = commentOf(h.Text)
		}
		if o.Affinity != nil {
			if pt.Affinity == nil {
				pt.Affinity = &TraceAffinity{TimeoutSeconds: o.Affinity.Seconds, Known: o.Affinity.Known}
			}
			if o.Affinity.Seconds > pt.Affinity.TimeoutSeconds {
				pt.Affinity.TimeoutSeconds = o.Affinity.Seconds
			}
		}
		pt.Outcomes = append(pt.Outcomes, to)
	}
	// the usual case first: a new client, nothing unusual assumed
	sort.SliceStable(pt.Outcomes, func(i, j int) bool { return heldCount(pt.Outcomes[i].Assumes) < heldCount(pt.Outcomes[j].Assumes) })
	pt.Cases = traceSummary(pt)
	pt.Summary = strings.Join(pt.Cases, "; ")
	return pt
}

func heldCount(as []evaluate.Assumption) int {
	n := 0
	for _, a := range as {
		if a.Holds {
			n++
		}
	}
	return n
}

func ptrTrue() *bool {
	t := true
	return &t
}

// commentOf is the comment of rule text, "" when it has none.
func commentOf(text string) string {
	for _, marker := range []string{`--comment "`, `comment "`} {
		if i := strings.Index(text, marker); i >= 0 {
			rest := text[i+len(marker):]
			if j := strings.IndexByte(rest, '"'); j >= 0 {
				return rest[:j]
			}
		}
	}
	return ""
}

// traceSummary says a trace's outcomes in a sentence: "3 outcomes: 33.3%
// → 10.244.0.11:8080 (pod web-0), …; masqueraded: no", and, where the
// walk had to assume something, one such part per case.
func traceSummary(pt PacketTrace) []string {
	groups := map[string][]TraceOutcome{}
	var keys []string
	held := map[string]int{} // assumptions held true: the usual case (a new client) first
	for _, o := range pt.Outcomes {
		k := AssumptionsText(o.Assumes)
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
			for _, a := range o.Assumes {
				if a.Holds {
					held[k]++
				}
			}
		}
		groups[k] = append(groups[k], o)
	}
	sort.SliceStable(keys, func(i, j int) bool { return held[keys[i]] < held[keys[j]] })
	var parts []string
	for _, k := range keys {
		s := outcomesText(groups[k])
		if k != "" {
			s = k + ": " + s
		}
		parts = append(parts, s)
	}
	return parts
}

// outcomesText: "2 outcomes: 50.0% → A (pod a), 50.0% dropped; masqueraded: no".
func outcomesText(os []TraceOutcome) string {
	type agg struct {
		key  string
		p    evaluate.Prob
		masq bool
		// unpredictable: a real server IPVS picks by lc, sh …: no share
		unpredictable bool
	}
	var list []*agg
	by := map[string]*agg{}
	masq, nomasq := false, false
	for _, o := range os {
		k := outcomeWords(o)
		a := by[k]
		if a == nil {
			a = &agg{key: k}
			by[k] = a
			list = append(list, a)
		}
		a.p = a.p.Add(o.Probability)
		a.unpredictable = a.unpredictable || ipvsUnpredictable(o)
		if o.Verdict == evaluate.VerdictDNAT || o.Verdict == evaluate.VerdictAccept {
			if o.Masquerade {
				masq = true
			} else {
				nomasq = true
			}
		}
	}
	var parts []string
	for _, a := range list {
		parts = append(parts, shareWords(a.p, a.unpredictable)+" "+a.key)
	}
	n := len(list)
	s := fmt.Sprintf("%d outcomes: ", n)
	if n == 1 {
		s = "1 outcome: "
	}
	s += strings.Join(parts, ", ")
	switch {
	case masq && nomasq:
		s += "; masqueraded: some"
	case masq:
		s += "; masqueraded: yes"
	case nomasq:
		s += "; masqueraded: no"
	}
	return s
}

func outcomeWords(o TraceOutcome) string {
	switch o.Verdict {
	case evaluate.VerdictDNAT:
		s := "→ " + *o.Endpoint
		var about []string
		if o.Pod != "" {
			about = append(about, "pod "+o.Pod)
		}
		if o.InSlices != nil && !*o.InSlices {
			about = append(about, "not in the EndpointSlices")
		}
		if len(about) > 0 {
			s += " (" + strings.Join(about, ", ") + ")"
		}
		return s
	case evaluate.VerdictAccept:
		if o.Delivery == "local" {
			return "accepted, to the node itself (" + o.Destination + ")"
		}
		return "accepted, not DNATed (" + o.Destination + ")"
	case evaluate.VerdictReject:
		return "rejected (" + o.Reject + ")"
	case evaluate.VerdictDrop:
		return "dropped"
	}
	return "not known (a rule not modelled)"
}

// AssumptionsText: "a new client (no affinity record)", "a client with an
// affinity record in KUBE-SEP-X", or the statements assumed, joined.
func AssumptionsText(as []evaluate.Assumption) string {
	if len(as) == 0 {
		return ""
	}
	affinityOnly, pinned := true, ""
	for _, a := range as {
		if !strings.HasPrefix(a.What, affinityPrefix) {
			affinityOnly = false
		}
		if a.Holds {
			pinned = a.What
		}
	}
	if affinityOnly {
		if pinned == "" {
			return "a new client (no affinity record)"
		}
		return "a returning client (" + strings.TrimPrefix(pinned, "the client has ") + ")"
	}
	var parts []string
	for _, a := range as {
		w := a.What
		if !a.Holds {
			w = negate(w)
		}
		parts = append(parts, w)
	}
	return strings.Join(parts, " and ")
}

const affinityPrefix = "the client has an affinity record"

// negate words a statement the walk assumed false.
func negate(what string) string {
	for _, r := range []struct{ from, to string }{
		{"the client has an affinity record", "the client has no affinity record"},
		{"it came in on an interface", "it did not come in on an interface"},
		{"it leaves by an interface", "it does not leave by an interface"},
	} {
		if strings.HasPrefix(what, r.from) {
			return r.to + strings.TrimPrefix(what, r.from)
		}
	}
	return "not: " + what
}

// confirmCommands are the commands that show the kernel's own answer for
// pkt: a temporary nftables table that traces the connection (nftables
// and iptables-nft rules alike) and how to remove it; iptables' TRACE on a
// legacy node.
func confirmCommands(n *Node, pkt evaluate.Packet) []string {
	fam, addr := knftables.IPv4Family, "ip"
	if pkt.Family == kubeproxy.IPv6 {
		fam, addr = knftables.IPv6Family, "ip6"
	}
	match := fmt.Sprintf("%s saddr %s %s daddr %s %s dport %d", addr, pkt.Src.Addr(), addr, pkt.Dst.Addr(), pkt.Protocol, pkt.Dst.Port())
	if legacyOnly(n) {
		ipt := "iptables"
		if pkt.Family == kubeproxy.IPv6 {
			ipt = "ip6tables"
		}
		rule := fmt.Sprintf("-p %s -s %s -d %s --dport %d -j TRACE", pkt.Protocol, pkt.Src.Addr(), pkt.Dst.Addr(), pkt.Dst.Port())
		hook := "PREROUTING"
		if pkt.Origin == evaluate.FromNode {
			hook = "OUTPUT"
		}
		return []string{
			fmt.Sprintf("%s-legacy -t raw -I %s %s", ipt, hook, rule),
			"dmesg -w | grep 'TRACE:'   # then send one connection; Ctrl-C when done",
			fmt.Sprintf("%s-legacy -t raw -D %s %s", ipt, hook, rule),
		}
	}
	hook, chain := "prerouting", "pre"
	if pkt.Origin == evaluate.FromNode {
		hook, chain = "output", "out"
	}
	monitor := "timeout 30 nft monitor trace"
	if iptablesNFT(n) {
		monitor = "timeout 30 xtables-monitor --trace   # or: " + monitor
	}
	return []string{
		fmt.Sprintf("nft add table %s proxyrules_trace", fam),
		fmt.Sprintf("nft add chain %s proxyrules_trace %s '{ type filter hook %s priority -400 ; }'", fam, chain, hook),
		fmt.Sprintf("nft add rule %s proxyrules_trace %s %s meta nftrace set 1", fam, chain, match),
		monitor + "   # then send one connection",
		fmt.Sprintf("nft delete table %s proxyrules_trace", fam),
	}
}

func legacyOnly(n *Node) bool {
	if len(n.Ruleset.NFTables) > 0 {
		return false
	}
	legacy := false
	for _, t := range n.Ruleset.IPTables {
		if t.Backend == kubeproxy.BackendNFT || t.FromNFT {
			return false
		}
		legacy = legacy || t.Backend == kubeproxy.BackendLegacy
	}
	return legacy
}

func iptablesNFT(n *Node) bool {
	for _, t := range n.Ruleset.IPTables {
		if t.Backend == kubeproxy.BackendNFT || t.FromNFT {
			return true
		}
	}
	return false
}

// traceGaps: what the traces could not check.
func traceGaps(n *Node, nodeIPs []netip.Addr, rep *TraceReport) []Gap {
	var out []Gap
	if len(nodeIPs) == 0 {
		out = append(out, Gap{"the node's own addresses", "no Node object and no --node-ip: rules that test for a local destination (node ports) were evaluated as if no address were the node's", "--node-ip IP, or --from-objects with the Node (kubectl get nodes -o json)"})
	}
	if n.Objects == nil {
		out = append(out, Gap{"the endpoints' pods", "no EndpointSlices were given: outcomes are not matched with them", "--from-objects (kubectl get services,endpointslices -A -o json)"})
	}
	seen := map[string]bool{}
	for _, pt := range rep.Traces {
		for _, nm := range pt.NotModelled {
			if seen[nm.What] {
				continue
			}
			seen[nm.What] = true
			where := ""
			if nm.Chain != "" {
				where = fmt.Sprintf(" (%s %s %s)", nm.Family, nm.Table, nm.Chain)
			}
			out = append(out, Gap{Check: nm.What + where, Reason: nm.Why})
		}
		if pt.Truncated {
			out = append(out, Gap{Check: "every outcome of " + pt.Packet.Destination, Reason: "more outcomes than a walk follows: the list is cut"})
		}
	}
	if n.Scope != "" {
		out = append(out, Gap{Check: "rules outside " + n.Scope, Reason: "only some chains were read: a jump out of them ends as unknown"})
	}
	return out
}

// traceCause is what a sweep says of a trace that does not get through:
// "shop/web:http cluster IP 10.96.10.1:80: 33.3% dropped" (a new client's
// outcomes, those that assume nothing unusual).
func traceCause(pt PacketTrace) (Severity, string, bool) {
	var drop, reject, unknown evaluate.Prob
	for _, o := range pt.Outcomes {
		if heldCount(o.Assumes) > 0 {
			continue
		}
		switch o.Verdict {
		case evaluate.VerdictDrop:
			drop = drop.Add(o.Probability)
		case evaluate.VerdictReject:
			reject = reject.Add(o.Probability)
		case evaluate.VerdictUnknown:
			unknown = unknown.Add(o.Probability)
		}
	}
	var parts []string
	if !drop.IsZero() {
		parts = append(parts, drop.Percent()+" dropped")
	}
	if !reject.IsZero() {
		parts = append(parts, reject.Percent()+" rejected")
	}
	sev := SeverityError
	if len(parts) == 0 {
		if unknown.IsZero() {
			return "", "", false
		}
		parts, sev = append(parts, unknown.Percent()+" not known"), SeverityWarning
	}
	what := pt.Packet.Destination + "/" + pt.Packet.Protocol
	if pt.ServicePort != "" {
		what = pt.ServicePort + " " + pt.Entry + " " + what
	}
	return sev, fmt.Sprintf("%s from %s: %s", what, pt.Packet.From, strings.Join(parts, ", ")), true
}
