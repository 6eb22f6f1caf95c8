package evaluate

// WalkScratch is Walk for a caller that is done with the result before it
// walks again: the result's outcomes and their paths are the evaluator's
// scratch, which its next walk overwrites. Walking every Service of a big
// node (explain, triage), allocating each hop and copying the outcomes
// out was most of what the walks allocated.
func (e *Evaluator) WalkScratch(p Packet, opts Options) *Result {
	return e.walk(p, opts, true)
}

// hopChunk is the hops a chunk of the arena holds.
const hopChunk = 512

// hopArena hands out the hop nodes of one walk from chunks it keeps for
// the next: a node stays where it is until the arena is reset.
type hopArena struct {
	chunks      [][]hopNode
	chunk, used int
}

// reset takes every node back (the last walk's paths are over).
func (a *hopArena) reset() { a.chunk, a.used = 0, 0 }

// take is a node of h after prev.
func (a *hopArena) take(h Hop, prev *hopNode) *hopNode {
	if a.chunk < len(a.chunks) && a.used == len(a.chunks[a.chunk]) {
		a.chunk, a.used = a.chunk+1, 0
	}
	if a.chunk == len(a.chunks) {
		a.chunks = append(a.chunks, make([]hopNode, hopChunk))
	}
	n := &a.chunks[a.chunk][a.used]
	a.used++
	*n = hopNode{hop: h, prev: prev}
	return n
}
