package algorithms

import (
	"fmt"

	"github.com/gocoll/gocoll/schedule"
)

// Composed algorithms (the hierarchical ones) run flat algorithms on
// sub-communicators: the ranks of one node, or the ranks with the same local
// rank on every node. They build the flat algorithm's schedule for the
// sub-communicator, as if it were the whole call, and embed it: peers are
// renumbered to ranks of the communicator, each of the sub-schedule's three
// buffers is moved to a place in this schedule's buffers, and the phase is
// padded to a length every rank agrees on, so that round i means the same
// round on every rank (the host executor tags messages with it).

// place is where a buffer of a sub-schedule lives in the composed schedule:
// element 0 of it is element off of buf.
type place struct {
	buf buffer
	off int
}

// place returns the place off elements into the buffer.
func (b buffer) place(off int) place { return place{b, off} }

// add returns the place off elements further on.
func (p place) add(off int) place { return place{p.buf, p.off + off} }

// embedding maps the schedule of one rank of a sub-communicator into the
// composed schedule.
type embedding struct {
	// ranks holds the communicator rank of each sub-communicator rank.
	ranks []int
	// in, out and tmp are where the sub-schedule's Input, Output and
	// Scratch live.
	in, out, tmp place
}

func (e *embedding) rng(r schedule.Range) schedule.Range {
	p := e.in
	switch r.Buf {
	case schedule.Output:
		p = e.out
	case schedule.Scratch:
		p = e.tmp
	}
	return schedule.Range{Buf: schedule.Buffer(p.buf), Off: p.off + r.Off, Len: r.Len}
}

// embed appends s to b as the next `rounds` rounds (s has at most that
// many; the rest are empty) and reserves the scratch its places reach into.
func (e *embedding) embed(b *schedule.Builder, s *schedule.Schedule, rounds int) {
	if len(s.Rounds) > rounds {
		panic(fmt.Sprintf("algorithms: a sub-schedule of %d rounds in a phase of %d", len(s.Rounds), rounds))
	}
	reserve := func(r schedule.Range) schedule.Range {
		if r.Buf == schedule.Scratch {
			b.Scratch(r.End())
		}
		return r
	}
	for i := range s.Rounds {
		sr := &s.Rounds[i]
		rb := b.Next()
		for _, t := range sr.Sends {
			rb.Send(e.ranks[t.Peer], reserve(e.rng(t.Range)))
		}
		for _, t := range sr.Recvs {
			rb.Recv(e.ranks[t.Peer], reserve(e.rng(t.Range)))
		}
		for _, st := range sr.Steps {
			dst, a := reserve(e.rng(st.Dst)), reserve(e.rng(st.A))
			if st.Kind == schedule.Copy {
				rb.Copy(dst, a)
			} else {
				rb.Reduce(dst, a, reserve(e.rng(st.B)))
			}
		}
	}
	b.Skip(rounds - len(s.Rounds))
}

// run builds flat algorithm a for rank sub.Rank of the sub-communicator
// (sub.P ranks, e.ranks) and embeds it as the next `rounds` rounds.
func (e *embedding) run(b *schedule.Builder, a *Algorithm, sub Params, rounds int) {
	e.embed(b, a.Build(sub), rounds)
}

// flatRounds returns the number of rounds (local ones included) that flat
// algorithm a's schedules span on q ranks: the longest schedule of any rank,
// which is what a phase running a on q ranks must leave room for. A test
// builds every rank's schedule to keep it exact.
func flatRounds(a *Algorithm, q int) int {
	if q == 1 {
		return 1 // copyOnly
	}
	f := schedule.NewFold(q)
	lg := schedule.Log2(f.Pof2)
	fold := 0 // the fold and unfold rounds
	if f.Rem > 0 {
		fold = 2
	}
	switch a {
	case allreduceRecursiveDoubling:
		return fold + lg
	case allreduceRabenseifner:
		return fold + 2*lg
	case allreduceRing:
		return 2 * (q - 1)
	case reduceScatterRing, reduceScatterPairwise, allgatherRing:
		return q - 1
	case reduceScatterRecursiveHalving, reduceScatterRecursiveDoublingExchange:
		return fold/2 + lg + 1 // fold, halving, unfold (also a local copy or the exchange)
	case reduceScatterRecursiveDoubling:
		return 1 + lg + 1 // bit-reversing copy or fold, halving, unfold
	case allgatherRecursiveDoubling:
		return fold + lg
	case allgatherBruck:
		return schedule.Log2(ceilPow2(q))
	case allreduceTreeDoubling, reduceScatterTreeDoubling:
		return schedule.Log2(ceilPow2(q))
	case allreduceReduceBcast, reduceScatterBinomial:
		return 2 * schedule.Log2(ceilPow2(q)) // reduce, then broadcast or scatter
	case allreducePairwiseTreeRing:
		return 2 * (q - 1)
	case reduceScatterPairwiseTree:
		return q - 1
	}
	panic("algorithms: no round count for " + a.Collective.String() + " " + a.Name)
}

// ceilPow2 returns the smallest power of two >= q.
func ceilPow2(q int) int {
	p := 1
	for p < q {
		p *= 2
	}
	return p
}
