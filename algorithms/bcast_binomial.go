package algorithms

import "github.com/gocoll/gocoll/schedule"

// Binomial-tree broadcast.
//
// Ranks are numbered relative to the root, v = (r - root) mod p. In round
// k every rank v < 2^k that already has the data sends it to v + 2^k:
// after ceil(lg p) rounds everyone has it. The buffer is the output on
// every rank; on the root it is also the input (in place).
//
//	restrictions: none
//	cost:         ceil(lg p) (alpha + n beta)
//	memory:       no scratch
//	wins:         short messages; long ones would gain from a
//	              scatter-allgather, not needed by gocoll's users yet.
var bcastBinomial = &Algorithm{
	Name:       "binomial",
	Collective: Bcast,
	Summary:    "binomial tree from the root",
	Cost:       "⌈lg p⌉(α + nβ)",
	Build: func(pr Params) *schedule.Schedule {
		p, n := pr.P, pr.Count
		v := mod(pr.Rank-pr.Root, p)
		abs := func(v int) int { return mod(v+pr.Root, p) }
		var b schedule.Builder
		for mask := 1; mask < p; mask <<= 1 {
			rb := b.Next()
			switch {
			case v < mask && v+mask < p:
				rb.Send(abs(v+mask), out.At(0, n))
			case v >= mask && v < 2*mask:
				rb.Recv(abs(v-mask), out.At(0, n))
			}
		}
		return b.Schedule()
	},
}

func init() { register(bcastBinomial) }
