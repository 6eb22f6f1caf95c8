// Package evaluate answers "where does this packet go?" from a node's
// rules: for one new connection it walks the netfilter hooks in the
// kernel's order through every table of the ruleset (iptables tables of
// either backend, nftables tables, kube-proxy's and anybody else's) and
// returns every outcome with its exact probability, the path that leads to
// it, where the packet goes after DNAT, whether it is masqueraded and the
// verdict.
//
// It knows the parsed rules (package inspect) and a few facts about the
// node (its addresses, the interfaces a packet uses), and no Kubernetes
// object: labelling a chain with its Service is package correlate's job.
// What it cannot evaluate it never takes as matching: the packet is
// followed both ways and each outcome lists what it assumed.
package evaluate

import (
	"fmt"
	"net/netip"

	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// Origin is where a new connection enters the node's hooks.
type Origin string

const (
	// FromNode is a process on the node: OUTPUT, then POSTROUTING (and,
	// to one of the node's own addresses, PREROUTING and INPUT again).
	FromNode Origin = "node"
	// FromPod is a pod on the node, in on its interface: PREROUTING, then
	// FORWARD and POSTROUTING (or INPUT, to the node itself).
	FromPod Origin = "pod"
	// FromOutside is a client outside the node, in on the node's own
	// interface: as FromPod.
	FromOutside Origin = "outside"
)

// Packet is the first packet of a new connection.
type Packet struct {
	Family kubeproxy.Family
	// Protocol is tcp, udp or sctp.
	Protocol string
	Src, Dst netip.AddrPort
	Origin   Origin
	// InIface is the interface it arrives on (FromPod, FromOutside); ""
	// when not known: a rule that tests it is then followed both ways.
	InIface string
	// OutIface is the interface it leaves by after routing; "" when not
	// known.
	OutIface string
	// Mark is the packet mark it starts with (0 for a new packet).
	Mark uint32
}

func (p Packet) String() string {
	return fmt.Sprintf("%s %s → %s (from %s)", p.Protocol, p.Src, p.Dst, p.Origin)
}

// Node is what the walk needs to know of the node besides its rules.
type Node struct {
	// Addresses are the node's own addresses: what `-m addrtype
	// --dst-type LOCAL` and `fib daddr type local` match, besides
	// loopback (127.0.0.0/8, ::1), and what is delivered locally.
	Addresses []netip.Addr
	// IPVS: walk kube-proxy's IPVS mode: the ruleset's IPVS table
	// schedules at its hooks, and its virtual services' addresses are the
	// node's (bound to kube-ipvs0). See ipvs.go.
	IPVS bool
}

// DefaultMaxOutcomes is the branches a walk follows unless told: a
// Service of 16k endpoints, or 8k with ClientIP affinity.
const DefaultMaxOutcomes = 1 << 14

// Options tune a walk.
type Options struct {
	// MaxOutcomes bounds the branches of one walk (0:
	// DefaultMaxOutcomes); past it the result is Truncated.
	MaxOutcomes int
	// MaxSteps bounds the rules one walk looks at over all its branches
	// (0: 1<<20); past it the branch left ends as unknown.
	MaxSteps int
	// Brief records on the paths only the rules that jump, go to, NAT or
	// decide the verdict (not the chains a packet passes untouched, nor
	// marks and counters): enough to say which chains a connection went
	// through and what decided it, at a fraction of the cost.
	Brief bool
	// Pinned says, per ClientIP-affinity record (an iptables `-m recent`
	// list, by name), whether the client has one. A record not listed is
	// not known: the walk follows both. nftables' affinity sets need no
	// such hint: the dump lists their members.
	Pinned map[string]bool
}

// Verdict is what happens to the packet in the end.
type Verdict string

const (
	// VerdictDNAT: destination NAT'ed, and every hook accepted it.
	VerdictDNAT Verdict = "dnat"
	// VerdictAccept: accepted without destination NAT.
	VerdictAccept Verdict = "accept"
	// VerdictReject: rejected (an ICMP error or a TCP reset).
	VerdictReject Verdict = "reject"
	// VerdictDrop: dropped.
	VerdictDrop Verdict = "drop"
	// VerdictUnknown: the walk stopped at something it does not model
	// (a queue to userspace, an unknown target, a chain not in the input,
	// a jump loop); NotModelled says what.
	VerdictUnknown Verdict = "unknown"
)

// Result is every outcome of one new connection.
type Result struct {
	Packet   Packet    `json:"packet"`
	Outcomes []Outcome `json:"outcomes"`
	// NotModelled lists, once each, what the walk met and could not
	// evaluate: rules followed both ways, tables missing from the input.
	NotModelled []NotModelled `json:"notModelled"`
	// Truncated: more branches than Options.MaxOutcomes; the outcomes
	// listed are not all.
	Truncated bool `json:"truncated,omitempty"`
	// IPVS are the virtual services the walk met (Node.IPVS), each once.
	IPVS []IPVSService `json:"ipvs,omitempty"`
}

// Outcome is one way the connection can go.
type Outcome struct {
	// Probability is the share of new connections that go this way, given
	// Assumes.
	Probability Prob    `json:"probability"`
	Verdict     Verdict `json:"verdict"`
	// Destination is where the packet goes after DNAT (the original
	// destination when none).
	Destination netip.AddrPort `json:"destination"`
	// DNAT is set when the destination was NAT'ed.
	DNAT bool `json:"dnat"`
	// Masquerade: the source is rewritten on the way out (MASQUERADE or
	// masquerade; SNAT too, with SNATTo).
	Masquerade bool   `json:"masquerade"`
	SNATTo     string `json:"snatTo,omitempty"`
	// Mark is the packet mark as POSTROUTING saw it (before masquerade
	// clears kube-proxy's bit).
	Mark uint32 `json:"mark"`
	// Reject says how a rejected packet is answered (icmp-port-unreachable,
	// tcp-reset, …).
	Reject string `json:"reject,omitempty"`
	// Delivery: "forward" (routed on to another host or a pod), "local"
	// (to a process on the node), "" when it did not get that far.
	Delivery string `json:"delivery,omitempty"`
	// Path is the rules the connection went through (nil with
	// Options.Brief: see Hops).
	Path []Hop `json:"path"`
	path *hopNode
	// Assumes are the rules this outcome assumed matched or not, because
	// the walk could not evaluate them.
	Assumes []Assumption `json:"assumes"`
	// Affinity is set when a ClientIP-affinity rule decided (or could
	// have decided) this outcome.
	Affinity *Affinity `json:"affinity,omitempty"`
	// IPVS is the virtual service that scheduled the connection, and the
	// real server it picked (Node.IPVS).
	IPVS *IPVSChoice `json:"ipvs,omitempty"`
}

// Hops is the outcome's path, also of a Brief walk.
func (o Outcome) Hops() []Hop {
	if o.Path != nil {
		return o.Path
	}
	n := 0
	for h := o.path; h != nil; h = h.prev {
		n++
	}
	out := make([]Hop, n)
	for h := o.path; h != nil; h = h.prev {
		n--
		out[n] = h.hop
	}
	return out
}

// Backward calls fn with the path's hops from the last one back, until it
// returns false; with no copy of the path.
func (o Outcome) Backward(fn func(Hop) bool) {
	if o.Path != nil {
		for i := len(o.Path) - 1; i >= 0; i-- {
			if !fn(o.Path[i]) {
				return
			}
		}
		return
	}
	for h := o.path; h != nil; h = h.prev {
		if !fn(h.hop) {
			return
		}
	}
}

// Hop is one rule (or chain policy) on an outcome's path.
type Hop struct {
	Hook string `json:"hook"`
	// Table is the iptables table (nat, filter, …) or the nftables
	// table's name; Family is its family (ip, ip6, inet for nftables;
	// IPv4, IPv6 for iptables); Backend the iptables backend, or
	// "nftables".
	Table   string `json:"table"`
	Family  string `json:"family"`
	Backend string `json:"backend,omitempty"`
	Chain   string `json:"chain"`
	// Rule is the rule's index in its chain (0-based); -1 for the chain's
	// policy or its end.
	Rule int    `json:"rule"`
	Line int    `json:"line,omitempty"`
	Text string `json:"text,omitempty"`
	// Verb is what the rule did: jump, goto, return, accept, drop, reject,
	// dnat, snat, masquerade, redirect, set (a mark, notrack, a counter,
	// a log), policy (the chain's policy decided), unknown. Target is the
	// chain of a jump or goto, the policy.
	Verb   string `json:"verb"`
	Target string `json:"target,omitempty"`
	// Action says it in words: "jump KUBE-SVC-…", "DNAT to
	// 10.244.1.6:8080", "mark 0x4000/0x4000 → 0x4000", "policy drop"
	// ("" in a Brief walk).
	Action string `json:"action,omitempty"`
	// Share is the probability of this branch at this rule, when the
	// rule chose at random (statistic, numgen); absent otherwise.
	Share *Prob `json:"share,omitempty"`
}

// Ref names a rule.
type Ref struct {
	Hook, Table, Family, Chain string
	Rule                       int
	Text                       string
}

func (r Ref) String() string {
	return fmt.Sprintf("%s %s %s rule %d", r.Family, r.Table, r.Chain, r.Rule+1)
}

// Assumption is a statement about the packet the walk could not
// evaluate (first met at a rule), and whether this outcome assumed it
// true.
type Assumption struct {
	Table  string `json:"table"`
	Family string `json:"family"`
	Chain  string `json:"chain"`
	Rule   int    `json:"rule"`
	// What is the statement: a rule's part not evaluated ("-m owner
	// --uid-owner 0"), where the packet came in ("it came in on an
	// interface matching \"cali*\""), an affinity record.
	What  string `json:"what"`
	Holds bool   `json:"holds"`
}

// NotModelled is something the walk met and could not evaluate.
type NotModelled struct {
	Table  string `json:"table,omitempty"`
	Family string `json:"family,omitempty"`
	Chain  string `json:"chain,omitempty"`
	Rule   int    `json:"rule"`
	What   string `json:"what"`
	// Why says what was done instead ("followed both ways").
	Why string `json:"why"`
}

// Affinity is ClientIP session affinity met on the way.
type Affinity struct {
	// Record is the affinity record (iptables recent list, nftables set)
	// the rule checks.
	Record string `json:"record"`
	// Seconds is how long a record keeps a client (0: not shown).
	Seconds int `json:"seconds,omitempty"`
	// Pinned: this outcome is that of a client that has the record
	// (returning within Seconds); else of one that has none.
	Pinned bool `json:"pinned"`
	// Known: the input says whether the client has the record (nftables
	// sets list their members); else the walk assumed it.
	Known bool `json:"known"`
}
