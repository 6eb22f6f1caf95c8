package evaluate

import (
	"fmt"
)

// What one match comes to for one packet.
type condKind uint8

const (
	condTrue condKind = iota
	condFalse
	condRandom   // matches with probability p
	condUnknown  // not modelled: followed both ways
	condAffinity // ClientIP affinity: the client has the record or not
)

// cond is a match's answer. An unknown one names a statement about the
// packet (what, the same words for the same test in every rule form: key)
// and whether the match is its negation; the walk assumes the statement
// true on one branch and false on the other, and keeps to that for the
// rest of the branch, so that two rules testing the same thing agree.
type cond struct {
	kind condKind
	p    Prob
	what string
	neg  bool
	aff  Affinity
}

var (
	yes = cond{kind: condTrue}
	no  = cond{kind: condFalse}
)

func unknown(format string, args ...any) cond {
	return cond{kind: condUnknown, what: fmt.Sprintf(format, args...)}
}

// inIface is the statement "the packet came in on an interface matching
// pattern" (nft's wildcard, '*').
func inIface(pattern string) cond {
	return cond{kind: condUnknown, what: fmt.Sprintf("it came in on an interface matching %q (not known: --in)", pattern)}
}

// outIface is the same for the interface it leaves by.
func outIface(pattern string) cond {
	return cond{kind: condUnknown, what: fmt.Sprintf("it leaves by an interface matching %q (not known)", pattern)}
}

func truth(b bool) cond {
	if b {
		return yes
	}
	return no
}

func not(c cond, negate bool) cond {
	if !negate {
		return c
	}
	switch c.kind {
	case condTrue:
		return no
	case condFalse:
		return yes
	case condRandom:
		return cond{kind: condRandom, p: c.p.Complement()}
	case condUnknown:
		c.neg = !c.neg
	}
	return c
}

// assumed is what t's branch assumed about what, if anything.
func (t *thread) assumed(what string) (holds, ok bool) {
	for a := t.assumes; a != nil; a = a.prev {
		if a.a.What == what {
			return a.a.Holds, true
		}
	}
	return false, false
}

// known turns a condition t's branch has already assumed into a known
// one.
func (t *thread) known(c cond) cond {
	switch c.kind {
	case condUnknown:
		if holds, ok := t.assumed(c.what); ok {
			return truth(holds != c.neg)
		}
	case condAffinity:
		if c.aff.Known {
			return truth(c.aff.Pinned)
		}
		if holds, ok := t.assumed(affinityStatement(c.aff)); ok {
			return truth(holds)
		}
	}
	return c
}

func affinityStatement(a Affinity) string {
	s := "the client has an affinity record in " + a.Record
	if a.Seconds > 0 {
		s += fmt.Sprintf(" (seen in the last %d s)", a.Seconds)
	}
	return s
}

// decide applies one condition of rule i to t. matches is false when the
// rule does not match for t (the rule ends, t goes on with the next one).
// A condition that can go either way forks: t goes on as if it holds,
// miss (returned) as if not, its rule ended; share is multiplied by the
// probability of a random one.
func (w *walk) decide(t *thread, ch chainRef, i int, c cond, share **Prob) (matches bool, miss *thread) {
	if c.kind == condAffinity {
		a := c.aff
		if a.Known {
			t.aff = &a
		} else if holds, ok := t.assumed(affinityStatement(a)); ok {
			a.Pinned = holds
			t.aff = &a
		}
	}
	c = t.known(c)
	switch c.kind {
	case condTrue:
		return true, nil
	case condFalse:
		return false, nil
	case condRandom:
		if c.p.IsZero() {
			return false, nil
		}
		if c.p.IsOne() {
			return true, nil
		}
		miss = w.clone(t)
		miss.prob = miss.prob.Mul(c.p.Complement())
		t.prob = t.prob.Mul(c.p)
		p := c.p
		if *share != nil {
			p = (*share).Mul(p)
		}
		*share = &p
		return true, miss
	case condUnknown:
		return true, w.assumeBoth(t, ch, i, c.what, !c.neg, "followed both ways", nil)
	case condAffinity:
		a := c.aff
		return true, w.assumeBoth(t, ch, i, affinityStatement(a), true,
			"the records are kept in the kernel, not in the rules: followed both ways (a returning client, and a new one)", &a)
	}
	return true, nil
}

// assumeBoth forks t on a statement the walk cannot evaluate: t goes on
// assuming it is holdsForMatch (the rule matches), the copy it returns
// assuming the opposite. With aff, the statement is whether the client has
// that affinity record.
func (w *walk) assumeBoth(t *thread, ch chainRef, i int, what string, holdsForMatch bool, why string, aff *Affinity) *thread {
	tb, fam, _ := ch.tableLabel()
	w.note(NotModelled{Table: tb, Family: fam, Chain: ch.name(), Rule: i, What: what, Why: why})
	miss := w.clone(t)
	miss.assume(Assumption{Table: tb, Family: fam, Chain: ch.name(), Rule: i, What: what, Holds: !holdsForMatch})
	t.assume(Assumption{Table: tb, Family: fam, Chain: ch.name(), Rule: i, What: what, Holds: holdsForMatch})
	if aff != nil {
		unpinned, pinned := *aff, *aff
		unpinned.Pinned, pinned.Pinned = false, true
		if miss.aff == nil {
			miss.aff = &unpinned
		}
		t.aff = &pinned
	}
	return miss
}

// branches turns an iptables rule's conditions into the ways it goes: it
// matches when every condition holds. A false one (also one this branch
// has assumed false) decides at once; the others fork in order.
func (w *walk) branches(t *thread, ch chainRef, i int, conds []cond, matched func(*thread) effect) []branch {
	for _, c := range conds {
		if t.known(c).kind == condFalse {
			return w.result(t, effect{}, nil)
		}
	}
	var forks []branch
	var share *Prob
	for _, c := range conds {
		ok, miss := w.decide(t, ch, i, c, &share)
		if miss != nil {
			forks = append(forks, branch{t: miss})
		}
		if !ok {
			return w.result(t, effect{}, forks)
		}
	}
	eff := matched(t)
	if eff.share == nil {
		eff.share = share
	}
	return w.result(t, eff, forks)
}
