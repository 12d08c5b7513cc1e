package algorithms

import "github.com/gocoll/gocoll/schedule"

// Binomial-tree reduce.
//
// In round k every rank whose number is a multiple of 2^(k+1) receives the
// partial result of rank r + 2^k and reduces it on the right of its own:
// each partial result covers consecutive ranks, so rank order is kept and
// non-commutative ops work, and the result is the canonical association
// of reproducible mode (canonical.go). Rank 0 ends with the result and, if
// it is not the root, sends it there in one more round.
//
//	restrictions: none (any p, any count, any op)
//	cost:         ceil(lg p) (alpha + n beta + n gamma), plus alpha + n beta
//	              when the root is not rank 0
//	memory:       n elements of scratch on ranks that receive
var reduceBinomial = &Algorithm{
	Name:       "binomial",
	Collective: Reduce,
	Summary:    "binomial tree to rank 0 in rank order, then to the root",
	Cost:       "⌈lg p⌉(α + nβ + nγ)",
	// Round k combines [r, r+2^k) with [r+2^k, r+2^(k+1)): T's subtrees.
	Canonical: func(Params) bool { return true },
	Build: func(pr Params) *schedule.Schedule {
		p, r, n := pr.P, pr.Rank, pr.Count
		var b schedule.Builder
		// home is where this rank's partial result lives once it has
		// reduced something: its output (root) or scratch.
		home := tmp.At(0, n)
		if r == pr.Root {
			home = out.At(0, n)
		}
		acc := binomialReduce(&b, p, r, in.At(0, n), home, tmp.At(n, n))
		if pr.Root != 0 && p > 1 {
			rb := b.Next()
			switch r {
			case 0:
				rb.Send(pr.Root, acc)
			case pr.Root:
				rb.Recv(0, out.At(0, n))
			}
		} else if r == pr.Root {
			b.Next().Copy(out.At(0, n), acc)
		}
		return b.Schedule()
	},
}

// binomialReduce appends the ceil(lg p) rounds of the binomial reduce to
// rank 0: the partial result of rank r covers ranks r..r+2^k-1 after round
// k, so rank 0 ends with T(0, p), the canonical association, and rank order
// is kept. src is this rank's contribution, home where a rank that
// receives keeps its partial result and got where it receives (scratch it
// reserves). It returns where this rank's partial result is at the end
// (rank 0's: the result).
func binomialReduce(b *schedule.Builder, p, r int, src, home, got schedule.Range) schedule.Range {
	acc, sent := src, false
	for mask := 1; mask < p; mask <<= 1 {
		rb := b.Next()
		switch {
		case sent:
		case r%(2*mask) == mask:
			rb.Send(r-mask, acc)
			sent = true
		case r%(2*mask) == 0 && r+mask < p:
			if got.Buf == schedule.Scratch {
				b.Scratch(got.End())
			}
			if home.Buf == schedule.Scratch {
				b.Scratch(home.End())
			}
			rb.Recv(r+mask, got).Reduce(home, acc, got)
			acc = home
		}
	}
	return acc
}

func init() { register(reduceBinomial) }
