package diagnose

import (
	"fmt"
	"math"
	"net/netip"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
)

// Outcomes: what each Service entry does to a new connection, on each
// side. The routes explain walks through the node's rules (package
// evaluate, by way of correlate.ExplainAll) are compared by what they do
// (the endpoints the connections are DNATed to and their shares, the
// verdicts of the rest, masquerade), never by the chains they go through:
// an iptables node and an nftables node that do the same to every packet
// do not differ, and a node whose rules look alike but send a third of the
// connections elsewhere does.

// RouteDiff is one route of a Service port (an entry walked from one kind
// of client) whose connections fare otherwise on A than on B.
type RouteDiff struct {
	// Traffic is internal (cluster IP) or external; Entry what was walked
	// (clusterIP, nodePort, externalIP, loadBalancerIP); From where the
	// connection started (pod, node, outside).
	Traffic string `json:"traffic"`
	Entry   string `json:"entry"`
	From    string `json:"from"`
	// A and B are what the route does on each side; null where the side
	// has no such route.
	A *RouteFate `json:"a"`
	B *RouteFate `json:"b"`
	// Differs names what differs: route (one side has none), endpoints
	// (which are reached), shares (how new connections split), verdicts
	// (what happens to those not DNATed), masquerade.
	Differs []string `json:"differs"`
	// Summary says it for a person: "cluster IP 10.96.10.1:80 from a pod:
	// A 33.3% each to 3 endpoints; B 50% to …, 10.244.1.11:8080 gets none".
	Summary string `json:"summary"`
}

// RouteFate is what one route does to new connections on one side.
type RouteFate struct {
	// Address is the IP:PORT walked (a node port on the side's node
	// address, which may differ between the two).
	Address string `json:"address"`
	// Endpoints are the endpoints connections are DNATed to, with their
	// share of new connections, by address.
	Endpoints []EndpointShare `json:"endpoints"`
	// Verdicts are the shares not DNATed: dropped, rejected, accepted as
	// they are (accept), or not known; with the chain and rule that
	// decided.
	Verdicts []VerdictShare `json:"verdicts"`
	// Masquerade: the DNATed connections are masqueraded.
	Masquerade bool `json:"masquerade"`
	// ShareSum is the endpoints' shares together: 1 when every new
	// connection is DNATed.
	ShareSum float64 `json:"shareSum"`
}

// EndpointShare is an endpoint and its share of new connections.
type EndpointShare struct {
	Endpoint string  `json:"endpoint"`
	Share    float64 `json:"share"`
}

// VerdictShare is a share of new connections that is not DNATed.
type VerdictShare struct {
	// Verdict: drop, reject, accept (not DNATed), unknown.
	Verdict string  `json:"verdict"`
	Share   float64 `json:"share"`
	Chain   string  `json:"chain,omitempty"`
	Rule    string  `json:"rule,omitempty"`
	// KubeProxys: kube-proxy writes such a rule there.
	KubeProxys bool `json:"kubeProxys"`
}

// shareTolerance is how far two shares may be apart and still be the
// same: iptables writes probabilities with ten decimals, nftables' numgen
// is exact, and the kernel's statistic match rounds to 2^-31.
const shareTolerance = 1e-5

func sameShare(a, b float64) bool { return math.Abs(a-b) <= shareTolerance }

// routeKey names a route independently of the node: a node port is walked
// on each node's own address, so only its port counts.
type routeKey struct{ traffic, entry, from, address string }

func keyOf(r correlate.Route) routeKey {
	addr := r.Address
	if r.Entry == "nodePort" {
		if ap, err := netip.ParseAddrPort(r.Address); err == nil {
			addr = ":" + strconv.Itoa(int(ap.Port()))
		}
	}
	return routeKey{r.Traffic, r.Entry, r.From, addr}
}

// fateOf is a walked route as what it does.
func fateOf(r correlate.Route) *RouteFate {
	f := &RouteFate{Address: r.Address, Endpoints: []EndpointShare{}, Verdicts: []VerdictShare{}, Masquerade: r.Masquerade, ShareSum: r.ShareSum}
	at := map[string]int{}
	for _, h := range r.Hops {
		if i, ok := at[h.Endpoint]; ok {
			f.Endpoints[i].Share += h.Share
			continue
		}
		at[h.Endpoint] = len(f.Endpoints)
		f.Endpoints = append(f.Endpoints, EndpointShare{Endpoint: h.Endpoint, Share: h.Share})
	}
	sort.Slice(f.Endpoints, func(i, j int) bool { return endpointLess(f.Endpoints[i].Endpoint, f.Endpoints[j].Endpoint) })
	type vk struct {
		verdict, chain, rule string
		kp                   bool
	}
	vat := map[vk]int{}
	for _, o := range r.Other {
		k := vk{o.Verdict, o.Chain, o.Rule, o.KubeProxys}
		if i, ok := vat[k]; ok {
			f.Verdicts[i].Share += o.Share
			continue
		}
		vat[k] = len(f.Verdicts)
		f.Verdicts = append(f.Verdicts, VerdictShare{Verdict: o.Verdict, Share: o.Share, Chain: o.Chain, Rule: o.Rule, KubeProxys: o.KubeProxys})
	}
	sort.SliceStable(f.Verdicts, func(i, j int) bool {
		if f.Verdicts[i].Verdict != f.Verdicts[j].Verdict {
			return f.Verdicts[i].Verdict < f.Verdicts[j].Verdict
		}
		return f.Verdicts[i].Share > f.Verdicts[j].Share
	})
	return f
}

// endpointLess orders ip:port by address, then port; what does not parse
// after what does, by text.
func endpointLess(a, b string) bool {
	pa, ea := netip.ParseAddrPort(a)
	pb, eb := netip.ParseAddrPort(b)
	switch {
	case ea == nil && eb == nil:
		if c := pa.Addr().Compare(pb.Addr()); c != 0 {
			return c < 0
		}
		return pa.Port() < pb.Port()
	case ea == nil:
		return true
	case eb == nil:
		return false
	}
	return a < b
}

// sideRoutes are a side's routes of one Service port and family, by key,
// in the order walked.
type sideRoutes struct {
	order []routeKey
	fates map[routeKey]*RouteFate
}

func (s *sideRoutes) add(r correlate.Route) {
	k := keyOf(r)
	if s.fates == nil {
		s.fates = map[routeKey]*RouteFate{}
	}
	if _, ok := s.fates[k]; ok {
		return // the same walk, of another table of the same family
	}
	s.order = append(s.order, k)
	s.fates[k] = fateOf(r)
}

// diffRoutes compares the routes of one Service port on both sides.
// sameMode: both sides run one proxy mode, so where a verdict was decided
// (the chain) counts too; across modes only what was decided does. masq:
// whether connections are masqueraded is known on both sides.
func diffRoutes(a, b *sideRoutes, sameMode, masq bool) []RouteDiff {
	out := []RouteDiff{}
	var order []routeKey
	seen := map[routeKey]bool{}
	for _, s := range []*sideRoutes{a, b} {
		if s == nil {
			continue
		}
		for _, k := range s.order {
			if !seen[k] {
				seen[k] = true
				order = append(order, k)
			}
		}
	}
	get := func(s *sideRoutes, k routeKey) *RouteFate {
		if s == nil {
			return nil
		}
		return s.fates[k]
	}
	for _, k := range order {
		fa, fb := get(a, k), get(b, k)
		differs := fateDiffers(fa, fb, sameMode, masq)
		if len(differs) == 0 {
			continue
		}
		out = append(out, RouteDiff{Traffic: k.traffic, Entry: k.entry, From: k.from, A: fa, B: fb, Differs: differs,
			Summary: routeWords(k, fa, fb) + ": " + fateSummary(fa, fb, differs)})
	}
	return out
}

// fateDiffers lists what differs between two fates.
func fateDiffers(a, b *RouteFate, sameMode, masq bool) []string {
	var out []string
	if a == nil || b == nil {
		if a != b {
			out = append(out, "route")
		}
		return out
	}
	ea, eb := shares(a), shares(b)
	setDiffers, shareDiffers := false, false
	for ep, s := range ea {
		t, ok := eb[ep]
		switch {
		case !ok:
			setDiffers = true
		case !sameShare(s, t):
			shareDiffers = true
		}
	}
	for ep := range eb {
		if _, ok := ea[ep]; !ok {
			setDiffers = true
		}
	}
	if setDiffers {
		out = append(out, "endpoints")
	}
	if shareDiffers {
		out = append(out, "shares")
	}
	if !sameVerdicts(a.Verdicts, b.Verdicts, sameMode) {
		out = append(out, "verdicts")
	}
	if masq && len(a.Endpoints) > 0 && len(b.Endpoints) > 0 && a.Masquerade != b.Masquerade {
		out = append(out, "masquerade")
	}
	return out
}

func shares(f *RouteFate) map[string]float64 {
	m := map[string]float64{}
	for _, e := range f.Endpoints {
		m[e.Endpoint] += e.Share
	}
	return m
}

// sameVerdicts: the shares not DNATed meet the same fate on both sides:
// the same verdicts with the same shares, decided by kube-proxy's rules on
// both or on neither, and (sameMode) in the same chains.
func sameVerdicts(a, b []VerdictShare, sameMode bool) bool {
	type k struct {
		verdict, chain string
		kp             bool
	}
	sum := func(vs []VerdictShare) map[k]float64 {
		m := map[k]float64{}
		for _, v := range vs {
			key := k{verdict: v.Verdict, kp: v.KubeProxys}
			if sameMode && v.Verdict != "accept" {
				// Where an accepted connection ends (the last hook's
				// chain) is no decision.
				key.chain = v.Chain
			}
			m[key] += v.Share
		}
		return m
	}
	ma, mb := sum(a), sum(b)
	for key, s := range ma {
		if !sameShare(s, mb[key]) {
			return false
		}
	}
	for key, s := range mb {
		if !sameShare(s, ma[key]) {
			return false
		}
	}
	return true
}

// routeWords names a route: "cluster IP 10.96.10.1:80 from a pod",
// "external traffic from outside to 198.51.100.10:443", "external traffic
// from the node to node port 30080".
func routeWords(k routeKey, a, b *RouteFate) string {
	addr := k.address
	for _, f := range []*RouteFate{a, b} {
		if f != nil && k.entry != "nodePort" {
			addr = f.Address
			break
		}
	}
	var to string
	switch k.entry {
	case "clusterIP":
		to = "cluster IP " + addr
	case "nodePort":
		to = "node port " + strings.TrimPrefix(addr, ":")
	default:
		to = addr
	}
	from := map[string]string{"pod": "a pod", "node": "the node", "outside": "outside"}[k.from]
	if from == "" {
		from = k.from
	}
	if k.traffic == "internal" || k.entry == "clusterIP" {
		return to + " from " + from
	}
	return k.traffic + " traffic from " + from + " to " + to
}

// fateSummary says what differs between a and b, A first.
func fateSummary(a, b *RouteFate, differs []string) string {
	switch {
	case a == nil:
		return "walked on B only: " + describeFate(b, nil)
	case b == nil:
		return "walked on A only: " + describeFate(a, nil)
	}
	var parts []string
	has := func(w string) bool {
		for _, d := range differs {
			if d == w {
				return true
			}
		}
		return false
	}
	if has("endpoints") || has("shares") || has("verdicts") {
		parts = append(parts, "A "+describeFate(a, nil)+"; B "+describeFate(b, a))
	}
	if has("masquerade") {
		if a.Masquerade {
			parts = append(parts, "A masquerades, B does not")
		} else {
			parts = append(parts, "B masquerades, A does not")
		}
	}
	return strings.Join(parts, "; ")
}

// maxListed is how many endpoints a description lists by address.
const maxListed = 4

// describeFate says what a route does: the endpoints and their shares,
// then the verdicts of the rest. With ref (the other side, A) it lists
// the endpoints whose share differs from ref's when there are many, and
// those ref reaches and f does not.
func describeFate(f, ref *RouteFate) string {
	var parts []string
	n := len(f.Endpoints)
	uniform := n >= 2
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, e := range f.Endpoints {
		lo, hi = math.Min(lo, e.Share), math.Max(hi, e.Share)
		if !sameShare(e.Share, f.Endpoints[0].Share) {
			uniform = false
		}
	}
	listAll := func() {
		for _, e := range f.Endpoints {
			parts = append(parts, pct(e.Share)+" to "+e.Endpoint)
		}
	}
	switch {
	case n == 0:
	case ref == nil && uniform:
		parts = append(parts, fmt.Sprintf("%s each to %d endpoints", pct(f.Endpoints[0].Share), n))
	case n <= maxListed:
		listAll()
	case uniform:
		parts = append(parts, fmt.Sprintf("%s each to %d endpoints", pct(f.Endpoints[0].Share), n))
	case ref == nil:
		parts = append(parts, fmt.Sprintf("%s to %s each to %d endpoints", pct(lo), pct(hi), n))
	default:
		// Many endpoints, unevenly: those that changed.
		before := shares(ref)
		var changed []string
		same := 0
		for _, e := range f.Endpoints {
			if s, ok := before[e.Endpoint]; ok && sameShare(s, e.Share) {
				same++
				continue
			}
			changed = append(changed, pct(e.Share)+" to "+e.Endpoint)
		}
		if len(changed) > maxListed {
			changed = append(changed[:maxListed], fmt.Sprintf("%d more changed", len(changed)-maxListed))
		}
		parts = append(parts, changed...)
		if same > 0 {
			parts = append(parts, fmt.Sprintf("%d other%s as on A", same, plural(same)))
		}
	}
	if ref != nil && n > 0 {
		now := shares(f)
		var gone []string
		for _, e := range ref.Endpoints {
			if _, ok := now[e.Endpoint]; !ok {
				gone = append(gone, e.Endpoint)
			}
		}
		switch {
		case len(gone) == 1:
			parts = append(parts, gone[0]+" gets none")
		case len(gone) > 1 && len(gone) <= maxListed:
			parts = append(parts, strings.Join(gone, ", ")+" get none")
		case len(gone) > maxListed:
			parts = append(parts, fmt.Sprintf("%d of A's endpoints get none", len(gone)))
		}
	}
	for _, v := range f.Verdicts {
		parts = append(parts, verdictWords(v))
	}
	if len(parts) == 0 {
		return "does nothing the walk could tell"
	}
	return strings.Join(parts, ", ")
}

var ruleComment = regexp.MustCompile(`comment "([^"]*)"`)

// verdictWords: "rejects 100% in KUBE-SERVICES (\"shop/empty:http has no
// endpoints\")".
func verdictWords(v VerdictShare) string {
	p := pct(v.Share)
	var s string
	switch v.Verdict {
	case "drop":
		s = "drops " + p
	case "reject":
		s = "rejects " + p
	case "accept":
		s = p + " not DNATed (accepted as is)"
	case "unknown":
		s = p + " not known"
	default:
		s = v.Verdict + " " + p
	}
	switch {
	case v.Verdict == "accept":
	case v.Chain != "" && v.Rule == "":
		s += " by the policy of " + v.Chain
	case v.Chain != "":
		s += " in " + v.Chain
	}
	if m := ruleComment.FindStringSubmatch(v.Rule); m != nil && v.Verdict != "accept" {
		s += fmt.Sprintf(" (%q)", m[1])
	}
	if !v.KubeProxys && (v.Verdict == "drop" || v.Verdict == "reject") {
		s += ", a rule kube-proxy does not write"
	}
	return s
}

// pct is a share as a person reads it: 33.3%, 50%, 66.7%, 3.33%, 0.02%.
func pct(f float64) string {
	return strconv.FormatFloat(f*100, 'g', 3, 64) + "%"
}
