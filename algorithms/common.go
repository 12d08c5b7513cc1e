package algorithms

import "github.com/gocoll/gocoll/schedule"

// Shorthands for the three buffers, so that schedules read like the
// textbook: in.Block(bl, i) is block i of the input.
var (
	in  = buffer(schedule.Input)
	out = buffer(schedule.Output)
	tmp = buffer(schedule.Scratch)
)

type buffer schedule.Buffer

// At returns n elements of the buffer starting at off.
func (b buffer) At(off, n int) schedule.Range {
	return schedule.Range{Buf: schedule.Buffer(b), Off: off, Len: n}
}

// Block returns block i of bl in this buffer.
func (b buffer) Block(bl schedule.Blocks, i int) schedule.Range {
	return bl.Block(schedule.Buffer(b), i)
}

// Span returns blocks lo..hi-1 of bl in this buffer.
func (b buffer) Span(bl schedule.Blocks, lo, hi int) schedule.Range {
	return bl.Span(schedule.Buffer(b), lo, hi)
}

// mod returns i modulo p in 0..p-1.
func mod(i, p int) int { return ((i % p) + p) % p }

// maxCount returns the largest block of bl.
func maxCount(bl schedule.Blocks) int {
	m := 0
	for _, c := range bl.Counts {
		m = max(m, c)
	}
	return m
}

// reduceOrdered adds the step dst = lower op higher, where lower holds the
// contributions of the lower-numbered ranks: the rank order that
// non-commutative ops need.
func reduceOrdered(rb schedule.RoundBuilder, dst, mine, theirs schedule.Range, theirsLower bool) {
	if theirsLower {
		rb.Reduce(dst, theirs, mine)
	} else {
		rb.Reduce(dst, mine, theirs)
	}
}

// bitReverse reverses the lowest bits bits of x.
func bitReverse(x, bits int) int {
	r := 0
	for range bits {
		r = r<<1 | x&1
		x >>= 1
	}
	return r
}

// copyOnly is the schedule of every collective on a single rank: the input
// becomes the output.
func copyOnly(src, dst schedule.Range) *schedule.Schedule {
	var b schedule.Builder
	b.Next().Copy(dst, src)
	return b.Schedule()
}

// foldVector appends, when p is not a power of two, the fold round of an
// allreduce: the even rank of each of the first Rem pairs sends its whole
// vector to the odd one, which reduces it into its output (lower rank on the
// left) using n elements of scratch. It returns where this rank's partial
// result is afterwards: still the input, or the output.
func foldVector(b *schedule.Builder, f schedule.Fold, r, n int) buffer {
	if f.Rem == 0 {
		return in
	}
	b.Scratch(n)
	rb := b.Next()
	switch {
	case f.NewRank(r) < 0:
		rb.Send(r+1, in.At(0, n))
	case f.Folded(r):
		rb.Recv(r-1, tmp.At(0, n)).Reduce(out.At(0, n), tmp.At(0, n), in.At(0, n))
		return out
	}
	return in
}

// unfoldVector appends the round that undoes foldVector: the odd rank of
// each pair sends the result to the even one.
func unfoldVector(b *schedule.Builder, f schedule.Fold, r, n int) {
	if f.Rem == 0 {
		return
	}
	rb := b.Next()
	switch {
	case f.NewRank(r) < 0:
		rb.Recv(r+1, out.At(0, n))
	case f.Folded(r):
		rb.Send(r-1, out.At(0, n))
	}
}

// foldCanonical reports whether the pair fold of p ranks followed by
// partners 1, 2, 4, ... away (recursive doubling, Rabenseifner, the
// order-preserving reduce-scatter) computes the canonical association
// T(0, p): when p's binary digits are ones then zeros (p = 2^a - 2^b: 3, 4,
// 6, 7, 8, 12, 14, 15, ...), the folded pairs and the lone ranks after
// them are the tree's nodes. Elsewhere (5, 9, 10, 11, 13, ...) a pair and
// a lone rank meet that the tree keeps apart.
func foldCanonical(p Params) bool {
	s := p.P + p.P&-p.P
	return s&(s-1) == 0
}
