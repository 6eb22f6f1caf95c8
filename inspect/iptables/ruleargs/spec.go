// Package ruleargs reads the arguments of one iptables rule as
// iptables-save prints them: split into words (quoted strings whole), and
// whole, every match with its module and options (ParseSpec), for the
// packet evaluator. Package iptables reads whole dumps with it.
package ruleargs

import (
	"fmt"
	"strconv"
	"strings"
)

// This file reads one rule's arguments whole, for the packet evaluator
// (package evaluate): every match with its module and options, negations
// included, and the target with its options. The parser's IPRule keeps
// what attribution needs of every rule of a big table; a walk visits few
// rules and must know all of each, so that nothing it cannot evaluate is
// taken as matching.

// Option is one option of a match or target: `! --dport 80` is {Name
// "--dport", Not true, Args ["80"]}.
type Option struct {
	Name string
	Not  bool
	Args []string
}

// Arg is the option's first argument, "" when it has none.
func (o Option) Arg() string {
	if len(o.Args) == 0 {
		return ""
	}
	return o.Args[0]
}

// Match is one match: Module is "" for iptables' own options (-p, -s,
// -d, -i, -o, -f), else the -m module (tcp, udp, mark, conntrack, …).
type Match struct {
	Module  string
	Options []Option
}

// Spec is a rule's arguments, whole.
type Spec struct {
	Matches []Match
	// Target is the -j or -g target ("" for a rule without one); Goto is
	// set for -g.
	Target        string
	Goto          bool
	TargetOptions []Option
}

// Option returns the first option of the target named name.
func (s *Spec) TargetOption(name string) (Option, bool) {
	for _, o := range s.TargetOptions {
		if o.Name == name {
			return o, true
		}
	}
	return Option{}, false
}

// builtinOptions are iptables' own match options and their long names.
var builtinOptions = map[string]string{
	"-p": "-p", "--protocol": "-p",
	"-s": "-s", "--source": "-s", "--src": "-s",
	"-d": "-d", "--destination": "-d", "--dst": "-d",
	"-i": "-i", "--in-interface": "-i",
	"-o": "-o", "--out-interface": "-o",
	"-f": "-f", "--fragment": "-f",
}

// ParseSpec reads rule arguments as iptables-save prints them (the text
// after "-A CHAIN"; the plugin's readers write every iptables form so).
// Counters (`-c P B`, `[P:B]`) are skipped.
func ParseSpec(text string) (Spec, error) {
	toks, err := Split(text, nil)
	if err != nil {
		return Spec{}, err
	}
	if len(toks) > 0 && strings.HasPrefix(toks[0], "[") && strings.HasSuffix(toks[0], "]") {
		toks = toks[1:] // [packets:bytes]
	}
	var s Spec
	cur := &Match{} // iptables' own options, until the first -m
	s.Matches = append(s.Matches, Match{})
	inTarget := false
	not := false
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		switch {
		case t == "!":
			not = true
			continue
		case t == "-m" || t == "--match":
			if i+1 >= len(toks) {
				return s, fmt.Errorf("-m without a module")
			}
			i++
			s.Matches = append(s.Matches, Match{Module: toks[i]})
			cur = &s.Matches[len(s.Matches)-1]
			inTarget = false
			continue
		case t == "-j" || t == "--jump" || t == "-g" || t == "--goto":
			if i+1 >= len(toks) {
				return s, fmt.Errorf("%s without a target", t)
			}
			i++
			s.Target, s.Goto = toks[i], t == "-g" || t == "--goto"
			inTarget = true
			continue
		case t == "-c" || t == "--set-counters":
			if i+2 < len(toks) && isCount(toks[i+1]) && isCount(toks[i+2]) {
				i += 2
				continue
			}
		}
		if !strings.HasPrefix(t, "-") || t == "-" {
			return s, fmt.Errorf("unexpected argument %q", t)
		}
		opt := Option{Name: t, Not: not}
		not = false
		for i+1 < len(toks) && !isOptionWord(toks[i+1]) {
			i++
			opt.Args = append(opt.Args, toks[i])
		}
		switch {
		case inTarget:
			s.TargetOptions = append(s.TargetOptions, opt)
		case builtinOptions[t] != "":
			opt.Name = builtinOptions[t]
			s.Matches[0].Options = append(s.Matches[0].Options, opt)
		default:
			// Refresh: appending to s.Matches may have moved it.
			cur = &s.Matches[len(s.Matches)-1]
			if cur.Module == "" && len(s.Matches) == 1 {
				// An option of a module loaded implicitly (iptables -p
				// tcp --dport 80 loads tcp): its own match.
				s.Matches = append(s.Matches, Match{Module: implicitModule(s.Matches[0])})
				cur = &s.Matches[len(s.Matches)-1]
			}
			cur.Options = append(cur.Options, opt)
		}
	}
	if not {
		return s, fmt.Errorf("a trailing '!'")
	}
	return s, nil
}

func isCount(s string) bool {
	_, err := strconv.ParseUint(s, 10, 64)
	return err == nil
}

// implicitModule is the module iptables loads for -p PROTO's options.
func implicitModule(builtin Match) string {
	for _, o := range builtin.Options {
		if o.Name == "-p" {
			return o.Arg()
		}
	}
	return ""
}

// isOptionWord: t starts another option (or a negation), not an argument
// ("-1" and "-5.5" are arguments).
func isOptionWord(t string) bool {
	if t == "!" {
		return true
	}
	if len(t) < 2 || t[0] != '-' {
		return false
	}
	return !(t[1] >= '0' && t[1] <= '9')
}

// Split splits rule arguments on spaces, keeping "quoted strings" (with
// iptables-save's \" and \\ escapes) as one argument. Arguments are
// substrings of text unless they needed unescaping.
func Split(text string, out []string) ([]string, error) {
	i := 0
	for i < len(text) {
		for i < len(text) && (text[i] == ' ' || text[i] == '\t') {
			i++
		}
		if i >= len(text) {
			break
		}
		if text[i] != '"' {
			j := i
			for j < len(text) && text[j] != ' ' && text[j] != '\t' {
				j++
			}
			out = append(out, text[i:j])
			i = j
			continue
		}
		// Quoted.
		j := i + 1
		escaped := false
		for j < len(text) && text[j] != '"' {
			if text[j] == '\\' && j+1 < len(text) {
				escaped = true
				j++
			}
			j++
		}
		if j >= len(text) {
			return out, fmt.Errorf("unterminated quote in %.60q", text)
		}
		s := text[i+1 : j]
		if escaped {
			s = unescape(s)
		}
		out = append(out, s)
		i = j + 1
	}
	return out, nil
}

func unescape(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
