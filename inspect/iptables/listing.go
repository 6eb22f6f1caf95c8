package iptables

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/proxyrules/kubectl-proxyrules/inspect"
)

// `iptables -L [-n] [-v] [-x] [--line-numbers] [CHAIN]` listings. Each row
// is translated to the arguments iptables -S prints for the same rule, so
// that one code (fillRule) fills the model for every form and the rule's
// Text reads like the other forms'.

// listing is the state inside a listing.
type listing struct {
	chain    string // from the last "Chain" header; "" before one
	cols     listColumns
	haveCols bool
	nextNum  int
}

// listColumns are the optional columns the header line shows.
type listColumns struct {
	num, counters, ifaces bool
}

// listNotes collects what the listings of one input could not show, for
// the one warning that says so.
type listNotes struct {
	noIfaces   bool // no -v: -i/-o not shown
	rounded    bool // -v without -x: counters rounded
	names      bool // no -n: host and port names
	gaps       []string
	headerless int // rows before any Chain header
}

// chainHeader reads "Chain KUBE-SERVICES (2 references)", "Chain INPUT
// (policy ACCEPT)" and "Chain INPUT (policy DROP 12 packets, 720 bytes)".
func chainHeader(line string) (name, policy string, packets, bytes uint64, ok bool) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(line), "Chain ")
	if !ok {
		return "", "", 0, 0, false
	}
	name, paren, ok := strings.Cut(rest, " (")
	if !ok || name == "" || strings.ContainsAny(name, " \t") || !strings.HasSuffix(paren, ")") {
		return "", "", 0, 0, false
	}
	paren = strings.TrimSuffix(paren, ")")
	f := strings.Fields(paren)
	switch {
	case len(f) == 2 && (f[1] == "references" || f[1] == "reference"):
		if _, err := strconv.Atoi(f[0]); err != nil {
			return "", "", 0, 0, false
		}
		return name, "-", 0, 0, true
	case len(f) >= 2 && f[0] == "policy":
		if len(f) == 6 && f[3] == "packets," && f[5] == "bytes" {
			packets, _ = parseCount(f[2])
			bytes, _ = parseCount(f[4])
		}
		return name, f[1], packets, bytes, true
	}
	return "", "", 0, 0, false
}

// columnHeader reads the line under a chain header: "target prot opt source
// destination", with "num", "pkts bytes" and "in out" when asked for.
func columnHeader(line string) (listColumns, bool) {
	f := strings.Fields(line)
	var c listColumns
	seen := map[string]bool{}
	for _, w := range f {
		switch w {
		case "num":
			c.num = true
		case "pkts", "bytes":
			c.counters = true
		case "in", "out":
			c.ifaces = true
		case "target", "prot", "opt", "source", "destination":
		default:
			return c, false
		}
		seen[w] = true
	}
	return c, seen["target"] && seen["prot"] && seen["source"] && seen["destination"]
}

// parseCount reads a counter as -L prints it: exact with -x, else rounded
// to K, M, G, T (powers of 1000).
func parseCount(s string) (n uint64, rounded bool) {
	mult := uint64(1)
	switch {
	case s == "":
		return 0, false
	case strings.HasSuffix(s, "K"):
		mult = 1e3
	case strings.HasSuffix(s, "M"):
		mult = 1e6
	case strings.HasSuffix(s, "G"):
		mult = 1e9
	case strings.HasSuffix(s, "T"):
		mult = 1e12
	case strings.HasSuffix(s, "P"):
		mult = 1e15
	}
	if mult > 1 {
		s = s[:len(s)-1]
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, false
	}
	return v * mult, mult > 1
}

func isCount(s string) bool {
	if s == "" || s[0] < '0' || s[0] > '9' {
		return false
	}
	_, err := strconv.ParseUint(strings.TrimRight(s, "KMGTP"), 10, 64)
	return err == nil
}

func isOptColumn(s string) bool { return s == "--" || s == "-f" || s == "!f" }

var listProtocols = map[string]string{
	"0": "", "all": "", "6": "tcp", "17": "udp", "132": "sctp", "1": "icmp", "58": "ipv6-icmp",
	"136": "udplite", "33": "dccp", "4": "ipencap", "47": "gre", "50": "esp", "51": "ah",
	"icmpv6": "ipv6-icmp",
}

func isProtocol(s string) bool {
	s = strings.TrimPrefix(s, "!")
	if _, ok := listProtocols[s]; ok {
		return true
	}
	switch s {
	case "tcp", "udp", "sctp", "icmp", "ipv6-icmp", "udplite", "dccp", "gre", "esp", "ah", "ipencap":
		return true
	}
	_, err := strconv.Atoi(s)
	return err == nil
}

func isAddressColumn(s string) bool {
	s = strings.TrimPrefix(s, "!")
	return s == "anywhere" || s == "localhost" || strings.ContainsAny(s, ".:/")
}

type word struct {
	text string
	end  int
}

func splitWords(line string) []word {
	var out []word
	for i := 0; i < len(line); {
		for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
			i++
		}
		j := i
		for j < len(line) && line[j] != ' ' && line[j] != '\t' {
			j++
		}
		if j > i {
			out = append(out, word{line[i:j], j})
		}
		i = j
	}
	return out
}

// listRow is one row's columns.
type listRow struct {
	num                     int
	hasNum                  bool
	packets, bytes          string
	target, prot, in, out   string
	source, dest, extension string
}

// parseListRow splits a row into its columns. The opt column ("--") anchors
// it: the target (absent for a rule without one), the protocol and the
// leading numbers come before it, whatever the widths. Old ip6tables print
// no opt column; then the header's columns say where the target is.
func parseListRow(line string, cols listColumns, haveCols bool) (listRow, bool) {
	var row listRow
	ws := splitWords(line)
	if len(ws) < 4 || strings.HasPrefix(ws[0].text, "-") {
		return row, false
	}
	opt := -1
	for i, w := range ws {
		if isOptColumn(w.text) {
			opt = i
			break
		}
		if i > 4 {
			break
		}
	}
	lead := 0
	if haveCols {
		if cols.num {
			lead++
		}
		if cols.counters {
			lead += 2
		}
	} else {
		for lead < len(ws) && lead < 3 && isCount(ws[lead].text) && (opt < 0 || lead < opt-1) {
			lead++
		}
		cols.num = lead == 1 || lead == 3
		cols.counters = lead >= 2
	}
	for i := 0; i < lead; i++ {
		if !isCount(ws[i].text) {
			return row, false
		}
	}
	k := lead
	switch {
	case opt >= 0 && opt == lead+1:
		row.prot = ws[lead].text
		k = opt + 1
	case opt >= 0 && opt == lead+2:
		row.target, row.prot = ws[lead].text, ws[lead+1].text
		k = opt + 1
	case opt >= 0:
		return row, false
	case len(ws) > lead+1 && isProtocol(ws[lead].text) && isAddressColumn(ws[lead+1].text):
		row.prot = ws[lead].text
		k = lead + 1
	default:
		if len(ws) < lead+2 {
			return row, false
		}
		row.target, row.prot = ws[lead].text, ws[lead+1].text
		k = lead + 2
	}
	if !isProtocol(row.prot) {
		return row, false
	}
	ifaces := cols.ifaces
	if !haveCols {
		// -v without a header line: "*" or an interface before two addresses.
		ifaces = len(ws) > k+3 && !isAddressColumn(ws[k].text) && isAddressColumn(ws[k+2].text)
	}
	if ifaces {
		if len(ws) < k+2 {
			return row, false
		}
		row.in, row.out = ws[k].text, ws[k+1].text
		k += 2
	}
	if len(ws) < k+2 || !isAddressColumn(ws[k].text) || !isAddressColumn(ws[k+1].text) {
		return row, false
	}
	row.source, row.dest = ws[k].text, ws[k+1].text
	row.extension = strings.TrimSpace(line[ws[k+1].end:])
	if cols.num {
		row.num, _ = strconv.Atoi(ws[0].text)
		row.hasNum = true
	}
	if cols.counters {
		row.packets, row.bytes = ws[lead-2].text, ws[lead-1].text
	}
	return row, true
}

// listingLine handles a line inside a listing; false when the line is not
// part of it (the listing has ended).
func (p *parser) listingLine(line string) bool {
	l := p.list
	if name, policy, packets, bytes, ok := chainHeader(line); ok {
		p.listChain(name, policy, packets, bytes)
		return true
	}
	if cols, ok := columnHeader(line); ok {
		l.cols, l.haveCols = cols, true
		p.notes.noIfaces = p.notes.noIfaces || !cols.ifaces
		return true
	}
	row, ok := parseListRow(line, l.cols, l.haveCols)
	if !ok {
		return false
	}
	p.flushSkipped()
	if l.chain == "" && p.ctx.list && p.ctx.chain != "" {
		// `iptables -L CHAIN | grep …` dropped the Chain header.
		p.listChain(p.ctx.chain, "-", 0, 0)
	}
	if l.chain == "" {
		p.notes.headerless++
		return true
	}
	if row.hasNum {
		if row.num != l.nextNum && len(p.notes.gaps) < 3 {
			p.notes.gaps = append(p.notes.gaps, fmt.Sprintf("%s from rule %d", l.chain, l.nextNum))
		}
		l.nextNum = row.num + 1
	}
	p.addListRule(l.chain, row)
	return true
}

func (p *parser) listChain(name, policy string, packets, bytes uint64) {
	p.flushSkipped()
	if p.table != nil {
		p.warn("table %q has no COMMIT before an iptables -L listing", p.table.Name)
		p.commit()
	}
	if p.list == nil {
		p.list = &listing{}
	}
	p.list.chain, p.list.nextNum = name, 1
	it := item{kind: itemChain, chain: name}
	if policy != "-" {
		it = policyItem(name, policy, packets, bytes)
	}
	p.addItem(inspect.FormatIPTablesList, it)
}

// addListRule turns a row into a rule of chain.
func (p *parser) addListRule(chain string, row listRow) {
	args := make([]string, 0, 24)
	flag := func(value, opt string) {
		neg := strings.HasPrefix(value, "!")
		value = strings.TrimPrefix(value, "!")
		if neg {
			args = append(args, "!")
		}
		args = append(args, opt, value)
	}
	if a := p.listAddress(row.source); a != "" {
		flag(a, "-s")
	}
	if a := p.listAddress(row.dest); a != "" {
		flag(a, "-d")
	}
	for _, io := range []struct{ v, opt string }{{row.in, "-i"}, {row.out, "-o"}} {
		if io.v != "" && io.v != "*" && io.v != "any" {
			flag(io.v, io.opt)
		}
	}
	proto := strings.TrimPrefix(row.prot, "!")
	if name, ok := listProtocols[proto]; ok {
		proto = name
	}
	if proto != "" {
		if strings.HasPrefix(row.prot, "!") {
			proto = "!" + proto
		}
		flag(proto, "-p")
	}
	ext, isGoto := strings.CutPrefix(row.extension, "[goto]")
	match, targetArgs, unknown := translateExtension(listWords(ext), row.target)
	args = append(args, match...)
	known := len(args)
	args = append(args, unknown...)
	if row.target != "" {
		jump := "-j"
		if isGoto {
			jump = "-g"
		}
		args = append(args, jump, row.target)
	}
	args = append(args, targetArgs...)

	r := p.newRule()
	r.Line = int32(p.lr.Line())
	r.Text = formatArgs(args)
	fill := append(args[:known:known], args[known+len(unknown):]...)
	if err := fillRule(r, fill); err != nil {
		p.warn("%v", err)
	}
	if len(unknown) > 0 {
		r.Extra().Unparsed = append(r.Extra().Unparsed, unknown...)
	}
	if row.packets != "" {
		pk, rp := parseCount(row.packets)
		by, rb := parseCount(row.bytes)
		if pk != 0 || by != 0 {
			r.Extra().Packets, r.Extra().Bytes = pk, by
		}
		p.notes.rounded = p.notes.rounded || rp || rb
	}
	it := item{kind: itemRule, chain: chain, rule: r}
	// "anywhere" (no -n) shows neither.
	it.v6 = strings.Contains(row.source, ":") || strings.Contains(row.dest, ":")
	it.v4 = !it.v6 && (strings.Contains(row.source, ".") || strings.Contains(row.dest, "."))
	p.addItem(inspect.FormatIPTablesList, it)
}

// listAddress converts a source or destination column to -s/-d form:
// "" for any address, "/32" (or "/128") added to a host.
func (p *parser) listAddress(s string) string {
	neg := strings.HasPrefix(s, "!")
	s = strings.TrimPrefix(s, "!")
	switch s {
	case "0.0.0.0/0", "::/0":
		return ""
	case "anywhere":
		p.notes.names = true // listed without -n
		return ""
	}
	if a, err := netip.ParseAddr(s); err == nil {
		s += "/" + strconv.Itoa(a.BitLen())
	} else if _, err := netip.ParsePrefix(s); err != nil {
		p.notes.names = true // a host name: listed without -n
	}
	if neg {
		return "!" + s
	}
	return s
}

// listWord is a word of a row's extension text; a comment is one word.
type listWord struct {
	text    string
	comment bool
}

func listWords(s string) []listWord {
	var out []listWord
	for i := 0; i < len(s); {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
		if i >= len(s) {
			break
		}
		if strings.HasPrefix(s[i:], "/*") {
			end := strings.Index(s[i+2:], "*/")
			if end < 0 {
				out = append(out, listWord{strings.TrimSpace(s[i+2:]), true})
				break
			}
			out = append(out, listWord{strings.TrimSpace(s[i+2 : i+2+end]), true})
			i += 2 + end + 2
			continue
		}
		j := i
		for j < len(s) && s[j] != ' ' && s[j] != '\t' {
			j++
		}
		out = append(out, listWord{s[i:j], false})
		i = j
	}
	return out
}

// formatArgs joins arguments as iptables -S prints them: comments quoted.
func formatArgs(args []string) string {
	var b strings.Builder
	for i, a := range args {
		if i > 0 {
			b.WriteByte(' ')
		}
		if i > 0 && args[i-1] == "--comment" {
			b.WriteByte('"')
			b.WriteString(strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(a))
			b.WriteByte('"')
			continue
		}
		b.WriteString(a)
	}
	return b.String()
}

// cannotCarry is the one warning on what the headerless forms of an input
// could not show: they never name the iptables backend, and the table
// only when a pasted command line does.
func (p *parser) cannotCarry() []string {
	var out []string
	for _, f := range []inspect.Format{inspect.FormatIPTablesRules, inspect.FormatIPTablesExcerpt, inspect.FormatIPTablesList} {
		inferred, ok := p.formTables[f]
		if !ok {
			continue
		}
		name := map[inspect.Format]string{
			inspect.FormatIPTablesRules:   "iptables -S output",
			inspect.FormatIPTablesExcerpt: "rule lines without their *table line",
			inspect.FormatIPTablesList:    "iptables -L output",
		}[f]
		msg := name + " does not show the iptables backend"
		if inferred {
			msg += " nor the table (inferred from the chains)"
		}
		if p.familyDefaulted[f] {
			msg += "; no address shows whether it is IPv4 or IPv6: read as IPv4"
		}
		if f == inspect.FormatIPTablesList {
			n := p.notes
			if n.noIfaces {
				msg += "; without -v it omits interface matches (-i/-o)"
			}
			if n.rounded {
				msg += "; without -x its counters are rounded"
			}
			if n.names {
				msg += "; without -n it shows host and port names, not addresses and numbers"
			}
			if len(n.gaps) > 0 {
				msg += "; rules are missing (line numbers skip): " + strings.Join(n.gaps, ", ")
			}
			if n.headerless > 0 {
				msg += fmt.Sprintf("; %d rows without their Chain header (filtered with grep?) were skipped", n.headerless)
			}
		}
		out = append(out, msg)
	}
	return out
}

// IsListingLine reports whether a line starts or heads an `iptables -L`
// listing: "Chain NAME (…)" or its column header.
func IsListingLine(line string) bool {
	if _, _, _, _, ok := chainHeader(line); ok {
		return true
	}
	_, ok := columnHeader(line)
	return ok
}
