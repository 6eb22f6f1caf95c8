package plugin

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net/netip"
	"strings"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/lipgloss/tree"
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/diagnose"
)

// ExplainOptions are the options of `explain`.
type ExplainOptions struct {
	analysisOptions
	Port string

	// namespace is "" with -A: the Service is looked up in every namespace.
	namespace string
	name      string
	// chain is set when explain was given a chain name: its Service is
	// explained. lookup is what the chain turned out to be.
	chain  string
	lookup *correlate.Lookup
	// addr (and addrPort, 0 for none) is set when explain was given an
	// address: the Service that has it is explained.
	addr     netip.Addr
	addrPort uint16
	// list: -l without a name explains every selected Service.
	list bool
}

const explainExample = `  # Why does svc/web in namespace shop get no traffic on this node?
  %[1]s explain svc/web -n shop --node ip-10-0-1-7

  # Which Service is this chain from a log line, and what is its path?
  %[1]s explain KUBE-SEP-GXKVICYM64SODBWJ --node ip-10-0-1-7

  # A client cannot reach 10.96.4.7:443 (or web.shop.svc.cluster.local): whose is it, what is wrong?
  %[1]s explain 10.96.4.7:443 --node ip-10-0-1-7

  # The same from a dump saved on the node and the objects saved from the cluster
  %[1]s explain svc/web -n shop --from-dump iptables-save.txt --from-objects objects.json --node ip-10-0-1-7

  # Every Service labelled app=web, in whichever namespace, as JSON
  %[1]s explain -A -l app=web --from-bundle ./bundle -o json

  # One port only
  %[1]s explain web -n shop --port https --from-dump ruleset.json --from-objects objects.json

  # On which nodes is svc/web programmed as its EndpointSlices say? (only
  # its chains are read on each node, 10 at a time)
  %[1]s explain svc/web -n shop --all-nodes --parallel 10`

// NewCmdExplain builds `explain`.
func NewCmdExplain(name string, streams genericiooptions.IOStreams, kube *genericclioptions.ConfigFlags) *cobra.Command {
	o := &ExplainOptions{analysisOptions: analysisOptions{IOStreams: streams}}
	cmd := &cobra.Command{
		Use:   "explain (svc/NAME | NAME.NAMESPACE.svc | IP[:PORT] | CHAIN | -l SELECTOR) [-n NAMESPACE | -A] [--port PORT] (--node NAME | --all-nodes | --node-selector LABELS | --from-bundle DIR | --from-dump FILE --from-objects FILE)",
		Short: "Show the path a packet for a Service takes on the node, against its EndpointSlices",
		Long: `Explain one Service on one node: for each port, the rules that catch its
traffic (cluster IP, node port, external and load-balancer IPs, source ranges,
"no endpoints" rejects), the chains a new connection goes through down to the
DNAT, each endpoint's share of new connections (multiplied out from the
probability cascade or the numgen map), and the EndpointSlices side by side:
endpoints missing from the rules (propagation lag, failed sync), endpoints in
the rules that the slices no longer have, shares that do not add up.

Use it first when a Service "gets no traffic" on a node.

The Service is svc/NAME (or NAME) in the -n namespace, else the kubeconfig
context's; -A looks it up in every namespace. A kube-proxy chain name
(KUBE-SVC-…, KUBE-SEP-…, service-…/endpoint-… of nftables, or just the
hash part) explains the Service that owns it. -l SELECTOR instead of a name
explains every Service with those labels.

With --all-nodes, --node-selector or --node repeated, explain sweeps: it
reads only the Service's chains on each node and says, per node, whether the
Service is programmed as its EndpointSlices (and topology) say; nodes that
agree are collapsed into one line.

` + exitStatusHelp,
		Example: fmt.Sprintf(explainExample, name),
		Args:    cobra.MaximumNArgs(1),
		RunE:    runAnalysis(o),
	}
	o.addInputFlags(cmd, kube)
	o.Inputs.addSelectFlags(cmd)
	o.Inputs.addNodeIPFlag(cmd)
	o.Sweep.AddFlags(cmd)
	cmd.Flags().StringVar(&o.Port, "port", "", "only this port (name or number)")
	o.Out.AddFlags(cmd, false)
	return cmd
}

// Complete reads the argument (svc/NAME, a chain, or none with -l) and the
// namespace: -n, else the kubeconfig context's, as kubectl does; none with
// -A.
func (o *ExplainOptions) Complete(cmd *cobra.Command, args []string) error {
	if err := o.analysisOptions.Complete(cmd, args); err != nil {
		return err
	}
	o.namespace = kubeNamespace(o.kube)
	if o.Inputs.AllNamespaces {
		o.namespace = ""
	}
	switch {
	case len(args) == 0 && o.Inputs.Selector == "":
		return usageErrorf("explain needs a Service (svc/NAME, its DNS name or IP[:PORT]), a chain name or -l SELECTOR\nUsage: %s", cmd.UseLine())
	case len(args) == 0:
		o.list = true
		return nil
	case o.Inputs.Selector != "":
		return fmt.Errorf("a Service name cannot be given with -l (--selector): name one Service or select several")
	}
	ref := args[0]
	if correlate.LooksLikeChain(ref) { // before svc/NAME: nftables names hold "/"
		o.chain = ref
		return nil
	}
	if ap, err := netip.ParseAddrPort(ref); err == nil {
		o.addr, o.addrPort = ap.Addr(), ap.Port()
		return nil
	}
	if a, err := netip.ParseAddr(ref); err == nil {
		o.addr = a
		return nil
	}
	if kind, name, ok := strings.Cut(ref, "/"); ok {
		switch strings.ToLower(kind) {
		case "svc", "service", "services":
		default:
			return fmt.Errorf("explain takes a Service (svc/NAME, NAME.NAMESPACE.svc, its IP or IP:PORT) or a chain name, not %q", ref)
		}
		ref = name
	}
	if ns, name, ok := correlate.ServiceDNSName(ref); ok {
		// its DNS name says its namespace, whatever -n says
		o.namespace, ref = ns, name
	}
	o.name = ref
	return nil
}

// Validate checks the options.
func (o *ExplainOptions) Validate() error {
	if !o.list && o.name == "" && o.chain == "" && !o.addr.IsValid() {
		return fmt.Errorf("name the Service: explain svc/NAME")
	}
	if err := o.analysisOptions.Validate(); err != nil {
		return err
	}
	if len(o.Inputs.Objects) == 0 && len(o.Inputs.Dumps) > 0 {
		return fmt.Errorf("explain needs the Services and EndpointSlices: pass --from-objects (kubectl get services,endpointslices -A -o json)")
	}
	return nil
}

// Run explains the Service (or each selected one).
func (o *ExplainOptions) Run() error {
	req := o.request()
	if o.namespace != "" && o.name != "" {
		req.Service = o.service()
	}
	if o.sweeping() {
		// One Service on many nodes: found in the sweep's objects before
		// any node is read, then only its chains are read on each.
		if o.list {
			return fmt.Errorf("explain sweeps one Service: name it (svc/NAME or a chain), not -l")
		}
		o.beforeSweep = func(objs *correlate.Objects, base *Request) error {
			if err := o.resolve(objs, nil); err != nil {
				return err
			}
			if _, err := correlate.ResolveService(objs, o.namespace, o.name); err != nil {
				return err // a typo: said once, not once per node
			}
			base.Service = o.service()
			o.sweepSubject = "svc " + o.namespace + "/" + o.name
			return nil
		}
	}
	if req.live() && !o.list {
		// Find the Service before reading the node: a typo, a chain name or
		// -A is answered from the cluster's objects, with no debug pod.
		objs, err := o.liveObjects(req)
		if err != nil {
			return err
		}
		switch err := o.resolve(objs, nil); {
		case err == nil:
			req.Objects, req.Service = objs, o.service()
			req.KernelTable = true // its conntrack entries: one grep
		case !mayBeDeleted(err):
			return err
		default:
			// Not in the API, and nothing close: it may be a deleted
			// Service the node still routes. Read the whole node, and
			// look for it in its stale chains.
			req.Objects = objs
		}
	}
	err := o.runRequest(req, o.explainOne)
	if errors.Is(err, errReadWhole) {
		// Only the named Service's objects and chains were read, and it
		// is not among them: read everything, for the did-you-mean
		// answers and for a deleted Service the rules still route.
		req.Service = nil
		err = o.runRequest(req, o.explainOne)
	}
	return err
}

// liveObjects are the objects a live explain reads before the node: the
// named Service's own (its Service and EndpointSlices: what explaining it
// looks at, TestTargetedExplainSameAnswer), else every Service and
// EndpointSlice, to look a chain, an address or -A up, or to suggest
// names close to one that is not there.
func (o *ExplainOptions) liveObjects(req Request) (*correlate.Objects, error) {
	if req.Service != nil && o.chain == "" && !o.addr.IsValid() && len(req.Files.Objects) == 0 {
		objs, err := o.loader.ServiceObjects(o.context(), o.namespace, o.name)
		if objs != nil || err != nil {
			return objs, err
		}
	}
	return o.loader.Objects(o.context(), req)
}

// service is the Service explained, once known.
func (o *ExplainOptions) service() *correlate.ServiceFilter {
	return &correlate.ServiceFilter{Namespace: o.namespace, Name: o.name}
}

// errReadWhole asks Run to read every object and chain again.
var errReadWhole = errors.New("explain: read the whole input")

// explainOne builds explain's report from what was read.
func (o *ExplainOptions) explainOne(l *Loaded) (built, error) {
	{
		if o.list {
			return o.explainList(l)
		}
		err := o.resolve(l.Objects, l.Node)
		var ex *diagnose.ServiceExplanation
		if err == nil {
			ex, err = diagnose.ExplainService(l.Node, o.namespace, o.name, o.Port)
		}
		if err != nil {
			if mayBeDeleted(err) && l.Narrowed && !o.request().Files.readsStdin() {
				return built{}, errReadWhole
			}
			former, ok := o.former(l.Node)
			if !ok || !mayBeDeleted(err) {
				return built{}, err
			}
			ex = former
		}
		ex.Lookup = o.lookup
		return built{report: ex, status: ex.Status,
			render: func(out io.Writer, t *Terminal) error { return renderExplanation(out, t, ex) },
			rows:   func() rows { return portRows(ex) }}, nil
	}
}

// mayBeDeleted: the lookup found no current Service and nothing close to
// what was asked (a typo is answered with its suggestions instead).
func mayBeDeleted(err error) bool {
	var nf *correlate.ServiceNotFoundError
	if errors.As(err, &nf) {
		return len(nf.Similar) == 0 && len(nf.Elsewhere) == 0
	}
	var gone *correlate.NoCurrentServiceError
	return errors.As(err, &gone)
}

// former explains a deleted Service the node's rules still route, named
// by what explain was given (name, address or chain).
func (o *ExplainOptions) former(node *diagnose.Node) (*diagnose.ServiceExplanation, bool) {
	if node == nil {
		return nil, false
	}
	m := correlate.FormerServiceMatch{Namespace: o.namespace, Name: o.name, Chain: o.chain}
	if o.addr.IsValid() {
		m.Address, m.Port = o.addr.String(), int(o.addrPort)
	}
	return diagnose.ExplainFormerService(node, m, o.Port)
}

// resolve turns a chain name into its Service, and a name looked up in
// every namespace (-A) into its namespace. node, when given, has the rules:
// a chain is then looked up in them first (a stale one is known there).
func (o *ExplainOptions) resolve(objs *correlate.Objects, node *diagnose.Node) error {
	if objs == nil {
		return fmt.Errorf("explain needs the Services and EndpointSlices: pass --from-objects (kubectl get services,endpointslices -A -o json)")
	}
	if o.chain != "" && o.name == "" {
		var found []correlate.Lookup
		if node != nil {
			found = diagnose.LookupChains(node, []string{o.chain}).Chains
		} else {
			found, _ = correlate.LookupChains([]string{o.chain}, nil, nil, objs)
		}
		if len(found) == 0 {
			return correlate.UnknownChainError([]string{o.chain}, node != nil, true)
		}
		ns, name, port, err := correlate.ServiceOfChain(o.chain, found)
		if err != nil {
			return err
		}
		o.namespace, o.name, o.lookup = ns, name, &found[0]
		if o.Port == "" {
			o.Port = port
		}
	}
	if o.addr.IsValid() && o.name == "" {
		// An address is the cluster's, whatever namespace -n says.
		svc, port, err := correlate.ServiceByAddress(objs, o.addr, o.addrPort)
		if err != nil {
			return err
		}
		o.namespace, o.name = svc.Namespace, svc.Name
		if o.Port == "" {
			o.Port = port
		}
	}
	if o.namespace == "" {
		svc, err := correlate.ResolveService(objs, "", o.name)
		if err != nil {
			return err
		}
		o.namespace = svc.Namespace
	}
	return nil
}

// explainList explains every Service -l (and -n, or -A) selects.
func (o *ExplainOptions) explainList(l *Loaded) (built, error) {
	sel := o.request().Select.filter(l.Objects)
	ns := o.namespace
	l.Node.Select = func(namespace, name string) bool {
		return (ns == "" || namespace == ns) && (sel == nil || sel(namespace, name))
	}
	list := diagnose.ExplainServices(l.Node)
	if len(list.Items) == 0 {
		where := "namespace " + ns
		if ns == "" {
			where = "any namespace"
		}
		return built{}, fmt.Errorf("no Service in %s matches -l %q", where, o.Inputs.Selector)
	}
	return built{report: list, status: list.Status,
		render: func(out io.Writer, t *Terminal) error {
			for i, ex := range list.Items {
				if i > 0 {
					fmt.Fprintln(out)
				}
				if err := renderExplanation(out, t, ex); err != nil {
					return err
				}
			}
			return nil
		},
		rows: func() rows {
			all := rows{kind: "serviceport"}
			var names []string
			for _, ex := range list.Items {
				for _, p := range ex.Ports {
					all.items = append(all.items, p)
					names = append(names, portName(p))
				}
			}
			all.name = func(i int) string { return names[i] }
			return all
		}}, nil
}

// portRows are one explanation's ports, a row each.
func portRows(ex *diagnose.ServiceExplanation) rows {
	return rows{kind: "serviceport", items: anySlice(ex.Ports), name: func(i int) string {
		return portName(ex.Ports[i])
	}}
}

// portName names a port's row: port/mode/family.
func portName(p diagnose.PortReport) string {
	return p.ServicePort + "/" + p.Mode + "/" + p.Family
}

// Tree depths: a port's children are indented 4 columns, theirs 8.
const (
	treeIndent1 = 4
	treeIndent2 = 8
)

func renderExplanation(out io.Writer, t *Terminal, ex *diagnose.ServiceExplanation) error {
	renderExplainHead(out, t, ex)
	renderExplainVerdict(out, t, ex)
	if len(ex.IPVS) > 0 {
		renderExplainIPVS(out, t, ex)
		renderExplainConntrack(out, t, ex)
		renderNotChecked(out, t, ex.NotChecked)
		return nil
	}
	if len(ex.Ports) == 0 {
		fmt.Fprintln(out, wrap("kube-proxy writes no rules for this Service (headless or ExternalName), or the dump has no table for its IP family.", t.Width))
		return nil
	}
	for _, pp := range ex.Ports {
		fmt.Fprintln(out, trimTrailing(explainPortTree(t, pp).String()))
	}
	renderExplainConntrack(out, t, ex)
	renderNotChecked(out, t, ex.NotChecked)
	return nil
}

// renderExplainHead prints what was asked (a chain's owner), the Service
// and its policies, and its cluster IPs.
func renderExplainHead(out io.Writer, t *Terminal, ex *diagnose.ServiceExplanation) {
	st := t.styles()
	if c := ex.Lookup; c != nil {
		what := string(c.Kind) + " chain of " + c.ServicePort
		if c.Endpoint != "" {
			what = "endpoint " + c.Endpoint + " of " + c.ServicePort
		}
		if !c.InDump {
			what += " (recomputed from the objects; not in the dump)"
		}
		fmt.Fprintln(out, fitParts(t.Width, "  ", " ", st.header.Render(t.chainName(c.Chain, t.Width)), "is", "the", what))
	}
	facts := []string{ex.Type + ",", "affinity " + ex.SessionAffinity}
	if ex.AffinitySeconds > 0 && ex.SessionAffinity == "ClientIP" {
		facts[1] += fmt.Sprintf(" (%ds)", ex.AffinitySeconds)
	}
	facts[1] += ","
	facts = append(facts, "internal policy "+ex.InternalTrafficPolicy)
	if ex.ExternalTrafficPolicy != "" {
		facts[len(facts)-1] += ","
		facts = append(facts, "external policy "+ex.ExternalTrafficPolicy)
	}
	head := []string{st.group.Render(fmt.Sprintf("svc %s/%s", ex.Namespace, ex.Name))}
	for _, f := range facts {
		head = append(head, st.dim.Render(f))
	}
	fmt.Fprintln(out, fitParts(t.Width, "  ", " ", head...))
	if len(ex.ClusterIPs) > 0 {
		fmt.Fprintln(out, st.dim.Render(wrapIndent("cluster IPs: "+strings.Join(ex.ClusterIPs, ", "), t.Width, 2)))
	}
}

// explainPortTree is one Service port as a tree: its entries, each route
// with its endpoints' shares, and the endpoints no rule reaches.
func explainPortTree(t *Terminal, pp diagnose.PortReport) *tree.Tree {
	st := t.styles()
	title := []string{pp.ServicePort, pp.Protocol + " ", pp.Mode, pp.Family}
	if pp.Topology != "" {
		title = append(title, " topology "+pp.Topology)
	}
	root := t.newTree(st.header.Render(fitParts(t.Width, "  ", " ", title...)))
	root.Child(explainEntries(t, pp))
	byEndpoint := map[string]correlate.EndpointPath{}
	for _, ep := range pp.Endpoints {
		byEndpoint[ep.Endpoint] = ep
	}
	var internal *correlate.Route
	for i, r := range pp.Routes {
		if r.Traffic == "internal" && internal == nil {
			internal = &pp.Routes[i]
		}
		if internal != nil && r.From != "outside" && r.Traffic == "external" && sameHops(r, *internal) && len(r.Other) == 0 {
			// a Local policy's pods and node: as cluster traffic
			line := r.Traffic + routeFromWords(r) + ": the endpoints of internal"
			if r.Masquerade {
				line += ", masqueraded"
			}
			root.Child(line)
			continue
		}
		root.Child(explainRoute(t, r, byEndpoint))
	}
	explainUnreached(t, root, pp)
	return root
}

// explainEntries are the rules that catch the port's traffic, as columns;
// the chain holding each rule only when it fits (the kind says it:
// KUBE-SERVICES or KUBE-NODEPORTS).
func explainEntries(t *Terminal, pp diagnose.PortReport) *tree.Tree {
	avail2 := t.Width - treeIndent2
	entries := t.newTree("entries")
	rows := make([][]string, 0, len(pp.Entries))
	for _, e := range pp.Entries {
		rows = append(rows, []string{e.Kind, e.Address, t.chainName(e.Chain, avail2) + " → " + t.chainName(e.Target, avail2)})
	}
	if tableWidth(nil, rows) > avail2 {
		for i, e := range pp.Entries {
			rows[i][2] = "→ " + t.chainName(e.Target, avail2)
		}
	}
	if tableWidth(nil, rows) > avail2 {
		// Still too wide (a long nftables name): the target below.
		for _, r := range rows {
			entries.Child(r[0] + "  " + r[1] + "\n  " + r[2])
		}
	} else {
		for _, line := range strings.Split(strings.TrimSuffix(alignColumns(rows, "", func(int, int) lipgloss.Style { return t.Renderer.NewStyle() }), "\n"), "\n") {
			if line != "" {
				entries.Child(line)
			}
		}
	}
	if len(pp.Entries) == 0 {
		entries.Child(t.styles().bad.Render("none: no rule catches this port's traffic"))
	}
	return entries
}

// explainRoute is one route: its chains, then each endpoint's share and
// DNAT, and what happens to the rest.
func explainRoute(t *Terminal, r correlate.Route, byEndpoint map[string]correlate.EndpointPath) *tree.Tree {
	st := t.styles()
	avail1, avail2 := t.Width-treeIndent1, t.Width-treeIndent2
	parts := []string{r.Traffic + routeFromWords(r) + ":"}
	for i, c := range r.Chains {
		if i > 0 {
			parts = append(parts, "→ "+t.chainName(c, avail1-4))
		} else {
			parts = append(parts, t.chainName(c, avail1-4))
		}
	}
	if r.AffinitySeconds > 0 {
		parts = append(parts, fmt.Sprintf("(ClientIP affinity %ds)", r.AffinitySeconds))
	}
	rt := t.newTree(fitParts(avail1, "    ", " ", parts...))
	for _, h := range r.Hops {
		ep := byEndpoint[h.Endpoint]
		hop := []string{percent(h.Share) + " "}
		dnat := "DNAT " + h.Endpoint
		if h.ByName {
			dnat = h.Endpoint + " (by name)"
		}
		if h.Chain != "" {
			hop = append(hop, t.chainName(h.Chain, avail2-2))
			dnat = "→ " + dnat
		}
		hop = append(hop, dnat, " "+sliceState(st, ep))
		rt.Child(fitParts(avail2, "  ", " ", hop...))
	}
	for _, o := range r.Other {
		style := st.warn
		if !o.KubeProxys {
			style = st.bad
		}
		what := map[string]string{"drop": "dropped", "reject": "rejected", "accept": "not DNATed: accepted as it is", "unknown": "not known"}[o.Verdict]
		if o.Chain != "" {
			what += " in " + t.chainName(o.Chain, avail2-20)
		}
		rt.Child(style.Render(fitParts(avail2, "  ", " ", percent(o.Share)+" ", what)))
	}
	if len(r.Hops) == 0 && len(r.Other) == 0 {
		rt.Child(st.warn.Render("no endpoint"))
	}
	if r.Note != "" {
		rt.Child(st.dim.Render(wrap(r.Note, avail2)))
	}
	return rt
}

// explainUnreached adds the endpoints in the slices that no rule reaches:
// missing where kube-proxy should have programmed them, else why it
// rightly left them out here.
func explainUnreached(t *Terminal, root *tree.Tree, pp diagnose.PortReport) {
	st := t.styles()
	avail2 := t.Width - treeIndent2
	var missing, unused []string
	for _, ep := range pp.Endpoints {
		if ep.InRules {
			continue
		}
		line := fitParts(avail2, "  ", "  ", ep.Endpoint, sliceState(st, ep))
		switch {
		case ep.Expected:
			missing = append(missing, line)
		case ep.Why != "":
			unused = append(unused, line+"\n"+st.dim.Render(wrap(ep.Why, avail2)))
		default:
			unused = append(unused, line)
		}
	}
	for _, group := range []struct {
		title string
		lines []string
	}{{"in the EndpointSlices, not in the rules", missing}, {"not used on this node", unused}} {
		if len(group.lines) == 0 {
			continue
		}
		nr := t.newTree(group.title)
		for _, m := range group.lines {
			nr.Child(m)
		}
		root.Child(nr)
	}
}

// renderExplainVerdict puts the verdict and every problem where the eye
// lands, above the trees that are their evidence (a Service of twenty
// endpoints had its error some fifty lines down).
func renderExplainVerdict(out io.Writer, t *Terminal, ex *diagnose.ServiceExplanation) {
	st := t.styles()
	n := map[diagnose.Severity]int{}
	for _, pp := range ex.Ports {
		for _, p := range pp.Problems {
			n[p.Severity]++
		}
	}
	for _, pp := range ex.IPVS {
		for _, p := range pp.Problems {
			n[p.Severity]++
		}
	}
	fmt.Fprintf(out, "%s  %s\n", statusText(st, ex.Status), st.dim.Render(fmt.Sprintf("(%s, %s, %s)",
		count(n[diagnose.SeverityError], "error"), count(n[diagnose.SeverityWarning], "warning"), count(n[diagnose.SeverityInfo], "note"))))
	for _, pp := range ex.Ports {
		for _, p := range pp.Problems {
			msg := p.Message
			if len(ex.Ports) > 1 {
				msg = pp.ServicePort + " (" + pp.Family + "): " + msg
			}
			label := severityStyle(st, p.Severity).Render(fmt.Sprintf("%-7s", p.Severity))
			fmt.Fprintln(out, "  "+label+" "+wrapIndent(msg, t.Width-10, 10))
		}
	}
	for _, pp := range ex.IPVS {
		for _, p := range pp.Problems {
			msg := p.Message
			if len(ex.IPVS) > 1 {
				msg = pp.ServicePort + " (" + string(pp.Family) + "): " + msg
			}
			label := severityStyle(st, p.Severity).Render(fmt.Sprintf("%-7s", p.Severity))
			fmt.Fprintln(out, "  "+label+" "+wrapIndent(msg, t.Width-10, 10))
		}
	}
}

// routeFromWords: where a route's connections start, when not where its
// kind of traffic usually does (cluster traffic from pods, external from
// outside).
func routeFromWords(r correlate.Route) string {
	switch {
	case r.From == "" || r.Traffic == "internal" && r.From == "pod" || r.Traffic == "external" && r.From == "outside":
		return ""
	case r.From == "pod":
		return " from a pod on the node"
	case r.From == "node":
		return " from the node"
	}
	return " from " + r.From
}

// sameHops: two routes reach the same endpoints with the same shares.
func sameHops(a, b correlate.Route) bool {
	if len(a.Hops) != len(b.Hops) {
		return false
	}
	for i := range a.Hops {
		if a.Hops[i].Endpoint != b.Hops[i].Endpoint || math.Abs(a.Hops[i].Share-b.Hops[i].Share) > 1e-9 {
			return false
		}
	}
	return true
}

// renderNotChecked lists what a report could not check, and what to pass.
func renderNotChecked(out io.Writer, t *Terminal, gaps []diagnose.Gap) {
	if len(gaps) == 0 {
		return
	}
	st := t.styles()
	fmt.Fprintln(out, st.warn.Render("not checked:"))
	for _, g := range gaps {
		line := g.Check + ": " + g.Reason
		if g.Remedy != "" {
			line += "; pass " + g.Remedy
		}
		fmt.Fprintln(out, "  - "+wrapIndent(line, t.Width-4, 4))
	}
}

// sliceState says what the EndpointSlices say of an endpoint.
func sliceState(st styles, ep correlate.EndpointPath) string {
	if !ep.InSlices {
		return st.bad.Render("not in slices")
	}
	var s []string
	switch {
	case ep.Ready != nil && *ep.Ready:
		s = append(s, "ready")
	case ep.Terminating != nil && *ep.Terminating && ep.Serving != nil && *ep.Serving:
		s = append(s, "terminating,serving")
	case ep.Terminating != nil && *ep.Terminating:
		s = append(s, "terminating")
	default:
		s = append(s, "not ready")
	}
	if ep.NodeName != "" {
		n := ep.NodeName
		if ep.Local {
			n += " (local)"
		}
		s = append(s, n)
	}
	return st.dim.Render(strings.Join(s, " "))
}

// shortName drops the readable part of an nftables per-service name.
func shortName(chain string) string {
	if n, ok := correlate.ParseNFTName(chain); ok {
		return n.Prefix + n.Hash + "-…"
	}
	return chain
}
