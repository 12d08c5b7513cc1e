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
		var b schedule.Builder
		binomialBcast(&b, pr.P, pr.Rank, pr.Root, out.At(0, pr.Count))
		return b.Schedule()
	},
}

// binomialBcast appends the ceil(lg p) rounds of the binomial broadcast of
// data (the same range on every rank) from root.
func binomialBcast(b *schedule.Builder, p, r, root int, data schedule.Range) {
	v := mod(r-root, p)
	abs := func(v int) int { return mod(v+root, p) }
	for mask := 1; mask < p; mask <<= 1 {
		rb := b.Next()
		switch {
		case v < mask && v+mask < p:
			rb.Send(abs(v+mask), data)
		case v >= mask && v < 2*mask:
			rb.Recv(abs(v-mask), data)
		}
	}
}

func init() { register(bcastBinomial) }
