package nft

import (
	"fmt"
	"sync/atomic"

	"sigs.k8s.io/knftables"
)

// The caps on set and map elements, the same for the three readers (a
// set's elements cost some hundred bytes each, however few bytes of input
// they take): MaxSetElements for one set or map, MaxRulesetElements for
// all those of one input, so that many capped sets cannot add up. What is
// not read is said in a warning; the rest of the input is read as usual.

// MaxSetElements bounds the elements read of one set or map: kube-proxy's
// largest maps hold one element per Service port or endpoint (some
// hundred thousand on the biggest clusters), and 10 million elements
// took 3.4 GB to read.
const MaxSetElements = 1 << 20

// MaxRulesetElements bounds the elements read of all the sets and maps of
// one input together.
const MaxRulesetElements = 4 * MaxSetElements

// elementCount is what a builder has read of the sets' elements.
type elementCount struct {
	n        int             // elements kept, all sets and maps together
	full     bool            // MaxRulesetElements met: warned
	setsFull map[string]bool // sets and maps warned about
	// shared counts the elements of every segment of one text parsed in
	// parallel, so that together they keep no more than the cap (which
	// segments reach it is a race: then the text is read in one piece).
	shared *atomic.Int64
	// sharedFull: this segment stopped at the shared count
	sharedFull bool
}

// elementRoom is how many more elements the ruleset may keep.
func (b *builder) elementRoom() int {
	room := MaxRulesetElements - b.elems.n
	if b.elems.shared != nil {
		room = min(room, MaxRulesetElements-int(b.elems.shared.Load()))
	}
	return max(room, 0)
}

// keepElements records n more elements kept.
func (b *builder) keepElements(n int) {
	b.elems.n += n
	if b.elems.shared != nil && n > 0 {
		b.elems.shared.Add(int64(n))
	}
}

// setFullWarning says, once per set or map, that it holds more elements
// than are read; where is the line or object that held the first not read.
func (b *builder) setFullWarning(where string, family knftables.Family, table, name string) {
	key := fmt.Sprintf("%s %s %s", family, table, name)
	if b.elems.setsFull[key] {
		return
	}
	if b.elems.setsFull == nil {
		b.elems.setsFull = map[string]bool{}
	}
	b.elems.setsFull[key] = true
	b.warn("%s: %s holds more than %d elements: only the first %d are read (kube-proxy's largest maps hold one per Service port or endpoint)",
		where, key, MaxSetElements, MaxSetElements)
}

// rulesetFullWarning says, once, that no more elements are read: those of
// name from where on, and those of every set and map after it.
func (b *builder) rulesetFullWarning(where string, family knftables.Family, table, name string) {
	if b.elems.shared != nil && b.elems.n < MaxRulesetElements {
		b.elems.sharedFull = true // the other segments' count: not this one's to say
		return
	}
	if b.elems.full {
		return
	}
	b.elems.full = true
	b.warn("%s: %s %s %s: the sets and maps of this ruleset hold more than %d elements in all (at most %d each): no more are read, of it or of the sets and maps after it",
		where, family, table, name, MaxRulesetElements, MaxSetElements)
}

// capElements keeps of elems, read for set or map name, which holds have
// elements already, those the caps leave room for, and warns when it
// drops any, naming where it read them (at n: "object 3"); cut says the
// reader dropped some already (it read MaxSetElements of more).
func (b *builder) capElements(elems []*knftables.Element, have int, cut bool, at string, n int, family knftables.Family, table, name string) []*knftables.Element {
	setRoom := max(MaxSetElements-have, 0)
	keep := min(len(elems), setRoom)
	if total := b.elementRoom(); keep > total {
		keep = total
		b.rulesetFullWarning(fmt.Sprintf("%s %d", at, n), family, table, name)
	} else if cut || len(elems) > setRoom {
		b.setFullWarning(fmt.Sprintf("%s %d", at, n), family, table, name)
	}
	if keep < len(elems) {
		clear(elems[keep:]) // nothing dropped kept alive through the array
		elems = elems[:keep:keep]
		if keep == 0 {
			elems = nil
		}
	}
	b.keepElements(keep)
	return elems
}

// shareElementCount counts the elements b reads in c too (a segment's
// builder: c counts those of every segment of its input).
func (b *builder) shareElementCount(c *atomic.Int64) { b.elems.shared = c }

// segmentsOverCap reports whether the segments of one text hold more
// elements together than MaxRulesetElements, or one of them stopped at
// the shared count: then the text is read in one piece, which keeps the
// same elements whatever the timing and says where it stopped.
func segmentsOverCap(segs []*textSegment) bool {
	n := 0
	for _, sg := range segs {
		if sg.b.elems.sharedFull {
			return true
		}
		n += sg.b.elems.n
	}
	return n > MaxRulesetElements
}
