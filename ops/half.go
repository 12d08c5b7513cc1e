package ops

import "math"

// Conversions between float32 and the two 16-bit formats: IEEE binary16
// (1 sign, 5 exponent, 10 fraction bits) and bfloat16 (the top half of a
// float32: 1, 8, 7). Narrowing rounds to nearest, ties to even, and handles
// subnormals, infinities and NaNs (kept quiet, with what fits of the
// payload). float32 has more than twice the precision of either format plus
// two bits, so computing in float32 and rounding once gives the correctly
// rounded sum and product.

// f16ToF32 widens a binary16 to float32, exactly.
func f16ToF32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	frac := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f: // infinity or NaN
		return math.Float32frombits(sign | 0x7f80_0000 | frac<<13)
	case exp == 0 && frac == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal: frac * 2^-24, exact in float32
		f := float32(frac) * (1.0 / (1 << 24))
		if sign != 0 {
			f = -f
		}
		return f
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | frac<<13)
}

// f32ToF16 narrows a float32 to binary16, rounding to nearest even.
func f32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23) & 0xff
	frac := b & 0x7f_ffff
	if exp == 0xff {
		if frac != 0 {
			return sign | 0x7e00 | uint16(frac>>13) // quiet NaN
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15 // biased binary16 exponent
	if e >= 1 {
		// Normal range: keep 10 of the 23 fraction bits.
		h := uint32(e)<<10 | frac>>13
		rest := frac & 0x1fff
		if rest > 0x1000 || rest == 0x1000 && h&1 == 1 {
			h++ // may carry into the exponent, up to infinity: correct
		}
		if h >= 0x7c00 {
			return sign | 0x7c00
		}
		return sign | uint16(h)
	}
	// Subnormal or zero: the value in units of 2^-24 is m >> shift.
	if exp == 0 {
		return sign // float32 subnormals are far below 2^-25
	}
	m := frac | 0x80_0000
	shift := uint(14 - e) // 14 for e == 0, more below
	if shift > 25 {
		return sign
	}
	q := m >> shift
	rest := m & (1<<shift - 1)
	half := uint32(1) << (shift - 1)
	if rest > half || rest == half && q&1 == 1 {
		q++ // may reach 0x400, the smallest normal: correct
	}
	return sign | uint16(q)
}

// bf16ToF32 widens a bfloat16 to float32, exactly.
func bf16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// f32ToBF16 narrows a float32 to bfloat16, rounding to nearest even.
func f32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fff_ffff > 0x7f80_0000 {
		return uint16(b>>16) | 0x40 // quiet NaN
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

// Widening and narrowing whole buffers, for Reductions that accumulate
// 16-bit floats in float32: dst holds float32s, src the 16-bit values.

// widenF16 quiets signalling NaNs, as the F16C instruction does (the
// first operation on them would).
func widenF16(dst, src []byte) {
	d, s := view2[float32, uint16](dst, src)
	for i := range d {
		f := f16ToF32(s[i])
		if f != f {
			f = math.Float32frombits(math.Float32bits(f) | 0x40_0000)
		}
		d[i] = f
	}
}

func narrowF16(dst, src []byte) {
	d, s := view2[uint16, float32](dst, src)
	for i := range d {
		d[i] = f32ToF16(s[i])
	}
}

func widenBF16(dst, src []byte) {
	d, s := view2[uint32, uint16](dst, src)
	for i := range d {
		d[i] = uint32(s[i]) << 16
	}
}

func narrowBF16(dst, src []byte) {
	d, s := view2[uint16, float32](dst, src)
	for i := range d {
		d[i] = f32ToBF16(s[i])
	}
}

// Float16FromFloat32, Float16ToFloat32, BFloat16FromFloat32 and
// BFloat16ToFloat32 are the kernels' conversions (nearest even when
// narrowing; widening is exact), for tools and tests outside the package.
func Float16FromFloat32(f float32) uint16  { return f32ToF16(f) }
func Float16ToFloat32(h uint16) float32    { return f16ToF32(h) }
func BFloat16FromFloat32(f float32) uint16 { return f32ToBF16(f) }
func BFloat16ToFloat32(h uint16) float32   { return bf16ToF32(h) }

// Pairs of 16-bit floats combined into float32s, unrounded: a Reduction's
// first level, straight from two contributions.

func sumF16To32(dst, a, b []byte) {
	d, x := view2[float32, uint16](dst, a)
	_, y := view2[float32, uint16](dst, b)
	for i := range d {
		d[i] = f16ToF32(x[i]) + f16ToF32(y[i])
	}
}

func prodF16To32(dst, a, b []byte) {
	d, x := view2[float32, uint16](dst, a)
	_, y := view2[float32, uint16](dst, b)
	for i := range d {
		d[i] = f16ToF32(x[i]) * f16ToF32(y[i])
	}
}

func sumBF16To32(dst, a, b []byte) {
	d, x := view2[float32, uint16](dst, a)
	_, y := view2[float32, uint16](dst, b)
	for i := range d {
		d[i] = bf16ToF32(x[i]) + bf16ToF32(y[i])
	}
}

func prodBF16To32(dst, a, b []byte) {
	d, x := view2[float32, uint16](dst, a)
	_, y := view2[float32, uint16](dst, b)
	for i := range d {
		d[i] = bf16ToF32(x[i]) * bf16ToF32(y[i])
	}
}
