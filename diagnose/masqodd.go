package diagnose

import (
	"fmt"
	"math/bits"
	"sort"
	"strings"

	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// The masquerade mark's value is used four ways: kube-proxy's rules set
// it, test it and clear it, and its configuration names it. kube-proxy
// writes all of them from the one masqueradeBit, so when they disagree the
// use that differs from the others is the fault (a rule someone rewrote, a
// configuration kube-proxy has not loaded) and the others are its evidence.

// MarkUse is one use of the masquerade mark: one of kube-proxy's rules
// that sets, tests or clears it, or the masqueradeBit of its configuration.
type MarkUse struct {
	// Op is sets, tests, clears or configured.
	Op    string `json:"op"`
	Table string `json:"table,omitempty"`
	Chain string `json:"chain,omitempty"`
	// Rule is the rule's text; for the configuration, the field and value
	// (iptables.masqueradeBit: 15), and Source its file.
	Rule   string `json:"rule"`
	Source string `json:"source,omitempty"`
	Mark   string `json:"mark"`
	// Bits names the mark's bits: "bit 14", "bits 14+15, not one bit".
	Bits string `json:"bits"`
}

// MasqFinding is a problem with the mark's value: which uses differ from
// the rest (Odd; Differs names their ops), the uses that agree with each
// other (Evidence), and what to do.
type MasqFinding struct {
	// Problem is the problem's text, as in Problems.
	Problem  string    `json:"problem"`
	Differs  []string  `json:"differs"`
	Odd      []MarkUse `json:"odd"`
	Evidence []MarkUse `json:"evidence"`
	// More counts the uses left out of Odd and Evidence (nftables marks
	// inline in every external chain).
	More   int    `json:"more,omitempty"`
	Remedy string `json:"remedy"`
}

// OpConfigured is the op of the configuration's masqueradeBit.
const OpConfigured = "configured"

// maxUsesPerVoter bounds the rules a finding lists for one voter.
const maxUsesPerVoter = 3

// markUse is a use of the mark by one of kube-proxy's rules.
type markUse struct {
	op    string
	value uint32
	ref   RuleRef
}

// configMark is the configuration's masqueradeBit for the report's mode.
type configMark struct {
	field  string
	bit    int
	source string
}

// voter is the uses of one role (all the rules that set the mark; one
// chain's tests, or clears; the configuration) with one value.
type voter struct {
	op     string
	who    string
	plural bool // who is several rules
	value  uint32
	uses   []MarkUse
	n      int
	chains []string
}

// MarkBits names the bits of a mark: "bit 15", "bits 14+15, not one bit",
// "no bit".
func MarkBits(v uint32) string {
	switch n := bits.OnesCount32(v); {
	case n == 0:
		return "no bit"
	case n == 1:
		return fmt.Sprintf("bit %d", bits.TrailingZeros32(v))
	case n > 4:
		return fmt.Sprintf("%d bits, not one bit", n)
	}
	var bs []string
	for b := 0; b < 32; b++ {
		if v&(1<<uint(b)) != 0 {
			bs = append(bs, fmt.Sprint(b))
		}
	}
	return "bits " + strings.Join(bs, "+") + ", not one bit"
}

// markLabel is a mark with its bits: 0x00008000 (bit 15).
func markLabel(v uint32) string { return kubeproxy.FormatMark(v) + " (" + MarkBits(v) + ")" }

// voters groups the uses of the mark into roles.
func (a *masqAnalysis) voters(cfg *configMark) []*voter {
	var vs []*voter
	for _, u := range a.uses {
		who := u.ref.Chain
		if u.op == markOpSets {
			who = "" // every rule that marks is one role, named below
		}
		var vt *voter
		for _, x := range vs {
			if x.op == u.op && x.who == who && x.value == u.value {
				vt = x
			}
		}
		if vt == nil {
			vt = &voter{op: u.op, who: who, value: u.value}
			vs = append(vs, vt)
		}
		vt.n++
		if len(vt.uses) < maxUsesPerVoter {
			vt.uses = append(vt.uses, MarkUse{Op: u.op, Table: u.ref.Table, Chain: u.ref.Chain, Rule: u.ref.Rule, Mark: u.ref.Mark, Bits: MarkBits(u.value)})
		}
		if len(vt.chains) == 0 || vt.chains[len(vt.chains)-1] != u.ref.Chain {
			vt.chains = append(vt.chains, u.ref.Chain)
		}
	}
	// set, tested, cleared, then KUBE-FORWARD's accept of marked packets
	rank := func(v *voter) int {
		if v.who == kubeproxy.ChainForward {
			return 3
		}
		return map[string]int{markOpSets: 0, markOpTests: 1, markOpClears: 2}[v.op]
	}
	sort.SliceStable(vs, func(i, j int) bool { return rank(vs[i]) < rank(vs[j]) })
	for _, vt := range vs {
		if vt.who != "" {
			continue
		}
		vt.who = vt.chains[0]
		if n := len(vt.chains); n > 1 {
			more := "chains"
			if n == 2 {
				more = "chain"
			}
			vt.who, vt.plural = fmt.Sprintf("the rules of %s and %d more %s", vt.chains[0], n-1, more), true
		}
	}
	if cfg != nil {
		v := uint32(1) << uint(cfg.bit)
		vs = append(vs, &voter{op: OpConfigured, who: "the configuration", value: v, n: 1, uses: []MarkUse{{
			Op: OpConfigured, Rule: fmt.Sprintf("%s: %d", cfg.field, cfg.bit), Source: cfg.source, Mark: kubeproxy.FormatMark(v), Bits: MarkBits(v)}}})
	}
	return vs
}

// reference is the value most roles use; a tie goes to the configured
// value, else there is none.
func reference(vs []*voter, cfg *configMark) (uint32, bool) {
	count := map[uint32]int{}
	for _, v := range vs {
		count[v.value]++
	}
	best, n, tie := uint32(0), 0, false
	for _, v := range vs {
		switch c := count[v.value]; {
		case c > n:
			best, n, tie = v.value, c, false
		case c == n && v.value != best:
			tie = true
		}
	}
	if tie && cfg != nil && count[uint32(1)<<uint(cfg.bit)] == n {
		return uint32(1) << uint(cfg.bit), true
	}
	return best, !tie && n > 0
}

// judgeMarks reports a mark whose uses disagree, naming the one that
// differs, or a mark that is not one bit.
func (a *masqAnalysis) judgeMarks(cfg *configMark) {
	vs := a.voters(cfg)
	if len(vs) == 0 {
		return
	}
	ref, ok := reference(vs, cfg)
	var odd, agree []*voter
	for _, v := range vs {
		if ok && v.value == ref {
			agree = append(agree, v)
		} else {
			odd = append(odd, v)
		}
	}
	if len(odd) == 0 {
		if bits.OnesCount32(ref) != 1 {
			a.finding(nil, agree, fmt.Sprintf("the masquerade mark %s is %s: kube-proxy marks with 1 << masqueradeBit, so another writer changed its rules", kubeproxy.FormatMark(ref), MarkBits(ref)),
				remedy(agree, cfg, ref, false))
		}
		return
	}
	msg := disagreement(odd, agree, cfg, ref, ok)
	if c := consequences(vs); c != "" {
		msg += ": " + c
	}
	a.finding(odd, agree, msg, remedy(odd, cfg, ref, ok))
}

// finding adds a problem with its uses.
func (a *masqAnalysis) finding(odd, agree []*voter, msg, remedy string) {
	a.problem("%s", msg)
	f := MasqFinding{Problem: msg, Differs: []string{}, Odd: []MarkUse{}, Evidence: []MarkUse{}, Remedy: remedy}
	seen := map[string]bool{}
	for _, v := range odd {
		if !seen[v.op] {
			seen[v.op] = true
			f.Differs = append(f.Differs, v.op)
		}
		f.Odd = append(f.Odd, v.uses...)
		f.More += v.n - len(v.uses)
	}
	for _, v := range agree {
		f.Evidence = append(f.Evidence, v.uses...)
		f.More += v.n - len(v.uses)
	}
	a.r.addFinding(f)
}

// disagreement says which uses differ from the others.
func disagreement(odd, agree []*voter, cfg *configMark, ref uint32, ok bool) string {
	cfgOdd := false
	var oddRules []*voter
	for _, v := range odd {
		if v.op == OpConfigured {
			cfgOdd = true
		} else {
			oddRules = append(oddRules, v)
		}
	}
	if !ok {
		s := "the masquerade mark's uses disagree: " + valueClauses(oddRules)
		if cfgOdd {
			s += ", and kube-proxy is configured with " + cfgWords(cfg)
		}
		return s
	}
	var agreeRules []*voter
	for _, v := range agree {
		if v.op != OpConfigured {
			agreeRules = append(agreeRules, v)
		}
	}
	// KUBE-FORWARD's accept of marked packets is evidence, not the story,
	// unless it is all that agrees.
	if main := withoutForward(agreeRules); len(main) > 0 {
		agreeRules = main
	}
	refWords := markLabel(ref)
	if len(agreeRules) > 0 {
		refWords = clause(agreeRules) + " " + refWords
	}
	switch {
	case len(oddRules) == 0:
		return fmt.Sprintf("kube-proxy's configuration (%s) sets %s but %s", cfg.source, cfgWords(cfg), refWords)
	case cfgOdd:
		s := valueClauses(oddRules)
		if cfgMatches(oddRules, cfg) {
			s += fmt.Sprintf(", as kube-proxy is configured (%s %d),", cfg.field, cfg.bit)
		} else {
			s += ", kube-proxy is configured with " + cfgWords(cfg) + ","
		}
		return s + " but " + refWords
	case len(agreeRules) == 0:
		return valueClauses(oddRules) + " but kube-proxy is configured with " + cfgWords(cfg)
	}
	s := valueClauses(oddRules) + " but " + refWords
	if cfg != nil {
		s += fmt.Sprintf(", as kube-proxy is configured (%s %d)", cfg.field, cfg.bit)
	}
	return s
}

func cfgWords(cfg *configMark) string {
	return fmt.Sprintf("%s %d (%s)", cfg.field, cfg.bit, kubeproxy.FormatMark(uint32(1)<<uint(cfg.bit)))
}

func cfgMatches(vs []*voter, cfg *configMark) bool {
	for _, v := range vs {
		if v.value == uint32(1)<<uint(cfg.bit) {
			return true
		}
	}
	return false
}

func withoutForward(vs []*voter) []*voter {
	var out []*voter
	for _, v := range vs {
		if v.who != kubeproxy.ChainForward {
			out = append(out, v)
		}
	}
	return out
}

// valueClauses says what each value's roles do with it: "KUBE-MARK-MASQ
// sets 0x00008000 (bit 15)".
func valueClauses(vs []*voter) string {
	var order []uint32
	by := map[uint32][]*voter{}
	for _, v := range vs {
		if by[v.value] == nil {
			order = append(order, v.value)
		}
		by[v.value] = append(by[v.value], v)
	}
	var parts []string
	for _, val := range order {
		parts = append(parts, clause(by[val])+" "+markLabel(val))
	}
	return joinAnd(parts)
}

// clause names roles and what they do: "KUBE-POSTROUTING tests and
// clears", "KUBE-MARK-MASQ sets and KUBE-POSTROUTING clears".
func clause(vs []*voter) string {
	var whos []string
	ops := map[string][]string{}
	plural := map[string]bool{}
	for _, v := range vs {
		if ops[v.who] == nil {
			whos = append(whos, v.who)
		}
		ops[v.who] = append(ops[v.who], v.op)
		plural[v.who] = plural[v.who] || v.plural
	}
	var parts []string
	for _, w := range whos {
		verbs := ops[w]
		if plural[w] {
			for i, op := range verbs {
				verbs[i] = strings.TrimSuffix(op, "s")
			}
		}
		parts = append(parts, w+" "+strings.Join(verbs, " and "))
	}
	return joinAnd(parts)
}

func joinAnd(parts []string) string {
	if len(parts) <= 1 {
		return strings.Join(parts, "")
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}

// consequences says what the disagreement does to packets.
func consequences(vs []*voter) string {
	vals := func(op string, skipForward bool) map[uint32]bool {
		m := map[uint32]bool{}
		for _, v := range vs {
			if v.op == op && !(skipForward && v.who == kubeproxy.ChainForward) {
				m[v.value] = true
			}
		}
		return m
	}
	differ := func(a, b map[uint32]bool) bool {
		if len(a) == 0 || len(b) == 0 {
			return false
		}
		for v := range a {
			if !b[v] {
				return true
			}
		}
		return len(a) != len(b)
	}
	set, tested, cleared := vals(markOpSets, false), vals(markOpTests, true), vals(markOpClears, false)
	forward := map[uint32]bool{}
	for _, v := range vs {
		if v.op == markOpTests && v.who == kubeproxy.ChainForward {
			forward[v.value] = true
		}
	}
	var out []string
	switch {
	case differ(set, tested) && differ(set, forward):
		out = append(out, "packets marked for masquerading are not masqueraded, nor accepted by KUBE-FORWARD")
	case differ(set, tested):
		out = append(out, "packets marked for masquerading are not masqueraded")
	case differ(set, forward):
		out = append(out, "KUBE-FORWARD does not accept the marked packets (forwarded Service traffic depends on the FORWARD policy)")
	}
	if differ(tested, cleared) {
		out = append(out, "the bit cleared is not the one tested, so masqueraded packets keep the mark")
	}
	if len(out) == 0 {
		for _, v := range vs {
			if v.op == OpConfigured {
				return "kube-proxy runs with another configuration, or has not been restarted since it changed"
			}
		}
	}
	return strings.Join(out, "; ")
}

// remedy says what to do: find whoever rewrote kube-proxy's rules, and
// restart kube-proxy (it reads masqueradeBit only when it starts, and
// rewrites its chains from it) or correct the configuration.
func remedy(odd []*voter, cfg *configMark, ref uint32, ok bool) string {
	var chains []string
	seen := map[string]bool{}
	cfgOdd := false
	for _, v := range odd {
		if v.op == OpConfigured {
			cfgOdd = true
			continue
		}
		for _, c := range v.chains {
			if !seen[c] {
				seen[c] = true
				chains = append(chains, c)
			}
		}
	}
	if len(chains) > 3 {
		chains = append(chains[:3], "…")
	}
	var parts []string
	if len(chains) > 0 {
		parts = append(parts, "find who rewrote "+strings.Join(chains, ", ")+": kube-proxy writes every use of the mark from one masqueradeBit and rewrites its chains when it syncs, so another writer (a CNI, an agent, a script) changed them, or kube-proxy has stopped syncing")
	}
	restart := "restart kube-proxy (kubectl -n kube-system rollout restart daemonset kube-proxy)"
	switch {
	case cfg == nil:
		parts = append(parts, restart+" so it rewrites its chains from its masqueradeBit (--from-config checks which bit that is)")
	case cfgOdd && ok && bits.OnesCount32(ref) == 1:
		b := bits.TrailingZeros32(ref)
		parts = append(parts, fmt.Sprintf("%s to program bit %d (it reads masqueradeBit only when it starts), or set %s to %d if bit %d is the one meant; and check that the kube-proxy pods run with this configuration",
			restart, cfg.bit, cfg.field, b, b))
	default:
		parts = append(parts, fmt.Sprintf("%s so it rewrites its chains with the configured bit %d", restart, cfg.bit))
	}
	return strings.Join(parts, "; then ")
}

// BitCell is the family's mark in a few characters, for a sweep's MASQ
// column: "bit 14"; "bit 15≠14" when the rules use different marks (in
// the order set, tested, cleared); "bits 14+15" for a mark of several
// bits; "none" when no rule of kube-proxy uses a mark. "!" follows when
// the family has problems or conflicts.
func (r *MasqReport) BitCell() string {
	var vals []uint32
	seen := map[uint32]bool{}
	for _, refs := range [][]RuleRef{r.SetBy, r.TestedBy, r.ClearedBy} {
		for _, ref := range refs {
			var v uint32
			if _, err := fmt.Sscanf(ref.Mark, "0x%x", &v); err != nil || seen[v] {
				continue
			}
			seen[v] = true
			vals = append(vals, v)
		}
	}
	cell := "none"
	if len(vals) > 0 {
		words := make([]string, len(vals))
		for i, v := range vals {
			words[i] = bitWord(v)
		}
		cell = "bit "
		for _, v := range vals {
			if bits.OnesCount32(v) != 1 {
				cell = "bits "
			}
		}
		cell += strings.Join(words, "≠")
	}
	if len(r.Problems) > 0 || len(r.Conflicts) > 0 {
		cell += "!"
	}
	return cell
}

// bitWord is a mark's bits, short: "15", "14+15", or the mark.
func bitWord(v uint32) string {
	switch n := bits.OnesCount32(v); {
	case n == 1:
		return fmt.Sprint(bits.TrailingZeros32(v))
	case n == 0 || n > 4:
		return kubeproxy.FormatMark(v)
	}
	var bs []string
	for b := 0; b < 32; b++ {
		if v&(1<<uint(b)) != 0 {
			bs = append(bs, fmt.Sprint(b))
		}
	}
	return strings.Join(bs, "+")
}

// Remedy is what to do about one of the report's problems, "" when the
// report does not say.
func (r *MasqReport) Remedy(problem string) string {
	for _, f := range r.Findings {
		if f.Problem == problem {
			return f.Remedy
		}
	}
	return ""
}
