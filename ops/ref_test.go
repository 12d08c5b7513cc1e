package ops

import (
	"bytes"
	"fmt"
	"math/big"
	"math/rand/v2"
)

// The reference: what each datatype is, written from the MPI standard and
// the x86-64 C ABI rather than from types.go, and a naive element-by-element
// model of each op on it (ieee_test.go for floats, math/big for integers).

// scalar is one number: a float of format f, or an integer of bits bits.
type scalar struct {
	f      *format
	bits   int
	signed bool
}

func (s scalar) bytes() int {
	if s.f != nil {
		return s.f.bits / 8
	}
	return s.bits / 8
}

// layout describes a datatype's element.
type layout struct {
	cls    string // int, float, complex, logical, byte, pair, none
	size   int    // bytes, padding included
	s      scalar // the number; the part of a complex; the value of a pair
	idx    scalar // the index of a pair
	idxOff int
}

func i(bits int) scalar   { return scalar{bits: bits, signed: true} }
func u(bits int) scalar   { return scalar{bits: bits} }
func fl(f *format) scalar { return scalar{f: f} }

func intL(s scalar) layout { return layout{cls: "int", size: s.bits / 8, s: s} }
func floatL(f *format, size int) layout {
	return layout{cls: "float", size: size, s: fl(f)}
}
func complexL(f *format, size int) layout {
	return layout{cls: "complex", size: size, s: fl(f)}
}
func pairL(v scalar, idx scalar, off, size int) layout {
	return layout{cls: "pair", size: size, s: v, idx: idx, idxOff: off}
}

var none1 = layout{cls: "none", size: 1}

// testLayouts: C types as gcc lays them out on x86-64 Linux (long 8, long
// double 16, wchar_t 4, struct padding), Fortran types as gfortran does
// (default INTEGER, REAL, LOGICAL 4 bytes; REAL*16 binary128).
var testLayouts = map[Type]layout{
	Char:                 none1,
	SignedChar:           intL(i(8)),
	UnsignedChar:         intL(u(8)),
	Byte:                 {cls: "byte", size: 1},
	WChar:                {cls: "none", size: 4},
	Short:                intL(i(16)),
	UnsignedShort:        intL(u(16)),
	Int:                  intL(i(32)),
	Unsigned:             intL(u(32)),
	Long:                 intL(i(64)),
	UnsignedLong:         intL(u(64)),
	LongLong:             intL(i(64)),
	UnsignedLongLong:     intL(u(64)),
	Float:                floatL(fmtF32, 4),
	Double:               floatL(fmtF64, 8),
	LongDouble:           floatL(fmtF80, 16),
	CBool:                {cls: "logical", size: 1, s: u(8)},
	Int8:                 intL(i(8)),
	Int16:                intL(i(16)),
	Int32:                intL(i(32)),
	Int64:                intL(i(64)),
	Uint8:                intL(u(8)),
	Uint16:               intL(u(16)),
	Uint32:               intL(u(32)),
	Uint64:               intL(u(64)),
	Aint:                 intL(i(64)),
	Offset:               intL(i(64)),
	Count:                intL(i(64)),
	CFloatComplex:        complexL(fmtF32, 8),
	CDoubleComplex:       complexL(fmtF64, 16),
	CLongDoubleComplex:   complexL(fmtF80, 32),
	CXXBool:              {cls: "logical", size: 1, s: u(8)},
	CXXFloatComplex:      complexL(fmtF32, 8),
	CXXDoubleComplex:     complexL(fmtF64, 16),
	CXXLongDoubleComplex: complexL(fmtF80, 32),
	Packed:               none1,
	Character:            none1,
	Logical:              {cls: "logical", size: 4, s: u(32)},
	Integer:              intL(i(32)),
	Real:                 floatL(fmtF32, 4),
	DoublePrecision:      floatL(fmtF64, 8),
	Complex:              complexL(fmtF32, 8),
	DoubleComplex:        complexL(fmtF64, 16),
	Integer1:             intL(i(8)),
	Integer2:             intL(i(16)),
	Integer4:             intL(i(32)),
	Integer8:             intL(i(64)),
	Integer16:            intL(i(128)),
	Real2:                floatL(fmtF16, 2),
	Real4:                floatL(fmtF32, 4),
	Real8:                floatL(fmtF64, 8),
	Real16:               floatL(fmtF128, 16),
	Complex4:             complexL(fmtF16, 4),
	Complex8:             complexL(fmtF32, 8),
	Complex16:            complexL(fmtF64, 16),
	Complex32:            complexL(fmtF128, 32),
	FloatInt:             pairL(fl(fmtF32), i(32), 4, 8),
	DoubleInt:            pairL(fl(fmtF64), i(32), 8, 16),
	LongInt:              pairL(i(64), i(32), 8, 16),
	TwoInt:               pairL(i(32), i(32), 4, 8),
	ShortInt:             pairL(i(16), i(32), 4, 8),
	LongDoubleInt:        pairL(fl(fmtF80), i(32), 16, 32),
	TwoReal:              pairL(fl(fmtF32), fl(fmtF32), 4, 8),
	TwoDoublePrecision:   pairL(fl(fmtF64), fl(fmtF64), 8, 16),
	TwoInteger:           pairL(i(32), i(32), 4, 8),
	Float16:              floatL(fmtF16, 2),
	BFloat16:             floatL(fmtBF16, 2),
}

// want is the expectation for some bytes of an element: equal to bytes, or
// (nanAny) any NaN of format f.
type want struct {
	off    int
	bytes  []byte
	nanAny bool
	f      *format
}

func (w want) check(elem []byte) bool {
	if w.nanAny {
		return w.f.decode(elem[w.off:]).nan
	}
	return bytes.Equal(elem[w.off:w.off+len(w.bytes)], w.bytes)
}

func (w want) String() string {
	if w.nanAny {
		return fmt.Sprintf("@%d: any NaN", w.off)
	}
	return fmt.Sprintf("@%d: % x", w.off, w.bytes)
}

// refElement returns what op gives on elements x and y of layout l.
func refElement(op Op, l layout, x, y []byte) []want {
	switch l.cls {
	case "int":
		return []want{{bytes: refInt(op, l.s, x, y)}}
	case "logical":
		return []want{{bytes: refLogical(op, l.s, x, y)}}
	case "byte":
		return []want{{bytes: refBitwise(op, x[:1], y[:1])}}
	case "float":
		return []want{refFloat(op, l.s.f, x, y, 0)}
	case "complex":
		return refComplex(op, l, x, y)
	case "pair":
		return refPair(op, l, x, y)
	}
	panic("no reference for " + l.cls)
}

func decodeInt(s scalar, raw []byte) *big.Int {
	v := bitsOf(raw[:s.bits/8])
	if s.signed && v.Bit(s.bits-1) == 1 {
		v.Sub(v, new(big.Int).Lsh(big.NewInt(1), uint(s.bits)))
	}
	return v
}

// encodeInt writes v modulo 2^bits, which is two's complement wrap-around.
func encodeInt(s scalar, v *big.Int) []byte {
	m := new(big.Int).Lsh(big.NewInt(1), uint(s.bits))
	r := new(big.Int).Mod(v, m) // Euclidean: in [0, m)
	raw := make([]byte, s.bits/8)
	putBits(raw, r)
	return raw
}

func refInt(op Op, s scalar, x, y []byte) []byte {
	a, b := decodeInt(s, x), decodeInt(s, y)
	truth := func(v bool) *big.Int {
		if v {
			return big.NewInt(1)
		}
		return big.NewInt(0)
	}
	switch op {
	case Sum:
		return encodeInt(s, new(big.Int).Add(a, b))
	case Prod:
		return encodeInt(s, new(big.Int).Mul(a, b))
	case Max:
		if a.Cmp(b) >= 0 {
			return encodeInt(s, a)
		}
		return encodeInt(s, b)
	case Min:
		if a.Cmp(b) <= 0 {
			return encodeInt(s, a)
		}
		return encodeInt(s, b)
	case Land:
		return encodeInt(s, truth(a.Sign() != 0 && b.Sign() != 0))
	case Lor:
		return encodeInt(s, truth(a.Sign() != 0 || b.Sign() != 0))
	case Lxor:
		return encodeInt(s, truth((a.Sign() != 0) != (b.Sign() != 0)))
	}
	return refBitwise(op, x[:s.bits/8], y[:s.bits/8])
}

func refLogical(op Op, s scalar, x, y []byte) []byte {
	return refInt(op, s, x, y) // the same rules: non-zero is true, 1 or 0
}

func refBitwise(op Op, x, y []byte) []byte {
	r := make([]byte, len(x))
	for i := range r {
		switch op {
		case Band:
			r[i] = x[i] & y[i]
		case Bor:
			r[i] = x[i] | y[i]
		case Bxor:
			r[i] = x[i] ^ y[i]
		default:
			panic("not bitwise: " + op.String())
		}
	}
	return r
}

// floatWant turns a model value into an expectation: a NaN from MPI_SUM or
// MPI_PROD may be any NaN (the hardware picks), from MPI_MAX or MPI_MIN it
// is the canonical one.
func floatWant(op Op, f *format, r xf, off int) want {
	if r.nan && (op == Sum || op == Prod) {
		return want{off: off, nanAny: true, f: f}
	}
	return want{off: off, bytes: f.encode(r)}
}

func refFloat(op Op, f *format, x, y []byte, off int) want {
	a, b := f.decode(x[off:]), f.decode(y[off:])
	var r xf
	switch op {
	case Sum:
		r = f.add(a, b)
	case Prod:
		r = f.mul(a, b)
	case Max:
		r = maxXF(a, b)
	case Min:
		r = minXF(a, b)
	default:
		panic("not a float op: " + op.String())
	}
	return floatWant(op, f, r, off)
}

// refComplex: MPI_SUM adds the parts; MPI_PROD is (ac-bd) + (ad+bc)i, each
// product and each sum rounded, in float32 for binary16 parts and rounded
// to binary16 at the end (as documented in kernels_half.go).
func refComplex(op Op, l layout, x, y []byte) []want {
	f := l.s.f
	part := l.size / 2
	if op == Sum {
		return []want{refFloat(Sum, f, x, y, 0), refFloat(Sum, f, x, y, part)}
	}
	g := f // the format of the intermediate results
	if f == fmtF16 {
		g = fmtF32
	}
	a, b := f.decode(x), f.decode(x[part:])
	c, d := f.decode(y), f.decode(y[part:])
	re := g.sub(g.mul(a, c), g.mul(b, d))
	im := g.add(g.mul(a, d), g.mul(b, c))
	return []want{floatWant(op, f, f.round(re), 0), floatWant(op, f, f.round(im), part)}
}

// refPair: MPI_MAXLOC keeps the larger value and its index, the smaller
// index on equal values; a NaN value wins over numbers and is written as
// the canonical NaN; +0 equals -0 and the value kept is MPI_MAX's.
// MPI_MINLOC mirrors it (a NaN still wins).
func refPair(op Op, l layout, x, y []byte) []want {
	vb := l.s.bytes()
	valueBytes := func(v []byte) []byte { return v[:vb] }
	var xnan, ynan bool
	var c int
	var xv, yv xf
	if l.s.f != nil {
		xv, yv = l.s.f.decode(x), l.s.f.decode(y)
		xnan, ynan = xv.nan, yv.nan
		if !xnan && !ynan {
			c = cmpXF(xv, yv)
		}
	} else {
		c = decodeInt(l.s, x).Cmp(decodeInt(l.s, y))
	}
	minIdx := func() []byte {
		ix, iy := x[l.idxOff:l.idxOff+l.idx.bytes()], y[l.idxOff:l.idxOff+l.idx.bytes()]
		if l.idx.f != nil {
			if cmpXF(l.idx.f.decode(ix), l.idx.f.decode(iy)) <= 0 {
				return ix
			}
			return iy
		}
		if decodeInt(l.idx, ix).Cmp(decodeInt(l.idx, iy)) <= 0 {
			return ix
		}
		return iy
	}
	var value, index []byte
	switch {
	case xnan || ynan:
		value = l.s.f.canonicalNaN()
		switch {
		case !ynan:
			index = x[l.idxOff : l.idxOff+l.idx.bytes()]
		case !xnan:
			index = y[l.idxOff : l.idxOff+l.idx.bytes()]
		default:
			index = minIdx()
		}
	case c == 0:
		index = minIdx()
		value = valueBytes(x)
		if l.s.f != nil {
			if op == Maxloc {
				value = l.s.f.encode(maxXF(xv, yv))
			} else {
				value = l.s.f.encode(minXF(xv, yv))
			}
		}
	case (c > 0) == (op == Maxloc):
		value, index = valueBytes(x), x[l.idxOff:l.idxOff+l.idx.bytes()]
	default:
		value, index = valueBytes(y), y[l.idxOff:l.idxOff+l.idx.bytes()]
	}
	return []want{{off: 0, bytes: value}, {off: l.idxOff, bytes: index}}
}

// Random elements, biased towards the cases that break kernels: extremes,
// signed zeros, NaNs, infinities, subnormals, ties.

func genElement(r *rand.Rand, l layout) []byte {
	e := make([]byte, l.size)
	for i := range e {
		e[i] = byte(r.Uint32()) // padding: garbage
	}
	switch l.cls {
	case "int":
		copy(e, genInt(r, l.s))
	case "logical":
		copy(e, make([]byte, l.size))
		switch r.IntN(4) {
		case 1:
			e[0] = 1
		case 2:
			e[l.size-1] = byte(1 << r.IntN(8)) // true, low byte zero for LOGICAL
		case 3:
			e[0] = byte(r.Uint32())
		}
	case "byte":
	case "float":
		copy(e, genFloat(r, l.s.f))
	case "complex":
		copy(e, genFloat(r, l.s.f))
		copy(e[l.size/2:], genFloat(r, l.s.f))
	case "pair":
		if l.s.f != nil {
			copy(e, genSmallFloat(r, l.s.f))
		} else {
			copy(e, encodeInt(l.s, big.NewInt(int64(r.IntN(7)-3))))
			if r.IntN(4) == 0 {
				copy(e, genInt(r, l.s))
			}
		}
		if l.idx.f != nil {
			copy(e[l.idxOff:], l.idx.f.encode(fromSigned(big.NewFloat(float64(r.IntN(5))), false)))
		} else {
			copy(e[l.idxOff:], encodeInt(l.idx, big.NewInt(int64(r.IntN(5)))))
		}
	}
	return e
}

func genInt(r *rand.Rand, s scalar) []byte {
	one := big.NewInt(1)
	top := new(big.Int).Lsh(one, uint(s.bits-1)) // 2^(bits-1)
	var v *big.Int
	switch r.IntN(5) {
	case 0: // small
		v = big.NewInt(int64(r.IntN(21) - 10))
	case 1: // near the top of the unsigned range or the signed extremes
		v = new(big.Int).Sub(new(big.Int).Lsh(top, 1), big.NewInt(int64(r.IntN(3)+1)))
	case 2:
		v = new(big.Int).Add(top, big.NewInt(int64(r.IntN(5)-2)))
	default: // uniform bits
		raw := make([]byte, s.bits/8)
		for i := range raw {
			raw[i] = byte(r.Uint32())
		}
		return raw
	}
	return encodeInt(s, v)
}

// genFloat returns a random value of f: any bit pattern for the 16-bit
// formats, else mostly finite numbers of moderate exponent, with specials.
func genFloat(r *rand.Rand, f *format) []byte {
	switch r.IntN(10) {
	case 0:
		return genSpecial(r, f)
	case 1:
		return genSmallFloat(r, f)
	}
	if f.bits == 16 {
		return []byte{byte(r.Uint32()), byte(r.Uint32())}
	}
	// A random significand, an exponent within +-span of 0, rarely a
	// subnormal.
	span := 40
	if r.IntN(8) == 0 {
		span = f.emax
	}
	sig := bitsOf(randomBytes(r, (f.p+7)/8))
	sig.And(sig, new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), uint(f.p)), big.NewInt(1)))
	sig.SetBit(sig, f.p-1, 1)
	e := r.IntN(2*span+1) - span
	if r.IntN(16) == 0 {
		e = f.emin() - 1 - r.IntN(f.p-1) // subnormal
	}
	v := newMag().SetInt(sig)
	v.SetMantExp(v, e-(f.p-1))
	x := f.round(xf{neg: r.IntN(2) == 0, mag: v})
	return f.encode(x)
}

// genSmallFloat returns one of a few small values, so that equal values,
// exact results and signed zeros come up often.
func genSmallFloat(r *rand.Rand, f *format) []byte {
	vals := []float64{0, 1, 2, 3, 0.5, 1.5, -1, -2}
	x := fromSigned(big.NewFloat(vals[r.IntN(len(vals))]), r.IntN(2) == 0)
	if r.IntN(8) == 0 {
		return genSpecial(r, f)
	}
	return f.encode(x)
}

func genSpecial(r *rand.Rand, f *format) []byte {
	switch r.IntN(4) {
	case 0:
		return f.encode(xf{inf: true, neg: r.IntN(2) == 0})
	case 1: // a NaN with a random payload, quiet or signalling
		raw := f.canonicalNaN()
		v := bitsOf(raw)
		for i := 0; i < f.fracBits()-2; i++ {
			v.SetBit(v, i, uint(r.IntN(2)))
		}
		v.SetBit(v, f.bits-1, uint(r.IntN(2)))
		if r.IntN(2) == 0 { // signalling: quiet bit clear, payload non-zero
			q := f.fracBits() - 1
			if f.explicit {
				q--
			}
			v.SetBit(v, q, 0)
			v.SetBit(v, 0, 1)
		}
		putBits(raw, v)
		return raw
	}
	return f.encode(xf{neg: r.IntN(2) == 0, mag: newMag()})
}

func randomBytes(r *rand.Rand, n int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(r.Uint32())
	}
	return p
}
