package ops

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/big"
	"testing"

	"github.com/gocoll/gocoll/ops/internal/cfloat"
)

// Hand-picked cases, one per rule of the package documentation. Each runs
// on 67 copies of the element, so that the assembly loops see it too, at
// every kernel level.

func u16b(v ...uint16) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint16(b, x)
	}
	return b
}

func u32b(v ...uint32) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, x)
	}
	return b
}

func u64b(v ...uint64) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint64(b, x)
	}
	return b
}

func f32b(v ...float32) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

func f64b(v ...float64) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
	}
	return b
}

// xb encodes values of an extended format (x87 or binary128) in 16 bytes
// each; math.NaN() encodes the canonical NaN.
func xb(f *format, v ...*big.Float) []byte {
	var b []byte
	for _, x := range v {
		var e []byte
		if x == nil {
			e = f.canonicalNaN()
		} else {
			e = f.encode(fromSigned(x, x.Signbit()))
		}
		b = append(b, append(e, make([]byte, 16-len(e))...)...)
	}
	return b
}

func bf(x float64) *big.Float { return new(big.Float).SetPrec(200).SetFloat64(x) }

// onePlus returns 1 + 2^-e, exactly.
func onePlus(e int) *big.Float {
	tiny := new(big.Float).SetMantExp(big.NewFloat(1), -e)
	return new(big.Float).SetPrec(200).Add(bf(1), tiny)
}

var (
	negZero = math.Copysign(0, -1)
	inf     = math.Inf(1)
	qnan    = math.Float64frombits(0x7ff8_0000_0000_0000)
	qnan32  = math.Float32frombits(0x7fc0_0000)
	pad4    = []byte{0xde, 0xad, 0xbe, 0xef}
)

var semanticCases = []struct {
	name       string
	op         Op
	typ        Type
	a, b, want []byte
}{
	// Integers wrap around; unsigned types compare as unsigned.
	{"int wraps", Sum, Int, u32b(math.MaxInt32), u32b(1), u32b(1 << 31)},
	{"uchar wraps", Sum, UnsignedChar, []byte{200}, []byte{100}, []byte{44}},
	{"short product wraps", Prod, Short, u16b(300), u16b(300), u16b(90000 % 65536)},
	{"long product wraps", Prod, Long, u64b(1 << 62), u64b(6), u64b(1 << 63)},
	{"unsigned max above 2^31", Max, Unsigned, u32b(1 << 31), u32b(1), u32b(1 << 31)},
	{"unsigned min above 2^31", Min, Unsigned, u32b(1 << 31), u32b(1), u32b(1)},
	{"uint64 max above 2^63", Max, Uint64, u64b(1), u64b(1<<63 + 5), u64b(1<<63 + 5)},
	{"ulong min above 2^63", Min, UnsignedLong, u64b(1<<63 + 5), u64b(7), u64b(7)},
	{"int max signed", Max, Int, u32b(0xffff_ffff), u32b(1), u32b(1)},
	{"int8 min signed", Min, Int8, []byte{0x80}, []byte{0x7f}, []byte{0x80}},
	{"uint16 max", Max, Uint16, u16b(0x8000), u16b(0x7fff), u16b(0x8000)},
	{"integer16 sum carries", Sum, Integer16, u64b(math.MaxUint64, 0), u64b(1, 0), u64b(0, 1)},
	{"integer16 product", Prod, Integer16, u64b(1<<63, 0), u64b(4, 0), u64b(0, 2)},
	{"integer16 max signed", Max, Integer16, u64b(0, 1<<63), u64b(5, 0), u64b(5, 0)},
	// Logical ops give 1 or 0; any non-zero is true.
	{"land on int", Land, Int, u32b(5), u32b(3), u32b(1)},
	{"lxor on int", Lxor, Int, u32b(2), u32b(3), u32b(0)},
	{"lor on logical", Lor, Logical, u32b(0x100), u32b(0), u32b(1)},
	{"land on C bool", Land, CBool, []byte{2}, []byte{255}, []byte{1}},
	{"bxor on byte", Bxor, Byte, []byte{0xf0}, []byte{0x3c}, []byte{0xcc}},
	// MPI_MAX and MPI_MIN: canonical NaN, +0 above -0, in either order.
	{"max NaN", Max, Double, f64b(math.NaN()), f64b(1), f64b(qnan)},
	{"min NaN right", Min, Double, f64b(1), f64b(-math.NaN()), f64b(qnan)},
	{"max +0 -0", Max, Double, f64b(0), f64b(negZero), f64b(0)},
	{"max -0 +0", Max, Double, f64b(negZero), f64b(0), f64b(0)},
	{"min +0 -0", Min, Double, f64b(0), f64b(negZero), f64b(negZero)},
	{"min -0 +0", Min, Double, f64b(negZero), f64b(0), f64b(negZero)},
	{"max inf", Max, Double, f64b(-inf), f64b(inf), f64b(inf)},
	{"float max NaN", Max, Float, f32b(2), f32b(float32(math.NaN())), f32b(qnan32)},
	{"float max -0 +0", Max, Float, f32b(float32(negZero)), f32b(0), f32b(0)},
	{"float min +0 -0", Min, Float, f32b(0), f32b(float32(negZero)), f32b(float32(negZero))},
	{"float16 max -0 +0", Max, Float16, u16b(0x8000), u16b(0), u16b(0)},
	{"float16 min NaN", Min, Float16, u16b(0x7d00), u16b(0x3c00), u16b(0x7e00)},
	{"bfloat16 min +0 -0", Min, BFloat16, u16b(0), u16b(0x8000), u16b(0x8000)},
	{"long double max NaN", Max, LongDouble, xb(fmtF80, bf(1)), xb(fmtF80, nil), xb(fmtF80, nil)},
	{"long double min -0", Min, LongDouble, xb(fmtF80, bf(0)), xb(fmtF80, bf(negZero)), xb(fmtF80, bf(negZero))},
	{"real16 max +0", Max, Real16, xb(fmtF128, bf(negZero)), xb(fmtF128, bf(0)), xb(fmtF128, bf(0))},
	// The C types compute in their own precision.
	{"long double has 64 bits", Sum, LongDouble, xb(fmtF80, bf(1)), xb(fmtF80, bf(math.Ldexp(1, -60))), xb(fmtF80, onePlus(60))},
	{"real16 has 113 bits", Sum, Real16, xb(fmtF128, bf(1)), xb(fmtF128, bf(math.Ldexp(1, -100))), xb(fmtF128, onePlus(100))},
	// float16 and bfloat16 round to nearest even.
	{"float16 tie to even (down)", Sum, Float16, u16b(0x3c00), u16b(0x1000), u16b(0x3c00)},  // 1 + 2^-11
	{"float16 tie to even (up)", Sum, Float16, u16b(0x3c01), u16b(0x1000), u16b(0x3c02)},    // (1+2^-10) + 2^-11
	{"float16 overflows at 65520", Sum, Float16, u16b(0x7bff), u16b(0x4c00), u16b(0x7c00)},  // 65504 + 16
	{"float16 stays below 65520", Sum, Float16, u16b(0x7bff), u16b(0x4bc0), u16b(0x7bff)},   // 65504 + 15
	{"float16 subnormal half tie", Prod, Float16, u16b(0x0001), u16b(0x3800), u16b(0x0000)}, // 2^-24 * 0.5
	{"float16 subnormal 1.5", Prod, Float16, u16b(0x0001), u16b(0x3e00), u16b(0x0002)},      // 2^-24 * 1.5
	{"float16 subnormal sum", Sum, Float16, u16b(0x0200), u16b(0x0200), u16b(0x0400)},       // to the smallest normal
	{"float16 inf - inf", Sum, Float16, u16b(0x7c00), u16b(0xfc00), nil},                    // any NaN
	{"bfloat16 tie to even", Sum, BFloat16, u16b(0x3f80), u16b(0x3b80), u16b(0x3f80)},       // 1 + 2^-8
	{"bfloat16 above tie", Sum, BFloat16, u16b(0x3f80), u16b(0x3b81), u16b(0x3f81)},
	// Complex product.
	{"complex product", Prod, Complex, f32b(1, 2), f32b(3, 4), f32b(-5, 10)},
	{"double complex product", Prod, CDoubleComplex, f64b(1, 2), f64b(3, 4), f64b(-5, 10)},
	{"complex4 product", Prod, Complex4, u16b(0x3c00, 0x4000), u16b(0x4200, 0x4400), u16b(0xc500, 0x4900)},
	{"long double complex product", Prod, CLongDoubleComplex,
		xb(fmtF80, bf(1), bf(2)), xb(fmtF80, bf(3), bf(4)), xb(fmtF80, bf(-5), bf(10))},
	{"complex32 product", Prod, Complex32,
		xb(fmtF128, bf(1), bf(2)), xb(fmtF128, bf(3), bf(4)), xb(fmtF128, bf(-5), bf(10))},
	// MAXLOC and MINLOC: ties go to the smaller index.
	{"maxloc larger wins", Maxloc, DoubleInt, append(f64b(2), append(u32b(9), pad4...)...),
		append(f64b(3), append(u32b(1), pad4...)...), append(f64b(3), append(u32b(1), pad4...)...)},
	{"maxloc tie", Maxloc, DoubleInt, append(f64b(2), append(u32b(7), pad4...)...),
		append(f64b(2), append(u32b(3), pad4...)...), append(f64b(2), append(u32b(3), pad4...)...)},
	{"minloc tie", Minloc, TwoInt, u32b(5, 8), u32b(5, 2), u32b(5, 2)},
	{"minloc smaller wins", Minloc, TwoInt, u32b(4, 8), u32b(5, 2), u32b(4, 8)},
	{"maxloc -0 +0", Maxloc, FloatInt, f32b(float32(negZero), 0), append(f32b(0), u32b(4)...), append(f32b(0), u32b(0)...)},
	{"minloc NaN wins", Minloc, FloatInt, append(f32b(1), u32b(1)...), append(f32b(float32(math.NaN())), u32b(6)...), append(f32b(qnan32), u32b(6)...)},
	{"short_int tie", Maxloc, ShortInt, append(u16b(3, 0xffff), u32b(9)...), append(u16b(3, 0), u32b(4)...), append(u16b(3, 0), u32b(4)...)},
}

func TestSemantics(t *testing.T) {
	const copies = 67
	for _, c := range semanticCases {
		if isCKind(c.typ.kind()) && !cfloat.Available {
			continue // no cgo
		}
		size := c.typ.Size()
		if len(c.a) != size || len(c.b) != size || c.want != nil && len(c.want) != size {
			t.Fatalf("%s: bad case: sizes %d %d %d for %d", c.name, len(c.a), len(c.b), len(c.want), size)
		}
		for _, l := range supportedISAs() {
			k := newKernelTable(l).table[c.op][c.typ.kind()]
			for mode := range 3 {
				a, b := bytes.Repeat(c.a, copies), bytes.Repeat(c.b, copies)
				d := [][]byte{make([]byte, len(a)), a, b}[mode]
				k(d, a, b)
				for e := range copies {
					got := maskPadding(c.typ, d[e*size:(e+1)*size])
					if c.want == nil {
						if !testLayouts[c.typ].s.f.decode(d[e*size:]).nan {
							t.Errorf("%s (%v): got % x, want a NaN", c.name, l, d[e*size:(e+1)*size])
						}
					} else if !bytes.Equal(got, maskPadding(c.typ, c.want)) {
						t.Errorf("%s (%v), element %d: got % x, want % x", c.name, l, e, got, c.want)
						break
					}
				}
			}
		}
	}
}

// maskPadding returns a copy of elem with the bytes that carry no value
// (struct padding, the 6 unused bytes of a long double) zeroed.
func maskPadding(typ Type, elem []byte) []byte {
	l := testLayouts[typ]
	m := make([]byte, len(elem))
	keep := func(off, n int) { copy(m[off:off+n], elem[off:off+n]) }
	switch l.cls {
	case "pair":
		keep(0, l.s.bytes())
		keep(l.idxOff, l.idx.bytes())
	case "float":
		keep(0, l.s.bytes())
	case "complex":
		keep(0, l.s.bytes())
		keep(l.size/2, l.s.bytes())
	default:
		copy(m, elem)
	}
	return m
}
