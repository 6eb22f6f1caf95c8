package evaluate_test

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/evaluate"
	"github.com/proxyrules/kubectl-proxyrules/internal/fixture"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// The fixtures' rules, kube-proxy's own, in every form they were written
// down in, walked for every entry of every Service.

type fixtureMeta struct {
	NodeIPs  []string `json:"nodeIPs"`
	PodCIDRs []string `json:"podCIDRs"`
}

func readFixtureMeta(t *testing.T, dir string) fixtureMeta {
	t.Helper()
	var m fixtureMeta
	data, err := os.ReadFile(filepath.Join(dir, "meta.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// probe is one packet a fixture's Services are walked with.
type probe struct {
	name string
	pkt  evaluate.Packet
}

// fixtureProbes: every Service port's cluster IP from a pod on the node
// and from the node, its node port on the node's address and its external
// and load-balancer IPs from outside.
func fixtureProbes(t *testing.T, dir string) (evaluate.Node, []probe) {
	meta := readFixtureMeta(t, dir)
	var node evaluate.Node
	nodeIP := map[bool]netip.Addr{}
	podIP := map[bool]netip.Addr{}
	for _, s := range meta.NodeIPs {
		a := netip.MustParseAddr(s)
		node.Addresses = append(node.Addresses, a)
		nodeIP[a.Is6()] = a
	}
	for _, s := range meta.PodCIDRs {
		p := netip.MustParsePrefix(s)
		podIP[p.Addr().Is6()] = p.Addr().Next().Next() // .2: a pod, not the gateway
	}
	outside := map[bool]netip.Addr{false: netip.MustParseAddr("203.0.113.7"), true: netip.MustParseAddr("2001:db8::7")}
	var probes []probe
	add := func(name, proto string, origin evaluate.Origin, src netip.Addr, dst string) {
		d := netip.MustParseAddrPort(dst)
		probes = append(probes, probe{name, evaluate.Packet{Protocol: proto, Src: netip.AddrPortFrom(src, 40000), Dst: d, Origin: origin}})
	}
	for _, sp := range fixture.Objects(t, dir).ServicePorts() {
		if !sp.Proxied {
			continue
		}
		proto := strings.ToLower(string(sp.Protocol))
		for _, ip := range sp.ClusterIPs {
			v6 := strings.Contains(ip, ":")
			hp := netip.AddrPortFrom(netip.MustParseAddr(ip), uint16(sp.Port)).String()
			add(sp.String()+" "+hp+" clusterIP from pod", proto, evaluate.FromPod, podIP[v6], hp)
			add(sp.String()+" "+hp+" clusterIP from node", proto, evaluate.FromNode, nodeIP[v6], hp)
			if sp.NodePort > 0 && nodeIP[v6].IsValid() {
				np := netip.AddrPortFrom(nodeIP[v6], uint16(sp.NodePort)).String()
				add(sp.String()+" "+np+" nodePort from outside", proto, evaluate.FromOutside, outside[v6], np)
				add(sp.String()+" "+np+" nodePort from pod", proto, evaluate.FromPod, podIP[v6], np)
			}
		}
		for _, ip := range append(append([]string{}, sp.ExternalIPs...), sp.LoadBalancerIPs...) {
			a := netip.MustParseAddr(ip)
			add(sp.String()+" "+ip+" from outside", proto, evaluate.FromOutside, outside[a.Is6()], netip.AddrPortFrom(a, uint16(sp.Port)).String())
		}
	}
	return node, probes
}

// aggregate is a walk's outcomes without their paths, alike ones added
// up, in a form that does not depend on how the rules were written down:
// the affinity records of iptables (KUBE-SEP-…) and of nft (affinity-…, or
// "xt match recent" through nft) are all "affinity".
func aggregate(r *evaluate.Result) string {
	probs := map[string]evaluate.Prob{}
	for _, o := range r.Outcomes {
		k := fmt.Sprintf("%s %s masq=%v %s", o.Verdict, o.Destination, o.Masquerade, o.Reject)
		var as []string
		for _, a := range o.Assumes {
			what := a.What
			if strings.Contains(what, "affinity record") {
				what = "affinity"
			}
			as = append(as, fmt.Sprintf("%s=%v", what, a.Holds))
		}
		k += " [" + strings.Join(as, ", ") + "]"
		probs[k] = probs[k].Add(o.Probability)
	}
	var out []string
	for k, p := range probs {
		out = append(out, p.String()+" "+k)
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// checkTotals: for every way the assumptions can come out, the outcomes
// consistent with it add up to exactly 1.
func checkTotals(t *testing.T, name string, r *evaluate.Result) {
	t.Helper()
	if r.Truncated {
		t.Errorf("%s: truncated", name)
		return
	}
	keys := map[string]int{}
	for _, o := range r.Outcomes {
		for _, a := range o.Assumes {
			k := fmt.Sprintf("%s/%s/%d/%s", a.Table, a.Chain, a.Rule, a.What)
			if _, ok := keys[k]; !ok {
				keys[k] = len(keys)
			}
		}
	}
	if len(keys) > 12 {
		t.Fatalf("%s: %d assumptions", name, len(keys))
	}
	for world := 0; world < 1<<len(keys); world++ {
		var sum evaluate.Prob
		for _, o := range r.Outcomes {
			consistent := true
			for _, a := range o.Assumes {
				bit := world>>keys[fmt.Sprintf("%s/%s/%d/%s", a.Table, a.Chain, a.Rule, a.What)]&1 == 1
				if bit != a.Holds {
					consistent = false
				}
			}
			if consistent {
				sum = sum.Add(o.Probability)
			}
		}
		if !sum.IsOne() {
			t.Errorf("%s: the outcomes of assumption set %b add up to %s, not 1:\n%s", name, world, sum, aggregate(r))
		}
	}
}

// TestFixtureFormsAgree: the same rules give the same outcomes in every
// form they were read from (kube-proxy's restore input, iptables-save of
// both backends, iptables-nft through nft; nft JSON, text and knftables
// dumps), and every walk's outcomes add up to 1.
func TestFixtureFormsAgree(t *testing.T) {
	walked := 0
	for _, dir := range fixture.Dirs(t) {
		scenario := filepath.Base(dir)
		node, probes := fixtureProbes(t, dir)
		byMode := map[string][]fixture.Form{}
		for _, f := range fixture.Forms(t, dir) {
			byMode[f.Mode] = append(byMode[f.Mode], f)
		}
		// The knftables dumps hold kube-proxy's table only, not a foreign
		// table loaded next to it.
		_, foreignNFT := fixture.Text(t, dir, "nftables/foreign.nft")
		for mode, forms := range byMode {
			answers := map[string]string{} // probe → the first form's outcomes
			first := map[string]string{}
			for _, form := range forms {
				rs := fixture.ReadFiles(t, form.Files...)
				e := evaluate.New(rs, node)
				for _, pr := range probes {
					fam := kubeproxy.IPv4
					if pr.pkt.Dst.Addr().Is6() {
						fam = kubeproxy.IPv6
					}
					pr.pkt.Family = fam
					r := e.Walk(pr.pkt, evaluate.Options{})
					name := fmt.Sprintf("%s %s %s: %s", scenario, mode, form.Name, pr.name)
					checkTotals(t, name, r)
					walked++
					got := aggregate(r)
					if strings.Contains(form.Name, "seen by nft") && hiddenByNFT(r) ||
						foreignNFT && form.Name == "knftables dump" {
						continue // nft hides some matches of iptables-nft (xt match sctp): not comparable
					}
					want, ok := answers[pr.name]
					if !ok {
						answers[pr.name], first[pr.name] = got, form.Name
						continue
					}
					if got != want {
						t.Errorf("%s:\n%s\n%s says:\n%s", name, got, first[pr.name], want)
					}
				}
			}
		}
	}
	if walked < 500 {
		t.Errorf("only %d walks", walked)
	}
}

// hiddenByNFT: the walk met a match or target nft does not show of an
// iptables-nft rule (xt match sctp, IPv6 DNAT).
func hiddenByNFT(r *evaluate.Result) bool {
	for _, n := range r.NotModelled {
		if strings.Contains(n.What, "nft does not show") && !strings.Contains(n.What, "recent") {
			return true
		}
	}
	return false
}

// TestFixtureEndpointsReached: in small-v1.37, every Service port with
// endpoints is DNATed to exactly the endpoints kube-proxy programmed for
// it on the node (its expected.json endpoint chains), from a pod.
func TestFixtureEndpointsReached(t *testing.T) {
	dir := fixture.Dir("small-v1.37")
	node, probes := fixtureProbes(t, dir)
	objs := fixture.Objects(t, dir)
	_ = objs
	for _, form := range fixture.Forms(t, dir) {
		rs := fixture.ReadFiles(t, form.Files...)
		e := evaluate.New(rs, node)
		dnat := 0
		for _, pr := range probes {
			if !strings.HasSuffix(pr.name, " clusterIP from pod") {
				continue
			}
			r := e.Walk(pr.pkt, evaluate.Options{})
			for _, o := range r.Outcomes {
				if o.Verdict == evaluate.VerdictDNAT {
					dnat++
				}
			}
		}
		if dnat < 20 {
			t.Errorf("%s: only %d DNAT outcomes", form.Name, dnat)
		}
	}
	_ = correlate.NodeView{}
}

// TestHiddenMasqueradeIsUnknown: nft 1.0 lists iptables-nft's IPv6
// MASQUERADE as a rule that only counts. Read that way, a packet carrying
// kube-proxy's mark must end unknown, not silently un-masqueraded; read
// from ip6tables-save, the same packet is masqueraded.
func TestHiddenMasqueradeIsUnknown(t *testing.T) {
	dir := fixture.Dir("small-v1.37")
	node, _ := fixtureProbes(t, dir)
	pkt := evaluate.Packet{Family: kubeproxy.IPv6, Protocol: "tcp", Origin: evaluate.FromNode,
		Src: netip.MustParseAddrPort("[fd00:10::1]:40000"), Dst: netip.MustParseAddrPort("[2001:db8::7]:80"), Mark: 0x4000}
	seen := map[string]bool{}
	for _, form := range fixture.Forms(t, dir) {
		if form.Mode != "iptables" {
			continue
		}
		r := evaluate.New(fixture.ReadFiles(t, form.Files...), node).Walk(pkt, evaluate.Options{})
		if len(r.Outcomes) != 1 {
			t.Fatalf("%s: %d outcomes:\n%s", form.Name, len(r.Outcomes), aggregate(r))
		}
		o := r.Outcomes[0]
		if strings.Contains(form.Name, "seen by nft") {
			seen["nft"] = true
			if o.Verdict != evaluate.VerdictUnknown || !hiddenByNFT(r) {
				t.Errorf("%s: %s masq=%v, want unknown (the MASQUERADE nft hides)", form.Name, o.Verdict, o.Masquerade)
			}
			continue
		}
		seen["save"] = true
		if !o.Masquerade {
			t.Errorf("%s: %s not masqueraded", form.Name, o.Verdict)
		}
	}
	if !seen["nft"] || !seen["save"] {
		t.Fatalf("forms walked: %v", seen)
	}
}
