package algorithms

import "github.com/gocoll/gocoll/schedule"

// Rabenseifner's allreduce: a recursive-halving reduce-scatter followed by
// a recursive-doubling allgather, as one schedule in the output buffer.
//
// The vector is cut into p' blocks (p' the largest power of two <= p). In
// the reduce-scatter phase each round halves the part a rank is responsible
// for, exchanging the other half with a partner; in the allgather phase the
// same partners are visited backwards and the halves come back. The
// partners are 1, 2, 4, ... ranks away, so each round combines aligned
// groups of consecutive ranks, lower group on the left: rank order is kept
// and non-commutative ops work (rank i ends the first phase with block
// bitReverse(i) rather than block i, which the second phase does not mind).
// Non-powers of two fold in pairs first and unfold at the end.
//
//	restrictions: none (any p, any count, any op)
//	cost:         2 lg p alpha + 2(p-1)/p n beta + (p-1)/p n gamma for p a
//	              power of two; two more rounds and 2n more beta otherwise
//	memory:       n/2 elements of scratch (n when p is not a power of two)
//	wins:         medium and large messages: ring's bandwidth with lg p
//	              latency.
//	reference:    Rabenseifner, "Optimization of Collective Reduction
//	              Operations" (ICCS 2004); Thakur, Rabenseifner, Gropp (2005).
var allreduceRabenseifner = &Algorithm{
	Name:       "rabenseifner",
	Collective: Allreduce,
	Summary:    "recursive-halving reduce-scatter + recursive-doubling allgather; keeps rank order",
	Cost:       "2lg p·α + 2(p-1)/p·nβ + (p-1)/p·nγ",
	Canonical:  foldCanonical,
	Build: func(pr Params) *schedule.Schedule {
		p, r, n := pr.P, pr.Rank, pr.Count
		all := func(buf buffer) schedule.Range { return buf.At(0, n) }
		if p == 1 {
			return copyOnly(all(in), all(out))
		}
		f := schedule.NewFold(p)
		var b schedule.Builder
		h := newHalving(f, r, true, schedule.EvenBlocks(n, f.Pof2), out, 0)
		b.Scratch(h.maxRecv())

		src := foldVector(&b, f, r, n) // where this rank's partial result is

		h.reduceScatter(&b, src) // reduce-scatter phase
		h.allgather(&b)          // allgather phase

		unfoldVector(&b, f, r, n)
		return b.Schedule()
	},
}

func init() { register(allreduceRabenseifner) }
