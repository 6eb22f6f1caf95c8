package diagnose_test

import (
	"fmt"
	"net/netip"
	"regexp"
	"strings"
)

// Edits of an IPVS table in any of its three forms, as a fault injected
// by hand would look: addresses are spelt as the form spells them.

// spell is ap as the form shows it: hex in /proc, dotted elsewhere.
func spell(form, ap string) string {
	a := netip.MustParseAddrPort(ap)
	if !strings.HasPrefix(form, "proc") {
		return ap
	}
	b := a.Addr().As4()
	return fmt.Sprintf("%02X%02X%02X%02X:%04X", b[0], b[1], b[2], b[3], a.Port())
}

func isSave(form string) bool { return strings.Contains(form, "-Sn") }

// editLines rewrites the lines of vs's block (its service line and its
// real servers, or in -Sn the lines naming it) with f; f returns the
// lines to put instead.
func editLines(form, text, vs string, f func(line string, service bool) []string) string {
	lines := strings.SplitAfter(text, "\n")
	var out []string
	in := false
	for _, l := range lines {
		t := strings.TrimSpace(l)
		service, mine := false, false
		switch {
		case isSave(form):
			mine = strings.Contains(t, "-t "+vs+" ") || strings.HasSuffix(t, "-t "+vs)
			service = mine && strings.HasPrefix(t, "-A ")
		case strings.HasPrefix(t, "TCP ") || strings.HasPrefix(t, "UDP ") || strings.HasPrefix(t, "SCTP "):
			in = strings.HasPrefix(t, "TCP  "+spell(form, vs)+" ")
			service, mine = in, in
		case strings.HasPrefix(t, "-> ") && !strings.HasPrefix(t, "-> RemoteAddress"):
			mine = in
		default:
			in = false
		}
		if !mine {
			out = append(out, l)
			continue
		}
		for _, n := range f(strings.TrimRight(l, "\n"), service) {
			out = append(out, n+"\n")
		}
	}
	return strings.Join(out, "")
}

func realServerLine(form, vs, rs string, w int) string {
	if isSave(form) {
		return fmt.Sprintf("-a -t %s -r %s -m -w %d", vs, rs, w)
	}
	return fmt.Sprintf("  -> %-28s Masq    %d      0          0", spell(form, rs), w)
}

func isRealServer(form, line, rs string) bool {
	if isSave(form) {
		return strings.Contains(line, "-r "+rs+" ")
	}
	return strings.HasPrefix(strings.TrimSpace(line), "-> "+spell(form, rs)+" ")
}

func dropRealServer(vs, rs string) func(string, string) string {
	return func(form, text string) string {
		return editLines(form, text, vs, func(l string, svc bool) []string {
			if !svc && isRealServer(form, l, rs) {
				return nil
			}
			return []string{l}
		})
	}
}

func addRealServer(vs, rs string, w int) func(string, string) string {
	return func(form, text string) string {
		return editLines(form, text, vs, func(l string, svc bool) []string {
			if svc {
				return []string{l, realServerLine(form, vs, rs, w)}
			}
			return []string{l}
		})
	}
}

var weightField = regexp.MustCompile(`(Masq\s+)\d+`)

func setWeight(vs, rs string, w int) func(string, string) string {
	return func(form, text string) string {
		return editLines(form, text, vs, func(l string, svc bool) []string {
			switch {
			case svc || !isRealServer(form, l, rs):
			case isSave(form):
				l = regexp.MustCompile(`-w \d+`).ReplaceAllString(l, fmt.Sprintf("-w %d", w))
			default:
				l = weightField.ReplaceAllString(l, fmt.Sprintf("${1}%d", w))
			}
			return []string{l}
		})
	}
}

var connFields = regexp.MustCompile(`(Masq\s+\d+\s+)\d+(\s+)\d+`)

func setConns(vs, rs string, n int) func(string, string) string {
	return func(form, text string) string {
		return editLines(form, text, vs, func(l string, svc bool) []string {
			if !svc && isRealServer(form, l, rs) {
				l = connFields.ReplaceAllString(l, fmt.Sprintf("${1}%d${2}%d", n, n))
			}
			return []string{l}
		})
	}
}

func addVirtualServer(vs, rs string) func(string, string) string {
	return func(form, text string) string {
		if isSave(form) {
			return text + fmt.Sprintf("-A -t %s -s rr\n%s\n", vs, realServerLine(form, vs, rs, 1))
		}
		return text + fmt.Sprintf("TCP  %s rr\n%s\n", spell(form, vs), realServerLine(form, vs, rs, 1))
	}
}

func dropVirtualServer(vs string) edit {
	return func(form, text string) string {
		return editLines(form, text, vs, func(string, bool) []string { return nil })
	}
}

func setScheduler(vs, sched string) func(string, string) string {
	return func(form, text string) string {
		return editLines(form, text, vs, func(l string, svc bool) []string {
			if svc {
				l = strings.Replace(strings.Replace(l, " rr", " "+sched, 1), "-s rr", "-s "+sched, 1)
			}
			return []string{l}
		})
	}
}

var persistence = regexp.MustCompile(`\s+(persistent \d+( [0-9A-F]{8})?|-p \d+)`)

func dropPersistence(vs string) func(string, string) string {
	return func(form, text string) string {
		return editLines(form, text, vs, func(l string, svc bool) []string {
			if svc {
				l = persistence.ReplaceAllString(l, "")
			}
			return []string{l}
		})
	}
}

// edit is a table edit; withForm fixes its form for ipvsNode.
type edit func(form, text string) string

func (e edit) withForm(form string) func(string) string {
	return func(s string) string { return e(form, s) }
}
