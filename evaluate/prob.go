package evaluate

import (
	"math/big"
	"strconv"
)

// Prob is an exact probability. iptables' statistic match compares 31
// random bits with the rule's value, so its shares are k/2^31; nftables'
// numgen gives 1/N: a branch's probability is a product of such
// fractions, and exact. A walk multiplies them at every fork, and most
// walks only ever want the rounded value (explain), so a Prob keeps the
// factors and their rounded product, and multiplies them out only when
// asked for the exact value (String, Cmp, Add, Complement). The zero Prob
// is 0. Probs are values: no method changes its receiver.
type Prob struct {
	f float64 // the value, rounded
	// The exact value: the product of factors (when set), else num/den
	// (when num is set), else 0 or 1 as f says.
	factors  *factor
	num, den *big.Int
}

// factor is one fraction of a product, a list shared by the branches
// that forked from it.
type factor struct {
	n, d uint64
	next *factor
}

var bigOne = big.NewInt(1)

// One is the probability 1.
func One() Prob { return Prob{f: 1} }

// Fraction is n/d (0 < d, n ≤ d).
func Fraction(n, d uint64) Prob {
	switch {
	case n == 0 || d == 0:
		return Prob{}
	case n >= d:
		return One()
	}
	return Prob{f: float64(n) / float64(d), factors: &factor{n: n, d: d}}
}

// exact is p as num/den (den > 0).
func (p Prob) exact() (num, den *big.Int) {
	switch {
	case p.num != nil:
		return p.num, p.den
	case p.factors != nil:
		num, den = big.NewInt(1), big.NewInt(1)
		var n, d big.Int
		for f := p.factors; f != nil; f = f.next {
			num.Mul(num, n.SetUint64(f.n))
			den.Mul(den, d.SetUint64(f.d))
		}
		return twos(num, den)
	case p.f == 1:
		return big.NewInt(1), big.NewInt(1)
	}
	return new(big.Int), big.NewInt(1)
}

// fromExact is num/den as a Prob.
func fromExact(num, den *big.Int) Prob {
	if num.Sign() == 0 {
		return Prob{}
	}
	num, den = twos(num, den)
	if num.Cmp(den) == 0 {
		return One()
	}
	f, _ := new(big.Float).SetPrec(64).Quo(new(big.Float).SetInt(num), new(big.Float).SetInt(den)).Float64()
	return Prob{f: f, num: num, den: den}
}

// twos cancels the powers of two num and den share (the whole reduction
// for iptables' k/2^31 shares), in new ints.
func twos(num, den *big.Int) (*big.Int, *big.Int) {
	k := min(num.TrailingZeroBits(), den.TrailingZeroBits())
	if k == 0 {
		return num, den
	}
	return new(big.Int).Rsh(num, k), new(big.Int).Rsh(den, k)
}

// IsZero reports p == 0.
func (p Prob) IsZero() bool {
	if p.num != nil {
		return p.num.Sign() == 0
	}
	return p.factors == nil && p.f == 0
}

// IsOne reports p == 1 (a product of fractions below 1 never is).
func (p Prob) IsOne() bool {
	if p.num != nil {
		return p.num.Cmp(p.den) == 0
	}
	return p.factors == nil && p.f == 1
}

// Mul is p·q.
func (p Prob) Mul(q Prob) Prob {
	switch {
	case p.IsZero() || q.IsZero():
		return Prob{}
	case p.IsOne():
		return q
	case q.IsOne():
		return p
	}
	if p.num == nil && q.num == nil {
		// both products: q's factors on top of p's (q is one fraction,
		// mostly: a statistic rule's, a numgen's)
		out := Prob{f: p.f * q.f, factors: p.factors}
		for f := q.factors; f != nil; f = f.next {
			out.factors = &factor{n: f.n, d: f.d, next: out.factors}
		}
		return out
	}
	pn, pd := p.exact()
	qn, qd := q.exact()
	return fromExact(new(big.Int).Mul(pn, qn), new(big.Int).Mul(pd, qd))
}

// Add is p+q.
func (p Prob) Add(q Prob) Prob {
	if p.IsZero() {
		return q
	}
	if q.IsZero() {
		return p
	}
	pn, pd := p.exact()
	qn, qd := q.exact()
	if pd.Cmp(qd) == 0 {
		return fromExact(new(big.Int).Add(pn, qn), pd)
	}
	a := new(big.Int).Mul(pn, qd)
	a.Add(a, new(big.Int).Mul(qn, pd))
	return fromExact(a, new(big.Int).Mul(pd, qd))
}

// Complement is 1-p.
func (p Prob) Complement() Prob {
	switch {
	case p.IsZero():
		return One()
	case p.IsOne():
		return Prob{}
	case p.num == nil && p.factors.next == nil:
		return Fraction(p.factors.d-p.factors.n, p.factors.d)
	}
	n, d := p.exact()
	return fromExact(new(big.Int).Sub(d, n), d)
}

// Cmp compares p and q: -1, 0 or +1.
func (p Prob) Cmp(q Prob) int {
	pn, pd := p.exact()
	qn, qd := q.exact()
	return new(big.Int).Mul(pn, qd).Cmp(new(big.Int).Mul(qn, pd))
}

// Float64 is p, rounded.
func (p Prob) Float64() float64 { return p.f }

// Rat is p as a reduced big.Rat.
func (p Prob) Rat() *big.Rat {
	n, d := p.exact()
	return new(big.Rat).SetFrac(n, d)
}

// String is the reduced fraction ("1/3", "1", "0").
func (p Prob) String() string {
	r := p.Rat()
	if r.IsInt() {
		return r.Num().String()
	}
	return r.String()
}

// Percent is p as a percentage for people: "33.3%", "<0.1%" for a share
// that is not 0 but rounds to it, "100%".
func (p Prob) Percent() string {
	f := p.f * 100
	switch {
	case p.IsZero():
		return "0%"
	case p.IsOne():
		return "100%"
	case f < 0.05:
		return "<0.1%"
	case f > 99.95:
		return ">99.9%"
	}
	return strconv.FormatFloat(f, 'f', 1, 64) + "%"
}

// MarshalJSON writes p as a number between 0 and 1.
func (p Prob) MarshalJSON() ([]byte, error) {
	return strconv.AppendFloat(nil, p.f, 'g', 10, 64), nil
}

// statisticProb is the probability of iptables' `-m statistic --mode
// random --probability P`: the kernel keeps P as round(P·2^31) and matches
// when 31 random bits are below it (xt_statistic.c).
func statisticProb(p float64) Prob {
	if p <= 0 {
		return Prob{}
	}
	if p >= 1 {
		return One()
	}
	return Fraction(uint64(p*(1<<31)+0.5), 1<<31)
}
