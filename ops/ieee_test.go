package ops

import (
	"math/big"
)

// An independent model of IEEE binary floating point for the reference
// kernels: formats described by their parameters, values decoded from and
// encoded to bits with math/big, arithmetic done exactly and rounded to
// nearest even once, by big.Float. It shares no code with the kernels.

// format is a binary floating-point format.
type format struct {
	name     string
	p        int  // significand bits, the leading one included
	emax     int  // largest unbiased exponent; the bias too
	bits     int  // encoded bits
	explicit bool // the leading significand bit is stored (x87)
}

var (
	fmtF16  = &format{"binary16", 11, 15, 16, false}
	fmtBF16 = &format{"bfloat16", 8, 127, 16, false}
	fmtF32  = &format{"binary32", 24, 127, 32, false}
	fmtF64  = &format{"binary64", 53, 1023, 64, false}
	fmtF80  = &format{"x87 extended", 64, 16383, 80, true}
	fmtF128 = &format{"binary128", 113, 16383, 128, false}
)

func (f *format) emin() int { return 1 - f.emax }

func (f *format) fracBits() int {
	if f.explicit {
		return f.p
	}
	return f.p - 1
}

func (f *format) expBits() int { return f.bits - 1 - f.fracBits() }

// xf is a value of the model: a NaN, an infinity or a finite number (mag is
// the magnitude, exact); neg is the sign, zeros included.
type xf struct {
	nan, inf bool
	neg      bool
	mag      *big.Float
}

const exactPrec = 1 << 16 // enough for an exact sum of any two values here

func newMag() *big.Float { return new(big.Float).SetPrec(exactPrec) }

func (x xf) isZero() bool { return !x.nan && !x.inf && x.mag.Sign() == 0 }

// signed returns the finite value with its sign.
func (x xf) signed() *big.Float {
	v := newMag().Set(x.mag)
	if x.neg {
		v.Neg(v)
	}
	return v
}

func fromSigned(v *big.Float, zeroNeg bool) xf {
	if v.Sign() == 0 {
		return xf{neg: zeroNeg, mag: newMag()}
	}
	return xf{neg: v.Sign() < 0, mag: newMag().Abs(v)}
}

// bitsOf reads little-endian bytes as an unsigned integer.
func bitsOf(raw []byte) *big.Int {
	be := make([]byte, len(raw))
	for i, c := range raw {
		be[len(raw)-1-i] = c
	}
	return new(big.Int).SetBytes(be)
}

// putBits writes the low len(raw) bytes of v, little endian.
func putBits(raw []byte, v *big.Int) {
	be := v.FillBytes(make([]byte, 32))
	for i := range raw {
		raw[i] = be[len(be)-1-i]
	}
}

func field(v *big.Int, shift, width int) int64 {
	m := new(big.Int).Rsh(v, uint(shift))
	m.And(m, new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), uint(width)), big.NewInt(1)))
	return m.Int64()
}

// decode reads a value of format f from raw (at least f.bits/8 bytes).
func (f *format) decode(raw []byte) xf {
	v := bitsOf(raw[:f.bits/8])
	fb := f.fracBits()
	neg := v.Bit(f.bits-1) == 1
	exp := int(field(v, fb, f.expBits()))
	frac := new(big.Int).And(v, new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), uint(fb)), big.NewInt(1)))
	if exp == 1<<f.expBits()-1 {
		rest := new(big.Int).Set(frac)
		if f.explicit {
			rest.SetBit(rest, fb-1, 0)
		}
		if rest.Sign() == 0 {
			return xf{inf: true, neg: neg}
		}
		return xf{nan: true, neg: neg}
	}
	sig := new(big.Int).Set(frac)
	e := exp - f.emax // unbiased
	if exp == 0 {
		e = f.emin()
	} else if !f.explicit {
		sig.SetBit(sig, fb, 1)
	}
	// value = sig * 2^(e - (p-1))
	m := newMag().SetInt(sig)
	m.SetMantExp(m, e-(f.p-1))
	return xf{neg: neg, mag: m}
}

// canonicalNaN is the NaN the kernels' MPI_MAX and MPI_MIN return: positive,
// quiet, zero payload.
func (f *format) canonicalNaN() []byte {
	v := new(big.Int)
	for i := 0; i < f.expBits(); i++ {
		v.SetBit(v, f.fracBits()+i, 1)
	}
	v.SetBit(v, f.fracBits()-1, 1) // quiet bit
	if f.explicit {
		v.SetBit(v, f.fracBits()-2, 1)
	}
	raw := make([]byte, f.bits/8)
	putBits(raw, v)
	return raw
}

// encode writes x, which must be representable in f (rounded), and returns
// its bytes. A NaN is written as the canonical NaN.
func (f *format) encode(x xf) []byte {
	if x.nan {
		return f.canonicalNaN()
	}
	v := new(big.Int)
	fb := f.fracBits()
	setExp := func(e int) {
		v.Or(v, new(big.Int).Lsh(big.NewInt(int64(e)), uint(fb)))
	}
	switch {
	case x.inf:
		setExp(1<<f.expBits() - 1)
		if f.explicit {
			v.SetBit(v, fb-1, 1)
		}
	case x.mag.Sign() != 0:
		E := x.mag.MantExp(nil) - 1 // mag = 1.xxx * 2^E
		if E < f.emin() {
			E = f.emin() // subnormal: exponent field 0
		} else {
			setExp(E + f.emax)
		}
		s := newMag().SetMantExp(x.mag, f.p-1-E)
		sig, acc := s.Int(nil)
		if acc != big.Exact {
			panic("encode: value not representable in " + f.name)
		}
		if !f.explicit && x.mag.MantExp(nil)-1 >= f.emin() {
			sig.SetBit(sig, fb, 0)
		}
		v.Or(v, sig)
	}
	if x.neg {
		v.SetBit(v, f.bits-1, 1)
	}
	raw := make([]byte, f.bits/8)
	putBits(raw, v)
	return raw
}

// round rounds x to f, to nearest even, with gradual underflow and
// overflow to infinity; the sign of a zero result is the sign of x.
func (f *format) round(x xf) xf {
	if x.nan || x.inf || x.mag.Sign() == 0 {
		return x
	}
	E := x.mag.MantExp(nil) - 1
	prec := f.p
	if E < f.emin() {
		prec -= f.emin() - E
	}
	var r *big.Float
	switch {
	case prec >= 1:
		r = new(big.Float).SetMode(big.ToNearestEven).SetPrec(uint(prec)).Set(x.mag)
	case prec == 0: // in [tiny/2, tiny): the tie rounds to zero (even)
		tiny := new(big.Float).SetMantExp(big.NewFloat(1), f.emin()-(f.p-1))
		half := new(big.Float).SetMantExp(tiny, -1)
		r = new(big.Float)
		if x.mag.Cmp(half) > 0 {
			r = tiny
		}
	default:
		r = new(big.Float)
	}
	limit := new(big.Float).SetMantExp(big.NewFloat(1), f.emax+1)
	if r.Cmp(limit) >= 0 {
		return xf{inf: true, neg: x.neg}
	}
	return xf{neg: x.neg, mag: newMag().Set(r)}
}

// The exact operations, rounded to f.

func (f *format) add(x, y xf) xf {
	switch {
	case x.nan || y.nan || x.inf && y.inf && x.neg != y.neg:
		return xf{nan: true}
	case x.inf:
		return x
	case y.inf:
		return y
	}
	s := newMag().Add(x.signed(), y.signed())
	return f.round(fromSigned(s, x.neg && y.neg))
}

func (f *format) sub(x, y xf) xf {
	y.neg = !y.neg
	return f.add(x, y)
}

func (f *format) mul(x, y xf) xf {
	neg := x.neg != y.neg
	switch {
	case x.nan || y.nan || x.inf && y.isZero() || y.inf && x.isZero():
		return xf{nan: true}
	case x.inf || y.inf:
		return xf{inf: true, neg: neg}
	}
	return f.round(xf{neg: neg, mag: newMag().Mul(x.mag, y.mag)})
}

// cmp orders non-NaN values: -1, 0 or +1; +0 equals -0.
func cmpXF(x, y xf) int {
	key := func(v xf) (int, *big.Float) {
		switch {
		case v.inf && v.neg:
			return -1, nil
		case v.inf:
			return 1, nil
		}
		return 0, v.signed()
	}
	kx, vx := key(x)
	ky, vy := key(y)
	if kx != ky || kx != 0 {
		return kx - ky
	}
	return vx.Cmp(vy)
}

// maxXF is MPI_MAX: NaN if either is, +0 above -0.
func maxXF(x, y xf) xf {
	if x.nan || y.nan {
		return xf{nan: true}
	}
	switch c := cmpXF(x, y); {
	case c > 0:
		return x
	case c < 0:
		return y
	case x.isZero():
		return xf{neg: x.neg && y.neg, mag: newMag()}
	}
	return x
}

// minXF is MPI_MIN: NaN if either is, -0 below +0.
func minXF(x, y xf) xf {
	if x.nan || y.nan {
		return xf{nan: true}
	}
	switch c := cmpXF(x, y); {
	case c < 0:
		return x
	case c > 0:
		return y
	case x.isZero():
		return xf{neg: x.neg || y.neg, mag: newMag()}
	}
	return x
}
