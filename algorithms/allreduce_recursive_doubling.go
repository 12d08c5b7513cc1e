package algorithms

import "github.com/gocoll/gocoll/schedule"

// Recursive-doubling allreduce.
//
// In round k every rank exchanges its whole partial result with the rank
// whose number differs in bit k and reduces, the lower-numbered side on the
// left: after lg p rounds every rank holds x0 op x1 op ... op x(p-1), and
// rank order is kept, so non-commutative ops work. Partners compute the
// same expression, so all ranks end with bit-identical results. When p is
// not a power of two the first 2(p-p') ranks fold in pairs first (the even
// rank's vector goes to the odd one) and get the result back at the end.
//
//	restrictions: none (any p, any count, any op)
//	cost:         lg p alpha + n lg p beta + n lg p gamma for p a power of
//	              two; two more rounds and 2n more beta otherwise
//	memory:       n elements of scratch
//	wins:         short messages, where the lg p latency terms dominate.
//	reference:    Thakur, Rabenseifner, Gropp (2005), section 4.5.
var allreduceRecursiveDoubling = &Algorithm{
	Name:       "recursive_doubling",
	Collective: Allreduce,
	Summary:    "exchange whole vectors with partners 1, 2, 4, ... away; keeps rank order",
	Cost:       "lg p·(α + nβ + nγ)",
	Canonical:  foldCanonical,
	Build: func(pr Params) *schedule.Schedule {
		p, r, n := pr.P, pr.Rank, pr.Count
		all := func(buf buffer) schedule.Range { return buf.At(0, n) }
		if p == 1 {
			return copyOnly(all(in), all(out))
		}
		f := schedule.NewFold(p)
		nr := f.NewRank(r)
		var b schedule.Builder
		b.Scratch(n)

		src := foldVector(&b, f, r, n) // where this rank's partial result is

		for mask := 1; mask < f.Pof2; mask <<= 1 {
			rb := b.Next()
			if nr < 0 {
				continue
			}
			partner := nr ^ mask
			rb.SendRecv(f.OldRank(partner), all(src), all(tmp))
			reduceOrdered(rb, all(out), all(src), all(tmp), partner < nr)
			src = out
		}

		unfoldVector(&b, f, r, n)
		return b.Schedule()
	},
}

func init() { register(allreduceRecursiveDoubling) }
