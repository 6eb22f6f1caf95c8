package correlate

import (
	"maps"
	"slices"
	"strings"
)

// sorted lists every set, both families, in kube-proxy's order, members
// by their text.
func (e *IPSetExpectation) sorted() []IPSetExpected {
	out := make([]IPSetExpected, 0, 2*len(ipsetBases))
	for _, name := range IPSetNames() {
		out = append(out, IPSetExpected{Name: name, Members: memberList(e.want[name]),
			Undecided: e.undecided[name], Possible: memberList(e.maybe[name])})
	}
	return out
}

func memberList(m map[string][]IPSetOwner) []IPSetMember {
	out := make([]IPSetMember, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, IPSetMember{Member: k, Owners: m[k]})
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// AttributeIPSetMember says what put member (as `ipset save` prints it, or
// any spelling CanonicalIPSetMember reads) in set: the owners kube-proxy
// would write it for, expected or, in an undecided set, possible. ok is
// false when no current Service port would (a deleted Service's, a changed
// one's, or not kube-proxy's).
func (e *IPSetExpectation) AttributeIPSetMember(set, member string) ([]IPSetOwner, bool) {
	member = CanonicalIPSetMember(member)
	if o, ok := e.want[set][member]; ok {
		return o, true
	}
	if o, ok := e.maybe[set][member]; ok {
		return o, true
	}
	if strings.Contains(set, "SCTP") && e.maybe[set] != nil {
		if _, port, ok := strings.Cut(member, ","); ok {
			o, ok := e.maybe[set]["*,"+port]
			return o, ok
		}
	}
	return nil, false
}

// IPSetFacts are a node's members of kube-proxy's sets joined with the
// expectation.
type IPSetFacts struct {
	Sets   []IPSetSetFacts `json:"sets"`
	Counts IPSetCounts     `json:"counts"`
	// OtherSets are the node's sets kube-proxy's IPVS proxier does not
	// keep (another component's), left out of the counts.
	OtherSets []string `json:"otherSets"`
}

// IPSetCounts let a caller say how much was attributed and found.
type IPSetCounts struct {
	// Members are those present in kube-proxy's sets; Attributed those
	// some current Service port puts there, Unattributed the rest.
	Members      int `json:"members"`
	Attributed   int `json:"attributed"`
	Unattributed int `json:"unattributed"`
	// Expected are the members kube-proxy writes; Present of them found,
	// Missing not.
	Expected int `json:"expected"`
	Present  int `json:"present"`
	Missing  int `json:"missing"`
}

func (c *IPSetCounts) add(o IPSetCounts) {
	c.Members += o.Members
	c.Attributed += o.Attributed
	c.Unattributed += o.Unattributed
	c.Expected += o.Expected
	c.Present += o.Present
	c.Missing += o.Missing
}

// IPSetSetFacts is one set of kube-proxy's.
type IPSetSetFacts struct {
	Name string `json:"name"`
	// Exists: the node has the set.
	Exists    bool   `json:"exists"`
	Undecided string `json:"undecided,omitempty"`
	// Attributed and Unattributed are the node's members, in the node's
	// order; Missing the expected members the node lacks.
	Attributed   []IPSetMember `json:"attributed"`
	Unattributed []IPSetExtra  `json:"unattributed"`
	Missing      []IPSetMember `json:"missing"`
	Counts       IPSetCounts   `json:"counts"`
}

// ClassifyIPSets joins a node's sets (name → members, as `ipset save`
// prints them) with e: each present member attributed or not, each
// expected member present or missing.
func ClassifyIPSets(e *IPSetExpectation, present map[string][]string) *IPSetFacts {
	f := &IPSetFacts{Sets: make([]IPSetSetFacts, 0, len(e.Sets)), OtherSets: []string{}}
	for _, exp := range e.Sets {
		members, exists := present[exp.Name]
		s := IPSetSetFacts{Name: exp.Name, Exists: exists, Undecided: exp.Undecided,
			Attributed: []IPSetMember{}, Unattributed: []IPSetExtra{}, Missing: []IPSetMember{}}
		seen := map[string]bool{}
		for _, m := range members {
			c := CanonicalIPSetMember(m)
			if seen[c] {
				continue // one member, printed twice
			}
			seen[c] = true
			s.Counts.Members++
			if owners, ok := e.AttributeIPSetMember(exp.Name, c); ok {
				s.Attributed = append(s.Attributed, IPSetMember{Member: m, Owners: owners})
			} else {
				s.Unattributed = append(s.Unattributed, e.related.extra(exp.Name, m))
			}
		}
		for _, m := range exp.Members {
			if !seen[m.Member] {
				s.Missing = append(s.Missing, m)
			}
		}
		s.Counts.Attributed, s.Counts.Unattributed = len(s.Attributed), len(s.Unattributed)
		s.Counts.Expected, s.Counts.Missing = len(exp.Members), len(s.Missing)
		s.Counts.Present = s.Counts.Expected - s.Counts.Missing
		f.Counts.add(s.Counts)
		f.Sets = append(f.Sets, s)
	}
	known := map[string]bool{}
	for _, n := range IPSetNames() {
		known[n] = true
	}
	for _, n := range slices.Sorted(maps.Keys(present)) {
		if !known[n] {
			f.OtherSets = append(f.OtherSets, n)
		}
	}
	return f
}
