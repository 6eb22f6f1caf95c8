package correlate

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/proxyrules/kubectl-proxyrules/evaluate"
	"github.com/proxyrules/kubectl-proxyrules/inspect"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// Explain's routes are walked, not read off the chain names: each entry of
// a service port is a new connection the evaluator follows through the
// node's rules (package evaluate), so a route's endpoints, shares and
// verdicts are the kernel's, whatever wrote the rules.

// RouteOutcome is a way a route's connections go other than a DNAT to an
// endpoint: dropped, rejected, accepted without DNAT, or not known.
type RouteOutcome struct {
	Verdict string  `json:"verdict"`
	Share   float64 `json:"share"`
	// Chain and Rule are where it was decided (the rule's text; "" for a
	// chain's policy).
	Chain string `json:"chain,omitempty"`
	Rule  string `json:"rule,omitempty"`
	// KubeProxys: kube-proxy writes such a rule there (a "no endpoints"
	// reject, a Local-policy drop, a source-range drop).
	KubeProxys bool `json:"kubeProxys"`
	// Via is the endpoint chain the connections went into and came out
	// of again without a DNAT (one emptied by hand): where they were
	// meant to go, so the cause of this outcome.
	Via string `json:"via,omitempty"`
	// through are the endpoint chains the connections went through,
	// DNATed or not: reached by the rules all the same.
	through []string
}

// standInNodeIPs stand for the node's addresses when nothing says them:
// explain needs one to send node-port traffic to.
var standInNodeIPs = map[kubeproxy.Family]netip.Addr{
	kubeproxy.IPv4: netip.MustParseAddr("100.64.255.254"),
	kubeproxy.IPv6: netip.MustParseAddr("fd00:ffff::fffe"),
}

// standInPodCIDRs stand for the node's pods when neither its Node object,
// kube-proxy's configuration nor its rules say where they are.
var standInPodCIDRs = map[kubeproxy.Family]netip.Prefix{
	kubeproxy.IPv4: netip.MustParsePrefix("10.244.0.0/24"),
	kubeproxy.IPv6: netip.MustParsePrefix("fd00:10:244::/64"),
}

// walker walks a node's service entries; one per node.
type walker struct {
	ev      *evaluate.Evaluator
	nodeIPs map[kubeproxy.Family]netip.Addr
	pod     map[kubeproxy.Family]netip.Addr
	// StandIns: what the walks had to make up (the node's address, its
	// pods'), for the report.
	standIns []string
}

// walkerFor is the explainer's walker for the node nv.
func (x *explainer) walkerFor(nv NodeView) *walker {
	key := nv.Name + "\x00" + strings.Join(nv.IPs, ",")
	if w := x.walkers[key]; w != nil {
		return w
	}
	w := &walker{nodeIPs: map[kubeproxy.Family]netip.Addr{}, pod: map[kubeproxy.Family]netip.Addr{}}
	var addrs []netip.Addr
	for _, s := range nv.IPs {
		if a, err := netip.ParseAddr(s); err == nil {
			addrs = append(addrs, a.Unmap())
		}
	}
	addrs = append(addrs, x.objs.NodeAddresses(nv.Name)...)
	addrs = append(addrs, nodePortIPs(x.rs)...)
	for _, a := range addrs {
		fam := familyOf(a)
		if _, ok := w.nodeIPs[fam]; !ok {
			w.nodeIPs[fam] = a
		}
	}
	for _, fam := range []kubeproxy.Family{kubeproxy.IPv4, kubeproxy.IPv6} {
		if _, ok := w.nodeIPs[fam]; !ok {
			w.nodeIPs[fam] = standInNodeIPs[fam]
			addrs = append(addrs, standInNodeIPs[fam])
			w.standIns = append(w.standIns, "the node's "+string(fam)+" address (a stand-in was used)")
		}
	}
	cidrs := append(x.objs.PodCIDRsOf(nv.Name), ClusterCIDRsFromRules(x.rs)...)
	for _, fam := range []kubeproxy.Family{kubeproxy.IPv4, kubeproxy.IPv6} {
		for _, c := range cidrs {
			if familyOf(c.Addr()) == fam {
				w.pod[fam] = PodSource(c, x.objs)
				break
			}
		}
		if !w.pod[fam].IsValid() {
			w.pod[fam] = PodSource(standInPodCIDRs[fam], x.objs)
			w.standIns = append(w.standIns, "the node's "+string(fam)+" pod addresses (a stand-in was used)")
		}
	}
	w.ev = evaluate.New(x.rs, evaluate.Node{Addresses: addrs})
	x.walkers[key] = w
	return w
}

func familyOf(a netip.Addr) kubeproxy.Family {
	if a.Is4() || a.Is4In6() {
		return kubeproxy.IPv4
	}
	return kubeproxy.IPv6
}

// nodePortIPs are the addresses of nftables' nodeport-ips sets: the
// node's primary addresses, where kube-proxy takes node-port traffic.
func nodePortIPs(rs *inspect.Ruleset) []netip.Addr {
	var out []netip.Addr
	for _, t := range rs.NFTables {
		if !t.IsKubeProxy() {
			continue
		}
		if s := t.Set("nodeport-ips"); s != nil {
			for _, el := range s.Elements {
				if len(el.Key) == 1 {
					if a, err := netip.ParseAddr(el.Key[0]); err == nil {
						out = append(out, a.Unmap())
					}
				}
			}
		}
	}
	return out
}

// ClusterCIDRsFromRules are the cluster CIDRs kube-proxy's masquerade
// rules name: `! -s CIDR … -j KUBE-MARK-MASQ` first in a KUBE-SVC- chain
// (iptables), `ip saddr != CIDR … mark set` in services (nftables).
func ClusterCIDRsFromRules(rs *inspect.Ruleset) []netip.Prefix {
	var out []netip.Prefix
	add := func(s string) {
		if p, err := netip.ParsePrefix(s); err == nil && !slices.Contains(out, p.Masked()) {
			out = append(out, p.Masked())
		}
	}
	for _, t := range rs.IPTables {
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
	for _, t := range rs.NFTables {
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
	return out
}

// ExternalSource is the client outside a route from outside comes from:
// one the load balancer's source ranges allow, when it has any.
func ExternalSource(sp *ServicePort, fam kubeproxy.Family) netip.Addr {
	for _, r := range sp.SourceRanges {
		if p, err := netip.ParsePrefix(strings.TrimSpace(r)); err == nil && familyOf(p.Addr()) == fam {
			if p.Bits() == p.Addr().BitLen() {
				return p.Addr().Unmap()
			}
			return p.Masked().Addr().Next().Unmap()
		}
	}
	if fam == kubeproxy.IPv6 {
		return netip.MustParseAddr("2001:db8::1")
	}
	return netip.MustParseAddr("203.0.113.1")
}

// walkRoute walks one entry of sp from origin and turns the outcomes into
// a route: the DNATs as hops with their shares, the rest as outcomes, in
// the case where nothing the walk could not evaluate holds (a new client,
// no interface matched).
func (w *walker) walkRoute(sp *ServicePort, traffic string, e TraceEntry, origin evaluate.Origin, fam kubeproxy.Family) Route {
	src := w.pod[fam]
	switch origin {
	case evaluate.FromNode:
		src = w.nodeIPs[fam]
	case evaluate.FromOutside:
		src = ExternalSource(sp, fam)
	}
	pkt := evaluate.Packet{Family: fam, Protocol: sp.Proto(), Src: netip.AddrPortFrom(src, 40000), Dst: e.Dst, Origin: origin}
	// Every endpoint is an outcome, twice with affinity: a Service larger
	// than the walk's default bound still gets all of its own. The
	// result is the evaluator's scratch: the route keeps copies of what it
	// needs (strings), nothing of the outcomes or their paths.
	res := w.ev.WalkScratch(pkt, evaluate.Options{Brief: true, MaxOutcomes: max(evaluate.DefaultMaxOutcomes, 4*len(sp.Endpoints)+1024)})
	rt := Route{Traffic: traffic, Entry: e.Kind, Address: e.Dst.String(), From: string(origin), Source: src.String(), Chains: []string{},
		Hops: make([]RouteHop, 0, len(res.Outcomes)), Truncated: res.Truncated}
	sum := 0.0
	type hopKey struct{ endpoint, chain string }
	hopAt := make(map[hopKey]int, len(res.Outcomes))
	var best evaluate.Outcome
	haveBest := false
	maps := map[string]mapEntries{} // the numgen maps of the route's rules, read once
	for _, o := range res.Outcomes {
		if !ExplainCase(o.Assumes) {
			continue
		}
		if o.Affinity != nil && o.Affinity.Seconds > 0 {
			rt.AffinitySeconds = o.Affinity.Seconds
		}

		if !haveBest || o.Probability.Float64() > best.Probability.Float64() && (o.DNAT || !best.DNAT) || o.DNAT && !best.DNAT {
			best, haveBest = o, true
		}
		hop, ok := RouteHop{}, false
		switch o.Verdict {
		case evaluate.VerdictDNAT:
			hop, ok = dnatHop(o, maps), true
		case evaluate.VerdictUnknown:
			hop, ok = namedHop(o, sp)
		}
		if !ok {
			// Alike outcomes are one (a DROP after DNAT ends every
			// endpoint's branch the same way); the endpoint chains they
			// went through were reached all the same.
			ro := outcomeOf(o)
			if i := slices.IndexFunc(rt.Other, func(x RouteOutcome) bool {
				return x.Verdict == ro.Verdict && x.Chain == ro.Chain && x.Rule == ro.Rule && x.Via == ro.Via
			}); i >= 0 {
				rt.Other[i].merge(ro)
			} else {
				rt.Other = append(rt.Other, ro)
			}
			continue
		}
		sum += o.Probability.Float64()
		if o.Masquerade {
			rt.Masquerade = true
		}
		k := hopKey{hop.Endpoint, hop.Chain}
		if i, ok := hopAt[k]; ok {
			rt.Hops[i].Share += hop.Share
			continue
		}
		hopAt[k] = len(rt.Hops)
		rt.Hops = append(rt.Hops, hop)
	}
	rt.ShareSum = sum
	rt.Chains = routeChains(best.Hops())
	for _, n := range res.NotModelled {
		if strings.Contains(n.What, "affinity record") || slices.Contains(rt.Assumed, n.What) {
			continue
		}
		if strings.HasPrefix(n.Chain, kubeproxy.PrefixKube) && strings.Contains(n.What, "nft does not show") {
			rt.Hidden = append(rt.Hidden, n.What)
			continue
		}
		rt.Assumed = append(rt.Assumed, n.What)
	}
	return rt
}

// ExplainCase: an outcome with these assumptions is of the case explain
// shows: a new client (no affinity record), no interface or foreign match
// that the walk could not evaluate holding, and kube-proxy's own rules
// matching where nft hides a part of them (`xt match sctp` of a
// KUBE-SERVICES rule).
func ExplainCase(as []evaluate.Assumption) bool {
	for _, a := range as {
		if a.Holds != kubeProxyHidden(a) {
			return false
		}
	}
	return true
}

// kubeProxyHidden: the assumption is about a part of kube-proxy's own
// rule that nft does not show.
func kubeProxyHidden(a evaluate.Assumption) bool {
	return strings.HasPrefix(a.Chain, kubeproxy.PrefixKube) && strings.Contains(a.What, "nft does not show")
}

// namedHop is an outcome the walk could not finish in an endpoint chain
// that names one of sp's endpoints (nft does not show iptables-nft's IPv6
// DNAT): the endpoint, by the chain's name.
func namedHop(o evaluate.Outcome, sp *ServicePort) (RouteHop, bool) {
	last, ok := lastHop(o)
	if !ok || !kubeproxy.HasAnyPrefix(last.Chain, kubeproxy.PrefixEndpoint, kubeproxy.NFTPrefixEndpoint) {
		return RouteHop{}, false
	}
	ep := ""
	if n, ok := ParseNFTName(last.Chain); ok {
		ep = n.Endpoint
	} else {
		for _, e := range sp.Endpoints {
			if EndpointChain(sp.String(), sp.Proto(), e.String()) == last.Chain {
				ep = e.String()
			}
		}
	}
	if ep == "" {
		return RouteHop{}, false
	}
	hop := RouteHop{Chain: last.Chain, Endpoint: ep, Share: o.Probability.Float64(), ByName: true}
	o.Backward(func(h evaluate.Hop) bool {
		if (h.Verb == "jump" || h.Verb == "goto") && h.Target == last.Chain {
			hop.Rule = h.Text
			return false
		}
		return true
	})
	return hop, true
}

func lastHop(o evaluate.Outcome) (evaluate.Hop, bool) {
	var last evaluate.Hop
	found := false
	o.Backward(func(h evaluate.Hop) bool {
		last, found = h, true
		return false
	})
	return last, found
}

// outcomeOf is a non-DNAT outcome as a route shows it: where it was
// decided, and whether kube-proxy writes such a rule there.
func outcomeOf(o evaluate.Outcome) RouteOutcome {
	ro := RouteOutcome{Verdict: string(o.Verdict), Share: o.Probability.Float64()}
	if last, ok := lastHop(o); ok {
		ro.Chain, ro.Rule = last.Chain, last.Text
		ro.KubeProxys = kubeProxyVerdict(last, o.Verdict)
	}
	if c := endpointChainOf(o); c != "" {
		ro.through = []string{c}
		if !o.DNAT {
			ro.Via = c
		}
	}
	return ro
}

// merge adds alike outcome o to ro.
func (ro *RouteOutcome) merge(o RouteOutcome) {
	ro.Share += o.Share
	for _, c := range o.through {
		if !slices.Contains(ro.through, c) {
			ro.through = append(ro.through, c)
		}
	}
}

// passedBy: some route's connections went through chain without being
// DNATed to an endpoint in the end.
func passedBy(routes []Route, chain string) bool {
	for _, r := range routes {
		for _, o := range r.Other {
			if slices.Contains(o.through, chain) {
				return true
			}
		}
	}
	return false
}

// endpointChainOf is the last endpoint chain o's path jumped to, "" for
// none.
func endpointChainOf(o evaluate.Outcome) string {
	via := ""
	o.Backward(func(h evaluate.Hop) bool {
		if (h.Verb == "jump" || h.Verb == "goto") && kubeproxy.HasAnyPrefix(h.Target, kubeproxy.PrefixEndpoint, kubeproxy.NFTPrefixEndpoint) {
			via = h.Target
			return false
		}
		return true
	})
	return via
}

// kubeProxyVerdict: kube-proxy writes such a verdict in that chain: the
// "no endpoints" rejects, the Local policy's "no local endpoints" drops,
// the source-range drops, the INVALID and localhost drops; a DROP where
// kube-proxy rejects (or anything in a chain of its own that only
// dispatches) is somebody else's.
func kubeProxyVerdict(h evaluate.Hop, verdict evaluate.Verdict) bool {
	reject, drop := verdict == evaluate.VerdictReject, verdict == evaluate.VerdictDrop
	switch {
	case h.Table == kubeproxy.TableFilter:
		switch h.Chain {
		case kubeproxy.ChainServices, kubeproxy.ChainExternalServices:
			// "has no endpoints" rejects; "has no local endpoints" drops
			// (a Local traffic policy). proxier.go writes these comments
			// in large-cluster mode too: a DROP or REJECT with another
			// comment is somebody else's. Read through nft, iptables-nft
			// may show no comment at all: then kube-proxy's rule is
			// known by its shape, one Service port (a dport).
			if !strings.Contains(h.Text, "comment") {
				return (reject || drop) && strings.Contains(h.Text, "dport")
			}
			return reject && strings.Contains(h.Text, "has no endpoints") || drop && strings.Contains(h.Text, "has no local endpoints")
		case kubeproxy.ChainProxyFirewall, kubeproxy.ChainForward, kubeproxy.ChainFirewall:
			return drop
		}
	case h.Table == kubeproxy.NFTTable:
		switch h.Chain {
		case "reject-chain":
			return reject
		case "service-endpoints-check", "nodeport-endpoints-check":
			return drop // the vmap's "no local endpoints" element
		case "cluster-ips-check":
			return reject || drop
		}
		return drop && strings.HasPrefix(h.Chain, kubeproxy.NFTPrefixFirewall)
	}
	return false
}

// dnatHop is a DNAT outcome as a route hop: its endpoint, the endpoint
// chain that DNATed (none for nftables' inline maps) and the rule that
// picked it.
func dnatHop(o evaluate.Outcome, maps map[string]mapEntries) RouteHop {
	hop := RouteHop{Endpoint: o.Destination.String(), Share: o.Probability.Float64()}
	var dnat evaluate.Hop
	found, done := false, false
	o.Backward(func(h evaluate.Hop) bool {
		switch {
		case !found:
			if h.Verb == "dnat" {
				dnat, found = h, true
				if !kubeproxy.HasAnyPrefix(h.Chain, kubeproxy.PrefixEndpoint, kubeproxy.NFTPrefixEndpoint) {
					hop.Rule = onlyEntry(maps, h.Text, mapData(o.Destination))
					done = true
					return false
				}
				hop.Chain = h.Chain
			}
		case (h.Verb == "jump" || h.Verb == "goto") && h.Target == dnat.Chain:
			// the rule that sent the packet into the endpoint chain
			hop.Rule = onlyEntry(maps, h.Text, dnat.Chain)
			done = true
			return false
		}
		return true
	})
	if found && !done {
		hop.Rule = dnat.Text
	}
	return hop
}

// mapData is an endpoint as a numgen DNAT map spells its data: "10.0.0.1
// . 80".
func mapData(ap netip.AddrPort) string {
	return ap.Addr().String() + " . " + strconv.Itoa(int(ap.Port()))
}

// onlyEntry is a rule with a numgen map cut to the entry whose data is
// want, exactly (10.0.0.1 . 80 is not 10.0.0.1 . 8080): the whole map,
// once per hop, would make output grow with the square of the endpoints.
// The rule as it is otherwise.
func onlyEntry(maps map[string]mapEntries, rule, want string) string {
	m, ok := maps[rule]
	if !ok {
		m = numgenEntries(rule)
		maps[rule] = m
	}
	if k, ok := m.byData[want]; ok {
		return m.rule(rule, k)
	}
	return rule
}

// routeChains are the chains a route goes through, as explain shows
// them: kube-proxy's dispatch chain (KUBE-SERVICES, services) and the
// chains jumped or gone to from there, in the hook where it starts, up to
// the DNAT; not the marking and firewall helpers, not the endpoint chain.
func routeChains(path []evaluate.Hop) []string {
	out := []string{}
	hook := ""
	for _, h := range path {
		if h.Table != kubeproxy.TableNAT && h.Table != kubeproxy.NFTTable || hook != "" && h.Hook != hook {
			continue
		}
		if h.Verb == "dnat" && hook != "" {
			break
		}
		if h.Verb != "jump" && h.Verb != "goto" {
			continue
		}
		target := h.Target
		if hook == "" {
			if target != kubeproxy.ChainServices && target != "services" {
				continue
			}
			hook = h.Hook
		}
		if kubeproxy.HasAnyPrefix(target, kubeproxy.PrefixEndpoint, kubeproxy.NFTPrefixEndpoint, kubeproxy.PrefixFirewall, kubeproxy.NFTPrefixFirewall) ||
			target == kubeproxy.ChainMarkMasq || slices.Contains(out, target) {
			continue
		}
		out = append(out, target)
	}
	return out
}

// walkRoutes walks pp's entries (the cluster IP from a pod on the node;
// the first external entry from outside, and for a Local external policy
// also from a pod and from the node), then joins the endpoints the walks
// reach with the slices and looks at the endpoint chains: those kube-proxy
// wrote for expected endpoints that no route reaches (the jump to them was
// removed), that are empty (flushed), or whose name belongs to another
// endpoint.
func (x *explainer) walkRoutes(pp *PortPath, sp *ServicePort, fam kubeproxy.Family, nv NodeView) {
	w := x.walkerFor(nv)
	pp.Routes = []Route{}
	for _, ip := range sp.ClusterIPs {
		if a, err := netip.ParseAddr(ip); err == nil && familyOf(a) == fam {
			e := TraceEntry{Kind: "clusterIP", Dst: netip.AddrPortFrom(a.Unmap(), uint16(sp.Port))}
			pp.Routes = append(pp.Routes, w.walkRoute(sp, "internal", e, evaluate.FromPod, fam))
			break
		}
	}
	if e, ok := firstExternal(sp, fam, w.nodeIPs[fam]); ok {
		out := w.walkRoute(sp, "external", e, evaluate.FromOutside, fam)
		if sp.ExternalLocal {
			out.Note = localPolicyNote(out, sp)
			pod := w.walkRoute(sp, "external", e, evaluate.FromPod, fam)
			pod.Note = "pods on this node are not held to the Local policy: they go to every endpoint, as cluster traffic does"
			node := w.walkRoute(sp, "external", e, evaluate.FromNode, fam)
			node.Note = "the node itself is not held to the Local policy either (masqueraded, to every endpoint)"
			pp.Routes = append(pp.Routes, out, pod, node)
		} else {
			pp.Routes = append(pp.Routes, out)
		}
	}
	pp.StandIns = w.standIns
	joinEndpoints(pp, sp, pp.exp)
	spn, proto := sp.String(), sp.Proto()
	if pp.Mode == string(kubeproxy.ModeIPTables) {
		nat := findIPTable(x.rs, fam, kubeproxy.TableNAT, "")
		for _, ep := range pp.Endpoints {
			if !ep.Expected || ep.InRules || nat == nil {
				continue
			}
			c := EndpointChain(spn, proto, ep.Endpoint)
			ch := nat.Chain(c)
			switch {
			case ch == nil:
			case len(ch.Rules) == 0 && jumpedTo(nat, c):
				if pp.EmptyEndpointChains == nil {
					pp.EmptyEndpointChains = map[string]string{}
				}
				pp.EmptyEndpointChains[ep.Endpoint] = c
			case passedBy(pp.Routes, c):
				// Reached, DNATed, and then dropped or rejected: the
				// rule that did it is the cause, judged on its own.
			default:
				if pp.OrphanChains == nil {
					pp.OrphanChains = map[string]string{}
				}
				pp.OrphanChains[ep.Endpoint] = c
			}
		}
	}
	for _, r := range pp.Routes {
		for _, h := range r.Hops {
			if h.Chain == "" || h.Endpoint == "" {
				continue
			}
			if pp.Mode == string(kubeproxy.ModeNFTables) {
				if n, ok := ParseNFTName(h.Chain); ok && !n.Truncated && n.Endpoint != "" && n.Endpoint != h.Endpoint {
					pp.Misnamed = append(pp.Misnamed, MisnamedHop{Chain: h.Chain, Endpoint: h.Endpoint, NameSays: n.Endpoint})
				}
			} else if strings.HasPrefix(h.Chain, kubeproxy.PrefixEndpoint) && EndpointChain(spn, proto, h.Endpoint) != h.Chain {
				pp.Misnamed = append(pp.Misnamed, MisnamedHop{Chain: h.Chain, Endpoint: h.Endpoint})
			}
		}
	}
	// nftables endpoint chains (ClientIP affinity) flushed: the walk
	// skips them, as the kernel does.
	if pp.Mode == string(kubeproxy.ModeNFTables) {
		for _, t := range x.rs.NFTables {
			if !t.IsKubeProxy() || t.IPFamily() != fam {
				continue
			}
			for _, ep := range pp.Endpoints {
				if !ep.Expected || ep.InRules {
					continue
				}
				c := kubeproxy.NFTPrefixEndpoint + NFTEndpointBase(sp.Namespace, sp.Name, proto, sp.PortName, ep.Endpoint)
				switch ch := t.Chain(c); {
				case ch == nil:
				case len(ch.Rules) == 0:
					if pp.EmptyEndpointChains == nil {
						pp.EmptyEndpointChains = map[string]string{}
					}
					pp.EmptyEndpointChains[ep.Endpoint] = c
				case passedBy(pp.Routes, c):
				default:
					// Its rules are there, but new connections do not
					// get there: the numgen map lost it (or all).
					if pp.OrphanChains == nil {
						pp.OrphanChains = map[string]string{}
					}
					pp.OrphanChains[ep.Endpoint] = c
				}
			}
		}
	}
	x.unkeptAffinity(pp, sp, fam)
}

// unkeptAffinity finds, for a Service port with ClientIP affinity, the
// endpoints whose chain records its clients (iptables `-m recent --set
// --name CHAIN`, nftables `update @affinity-…`) while the service chain has
// no rule that sends a client with that record back to it (`--rcheck
// --name CHAIN -j CHAIN`, `ip saddr @affinity-… goto endpoint-…`): a
// returning client is spread over all endpoints again. Where the rules'
// text does not show the record (iptables-nft read through nft: `xt match
// recent`), nothing is said.
func (x *explainer) unkeptAffinity(pp *PortPath, sp *ServicePort, fam kubeproxy.Family) {
	if sp.AffinitySeconds <= 0 {
		return
	}
	spn, proto := sp.String(), sp.Proto()
	unkept := func(ep, svc string) {
		if pp.AffinityUnkept == nil {
			pp.AffinityUnkept = map[string]string{}
		}
		pp.AffinityUnkept[ep] = svc
	}
	if pp.Mode == string(kubeproxy.ModeIPTables) {
		nat := findIPTable(x.rs, fam, kubeproxy.TableNAT, "")
		if nat == nil {
			return
		}
		svc := nat.Chain(ServiceChain(spn, proto))
		if svc == nil {
			return
		}
		for _, ep := range pp.Endpoints {
			sep := EndpointChain(spn, proto, ep.Endpoint)
			c := nat.Chain(sep)
			if !ep.InRules || c == nil || !slices.ContainsFunc(c.Rules, func(r *inspect.IPRule) bool {
				return strings.Contains(r.Text, "--set") && strings.Contains(r.Text+" ", "--name "+sep+" ")
			}) {
				continue
			}
			if !slices.ContainsFunc(svc.Rules, func(r *inspect.IPRule) bool {
				return r.Target == sep && strings.Contains(r.Text, "--rcheck") && strings.Contains(r.Text+" ", "--name "+sep+" ")
			}) {
				unkept(ep.Endpoint, svc.Name)
			}
		}
		return
	}
	for _, t := range x.rs.NFTables {
		if !t.IsKubeProxy() || t.IPFamily() != fam {
			continue
		}
		svc := t.Chain(kubeproxy.NFTPrefixService + NFTServiceBase(sp.Namespace, sp.Name, proto, sp.PortName))
		if svc == nil {
			continue
		}
		for _, ep := range pp.Endpoints {
			base := NFTEndpointBase(sp.Namespace, sp.Name, proto, sp.PortName, ep.Endpoint)
			epc, set := kubeproxy.NFTPrefixEndpoint+base, "affinity-"+base
			c := t.Chain(epc)
			if !ep.InRules || c == nil || !slices.ContainsFunc(c.Rules, func(r *inspect.NFTRule) bool { return slices.Contains(r.Info.Sets, set) }) {
				continue
			}
			if !slices.ContainsFunc(svc.Rules, func(r *inspect.NFTRule) bool {
				return slices.Contains(r.Info.Sets, set) && (slices.Contains(r.Info.Gotos, epc) || slices.Contains(r.Info.Jumps, epc))
			}) {
				unkept(ep.Endpoint, svc.Name)
			}
		}
	}
}

// localPolicyNote says what external clients get on this node under
// externalTrafficPolicy Local, from the walk: dropped (and the health-check
// node port says so), or this node's endpoints only.
func localPolicyNote(r Route, sp *ServicePort) string {
	if len(r.Hops) == 0 {
		for _, o := range r.Other {
			if o.Verdict == string(evaluate.VerdictDrop) {
				s := "external clients are dropped on this node: the policy is Local and none of the endpoints is here"
				if sp.HealthCheckNodePort > 0 {
					s += fmt.Sprintf("; its health-check node port %d answers that it has none, so load balancers should not send traffic here", sp.HealthCheckNodePort)
				}
				return s
			}
		}
		return ""
	}
	if r.Masquerade {
		return "external clients go to this node's own endpoints only"
	}
	return "external clients go to this node's own endpoints only, and keep their source address (no masquerade)"
}

// firstExternal is the external entry explain walks: an external IP, else
// a load-balancer IP, else the node port on the node's address.
func firstExternal(sp *ServicePort, fam kubeproxy.Family, nodeIP netip.Addr) (TraceEntry, bool) {
	for _, list := range []struct {
		kind string
		ips  []string
	}{{"externalIP", sp.ExternalIPs}, {"loadBalancerIP", sp.LoadBalancerIPs}} {
		for _, ip := range list.ips {
			if a, err := netip.ParseAddr(ip); err == nil && familyOf(a) == fam {
				return TraceEntry{Kind: list.kind, Dst: netip.AddrPortFrom(a.Unmap(), uint16(sp.Port))}, true
			}
		}
	}
	if sp.NodePort > 0 && nodeIP.IsValid() {
		return TraceEntry{Kind: "nodePort", Dst: netip.AddrPortFrom(nodeIP, uint16(sp.NodePort))}, true
	}
	return TraceEntry{}, false
}

// jumpedTo: some rule of t jumps or goes to chain.
func jumpedTo(t *inspect.IPTable, chain string) bool {
	for _, c := range t.Chains {
		for _, r := range c.Rules {
			if r.Target == chain {
				return true
			}
		}
	}
	return false
}
