package coll_test

import (
	"encoding/binary"
	"math"
	"math/rand/v2"

	"github.com/gocoll/gocoll/ops"
)

// repr is how a test writes values of a datatype.
type repr int

const (
	rInt  repr = iota // any bit pattern is a value
	rBool             // 0, 1 or another non-zero
	rF16              // IEEE binary16
	rBF16             // bfloat16
	rF32              //
	rF64              //
	rF80              // x87 extended in 16 bytes (10 significant)
	rF128             // IEEE binary128
	rPair             // value then index, see pairLayout
	rNone             // no op: allgather only
)

// layout returns the representation of t and, for complex and pair types,
// the representation of its parts.
func layout(t ops.Type) (r repr, part repr) {
	switch t {
	case ops.CBool, ops.CXXBool, ops.Logical:
		return rBool, 0
	case ops.Float16, ops.Real2:
		return rF16, 0
	case ops.BFloat16:
		return rBF16, 0
	case ops.Float, ops.Real, ops.Real4:
		return rF32, 0
	case ops.Double, ops.DoublePrecision, ops.Real8:
		return rF64, 0
	case ops.LongDouble:
		return rF80, 0
	case ops.Real16:
		return rF128, 0
	case ops.Complex4:
		return rF16, rF16
	case ops.CFloatComplex, ops.CXXFloatComplex, ops.Complex, ops.Complex8:
		return rF32, rF32
	case ops.CDoubleComplex, ops.CXXDoubleComplex, ops.DoubleComplex, ops.Complex16:
		return rF64, rF64
	case ops.CLongDoubleComplex, ops.CXXLongDoubleComplex:
		return rF80, rF80
	case ops.Complex32:
		return rF128, rF128
	case ops.FloatInt, ops.DoubleInt, ops.LongInt, ops.TwoInt, ops.ShortInt, ops.LongDoubleInt,
		ops.TwoReal, ops.TwoDoublePrecision, ops.TwoInteger:
		return rPair, 0
	case ops.Char, ops.WChar, ops.Packed, ops.Character:
		return rNone, 0
	}
	return rInt, 0
}

// pair describes a MAXLOC/MINLOC type: value at 0 with valSize bytes in
// representation val, index at idxOff in representation idx.
type pair struct {
	val            repr
	valSize        int
	idx            repr
	idxOff, idxLen int
}

func pairLayout(t ops.Type) pair {
	switch t {
	case ops.FloatInt:
		return pair{rF32, 4, rInt, 4, 4}
	case ops.DoubleInt:
		return pair{rF64, 8, rInt, 8, 4}
	case ops.LongInt:
		return pair{rInt, 8, rInt, 8, 4}
	case ops.TwoInt, ops.TwoInteger:
		return pair{rInt, 4, rInt, 4, 4}
	case ops.ShortInt:
		return pair{rInt, 2, rInt, 4, 4}
	case ops.LongDoubleInt:
		return pair{rF80, 16, rInt, 16, 4}
	case ops.TwoReal:
		return pair{rF32, 4, rF32, 4, 4}
	case ops.TwoDoublePrecision:
		return pair{rF64, 8, rF64, 8, 8}
	}
	panic("not a pair type: " + t.String())
}

// significant returns a mask of the bytes of one element of t that hold
// data (not padding), so that results compare exactly where it matters.
func significant(t ops.Type) []bool {
	m := make([]bool, t.Size())
	set := func(off, n int) {
		for i := off; i < off+n; i++ {
			m[i] = true
		}
	}
	r, part := layout(t)
	switch {
	case r == rPair:
		pl := pairLayout(t)
		set(0, min(pl.valSize, 10))
		if pl.val == rInt {
			set(0, pl.valSize)
		}
		set(pl.idxOff, pl.idxLen)
	case r == rF80 && part == rF80:
		set(0, 10)
		set(16, 10)
	case r == rF80:
		set(0, 10)
	default:
		set(0, len(m))
	}
	return m
}

// exactFloat returns a float64 that every float format of the tests holds
// exactly and whose combinations with op stay exact: small integers for
// sums and comparisons, powers of two for products.
func exactFloat(op ops.Op, r repr, rng *rand.Rand) float64 {
	switch {
	case op == ops.Prod && r == rF16: // binary16 overflows at 2^16
		return []float64{1, -1}[rng.IntN(2)]
	case op == ops.Prod:
		return []float64{1, -1, 2, 0.5, 1, -2}[rng.IntN(6)]
	}
	switch op {
	case ops.Max, ops.Min, ops.Maxloc, ops.Minloc:
		return []float64{0, math.Copysign(0, -1), 3, -5, 7, 1, 3}[rng.IntN(7)]
	}
	return float64(rng.IntN(17) - 8)
}

// putFloat writes v (exactly representable) in representation r.
func putFloat(b []byte, r repr, v float64) {
	switch r {
	case rF16:
		binary.LittleEndian.PutUint16(b, f16bits(v))
	case rBF16:
		binary.LittleEndian.PutUint16(b, uint16(math.Float32bits(float32(v))>>16))
	case rF32:
		binary.LittleEndian.PutUint32(b, math.Float32bits(float32(v)))
	case rF64:
		binary.LittleEndian.PutUint64(b, math.Float64bits(v))
	case rF80:
		putF80(b, v)
	case rF128:
		putF128(b, v)
	}
}

// f16bits encodes a small integer or power of two as binary16.
func f16bits(v float64) uint16 {
	bits := math.Float64bits(v)
	sign := uint16(bits>>48) & 0x8000
	if v == 0 {
		return sign
	}
	exp := int(bits>>52&0x7ff) - 1023
	frac := bits & (1<<52 - 1)
	return sign | uint16(exp+15)<<10 | uint16(frac>>42)
}

// putF80 encodes a float64 as x87 extended precision (exact).
func putF80(b []byte, v float64) {
	clear(b[:16])
	bits := math.Float64bits(v)
	sign := uint16(bits>>48) & 0x8000
	if v == 0 {
		binary.LittleEndian.PutUint16(b[8:], sign)
		return
	}
	exp := int(bits>>52&0x7ff) - 1023
	mant := 1<<63 | (bits&(1<<52-1))<<11
	binary.LittleEndian.PutUint64(b, mant)
	binary.LittleEndian.PutUint16(b[8:], sign|uint16(exp+16383))
}

// putF128 encodes a float64 as IEEE binary128 (exact).
func putF128(b []byte, v float64) {
	clear(b[:16])
	bits := math.Float64bits(v)
	sign := uint64(bits>>48) & 0x8000
	if v == 0 {
		binary.LittleEndian.PutUint64(b[8:], sign<<48)
		return
	}
	exp := uint64(int(bits>>52&0x7ff) - 1023 + 16383)
	frac := bits & (1<<52 - 1) // top 52 of the 112 fraction bits
	hi := sign<<48 | exp<<48 | frac>>4
	lo := frac << 60
	binary.LittleEndian.PutUint64(b, lo)
	binary.LittleEndian.PutUint64(b[8:], hi)
}

// fill writes n random elements of t, suited to op, into b.
func fill(b []byte, t ops.Type, op ops.Op, rng *rand.Rand) {
	size := t.Size()
	r, part := layout(t)
	for e := 0; e < len(b)/size; e++ {
		el := b[e*size : (e+1)*size]
		switch {
		case r == rInt || r == rNone:
			for i := range el {
				el[i] = byte(rng.Uint32())
			}
		case r == rBool:
			clear(el)
			el[0] = []byte{0, 1, 0, 1, 7}[rng.IntN(5)]
		case r == rPair:
			clear(el)
			pl := pairLayout(t)
			v := float64(rng.IntN(5) - 2) // ties are likely: MAXLOC breaks them on the index
			if pl.val == rInt {
				for i := 0; i < pl.valSize; i++ {
					el[i] = byte(int64(v) >> (8 * i))
				}
			} else {
				putFloat(el, pl.val, v)
			}
			idx := float64(rng.IntN(1000))
			if pl.idx == rInt {
				binary.LittleEndian.PutUint32(el[pl.idxOff:], uint32(idx))
			} else {
				putFloat(el[pl.idxOff:], pl.idx, idx)
			}
		case part != 0: // complex: real and imaginary parts
			half := size / 2
			re, im := exactFloat(op, part, rng), exactFloat(op, part, rng)
			if op == ops.Prod { // 1, -1, i, -i: products stay exact
				re, im = []float64{1, -1, 0, 0}[rng.IntN(4)], 0
				if re == 0 {
					im = []float64{1, -1}[rng.IntN(2)]
				}
			}
			putFloat(el, part, re)
			putFloat(el[half:], part, im)
		default:
			putFloat(el, r, exactFloat(op, r, rng))
		}
	}
}
