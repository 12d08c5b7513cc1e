package algorithms

import "github.com/gocoll/gocoll/schedule"

// Ring allgather.
//
// In each of p-1 rounds every rank passes to its right neighbour the block
// it received in the round before (its own block first) and receives the
// next block from its left neighbour, straight into the output buffer.
//
//	restrictions: none (any p, any counts, also uneven ones)
//	cost:         (p-1) alpha + (p-1)/p n beta
//	memory:       no scratch
//	wins:         large messages: every link carries n/p per round and each
//	              rank talks to its two neighbours only. Latency grows with
//	              p, so recursive doubling or Bruck win on small messages.
//	reference:    Thakur, Rabenseifner, Gropp, "Optimization of Collective
//	              Communication Operations in MPICH" (2005), section 4.1.
var allgatherRing = &Algorithm{
	Name:       "ring",
	Collective: Allgather,
	Summary:    "pass blocks around the ring, one neighbour each way",
	Cost:       "(p-1)α + (p-1)/p·nβ",
	Build: func(pr Params) *schedule.Schedule {
		bl := pr.Blocks()
		mine := in.At(0, pr.Counts[pr.Rank])
		if pr.P == 1 {
			return copyOnly(mine, out.Block(bl, 0))
		}
		var b schedule.Builder
		start := b.Len()
		ringAllgather(&b, pr.P, pr.Rank, bl, mine)
		b.Round(start).Copy(out.Block(bl, pr.Rank), mine)
		return b.Schedule()
	},
}

// ringAllgather appends the p-1 rounds of the ring allgather over the blocks
// bl of the output buffer. first is where this rank's own block is before the
// first round: its input, or its block of the output.
func ringAllgather(b *schedule.Builder, p, r int, bl schedule.Blocks, first schedule.Range) {
	right, left := mod(r+1, p), mod(r-1, p)
	for k := range p - 1 {
		send := out.Block(bl, mod(r-k, p))
		if k == 0 {
			send = first
		}
		b.Next().Send(right, send).Recv(left, out.Block(bl, mod(r-k-1, p)))
	}
}

func init() { register(allgatherRing) }
