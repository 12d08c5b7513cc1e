// Package model is the executor that prices schedules instead of running
// them: each round costs alpha (latency) plus beta per byte moved, gamma per
// byte reduced and delta per byte copied locally, and a round starts only
// when this rank and every peer it talks to have finished the round before.
// The tuner compares algorithms with it, and tests check that the step and
// byte counts match the textbook formulas; it handles thousands of ranks in
// milliseconds.
package model

import (
	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/schedule"
)

// Machine holds the cost parameters, in seconds.
type Machine struct {
	Alpha float64 // per round with messages (latency)
	Beta  float64 // per byte sent or received (the larger of the two)
	Gamma float64 // per byte reduced
	Delta float64 // per byte copied locally
}

// Cost is the price of one call on all ranks.
type Cost struct {
	Time float64 // when the last rank finishes, in seconds

	// The maxima over ranks of:
	Rounds       int   // rounds that communicate
	Messages     int   // messages sent
	SentBytes    int64 // bytes sent
	ReducedBytes int64 // bytes reduced (the output of reduce steps)
	CopiedBytes  int64 // bytes copied locally
	ScratchBytes int64 // scratch memory
}

// Algorithm prices algorithm a on the call described by base (Rank is
// ignored) with elements of elemSize bytes.
func Algorithm(a *algorithms.Algorithm, base algorithms.Params, elemSize int, m Machine) Cost {
	scheds := make([]*schedule.Schedule, base.P)
	for r := range scheds {
		p := base
		p.Rank = r
		scheds[r] = a.Build(p)
	}
	return Run(scheds, elemSize, m)
}

// Run prices the schedules of all ranks of one call.
func Run(scheds []*schedule.Schedule, elemSize int, m Machine) Cost {
	p := len(scheds)
	var c Cost
	now := make([]float64, p)  // when each rank finished its last round
	next := make([]float64, p) // the same, one round later
	rounds := 0
	for _, s := range scheds {
		rounds = max(rounds, len(s.Rounds))
		c.ScratchBytes = max(c.ScratchBytes, int64(s.ScratchLen*elemSize))
		var st stats
		for i := range s.Rounds {
			st.add(&s.Rounds[i], elemSize)
		}
		c.Rounds = max(c.Rounds, st.rounds)
		c.Messages = max(c.Messages, st.messages)
		c.SentBytes = max(c.SentBytes, st.sent)
		c.ReducedBytes = max(c.ReducedBytes, st.reduced)
		c.CopiedBytes = max(c.CopiedBytes, st.copied)
	}
	for i := range rounds {
		for r, s := range scheds {
			next[r] = now[r]
			if i >= len(s.Rounds) {
				continue
			}
			round := &s.Rounds[i]
			var st stats
			st.add(round, elemSize)
			t := now[r]
			if round.Communicates() {
				// Wait for every peer of this round to be ready.
				for _, x := range round.Sends {
					t = max(t, now[x.Peer])
				}
				for _, x := range round.Recvs {
					t = max(t, now[x.Peer])
				}
				t += m.Alpha + m.Beta*float64(max(st.sent, st.received))
			}
			next[r] = t + m.Gamma*float64(st.reduced) + m.Delta*float64(st.copied)
		}
		now, next = next, now
	}
	for _, t := range now {
		c.Time = max(c.Time, t)
	}
	return c
}

// stats counts what rounds of one rank do.
type stats struct {
	rounds, messages                int
	sent, received, reduced, copied int64
}

func (s *stats) add(r *schedule.Round, elemSize int) {
	if r.Communicates() {
		s.rounds++
	}
	s.messages += len(r.Sends)
	for _, t := range r.Sends {
		s.sent += int64(t.Range.Len * elemSize)
	}
	for _, t := range r.Recvs {
		s.received += int64(t.Range.Len * elemSize)
	}
	for _, st := range r.Steps {
		if st.Kind == schedule.Reduce {
			s.reduced += int64(st.Dst.Len * elemSize)
		} else {
			s.copied += int64(st.Dst.Len * elemSize)
		}
	}
}
