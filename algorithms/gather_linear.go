package algorithms

import "github.com/gocoll/gocoll/schedule"

// Linear gather: every rank sends its block straight to the root, which
// receives all of them in one round, into place.
//
//	restrictions: none
//	cost:         alpha + (p-1)/p n beta at the root (it receives from
//	              p-1 ranks at once)
//	memory:       no scratch
var gatherLinear = &Algorithm{
	Name:       "linear",
	Collective: Gather,
	Summary:    "everyone sends its block to the root",
	Cost:       "α + (p-1)/p·nβ",
	Build: func(pr Params) *schedule.Schedule {
		bl := pr.Blocks()
		mine := in.At(0, pr.Counts[pr.Rank])
		var b schedule.Builder
		rb := b.Next()
		if pr.Rank != pr.Root {
			rb.Send(pr.Root, mine)
			return b.Schedule()
		}
		for q := range pr.P {
			if q != pr.Root {
				rb.Recv(q, out.Block(bl, q))
			}
		}
		rb.Copy(out.Block(bl, pr.Root), mine)
		return b.Schedule()
	},
}

func init() { register(gatherLinear) }
