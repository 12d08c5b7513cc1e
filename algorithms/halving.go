package algorithms

import "github.com/gocoll/gocoll/schedule"

// halvingStep is one round of a recursive-halving reduce-scatter among p'
// (a power of two) ranks: the window of slots this rank is responsible for
// is halved, it keeps [keepLo, keepHi) and gives the other half,
// [giveLo, giveHi), to partner (a rank of the power-of-two phase).
type halvingStep struct {
	partner        int
	keepLo, keepHi int
	giveLo, giveHi int
}

// halvingSteps returns the rounds of new rank nr among pof2 ranks.
//
// With increasing set, the partners are nr^1, nr^2, nr^4, ...: each round
// combines two aligned groups of consecutive ranks, so reducing the lower
// group on the left keeps rank order, and nr ends with slot
// bitReverse(nr). Otherwise the partners are nr^(p'/2), ..., nr^1 and nr
// ends with slot nr (the classic recursive halving, which interleaves ranks
// and so needs a commutative op).
//
// The recursive-doubling allgather that undoes a halving reduce-scatter
// walks the same steps backwards, sending its keep window and receiving
// the give window.
func halvingSteps(nr, pof2 int, increasing bool) []halvingStep {
	var steps []halvingStep
	lo, hi := 0, pof2
	for j := 0; 1<<j < pof2; j++ {
		mask := 1 << j
		if !increasing {
			mask = pof2 >> (j + 1)
		}
		mid := (lo + hi) / 2
		s := halvingStep{partner: nr ^ mask}
		if nr&mask == 0 {
			s.keepLo, s.keepHi, s.giveLo, s.giveHi = lo, mid, mid, hi
		} else {
			s.keepLo, s.keepHi, s.giveLo, s.giveHi = mid, hi, lo, mid
		}
		lo, hi = s.keepLo, s.keepHi
		steps = append(steps, s)
	}
	return steps
}

// halving is a recursive-halving reduce-scatter over the slots of a vector
// and the recursive-doubling allgather that reverses it: the two halves of
// Rabenseifner's algorithm, and the core of two reduce-scatters.
type halving struct {
	f     schedule.Fold
	nr    int             // this rank in the power-of-two phase, -1 if folded away
	steps []halvingStep   // nil when nr < 0
	slots schedule.Blocks // pof2 slots of the vector, from element 0 of acc
	acc   buffer          // where the partial results live
	recv  int             // scratch offset where received halves land
}

func newHalving(f schedule.Fold, rank int, increasing bool, slots schedule.Blocks, acc buffer, recv int) *halving {
	h := &halving{f: f, nr: f.NewRank(rank), slots: slots, acc: acc, recv: recv}
	if h.nr >= 0 {
		h.steps = halvingSteps(h.nr, f.Pof2, increasing)
	}
	return h
}

// maxRecv returns the largest half this rank receives, for sizing scratch.
func (h *halving) maxRecv() int {
	m := 0
	for _, s := range h.steps {
		m = max(m, h.slots.Span(0, s.keepLo, s.keepHi).Len)
	}
	return m
}

// finalSlot returns the slot this rank holds after the reduce-scatter.
func (h *halving) finalSlot() int {
	if len(h.steps) == 0 {
		return 0
	}
	return h.steps[len(h.steps)-1].keepLo
}

// reduceScatter appends the lg p' rounds of the halving. src is where the
// vector is before the first round: acc itself, or the input when it has
// the same layout, which saves copying it into acc.
func (h *halving) reduceScatter(b *schedule.Builder, src buffer) {
	for j := range schedule.Log2(h.f.Pof2) {
		rb := b.Next()
		if h.nr < 0 {
			continue
		}
		s := h.steps[j]
		from := h.acc
		if j == 0 {
			from = src
		}
		keep := h.slots.Span(0, s.keepLo, s.keepHi)
		got := tmp.At(h.recv, keep.Len)
		rb.SendRecv(h.f.OldRank(s.partner), from.Span(h.slots, s.giveLo, s.giveHi), got)
		reduceOrdered(rb, h.acc.Span(h.slots, s.keepLo, s.keepHi), from.Span(h.slots, s.keepLo, s.keepHi), got, s.partner < h.nr)
	}
}

// allgather appends the lg p' rounds that bring every slot back to every
// surviving rank, each round doubling the window held.
func (h *halving) allgather(b *schedule.Builder) {
	for j := schedule.Log2(h.f.Pof2) - 1; j >= 0; j-- {
		rb := b.Next()
		if h.nr < 0 {
			continue
		}
		s := h.steps[j]
		rb.SendRecv(h.f.OldRank(s.partner), h.acc.Span(h.slots, s.keepLo, s.keepHi), h.acc.Span(h.slots, s.giveLo, s.giveHi))
	}
}

// virtualBlocks returns the sizes of the virtual blocks of a folded
// reduce-scatter and their layout in the input: virtual block i gathers
// the blocks of the ranks new rank i stands for, which are consecutive,
// so in input order the virtual blocks are consecutive too.
func virtualBlocks(f schedule.Fold, bl schedule.Blocks) ([]int, schedule.Blocks) {
	vcounts := make([]int, f.Pof2)
	for i := range vcounts {
		lo, hi := f.Members(i)
		vcounts[i] = bl.Span(schedule.Input, lo, hi).Len
	}
	return vcounts, schedule.BlocksOf(vcounts)
}
