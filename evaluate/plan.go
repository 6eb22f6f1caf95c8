package evaluate

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"sigs.k8s.io/knftables"

	"github.com/proxyrules/kubectl-proxyrules/inspect"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// The hooks, and what runs at each, in the kernel's order.

// Hooks, as nftables names them.
const (
	hookPrerouting  = "prerouting"
	hookInput       = "input"
	hookForward     = "forward"
	hookOutput      = "output"
	hookPostrouting = "postrouting"
)

// Priorities of the iptables tables and of the nat hook
// (enum nf_ip_hook_priorities, include/uapi/linux/netfilter_ipv4.h).
const (
	prioRaw       = -300
	prioConntrack = -200
	prioMangle    = -150
	prioNATDst    = -100
	prioFilter    = 0
	prioSecurity  = 50
	prioNATSrc    = 100
)

// iptablesHooks: the built-in chains of each iptables table and its
// priority.
var iptablesHooks = map[string]struct {
	prio  int
	hooks []string
}{
	"raw":      {prioRaw, []string{hookPrerouting, hookOutput}},
	"mangle":   {prioMangle, []string{hookPrerouting, hookInput, hookForward, hookOutput, hookPostrouting}},
	"nat":      {0, []string{hookPrerouting, hookInput, hookOutput, hookPostrouting}}, // the nat hook's own priority
	"filter":   {prioFilter, []string{hookInput, hookForward, hookOutput}},
	"security": {prioSecurity, []string{hookInput, hookForward, hookOutput}},
}

// natPrio is where the nat hook runs: destination NAT before filtering
// (prerouting, output), source NAT after it (input, postrouting). Every
// nat chain of a hook, iptables' and nftables' alike, runs inside it, in
// the order of their own priorities, until one makes a binding
// (nf_nat_inet_fn, net/netfilter/nf_nat_core.c).
func natPrio(hook string) int {
	if hook == hookPrerouting || hook == hookOutput {
		return prioNATDst
	}
	return prioNATSrc
}

// chainRef is a chain of either kind.
type chainRef struct {
	ipt *inspect.IPTable
	ic  *inspect.IPChain
	nt  *inspect.NFTTable
	nc  *inspect.NFTChain
}

func (c chainRef) name() string {
	if c.ic != nil {
		return c.ic.Name
	}
	return c.nc.Name
}

func (c chainRef) rules() int {
	if c.ic != nil {
		return len(c.ic.Rules)
	}
	return len(c.nc.Rules)
}

// tableLabel: the table's name, family and backend as hops show them.
func (c chainRef) tableLabel() (table, family, backend string) {
	if c.ipt != nil {
		b := string(c.ipt.Backend)
		if b == "" {
			b = "iptables"
		}
		return c.ipt.Name, string(c.ipt.Family), b
	}
	return c.nt.Name, string(c.nt.Family), "nftables"
}

// lookup finds a chain of the same table by name.
func (c chainRef) lookup(name string) (chainRef, bool) {
	if c.ipt != nil {
		if ch := c.ipt.Chain(name); ch != nil {
			return chainRef{ipt: c.ipt, ic: ch}, true
		}
		return chainRef{}, false
	}
	if ch := c.nt.Chain(name); ch != nil {
		return chainRef{nt: c.nt, nc: ch}, true
	}
	return chainRef{}, false
}

// baseChain is a base chain: where a hook enters a table.
type baseChain struct {
	chainRef
	prio   int
	policy string // accept or drop
	order  int    // position in the input, to keep equal priorities stable
}

// unit is what runs at one priority of a hook: one base chain, or the nat
// hook with every nat chain of the hook.
type unit struct {
	prio   int
	nat    bool
	chains []baseChain
	ipvs   bool // IPVS schedules here (ipvs.go): no chains
}

// hookPlan is every unit of one hook, in priority order.
type hookPlan []unit

// familyPlan is the plan of every hook for one IP family, with what the
// input lacks.
type familyPlan struct {
	hooks   map[string]hookPlan
	missing []NotModelled
}

func (e *Evaluator) plan(fam kubeproxy.Family) *familyPlan {
	if p := e.plans[fam]; p != nil {
		return p
	}
	p := &familyPlan{hooks: map[string]hookPlan{}}
	var bases = map[string][]baseChain{}
	var nats = map[string][]baseChain{}
	order := 0
	e.planIPTables(fam, p, bases, nats, &order)
	for _, t := range e.rs.NFTables {
		if !nftFamilyApplies(t.Family, fam) {
			continue
		}
		for _, c := range t.Chains {
			if !c.IsBase() {
				continue
			}
			h := string(*c.Hook)
			switch h {
			case hookPrerouting, hookInput, hookForward, hookOutput, hookPostrouting:
			default:
				continue // ingress/egress of a device: not on these paths
			}
			prio, ok := parsePriority(c.Priority)
			if !ok {
				p.missing = append(p.missing, NotModelled{Table: t.Name, Family: string(t.Family), Chain: c.Name, Rule: -1,
					What: fmt.Sprintf("base chain priority %q", derefPrio(c.Priority)),
					Why:  "taken as 0 (filter)"})
			}
			order++
			bc := baseChain{chainRef: chainRef{nt: t, nc: c}, prio: prio, policy: "accept", order: order}
			if c.Policy != nil {
				bc.policy = policyOf(string(*c.Policy))
			}
			if c.Type != nil && *c.Type == knftables.NATType {
				nats[h] = append(nats[h], bc)
			} else {
				bases[h] = append(bases[h], bc)
			}
		}
	}
	for _, h := range []string{hookPrerouting, hookInput, hookForward, hookOutput, hookPostrouting} {
		var plan hookPlan
		for _, bc := range bases[h] {
			plan = append(plan, unit{prio: bc.prio, chains: []baseChain{bc}})
		}
		if n := nats[h]; len(n) > 0 {
			sort.SliceStable(n, func(i, j int) bool { return n[i].prio < n[j].prio })
			plan = append(plan, unit{prio: natPrio(h), nat: true, chains: n})
		}
		sort.SliceStable(plan, func(i, j int) bool {
			if plan[i].prio != plan[j].prio {
				return plan[i].prio < plan[j].prio
			}
			return plan[i].chains[0].order < plan[j].chains[0].order
		})
		p.hooks[h] = e.withIPVS(h, plan)
	}
	e.plans[fam] = p
	return p
}

// planIPTables adds the built-in chains of fam's iptables tables to
// bases and nats (nat's by hook), and to p what the input lacks.
func (e *Evaluator) planIPTables(fam kubeproxy.Family, p *familyPlan, bases, nats map[string][]baseChain, order *int) {
	var kubeTables = map[string]bool{}
	haveKube := false
	for _, t := range e.rs.IPTables {
		if t.Family != fam {
			continue
		}
		kubeTables[t.Name] = true
		for _, c := range t.Chains {
			if strings.HasPrefix(c.Name, kubeproxy.PrefixKube) {
				haveKube = true
			}
		}
		if t.Partial {
			p.missing = append(p.missing, NotModelled{Table: t.Name, Family: string(fam), Rule: -1,
				What: fmt.Sprintf("only some chains of the %s table were in the input", t.Name),
				Why:  "a jump to a chain not shown ends that outcome as unknown"})
		}
		spec, ok := iptablesHooks[t.Name]
		if !ok {
			continue
		}
		for _, h := range spec.hooks {
			c := t.Chain(strings.ToUpper(h))
			if c == nil {
				if t.Partial {
					// Not shown is not empty: what enters there is unknown.
					p.missing = append(p.missing, NotModelled{Table: t.Name, Family: string(fam), Chain: strings.ToUpper(h), Rule: -1,
						What: "built-in chain " + strings.ToUpper(h) + " of the " + t.Name + " table not in the input",
						Why:  "taken as empty (policy ACCEPT): a rule there is not seen"})
				}
				continue
			}
			*order++
			bc := baseChain{chainRef: chainRef{ipt: t, ic: c}, prio: spec.prio, policy: policyOf(c.Policy), order: *order}
			if t.Name == "nat" {
				bc.prio = natPrio(h)
				nats[h] = append(nats[h], bc)
			} else {
				bases[h] = append(bases[h], bc)
			}
		}
	}
	if haveKube {
		var lacking []string
		for _, name := range e.kubeProxyTables() {
			if !kubeTables[name] {
				lacking = append(lacking, name)
			}
		}
		if len(lacking) > 0 {
			p.missing = append(p.missing, NotModelled{Family: string(fam), Rule: -1,
				What: "iptables table " + strings.Join(lacking, ", ") + " not in the input (kube-proxy writes chains there)",
				Why:  "its rules were not evaluated: the outcomes are those of the tables given"})
		}
	}
}

func policyOf(s string) string {
	if strings.EqualFold(s, "DROP") {
		return "drop"
	}
	return "accept"
}

func derefPrio(p *knftables.BaseChainPriority) string {
	if p == nil {
		return ""
	}
	return string(*p)
}

// nftFamilyApplies: the table's hooks see packets of fam.
func nftFamilyApplies(t knftables.Family, fam kubeproxy.Family) bool {
	switch t {
	case knftables.IPv4Family:
		return fam == kubeproxy.IPv4
	case knftables.IPv6Family:
		return fam == kubeproxy.IPv6
	case knftables.InetFamily:
		return true
	}
	return false
}

var namedPriorities = map[string]int{
	"raw": prioRaw, "mangle": prioMangle, "dstnat": prioNATDst, "filter": prioFilter, "security": prioSecurity, "srcnat": prioNATSrc,
}

// parsePriority reads a base chain's priority as nft lists it: a number,
// a name, or a name ± a number ("dstnat - 10", "dstnat-10").
func parsePriority(p *knftables.BaseChainPriority) (int, bool) {
	if p == nil {
		return 0, true
	}
	s := strings.ReplaceAll(string(*p), " ", "")
	if n, err := strconv.Atoi(s); err == nil {
		return n, true
	}
	for name, base := range namedPriorities {
		rest, ok := strings.CutPrefix(s, name)
		if !ok {
			continue
		}
		if rest == "" {
			return base, true
		}
		if n, err := strconv.Atoi(rest); err == nil {
			return base + n, true
		}
	}
	return 0, false
}
