package kernelprobe

import (
	"math"
	"net/netip"
)

// An Outcome is what happened to a flow, without the flow: the unit of a
// Summary and of the evaluator's answer.
type Outcome struct {
	Verdict     string
	Endpoint    netip.AddrPort // zero for reject and drop
	Masqueraded bool
}

// String is "dnat 10.244.0.11:8080 masq", "accept 10.0.0.10:22",
// "reject", "drop".
func (o Outcome) String() string {
	s := o.Verdict
	if o.Endpoint.IsValid() {
		s += " " + o.Endpoint.String()
	}
	if o.Masqueraded {
		s += " masq"
	}
	return s
}

// Summarize counts observations per outcome.
func Summarize(obs []Observation) map[Outcome]int {
	out := map[Outcome]int{}
	for _, o := range obs {
		out[Outcome{o.Verdict, o.Endpoint, o.Masqueraded}]++
	}
	return out
}

// Counts turns a summary into counts per key (e.g. Outcome.String, or the
// endpoint alone), the form ChiSquare takes.
func Counts(sum map[Outcome]int, key func(Outcome) string) map[string]int {
	out := map[string]int{}
	for o, n := range sum {
		out[key(o)] += n
	}
	return out
}

// ChiSquare is Pearson's goodness-of-fit test of observed counts against
// expected probabilities (normalised to sum 1): the statistic and its
// p-value, the chance of a deviation at least this large if the kernel
// chose with exactly these probabilities. A share check over a few hundred
// flows passes when p is above a small threshold (0.001: a correct
// evaluator then fails one run in a thousand). A count under a key with
// probability 0 (or no key) gives +Inf and p 0; keys expected but never
// observed count as 0. With fewer than two possible keys, p is 1.
func ChiSquare(observed map[string]int, expected map[string]float64) (stat float64, p float64) {
	var total, sumP float64
	for _, n := range observed {
		total += float64(n)
	}
	for _, q := range expected {
		sumP += q
	}
	if total == 0 || sumP <= 0 {
		return 0, 1
	}
	for k, n := range observed {
		if n > 0 && expected[k] <= 0 {
			return math.Inf(1), 0
		}
	}
	df := -1
	for _, q := range expected {
		if q <= 0 {
			continue
		}
		df++
	}
	for k, q := range expected {
		if q <= 0 {
			continue
		}
		e := total * q / sumP
		d := float64(observed[k]) - e
		stat += d * d / e
	}
	return stat, ChiSquareP(stat, df)
}

// ChiSquareP is the chance a chi-square variable with df degrees of
// freedom is at least stat (1 for df < 1).
func ChiSquareP(stat float64, df int) float64 {
	if df < 1 {
		return 1
	}
	return gammaQ(float64(df)/2, stat/2)
}

// gammaQ is the regularised upper incomplete gamma function Q(a, x), the
// chi-square survival function at 2x with 2a degrees of freedom: a series
// below a+1, a continued fraction (modified Lentz) above (Numerical
// Recipes, 6.2).
func gammaQ(a, x float64) float64 {
	if x <= 0 {
		return 1
	}
	lg, _ := math.Lgamma(a)
	if x < a+1 {
		sum, term := 1/a, 1/a
		for n := 1; n < 1000; n++ {
			term *= x / (a + float64(n))
			sum += term
			if math.Abs(term) < math.Abs(sum)*1e-15 {
				break
			}
		}
		return 1 - sum*math.Exp(-x+a*math.Log(x)-lg)
	}
	const tiny = 1e-300
	b := x + 1 - a
	c := 1 / tiny
	d := 1 / b
	h := d
	for i := 1; i < 1000; i++ {
		an := -float64(i) * (float64(i) - a)
		b += 2
		d = an*d + b
		if math.Abs(d) < tiny {
			d = tiny
		}
		c = b + an/c
		if math.Abs(c) < tiny {
			c = tiny
		}
		d = 1 / d
		del := d * c
		h *= del
		if math.Abs(del-1) < 1e-15 {
			break
		}
	}
	return math.Exp(-x+a*math.Log(x)-lg) * h
}
