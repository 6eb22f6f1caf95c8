package evaluate

import (
	"fmt"
	"net/netip"

	"github.com/proxyrules/kubectl-proxyrules/inspect"
	"github.com/proxyrules/kubectl-proxyrules/inspect/iptables/ruleargs"
	"github.com/proxyrules/kubectl-proxyrules/inspect/ipvs"
	"github.com/proxyrules/kubectl-proxyrules/inspect/nft"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// Evaluator walks new connections through one node's rules. It reads each
// rule it visits once and keeps what it read, so that many walks (explain
// every Service) cost what their visits cost. It is not safe for
// concurrent use.
type Evaluator struct {
	rs    *inspect.Ruleset
	node  Node
	local map[netip.Addr]bool
	plans map[kubeproxy.Family]*familyPlan

	iptSpecs map[*inspect.IPRule]*iptRule
	nftStmts map[any][]nft.Statement
	indexes  map[*inspect.IPChain]*chainIndex
	sets     map[setKey]*elemIndex
	alts     map[*nft.Expr]alternativeWords
	keyBuf   []byte    // scratch for a lookup's key
	hops     hopArena  // the hops of the last WalkScratch
	free     []*thread // threads of ended branches, for the next forks
	outcomes []Outcome // scratch for a walk's outcomes
	// ipvsIndex: the IPVS table's virtual services (Node.IPVS; ipvs.go)
	ipvsIndex map[ipvsKey]*ipvs.Service
}

// New returns an evaluator of rs on a node.
func New(rs *inspect.Ruleset, node Node) *Evaluator {
	e := &Evaluator{rs: rs, node: node, local: map[netip.Addr]bool{}, plans: map[kubeproxy.Family]*familyPlan{},
		iptSpecs: map[*inspect.IPRule]*iptRule{}, nftStmts: map[any][]nft.Statement{},
		indexes: map[*inspect.IPChain]*chainIndex{}, sets: map[setKey]*elemIndex{}, alts: map[*nft.Expr]alternativeWords{}}
	for _, a := range node.Addresses {
		e.local[a.Unmap()] = true
	}
	e.indexIPVS()
	return e
}

// isLocal: an address of the node, or loopback.
func (e *Evaluator) isLocal(a netip.Addr) bool {
	a = a.Unmap()
	return isLoopback(a) || e.local[a]
}

// maxDepth bounds the chains a walk nests: nf_tables' jump stack holds 16
// (NFT_JUMP_STACK_SIZE; iptables-nft rules are nf_tables rules); legacy
// iptables refuses loops when a ruleset is loaded, and no real ruleset
// nests deeper than this.
const maxDepth = 16

// Walk returns every outcome of the new connection p.
func (e *Evaluator) Walk(p Packet, opts Options) *Result {
	return e.walk(p, opts, false)
}

// walk is Walk; scratch: the result is the evaluator's scratch
// (WalkScratch).
func (e *Evaluator) walk(p Packet, opts Options, scratch bool) *Result {
	if opts.MaxOutcomes <= 0 {
		opts.MaxOutcomes = DefaultMaxOutcomes
	}
	if opts.MaxSteps <= 0 {
		opts.MaxSteps = 1 << 20
	}
	// The outcomes gather in the evaluator's scratch and are copied out
	// once, sized: appending to a fresh list grew it a dozen times a walk.
	w := &walk{e: e, opts: opts, res: &Result{Packet: p, Outcomes: e.outcomes[:0], NotModelled: []NotModelled{}}, scratch: scratch}
	if scratch {
		e.hops.reset()
	}
	defer func() {
		e.outcomes = w.res.Outcomes
		if scratch {
			return
		}
		w.res.Outcomes = append(make([]Outcome, 0, len(e.outcomes)), e.outcomes...)
		clear(e.outcomes) // hold no path of a walk that is over
	}()
	if p.Family == "" {
		p.Family = kubeproxy.IPv4
		if p.Dst.Addr().Is6() && !p.Dst.Addr().Is4In6() {
			p.Family = kubeproxy.IPv6
		}
		w.res.Packet = p
	}
	plan := e.plan(p.Family)
	for _, m := range plan.missing {
		w.note(m)
	}
	if len(e.node.Addresses) == 0 {
		w.note(NotModelled{Rule: -1, What: "the node's own addresses are not known",
			Why: "every address but loopback was taken as another host's (-m addrtype LOCAL, fib daddr type local, local delivery)"})
	}
	t := e.newThread()
	*t = thread{
		src: p.Src, dst: p.Dst, origDst: p.Dst, origSrc: p.Src,
		mark: p.Mark, prob: One(), ctstate: ctInvalid,
		hooks: firstHooks(p.Origin),
		iif:   p.InIface, iifKnown: p.InIface != "" || p.Origin == FromNode,
		frames: t.frames,
	}
	w.plan = plan
	w.pkt = p
	w.queue = append(w.queue, t)
	for len(w.queue) > 0 {
		t := w.queue[len(w.queue)-1]
		w.queue = w.queue[:len(w.queue)-1]
		if len(w.res.Outcomes)+len(w.queue) >= opts.MaxOutcomes {
			w.res.Truncated = true
		} else {
			w.run(t)
		}
		e.release(t)
	}
	return w.res
}

// The hooks of each part of a connection's way: never changed, only
// resliced, so that a fork shares them.
var (
	hooksLocalOut  = []string{hookOutput, hookPostrouting}
	hooksIn        = []string{hookPrerouting}
	hooksLoopback  = []string{hookPrerouting, hookInput}
	hooksDeliver   = []string{hookInput}
	hooksForwarded = []string{hookForward, hookPostrouting}
)

// firstHooks are the hooks a new connection from origin meets before the
// routing decision after them.
func firstHooks(o Origin) []string {
	if o == FromNode {
		return hooksLocalOut
	}
	return hooksIn
}

type walk struct {
	steps int
	e     *Evaluator
	opts  Options
	plan  *familyPlan
	pkt   Packet
	res   *Result
	queue []*thread
	// brs and conds are scratch for a rule's branches and conditions,
	// valid until the next rule is evaluated.
	brs   []branch
	conds []cond
	vals  []value
	// scratch: the hops are cut from the evaluator's arena (WalkScratch)
	scratch bool
}

// result is a rule's branches: t with eff, then the forks.
func (w *walk) result(t *thread, eff effect, forks []branch) []branch {
	b := append(w.brs[:0], branch{t: t, eff: eff})
	b = append(b, forks...)
	w.brs = b
	return b
}

// thread is one branch of the walk: the packet as the rules have changed
// it so far, and where the walk is.
type thread struct {
	src, dst         netip.AddrPort
	origSrc, origDst netip.AddrPort
	mark, ctmark     uint32
	ctstate          uint64 // ct state bits
	ctstatus         uint64 // ct status bits
	untracked        bool
	dnat, masq       bool
	snatTo           string
	natDst, natSrc   bool // the NAT binding of that kind is made
	postMark         uint32
	reject           string
	iif              string
	iifKnown         bool
	oif              string
	prob             Prob
	path             *hopNode
	assumes          *assumeNode
	aff              *Affinity

	// Where the walk is: hooks still to run (hooks[0] now), the unit of
	// it, the chain of a nat unit, the call stack; loopback: the second
	// pass of a local connection to the node itself.
	hooks    []string
	unit     int
	natChain int
	frames   []frame
	routed   bool // the routing decision after the first hooks is made
	started  bool // the current base chain is entered
	postSeen bool // postMark is set

	ipvs    *IPVSChoice   // IPVS scheduled it (ipvs.go)
	ipvsSvc *ipvs.Service // its virtual service, once IPVS sent it on
	end     Verdict       // how an IPVS step ended it
}

type frame struct {
	ch   chainRef
	next int // the next rule to look at
	// via are the chains this frame went through by goto, for the loop
	// check: the kernel refuses a loop of jumps and gotos alike.
	via []chainRef
}

type hopNode struct {
	hop  Hop
	prev *hopNode
}

type assumeNode struct {
	a    Assumption
	prev *assumeNode
}

// clone is a copy of t that goes its own way from here.
func (w *walk) clone(t *thread) *thread {
	c := w.e.newThread()
	frames := c.frames[:0]
	*c = *t
	c.frames = append(frames, t.frames...)
	return c
}

// newThread is a thread a finished walk branch left (its frames' room
// kept), or a new one: forks are most of a walk's allocations.
func (e *Evaluator) newThread() *thread {
	if n := len(e.free); n > 0 {
		t := e.free[n-1]
		e.free = e.free[:n-1]
		return t
	}
	return &thread{frames: make([]frame, 0, 6)}
}

// release takes back a thread whose branch has ended: its outcome holds
// copies of what it needs, nothing holds the thread.
func (e *Evaluator) release(t *thread) {
	*t = thread{frames: t.frames[:0]}
	e.free = append(e.free, t)
}

// addHop adds h to t's path.
func (w *walk) addHop(t *thread, h Hop) {
	if w.scratch {
		t.path = w.e.hops.take(h, t.path)
		return
	}
	t.path = &hopNode{hop: h, prev: t.path}
}

func (t *thread) assume(a Assumption) { t.assumes = &assumeNode{a: a, prev: t.assumes} }

// note records something not modelled, once.
func (w *walk) note(n NotModelled) {
	for _, m := range w.res.NotModelled {
		if m == n {
			return
		}
	}
	w.res.NotModelled = append(w.res.NotModelled, n)
}

// action is what a rule does once it matched (or not).
type action uint8

const (
	actNext    action = iota // on to the next rule
	actAccept                // this base chain accepts
	actDrop                  //
	actReject                //
	actReturn                //
	actJump                  // into target, and back
	actGoto                  // into target, not back
	actNAT                   // a NAT binding was made: this base chain accepts
	actUnknown               // not modelled: the outcome is unknown
)

// effect is a rule's action with its target.
type effect struct {
	act action
	// verb names a NAT (dnat, snat, masquerade, redirect) or a side
	// effect (set) for the hop.
	verb   string
	target string
	// what: for actUnknown, what was not modelled; else the action as the
	// hop shows it, when it says more than the action's name.
	what string
	// share is the probability the rule chose this branch with.
	share *Prob
}

// run walks t until it ends (or forks: the forks are queued).
func (w *walk) run(t *thread) {
	for {
		if w.steps++; w.steps > w.opts.MaxSteps {
			w.note(NotModelled{Rule: -1, What: fmt.Sprintf("the walk stopped after %d rules", w.opts.MaxSteps),
				Why: "a ruleset this size or shape (goto loops) is not walked to the end; the outcome is unknown"})
			w.finish(t, VerdictUnknown)
			return
		}
		if len(t.frames) == 0 {
			if !w.enterNext(t) {
				w.finish(t, t.end)
				return
			}
			continue
		}
		top := &t.frames[len(t.frames)-1]
		i := w.e.nextRule(top.ch, top.next, t.dst.Addr())
		if i >= top.ch.rules() {
			if len(t.frames) == 1 {
				// The end of a base chain: its policy.
				bc := w.currentBase(t)
				w.policyHop(t, top.ch, bc.policy)
				if bc.policy == "drop" {
					w.finish(t, VerdictDrop)
					return
				}
				w.baseAccepted(t)
				continue
			}
			if !w.opts.Brief {
				w.addHop(t, w.hop(t, top.ch, -1, "", "return", "", "return (end of chain)"))
			}
			t.frames = t.frames[:len(t.frames)-1]
			continue
		}
		top.next = i + 1
		ch := top.ch
		brs := w.evalRule(t, ch, i)
		// brs[0] is t itself; the others are copies, queued so that the
		// first is walked first once t has ended.
		for k := len(brs) - 1; k >= 1; k-- {
			if w.apply(brs[k].t, ch, i, brs[k].eff) {
				w.queue = append(w.queue, brs[k].t)
			} else {
				w.e.release(brs[k].t)
			}
		}
		if !w.apply(t, ch, i, brs[0].eff) {
			return
		}
	}
}

// branch is one way a rule can go for a thread (the thread itself, or a
// fork queued already).
type branch struct {
	t   *thread
	eff effect
}

// apply carries out a rule's effect on t; false when t ended.
func (w *walk) apply(t *thread, ch chainRef, i int, eff effect) bool {
	add := func(verb, target, action string) { w.ruleHop(t, ch, i, eff.share, verb, target, action) }
	switch eff.act {
	case actNext:
		if eff.what != "" && !w.opts.Brief {
			verb := eff.verb
			if verb == "" {
				verb = "set"
			}
			add(verb, "", eff.what)
		}
		return true
	case actAccept:
		add("accept", "", "accept")
		w.baseAccepted(t)
		return true
	case actNAT:
		add(eff.verb, "", eff.what)
		w.baseAccepted(t)
		return true
	case actDrop:
		add("drop", "", "drop")
		w.finish(t, VerdictDrop)
		return false
	case actReject:
		action := ""
		if !w.opts.Brief {
			action = "reject " + t.reject
		}
		add("reject", t.reject, action)
		w.finish(t, VerdictReject)
		return false
	case actReturn:
		if !w.opts.Brief {
			add("return", "", "return")
		}
		t.frames = t.frames[:len(t.frames)-1]
		if len(t.frames) == 0 {
			// RETURN in a base chain: its policy.
			bc := w.currentBase(t)
			w.policyHop(t, ch, bc.policy)
			if bc.policy == "drop" {
				w.finish(t, VerdictDrop)
				return false
			}
			w.baseAccepted(t)
		}
		return true
	case actJump, actGoto:
		verb := "jump"
		if eff.act == actGoto {
			verb = "goto"
		}
		switch {
		case !w.opts.Brief:
			add(verb, eff.target, verb+" "+eff.target)
		case w.plan.hooks[t.hooks[0]][t.unit].nat:
			// a Brief walk keeps the jumps of the nat chains: the way
			// to the DNAT (where a filter chain drops, its verdict's
			// hop says)
			add(verb, eff.target, "")
		}
		next, ok := ch.lookup(eff.target)
		if !ok || next.ic != nil && next.ic.OnlyReferenced {
			tb, fam, _ := ch.tableLabel()
			w.note(NotModelled{Table: tb, Family: fam, Chain: eff.target, Rule: -1,
				What: "chain " + eff.target + " is not in the input", Why: "outcomes through it are unknown"})
			w.finish(t, VerdictUnknown)
			return false
		}
		if onPath(t.frames, next) {
			tb, fam, _ := ch.tableLabel()
			w.note(NotModelled{Table: tb, Family: fam, Chain: eff.target, Rule: -1, What: "a jump loop through " + eff.target,
				Why: "the kernel refuses to load such a ruleset; the outcome is unknown"})
			w.finish(t, VerdictUnknown)
			return false
		}
		if eff.act == actGoto {
			old := t.frames[len(t.frames)-1]
			t.frames[len(t.frames)-1] = frame{ch: next, via: append(old.via[:len(old.via):len(old.via)], old.ch)}
			return true
		}
		if len(t.frames) >= maxDepth {
			tb, fam, _ := ch.tableLabel()
			w.note(NotModelled{Table: tb, Family: fam, Chain: eff.target, Rule: -1, What: fmt.Sprintf("chains nested deeper than %d", maxDepth),
				Why: "the kernel refuses such a ruleset; the outcome is unknown"})
			w.finish(t, VerdictUnknown)
			return false
		}
		t.frames = append(t.frames, frame{ch: next})
		return true
	case actUnknown:
		add("unknown", "", "not modelled: "+eff.what)
		tb, fam, _ := ch.tableLabel()
		w.note(NotModelled{Table: tb, Family: fam, Chain: ch.name(), Rule: i, What: eff.what, Why: "the outcome is unknown"})
		w.finish(t, VerdictUnknown)
		return false
	}
	return true
}

// policyHop records a base chain's policy deciding (a drop always, an
// accept unless Brief).
func (w *walk) policyHop(t *thread, ch chainRef, policy string) {
	if policy == "drop" || !w.opts.Brief {
		w.addHop(t, w.hop(t, ch, -1, "", "policy", policy, "policy "+policy))
	}
}

// onPath: ch is on the call path (jumped or gone to and not returned
// from).
func onPath(frames []frame, ch chainRef) bool {
	for _, f := range frames {
		if f.ch == ch {
			return true
		}
		for _, v := range f.via {
			if v == ch {
				return true
			}
		}
	}
	return false
}

// currentBase is the base chain t is in.
func (w *walk) currentBase(t *thread) baseChain {
	u := w.plan.hooks[t.hooks[0]][t.unit]
	return u.chains[t.natChain]
}

// baseAccepted: the current base chain let the packet through: on to the
// next nat chain of a nat unit (unless a binding was made), else the next
// unit.
func (w *walk) baseAccepted(t *thread) {
	t.frames = t.frames[:0]
	u := w.plan.hooks[t.hooks[0]][t.unit]
	if u.nat && t.natChain+1 < len(u.chains) && !w.natDone(t, t.hooks[0]) {
		t.natChain++
		t.started = false
		return
	}
	t.unit++
	t.natChain = 0
	t.started = false
}

// natDone: the binding the nat hook makes at hook is made.
func (w *walk) natDone(t *thread, hook string) bool {
	if natPrio(hook) == prioNATDst {
		return t.natDst
	}
	return t.natSrc
}

// enterNext enters the next base chain t's hooks have to run; false when
// none is left (the packet made it through).
func (w *walk) enterNext(t *thread) bool {
	for {
		if len(t.hooks) == 0 {
			if !w.route(t) {
				return false
			}
			continue
		}
		hook := t.hooks[0]
		plan := w.plan.hooks[hook]
		if t.unit >= len(plan) {
			w.leaveHook(t, hook)
			t.hooks = t.hooks[1:]
			t.unit, t.natChain = 0, 0
			continue
		}
		u := plan[t.unit]
		if u.ipvs {
			if !w.ipvsStep(t, hook) {
				return false
			}
			continue
		}
		if !t.started {
			w.conntrackBefore(t, hook, u.prio)
			if hook == hookPostrouting && !t.postSeen {
				t.postMark, t.postSeen = t.mark, true
			}
			if u.nat && (t.untracked || w.natDone(t, hook)) {
				t.unit++
				t.natChain = 0
				continue
			}
			t.started = true
		}
		t.frames = append(t.frames[:0], frame{ch: u.chains[t.natChain].chainRef})
		return true
	}
}

// conntrackBefore: conntrack runs at priority -200 of prerouting and
// output; before it a packet has no connection (ct state invalid).
func (w *walk) conntrackBefore(t *thread, hook string, prio int) {
	if t.untracked || t.ctstate&ctNew != 0 {
		return
	}
	if (hook == hookPrerouting || hook == hookOutput) && prio < prioConntrack {
		return
	}
	t.ctstate = ctNew
}

// leaveHook: what the kernel does at the end of a hook: a nat hook that
// made no binding makes a null one (nf_nat_alloc_null_binding), and the
// connection is confirmed when the packet leaves postrouting or input.
func (w *walk) leaveHook(t *thread, hook string) {
	if t.ctstate&ctNew != 0 && !t.untracked {
		switch hook {
		case hookPrerouting, hookOutput:
			t.natDst = true
		case hookInput, hookPostrouting:
			t.natSrc = true
			t.ctstatus |= ctsConfirmed
		}
	}
	if hook == hookPostrouting && !t.postSeen {
		t.postMark, t.postSeen = t.mark, true
	}
}

// route decides where the packet goes once the hooks so far are done;
// false when it has arrived: routed on to another host (or a pod), or
// delivered to the node itself.
func (w *walk) route(t *thread) bool {
	if t.routed {
		return false
	}
	t.routed = true
	local := w.e.isLocal(t.dst.Addr())
	switch {
	case w.pkt.Origin == FromNode && local:
		// To the node itself: over loopback, into prerouting and input
		// again; the connection exists and its NAT is done, so no nat
		// chain runs again.
		t.iif, t.iifKnown = "lo", true
		t.hooks = hooksLoopback
	case w.pkt.Origin == FromNode:
		return false
	case local:
		t.hooks = hooksDeliver
	default:
		t.hooks = hooksForwarded
	}
	return true
}

// finish records t's outcome. v "" means the packet made it through.
func (w *walk) finish(t *thread, v Verdict) {
	out := Outcome{Probability: t.prob, Verdict: v, Destination: t.dst, DNAT: t.dnat, Masquerade: t.masq, SNATTo: t.snatTo,
		Mark: t.postMark, Affinity: t.aff}
	if v == "" {
		out.Verdict = VerdictAccept
		if t.dnat {
			out.Verdict = VerdictDNAT
		}
		out.Delivery = "routed"
		if w.e.isLocal(t.dst.Addr()) {
			out.Delivery = "local"
		}
	}
	if v == VerdictReject {
		out.Reject = t.reject
	}
	out.path = t.path
	if !w.opts.Brief {
		out.Path = out.Hops()
	}
	for a := t.assumes; a != nil; a = a.prev {
		out.Assumes = append(out.Assumes, a.a)
	}
	reverse(out.Assumes)
	w.finishIPVS(&out, t)
	w.res.Outcomes = append(w.res.Outcomes, out)
}

func reverse[T any](s []T) {
	for i, j := 0, len(s)-1; i < j; i, j = i+1, j-1 {
		s[i], s[j] = s[j], s[i]
	}
}

// ruleText is the text and input line of rule i of ch.
func (e *Evaluator) ruleText(ch chainRef, i int) (string, int) {
	if i < 0 {
		return "", 0
	}
	if ch.ic != nil {
		r := ch.ic.Rules[i]
		return r.Text, int(r.Line)
	}
	r := ch.nc.Rules[i]
	text := r.Rule.Rule
	if r.Comment != nil && *r.Comment != "" {
		text += fmt.Sprintf(" comment %q", *r.Comment)
	}
	return text, r.Line
}

// evalRule evaluates rule i of ch for t: the ways it can go.
func (w *walk) evalRule(t *thread, ch chainRef, i int) []branch {
	if ch.ic != nil {
		r := ch.ic.Rules[i]
		switch {
		case ch.ipt.FromNFT:
			return w.evalNFT(t, ch, i, w.e.statements(r, r.Text))
		case plain(r):
			return w.evalPlain(t, ch, i, r)
		}
		return w.evalIPT(t, ch, i, w.e.iptSpec(r))
	}
	r := ch.nc.Rules[i]
	return w.evalNFT(t, ch, i, w.e.statements(r, r.Rule.Rule))
}

// statements are the statements of a rule (an *inspect.NFTRule, or an
// iptables-nft *inspect.IPRule read through nft), read once.
func (e *Evaluator) statements(rule any, text string) []nft.Statement {
	if s, ok := e.nftStmts[rule]; ok {
		return s
	}
	s := nft.ParseStatements(text)
	e.nftStmts[rule] = s
	return s
}

// iptRule is a rule's arguments read whole, or why they could not be.
type iptRule struct {
	spec ruleargs.Spec
	err  error
}

func (e *Evaluator) iptSpec(r *inspect.IPRule) *iptRule {
	if s, ok := e.iptSpecs[r]; ok {
		return s
	}
	spec, err := ruleargs.ParseSpec(r.Text)
	s := &iptRule{spec: spec, err: err}
	e.iptSpecs[r] = s
	return s
}

// ruleHop records rule i of ch on t's path.
func (w *walk) ruleHop(t *thread, ch chainRef, i int, share *Prob, verb, target, action string) {
	text, line := w.e.ruleText(ch, i)
	h := w.hop(t, ch, i, text, verb, target, action)
	h.Line, h.Share = line, share
	w.addHop(t, h)
}

func (w *walk) hop(t *thread, ch chainRef, rule int, text, verb, target, action string) Hop {
	tb, fam, backend := ch.tableLabel()
	hook := ""
	if len(t.hooks) > 0 {
		hook = t.hooks[0]
	}
	return Hop{Hook: hook, Table: tb, Family: fam, Backend: backend, Chain: ch.name(), Rule: rule, Text: text, Verb: verb, Target: target, Action: action}
}

// words is s, unless the walk is Brief (its hops say no words).
func (w *walk) words(s string) string {
	if w.opts.Brief {
		return ""
	}
	return s
}
