package diagnose

import (
	"fmt"
	"math/bits"
	"regexp"
	"sort"
	"strings"

	"github.com/proxyrules/kubectl-proxyrules/inspect"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// Fixed rules: the chains kube-proxy writes for no Service, compared by
// what they do. The masquerade mark (the bit KUBE-MARK-MASQ or `mark set`
// sets and the bit KUBE-POSTROUTING or masquerading tests, as
// AnalyzeMasquerade reads them) and whether masquerading is fully random,
// in either mode; in iptables mode KUBE-FORWARD (the INVALID drop, the
// accept of marked packets, the accept of established connections) and
// KUBE-FIREWALL (the localhost drop) with the jumps to them; in nftables
// mode filter-forward. Rule order, counters, comments and the form of the
// dump do not count.

// FixedRuleDiff is one way the fixed rules act differently on A and B.
type FixedRuleDiff struct {
	Family string `json:"family"`
	// What: masqueradeMark, randomFully, or rule (a behaviour one side's
	// chain has and the other's lacks).
	What string `json:"what"`
	// Chain is the chain of a rule: KUBE-FORWARD, KUBE-FIREWALL, FORWARD,
	// INPUT, OUTPUT, filter-forward.
	Chain string `json:"chain,omitempty"`
	// A and B say what each side does; "" where it does not.
	A string `json:"a"`
	B string `json:"b"`
	// RuleA and RuleB are the rules' text, for a rule.
	RuleA string `json:"ruleA,omitempty"`
	RuleB string `json:"ruleB,omitempty"`
	// Summary says it for a person.
	Summary string `json:"summary"`
}

// fixedFact is one thing a side's fixed rules do.
type fixedFact struct {
	what, chain string
	key         string // what it does, independent of the dump's form
	words       string
	rule        string
}

// fixedFacts are what n's fixed rules of family fam do in mode (iptables
// for ipvs too): the masquerade facts always, the rules' facts when
// rules is set.
func fixedFacts(n *Node, masq []MasqReport, mode kubeproxy.Mode, fam kubeproxy.Family, rules bool) []fixedFact {
	var out []fixedFact
	var rep *MasqReport
	for i := range masq {
		if masq[i].Mode == mode && masq[i].Family == fam {
			rep = &masq[i]
			break
		}
	}
	mark := uint32(0)
	if rep != nil {
		words, m := markWords(rep)
		mark = m
		out = append(out, fixedFact{what: "masqueradeMark", key: words, words: words})
		if !rep.RandomFullyUnknown && masqueradeRuleSeen(rep) {
			w := "fully random source ports"
			if !rep.RandomFully {
				w = "source ports not fully random"
			}
			out = append(out, fixedFact{what: "randomFully", key: w, words: w})
		}
	}
	if !rules {
		return out
	}
	switch mode {
	case kubeproxy.ModeIPTables:
		filter := filterTable(n.Ruleset, fam)
		if filter == nil {
			return out
		}
		jumps := map[string]string{"FORWARD": kubeproxy.ChainForward, "INPUT": kubeproxy.ChainFirewall, "OUTPUT": kubeproxy.ChainFirewall}
		for _, chain := range []string{"FORWARD", "INPUT", "OUTPUT", kubeproxy.ChainForward, kubeproxy.ChainFirewall} {
			c := filter.Chain(chain)
			if c == nil {
				continue
			}
			for _, r := range c.Rules {
				if target := jumps[chain]; target != "" && r.Target != target {
					continue
				}
				key, words := iptRuleBehaviour(r, mark)
				out = append(out, fixedFact{what: "rule", chain: chain, key: key, words: words, rule: r.Text})
			}
		}
	case kubeproxy.ModeNFTables:
		for _, t := range n.Ruleset.NFTables {
			if !t.IsKubeProxy() || t.IPFamily() != fam {
				continue
			}
			c := t.Chain("filter-forward")
			if c == nil {
				break
			}
			if c.Hook != nil {
				w := "hooks " + string(*c.Hook)
				if c.Policy != nil {
					w += ", policy " + string(*c.Policy)
				}
				out = append(out, fixedFact{what: "rule", chain: c.Name, key: "chain " + w, words: w})
			}
			for _, r := range c.Rules {
				key, words := nftRuleBehaviour(r.Rule.Rule)
				out = append(out, fixedFact{what: "rule", chain: c.Name, key: key, words: words, rule: r.Rule.Rule})
			}
			break
		}
	}
	return out
}

// filterTable is the filter table of family fam kube-proxy's fixed
// chains are in: the first with KUBE-FORWARD or KUBE-FIREWALL.
func filterTable(rs *inspect.Ruleset, fam kubeproxy.Family) *inspect.IPTable {
	for _, t := range rs.IPTables {
		if t != nil && t.Name == kubeproxy.TableFilter && t.Family == fam && (t.Chain(kubeproxy.ChainForward) != nil || t.Chain(kubeproxy.ChainFirewall) != nil) {
			return t
		}
	}
	return nil
}

// masqueradeRuleSeen: the report saw a masquerade rule, so RandomFully
// says something.
func masqueradeRuleSeen(r *MasqReport) bool {
	for _, p := range r.Problems {
		if strings.Contains(p, "no MASQUERADE rule") || strings.Contains(p, "no masquerade statement") || strings.Contains(p, "no masquerading chain") || strings.Contains(p, "no nat table") || strings.Contains(p, "no KUBE-POSTROUTING") {
			return false
		}
	}
	return true
}

// markWords says which mark a side's masquerade rules set and which they
// masquerade ("bit 14 (0x00004000)" when those agree), and the mark
// packets are masqueraded with (0 when none or not one).
func markWords(r *MasqReport) (string, uint32) {
	set := distinctMarks(r.SetBy, nil)
	tested := distinctMarks(r.TestedBy, func(ref RuleRef) bool {
		// KUBE-FORWARD's accept of marked packets is a rule of its own.
		return ref.Chain != kubeproxy.ChainForward
	})
	cleared := distinctMarks(r.ClearedBy, nil)
	bit := func(m string) string {
		var v uint32
		if _, err := fmt.Sscanf(m, "0x%x", &v); err == nil && bits.OnesCount32(v) == 1 {
			return fmt.Sprintf("bit %d (%s)", bits.TrailingZeros32(v), m)
		}
		return m
	}
	value := func(m string) uint32 {
		var v uint32
		_, _ = fmt.Sscanf(m, "0x%x", &v)
		return v
	}
	switch {
	case len(tested) == 1 && (len(set) == 0 && r.Mode == kubeproxy.ModeNFTables || len(set) == 1 && set[0] == tested[0]) &&
		(len(cleared) == 0 || len(cleared) == 1 && cleared[0] == tested[0]):
		if len(cleared) == 0 {
			return bit(tested[0]) + ", not cleared before masquerading", value(tested[0])
		}
		return bit(tested[0]), value(tested[0])
	case len(tested) == 0 && len(set) == 0:
		return "no masquerade mark set or tested", 0
	}
	list := func(ms []string) string {
		if len(ms) == 0 {
			return "none"
		}
		var w []string
		for _, m := range ms {
			w = append(w, bit(m))
		}
		return strings.Join(w, " and ")
	}
	words := "sets " + list(set) + ", masquerades " + list(tested)
	if len(cleared) > 0 && !(len(cleared) == 1 && len(tested) == 1 && cleared[0] == tested[0]) {
		words += ", clears " + list(cleared)
	}
	var mark uint32
	if len(set) == 1 {
		mark = value(set[0])
	} else if len(set) == 0 && len(tested) == 1 {
		mark = value(tested[0])
	}
	return words, mark
}

func distinctMarks(refs []RuleRef, keep func(RuleRef) bool) []string {
	seen := map[uint32]bool{}
	var out []string
	for _, ref := range refs {
		if keep != nil && !keep(ref) {
			continue
		}
		var v uint32
		if _, err := fmt.Sscanf(ref.Mark, "0x%x", &v); err != nil || seen[v] {
			continue
		}
		seen[v] = true
		out = append(out, kubeproxy.FormatMark(v))
	}
	sort.Strings(out)
	return out
}

// iptRuleBehaviour is what an iptables rule does, as a key independent of
// the dump's form (iptables-save, -S, nft's listing of iptables-nft) and
// in words. mark is the side's masquerade mark: a test of it is "the
// masquerade mark" whatever its bit, so a node with another bit differs
// in its mark, once, and not in every rule that tests it.
func iptRuleBehaviour(r *inspect.IPRule, mark uint32) (key, words string) {
	var c ruleConds
	if r.Protocol != "" {
		c.add("p="+r.Protocol, r.Protocol)
	}
	c.match("s", r.Source, "from ", "")
	m := r.More
	if m == nil {
		m = &inspect.IPRuleMore{}
	}
	c.match("d", m.Destination, "to ", "")
	c.match("dport", m.DPort, "to port ", "")
	c.match("i", m.InIface, "in on ", "")
	c.match("o", m.OutIface, "out on ", "")
	c.match("srctype", m.SrcType, "from a ", " address")
	c.match("dsttype", m.DstType, "to a ", " address")
	ct, rest := unparsedMatches(m)
	ct.Value = strings.ToUpper(ct.Value)
	c.match("ct", ct, "in conntrack state ", "")
	if m.Mark != nil {
		c.markMatch(m.Mark, mark)
	}
	c.match("set", m.MatchSet, "in set ", "")
	if len(rest) > 0 {
		c.add("more="+strings.Join(rest, " "), "matching "+strings.Join(rest, " "))
	}
	key = r.Target + "|" + strings.Join(c.keys, "|")
	if r.Goto {
		key = "goto " + key
	}
	return key, behaviourWords(key, r.Target, c.words)
}

// ruleConds are a rule's matches, each as a key and in words.
type ruleConds struct{ keys, words []string }

func (c *ruleConds) add(k, w string) {
	c.keys = append(c.keys, k)
	if w != "" {
		c.words = append(c.words, w)
	}
}

// match adds the match a if it is set: "name=[not ]value" and
// "[not ]before value after".
func (c *ruleConds) match(name string, a inspect.Addr, before, after string) {
	not := ""
	if a.Not {
		not = "not "
	}
	if a.Set() {
		c.add(name+"="+not+a.Value, not+before+a.Value+after)
	}
}

// markMatch adds a mark test: a test of the side's masquerade mark is "the
// masquerade mark" whatever its bit.
func (c *ruleConds) markMatch(mm *inspect.MarkMatch, mark uint32) {
	bang, not, with := "", "", "with"
	if mm.Not {
		bang, not, with = "!", "not ", "without"
	}
	if mm.Module != "connmark" && mark != 0 && mm.Value == mark && mm.Mask == mark {
		c.add("mark="+bang+"masq", with+" the masquerade mark")
		return
	}
	what := "marked"
	if mm.Module == "connmark" {
		what = "with the connection mark"
	}
	v := kubeproxy.FormatMark(mm.Value) + "/" + kubeproxy.FormatMark(mm.Mask)
	w := not + what + " " + v
	if mm.Module != "connmark" && mark != 0 && mm.Value == mm.Mask && bits.OnesCount32(mm.Mask) == 1 {
		w += " (not the masquerade mark, " + kubeproxy.FormatMark(mark) + ")"
	}
	c.add("mark="+bang+mm.Module+v, w)
}

// unparsedMatches reads the matches the model keeps as text: the conntrack
// state (as nft lists iptables-nft's), and the rest, accounting left out.
func unparsedMatches(m *inspect.IPRuleMore) (ct inspect.Addr, rest []string) {
	ct = m.CTState
	for i := 0; i < len(m.Unparsed); i++ {
		u := m.Unparsed[i]
		switch {
		case u == "--nfacct-name":
			i++ // accounting only: kube-proxy counts the INVALID drops
		case strings.Contains(u, "nfacct"):
		case u == "ct status dnat" && !ct.Set():
			// nft lists iptables-nft's `! --ctstate
			// RELATED,ESTABLISHED,DNAT` (the localhost drop's) so.
			ct = inspect.Addr{Value: "RELATED,ESTABLISHED,DNAT", Not: true}
		default:
			rest = append(rest, u)
		}
	}
	return ct, rest
}

// behaviourWords says what a rule with the key does: kube-proxy's own
// rules by name, others as their target and matches.
func behaviourWords(key, target string, conds []string) string {
	switch key {
	case "DROP|ct=INVALID":
		return "drops packets conntrack finds INVALID (the INVALID drop)"
	case "ACCEPT|ct=RELATED,ESTABLISHED":
		return "accepts packets of established connections"
	case "ACCEPT|mark=masq":
		return "accepts packets with the masquerade mark"
	case "DROP|s=not 127.0.0.0/8|d=127.0.0.0/8|ct=not RELATED,ESTABLISHED,DNAT":
		return "drops connections to 127.0.0.0/8 from other addresses, unless DNATed (the localhost drop)"
	}
	packets := "every packet"
	if len(conds) > 0 {
		packets = "packets " + strings.Join(conds, ", ")
	}
	if verb := map[string]string{"DROP": "drops", "ACCEPT": "accepts", "REJECT": "rejects", "RETURN": "returns", "": "counts"}[target]; verb != "" {
		return verb + " " + packets
	}
	return "sends " + packets + " to " + target
}

var (
	nftCounter = regexp.MustCompile(`\bcounter( packets \d+ bytes \d+)?`)
	nftComment = regexp.MustCompile(`\bcomment "[^"]*"`)
	nftJump    = regexp.MustCompile(`^ct state new (jump|goto) (\S+)$`)
)

// nftRuleBehaviour is an nftables rule without its counter and comment,
// and in words.
func nftRuleBehaviour(rule string) (key, words string) {
	key = strings.Join(strings.Fields(nftComment.ReplaceAllString(nftCounter.ReplaceAllString(rule, ""), "")), " ")
	if m := nftJump.FindStringSubmatch(key); m != nil {
		switch m[2] {
		case "service-endpoints-check":
			return key, "sends new connections to service-endpoints-check (rejects those to Services without endpoints)"
		case "cluster-ips-check":
			return key, "sends new connections to cluster-ips-check (rejects invalid ports of cluster IPs, drops unallocated cluster IPs)"
		}
		return key, "sends new connections to " + m[2]
	}
	return key, "runs `" + key + "`"
}

// diffFixed compares the fixed facts of one family.
func diffFixed(fam kubeproxy.Family, a, b []fixedFact) []FixedRuleDiff {
	var out []FixedRuleDiff
	byWhat := func(fs []fixedFact, what string) *fixedFact {
		for i := range fs {
			if fs[i].what == what {
				return &fs[i]
			}
		}
		return nil
	}
	for _, what := range []string{"masqueradeMark", "randomFully"} {
		fa, fb := byWhat(a, what), byWhat(b, what)
		if fa == nil || fb == nil || fa.key == fb.key {
			continue
		}
		d := FixedRuleDiff{Family: string(fam), What: what, A: fa.words, B: fb.words}
		switch what {
		case "masqueradeMark":
			d.Summary = fmt.Sprintf("masquerade mark: A %s, B %s", fa.words, fb.words)
			if strings.HasPrefix(fa.words, "bit ") && strings.HasPrefix(fb.words, "bit ") {
				d.Summary += " (kube-proxy's masqueradeBit differs; masq on each node says what else uses the bit)"
			}
		default:
			d.Summary = fmt.Sprintf("masquerading: A %s, B %s", fa.words, fb.words)
		}
		out = append(out, d)
	}
	rules := func(fs []fixedFact) map[string]fixedFact {
		m := map[string]fixedFact{}
		for _, f := range fs {
			if f.what == "rule" {
				m[f.chain+"\x00"+f.key] = f
			}
		}
		return m
	}
	ra, rb := rules(a), rules(b)
	var keys []string
	for k := range ra {
		if _, ok := rb[k]; !ok {
			keys = append(keys, k)
		}
	}
	for k := range rb {
		if _, ok := ra[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	chainRank := map[string]int{"FORWARD": 0, "INPUT": 1, "OUTPUT": 2, kubeproxy.ChainForward: 3, kubeproxy.ChainFirewall: 4}
	sort.SliceStable(keys, func(i, j int) bool {
		ci, cj := strings.SplitN(keys[i], "\x00", 2)[0], strings.SplitN(keys[j], "\x00", 2)[0]
		if chainRank[ci] != chainRank[cj] {
			return chainRank[ci] < chainRank[cj]
		}
		return keys[i] < keys[j]
	})
	for _, k := range keys {
		d := FixedRuleDiff{Family: string(fam), What: "rule"}
		if f, ok := ra[k]; ok {
			d.Chain, d.A, d.RuleA = f.chain, f.words, f.rule
			d.Summary = fmt.Sprintf("%s: only A %s", f.chain, f.words)
		} else {
			f := rb[k]
			d.Chain, d.B, d.RuleB = f.chain, f.words, f.rule
			d.Summary = fmt.Sprintf("%s: only B %s", f.chain, f.words)
		}
		out = append(out, d)
	}
	return out
}

// String is the difference as a line of the text diff: "- KUBE-FORWARD
// drops …" (only A), "+ …" (only B), "! masquerade mark: A …, B …".
func (d FixedRuleDiff) String() string {
	switch {
	case d.What != "rule":
		return "! " + d.Summary
	case d.A != "":
		return "- " + d.Chain + " " + d.A
	default:
		return "+ " + d.Chain + " " + d.B
	}
}
