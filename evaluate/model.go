package evaluate

import (
	"fmt"
	"strings"

	"github.com/proxyrules/kubectl-proxyrules/inspect"
	"github.com/proxyrules/kubectl-proxyrules/inspect/iptables/ruleargs"
)

// Most rules of a big iptables table are plain: kube-proxy's KUBE-SEP,
// KUBE-SVC and KUBE-SERVICES rules match on addresses, ports, a mark, a
// share and jump or DNAT. Their parsed model (inspect.IPRule) already
// holds everything about them, so they are evaluated from it, without
// reading their arguments again; a rule with anything the model does not
// hold whole (an argument kept unparsed, a negation of something the model
// keeps no negation for, an ipset, a recent list, a target with options of
// its own) is read whole (ruleargs.ParseSpec). TestModelPathAgrees holds
// the two equal on every rule of every fixture.

// plainNegations are the options the model keeps with their negation.
var plainNegations = []string{"-s ", "-d ", "-i ", "-o ", "--mark ", "--ctstate ", "--state ", "--src-type ", "--dst-type ", "--dport ", "--dports "}

// plain: r is evaluated from its model.
func plain(r *inspect.IPRule) bool {
	if m := r.More; m != nil && (len(m.Unparsed) > 0 || m.MatchSet.Set() || m.Recent != nil || m.RestoreMark) {
		return false
	}
	switch r.Target {
	case "CONNMARK", "CT", "NOTRACK", "SNAT", "REDIRECT", "NFQUEUE", "QUEUE", "TPROXY":
		return false
	}
	if r.Random && r.Probability == 0 {
		return false // statistic without its probability (nth, or not shown)
	}
	text := r.Text
	for {
		i := strings.Index(text, "! ")
		if i < 0 {
			return !strings.Contains(r.Text, "--syn")
		}
		text = text[i+2:]
		ok := false
		for _, p := range plainNegations {
			if strings.HasPrefix(text, p) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
}

// evalPlain evaluates a plain rule from its model.
func (w *walk) evalPlain(t *thread, ch chainRef, i int, r *inspect.IPRule) []branch {
	conds := w.conds[:0]
	add := func(c cond) bool {
		conds = append(conds, c)
		return c.kind != condFalse
	}
	ok := true
	if r.Protocol != "" {
		ok = add(w.protoIs(t, r.Protocol))
	}
	if ok && r.Source.Set() {
		ok = add(not(addrCond(t.src.Addr(), r.Source.Value), r.Source.Not))
	}
	if m := r.More; m != nil && ok {
		if m.Destination.Set() {
			ok = add(not(addrCond(t.dst.Addr(), m.Destination.Value), m.Destination.Not))
		}
		if ok && m.DPort.Set() {
			ok = add(not(w.dportCond(t, m.DPort.Value), m.DPort.Not))
		}
		if ok && m.InIface.Set() {
			ok = add(w.iptOption(t, "", ruleargs.Option{Name: "-i", Not: m.InIface.Not, Args: []string{m.InIface.Value}}))
		}
		if ok && m.OutIface.Set() {
			ok = add(w.iptOption(t, "", ruleargs.Option{Name: "-o", Not: m.OutIface.Not, Args: []string{m.OutIface.Value}}))
		}
		if ok && m.SrcType.Set() {
			ok = add(not(w.addrTypeCond(t.src.Addr(), m.SrcType.Value), m.SrcType.Not))
		}
		if ok && m.DstType.Set() {
			ok = add(not(w.addrTypeCond(t.dst.Addr(), m.DstType.Value), m.DstType.Not))
		}
		if ok && m.CTState.Set() {
			ok = add(not(w.ctStateCond(t, m.CTState.Value), m.CTState.Not))
		}
		if ok && m.Mark != nil {
			mark := t.mark
			if m.Mark.Module == "connmark" {
				mark = t.ctmark
			}
			ok = add(not(truth(mark&m.Mark.Mask == m.Mark.Value), m.Mark.Not))
		}
	}
	if ok && r.Random {
		ok = add(cond{kind: condRandom, p: statisticProb(r.Probability)})
	}
	w.conds = conds[:0]
	if !ok {
		return w.result(t, effect{}, nil)
	}
	return w.branches(t, ch, i, conds, func(t *thread) effect { return w.plainTarget(t, ch, r) })
}

// dportCond: a port, a range, or multiport's list.
func (w *walk) dportCond(t *thread, spec string) cond {
	proto, _ := protoNumber(w.pkt.Protocol)
	if proto != 6 && proto != 17 && proto != 132 && proto != 136 && proto != 33 {
		return no
	}
	for _, p := range strings.Split(spec, ",") {
		c := portCond(t.dst.Port(), p)
		if c.kind != condFalse {
			return c
		}
	}
	return no
}

// plainTarget is what a matched plain rule does.
func (w *walk) plainTarget(t *thread, ch chainRef, r *inspect.IPRule) effect {
	spec := ruleargs.Spec{Target: r.Target, Goto: r.Goto}
	switch r.Target {
	case "DNAT":
		if strings.Contains(r.ToDestination, "-") || r.ToDestination == "" {
			return effect{act: actUnknown, what: "DNAT to a range or several destinations"}
		}
		return w.dnatTo(t, r.ToDestination)
	case "REJECT":
		if m := r.More; m != nil && m.RejectWith != "" {
			spec.TargetOptions = []ruleargs.Option{{Name: "--reject-with", Args: []string{m.RejectWith}}}
		}
	case "MARK":
		ms := r.SetMark()
		if ms == nil {
			return effect{act: actUnknown, what: "MARK without its value"}
		}
		t.mark = (t.mark &^ ms.Mask) ^ ms.Value
		if w.opts.Brief {
			return effect{act: actNext}
		}
		return effect{act: actNext, what: fmt.Sprintf("mark %#x/%#x → %#x", ms.Value, ms.Mask, t.mark)}
	}
	return w.iptTarget(t, ch, &spec)
}
