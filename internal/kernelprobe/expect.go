package kernelprobe

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
)

// Expect is what a model of the node's rules (the evaluator, trace) says
// new connections do, held against the kernel's flows by Fit and Compare.
type Expect struct {
	// Model names it in messages: "trace", "the evaluator".
	Model string
	// Shares of each outcome key (Key; with masquerade for pod and
	// outside flows: their masquerade shows in the reply tuple).
	Shares map[string]float64
	// Masq: per DNAT/accept key of a node flow, the share of it the model
	// masquerades (1, 0, or between); Showable: that masquerade is
	// random-fully, the one kind the node's own flows show (a new source
	// port).
	Masq     map[string]float64
	Showable map[string]bool
	// Exact are the shares as exact fractions, for logs; Summary is the
	// model's answer in its own words.
	Exact   map[string]string
	Summary string
}

func (ex Expect) String() string {
	var parts []string
	for _, k := range sortedKeys(ex.Exact) {
		parts = append(parts, k+": "+ex.Exact[k])
	}
	return ex.Model + " {" + strings.Join(parts, ", ") + "}"
}

// Key is an observation's outcome key, with its masquerade or without.
func Key(o Observation, withMasq bool) string {
	k := Outcome{Verdict: o.Verdict, Endpoint: o.Endpoint}
	k.Masqueraded = withMasq && o.Masqueraded
	return k.String()
}

// FlowsFor is how many flows hold a share check of ex: a few hundred for
// a split (300 over three ways or more: ±~15% per share at worst), fewer
// for one outcome, a handful for a drop (each waits its full time).
func FlowsFor(ex Expect) int {
	switch n := len(ex.Shares); {
	case n >= 3:
		return 300
	case n == 2:
		return 200
	}
	if _, ok := ex.Shares[Drop]; ok {
		return 8
	}
	return 20
}

// minSeen: an outcome the model expects this many times or more over the
// flows must be seen (a Poisson count of 10 is 0 one time in 22000).
const minSeen = 10

// Fit says whether the kernel's observations fit the model's shares:
// every kernel outcome among the model's, none expected minSeen times or
// more unseen, chi-square p ≥ 0.001. fatal: an outcome the model gives no
// share (a retry cannot mend that).
func Fit(obs []Observation, ex Expect, withMasq bool) (ok, fatal bool, msg string) {
	counts := map[string]int{}
	for _, o := range obs {
		counts[Key(o, withMasq)]++
	}
	stat, p := ChiSquare(counts, ex.Shares)
	var parts []string
	for _, k := range sortedKeys(counts) {
		parts = append(parts, fmt.Sprintf("%s: %d", k, counts[k]))
	}
	msg = fmt.Sprintf("%s, kernel over %d flows {%s}, chi-square %.2f p=%.4f", ex, len(obs), strings.Join(parts, ", "), stat, p)
	var problems []string
	for _, k := range sortedKeys(counts) {
		if ex.Shares[k] <= 0 {
			problems = append(problems, fmt.Sprintf("the kernel did %q (%d flows), which %s gives no share", k, counts[k], ex.Model))
			fatal = true
		}
	}
	for _, k := range sortedKeys(ex.Shares) {
		if e := ex.Shares[k] * float64(len(obs)); e >= minSeen && counts[k] == 0 {
			problems = append(problems, fmt.Sprintf("%s expects %q %.0f times, the kernel never did it", ex.Model, k, e))
		}
	}
	if p < 0.001 && !math.IsInf(stat, 1) {
		problems = append(problems, fmt.Sprintf("the split does not fit %s's shares (p=%.5f < 0.001)", ex.Model, p))
	}
	if len(problems) > 0 {
		msg += "; " + strings.Join(problems, "; ")
	}
	return len(problems) == 0, fatal, msg
}

// Compare sends flows (send(n); n 0 is FlowsFor) and holds them against
// ex: verdicts, endpoints, shares (chi-square, retried once on fresh flows
// when a right answer was merely unlucky: a right expectation then fails
// one run in a million) and, for the node's own flows, masquerade. It
// returns the last observations.
func Compare(t testing.TB, what string, ex Expect, nodeFlow bool, n int, send func(n int) []Observation) []Observation {
	t.Helper()
	if n == 0 {
		n = FlowsFor(ex)
	}
	var obs []Observation
	for try := 1; ; try++ {
		obs = send(n)
		ok, fatal, msg := Fit(obs, ex, !nodeFlow)
		t.Logf("%s: try %d: %s", what, try, msg)
		if ok {
			break
		}
		if fatal || try == 2 {
			t.Errorf("%s: the kernel disagrees with %s: %s\n%s:\n  %s", what, ex.Model, msg, ex.Model, ex.Summary)
			for _, o := range obs[:min(3, len(obs))] {
				t.Logf("  flow %d %v: %s %v errno=%v %s", o.Flow, o.Src, o.Verdict, o.Endpoint, o.Errno, o.Raw)
			}
			break
		}
	}
	if nodeFlow {
		CheckNodeMasq(t, what, ex, obs)
	}
	return obs
}

// CheckNodeMasq: the node's own flows leave from the egress address
// already, so a masquerade shows only as random-fully's new source port
// (the old one once in 64512): where the model masquerades random-fully,
// all flows but one (two of a hundred or more: that many keep their port
// once in ~10^5 checks) show it; where it does not masquerade, none does.
func CheckNodeMasq(t testing.TB, what string, ex Expect, obs []Observation) {
	t.Helper()
	total, masq := map[string]int{}, map[string]int{}
	for _, o := range obs {
		if o.Verdict != DNAT && o.Verdict != Accept {
			continue
		}
		k := Key(o, false)
		total[k]++
		if o.Masqueraded {
			masq[k]++
		}
	}
	for _, k := range sortedKeys(total) {
		n := total[k]
		m, ok := ex.Masq[k]
		switch {
		case !ok:
			// an outcome the model gives no share: reported by Fit
		case m == 0 && masq[k] != 0:
			t.Errorf("%s: %s: %d of %d node flows masqueraded (a new source port), %s masquerades none", what, k, masq[k], n, ex.Model)
		case m == 1 && ex.Showable[k] && masq[k] < n-missable(n):
			t.Errorf("%s: %s: %s masquerades random-fully, the kernel shows it on only %d of %d node flows", what, k, ex.Model, masq[k], n)
		case m == 1 && !ex.Showable[k]:
			t.Logf("%s: %s: masqueraded without random-fully: the node's own flows cannot show it", what, k)
		case m > 0 && m < 1:
			t.Errorf("%s: %s: %s masquerades %.3f of these flows; a flow's masquerade should not be random", what, k, ex.Model, m)
		}
	}
}

// missable is how many of n masqueraded node flows may keep their source
// port by chance.
func missable(n int) int {
	if n >= 100 {
		return 2
	}
	return 1
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
