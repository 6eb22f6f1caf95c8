package nft

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"github.com/proxyrules/kubectl-proxyrules/inspect"
)

// This file holds the nftables rule analysis shared by the three nftables
// readers (JSON, text, knftables dump): a tokenizer for rule text and
// analyzeRule, which understands both kube-proxy's source spelling
// (`mark set mark or 0x4000`, `dnat ip addr . port to numgen … map { … }`)
// and nft's canonical listing (`meta mark set meta mark | 0x00004000`,
// `dnat ip to numgen … map { … }`).

// tokenize splits nft rule text into tokens. Words are separated by white
// space; a double-quoted string is one token (quotes kept); '{' and '}' are
// tokens of their own when they start or end a word, and so is a ',' that
// ends a word (nft prints `{ 0 : a . 80, 1 : b . 80 }`). A ',' inside a word
// (`related,established`) is kept.
func tokenize(s string) []string {
	var spans []token
	return appendTokens(nil, s, &spans)
}

// token is a token of a text, as the offsets text[from:to]: the analyzer
// keeps its tokens so, without pointers, which costs no write barrier
// while the garbage collector runs (it runs through most of a parse).
type token struct{ from, to int32 }

// appendTokens appends the tokens of s to toks, as strings; *spans is
// scratch for appendTokenSpans.
func appendTokens(toks []string, s string, spans *[]token) []string {
	*spans = appendTokenSpans((*spans)[:0], s)
	for _, t := range *spans {
		toks = append(toks, s[t.from:t.to])
	}
	return toks
}

// tokenClass sorts the bytes appendTokens looks at: 0 a byte of a word,
// 1 white space, 2 a brace, 3 a double quote. One table lookup per byte
// where a chain of comparisons was.
var tokenClass = [256]uint8{' ': 1, '\t': 1, '\n': 1, '\r': 1, '{': 2, '}': 2, '"': 3}

// appendTokenSpans appends the tokens of s to toks; of a rule of 2 GiB
// or more (the plugin's inputs are capped far below), those of its first
// 2 GiB.
func appendTokenSpans(toks []token, s string) []token {
	return appendTokenSpansFrom(toks, s, nil)
}

// appendTokenSpansFrom is appendTokenSpans; with sc, the body of an inline
// map of the common shape (`map { 0 : 10.1.2.3 . 80, … }`) that follows a
// `map` or `vmap` token is read by sc.readBody instead, and stands in toks
// as one placeholder token {-1, index into sc.spans}.
func appendTokenSpansFrom(toks []token, s string, sc *ruleScratch) []token {
	s = s[:min(len(s), math.MaxInt32)]
	i := 0
	for i < len(s) {
		switch tokenClass[s[i]] {
		case 1:
			i++
			continue
		case 2:
			if sc != nil && s[i] == '{' && len(toks) > 0 {
				if prev := toks[len(toks)-1]; prev.from >= 0 {
					if w := s[prev.from:prev.to]; w == "map" || w == "vmap" {
						if end, ok := sc.readBody(s, i); ok {
							toks = append(toks, token{-1, int32(len(sc.spans) - 1)})
							i = end + 1
							continue
						}
					}
				}
			}
			toks = append(toks, token{int32(i), int32(i + 1)})
			i++
			continue
		case 3:
			j := i + 1
			for j < len(s) && s[j] != '"' {
				if s[j] == '\\' && j+1 < len(s) {
					j++
				}
				j++
			}
			if j < len(s) {
				j++
			}
			toks = append(toks, token{int32(i), int32(j)})
			i = j
			continue
		}
		j := i + 1
		for j < len(s) {
			c := tokenClass[s[j]]
			if c == 0 {
				j++
				continue
			}
			if c != 3 {
				break
			}
			// a quote inside a word (`prefix"x"`): keep it in the word.
			k := j + 1
			for k < len(s) && s[k] != '"' {
				k++
			}
			if k < len(s) {
				k++
			}
			j = k
		}
		if j-i > 1 && s[j-1] == ',' {
			toks = append(toks, token{int32(i), int32(j - 1)}, token{int32(j - 1), int32(j)})
		} else {
			toks = append(toks, token{int32(i), int32(j)})
		}
		i = j
	}
	return toks
}

// bodyEntry is one `key : value` entry of an inline map body that
// readBody read: the key when it is one token (from < 0 otherwise), the
// value's first tokens and their count (4 standing for four or more).
type bodyEntry struct {
	key  token
	vals [3]token
	nv   int8
	// plainAddr: vals[0] holds no ':', '[' or ']' (known when
	// canonicalEntry read it), so "A:P" is its DNAT destination as it is
	plainAddr bool
}

// bodySpan is the entries of one map body, sc.bodies[first:end].
type bodySpan struct{ first, end int32 }

// bodyKeyword reports whether the analyzer acts on t inside braces: a
// body holding one is left to the token path. (A switch: a map lookup
// hashes every word.)
func bodyKeyword(t string) bool {
	switch t {
	case "map", "vmap", "numgen", "mark", "random", "xt", "XT":
		return true
	}
	return false
}

// readBody reads the map body whose '{' is at s[open], as
// appendTokenSpans would split it and analyzer.inlineEntries would read
// it, into sc.bodies and one new sc.spans entry, and returns the index of
// its '}'. It gives up (false, nothing kept) on what is not the common
// shape: nested braces, quotes, a set reference or a word the analyzer
// acts on inside braces, no closing brace.
func (sc *ruleScratch) readBody(s string, open int) (int, bool) {
	first := len(sc.bodies)
	giveUp := func() (int, bool) {
		sc.bodies = sc.bodies[:first]
		return 0, false
	}
	var cur bodyEntry
	nk, inKey := 0, true
	flush := func() {
		if !inKey && cur.nv > 0 {
			if nk != 1 {
				cur.key = token{-1, -1}
			}
			sc.bodies = append(sc.bodies, cur)
		}
		cur, nk, inKey = bodyEntry{}, 0, true
	}
	word := func(w token) bool {
		t := s[w.from:w.to]
		switch {
		case t == ",":
			flush()
		case t == ":" && inKey:
			inKey = false
		case t[0] == '@' || bodyKeyword(t):
			return false
		case inKey:
			if nk == 0 {
				cur.key = w
			}
			nk++
		default:
			if cur.nv < 3 {
				cur.vals[cur.nv] = w
			}
			cur.nv = min(cur.nv+1, 4)
		}
		return true
	}
	for i := open + 1; i < len(s); {
		if nk == 0 && inKey && cur.nv == 0 && s[i]-'0' < 10 && !sc.wordsOnly {
			// at an entry's start: nft's own spelling of it, read at once
			if e, end, ok := canonicalEntry(s, i); ok {
				sc.bodies = append(sc.bodies, e)
				i = end
				continue
			}
		}
		switch tokenClass[s[i]] {
		case 1:
			i++
			continue
		case 2:
			if s[i] == '}' {
				flush()
				sc.spans = append(sc.spans, bodySpan{int32(first), int32(len(sc.bodies))})
				return i, true
			}
			return giveUp() // a nested brace
		case 3:
			return giveUp() // a quoted string
		}
		j := wordEnd(s, i+1)
		ok := true
		if j < len(s) && tokenClass[s[j]] == 3 {
			ok = false // a quote inside a word
		} else if j-i > 1 && s[j-1] == ',' {
			ok = word(token{int32(i), int32(j - 1)}) && word(token{int32(j - 1), int32(j)})
		} else {
			ok = word(token{int32(i), int32(j)})
		}
		if !ok {
			return giveUp()
		}
		i = j
	}
	return giveUp() // no closing brace
}

// canonicalEntry reads the map body entry at s[i] when it is spelt as nft
// lists kube-proxy's: `K : A . P` (K decimal digits, single spaces), then
// a ',' that ends P's word or a '}' after white space. It returns the
// entry readBody's word path would record, and where that path would go
// on: after the ',' or at the '}'. ok is false, with nothing read, on any
// other spelling: readBody then reads the entry word by word.
func canonicalEntry(s string, i int) (e bodyEntry, end int, ok bool) {
	k := i
	for k < len(s) && s[k]-'0' < 10 {
		k++
	}
	if k+3 > len(s) || s[k:k+3] != " : " {
		return e, 0, false
	}
	e.key = token{int32(i), int32(k)}
	a0 := k + 3
	a1, plain := addrEnd(s, a0)
	if a1 == a0 || s[a1-1] == ',' || !plainValue(s[a0:a1]) || a1+3 > len(s) || s[a1:a1+3] != " . " {
		return e, 0, false
	}
	p0 := a1 + 3
	p1 := wordEnd(s, p0)
	end = p1 // (a quote there: readBody gives up at it)
	if p1 > p0 && s[p1-1] == ',' {
		p1-- // the ',' ends the entry
	} else {
		for end < len(s) && tokenClass[s[end]] == 1 {
			end++
		}
		if end == len(s) || s[end] != '}' {
			return e, 0, false
		}
	}
	if p1 == p0 || !plainValue(s[p0:p1]) {
		return e, 0, false
	}
	e.vals = [3]token{{int32(a0), int32(a1)}, {int32(a1 + 1), int32(a1 + 2)}, {int32(p0), int32(p1)}}
	e.nv, e.plainAddr = 3, plain
	return e, end, true
}

// addrClass sorts the bytes of a word as addrEnd needs: 0 a byte of a
// word, 1 one of a word that makes an address need brackets in host:port
// (or be taken out of them), 2 none of a word (tokenClass not 0).
var addrClass = func() (c [256]uint8) {
	for b := range c {
		if tokenClass[b] != 0 {
			c[b] = 2
		}
	}
	c[':'], c['['], c[']'] = 1, 1, 1
	return c
}()

// addrEnd is wordEnd, also telling whether the word holds no byte of
// class 1.
func addrEnd(s string, i int) (int, bool) {
	var seen uint8
	for ; i < len(s); i++ {
		c := addrClass[s[i]]
		if c == 2 {
			break
		}
		seen |= c
	}
	return i, seen == 0
}

// wordEnd is the end of the word that starts at s[i] (i itself when
// none does).
func wordEnd(s string, i int) int {
	for i < len(s) && tokenClass[s[i]] == 0 {
		i++
	}
	return i
}

// plainValue reports whether readBody's word path takes the word w as a
// value word: no set reference, no word the analyzer acts on.
func plainValue(w string) bool {
	return w[0] != '@' && !bodyKeyword(w)
}

// unquote removes surrounding double quotes from a token, if any.
func unquote(s string) string {
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		s = s[1 : len(s)-1]
		if strings.Contains(s, `\"`) {
			s = strings.ReplaceAll(s, `\"`, `"`)
		}
	}
	return s
}

// parseNFTUint parses a decimal or 0x-prefixed hexadecimal number.
func parseNFTUint(s string) (uint64, bool) {
	if v, ok := shortDecimal(s); ok {
		return v, true // most numbers: no call into strconv
	}
	if len(s) > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') {
		v, err := strconv.ParseUint(s[2:], 16, 64)
		return v, err == nil
	}
	v, err := strconv.ParseUint(s, 10, 64)
	return v, err == nil
}

// shortDecimal parses s when it is 1 to 19 decimal digits (any such
// number fits in a uint64).
func shortDecimal(s string) (uint64, bool) {
	if len(s) == 0 || len(s) > 19 {
		return 0, false
	}
	var v uint64
	for i := 0; i < len(s); i++ {
		d := s[i] - '0'
		if d > 9 {
			return 0, false
		}
		v = v*10 + uint64(d)
	}
	return v, true
}

func parseNFTUint32(s string) (uint32, bool) {
	v, ok := parseNFTUint(s)
	if !ok || v > math.MaxUint32 {
		return 0, false
	}
	return uint32(v), true
}

func isCmpOp(t string) bool {
	switch t {
	case "==", "!=", "<", ">", "<=", ">=", "eq", "ne", "lt", "gt", "le", "ge":
		return true
	}
	return false
}

func cmpOp(t string) string {
	switch t {
	case "eq":
		return "=="
	case "ne":
		return "!="
	case "lt":
		return "<"
	case "gt":
		return ">"
	case "le":
		return "<="
	case "ge":
		return ">="
	}
	return t
}

// verdicts are the terminal verdict statements NFTRuleInfo.Verdict reports.
var verdicts = map[string]bool{"accept": true, "drop": true, "reject": true, "return": true}

// analyzeRule extracts the parts a diagnosis needs from nftables rule
// text. It understands kube-proxy's source spelling (what knftables dumps
// and kube-proxy logs) as well as nft's canonical listing, the iptables-nft
// forms that nft prints for translated rules (`meta random & 2147483647 <
// 107374182`, `xt match recent`, `XT target DNAT not found`) and rule text
// rendered from `nft -j` JSON. Text it does not understand is ignored; it
// never fails.
//
// XT lists the names of the xtables extensions (`recent`, `DNAT`, …) without
// their kind; iptables targets are upper case by convention, matches lower
// case.
func analyzeRule(text string) inspect.NFTRuleInfo {
	var info inspect.NFTRuleInfo
	new(ruleScratch).analyze(&info, text)
	return info
}

// ruleScratch is what one worker reuses from one rule's analysis to the
// next: the tokens, the lists being filled, and the blocks the finished
// lists and DNAT destinations are carved from, so that a rule costs a few
// allocations per thousand rules rather than a few per rule.
type ruleScratch struct {
	toks   []token
	bodies []bodyEntry // of the map bodies read ahead (appendTokenSpansFrom)
	spans  []bodySpan
	lists  [numLists][]string
	numgen []string  // NumgenTargets being filled
	strs   []string  // block of list elements; never appended past its cap
	text   textBlock // of DNAT destinations
	// wordsOnly: readBody reads every entry word by word (tests compare)
	wordsOnly bool
}

// numLists is how many lists of an NFTRuleInfo analyze fills through
// ruleScratch.lists (the fields listFields names, in that order).
const numLists = 8

// listFields are the lists of info that analyze fills through
// ruleScratch.lists. A new []string field of NFTRuleInfo goes here, or
// each rule costs an allocation for it (TestRuleListsInScratch).
// NumgenTargets has a scratch list of its own (ruleScratch.numgen).
func listFields(info *inspect.NFTRuleInfo) [numLists]*[]string {
	return [numLists]*[]string{&info.Jumps, &info.Gotos, &info.VMaps, &info.Maps, &info.Sets, &info.DNAT, &info.Saddr, &info.XT}
}

// analyze fills info from text; info keeps substrings of text and of the
// scratch's blocks only.
func (sc *ruleScratch) analyze(info *inspect.NFTRuleInfo, text string) {
	orig := *info
	if !sc.analyzeTokens(info, text, true) {
		// the analysis went where the map bodies read ahead do not serve:
		// again, on every token
		*info = orig
		sc.analyzeTokens(info, text, false)
	}
}

// analyzeTokens is analyze, with the map bodies read ahead when
// readAhead; it returns false, info half filled, when the analysis needs
// the tokens of such a body.
func (sc *ruleScratch) analyzeTokens(info *inspect.NFTRuleInfo, text string, readAhead bool) bool {
	sc.bodies, sc.spans = sc.bodies[:0], sc.spans[:0]
	if readAhead {
		sc.toks = appendTokenSpansFrom(sc.toks[:0], text, sc)
	} else {
		sc.toks = appendTokenSpans(sc.toks[:0], text)
	}
	fields := listFields(info)
	for k, f := range fields {
		*f = sc.lists[k][:0]
	}
	info.NumgenTargets = sc.numgen[:0]
	a := analyzer{text: text, toks: sc.toks, info: info, sc: sc}
	a.run()
	for k, f := range fields {
		if f == &info.DNAT && a.dnatInBlock {
			continue // already in the block, not the scratch list
		}
		l := *f
		sc.lists[k] = l[:0]
		if !a.needTokens {
			*f = sc.keep(l)
		}
	}
	targets := info.NumgenTargets
	sc.numgen = targets[:0]
	if a.needTokens {
		return false
	}
	// The targets of a numgen map are most often its DNAT destinations or
	// its gotos, in that order: then they share that list.
	switch {
	case a.dnatInBlock:
		info.NumgenTargets = info.DNAT
	case len(targets) == 0:
		info.NumgenTargets = nil
	case slices.Equal(targets, info.DNAT):
		info.NumgenTargets = info.DNAT
	case slices.Equal(targets, info.Gotos):
		info.NumgenTargets = info.Gotos
	case slices.Equal(targets, info.Jumps):
		info.NumgenTargets = info.Jumps
	default:
		info.NumgenTargets = sc.keep(targets)
	}
	return true
}

// keep copies l into the block of list elements (nil when empty).
func (sc *ruleScratch) keep(l []string) []string { return keepStrings(&sc.strs, l) }

// keepStrings copies l into *block, a block of strings that is never
// appended to past its capacity (a full one is replaced by a new one,
// twice as big up to 1024 strings), and returns the copy (nil when l is
// empty).
func keepStrings(block *[]string, l []string) []string {
	if len(l) == 0 {
		return nil
	}
	b := *block
	if cap(b)-len(b) < len(l) {
		b = make([]string, 0, max(min(2*cap(b), 1024), 16, len(l)))
	}
	n := len(b)
	b = append(b, l...)
	*block = b
	return b[n:len(b):len(b)]
}

// reserveStrings returns the next n strings of *block (a new block when
// they do not fit, as in keepStrings), for the caller to fill.
func reserveStrings(block *[]string, n int) []string {
	b := *block
	if cap(b)-len(b) < n {
		b = make([]string, 0, max(min(2*cap(b), 1024), 16, n))
	}
	m := len(b)
	b = b[:m+n]
	*block = b
	return b[m : m+n : m+n]
}

// hostPort returns "host:port" ("[host]:port" when host holds a colon),
// carved from the scratch's text block.
func (sc *ruleScratch) hostPort(host, port string) string {
	tb := &sc.text
	tb.room(hostPortLen(host, port))
	from := len(tb.b)
	tb.b = appendHostPort(tb.b, host, port)
	return tb.since(from)
}

// hostPortLen is the length of hostPort(host, port).
func hostPortLen(host, port string) int {
	host = trimBrackets(host)
	if strings.IndexByte(host, ':') >= 0 {
		return len(host) + len(port) + 3
	}
	return len(host) + len(port) + 1
}

func trimBrackets(host string) string {
	return strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
}

type analyzer struct {
	text string
	toks []token // of text
	info *inspect.NFTRuleInfo
	sc   *ruleScratch
	// numgen is N of a `numgen … mod N` whose map/vmap has not been read yet.
	numgenPending bool
	inDNAT        bool
	dnatFamily    string
	// dnatInBlock: DNAT and NumgenTargets are one list, written into the
	// scratch's block by dnatBody.
	dnatInBlock bool
	// needTokens: the analysis must run again on every token, having
	// looked into a map body read ahead (a placeholder token) or found
	// more DNAT destinations or numgen targets after dnatBody.
	needTokens bool
}

func (a *analyzer) tok(i int) string {
	if i >= 0 && i < len(a.toks) {
		return a.str(a.toks[i])
	}
	return ""
}

// str is the text of t ("" for a placeholder, noting that one was
// reached).
func (a *analyzer) str(t token) string {
	if t.from < 0 {
		a.needTokens = true
		return ""
	}
	return a.text[t.from:t.to]
}

// joinTokens returns the tokens of text joined by single spaces.
func joinTokens(text string, toks []token) string {
	var b strings.Builder
	for i, t := range toks {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(text[t.from:t.to])
	}
	return b.String()
}

func (a *analyzer) addSet(name string) {
	for _, s := range a.info.Sets {
		if s == name {
			return
		}
	}
	a.info.Sets = append(a.info.Sets, name)
}

func (a *analyzer) run() {
	info := a.info
	depth := 0
	for i := 0; i < len(a.toks); i++ {
		t := a.tok(i)
		if a.needTokens {
			return
		}
		switch t {
		case "{":
			depth++
			continue
		case "}":
			if depth > 0 {
				depth--
			}
			continue
		}
		if len(t) > 0 && t[0] == '"' {
			continue
		}
		switch {
		case t == "jump" || t == "goto":
			if depth == 0 && i+1 < len(a.toks) {
				name := unquote(a.tok(i + 1))
				if t == "jump" {
					info.Jumps = append(info.Jumps, name)
				} else {
					info.Gotos = append(info.Gotos, name)
				}
				i++
			}
		case t == "vmap" || t == "map":
			i = a.mapLookup(i)
		case t == "numgen":
			i = a.numgen(i)
		case t == "dnat":
			if depth == 0 {
				i = a.dnat(i)
			}
		case t == "masquerade":
			if depth == 0 {
				info.Masquerade = true
				for j := i + 1; j < len(a.toks) && j <= i+4; j++ {
					if strings.Contains(a.tok(j), "fully-random") {
						info.FullyRandom = true
					}
				}
			}
		case (t == "ip" || t == "ip6") && a.tok(i+1) == "saddr" && depth == 0 && len(a.info.Saddr) == 0:
			i = a.saddr(i + 2)
		case t == "mark":
			i = a.mark(i)
		case t == "random":
			i = a.random(i)
		case t == "xt" || t == "XT":
			kind := a.tok(i + 1)
			if (kind == "match" || kind == "target") && i+2 < len(a.toks) {
				info.XT = append(info.XT, unquote(a.tok(i+2)))
				i += 2
				if a.tok(i+1) == "not" && a.tok(i+2) == "found" {
					i += 2
				}
			}
		case verdicts[t]:
			if depth == 0 && a.tok(i-1) != "policy" {
				info.Verdict = t
			}
		case t[0] == '@':
			a.addSet(strings.TrimSuffix(t[1:], ","))
		}
	}
}

// mapLookup handles `… vmap @name`, `… map @name`, and inline
// `vmap { k : verdict, … }` / `map { k : v, … }` at toks[i].
func (a *analyzer) mapLookup(i int) int {
	info := a.info
	isV := a.tok(i) == "vmap"
	numgenKey := a.numgenPending
	a.numgenPending = false
	if p := i + 1; p < len(a.toks) && a.toks[p].from < 0 {
		// a body read ahead
		sp := a.sc.spans[a.toks[p].to]
		body := a.sc.bodies[sp.first:sp.end]
		if !isV && a.inDNAT && numgenKey && a.dnatBody(body) {
			return p
		}
		for k := range body {
			e := &body[k]
			a.mapEntry(isV, numgenKey, e.key, e.vals[:min(e.nv, 3)], int(e.nv))
		}
		return p
	}
	next := a.tok(i + 1)
	if strings.HasPrefix(next, "@") {
		name := next[1:]
		if isV {
			info.VMaps = append(info.VMaps, name)
		} else {
			info.Maps = append(info.Maps, name)
		}
		return i + 1
	}
	if next != "{" {
		return i
	}
	return a.inlineEntries(i+1, func(e mapEntry) {
		key := token{-1, -1}
		if e.k1-e.k0 == 1 {
			key = a.toks[e.k0]
		}
		a.mapEntry(isV, numgenKey, key, a.toks[e.v0:min(e.v1, e.v0+3)], min(e.v1-e.v0, 4))
	})
}

// mapEntry reads one `key : value` entry of an inline map: key its token
// when it is one (from < 0 otherwise), val the value's first tokens, nv
// their count (4 for four or more).
func (a *analyzer) mapEntry(isV, numgenKey bool, key token, val []token, nv int) {
	if nv <= 0 {
		return
	}
	info := a.info
	idx := -1
	if numgenKey && key.from >= 0 {
		if v, ok := parseNFTUint(a.str(key)); ok && v < 1<<31 {
			idx = int(v)
		}
	}
	if isV {
		verb := a.str(val[0])
		if (verb == "goto" || verb == "jump") && nv > 1 {
			target := unquote(a.str(val[1]))
			if verb == "goto" {
				info.Gotos = append(info.Gotos, target)
			} else {
				info.Jumps = append(info.Jumps, target)
			}
			if idx >= 0 {
				a.numgenTarget(idx, target)
			}
		}
		return
	}
	if a.inDNAT {
		dst := a.dnatTarget(val, nv, a.dnatFamily)
		if dst == "" {
			return
		}
		a.addDNAT(dst)
		if idx >= 0 {
			a.numgenTarget(idx, dst)
		}
	}
}

// addDNAT appends a DNAT destination.
func (a *analyzer) addDNAT(dst string) {
	if a.dnatInBlock {
		a.needTokens = true // a second DNAT list: the token path handles it
		return
	}
	a.info.DNAT = append(a.info.DNAT, dst)
}

// dnatBody reads a numgen DNAT map body of kube-proxy's shape (keys 0, 1,
// 2, … in order, values `addr . port`), the rule's first DNAT and numgen
// targets, straight into the scratch's block: DNAT and NumgenTargets are
// then one list. It returns false, having done nothing, on any other
// body.
func (a *analyzer) dnatBody(body []bodyEntry) bool {
	if len(body) == 0 || len(body) > maxNumgenIndex || len(a.info.DNAT) > 0 || len(a.info.NumgenTargets) > 0 {
		return false
	}
	// The tokens of a body are words, never placeholders: they are read
	// from the text straight.
	text := a.text
	word := func(t token) string { return text[t.from:t.to] }
	size := 0
	for k := range body {
		e := &body[k]
		if e.nv != 3 || e.key.from < 0 || word(e.vals[1]) != "." {
			return false
		}
		if v, ok := parseNFTUint(word(e.key)); !ok || v != uint64(k) {
			return false
		}
		size += int(e.vals[0].to-e.vals[0].from) + int(e.vals[2].to-e.vals[2].from) + 3 // ≥ hostPortLen
	}
	// The destinations, one after the other in the block: with room for
	// all, no append below moves it.
	tb := &a.sc.text
	tb.room(size)
	out := reserveStrings(&a.sc.strs, len(body))
	b := tb.b
	for k := range body {
		e := &body[k]
		from := len(b)
		if e.plainAddr {
			b = append(append(append(b, word(e.vals[0])...), ':'), word(e.vals[2])...)
		} else {
			b = appendHostPort(b, word(e.vals[0]), word(e.vals[2]))
		}
		out[k] = unsafe.String(&b[from], len(b)-from) // never empty: it holds a ':'
	}
	tb.b = b
	a.info.DNAT = out
	a.dnatInBlock = true
	return true
}

// appendHostPort appends hostPort(host, port) to b.
func appendHostPort(b []byte, host, port string) []byte {
	host = trimBrackets(host)
	if strings.IndexByte(host, ':') >= 0 {
		b = append(b, '[')
		b = append(b, host...)
		b = append(b, ']', ':')
	} else {
		b = append(b, host...)
		b = append(b, ':')
	}
	return append(b, port...)
}

// maxNumgenIndex bounds the numgen indices NumgenTargets holds (kube-proxy
// writes one per endpoint; a larger index is garbled input).
const maxNumgenIndex = 1 << 16

// numgenTarget records the target of numgen index idx in NumgenTargets
// (the scratch list while the rule is analysed), "" at the indices
// skipped.
func (a *analyzer) numgenTarget(idx int, target string) {
	if idx >= maxNumgenIndex {
		return
	}
	if a.dnatInBlock {
		a.needTokens = true // NumgenTargets is DNAT: the token path handles it
		return
	}
	t := a.info.NumgenTargets
	if idx == len(t) { // the usual order: 0, 1, 2, …
		a.info.NumgenTargets = append(t, target)
		return
	}
	for len(t) <= idx {
		t = append(t, "")
	}
	t[idx] = target
	a.info.NumgenTargets = t
}

// mapEntry is one `key : value` entry of an inline map: token index ranges
// [k0,k1) and [v0,v1) (v0 == v1 when there is no value).
type mapEntry struct{ k0, k1, v0, v1 int }

// inlineEntries reads `{ k : v , k : v }` starting at the '{' at toks[i],
// calling fn for each entry. It returns the index of the closing '}' (or
// the last token).
// saddr reads `[!=] ADDR` or `[!=] { ADDR, … }` after "ip saddr" (a named
// set, @name, is a set reference instead).
func (a *analyzer) saddr(i int) int {
	not := false
	switch a.tok(i) {
	case "!=":
		not = true
		i++
	case "==":
		i++
	}
	t := a.tok(i)
	switch {
	case t == "" || t[0] == '@' || t == "." || a.tok(i+1) == ".":
		return i - 1 // a set reference, or a concatenation
	case t == "{":
		vals := a.info.Saddr[:0] // the scratch list
		j := i + 1
		for ; j < len(a.toks) && a.tok(j) != "}"; j++ {
			if v := strings.TrimSuffix(a.tok(j), ","); v != "" && v != "," {
				vals = append(vals, v)
			}
		}
		a.info.Saddr, a.info.SaddrNot = vals, not
		return j
	}
	a.info.Saddr, a.info.SaddrNot = append(a.info.Saddr[:0], t), not
	return i
}

func (a *analyzer) inlineEntries(i int, fn func(e mapEntry)) int {
	depth := 0
	j := i + 1
	cur := mapEntry{k0: j, k1: -1}
	flush := func(end int) {
		if cur.k1 < 0 {
			cur.k1, cur.v0 = end, end
		}
		cur.v1 = end
		if cur.k1 > cur.k0 || cur.v1 > cur.v0 {
			fn(cur)
		}
		cur = mapEntry{k0: end + 1, k1: -1}
	}
	for ; j < len(a.toks); j++ {
		switch t := a.tok(j); {
		case t == "{":
			depth++
		case t == "}":
			if depth == 0 {
				flush(j)
				return j
			}
			depth--
		case t == "," && depth == 0:
			flush(j)
		case t == ":" && depth == 0 && cur.k1 < 0:
			cur.k1, cur.v0 = j, j+1
		}
	}
	flush(j)
	return j - 1
}

// numgen handles `numgen random|inc mod N [offset K]` at toks[i].
func (a *analyzer) numgen(i int) int {
	j := i + 1
	if m := a.tok(j); m == "random" || m == "inc" {
		j++
	}
	if a.tok(j) != "mod" {
		return i
	}
	n, ok := parseNFTUint(a.tok(j + 1))
	if !ok || n > math.MaxInt32 {
		return i
	}
	a.info.Numgen = int(n)
	j += 2
	if a.tok(j) == "offset" {
		j += 2
	}
	if t := a.tok(j); t == "map" || t == "vmap" {
		a.numgenPending = true
	}
	return j - 1
}

// dnat handles `dnat [ip|ip6|inet] [addr . port] to TARGET` at toks[i].
func (a *analyzer) dnat(i int) int {
	j := i + 1
	family := ""
	if f := a.tok(j); f == "ip" || f == "ip6" || f == "inet" {
		family = f
		j++
	}
	// kube-proxy's source form: `dnat ip addr . port to …`
	if a.tok(j) == "addr" {
		j++
		if a.tok(j) == "." && a.tok(j+1) == "port" {
			j += 2
		}
	}
	if a.tok(j) != "to" {
		return i
	}
	j++
	start := j
	if a.tok(j) == "numgen" {
		a.inDNAT = true
		a.dnatFamily = family
		end := a.numgen(j)
		if end == j {
			a.inDNAT = false
			return j
		}
		j = end + 1
		if a.tok(j) == "map" {
			end = a.mapLookup(j)
			a.inDNAT = false
			return end
		}
		a.inDNAT = false
		return j - 1
	}
	// plain `to addr[:port]`, `to [addr]:port` or `to addr . port`
	parts := min(len(a.toks), start+3) - j // tokens [j, j+parts)
	if parts <= 0 {
		return j - 1
	}
	if parts == 3 && a.tok(j+1) == "." {
		if dst := a.dnatTarget(a.toks[j:j+3], 3, family); dst != "" {
			a.addDNAT(dst)
			return start + 2
		}
	}
	if dst := normalizeDNAT(a.tok(j), family); dst != "" {
		a.addDNAT(dst)
	}
	return start
}

// dnatTarget converts a map value `addr . port` or `addr[:port]`, its
// first tokens val and their count nv, into "addr:port" ("[addr]:port"
// for IPv6).
func (a *analyzer) dnatTarget(val []token, nv int, family string) string {
	if nv == 3 && a.str(val[1]) == "." {
		return a.sc.hostPort(a.str(val[0]), a.str(val[2]))
	}
	if nv == 1 {
		return normalizeDNAT(a.str(val[0]), family)
	}
	return ""
}

// normalizeDNAT normalises `a:p`, `[a]:p`, `a` and (IPv6) `a` to the
// "ip:port" / "[ip]:port" form; it returns "" when s does not look like an
// address.
func normalizeDNAT(s, family string) string {
	if s == "" || s[0] == '@' || s == "{" || s == "}" || s[0] == '"' {
		return ""
	}
	if s[0] == '[' {
		if k := strings.Index(s, "]"); k > 0 {
			return s
		}
		return ""
	}
	c := strings.Count(s, ":")
	switch {
	case c == 0:
		if !looksLikeAddr(s) {
			return ""
		}
		return s
	case c == 1:
		// IPv4 with port
		return s
	default:
		// bare IPv6 address
		return s
	}
}

func looksLikeAddr(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c == '.' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' || c == ':' || c == '/' || c == '-') {
			return false
		}
	}
	return strings.ContainsAny(s, ".:")
}

// mark handles the packet-mark spellings at toks[i] == "mark":
//
//	mark set mark or 0x4000           meta mark set meta mark | 0x00004000
//	mark set mark xor 0x4000          meta mark set meta mark ^ 0x00004000
//	mark set 0x4000                   meta mark set 0x00004000
//	mark and 0x4000 != 0              meta mark & 0x00004000 != 0x00000000
//	mark and 0x4000 == 0              meta mark 0x00004000
//
// `ct mark …` is the connection mark and is ignored.
func (a *analyzer) mark(i int) int {
	prev := a.tok(i - 1)
	if prev == "ct" || prev == "set" || (prev == "meta" && a.tok(i-2) == "set") {
		return i
	}
	info := a.info
	if a.tok(i+1) == "set" {
		j := i + 2
		if a.tok(j) == "meta" {
			j++
		}
		if a.tok(j) == "ct" && a.tok(j+1) == "mark" {
			// mark set ct mark [and MASK]: the packet mark restored from
			// the connection mark.
			info.MarkFromCT, info.MarkFromCTMask = true, math.MaxUint32
			if t := a.tok(j + 2); t == "and" || t == "&" {
				if m, ok := parseNFTUint32(a.tok(j + 3)); ok {
					info.MarkFromCTMask = m
					return j + 3
				}
			}
			return j + 1
		}
		if a.tok(j) == "mark" {
			op := a.tok(j + 1)
			v, ok := parseNFTUint32(a.tok(j + 2))
			if !ok {
				return i + 1
			}
			switch op {
			case "or", "|":
				info.MarkSetOp = "or"
			case "xor", "^":
				info.MarkSetOp = "xor"
			case "and", "&":
				info.MarkSetOp = "and"
			default:
				return i + 1
			}
			info.MarkSetValue = v
			info.HasMarkSet = true
			return j + 2
		}
		v, ok := parseNFTUint32(a.tok(j))
		if !ok {
			return i + 1
		}
		info.MarkSetOp = "set"
		info.MarkSetValue = v
		info.HasMarkSet = true
		return j
	}
	j := i + 1
	mask := uint32(math.MaxUint32)
	if t := a.tok(j); t == "and" || t == "&" {
		m, ok := parseNFTUint32(a.tok(j + 1))
		if !ok {
			return i
		}
		mask = m
		j += 2
	}
	op := "=="
	if isCmpOp(a.tok(j)) {
		op = cmpOp(a.tok(j))
		j++
	}
	v, ok := parseNFTUint32(a.tok(j))
	if !ok {
		return i
	}
	info.HasMarkTest = true
	info.MarkTestMask = mask
	info.MarkTestValue = v
	info.MarkTestOp = op
	return j
}

// random handles iptables-nft's `meta random & 2147483647 < N`
// (`-m statistic --mode random --probability N/2^31`).
func (a *analyzer) random(i int) int {
	if a.tok(i-1) != "meta" {
		return i
	}
	j := i + 1
	mask := uint64(math.MaxUint32)
	if t := a.tok(j); t == "&" || t == "and" {
		m, ok := parseNFTUint(a.tok(j + 1))
		if !ok {
			return i
		}
		mask = m
		j += 2
	}
	if t := a.tok(j); t != "<" && t != "lt" {
		return i
	}
	n, ok := parseNFTUint(a.tok(j + 1))
	if !ok {
		return i
	}
	a.info.Probability = float64(n) / (float64(mask) + 1)
	return j + 1
}

// blockOf hands out zero values of T from blocks allocated ahead, each
// twice as big as the last up to 256 values: many small objects for one
// allocation.
type blockOf[T any] struct {
	free []T
	size int
}

func (b *blockOf[T]) next() *T {
	if len(b.free) == 0 {
		b.size = min(max(2*b.size, 4), 256)
		b.free = make([]T, b.size)
	}
	v := &b.free[0]
	b.free = b.free[1:]
	return v
}

// textBlock hands out strings carved from large byte blocks: one
// allocation for many rules' text instead of one per rule. A block is never
// written where a string was handed out (an append past its capacity moves
// it to a new array, and the strings handed out keep the old one).
type textBlock struct{ b []byte }

// room makes sure n more bytes fit in the current block (a new block is
// twice as big as the last, up to 64 KiB).
func (tb *textBlock) room(n int) {
	if cap(tb.b)-len(tb.b) < n {
		tb.b = make([]byte, 0, max(min(2*cap(tb.b), 64<<10), 256, n))
	}
}

// join returns toks joined by single spaces: the token itself when there
// is one, else carved from the block.
func (tb *textBlock) join(toks []string) string {
	switch len(toks) {
	case 0:
		return ""
	case 1:
		return toks[0]
	}
	n := len(toks) - 1
	for _, t := range toks {
		n += len(t)
	}
	tb.room(n)
	from := len(tb.b)
	b := tb.b // a local, as in concat
	for i, t := range toks {
		if i > 0 {
			b = append(b, ' ')
		}
		b = append(b, t...)
	}
	tb.b = b
	return tb.since(from)
}

// since returns what was appended to the block from offset from on.
func (tb *textBlock) since(from int) string {
	if len(tb.b) == from {
		return ""
	}
	b := tb.b[from:]
	return unsafe.String(&b[0], len(b))
}

// concat returns the parts concatenated, carved from the block.
func (tb *textBlock) concat(parts ...string) string {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	tb.room(n)
	from := len(tb.b)
	b := tb.b // appended to in a local: each store of tb.b is a write barrier
	for _, p := range parts {
		b = append(b, p...)
	}
	tb.b = b
	return tb.since(from)
}

// normalized returns s with runs of white space outside double quotes
// collapsed into one space and its ends trimmed (iptables-nft rules list
// with double spaces where an untranslatable match was): s itself when it
// is so already, else a copy carved from the block.
func (tb *textBlock) normalized(s string) string {
	if !needsNormalize(s) {
		return s
	}
	return tb.collapse(s)
}

// collapse returns s normalised, carved from the block.
func (tb *textBlock) collapse(s string) string {
	tb.room(len(s))
	from := len(tb.b)
	b := tb.b // a local, as in concat
	inQ := false
	pendingSpace := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !inQ && (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
			pendingSpace = len(b) > from
			continue
		}
		if pendingSpace {
			b = append(b, ' ')
			pendingSpace = false
		}
		if c == '"' {
			inQ = !inQ
		}
		b = append(b, c)
	}
	tb.b = b
	return tb.since(from)
}

// needsNormalize reports whether normalized would change s.
func needsNormalize(s string) bool {
	if s == "" {
		return false
	}
	if c := s[0]; c == ' ' || c == '\t' {
		return true
	}
	if c := s[len(s)-1]; c == ' ' || c == '\t' || c == '\r' || c == '\n' {
		return true
	}
	// Up to the first quote no state is needed: the stdlib's vectorised
	// searches look for what would change (a byte-wise loop was 6% of a
	// text parse). From the quote on, the scan keeps state; the quote
	// resets it, so it starts afresh there.
	plain, quoted := s, ""
	if q := strings.IndexByte(s, '"'); q >= 0 {
		plain, quoted = s[:q], s[q:]
	}
	if strings.Contains(plain, "  ") || strings.IndexByte(plain, '\t') >= 0 ||
		strings.IndexByte(plain, '\n') >= 0 || strings.IndexByte(plain, '\r') >= 0 {
		return true
	}
	return quoted != "" && needsNormalizeQuoted(quoted)
}

// needsNormalizeQuoted is needsNormalize for text with quoted strings.
func needsNormalizeQuoted(s string) bool {
	inQ := false
	prevSpace := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '"' {
			inQ = !inQ
		}
		if inQ {
			prevSpace = false
			continue
		}
		switch c {
		case '\t', '\r', '\n':
			return true
		case ' ':
			if prevSpace {
				return true
			}
			prevSpace = true
		default:
			prevSpace = false
		}
	}
	return false
}

// splitComment splits a rule's trailing `comment "…"` off its text.
func splitComment(s string) (rule string, comment *string) {
	s = strings.TrimRight(s, " \t")
	if len(s) < 2 || s[len(s)-1] != '"' {
		return s, nil
	}
	// find the opening quote of the last quoted string
	j := len(s) - 2
	for j >= 0 {
		if s[j] == '"' && (j == 0 || s[j-1] != '\\') {
			break
		}
		j--
	}
	if j < 0 {
		return s, nil
	}
	head := strings.TrimRight(s[:j], " \t")
	if head != "comment" && !strings.HasSuffix(head, " comment") {
		return s, nil
	}
	c := unquote(s[j:])
	rule = strings.TrimRight(strings.TrimSuffix(head, "comment"), " \t")
	return rule, &c
}
