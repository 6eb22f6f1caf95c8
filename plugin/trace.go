package plugin

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"

	"github.com/charmbracelet/lipgloss"
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/diagnose"
	"github.com/proxyrules/kubectl-proxyrules/evaluate"
)

// TraceOptions are the options of `trace`.
type TraceOptions struct {
	analysisOptions
	// To is --to (or the argument): IP:PORT[/PROTO] or svc/NAME[:PORT].
	To string
	// From is --from: node, pod, outside or an IP.
	From string
	// In is --in: the interface the packet comes in on.
	In string

	req diagnose.TraceRequest
}

const traceExample = `  # A pod on node-3 cannot reach 10.96.4.7:443: where does its SYN go?
  %[1]s trace --to 10.96.4.7:443 --from 10.244.3.17 --node node-3

  # Every entry of a Service (cluster IP, node port, external and LB IPs)
  %[1]s trace --to svc/web -n shop --node node-3

  # DNS over UDP from a process on the node, from a saved dump
  %[1]s trace --to 10.96.0.10:53/udp --from node --from-dump iptables-save.txt --from-objects objects.json --node node-3

  # From a client outside, to a node port, as JSON
  %[1]s trace --to 172.31.0.12:30080 --from 203.0.113.9 --from-bundle ./bundle -o json

  # Which nodes drop it? (one short-lived pod per node)
  %[1]s trace --to svc/web -n shop --all-nodes`

// NewCmdTrace builds `trace`.
func NewCmdTrace(name string, streams genericiooptions.IOStreams, kube *genericclioptions.ConfigFlags) *cobra.Command {
	o := &TraceOptions{analysisOptions: analysisOptions{IOStreams: streams}}
	cmd := &cobra.Command{
		Use:   "trace (--to IP:PORT[/tcp|udp|sctp] | --to svc/NAME[:PORT]) [--from node|pod|outside|IP] [--in IFACE] (--node NAME | --from-bundle DIR | --from-dump FILE)",
		Short: "Where a new connection goes on the node: every outcome of the rules, with its share",
		Long: `Trace walks one new connection through the node's rules as the kernel does:
the netfilter hooks in order (raw, mangle, nat, filter, then nat POSTROUTING;
for nftables every base chain of every table by hook and priority, kube-proxy's
and anybody else's), each rule evaluated, and says every way the connection can
go with its share of new connections: DNATed to which endpoint (and its pod),
accepted, rejected or dropped, masqueraded or not, and the rules on the way.

--to is an address (IP:PORT, with /udp or /sctp when not TCP) or a Service
(svc/NAME[:PORT] in the -n namespace): then each of its entries is traced (its
cluster IPs, its node port on the node's addresses, its external and
load-balancer IPs). --from is where the connection starts: "node" (a process on
the node), "pod" (a pod on the node: the default for cluster IPs), "outside"
(a client outside the node: the default for the other entries) or an IP (the
node's own, a pod's, or an outside client's; told apart by the node's podCIDR
and the EndpointSlices). --in names the interface the packet comes in on, for
rules that test it.

What the rules do not say is never taken as matching: a rule the walk cannot
evaluate (an unknown match, an interface not given, a ClientIP-affinity record
the kernel keeps) is followed both ways, and the outcomes say which way they
assumed. The commands that would show the kernel's own answer on the node are
printed, never run: they add a rule.

Exit status: 0 every outcome gets through, 2 some new connections are dropped
or rejected, 3 some outcome could not be evaluated (the report says what),
1 could not run.`,
		Example: fmt.Sprintf(traceExample, name),
		Args:    cobra.MaximumNArgs(1),
		RunE:    runAnalysis(o),
	}
	fs := cmd.Flags()
	fs.StringVar(&o.To, "to", "", "where the connection goes: IP:PORT[/tcp|udp|sctp] or svc/NAME[:PORT]")
	fs.StringVar(&o.From, "from", "", "where it starts: node, pod, outside or an IP (default: a pod on the node for a cluster IP, a client outside for the other entries)")
	fs.StringVar(&o.In, "in", "", "the interface the packet comes in on, for rules that test it")
	o.addInputFlags(cmd, kube)
	o.Inputs.addNodeIPFlag(cmd)
	o.Sweep.AddFlags(cmd)
	o.Out.AddFlags(cmd, false)
	return cmd
}

// Complete reads --to (or the argument), --from and the namespace.
func (o *TraceOptions) Complete(cmd *cobra.Command, args []string) error {
	if err := o.analysisOptions.Complete(cmd, args); err != nil {
		return err
	}
	if len(args) == 1 {
		if o.To != "" {
			return fmt.Errorf("give the destination once: as --to or as the argument, not both")
		}
		o.To = args[0]
	}
	if o.To == "" {
		return usageErrorf("trace needs a destination: --to IP:PORT[/PROTO] or --to svc/NAME[:PORT]\nUsage: %s", cmd.UseLine())
	}
	req, err := parseTraceTo(o.To)
	if err != nil {
		return err
	}
	if req.Service != "" {
		req.Namespace = kubeNamespace(o.kube)
	}
	if _, err := parseNodeIPs(o.Inputs.NodeIPs); err != nil {
		return err
	}
	switch f := strings.ToLower(o.From); f {
	case "", "node", "pod", "outside":
		req.From = f
	default:
		if _, err := netip.ParseAddr(o.From); err != nil {
			return fmt.Errorf("--from takes node, pod, outside or an IP address, not %q", o.From)
		}
		req.From = o.From
	}
	req.InIface = o.In
	o.req = req
	return nil
}

// parseTraceTo reads --to: IP:PORT[/PROTO] ([IPv6]:PORT) or
// svc/NAME[:PORT] (also service/NAME, NAME.NAMESPACE is not taken: -n).
func parseTraceTo(to string) (diagnose.TraceRequest, error) {
	var req diagnose.TraceRequest
	if kind, rest, ok := strings.Cut(to, "/"); ok {
		switch strings.ToLower(kind) {
		case "svc", "service", "services":
			name, port, _ := strings.Cut(rest, ":")
			if name == "" {
				return req, fmt.Errorf("--to %q names no Service: svc/NAME[:PORT]", to)
			}
			req.Service, req.Port = name, port
			return req, nil
		}
	}
	addr, proto, hasProto := strings.Cut(to, "/")
	req.Protocol = "tcp"
	if hasProto {
		req.Protocol = strings.ToLower(proto)
		switch req.Protocol {
		case "tcp", "udp", "sctp":
		default:
			return req, fmt.Errorf("--to %q: the protocol is tcp, udp or sctp, not %q", to, proto)
		}
	}
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return req, fmt.Errorf("--to %q is neither IP:PORT[/PROTO] ([IPv6]:PORT for IPv6) nor svc/NAME[:PORT]", to)
	}
	req.Dst = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	return req, nil
}

// Validate checks the options.
func (o *TraceOptions) Validate() error {
	if err := o.analysisOptions.Validate(); err != nil {
		return err
	}
	if o.req.Service != "" && len(o.Inputs.Objects) == 0 && len(o.Inputs.Dumps) > 0 {
		return fmt.Errorf("trace svc/%s needs the Services and EndpointSlices: pass --from-objects (kubectl get services,endpointslices,nodes -A -o json), or trace an address (--to IP:PORT)", o.req.Service)
	}
	return nil
}

// Run loads the node and traces.
func (o *TraceOptions) Run() error {
	if o.req.Service != "" {
		o.sweepSubject = "trace svc " + o.req.Namespace + "/" + o.req.Service
	} else {
		o.sweepSubject = "trace " + o.To
	}
	// Offline, a Service's trace reads only its chains of an
	// iptables-save dump, every other chain whole, and no other
	// Service's (trace_load.go); a walk that leaves them for another
	// Service's chain is walked again on the whole dump. (A live read of
	// one Service reads its chains only: too little for a walk, so a live
	// trace reads the node whole.)
	req := o.request()
	if traceNarrows(o.req) && !req.live() && !o.sweeping() {
		req.Service = &correlate.ServiceFilter{Namespace: o.req.Namespace, Name: o.req.Service}
		req.Walk = true
	}
	build := func(l *Loaded) (built, error) {
		rep, err := diagnose.Trace(l.Node, o.req)
		if err != nil {
			return built{}, err
		}
		if l.Narrowed && leftTarget(rep) {
			return built{}, errLeftTarget
		}
		return built{report: rep, status: rep.Status,
			render: func(out io.Writer, t *Terminal) error { return renderTrace(out, t, rep) },
			rows:   func() rows { return traceRows(rep) }}, nil
	}
	err := o.runRequest(req, build)
	if errors.Is(err, errLeftTarget) {
		req.Service, req.Walk = nil, false
		err = o.runRequest(req, build)
	}
	return err
}

// traceNarrows: a trace of a Service may read only what its walk can
// reach; not from an IP, which only every EndpointSlice may say is a pod
// of the node's (diagnose: tracePacket).
func traceNarrows(req diagnose.TraceRequest) bool {
	_, err := netip.ParseAddr(req.From)
	return req.Service != "" && err != nil
}

// errLeftTarget: a targeted read was not enough for the walk.
var errLeftTarget = errors.New("the walk left the Service's chains")

// leftTarget: some walk reached a chain whose rules were not read.
func leftTarget(rep *diagnose.TraceReport) bool {
	for _, pt := range rep.Traces {
		for _, n := range pt.NotModelled {
			if strings.HasSuffix(n.What, " is not in the input") {
				return true
			}
		}
	}
	return false
}

// traceRows are the outcomes of every trace, a row each.
func traceRows(rep *diagnose.TraceReport) rows {
	r := rows{kind: "outcome"}
	var names []string
	for _, pt := range rep.Traces {
		for i, o := range pt.Outcomes {
			r.items = append(r.items, traceRow{Entry: pt.Entry, ServicePort: pt.ServicePort, Destination: pt.Packet.Destination, TraceOutcome: o})
			to := o.Destination
			if o.Endpoint != nil {
				to = *o.Endpoint
			}
			names = append(names, fmt.Sprintf("%s-%s-%s-%d", pt.Packet.Destination, o.Verdict, to, i+1))
		}
	}
	r.name = func(i int) string { return names[i] }
	return r
}

// traceRow is one outcome as -o name, templates and columns see it.
type traceRow struct {
	Entry       string `json:"entry"`
	ServicePort string `json:"servicePort,omitempty"`
	Destination string `json:"to"`
	diagnose.TraceOutcome
}

// renderTrace prints each trace: what was walked, the outcomes in a
// sentence, then each outcome with the rules it went through.
func renderTrace(out io.Writer, t *Terminal, rep *diagnose.TraceReport) error {
	st := t.styles()
	w := t.Width
	for i, pt := range rep.Traces {
		if i > 0 {
			fmt.Fprintln(out)
		}
		fmt.Fprintln(out, trimTrailing(st.header.Render(wrap(traceTitle(rep, pt), w))))
		for _, c := range pt.Cases {
			fmt.Fprintln(out, wrap(c, w))
		}
		if pt.Affinity != nil {
			fmt.Fprintln(out, wrap(affinityText(pt.Affinity), w))
		}
		renderTraceIPVS(out, t, pt)
		var prev []diagnose.TraceHop
		for _, o := range pt.Outcomes {
			fmt.Fprintln(out)
			fmt.Fprintln(out, outcomeHeader(st, o, w))
			prev = renderHops(out, t, o.Path, prev)
		}
		if len(pt.NotModelled) > 0 {
			fmt.Fprintln(out)
			fmt.Fprintln(out, st.warn.Render("not evaluated (followed both ways, or the outcome is unknown):"))
			for _, n := range pt.NotModelled {
				where := ""
				if n.Chain != "" {
					where = fmt.Sprintf("%s %s %s", n.Family, n.Table, n.Chain)
					if n.Rule >= 0 {
						where += fmt.Sprintf(" #%d", n.Rule+1)
					}
					where += ": "
				}
				fmt.Fprintln(out, wrap("  "+where+n.What+" — "+n.Why, w))
			}
		}
		if len(pt.Confirm) > 0 {
			fmt.Fprintln(out)
			fmt.Fprintln(out, st.dim.Render("To see the kernel's answer on the node (adds a rule; the last command removes it):"))
			for _, c := range pt.Confirm {
				fmt.Fprintln(out, "  "+c)
			}
		}
	}
	return nil
}

func traceTitle(rep *diagnose.TraceReport, pt diagnose.PacketTrace) string {
	from := map[string]string{"node": "a process on the node", "pod": "a pod on the node", "outside": "a client outside"}[pt.Packet.From]
	what := pt.Packet.Destination + "/" + pt.Packet.Protocol
	if pt.ServicePort != "" {
		what = pt.ServicePort + " " + entryWords(pt.Entry) + " " + what
	}
	s := fmt.Sprintf("trace %s from %s (%s)", what, from, pt.Packet.Source)
	if rep.Node != "" {
		s += " on " + rep.Node
	}
	if pt.Packet.InInterface != "" {
		s += ", in on " + pt.Packet.InInterface
	}
	return s
}

func entryWords(kind string) string {
	switch kind {
	case "clusterIP":
		return "cluster IP"
	case "nodePort":
		return "node port"
	case "externalIP":
		return "external IP"
	case "loadBalancerIP":
		return "load-balancer IP"
	}
	return kind
}

func affinityText(a *diagnose.TraceAffinity) string {
	s := "ClientIP affinity: a client keeps its endpoint"
	if a.TimeoutSeconds > 0 {
		s += " for " + strconv.Itoa(a.TimeoutSeconds) + " s after its last connection"
	}
	if a.Known {
		return s + "; the rules list which clients have one (this one: as above)."
	}
	return s + "; whether this client has a record is kept in the kernel, not in the rules: both cases are shown."
}

func outcomeHeader(st styles, o diagnose.TraceOutcome, width int) string {
	share := fmt.Sprintf("%6s", outcomeShare(o))
	var what string
	style := st.good
	switch o.Verdict {
	case evaluate.VerdictDNAT:
		what = "DNAT → " + *o.Endpoint
		var about []string
		if o.Pod != "" {
			about = append(about, "pod "+o.Pod)
		}
		if o.EndpointNode != "" {
			about = append(about, "on "+o.EndpointNode)
		}
		if o.Ready != nil && !*o.Ready {
			about = append(about, "not ready")
			style = st.warn
		}
		if o.InSlices != nil && !*o.InSlices {
			about = append(about, "not in the EndpointSlices")
			style = st.bad
		}
		if len(about) > 0 {
			what += "  " + strings.Join(about, ", ")
		}
	case evaluate.VerdictAccept:
		what = "accepted, not DNATed: " + o.Destination
		if o.Delivery == "local" {
			what = "accepted, to the node itself: " + o.Destination
		}
	case evaluate.VerdictReject:
		what, style = "rejected ("+o.Reject+")", st.bad
	case evaluate.VerdictDrop:
		what, style = "dropped", st.bad
	default:
		what, style = "not known (a rule not modelled)", st.warn
	}
	if o.Masquerade {
		what += ", masqueraded"
	}
	line := share + "  " + what
	if len(o.Assumes) > 0 {
		line += "\n        for " + diagnose.AssumptionsText(o.Assumes)
	}
	return trimTrailing(style.Render(wrap(line, width)))
}

// renderHops prints the rules of a path that acted (a verdict, a
// rewrite, and the jumps that led to them), not the chains a packet passed
// through untouched; the hops the previous outcome printed already are
// summed up in one line.
func renderHops(out io.Writer, t *Terminal, path, prev []diagnose.TraceHop) []diagnose.TraceHop {
	st := t.styles()
	acted := actedHops(path)
	same := 0
	for same < len(acted) && same < len(prev) && sameHop(acted[same], prev[same]) {
		same++
	}
	if same > 1 {
		fmt.Fprintln(out, st.dim.Render(fmt.Sprintf("    … as above, to %s #%d", acted[same-1].Chain, acted[same-1].Rule+1)))
	} else {
		same = 0
	}
	for _, h := range acted[same:] {
		fmt.Fprintln(out, hopLine(t, h))
	}
	return acted
}

// actedHops are the hops of a path worth a line: every rule that did
// something to the packet or decided its fate, and the jumps and gotos
// that led to one; a jump into a chain that returned without doing
// anything is left out.
func actedHops(path []diagnose.TraceHop) []diagnose.TraceHop {
	keep := make([]bool, len(path))
	// frames are the chains jumped into and not yet returned from, each
	// with the hops that led into it (a jump, then the gotos that
	// replaced it)
	var frames [][]int
	base := ""
	for i, h := range path {
		if b := h.Hook + " " + h.Family + " " + h.Table; b != base {
			base, frames = b, frames[:0]
		}
		switch {
		case h.Verb == "jump":
			frames = append(frames, []int{i})
		case h.Verb == "goto":
			if len(frames) == 0 {
				frames = append(frames, nil) // a goto from the base chain
			}
			frames[len(frames)-1] = append(frames[len(frames)-1], i)
		case h.Verb == "return":
			if len(frames) > 0 {
				frames = frames[:len(frames)-1]
			}
		case h.Verb == "policy" && h.Target == "accept":
			frames = frames[:0]
		default:
			for _, f := range frames {
				for _, j := range f {
					keep[j] = true
				}
			}
			frames = frames[:0]
			keep[i] = true
		}
	}
	out := make([]diagnose.TraceHop, 0, len(path))
	for i, h := range path {
		if keep[i] {
			out = append(out, h)
		}
	}
	return out
}

func sameHop(a, b diagnose.TraceHop) bool {
	return a.Hook == b.Hook && a.Table == b.Table && a.Family == b.Family && a.Chain == b.Chain && a.Rule == b.Rule && a.Action == b.Action
}

// hopLine: "    prerouting nat KUBE-SVC-67NZLRHBNDSAWJRO #2  jump KUBE-SEP-… (33.3%)  shop/web:http".
func hopLine(t *Terminal, h diagnose.TraceHop) string {
	rule := "policy"
	switch {
	case h.Rule >= 0:
		rule = "#" + strconv.Itoa(h.Rule+1)
	case h.Backend == "ipvs":
		rule = "" // IPVS's own verdict, no rule's
	}
	action := h.Action
	if h.Share != nil {
		action += " (" + h.Share.Percent() + ")"
	}
	owner := h.ServicePort
	if h.Endpoint != "" {
		owner += " → " + h.Endpoint
	}
	head := fmt.Sprintf("    %-11s %-6s ", h.Hook, h.Table)
	chain := t.chainName(h.Chain, max(t.Width-lipgloss.Width(head)-30, 20))
	parts := []string{head + chain + " " + rule, action}
	if owner != "" {
		parts = append(parts, "["+owner+"]")
	}
	return fitParts(t.Width, "        ", "  ", parts...)
}
