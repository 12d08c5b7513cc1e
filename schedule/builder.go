package schedule

// Builder appends rounds to a schedule. Algorithms call Next once per round
// on every rank, also on ranks that have nothing to do in that round, so
// that round i means the same round on every rank: the host executor tags
// messages with the round index.
//
// Zero-length transfers and steps are dropped: both sides of a message
// compute the same length, so both drop it.
type Builder struct {
	s Schedule
}

// RoundBuilder adds transfers and steps to one round.
type RoundBuilder struct {
	b *Builder
	i int
}

// Next opens a new round and returns it.
func (b *Builder) Next() RoundBuilder {
	b.s.Rounds = append(b.s.Rounds, Round{})
	return RoundBuilder{b, len(b.s.Rounds) - 1}
}

// Skip opens n rounds in which this rank does nothing.
func (b *Builder) Skip(n int) {
	for range n {
		b.Next()
	}
}

// Scratch makes sure the schedule reserves at least n elements of scratch.
func (b *Builder) Scratch(n int) {
	b.s.ScratchLen = max(b.s.ScratchLen, n)
}

// Schedule returns the built schedule, without trailing empty rounds. The
// transfers and steps of all rounds are packed into two arrays, so that an
// executor walking the rounds reads consecutive memory.
func (b *Builder) Schedule() *Schedule {
	s := b.s
	for len(s.Rounds) > 0 {
		r := &s.Rounds[len(s.Rounds)-1]
		if r.Communicates() || len(r.Steps) > 0 {
			break
		}
		s.Rounds = s.Rounds[:len(s.Rounds)-1]
	}
	nt, ns := 0, 0
	for _, r := range s.Rounds {
		nt += len(r.Sends) + len(r.Recvs)
		ns += len(r.Steps)
	}
	transfers, steps := make([]Transfer, 0, nt), make([]Step, 0, ns)
	pack := func(all *[]Transfer, part []Transfer) []Transfer {
		if len(part) == 0 {
			return nil
		}
		*all = append(*all, part...)
		return (*all)[len(*all)-len(part) : len(*all) : len(*all)]
	}
	rounds := make([]Round, len(s.Rounds))
	for i, r := range s.Rounds {
		rounds[i].Sends = pack(&transfers, r.Sends)
		rounds[i].Recvs = pack(&transfers, r.Recvs)
		if len(r.Steps) > 0 {
			steps = append(steps, r.Steps...)
			rounds[i].Steps = steps[len(steps)-len(r.Steps) : len(steps) : len(steps)]
		}
	}
	s.Rounds = rounds
	return &s
}

func (rb RoundBuilder) round() *Round { return &rb.b.s.Rounds[rb.i] }

// Send adds a message of src to peer.
func (rb RoundBuilder) Send(peer int, src Range) RoundBuilder {
	if src.Len > 0 {
		r := rb.round()
		r.Sends = append(r.Sends, Transfer{peer, src})
	}
	return rb
}

// Recv adds a message from peer into dst.
func (rb RoundBuilder) Recv(peer int, dst Range) RoundBuilder {
	if dst.Len > 0 {
		r := rb.round()
		r.Recvs = append(r.Recvs, Transfer{peer, dst})
	}
	return rb
}

// SendRecv adds a send of src to peer and a receive of dst from the same peer.
func (rb RoundBuilder) SendRecv(peer int, src, dst Range) RoundBuilder {
	return rb.Send(peer, src).Recv(peer, dst)
}

// Copy adds the step dst = src, run after the round's messages.
func (rb RoundBuilder) Copy(dst, src Range) RoundBuilder {
	if src.Len != dst.Len {
		panic("schedule: copy between ranges of different lengths")
	}
	if src.Len > 0 && src != dst {
		r := rb.round()
		r.Steps = append(r.Steps, Step{Kind: Copy, Dst: dst, A: src})
	}
	return rb
}

// Reduce adds the step dst = a op b, run after the round's messages.
func (rb RoundBuilder) Reduce(dst, a, b Range) RoundBuilder {
	if a.Len != dst.Len || b.Len != dst.Len {
		panic("schedule: reduce between ranges of different lengths")
	}
	if dst.Len > 0 {
		r := rb.round()
		r.Steps = append(r.Steps, Step{Kind: Reduce, Dst: dst, A: a, B: b})
	}
	return rb
}

// Len returns the number of rounds opened so far.
func (b *Builder) Len() int { return len(b.s.Rounds) }

// Round returns round i, opened earlier, to add to it.
func (b *Builder) Round(i int) RoundBuilder { return RoundBuilder{b, i} }
