package schedule

// Blocks cuts a vector into p consecutive blocks: block i is Counts[i]
// elements starting at element Displs[i]. Every algorithm takes its chunk
// arithmetic from here, so that no two files split a vector differently.
type Blocks struct {
	Counts []int
	Displs []int
	Total  int
}

// EvenBlocks splits n elements into p blocks whose sizes differ by at most
// one: the first n%p blocks get one element more. There is no padding: for
// n < p the last p-n blocks are empty.
func EvenBlocks(n, p int) Blocks {
	counts := make([]int, p)
	q, r := n/p, n%p
	for i := range counts {
		counts[i] = q
		if i < r {
			counts[i]++
		}
	}
	return BlocksOf(counts)
}

// BlocksOf lays out blocks of the given sizes one after the other.
func BlocksOf(counts []int) Blocks {
	b := Blocks{Counts: counts, Displs: make([]int, len(counts))}
	for i, c := range counts {
		b.Displs[i] = b.Total
		b.Total += c
	}
	return b
}

// P returns the number of blocks.
func (b Blocks) P() int { return len(b.Counts) }

// Block returns block i as a range of buf.
func (b Blocks) Block(buf Buffer, i int) Range {
	return Range{buf, b.Displs[i], b.Counts[i]}
}

// Span returns blocks lo..hi-1 as one range of buf.
func (b Blocks) Span(buf Buffer, lo, hi int) Range {
	if lo >= hi {
		return Range{buf, 0, 0}
	}
	return Range{buf, b.Displs[lo], b.Displs[hi-1] + b.Counts[hi-1] - b.Displs[lo]}
}

// Fold describes the classic reduction of p ranks to the largest power of
// two p' <= p, used by recursive doubling and halving on any p.
//
// The first 2*Rem ranks pair up (0,1), (2,3), ...; the even rank of each pair
// hands its data to the odd one and sits out the power-of-two phase. So the
// surviving rank with new number i stands for the original ranks
// Members(i), a contiguous, ordered interval: combining lower new ranks on
// the left keeps the original rank order, which non-commutative ops need.
type Fold struct {
	P, Pof2, Rem int
}

// NewFold returns the fold of p ranks.
func NewFold(p int) Fold {
	pof2 := 1
	for pof2*2 <= p {
		pof2 *= 2
	}
	return Fold{P: p, Pof2: pof2, Rem: p - pof2}
}

// NewRank returns the rank's number in the power-of-two phase, or -1 for a
// rank that hands its data to its odd neighbour and sits out.
func (f Fold) NewRank(rank int) int {
	switch {
	case rank >= 2*f.Rem:
		return rank - f.Rem
	case rank%2 == 1:
		return rank / 2
	}
	return -1
}

// OldRank returns the original rank of new rank i.
func (f Fold) OldRank(i int) int {
	if i < f.Rem {
		return 2*i + 1
	}
	return i + f.Rem
}

// Members returns the original ranks lo..hi-1 that new rank i stands for.
func (f Fold) Members(i int) (lo, hi int) {
	if i < f.Rem {
		return 2 * i, 2*i + 2
	}
	return i + f.Rem, i + f.Rem + 1
}

// Partner returns, for a rank of the first 2*Rem, the other rank of its pair.
func (f Fold) Partner(rank int) int { return rank ^ 1 }

// Folded reports whether rank is part of a pair (so it sends or receives in
// the fold and unfold rounds).
func (f Fold) Folded(rank int) bool { return rank < 2*f.Rem }

// Log2 returns the base-2 logarithm of a power of two.
func Log2(pof2 int) int {
	n := 0
	for 1<<n < pof2 {
		n++
	}
	return n
}
