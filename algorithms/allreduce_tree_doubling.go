package algorithms

import "github.com/gocoll/gocoll/schedule"

// Tree-doubling allreduce: recursive doubling over the canonical tree, on
// any p, in ⌈lg p⌉ rounds.
//
// T(0, p) = T(0, p') op T(p', p), p' the largest power of two below p. The
// p' ranks of the left part run recursive doubling (partners 1, 2, 4, ...
// away: T(0, p') on all of them after lg p' rounds); meanwhile the rest
// compute T(p', p) among themselves the same way, which takes R = ⌈lg(p -
// p')⌉ rounds, and pass it on as a passenger: in round R they send it to
// left ranks 0 .. 2^(R+1)-1 (a few each), and in each later doubling round
// a left rank that holds it hands it to its partner with its partial
// result. In the last round left rank i sends T(0, p') to right rank p'+i,
// and every rank combines the two halves: the same node on every rank, so
// the same bits. Where p - p' > p'/2 the right part ends too late for
// passengers, and it sends T(p', p) straight to every left rank in the
// last round (two each at most).
//
//	restrictions: none (any p, any count, a commutative op)
//	cost:         ⌈lg p⌉α + (⌈lg p⌉ + 1)·nβ..2⌈lg p⌉·nβ + ⌈lg p⌉·nγ
//	memory:       2n elements of scratch
//	wins:         short messages in reproducible mode where recursive
//	              doubling's fold is not the tree (p = 5, 9, 10, 11, 13,
//	              ...): one round fewer than recursive doubling there.
var allreduceTreeDoubling = &Algorithm{
	Name:        "tree_doubling",
	Collective:  Allreduce,
	Commutative: true,
	Canonical:   func(Params) bool { return true },
	Summary:     "recursive doubling over the canonical tree on any p: ranks beyond the largest power of two reduce among themselves and pass their value into the others' rounds",
	Cost:        "⌈lg p⌉·α + ≤2⌈lg p⌉·nβ + ⌈lg p⌉·nγ",
	Build: func(pr Params) *schedule.Schedule {
		p, r, n := pr.P, pr.Rank, pr.Count
		if p == 1 {
			return copyOnly(in.At(0, n), out.At(0, n))
		}
		var b schedule.Builder
		b.Scratch(2 * n)
		b.Skip(schedule.Log2(ceilPow2(p)))
		treeDoubling(&b, 0, p, r, n)
		return b.Schedule()
	},
}

// treeDoubling adds to rounds 0 .. ⌈lg(hi-lo)⌉-1 of b rank r's part in
// computing T(lo, hi) on every rank of [lo, hi), and returns where the
// value is: the input (one rank) or the output.
func treeDoubling(b *schedule.Builder, lo, hi, r, n int) schedule.Range {
	val := in.At(0, n)
	if hi-lo == 1 {
		return val
	}
	got, pass := tmp.At(0, n), tmp.At(n, n) // a partner's value, the passenger
	pof2 := ceilPow2(hi-lo) / 2
	if pof2*2 == hi-lo {
		pof2 = hi - lo
	}
	a := schedule.Log2(pof2) // rounds of the left part's doubling
	if pof2 == hi-lo {
		for t := range a {
			partner := lo + (r - lo) ^ (1 << t)
			b.Round(t).SendRecv(partner, val, got).Reduce(out.At(0, n), val, got)
			val = out.At(0, n)
		}
		return val
	}
	rem := hi - lo - pof2
	R := schedule.Log2(ceilPow2(rem)) // rounds of the right part
	// inject: the round the right part sends T(lo+pof2, hi) to left ranks
	// lo .. lo+reach-1 (all of them when it is the last round).
	inject, reach := R, 1<<(R+1)
	if R >= a {
		inject, reach = a, pof2
	}
	if x := r - lo; x < pof2 {
		// Left part: recursive doubling, the passenger in and along.
		for t := range a {
			rb := b.Round(t)
			partner := lo + x ^ (1 << t)
			// The passenger goes first both ways: a pair's transfers of
			// one round match in order.
			switch {
			case t > inject && x < 1<<t:
				rb.Send(partner, pass)
			case t > inject && x < 1<<(t+1):
				rb.Recv(partner, pass)
			}
			rb.SendRecv(partner, val, got)
			rb.Reduce(out.At(0, n), val, got)
			val = out.At(0, n)
		}
		if x < reach {
			b.Round(inject).Recv(lo+pof2+x%rem, pass)
		}
		// Last round: hand T(lo, lo+pof2) to the right part, combine.
		rb := b.Round(a)
		if x < rem {
			rb.Send(lo+pof2+x, val)
		}
		rb.Reduce(out.At(0, n), val, pass)
		return out.At(0, n)
	}
	// Right part: T(lo+pof2, hi) among themselves, then out to the left.
	j := r - lo - pof2
	val = treeDoubling(b, lo+pof2, hi, r, n)
	rb := b.Round(inject)
	for x := j; x < reach; x += rem {
		rb.Send(lo+x, val)
	}
	rb = b.Round(a)
	rb.Recv(lo+j, got).Reduce(out.At(0, n), got, val)
	return out.At(0, n)
}

func init() { register(allreduceTreeDoubling) }
