package ipset

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/proxyrules/kubectl-proxyrules/inspect/internal/scan"
)

// Read reads `ipset save` or `ipset list` output (or both, pasted
// together), detected line by line. What the caps left out is in
// Sets.Truncated; lines not understood are in Sets.Warnings, and the rest
// is kept. The error is only the reader's.
func Read(r io.Reader, lim Limits) (*Sets, error) {
	lim = lim.normalized()
	s := &Sets{}
	lr := scan.NewBounded(r, lim.MaxLineBytes, lim.MaxBytes)
	p := parser{s: s, lr: lr, lim: lim, w: scan.Warnings{Max: lim.MaxWarnings}, byName: map[string]int{}, cur: -1}
	for {
		line, ok := lr.Next()
		if !ok {
			break
		}
		p.line(lr.No, line)
	}
	tr := &s.Truncated
	tr.LongLines, tr.Unread, tr.BytesRead = lr.LongLines, lr.Unread, lr.Read
	tr.Incomplete = tr.Incomplete || tr.LongLines > 0 || tr.Unread
	switch {
	case p.save && p.list:
		s.Format = FormatMixed
	case p.list:
		s.Format = FormatList
	default:
		s.Format = FormatSave
	}
	if p.twice {
		// a list and a save of the same sets: one set each
		j := Join(s)
		j.Format = s.Format
		s = j
	}
	s.Warnings = append(append(p.w.Done(), s.Warnings...), p.notes(s)...)
	return s, lr.Err
}

type parser struct {
	s      *Sets
	lr     *scan.Bounded
	lim    Limits
	w      scan.Warnings
	byName map[string]int // set name -> index of its latest definition
	// cur is the listed set its header and member lines belong to, -1
	// when none; curOut is set when that set was left out by the cap.
	cur        int
	curOut     bool
	inMembers  bool
	members    int
	save, list bool
	twice      bool // a set defined twice (both forms pasted)
}

func (p *parser) line(no int64, raw []byte) {
	l := scan.TrimPasted(string(raw))
	switch {
	case l == "":
		p.inMembers = false // ipset list ends a set with a blank line
	case strings.HasPrefix(l, "create "):
		p.create(no, raw, l)
	case strings.HasPrefix(l, "add "):
		p.add(no, raw, l)
	case strings.HasPrefix(l, "Name: "):
		p.list = true
		p.inMembers = false
		p.cur, p.curOut = p.newSet(strings.TrimSpace(l[len("Name: "):]), FormatList)
	case scan.IsPrompt(l) || isCommand(l):
		p.inMembers = false
	case p.inMembers:
		p.member(no, raw, l, p.cur, p.curOut)
	default:
		if ok, why := p.header(l); !ok {
			p.w.Line(no, raw, "not an ipset save or list line")
		} else if why != "" {
			p.w.Line(no, raw, why)
		}
	}
}

// newSet starts a set; it returns -1 and true when the cap leaves it out.
func (p *parser) newSet(name string, f Format) (int, bool) {
	if len(p.s.Sets) >= p.lim.MaxSets {
		p.s.Truncated.SetsLeftOut++
		p.s.Truncated.Incomplete = true
		delete(p.byName, name)
		return -1, true
	}
	if _, ok := p.byName[name]; ok {
		p.twice = true
	}
	set := Set{Name: name, Revision: -1, References: -1, Entries: -1, Listed: f == FormatSave}
	p.s.Sets = append(p.s.Sets, set)
	p.byName[name] = len(p.s.Sets) - 1
	return len(p.s.Sets) - 1, false
}

func (p *parser) create(no int64, raw []byte, l string) {
	f := strings.Fields(l)
	if len(f) < 3 || !isType(f[2]) {
		p.w.Line(no, raw, "create without a set type")
		return
	}
	p.save = true
	p.inMembers = false
	i, out := p.newSet(f[1], FormatSave)
	p.cur, p.curOut = -1, false
	if out {
		return
	}
	set := &p.s.Sets[i]
	if why := setType(set, f[2]); why != "" {
		p.w.Line(no, raw, why)
	}
	if why := set.options(f[3:]); why != "" {
		p.w.Line(no, raw, why)
	}
}

func (p *parser) add(no int64, raw []byte, l string) {
	// "add NAME MEMBER [options]", cut without a slice of fields
	name, rest := strings.TrimLeft(l[len("add "):], " \t"), ""
	if i := strings.IndexAny(name, " \t"); i >= 0 {
		name, rest = name[:i], name[i+1:]
	}
	if strings.TrimSpace(rest) == "" {
		p.w.Line(no, raw, "add without a member")
		return
	}
	p.save = true
	p.inMembers = false
	i, ok := p.byName[name]
	if !ok {
		if p.s.Truncated.SetsLeftOut > 0 || p.lr.LongLines > 0 {
			p.member(no, raw, "", -1, true) // its set was left out, or its create line
			return
		}
		p.w.Line(no, raw, "add to a set not created before")
		return
	}
	p.member(no, raw, rest, i, false)
}

// member adds the member text (and its options) to set i.
func (p *parser) member(no int64, raw []byte, text string, i int, leftOut bool) {
	if leftOut || i < 0 || p.members >= p.lim.MaxMembers {
		p.s.Truncated.MembersLeftOut++
		p.s.Truncated.Incomplete = true
		return
	}
	set := &p.s.Sets[i]
	m, ok := parseMember(set.Type, set.Family, text)
	if !ok {
		p.w.Line(no, raw, "member not understood for type "+strconv.Quote(set.Type))
	}
	set.Members = append(set.Members, m)
	p.members++
}

// header reads a line of `ipset list`'s header; false when it is none,
// why when it is one not understood.
func (p *parser) header(l string) (ok bool, why string) {
	key, val, found := strings.Cut(l, ":")
	if !found {
		return false, ""
	}
	val = strings.TrimSpace(val)
	var set *Set
	if p.cur >= 0 {
		set = &p.s.Sets[p.cur]
	} else if !p.curOut {
		return false, ""
	}
	switch key {
	case "Type", "Revision", "Header", "Size in memory", "References", "Number of entries", "Members":
	default:
		return false, ""
	}
	p.list = true
	if set == nil { // the set was left out by the cap
		p.inMembers = key == "Members"
		return true, ""
	}
	switch key {
	case "Type":
		why = setType(set, val)
	case "Revision":
		set.Revision = number(val)
	case "Header":
		set.options(strings.Fields(val))
	case "References":
		set.References = number(val)
	case "Number of entries":
		set.Entries = number(val)
	case "Members":
		p.inMembers, set.Listed = true, true
	}
	return true, why
}

// setType gives the set its type. A second, different type for the same
// listing (two Type: lines) is said and the first kept, as its members
// are read by it; a set listed twice is two sets until Join.
func setType(set *Set, typ string) (why string) {
	switch {
	case !isType(typ):
		return "set type " + strconv.Quote(typ) + " not understood"
	case set.Type == "":
		set.Type = typ
	case set.Type != typ:
		return "set " + set.Name + " given a second type " + strconv.Quote(typ) + ", " + strconv.Quote(set.Type) + " kept"
	}
	return ""
}

func number(s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// options reads a set's create options (a save's create line after the
// type, a list's Header:); why is set when one was not understood.
func (s *Set) options(f []string) (why string) {
	for k := 0; k < len(f); k++ {
		o := f[k]
		switch o {
		case "comment":
			s.Comment = true
			continue
		case "counters", "skbinfo", "forceadd", "-exist":
			s.Options = append(s.Options, o)
			continue
		}
		if k+1 >= len(f) {
			s.Options = append(s.Options, o)
			why = "create option " + strconv.Quote(o) + " without its value"
			continue
		}
		v := f[k+1]
		k++
		switch o {
		case "family":
			s.Family = v
		case "hashsize":
			s.HashSize = max(number(v), 0)
		case "maxelem":
			s.MaxElem = max(number(v), 0)
		case "range":
			s.Range = v
		case "bucketsize", "initval":
		default:
			s.Options = append(s.Options, o+" "+v)
		}
	}
	return why
}

// isType: "hash:ip,port", "bitmap:port", "list:set" …
func isType(t string) bool {
	kind, comps, ok := strings.Cut(t, ":")
	if !ok || comps == "" || kind != "hash" && kind != "bitmap" && kind != "list" {
		return false
	}
	for i := 0; i < len(comps); i++ {
		if c := comps[i]; !(c >= 'a' && c <= 'z' || c == ',') {
			return false
		}
	}
	return true
}

// isCommand is the pasted command that printed a listing: "ipset list",
// "[root@node-a ~]# ipset save", "$ sudo /usr/sbin/ipset list -t".
func isCommand(l string) bool {
	f := strings.Fields(l)
	for i, w := range f {
		if w != "ipset" && !strings.HasSuffix(w, "/ipset") {
			continue
		}
		if i > 0 && f[i-1] != "sudo" && !scan.IsPrompt(f[i-1]) {
			return false
		}
		return i+1 < len(f) && (f[i+1][0] == '-' || f[i+1] == "list" || f[i+1] == "save")
	}
	return false
}

// notes says what the caps left out, each starting INCOMPLETE, and which
// listed sets show fewer members than their count.
func (p *parser) notes(s *Sets) []string {
	var out []string
	tr := s.Truncated
	if tr.SetsLeftOut > 0 {
		out = append(out, fmt.Sprintf("INCOMPLETE: %d sets kept (the cap), %d more left out", p.lim.MaxSets, tr.SetsLeftOut))
	}
	if tr.MembersLeftOut > 0 {
		out = append(out, fmt.Sprintf("INCOMPLETE: %d members left out (the cap of %d, or their set was)", tr.MembersLeftOut, p.lim.MaxMembers))
	}
	if tr.LongLines > 0 {
		out = append(out, fmt.Sprintf("INCOMPLETE: %d lines over %d bytes left out", tr.LongLines, p.lim.MaxLineBytes))
	}
	if tr.Unread {
		out = append(out, fmt.Sprintf("INCOMPLETE: reading stopped after %d bytes (the cap); the rest was not read", tr.BytesRead))
	}
	if tr.Incomplete {
		return out
	}
	for _, set := range s.Sets {
		if set.Listed && set.Entries >= 0 && int64(len(set.Members)) != set.Entries {
			out = append(out, fmt.Sprintf("set %s: %d entries, %d members shown", set.Name, set.Entries, len(set.Members)))
		}
	}
	return out
}
