package check_test

import (
	"strings"
	"testing"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/executor/check"
	"github.com/gocoll/gocoll/schedule"
)

// mutate returns a builder that builds the named algorithm's schedule and
// then lets f damage rank 1's copy of it.
func mutate(t *testing.T, c algorithms.Collective, name string, f func(s *schedule.Schedule)) func(algorithms.Params) *schedule.Schedule {
	a, err := algorithms.Lookup(c, name)
	if err != nil {
		t.Fatal(err)
	}
	return func(p algorithms.Params) *schedule.Schedule {
		s := a.Build(p)
		if p.Rank == 1 {
			f(s)
		}
		return s
	}
}

// firstStep returns the first step of the given kind in s.
func firstStep(s *schedule.Schedule, kind schedule.StepKind) *schedule.Step {
	for i := range s.Rounds {
		for j := range s.Rounds[i].Steps {
			if st := &s.Rounds[i].Steps[j]; st.Kind == kind {
				return st
			}
		}
	}
	return nil
}

// The check executor must reject every kind of broken schedule; each case
// damages a correct one and expects an error that says what went wrong.
func TestCheckRejectsBrokenSchedules(t *testing.T) {
	ar := algorithms.Params{P: 4, Count: 20, Commutative: true}
	rs := algorithms.Params{P: 4, Counts: []int{5, 5, 5, 5}, Commutative: true}
	nonComm := ar
	nonComm.Commutative = false
	inPlace := ar
	inPlace.InPlace = true
	cases := []struct {
		name   string
		c      algorithms.Collective
		alg    string
		params algorithms.Params
		damage func(s *schedule.Schedule)
		want   string
	}{
		{"reduce turned into copy (lost contribution)", algorithms.Allreduce, "ring", ar, func(s *schedule.Schedule) {
			st := firstStep(s, schedule.Reduce)
			st.Kind, st.B = schedule.Copy, schedule.Range{}
		}, "combines"},
		{"contribution counted twice", algorithms.Allreduce, "recursive_doubling", ar, func(s *schedule.Schedule) {
			st := firstStep(s, schedule.Reduce)
			st.B = st.A // reduce the received vector with itself
		}, "combines"},
		{"operands swapped under a non-commutative op", algorithms.Allreduce, "recursive_doubling", nonComm, func(s *schedule.Schedule) {
			st := firstStep(s, schedule.Reduce)
			st.A, st.B = st.B, st.A
		}, "in rank order"},
		{"wrong shard order", algorithms.ReduceScatterBlock, "pairwise", rs, func(s *schedule.Schedule) {
			// Send rank 1's contribution to the wrong blocks: swap two sends.
			r0, r1 := &s.Rounds[0], &s.Rounds[1]
			r0.Sends[0].Range, r1.Sends[0].Range = r1.Sends[0].Range, r0.Sends[0].Range
		}, "vector element"},
		{"message size mismatch", algorithms.Allreduce, "ring", ar, func(s *schedule.Schedule) {
			s.Rounds[0].Sends[0].Range.Len--
		}, "sends"},
		{"message never received", algorithms.Allgather, "ring", algorithms.Params{P: 4, Counts: []int{3, 3, 3, 3}}, func(s *schedule.Schedule) {
			s.Rounds[0].Sends = append(s.Rounds[0].Sends, s.Rounds[0].Sends[0])
		}, "does not receive"},
		{"send to itself", algorithms.Allgather, "ring", algorithms.Params{P: 4, Counts: []int{3, 3, 3, 3}}, func(s *schedule.Schedule) {
			s.Rounds[0].Sends[0].Peer = 1
		}, "invalid peer"},
		{"write to the input", algorithms.Allreduce, "ring", ar, func(s *schedule.Schedule) {
			firstStep(s, schedule.Reduce).Dst.Buf = schedule.Input
		}, "input buffer"},
		{"read of uninitialised scratch", algorithms.Allreduce, "ring", ar, func(s *schedule.Schedule) {
			s.Rounds[0].Sends[0].Range.Buf = schedule.Scratch
			s.Rounds[0].Sends[0].Range.Off = 0
		}, "uninitialised"},
		{"out of bounds", algorithms.Allreduce, "ring", ar, func(s *schedule.Schedule) {
			s.Rounds[0].Recvs[0].Range.Off = 100
		}, "beyond"},
		{"receive over a send of the same round", algorithms.Allreduce, "ring", ar, func(s *schedule.Schedule) {
			s.Rounds[1].Recvs[0].Range = s.Rounds[1].Sends[0].Range
		}, "overlaps a send"},
		{"partial overlap in a step", algorithms.Allreduce, "ring", inPlace, func(s *schedule.Schedule) {
			st := firstStep(s, schedule.Reduce)
			st.Dst.Off-- // in place, the output overlaps the input operand
		}, "partially overlaps"},
		{"output left unwritten", algorithms.Allgather, "ring", algorithms.Params{P: 4, Counts: []int{3, 3, 3, 3}}, func(s *schedule.Schedule) {
			s.Rounds[0].Steps = nil // drop the copy of its own block
		}, "never written"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := check.Run(tc.c, tc.params, mutate(t, tc.c, tc.alg, tc.damage))
			if err == nil {
				t.Fatal("broken schedule passed the check")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not mention %q", err, tc.want)
			}
		})
	}
}

// In place, Input and Output are the same memory: a schedule that reads its
// input after writing its output is right out of place and wrong in place.
func TestCheckInPlaceAliasing(t *testing.T) {
	build := func(pr algorithms.Params) *schedule.Schedule {
		var b schedule.Builder
		n, peer := pr.Count, 1-pr.Rank
		b.Scratch(n)
		r := func(buf schedule.Buffer) schedule.Range { return schedule.Range{Buf: buf, Len: n} }
		b.Next().SendRecv(peer, r(schedule.Input), r(schedule.Scratch)).
			Reduce(r(schedule.Output), r(schedule.Scratch), r(schedule.Input))
		// Sends the input again: in place, that is the reduced output.
		b.Next().SendRecv(peer, r(schedule.Input), r(schedule.Scratch)).
			Reduce(r(schedule.Output), r(schedule.Input), r(schedule.Scratch))
		return b.Schedule()
	}
	p := algorithms.Params{P: 2, Count: 4, Commutative: true}
	if err := check.Run(algorithms.Allreduce, p, build); err != nil {
		t.Fatalf("out of place: %v", err)
	}
	p.InPlace = true
	if err := check.Run(algorithms.Allreduce, p, build); err == nil || !strings.Contains(err.Error(), "exactly once") {
		t.Fatalf("in place: got %v, want a duplicate contribution", err)
	}
}
