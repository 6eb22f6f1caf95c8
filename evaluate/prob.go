package evaluate

import (
	"math/big"
	"strconv"
)

// Prob is an exact probability, a fraction num/den. iptables' statistic
// match compares 31 random bits with the rule's value, so its shares are
// k/2^31; nftables' numgen gives 1/N: both are exact fractions, and a
// cascade of them multiplies out exactly. Only powers of two are cancelled
// as it goes (a GCD per step would dominate a long cascade); String
// reduces fully. The zero Prob is 0. Probs are values: no method changes
// its receiver.
type Prob struct {
	num, den *big.Int // den > 0; nil num means 0, nil den means 1
}

var bigOne = big.NewInt(1)

// One is the probability 1.
func One() Prob { return Prob{num: bigOne} }

// Fraction is n/d (d > 0).
func Fraction(n, d uint64) Prob {
	return Prob{num: new(big.Int).SetUint64(n), den: new(big.Int).SetUint64(d)}.twos()
}

func (p Prob) n() *big.Int {
	if p.num == nil {
		return new(big.Int)
	}
	return p.num
}

func (p Prob) d() *big.Int {
	if p.den == nil {
		return bigOne
	}
	return p.den
}

// IsZero reports p == 0.
func (p Prob) IsZero() bool { return p.num == nil || p.num.Sign() == 0 }

// IsOne reports p == 1.
func (p Prob) IsOne() bool { return !p.IsZero() && p.n().Cmp(p.d()) == 0 }

// Mul is p·q.
func (p Prob) Mul(q Prob) Prob {
	if p.IsZero() || q.IsZero() {
		return Prob{}
	}
	if p.IsOne() {
		return q
	}
	if q.IsOne() {
		return p
	}
	return Prob{num: new(big.Int).Mul(p.n(), q.n()), den: new(big.Int).Mul(p.d(), q.d())}.twos()
}

// Add is p+q.
func (p Prob) Add(q Prob) Prob {
	if p.IsZero() {
		return q
	}
	if q.IsZero() {
		return p
	}
	if p.d().Cmp(q.d()) == 0 {
		return Prob{num: new(big.Int).Add(p.n(), q.n()), den: p.d()}.twos()
	}
	a := new(big.Int).Mul(p.n(), q.d())
	a.Add(a, new(big.Int).Mul(q.n(), p.d()))
	return Prob{num: a, den: new(big.Int).Mul(p.d(), q.d())}.twos()
}

// Complement is 1-p.
func (p Prob) Complement() Prob {
	if p.IsZero() {
		return One()
	}
	return Prob{num: new(big.Int).Sub(p.d(), p.n()), den: p.d()}.twos()
}

// twos cancels the powers of two num and den share.
func (p Prob) twos() Prob {
	if p.num == nil || p.num.Sign() == 0 {
		return Prob{}
	}
	if p.den == nil {
		return p
	}
	k := min(p.num.TrailingZeroBits(), p.den.TrailingZeroBits())
	if k > 0 {
		p.num = new(big.Int).Rsh(p.num, k)
		p.den = new(big.Int).Rsh(p.den, k)
	}
	if p.den.Cmp(bigOne) == 0 {
		p.den = nil
	}
	return p
}

// Cmp compares p and q: -1, 0 or +1.
func (p Prob) Cmp(q Prob) int {
	a := new(big.Int).Mul(p.n(), q.d())
	b := new(big.Int).Mul(q.n(), p.d())
	return a.Cmp(b)
}

// Float64 is p, rounded.
func (p Prob) Float64() float64 {
	if p.IsZero() {
		return 0
	}
	f, _ := new(big.Float).SetPrec(64).Quo(new(big.Float).SetInt(p.n()), new(big.Float).SetInt(p.d())).Float64()
	return f
}

// Rat is p as a reduced big.Rat.
func (p Prob) Rat() *big.Rat { return new(big.Rat).SetFrac(p.n(), p.d()) }

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
	f := p.Float64() * 100
	switch {
	case p.IsZero():
		return "0%"
	case f < 0.05:
		return "<0.1%"
	case p.IsOne():
		return "100%"
	case f > 99.95:
		return ">99.9%"
	}
	return strconv.FormatFloat(f, 'f', 1, 64) + "%"
}

// MarshalJSON writes p as a number between 0 and 1.
func (p Prob) MarshalJSON() ([]byte, error) {
	return strconv.AppendFloat(nil, p.Float64(), 'g', 10, 64), nil
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
