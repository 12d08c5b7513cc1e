package model

import (
	"math"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/intranode"
)

// shmCost prices a Direct (shm) algorithm of package intranode, which is
// not a schedule: the p ranks of one node each write into their slot of a
// shared segment, publish a step, and read what they need from every
// rank's slot. Per step a rank pays one synchronisation (Sync: a flag
// instead of a message); every byte it copies, into its slot or out of
// another rank's slot or buffer, costs Delta (one copy, where a message of
// the transport makes two: NodeBeta), every byte it reduces Gamma (the
// reduction reads the other ranks' slots itself). n is the call's bytes at scale 1 (the vector, or the whole
// output of an allgather).
//
//	allreduce, n <= slot:  one step: copy n in, reduce p slots (p-1 of
//	                       them read from others)
//	allreduce, larger:     per chunk of a slot, two steps: copy the chunk
//	                       in (less this rank's slice), reduce one slice
//	                       of p slots into the shared result, copy the
//	                       result out (all but this rank's slice read)
//	reduce-scatter:        per step a piece of every block: copy the
//	                       pieces in, reduce this rank's piece of p slots
//	allgather, blocks of   two steps: read every peer's block straight
//	CMAMin and more:       from its buffer (process_vm_readv)
//	allgather, smaller:    per slot of a block, one step: copy it in, copy
//	                       every slot out
func shmCost(a *algorithms.Algorithm, base algorithms.Params, elemSize int, scale int64, m Machine) Cost {
	na := m.sync()
	p := float64(base.P)
	e := int64(elemSize)
	slot := int64(intranode.DefaultSlot)
	var c Cost
	var steps, local, remote, reduced float64 // per rank: steps, bytes copied (own, from others), reduced
	switch a.Collective {
	case algorithms.Allreduce:
		n := int64(base.Count) * e * scale
		if n <= slot {
			steps, local, reduced = 1, float64(n), (p-1)*float64(n)
			break
		}
		chunk := slot / e * e
		chunks := float64((n + chunk - 1) / chunk)
		f := float64(n) * (p - 1) / p
		steps, local, remote, reduced = 2*chunks, f, f+float64(n)/p, f
	case algorithms.ReduceScatter, algorithms.ReduceScatterBlock:
		longest, total := blocks(base.Counts)
		piece := max(slot/int64(base.P)/e, 1) * e
		l := longest * e * scale
		mine := float64(total*e*scale) / p
		steps = float64(max((l+piece-1)/piece, 1))
		local, reduced = float64(total*e*scale), (p-1)*mine
	case algorithms.Allgather:
		longest, total := blocks(base.Counts)
		l, n := longest*e*scale, total*e*scale
		mine := float64(n) / p
		if l >= int64(intranode.CMAMin) && base.P > 1 {
			steps, local, remote = 2, mine, float64(n)-mine
			break
		}
		steps = float64(max((l+slot-1)/slot, 1))
		local, remote = 2*mine, float64(n)-mine
	default:
		return Cost{Time: math.Inf(1)}
	}
	if base.P == 1 {
		steps, remote, reduced = 0, 0, 0
	}
	c.Time = steps*na + m.Delta*(local+remote) + m.Gamma*reduced
	c.Rounds = int(steps)
	c.CopiedBytes = int64(local)
	c.ReducedBytes = int64(reduced)
	return c
}

// blocks returns the longest and the sum of counts.
func blocks(counts []int) (longest, total int64) {
	for _, n := range counts {
		longest = max(longest, int64(n))
		total += int64(n)
	}
	return longest, total
}
