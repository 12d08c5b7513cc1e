package ops

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// canonicalCase is a datatype whose MPI_SUM and MPI_PROD depend on the
// association: its element's parts are numbers of format in, combined
// (rounded) in format acc.
type canonicalCase struct {
	t       Type
	in, acc *format
	complex bool
}

var canonicalCases = []canonicalCase{
	{Float, fmtF32, fmtF32, false},
	{Double, fmtF64, fmtF64, false},
	{CFloatComplex, fmtF32, fmtF32, true},
	{CDoubleComplex, fmtF64, fmtF64, true},
	{Float16, fmtF16, fmtF32, false},
	{BFloat16, fmtBF16, fmtF32, false},
	{Complex4, fmtF16, fmtF32, true},
}

// modelT is the canonical association of element i of parts over [lo, hi),
// in the IEEE model (ieee_test.go), every operation rounded to c.acc: the
// definition, not Reduction's stack.
func modelT(c canonicalCase, op Op, parts [][]byte, i, lo, hi int) [2]xf {
	if hi-lo == 1 {
		w := c.in.bits / 8
		x := parts[lo][i*c.t.Size():]
		v := [2]xf{c.in.decode(x[:w])}
		if c.complex {
			v[1] = c.in.decode(x[w : 2*w])
		}
		return v
	}
	h := canonicalSplit(lo, hi)
	x, y := modelT(c, op, parts, i, lo, h), modelT(c, op, parts, i, h, hi)
	f := c.acc
	switch {
	case !c.complex && op == Sum:
		return [2]xf{f.add(x[0], y[0])}
	case !c.complex:
		return [2]xf{f.mul(x[0], y[0])}
	case op == Sum:
		return [2]xf{f.add(x[0], y[0]), f.add(x[1], y[1])}
	}
	ac, bd := f.mul(x[0], y[0]), f.mul(x[1], y[1])
	ad, bc := f.mul(x[0], y[1]), f.mul(x[1], y[0])
	return [2]xf{f.sub(ac, bd), f.add(ad, bc)}
}

// canonicalSplit is where T(lo, hi) splits: lo plus the largest power of
// two below hi-lo. It restates algorithms.CanonicalSplit, which ops, below
// algorithms, does not import; coll's reproducible tests hold every
// algorithm, the shm ones (a Reduction) among them, to that one's tree.
func canonicalSplit(lo, hi int) int {
	h := 1
	for 2*h < hi-lo {
		h *= 2
	}
	return lo + h
}

// mixed fills buf with numbers of format f that make the association
// matter: mixed signs and magnitudes for sums, factors near one for
// products (no overflow, no NaN).
func mixed(f *format, op Op, buf []byte, rng *rand.Rand) {
	w := f.bits / 8
	for at := 0; at+w <= len(buf); at += w {
		var v float64
		if op == Sum {
			v = (rng.Float64()*2 - 1) * math.Ldexp(1, rng.IntN(16)-8)
		} else {
			v = 0.75 + rng.Float64()/2
		}
		switch f {
		case fmtF64:
			putLE(buf[at:], math.Float64bits(v), 8)
		case fmtF32:
			putLE(buf[at:], uint64(math.Float32bits(float32(v))), 4)
		case fmtF16:
			putLE(buf[at:], uint64(f32ToF16(float32(v))), 2)
		case fmtBF16:
			putLE(buf[at:], uint64(f32ToBF16(float32(v))), 2)
		}
	}
}

func putLE(b []byte, v uint64, n int) {
	for j := range n {
		b[j] = byte(v >> (8 * j))
	}
}

// CanonicalReduce computes T(0, p) exactly as the definition says (on a
// sample of the elements), for
// p = 1..9 and 17, at counts around Reduce's chunks, on every
// floating-point type whose sum and product depend on the association.
func TestCanonicalReduce(t *testing.T) {
	for _, c := range canonicalCases {
		for _, op := range []Op{Sum, Prod} {
			r, err := ReductionOf(op, c.t)
			if err != nil {
				t.Fatal(err)
			}
			per := r.chunk() / c.t.Size() // elements of a chunk
			if r.wide != nil {
				per *= 2
			}
			for _, p := range []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 17} {
				for _, n := range []int{1, per - 1, per, per + 1, 2*per + 3} {
					rng := rand.New(rand.NewPCG(uint64(p), uint64(n)))
					parts := make([][]byte, p)
					for q := range parts {
						parts[q] = make([]byte, n*c.t.Size())
						mixed(c.in, op, parts[q], rng)
					}
					got := make([]byte, n*c.t.Size())
					if err := CanonicalReduce(op, c.t, got, parts); err != nil {
						t.Fatal(err)
					}
					for _, i := range sample(n, per, rng) {
						v := modelT(c, op, parts, i, 0, p)
						var want []byte
						for _, x := range v[:1+btoi(c.complex)] {
							want = append(want, c.in.encode(c.in.round(x))...)
						}
						if e := got[i*c.t.Size() : (i+1)*c.t.Size()]; !bytes.Equal(e, want) {
							t.Errorf("%v %v p=%d n=%d element %d: %x, want %x", op, c.t, p, n, i, e, want)
							break
						}
					}
				}
			}
		}
	}
}

// sample picks the elements the model checks: those at both ends and
// around each chunk boundary, and some at random (the model is slow).
func sample(n, per int, rng *rand.Rand) []int {
	var is []int
	for at := 0; at <= n; at += per {
		for i := max(at-2, 0); i < min(at+2, n); i++ {
			is = append(is, i)
		}
	}
	for range 20 {
		is = append(is, rng.IntN(n))
	}
	return append(is, n-1)
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// The association matters for these inputs: T(0, p) differs from a left
// fold somewhere, or the test above proves little.
func TestCanonicalIsNotLeftFold(t *testing.T) {
	for _, typ := range []Type{Double, Float16} {
		r, _ := ReductionOf(Sum, typ)
		k, _ := Lookup(Sum, typ)
		p, n := 7, 256
		rng := rand.New(rand.NewPCG(1, 2))
		parts := make([][]byte, p)
		for q := range parts {
			parts[q] = make([]byte, n*typ.Size())
			mixed(canonicalCases[map[Type]int{Double: 1, Float16: 4}[typ]].in, Sum, parts[q], rng)
		}
		tree := make([]byte, n*typ.Size())
		r.Reduce(tree, parts, nil)
		fold := bytes.Clone(parts[0])
		for q := 1; q < p; q++ {
			k(fold, fold, parts[q])
		}
		if bytes.Equal(tree, fold) {
			t.Errorf("%v: T(0, %d) equals the left fold on every element", typ, p)
		}
	}
}

// A user-defined op that is not commutative keeps rank order in T: an
// affine map composition, exact in integers.
func TestUserReductionOrder(t *testing.T) {
	affine := func(dst, a, b []byte) {
		for i := 0; i+8 <= len(dst); i += 8 {
			am, ac := le32(a[i:]), le32(a[i+4:])
			bm, bc := le32(b[i:]), le32(b[i+4:])
			putLE(dst[i:], uint64(am*bm), 4)
			putLE(dst[i+4:], uint64(ac*bm+bc), 4)
		}
	}
	for p := 1; p <= 9; p++ {
		n := 600
		parts := make([][]byte, p)
		for q := range parts {
			parts[q] = make([]byte, 8*n)
			for i := range n {
				putLE(parts[q][8*i:], uint64(q*7+i+1), 4)
				putLE(parts[q][8*i+4:], uint64(q*3+i), 4)
			}
		}
		fold := bytes.Clone(parts[0])
		for q := 1; q < p; q++ {
			affine(fold, fold, parts[q])
		}
		got := make([]byte, 8*n)
		UserReduction(affine, 8).Reduce(got, parts, nil)
		if !bytes.Equal(got, fold) {
			t.Errorf("p=%d: differs from the rank-order fold", p)
		}
	}
}

func le32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

func ExampleCanonicalReduce() {
	parts := [][]byte{f64s(1e16), f64s(1), f64s(-1e16), f64s(1)}
	dst := make([]byte, 8)
	CanonicalReduce(Sum, Double, dst, parts) // (1e16 + 1) + (-1e16 + 1)
	fmt.Println(math.Float64frombits(leU64(dst)))
	// Output: 0
}

func f64s(v float64) []byte { b := make([]byte, 8); putLE(b, math.Float64bits(v), 8); return b }

func leU64(b []byte) uint64 {
	var v uint64
	for j := 7; j >= 0; j-- {
		v = v<<8 | uint64(b[j])
	}
	return v
}

// The conversions of every level give the portable ones' bits: widening
// every 16-bit value, narrowing float32s of every exponent (NaNs,
// infinities and subnormals included), at lengths around the vectors.
func TestWidenings(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	halves := make([]byte, 2<<16+6) // every value, and a tail
	for i := range 1<<16 + 3 {
		putLE(halves[2*i:], uint64(i), 2)
	}
	floats := make([]byte, 4*(1<<16+5))
	for at := 0; at < len(floats); at += 4 {
		putLE(floats[at:], rng.Uint64(), 4)
	}
	goF16, goBF16 := widenings(isaGo)
	for _, l := range supportedISAs() {
		f16, bf16 := widenings(l)
		for _, pair := range [][2]*widening{{goF16, f16}, {goBF16, bf16}} {
			for _, n := range []int{1, 7, 8, 31, 33, 1 << 16, 1<<16 + 3} {
				want, got := make([]byte, 4*n), make([]byte, 4*n)
				pair[0].widen(want, halves[:2*n])
				pair[1].widen(got, halves[:2*n])
				if !bytes.Equal(got, want) {
					t.Errorf("%v: widening %d values differs from Go's", l, n)
				}
				want, got = make([]byte, 2*n), make([]byte, 2*n)
				pair[0].narrow(want, floats[:4*n])
				pair[1].narrow(got, floats[:4*n])
				if !bytes.Equal(got, want) {
					t.Errorf("%v: narrowing %d values differs from Go's", l, n)
				}
			}
		}
	}
}
