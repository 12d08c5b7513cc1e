package ops

import (
	"fmt"
	"math/bits"
)

// A Reduction combines the contributions of p ranks, x0 .. x(p-1), element
// by element, in the canonical association of reproducible mode
// (algorithms/canonical.go):
//
//	T(lo, hi) = x(lo)                        if hi-lo == 1
//	T(lo, hi) = T(lo, lo+h) op T(lo+h, hi)   h: the largest power of two < hi-lo
//
// the result being T(0, p): adjacent pairs, then pairs of pairs, an odd
// one out passing up. The left operand is always the lower ranks, so the
// association also serves ops that are not commutative (MPI asks every op
// to be associative). MPI_SUM and MPI_PROD on float16, bfloat16 and
// MPI_COMPLEX4 accumulate in float32 (complex64 for MPI_COMPLEX4) along T
// and round to 16 bits once, at the end: the inputs widen exactly, and the
// rounding is the kernels' (nearest, ties to even).
//
// Reduce keeps a stack of partial results, one per level of T, for a
// cache-sized chunk of elements at a time, and reads every contribution
// once: the p-1 kernel calls of a left-to-right fold, in the order of a
// binary counter.
type Reduction struct {
	fold   bool   // Folded: x0 op x1 op ... op x(p-1), left to right
	k      Kernel // combines two accumulators
	pair   Kernel // combines two elements: T(0, 2), rounded once
	size   int    // bytes of an element of the datatype
	wide   *widening
	leaves Kernel // widening: combines two contributions into an accumulator; nil: widen them first
}

// widening is how 16-bit floats accumulate in float32: pairs of
// contributions combine straight into float32s (sum, prod), a contribution
// left over widens into a float32 buffer, the float32 kernel combines
// partials, and the result narrows once.
type widening struct {
	widen, narrow func(dst, src []byte) // between 2-byte and 4-byte parts
	sum, prod     Kernel                // two 16-bit operands, a float32 result
}

// widenings returns a level's widenings (assembly on amd64).
func widenings(level isa) (f16, bf16 *widening) {
	f16, bf16 = asmWidenings(level)
	if f16 == nil {
		f16 = &widening{widenF16, narrowF16, sumF16To32, prodF16To32}
		bf16 = &widening{widenBF16, narrowBF16, sumBF16To32, prodBF16To32}
	}
	return f16, bf16
}

// chunkBytes is the accumulator bytes Reduce combines at a time: its
// stack of partials (one chunk per level of T) stays in the L1 cache.
const chunkBytes = 8192

// UserReduction combines with k, on elements of size bytes, in the
// canonical association. It panics if size is not positive.
func UserReduction(k Kernel, size int) Reduction {
	if size <= 0 {
		panic("ops: UserReduction with a non-positive element size")
	}
	return Reduction{k: k, pair: k, size: size}
}

// ReductionOf returns the Reduction of a predefined op on a predefined
// datatype, or Lookup's error.
func ReductionOf(op Op, t Type) (Reduction, error) {
	k, err := Lookup(op, t)
	if err != nil {
		return Reduction{}, err
	}
	r := Reduction{k: k, pair: k, size: t.Size()}
	if op != Sum && op != Prod {
		return r, nil
	}
	if wt, ok := Wide(t); ok {
		r.k, r.wide = active.Load().table[op][wt.kind()], widening16(t)
	}
	if r.wide != nil {
		r.leaves = r.wide.sum
		if op == Prod {
			r.leaves = r.wide.prod
		}
		if t.kind() == kC16 && op == Prod {
			r.leaves = nil // a complex product: widen, then the complex64 kernel
		}
	}
	return r, nil
}

// Folded returns r combining left to right, ((x0 op x1) op x2) ..., where
// the result need not be T(0, p) (outside reproducible mode): a fold costs
// no bookkeeping, which T's stack of partials does on a message in cache.
// 16-bit floats keep T and float32, which cost nothing more than their
// kernels' conversions.
func (r Reduction) Folded() Reduction {
	r.fold = r.wide == nil
	return r
}

// Size returns the bytes of an element.
func (r Reduction) Size() int { return r.size }

// ScratchLen returns the scratch bytes Reduce needs for p contributions.
func (r Reduction) ScratchLen(p int) int {
	return (bits.Len(uint(max(p-1, 0))) + 1) * r.chunk() // ceil(log2 p) + 1 levels
}

// chunk is the bytes of accumulators combined at a time: whole elements.
func (r Reduction) chunk() int {
	acc := r.size
	if r.wide != nil {
		acc *= 2
	}
	return max(chunkBytes/acc, 1) * acc
}

// Reduce sets dst to T(0, p) of parts[0] .. parts[p-1], each as long as
// dst (whole elements), which it must not overlap. (A slice the caller
// refills, not a function: a closure over the caller's state would be
// allocated at every call.) scratch is the caller's to
// reuse between calls: Reduce returns it, grown to ScratchLen(p) if it was
// shorter.
func (r Reduction) Reduce(dst []byte, parts [][]byte, scratch []byte) []byte {
	p := len(parts)
	switch {
	case p == 1:
		copy(dst, parts[0])
		return scratch
	case p == 2: // the pairwise kernel rounds once too
		r.pair(dst, parts[0], parts[1])
		return scratch
	case p == 3 && r.wide == nil, r.fold: // (x0 op x1) op x2 is T(0, 3)
		r.k(dst, parts[0], parts[1])
		for q := 2; q < p; q++ {
			r.k(dst, dst, parts[q])
		}
		return scratch
	}
	if need := r.ScratchLen(p); len(scratch) < need {
		scratch = make([]byte, need)
	}
	t := tree{r: r, parts: parts, scratch: scratch, stride: r.chunk()}
	in := r.chunk() // bytes of contributions per chunk
	if r.wide != nil {
		in /= 2
	}
	for lo := 0; lo < len(dst); lo += in {
		t.reduce(dst[lo:min(lo+in, len(dst))], p, lo)
	}
	return scratch
}

// tree is Reduce's state. Level i of its stack holds T over count[i]
// contributions: a contribution not combined yet, read in place (leaf[i]
// >= 0: its rank), or a partial in scratch's chunk i (leaf[i] < 0), at
// level 0 in d itself unless it widens. (Methods, not closures: they
// inline, and a chunk of a few KiB costs little more than its kernels.)
type tree struct {
	r           Reduction
	parts       [][]byte
	scratch, d  []byte
	stride, acc int // bytes between levels, and of a partial in this chunk
	lo, hi      int // the chunk's bytes in the parts
	count, leaf [64]int32
}

// level is level i's partial.
func (t *tree) level(i int) []byte {
	if i == 0 && t.r.wide == nil {
		return t.d
	}
	return t.scratch[i*t.stride : i*t.stride+t.acc]
}

// at is level i's bytes: its contribution, or its partial.
func (t *tree) at(i int) []byte {
	if t.leaf[i] >= 0 {
		return t.parts[t.leaf[i]][t.lo:t.hi]
	}
	return t.level(i)
}

// combine sets level i to level i op level i+1, widening a contribution
// first where the kernel needs float32s.
func (t *tree) combine(i int) {
	r := t.r
	switch {
	case r.wide == nil:
		r.k(t.level(i), t.at(i), t.at(i+1))
	case t.leaf[i] >= 0 && t.leaf[i+1] >= 0 && r.leaves != nil:
		r.leaves(t.level(i), t.at(i), t.at(i+1))
	default:
		for _, j := range [2]int{i, i + 1} {
			if t.leaf[j] >= 0 {
				r.wide.widen(t.level(j), t.at(j))
				t.leaf[j] = -1
			}
		}
		r.k(t.level(i), t.level(i), t.level(i+1))
	}
	t.leaf[i] = -1
}

// reduce sets d to T(0, p) of bytes [lo, lo+len(d)) of every part.
func (t *tree) reduce(d []byte, p, lo int) {
	t.d, t.lo, t.hi, t.acc = d, lo, lo+len(d), len(d)
	if t.r.wide != nil {
		t.acc *= 2
	}
	top := 0 // levels in use
	for q := range p {
		t.leaf[top], t.count[top] = int32(q), 1
		top++
		for top > 1 && t.count[top-2] == t.count[top-1] { // two equal subtrees
			t.combine(top - 2)
			t.count[top-2] *= 2
			top--
		}
	}
	// The levels hold T over p's binary digits, largest first: T(0, p)
	// folds them from the right.
	for ; top > 1; top-- {
		t.combine(top - 2)
	}
	if t.r.wide != nil {
		t.r.wide.narrow(d, t.level(0))
	}
}

// CanonicalReduce sets dst to T(0, len(parts)) of parts under a
// predefined op, as a Reduction computes it: the reference of
// reproducible mode. Every part must be as long as dst.
func CanonicalReduce(op Op, t Type, dst []byte, parts [][]byte) error {
	r, err := ReductionOf(op, t)
	if err != nil {
		return err
	}
	if len(parts) == 0 {
		return fmt.Errorf("ops: CanonicalReduce of no contributions")
	}
	for _, x := range parts {
		if len(x) != len(dst) || len(dst)%r.size != 0 {
			return fmt.Errorf("ops: CanonicalReduce of %d-byte parts into %d bytes of %v", len(x), len(dst), t)
		}
	}
	r.Reduce(dst, parts, nil)
	return nil
}
