package ipset

import "strconv"

// Join is the sets of all of ss, each set once: a list and a save of the
// same sets (pasted together, or read from two files) give one set each,
// with the members of both (a member once) and what either form shows
// (the list's counts, the save's options). It never changes its inputs;
// nil inputs are passed over, and all nil gives nil.
func Join(ss ...*Sets) *Sets {
	var out *Sets
	index := map[string]int{}
	seen := map[int]map[string]bool{} // set index -> members kept, made when a set is joined
	warned := map[int]bool{}
	for _, s := range ss {
		if s == nil {
			continue
		}
		if out == nil {
			out = &Sets{Format: s.Format}
		} else if out.Format != s.Format {
			out.Format = FormatMixed
		}
		out.Truncated = addTruncation(out.Truncated, s.Truncated)
		out.Warnings = append(out.Warnings, s.Warnings...)
		for _, set := range s.Sets {
			i, ok := index[set.Name]
			if !ok {
				index[set.Name] = len(out.Sets)
				set.Members = append([]Member(nil), set.Members...)
				set.Options = append([]string(nil), set.Options...)
				out.Sets = append(out.Sets, set)
				continue
			}
			if why := joinSet(&out.Sets[i], &set, seenOf(seen, i, out.Sets[i].Members)); why != "" && !warned[i] {
				warned[i] = true // once a set, so warnings stay within the sets
				out.Warnings = append(out.Warnings, why)
			}
		}
	}
	return out
}

func seenOf(seen map[int]map[string]bool, i int, ms []Member) map[string]bool {
	if m, ok := seen[i]; ok {
		return m
	}
	m := make(map[string]bool, len(ms))
	for _, x := range ms {
		m[x.Raw] = true
	}
	seen[i] = m
	return m
}

// joinSet fills in what dst lacks from src and adds src's new members.
// Members read by another type than dst's are kept raw only, and said.
func joinSet(dst, src *Set, seen map[string]bool) (why string) {
	otherType := dst.Type != "" && src.Type != "" && dst.Type != src.Type
	if otherType {
		why = "set " + dst.Name + " is " + strconv.Quote(dst.Type) + " in one listing and " +
			strconv.Quote(src.Type) + " in another; the second's members are kept unread"
	}
	if dst.Type == "" {
		dst.Type = src.Type
	}
	if dst.Family == "" {
		dst.Family = src.Family
	}
	if dst.HashSize == 0 {
		dst.HashSize = src.HashSize
	}
	if dst.MaxElem == 0 {
		dst.MaxElem = src.MaxElem
	}
	if dst.Range == "" {
		dst.Range = src.Range
	}
	if len(dst.Options) == 0 {
		dst.Options = append([]string(nil), src.Options...)
	}
	dst.Comment = dst.Comment || src.Comment
	dst.Listed = dst.Listed || src.Listed
	if dst.Revision < 0 {
		dst.Revision = src.Revision
	}
	if dst.References < 0 {
		dst.References = src.References
	}
	if dst.Entries < 0 {
		dst.Entries = src.Entries
	}
	for _, m := range src.Members {
		if !seen[m.Raw] {
			seen[m.Raw] = true
			if otherType {
				m = Member{Raw: m.Raw, Comment: m.Comment}
			}
			dst.Members = append(dst.Members, m)
		}
	}
	return why
}

func addTruncation(a, b Truncation) Truncation {
	return Truncation{
		Incomplete:     a.Incomplete || b.Incomplete,
		SetsLeftOut:    a.SetsLeftOut + b.SetsLeftOut,
		MembersLeftOut: a.MembersLeftOut + b.MembersLeftOut,
		LongLines:      a.LongLines + b.LongLines,
		Unread:         a.Unread || b.Unread,
		BytesRead:      a.BytesRead + b.BytesRead,
	}
}
