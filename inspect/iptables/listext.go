package iptables

import (
	"fmt"
	"strings"
)

// The extension text of an `iptables -L` row (what it prints after the
// addresses: the matches, then the target's options) translated into the
// arguments iptables -S prints, one translator per extension.

// portNames are the /etc/services names -L prints for ports without -n
// that kube-proxy rules commonly match.
var portNames = map[string]string{"http": "80", "https": "443", "domain": "53", "ssh": "22", "http-alt": "8080", "webcache": "8080"}

// translateExtension converts what -L prints after the addresses (the
// matches, then the target's options) into iptables -S arguments. Words it
// does not know are returned in unknown, unchanged.
func translateExtension(ws []listWord, target string) (match, targetArgs, unknown []string) {
	x := &extReader{ws: ws, target: target}
	neg := false // the previous word was a lone "!"
words:
	for ; x.i < len(ws); x.i++ {
		w := ws[x.i]
		if w.comment {
			x.match = append(x.match, "-m", "comment", "--comment", w.text)
			neg = false
			continue
		}
		n := neg
		neg = false
		if w.text == "!" {
			neg = true
			continue
		}
		for _, tr := range extTranslators {
			if tr.applies(x, w.text) {
				tr.translate(x, w.text, n)
				continue words
			}
		}
		if n {
			x.unknown = append(x.unknown, "!")
		}
		x.unknown = append(x.unknown, w.text)
	}
	return x.match, x.targetArgs, x.unknown
}

// extReader walks the words of one row's extension text; the translators
// read their values through it and append what they make to it.
type extReader struct {
	ws     []listWord
	i      int // the word being translated
	target string

	match, targetArgs, unknown []string
}

// peek is the next word, "" at the end or before a comment.
func (x *extReader) peek() string {
	if x.i+1 < len(x.ws) && !x.ws[x.i+1].comment {
		return x.ws[x.i+1].text
	}
	return ""
}

// next consumes and returns the next word ("" as peek).
func (x *extReader) next() string {
	v := x.peek()
	if v != "" {
		x.i++
	}
	return v
}

// negated strips a leading "!" (or a "!" word) from a value.
func (x *extReader) negated(v string) (string, bool) {
	if v == "!" {
		return x.next(), true
	}
	if strings.HasPrefix(v, "!") {
		return v[1:], true
	}
	return v, false
}

// addMatch appends "-m module [!] name values...".
func (x *extReader) addMatch(module string, neg bool, name string, values ...string) {
	x.match = append(x.match, "-m", module)
	x.match = append(x.match, optArgs(neg, name, values...)...)
}

// optArgs is "[!] name values...", an option as iptables -S prints it.
func optArgs(neg bool, name string, values ...string) []string {
	out := []string{}
	if neg {
		out = append(out, "!")
	}
	return append(append(out, name), values...)
}

// extTranslator translates one extension whose print starts at word t;
// neg says a "!" word came before it.
type extTranslator struct {
	applies   func(x *extReader, t string) bool
	translate func(x *extReader, t string, neg bool)
}

// extTranslators are tried in order; the first that applies wins, and a
// word none applies to is unknown.
var extTranslators = []extTranslator{
	{func(x *extReader, t string) bool { return t == "statistic" && x.peek() == "mode" }, (*extReader).statistic},
	{func(x *extReader, t string) bool { return t == "recent:" }, (*extReader).recent},
	{func(x *extReader, t string) bool { return (t == "mark" || t == "connmark") && x.peek() == "match" }, (*extReader).markMatch},
	{func(x *extReader, t string) bool { return t == "ctstate" || t == "state" }, (*extReader).state},
	{func(x *extReader, t string) bool { return t == "ADDRTYPE" && x.peek() == "match" }, (*extReader).addrtype},
	{func(x *extReader, t string) bool {
		return t == "tcp" || t == "udp" || t == "sctp" || t == "udplite" || t == "dccp"
	}, (*extReader).ports},
	{func(x *extReader, t string) bool {
		return t == "multiport" && (x.peek() == "dports" || x.peek() == "sports" || x.peek() == "ports")
	}, (*extReader).multiport},
	{func(x *extReader, t string) bool { return t == "icmptype" || t == "ipv6-icmptype" }, (*extReader).icmp},
	{func(x *extReader, t string) bool { return t == "match-set" }, (*extReader).set},
	{func(x *extReader, t string) bool {
		return strings.HasPrefix(t, "to:") && (x.target == "DNAT" || x.target == "SNAT")
	}, (*extReader).natTo},
	{func(x *extReader, t string) bool { return t == "random-fully" || t == "random" || t == "persistent" }, (*extReader).natFlag},
	{func(x *extReader, t string) bool {
		return t == "masq" && x.peek() == "ports:" || t == "redir" && x.peek() == "ports"
	}, (*extReader).toPorts},
	{func(x *extReader, t string) bool { return t == "reject-with" }, (*extReader).rejectWith},
	{func(x *extReader, t string) bool { return t == "MARK" && x.target == "MARK" }, (*extReader).markTarget},
	{func(x *extReader, t string) bool { return t == "CONNMARK" && x.target == "CONNMARK" }, (*extReader).connmarkTarget},
}

// statistic reads "statistic mode random [!] probability 0.5" (and every,
// packet).
func (x *extReader) statistic(_ string, _ bool) {
	x.i++ // "mode"
	args := []string{"-m", "statistic", "--mode", x.next()}
	for {
		m := false
		if x.peek() == "!" {
			x.i++
			m = true
		}
		switch x.peek() {
		case "probability", "every", "packet":
			name := x.next()
			args = append(args, optArgs(m, "--"+name, x.next())...)
		default:
			x.match = append(x.match, args...)
			return
		}
	}
}

func (x *extReader) recent(_ string, neg bool) {
	x.match = append(x.match, recentArgs(neg, &x.i, x.ws)...)
}

// markMatch reads "mark match [!]0x4000/0x4000" (and connmark).
func (x *extReader) markMatch(t string, neg bool) {
	x.i++ // "match"
	v, m := x.negated(x.next())
	x.addMatch(t, neg || m, "--mark", v)
}

// state reads "ctstate NEW" (-m conntrack) and "state NEW" (-m state).
func (x *extReader) state(t string, neg bool) {
	v := x.next()
	if t == "ctstate" {
		x.addMatch("conntrack", neg, "--ctstate", v)
	} else {
		x.addMatch("state", neg, "--state", v)
	}
}

// addrtype reads "ADDRTYPE match src-type LOCAL dst-type !LOCAL
// limit-in".
func (x *extReader) addrtype(_ string, _ bool) {
	x.i++ // "match"
	args := []string{"-m", "addrtype"}
	for {
		switch x.peek() {
		case "src-type", "dst-type":
			name := x.next()
			v, m := x.negated(x.next())
			args = append(args, optArgs(m, "--"+name, v)...)
		case "limit-in":
			x.i++
			args = append(args, "--limit-iface-in")
		case "limit-out":
			x.i++
			args = append(args, "--limit-iface-out")
		default:
			x.match = append(x.match, args...)
			return
		}
	}
}

// ports reads "tcp dpt:80 spts:1024:65535" (and udp, sctp, ...), port
// names turned into numbers.
func (x *extReader) ports(t string, _ bool) {
	args := []string{"-m", t}
	for {
		name, v, ok := strings.Cut(x.peek(), ":")
		flagName := map[string]string{"spt": "--sport", "spts": "--sport", "dpt": "--dport", "dpts": "--dport"}[name]
		if !ok || flagName == "" {
			break
		}
		x.i++
		v, m := x.negated(v)
		if num, ok := portNames[v]; ok {
			v = num
		}
		args = append(args, optArgs(m, flagName, v)...)
	}
	x.match = append(x.match, args...)
}

// multiport reads "multiport dports 80,443".
func (x *extReader) multiport(_ string, neg bool) {
	name := x.next()
	v, m := x.negated(x.next())
	x.addMatch("multiport", neg || m, "--"+name, v)
}

// icmp reads "icmptype 8" (-m icmp) and "ipv6-icmptype 128" (-m icmp6).
func (x *extReader) icmp(t string, neg bool) {
	v, m := x.negated(x.next())
	if t == "icmptype" {
		x.addMatch("icmp", neg || m, "--icmp-type", v)
	} else {
		x.addMatch("icmp6", neg || m, "--icmpv6-type", v)
	}
}

// set reads "match-set KUBE-... dst,dst".
func (x *extReader) set(_ string, neg bool) {
	name, flags := x.next(), x.next()
	x.addMatch("set", neg, "--match-set", name, flags)
}

// natTo reads DNAT's and SNAT's "to:10.0.0.1:80".
func (x *extReader) natTo(t string, _ bool) {
	if x.target == "DNAT" {
		x.targetArgs = append(x.targetArgs, "--to-destination", t[3:])
	} else {
		x.targetArgs = append(x.targetArgs, "--to-source", t[3:])
	}
}

// natFlag reads the NAT targets' "random-fully", "random", "persistent".
func (x *extReader) natFlag(t string, _ bool) {
	x.targetArgs = append(x.targetArgs, "--"+t)
}

// toPorts reads MASQUERADE's "masq ports: 1024-2048" and REDIRECT's
// "redir ports 8080".
func (x *extReader) toPorts(_ string, _ bool) {
	x.i++
	x.targetArgs = append(x.targetArgs, "--to-ports", x.next())
}

// rejectWith reads REJECT's "reject-with icmp-port-unreachable".
func (x *extReader) rejectWith(_ string, _ bool) {
	x.targetArgs = append(x.targetArgs, "--reject-with", x.next())
}

// markTarget reads the MARK target's "MARK or 0x4000"; an operation it
// does not know leaves "MARK" unknown.
func (x *extReader) markTarget(t string, _ bool) {
	if args := markArgs(x.next(), x.next()); args != nil {
		x.targetArgs = append(x.targetArgs, args...)
	} else {
		x.unknown = append(x.unknown, t)
	}
}

// connmarkTarget reads the CONNMARK target's "CONNMARK restore mask ...".
func (x *extReader) connmarkTarget(_ string, _ bool) {
	x.targetArgs = append(x.targetArgs, connmarkArgs(x.peek, x.next)...)
}

// recentArgs reads "recent: CHECK seconds: 10800 reap hit_count: 2
// TTL-Match name: KUBE-SEP-… side: source mask: 255.255.255.255" (i at
// "recent:") in the order iptables -S prints its options.
func recentArgs(neg bool, i *int, ws []listWord) []string {
	var mode, seconds, hitcount, name, mask, side string
	reap, rttl := false, false
	val := func() string {
		if *i+1 < len(ws) && !ws[*i+1].comment {
			*i++
			return ws[*i].text
		}
		return ""
	}
loop:
	for *i+1 < len(ws) && !ws[*i+1].comment {
		switch ws[*i+1].text {
		case "SET", "CHECK", "UPDATE", "REMOVE":
			mode = map[string]string{"SET": "--set", "CHECK": "--rcheck", "UPDATE": "--update", "REMOVE": "--remove"}[val()]
		case "!":
			*i++
			neg = true
		case "seconds:":
			*i++
			seconds = val()
		case "reap":
			*i++
			reap = true
		case "hit_count:":
			*i++
			hitcount = val()
		case "TTL-Match":
			*i++
			rttl = true
		case "name:":
			*i++
			name = val()
		case "side:":
			*i++
			side = map[string]string{"source": "--rsource", "dest": "--rdest"}[val()]
		case "mask:":
			*i++
			mask = val()
		default:
			break loop
		}
	}
	args := []string{"-m", "recent"}
	if mode != "" {
		if neg {
			args = append(args, "!")
		}
		args = append(args, mode)
	}
	if seconds != "" {
		args = append(args, "--seconds", seconds)
	}
	if reap {
		args = append(args, "--reap")
	}
	if hitcount != "" {
		args = append(args, "--hitcount", hitcount)
	}
	if rttl {
		args = append(args, "--rttl")
	}
	if name != "" {
		args = append(args, "--name", name)
	}
	if mask != "" {
		args = append(args, "--mask", mask)
	}
	if side != "" {
		args = append(args, side)
	}
	return args
}

// markArgs converts the MARK target's print ("MARK or 0x4000", "MARK xset
// 0x4000/0x4000", "MARK set 0x4000", "MARK and 0xffffbfff", "MARK xor
// 0x4000") to iptables -S's --set-xmark value/mask.
func markArgs(op, v string) []string {
	val, mask, err := parseMarkMask(v, 0xffffffff)
	if err != nil {
		return nil
	}
	switch op {
	case "set":
		mask = 0xffffffff
	case "xset":
	case "or":
		mask = val
	case "xor":
		mask = 0
	case "and":
		val, mask = 0, ^val
	default:
		return nil
	}
	return []string{"--set-xmark", fmt.Sprintf("%#x/%#x", val, mask)}
}

// connmarkArgs converts "CONNMARK restore [mask X]", "CONNMARK save [mask
// X]" and "CONNMARK or|xor|and|set|xset V" (peek and next read the
// words after "CONNMARK").
func connmarkArgs(peek, next func() string) []string {
	switch op := peek(); op {
	case "restore", "save":
		next()
		flag := "--restore-mark"
		if op == "save" {
			flag = "--save-mark"
		}
		nf, ct := "0xffffffff", "0xffffffff"
		for {
			switch peek() {
			case "mask":
				next()
				nf = next()
				ct = nf
				continue
			case "nfmask", "ctmask":
				which := next()
				v := strings.TrimPrefix(next(), "~")
				if which == "nfmask" {
					nf = v
				} else {
					ct = v
				}
				continue
			}
			break
		}
		return []string{flag, "--nfmask", nf, "--ctmask", ct}
	case "set", "xset", "or", "xor", "and":
		next()
		if args := markArgs(op, next()); args != nil {
			return args
		}
	}
	return nil
}
