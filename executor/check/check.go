// Package check is the symbolic executor: it runs the schedules of all p
// ranks of one collective call without any data and proves that, at the end,
// every output element of every rank holds exactly the right contributions,
// each exactly once, combined in rank order where the op is not commutative.
//
// Instead of numbers, every element carries the ordered list of ranks whose
// inputs were combined into it and the index of the vector element it
// stands for. Ranges of elements with the same history are kept as one
// segment, so a check costs time proportional to the number of steps, not to
// the message size: all algorithms can be checked for p up to 1024 in a unit
// test.
//
// Besides the final contents, the executor rejects schedules that could not
// run correctly on a real transport: unmatched or mis-sized messages, sends
// to oneself, out-of-bounds ranges, writes to the input buffer, reads of
// uninitialised memory, a receive that lands where a send of the same round
// reads or where another receive lands, and steps whose destination
// partially overlaps an operand.
package check

import (
	"fmt"
	"slices"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/schedule"
)

// Algorithm checks the named algorithm on every rank of the call described
// by base (base.Rank is ignored).
func Algorithm(c algorithms.Collective, a *algorithms.Algorithm, base algorithms.Params) error {
	if err := a.Check(base); err != nil {
		return err
	}
	return Run(c, base, a.Build)
}

// Run builds the schedule of every rank with build and verifies the call.
func Run(c algorithms.Collective, base algorithms.Params, build func(algorithms.Params) *schedule.Schedule) error {
	return run(c, base, build, false)
}

// run is Run; canonical asks for the canonical association (Canonical).
func run(c algorithms.Collective, base algorithms.Params, build func(algorithms.Params) *schedule.Schedule, canonical bool) error {
	p := base.P
	ranks := make([]*rankState, p)
	sl := &slab{}
	sl.add(terms{{-1, -1}}) // gathered
	for r := range ranks {
		pr := base
		pr.Rank = r
		ranks[r] = newRankState(c, pr, build(pr), sl)
		ranks[r].canonical = canonical
	}
	rounds := 0
	for _, rs := range ranks {
		rounds = max(rounds, len(rs.sched.Rounds))
	}
	for i := range rounds {
		if err := runRound(ranks, i); err != nil {
			return err
		}
	}
	for r, rs := range ranks {
		if err := rs.verify(c, base, r); err != nil {
			return fmt.Errorf("rank %d: %v", r, err)
		}
	}
	return nil
}

type rankState struct {
	rank  int
	sched *schedule.Schedule
	in    *symBuf // nil when in place
	out   *symBuf
	tmp   *symBuf
	inLen int
	// alias is where Input starts inside Output when in place, else -1.
	alias int
	// checkLen is how much of Output holds the result.
	checkLen    int
	commutative bool
	// canonical: combinations are nodes of the canonical tree
	// (canonical.go) instead of sets of ranks.
	canonical bool
	p         int
	slab      *slab
	// a, b, arena and joined are reused from step to step.
	a, b, arena []seg
	joined      terms

	// inbox holds the messages sent to this rank in the current round.
	inbox []message
	// sendLocs and recvLocs are reused from round to round.
	sendLocs, recvLocs []loc
}

func newRankState(c algorithms.Collective, p algorithms.Params, s *schedule.Schedule, sl *slab) *rankState {
	rs := &rankState{rank: p.Rank, p: p.P, sched: s, alias: -1, tmp: newSymBuf(s.ScratchLen, sl), commutative: p.Commutative, slab: sl}
	me := sl.add(terms{{int32(p.Rank), int32(p.Rank)}})
	if c == algorithms.Allgather || c == algorithms.Gather {
		// Nothing is reduced, and element i of the gathered vector comes
		// from one rank only: the index alone says whose it is. Sharing one
		// term list lets the output merge into one segment.
		me = gathered
	}
	var outLen, base int
	switch c {
	case algorithms.Allreduce:
		rs.inLen, outLen, rs.checkLen = p.Count, p.Count, p.Count
		if p.InPlace {
			rs.alias = 0
		}
	case algorithms.ReduceScatter, algorithms.ReduceScatterBlock:
		total := p.Total()
		rs.inLen, outLen, rs.checkLen = total, p.Counts[p.Rank], p.Counts[p.Rank]
		if p.InPlace {
			rs.alias, outLen = 0, total
		}
	case algorithms.Allgather, algorithms.Gather:
		bl := p.Blocks()
		rs.inLen, outLen, rs.checkLen = p.Counts[p.Rank], bl.Total, bl.Total
		base = bl.Displs[p.Rank]
		if c == algorithms.Gather && p.Rank != p.Root {
			outLen, rs.checkLen = 0, 0 // recvbuf is not significant
		} else if p.InPlace {
			rs.alias = base
		}
	case algorithms.Bcast:
		// One buffer: the input at the root, the output everywhere.
		rs.inLen, outLen, rs.checkLen = 0, p.Count, p.Count
		if p.Rank == p.Root {
			rs.inLen, rs.alias = p.Count, 0
		}
	case algorithms.Reduce:
		rs.inLen, outLen, rs.checkLen = p.Count, p.Count, p.Count
		if p.Rank != p.Root {
			outLen, rs.checkLen = 0, 0
		} else if p.InPlace {
			rs.alias = 0
		}
	}
	rs.out = newSymBuf(outLen, sl)
	input := []seg{{len: rs.inLen, base: base, id: me}}
	if rs.alias >= 0 {
		rs.out.write(rs.alias, input)
	} else {
		rs.in = newSymBuf(rs.inLen, sl)
		rs.in.write(0, input)
	}
	return rs
}

// loc is a range resolved to the buffer that really holds it.
type loc struct {
	buf *symBuf
	off int
	n   int
}

func (l loc) overlaps(m loc) bool {
	return l.buf == m.buf && l.n > 0 && m.n > 0 && l.off < m.off+m.n && m.off < l.off+l.n
}

func (rs *rankState) resolve(r schedule.Range, write bool) (loc, error) {
	if r.Off < 0 || r.Len < 0 {
		return loc{}, fmt.Errorf("negative range %v", r)
	}
	switch r.Buf {
	case schedule.Input:
		if write {
			return loc{}, fmt.Errorf("writes to the input buffer (%v)", r)
		}
		if r.End() > rs.inLen {
			return loc{}, fmt.Errorf("range %v beyond input of %d elements", r, rs.inLen)
		}
		if rs.alias >= 0 {
			return loc{rs.out, rs.alias + r.Off, r.Len}, nil
		}
		return loc{rs.in, r.Off, r.Len}, nil
	case schedule.Output:
		if r.End() > rs.out.n {
			return loc{}, fmt.Errorf("range %v beyond output of %d elements", r, rs.out.n)
		}
		return loc{rs.out, r.Off, r.Len}, nil
	case schedule.Scratch:
		if r.End() > rs.tmp.n {
			return loc{}, fmt.Errorf("range %v beyond scratch of %d elements", r, rs.tmp.n)
		}
		return loc{rs.tmp, r.Off, r.Len}, nil
	}
	return loc{}, fmt.Errorf("unknown buffer in %v", r)
}

// readDefined appends the segments of l to dst and fails if any element of
// it was never written.
func readDefined(dst []seg, l loc, what schedule.Range) ([]seg, error) {
	data := l.buf.read(dst, l.off, l.n)
	for _, s := range data[len(dst):] {
		if !s.def() {
			return nil, fmt.Errorf("reads uninitialised elements in %v", what)
		}
	}
	return data, nil
}

type message struct {
	from int
	data []seg
	rng  schedule.Range
}

func runRound(ranks []*rankState, i int) error {
	p := len(ranks)
	active := func(rs *rankState) *schedule.Round {
		if i >= len(rs.sched.Rounds) {
			return nil
		}
		return &rs.sched.Rounds[i]
	}
	// Every send reads its source as it is when the round begins.
	for r, rs := range ranks {
		rs.arena = rs.arena[:0]
		round := active(rs)
		if round == nil {
			continue
		}
		for _, t := range round.Sends {
			if t.Peer < 0 || t.Peer >= p || t.Peer == r {
				return fmt.Errorf("rank %d round %d: send to invalid peer %d", r, i, t.Peer)
			}
			l, err := rs.resolve(t.Range, false)
			if err != nil {
				return fmt.Errorf("rank %d round %d: send %v: %v", r, i, t.Range, err)
			}
			n := len(rs.arena)
			rs.arena, err = readDefined(rs.arena, l, t.Range)
			if err != nil {
				return fmt.Errorf("rank %d round %d: send to %d %v", r, i, t.Peer, err)
			}
			data := rs.arena[n:len(rs.arena):len(rs.arena)]
			to := ranks[t.Peer]
			to.inbox = append(to.inbox, message{r, data, t.Range})
		}
	}
	// Then each rank receives and runs its steps: they change only its own
	// buffers, which no other rank reads until the next round.
	for r, rs := range ranks {
		round := active(rs)
		if round == nil {
			if len(rs.inbox) > 0 {
				m := rs.inbox[0]
				return fmt.Errorf("rank %d round %d: sends %v to %d, which does not receive it", m.from, i, m.rng, r)
			}
			continue
		}
		rs.sendLocs, rs.recvLocs = rs.sendLocs[:0], rs.recvLocs[:0]
		for _, t := range round.Sends {
			l, _ := rs.resolve(t.Range, false)
			rs.sendLocs = append(rs.sendLocs, l)
		}
		for _, t := range round.Recvs {
			if t.Peer < 0 || t.Peer >= p || t.Peer == r {
				return fmt.Errorf("rank %d round %d: receive from invalid peer %d", r, i, t.Peer)
			}
			l, err := rs.resolve(t.Range, true)
			if err != nil {
				return fmt.Errorf("rank %d round %d: receive %v: %v", r, i, t.Range, err)
			}
			for _, s := range rs.sendLocs {
				if l.overlaps(s) {
					return fmt.Errorf("rank %d round %d: receive into %v overlaps a send of the same round", r, i, t.Range)
				}
			}
			for _, o := range rs.recvLocs {
				if l.overlaps(o) {
					return fmt.Errorf("rank %d round %d: receive into %v overlaps another receive", r, i, t.Range)
				}
			}
			rs.recvLocs = append(rs.recvLocs, l)
			// Take the first message still waiting from that peer.
			k := slices.IndexFunc(rs.inbox, func(m message) bool { return m.from == t.Peer })
			if k < 0 {
				return fmt.Errorf("rank %d round %d: receives %v from %d, which sends nothing more", r, i, t.Range, t.Peer)
			}
			m := rs.inbox[k]
			rs.inbox = slices.Delete(rs.inbox, k, k+1)
			if m.rng.Len != t.Range.Len {
				return fmt.Errorf("rank %d round %d: receives %d elements from %d, which sends %d (%v)", r, i, t.Range.Len, t.Peer, m.rng.Len, m.rng)
			}
			l.buf.write(l.off, m.data)
		}
		if len(rs.inbox) > 0 {
			m := rs.inbox[0]
			return fmt.Errorf("rank %d round %d: sends %v to %d, which does not receive it", m.from, i, m.rng, r)
		}
		for _, st := range round.Steps {
			if err := rs.step(st); err != nil {
				return fmt.Errorf("rank %d round %d: step %v: %v", r, i, st, err)
			}
		}
	}
	return nil
}

func (rs *rankState) step(st schedule.Step) error {
	dst, err := rs.resolve(st.Dst, true)
	if err != nil {
		return err
	}
	a, err := rs.resolve(st.A, false)
	if err != nil {
		return err
	}
	if a.n != dst.n {
		return fmt.Errorf("length mismatch")
	}
	if dst.overlaps(a) && dst != a {
		return fmt.Errorf("destination partially overlaps operand %v", st.A)
	}
	ad, err := readDefined(rs.a[:0], a, st.A)
	rs.a = ad
	if err != nil {
		return err
	}
	if st.Kind == schedule.Copy {
		dst.buf.write(dst.off, ad)
		return nil
	}
	b, err := rs.resolve(st.B, false)
	if err != nil {
		return err
	}
	if b.n != dst.n {
		return fmt.Errorf("length mismatch")
	}
	if dst.overlaps(b) && dst != b {
		return fmt.Errorf("destination partially overlaps operand %v", st.B)
	}
	bd, err := readDefined(rs.b[:0], b, st.B)
	rs.b = bd
	if err != nil {
		return err
	}
	out, err := rs.combine(rs.arena[len(rs.arena):], ad, bd)
	if err != nil {
		return err
	}
	dst.buf.write(dst.off, out)
	return nil
}

// combine reduces two equally long segment lists element by element,
// appending the result to out.
func (rs *rankState) combine(out, a, b []seg) ([]seg, error) {
	join := concat
	if rs.commutative {
		join = union
	}
	i, j := 0, 0
	ao, bo := 0, 0 // elements of a[i], b[j] already consumed
	for i < len(a) && j < len(b) {
		n := min(a[i].len-ao, b[j].len-bo)
		if a[i].base+ao != b[j].base+bo {
			return nil, fmt.Errorf("combines vector element %d with element %d", a[i].base+ao, b[j].base+bo)
		}
		var id termID
		if rs.canonical {
			id = rs.slab.node(a[i].id, b[j].id, rs.p)
		} else {
			var x, y [1]span
			rs.joined = join(rs.joined[:0], rs.slab.get(a[i].id, &x), rs.slab.get(b[j].id, &y))
			id = rs.slab.add(rs.joined)
		}
		out = append(out, seg{len: n, base: a[i].base + ao, id: id})
		ao += n
		bo += n
		if ao == a[i].len {
			i, ao = i+1, 0
		}
		if bo == b[j].len {
			j, bo = j+1, 0
		}
	}
	return out, nil
}

// verify checks the final output of rank r.
func (rs *rankState) verify(c algorithms.Collective, p algorithms.Params, r int) error {
	base := 0
	if c == algorithms.ReduceScatter || c == algorithms.ReduceScatterBlock {
		base = p.Blocks().Displs[r]
	}
	for _, s := range rs.out.read(nil, 0, rs.checkLen) {
		if !s.def() {
			return fmt.Errorf("output [%d:%d] never written", s.off, s.end())
		}
		var buf [1]span
		t := rs.slab.get(s.id, &buf)
		if s.base != base+s.off {
			return fmt.Errorf("output [%d:%d] holds vector elements %d.. instead of %d..", s.off, s.end(), s.base, base+s.off)
		}
		if c == algorithms.Bcast {
			if len(t) != 1 || t[0] != (span{int32(p.Root), int32(p.Root)}) {
				return fmt.Errorf("output [%d:%d] holds %v, want the root's data", s.off, s.end(), t)
			}
			continue
		}
		if c.Reduces() {
			if rs.canonical && !t.isAll(p.P) {
				return fmt.Errorf("output element %d (vector element %d) is %s, not T(0,%d)", s.off, s.base, rs.slab.assoc(s.id), p.P)
			}
			if !t.isAll(p.P) {
				want := "every rank exactly once"
				if !p.Commutative {
					want += ", in rank order"
				}
				return fmt.Errorf("output [%d:%d] combines %v, want %s", s.off, s.end(), t, want)
			}
			continue
		}
		// An allgather output element must hold its owner's input, as is:
		// the index checked above says it is the owner's.
		if s.id != gathered {
			return fmt.Errorf("output [%d:%d] combines inputs %v; an allgather must copy them", s.off, s.end(), t)
		}
	}
	return nil
}

// gathered is the term list of every allgather input element.
const gathered termID = 0
