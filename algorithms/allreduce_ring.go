package algorithms

import "github.com/gocoll/gocoll/schedule"

// Ring allreduce: the ring reduce-scatter followed by the ring allgather,
// as one schedule working in the output buffer.
//
// The vector is cut into p blocks of q or q+1 elements. In the
// reduce-scatter phase (p-1 rounds) partial results travel the ring until
// rank r holds block r complete in its output; in the allgather phase (p-1
// rounds) the complete blocks travel on. NCCL's primitive sequence for the
// same algorithm is send, recvReduceSend x (p-2), recvReduceCopySend,
// recvCopySend x (p-2), recv: 2(p-1) rounds.
//
// For 5 ranks (sN: sends block N, rN: receives block N, +: reduces it into
// the output; golden-tested against the schedule):
//
//	round  phase           rank 0   rank 1   rank 2   rank 3   rank 4
//	0      reduce-scatter  s4 r3+   s0 r4+   s1 r0+   s2 r1+   s3 r2+
//	1      reduce-scatter  s3 r2+   s4 r3+   s0 r4+   s1 r0+   s2 r1+
//	2      reduce-scatter  s2 r1+   s3 r2+   s4 r3+   s0 r4+   s1 r0+
//	3      reduce-scatter  s1 r0+   s2 r1+   s3 r2+   s4 r3+   s0 r4+
//	4      allgather       s0 r4    s1 r0    s2 r1    s3 r2    s4 r3
//	5      allgather       s4 r3    s0 r4    s1 r0    s2 r1    s3 r2
//	6      allgather       s3 r2    s4 r3    s0 r4    s1 r0    s2 r1
//	7      allgather       s2 r1    s3 r2    s4 r3    s0 r4    s1 r0
//
//	restrictions: commutative op
//	cost:         2(p-1) alpha + 2(p-1)/p n beta + (p-1)/p n gamma
//	memory:       one block (n/p elements) of scratch
//	wins:         large messages: bandwidth-optimal on any p.
//	reference:    Patarasuk, Yuan (2009); NCCL's ring allreduce.
var allreduceRing = &Algorithm{
	Name:        "ring",
	Collective:  Allreduce,
	Commutative: true,
	Summary:     "ring reduce-scatter, then ring allgather, in the output buffer",
	Cost:        "2(p-1)α + 2(p-1)/p·nβ + (p-1)/p·nγ",
	Build: func(pr Params) *schedule.Schedule {
		p, r := pr.P, pr.Rank
		if p == 1 {
			return copyOnly(in.At(0, pr.Count), out.At(0, pr.Count))
		}
		bl := schedule.EvenBlocks(pr.Count, p)
		var b schedule.Builder
		b.Scratch(maxCount(bl))

		// Reduce-scatter phase: receive into scratch, reduce into the output.
		recv := func(k, blk int) schedule.Range { return tmp.At(0, bl.Counts[blk]) }
		acc := func(k, blk int) schedule.Range { return out.Block(bl, blk) }
		ringReduceScatter(&b, p, r, bl, recv, acc)

		// Allgather phase: pass the complete blocks on.
		ringAllgather(&b, p, r, bl, out.Block(bl, r))
		return b.Schedule()
	},
}

func init() { register(allreduceRing) }
