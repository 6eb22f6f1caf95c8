package diagnose

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// IPVS mode's part of `diff`: in IPVS mode the iptables rules send no
// Service's connections anywhere; the virtual servers do. Per Service port
// and family, each frontend's virtual server is compared by its real
// servers and their weights (a NodePort's by its port: each node has its
// own addresses), and each side's endpoints (the real servers at a weight
// above 0) join the entries the rules' side lists, so that an IPVS node and
// an iptables one are compared by where they send connections.

// IPVSVirtualServerDiff is one frontend's virtual server, programmed
// otherwise on A than on B.
type IPVSVirtualServerDiff struct {
	Frontend string `json:"frontend"`
	// VirtualServer is "TCP 10.96.10.1:80", or "TCP port 30080" for a
	// NodePort (on each node's own addresses).
	VirtualServer string `json:"virtualServer"`
	// A and B are the real servers; OnlyIn is "A" or "B" when only that
	// side has a virtual server for the frontend.
	A      []IPVSWeight `json:"a"`
	B      []IPVSWeight `json:"b"`
	OnlyIn string       `json:"onlyIn,omitempty"`
	// Summary says it in a line: "A sends to 3 real servers, B to 2: B
	// lacks 10.244.1.11:8080".
	Summary string `json:"summary"`
}

// IPVSWeight is one real server and its weight.
type IPVSWeight struct {
	Addr   string `json:"addr"`
	Weight int32  `json:"weight"`
}

// ipvsSide is one side's virtual servers per Service port and family, by
// frontend key.
type ipvsSide map[spKey]map[string]*ipvsFrontendVS

type ipvsFrontendVS struct {
	frontend, name string
	reals          map[string]int32
}

// ipvsOwned is n's virtual servers joined with objs (both sides' objects),
// the endpoint entries they make, and the names of those no Service port
// has (but kube-proxy's probe); nil without an IPVS table.
func ipvsOwned(n *Node, objs *correlate.Objects) (ipvsSide, map[spKey]map[string]DiffEntry, []string) {
	if !n.Ruleset.HasIPVS() {
		return nil, nil, nil
	}
	if objs == nil {
		return ipvsByAddress(n), nil, nil
	}
	nv := objs.NodeView(n.Name)
	var ips []netip.Addr
	for _, s := range nv.IPs {
		if a, err := netip.ParseAddr(s); err == nil {
			ips = append(ips, a)
		}
	}
	ips = append(ips, n.Addresses...)
	ex := correlate.ExplainIPVS(correlate.IPVSExplainInput{IPVSInput: correlate.IPVSInput{Objects: objs, NodeIPs: ips, Table: n.Ruleset.IPVS.Table}, Node: nv})
	side, entries, unowned := ipvsSide{}, map[spKey]map[string]DiffEntry{}, []string{}
	for i := range ex.Facts.VirtualServers {
		if vs := &ex.Facts.VirtualServers[i]; vs.Kind == correlate.VirtualServiceUnattributed {
			unowned = append(unowned, virtualServerName(vs))
		}
	}
	for _, p := range ex.Ports {
		k := spKey{p.ServicePort, string(p.Family)}
		for _, fe := range p.Frontends {
			if fe.VirtualServer < 0 {
				continue
			}
			vs := &ex.Facts.VirtualServers[fe.VirtualServer]
			name := vs.Protocol + " " + vs.Addr.String()
			if fe.Kind == correlate.FrontendNodePort {
				name = fmt.Sprintf("%s port %d", vs.Protocol, vs.Addr.Port())
			}
			if side[k] == nil {
				side[k], entries[k] = map[string]*ipvsFrontendVS{}, map[string]DiffEntry{}
			}
			f := side[k][fe.Kind+" "+name]
			if f == nil {
				f = &ipvsFrontendVS{frontend: fe.Kind, name: name, reals: map[string]int32{}}
				side[k][fe.Kind+" "+name] = f
			}
			for _, rs := range vs.RealServers {
				f.reals[rs.Addr.String()] = max(f.reals[rs.Addr.String()], rs.Weight)
				if rs.Weight > 0 {
					e := DiffEntry{What: "endpoint", Detail: rs.Addr.String()}
					entries[k][e.What+"|"+e.Kind+"|"+e.Detail] = e
				}
			}
		}
	}
	return side, entries, unowned
}

// ipvsDiffs compares A's and B's virtual servers of one Service port.
func ipvsDiffs(a, b map[string]*ipvsFrontendVS) []IPVSVirtualServerDiff {
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	order := make([]string, 0, len(keys))
	for k := range keys {
		order = append(order, k)
	}
	slices.SortFunc(order, func(x, y string) int {
		fx, _, _ := strings.Cut(x, " ")
		fy, _, _ := strings.Cut(y, " ")
		return cmp.Or(cmp.Compare(frontendRank[fx], frontendRank[fy]), cmp.Compare(x, y))
	})
	var out []IPVSVirtualServerDiff
	for _, k := range order {
		va, vb := a[k], b[k]
		ra, rb := weights(va), weights(vb)
		if va != nil && vb != nil && slices.Equal(ra, rb) {
			continue
		}
		f := va
		if f == nil {
			f = vb
		}
		d := IPVSVirtualServerDiff{Frontend: f.frontend, VirtualServer: f.name, A: nonNil(ra), B: nonNil(rb)}
		switch {
		case va == nil:
			d.OnlyIn = "B"
		case vb == nil:
			d.OnlyIn = "A"
		}
		d.Summary = fmt.Sprintf("%s %s: %s", f.frontend, f.name, weightsSummary(va, vb, ra, rb))
		out = append(out, d)
	}
	return out
}

// weights are a virtual server's real servers in address order; nil for
// none at all.
func weights(f *ipvsFrontendVS) []IPVSWeight {
	if f == nil {
		return nil
	}
	out := []IPVSWeight{}
	for a, w := range f.reals {
		out = append(out, IPVSWeight{a, w})
	}
	slices.SortFunc(out, func(x, y IPVSWeight) int { return cmp.Compare(endpointOrder(x.Addr), endpointOrder(y.Addr)) })
	return out
}

func endpointOrder(s string) string {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return fmt.Sprintf("%x:%05d", ap.Addr().As16(), ap.Port())
	}
	return s
}

// weightsSummary says how two virtual servers send connections otherwise.
func weightsSummary(va, vb *ipvsFrontendVS, ra, rb []IPVSWeight) string {
	switch {
	case va == nil:
		return fmt.Sprintf("only B has this virtual server (%s)", sendsTo(rb))
	case vb == nil:
		return fmt.Sprintf("only A has this virtual server (%s)", sendsTo(ra))
	}
	s := fmt.Sprintf("A sends to %s, B to %d", count0(len(active(ra)), "real server"), len(active(rb)))
	var what []string
	for _, w := range ra {
		if wb, ok := vb.reals[w.Addr]; !ok {
			what = append(what, "B lacks "+w.Addr)
		} else if wb != w.Weight {
			what = append(what, fmt.Sprintf("%s weight %d on A, %d on B", w.Addr, w.Weight, wb))
		}
	}
	for _, w := range rb {
		if _, ok := va.reals[w.Addr]; !ok {
			what = append(what, "A lacks "+w.Addr)
		}
	}
	return s + ": " + strings.Join(what, ", ")
}

func active(ws []IPVSWeight) []IPVSWeight {
	var out []IPVSWeight
	for _, w := range ws {
		if w.Weight > 0 {
			out = append(out, w)
		}
	}
	return out
}

func sendsTo(ws []IPVSWeight) string {
	return "sends to " + count0(len(active(ws)), "real server")
}

func count0(n int, noun string) string { return fmt.Sprintf("%d %s%s", n, noun, plural(n)) }

// ipvsCompare is the IPVS side of a diff: each side's virtual servers, and
// whether the two are compared by them (both IPVS) or only by the
// endpoints each sends to (one IPVS, one not).
type ipvsCompare struct {
	sides    [2]ipvsSide
	bothIPVS bool
}

// compareIPVS adds each IPVS side's endpoints to its entries; when only
// one side is IPVS, it leaves both sides only the endpoints (and stale
// chains) to compare, the rest being one mode's, and says so.
func (d *NodeDiff) compareIPVS(in DiffSides, objs *correlate.Objects, o *ownedSides) *ipvsCompare {
	c := &ipvsCompare{}
	var entries [2]map[spKey]map[string]DiffEntry
	var unowned [2][]string
	c.sides[0], entries[0], unowned[0] = ipvsOwned(in.A, objs)
	c.sides[1], entries[1], unowned[1] = ipvsOwned(in.B, objs)
	ipvsA, ipvsB := d.A.Mode == string(kubeproxy.ModeIPVS), d.B.Mode == string(kubeproxy.ModeIPVS)
	if !ipvsA && !ipvsB {
		return c
	}
	c.bothIPVS = ipvsA && ipvsB
	// A virtual server no Service port has sends connections somewhere all
	// the same: one only one side has is a difference.
	d.UnownedVirtualServers = &UnownedDiff{OnlyA: minusNames(unowned[0], unowned[1]), OnlyB: minusNames(unowned[1], unowned[0])}
	for i := range 2 {
		for k, es := range entries[i] {
			if o.entries[i][k] == nil {
				o.entries[i][k] = map[string]DiffEntry{}
			}
			for key, e := range es {
				o.entries[i][k][key] = e
			}
		}
	}
	if objs == nil {
		d.Notes = append(d.Notes, "no Services and EndpointSlices: the IPVS virtual servers are compared by address, not by Service (a NodePort's address is each node's own); pass --from-objects")
	}
	if c.bothIPVS {
		for i := range 2 { // a Service port of the virtual servers alone is compared too
			for k := range c.sides[i] {
				if o.entries[i][k] == nil {
					o.entries[i][k] = map[string]DiffEntry{}
				}
			}
		}
		return c
	}
	d.Notes = append(d.Notes, fmt.Sprintf("A is in %s mode, B in %s mode: compared by the endpoints each sends each Service port's connections to (an IPVS node's real servers, an iptables or nftables node's endpoint chains), not by their rules", d.A.Mode, d.B.Mode))
	for i := range 2 {
		o.routes[i] = map[spKey]*sideRoutes{}
		for _, es := range o.entries[i] {
			for key, e := range es {
				if e.What != "endpoint" && e.What != "stale chain" {
					delete(es, key)
				}
			}
		}
		for k, es := range o.entries[i] {
			if len(es) == 0 {
				delete(o.entries[i], k)
			}
		}
	}
	return c
}

// of is the virtual servers of k that differ, when both sides are IPVS.
func (c *ipvsCompare) of(k spKey) []IPVSVirtualServerDiff {
	if !c.bothIPVS {
		return nil
	}
	return ipvsDiffs(c.sides[0][k], c.sides[1][k])
}

// ipvsHasFamily: n's IPVS table has a virtual server of fam.
func ipvsHasFamily(n *Node, fam kubeproxy.Family) bool {
	if !n.Ruleset.HasIPVS() {
		return false
	}
	for _, s := range n.Ruleset.IPVS.Table.Services {
		if s.Addr.IsValid() && s.Addr.Addr().Unmap().Is6() == (fam == kubeproxy.IPv6) {
			return true
		}
	}
	return false
}

// differ: some virtual server no Service port has is on one side only.
func (u *UnownedDiff) differ() bool {
	return u != nil && len(u.OnlyA)+len(u.OnlyB) > 0
}

// noObjects is where the virtual servers go when neither side has the
// Services: compared by address alone.
const noObjects = "(no Service objects)"

// ipvsByAddress is n's virtual servers by address, per family, without the
// Services to tell whose each is (a NodePort's address is each node's own:
// on two nodes they differ).
func ipvsByAddress(n *Node) ipvsSide {
	side := ipvsSide{}
	for i := range n.Ruleset.IPVS.Table.Services {
		s := &n.Ruleset.IPVS.Table.Services[i]
		fam, name := kubeproxy.IPv4, fmt.Sprintf("FWM %d", s.FWMark)
		if s.Addr.IsValid() {
			name = string(s.Protocol) + " " + netip.AddrPortFrom(s.Addr.Addr().Unmap(), s.Addr.Port()).String()
			if s.Addr.Addr().Unmap().Is6() {
				fam = kubeproxy.IPv6
			}
		}
		k := spKey{noObjects, string(fam)}
		if side[k] == nil {
			side[k] = map[string]*ipvsFrontendVS{}
		}
		f := &ipvsFrontendVS{frontend: "virtual server", name: name, reals: map[string]int32{}}
		for _, r := range s.RealServers {
			f.reals[netip.AddrPortFrom(r.Addr.Addr().Unmap(), r.Addr.Port()).String()] = r.Weight
		}
		side[k]["virtual server "+name] = f
	}
	return side
}
