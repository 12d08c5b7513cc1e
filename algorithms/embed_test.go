package algorithms

import (
	"testing"

	"github.com/gocoll/gocoll/schedule"
)

// flatRounds must be the longest schedule of any rank, or phases of
// composed algorithms misalign (too short: embed panics; too long: idle
// rounds). Every flat schedule algorithm, every q up to 70, counts with and
// without zeros.
func TestFlatRoundsIsExact(t *testing.T) {
	for _, c := range Collectives {
		for _, a := range All(c) {
			if !a.IsSchedule() || a.Restrict != nil || c == ReduceScatterBlock {
				continue // not flat, or served by the ReduceScatter entry
			}
			for q := 1; q <= 70; q++ {
				for _, zeros := range []bool{false, true} {
					longest := 0
					for r := range q {
						p := Params{P: q, Rank: r, Count: 3*q + 1, Commutative: true}
						if c != Allreduce {
							p.Count, p.Counts = 0, make([]int, q)
							for i := range p.Counts {
								p.Counts[i] = 2
								if zeros && i%3 == 1 {
									p.Counts[i] = 0
								}
							}
						}
						longest = max(longest, len(a.Build(p).Rounds))
					}
					if got := flatRounds(a, q); got != longest {
						t.Errorf("%s %s q=%d zeros=%v: flatRounds %d, longest schedule %d", c, a.Name, q, zeros, got, longest)
					}
				}
			}
		}
	}
}

// embed renumbers peers, moves each buffer to its place, reserves the
// scratch it reaches into and pads the phase.
func TestEmbed(t *testing.T) {
	var sb schedule.Builder
	sb.Scratch(2)
	sb.Next().Send(1, in.At(0, 2)).Recv(1, tmp.At(0, 2)).Reduce(out.At(0, 2), tmp.At(0, 2), in.At(0, 2))
	sb.Next().Recv(0, out.At(2, 1)).Copy(out.At(3, 1), in.At(1, 1))
	s := sb.Schedule()

	var b schedule.Builder
	b.Next() // a round before the phase
	e := embedding{ranks: []int{7, 3}, in: out.place(10), out: tmp.place(4), tmp: tmp.place(20)}
	e.embed(&b, s, 4)
	got := b.Schedule()
	want := "round 0:\n" +
		"round 1: send out[10:12]->3 recv tmp[20:22]<-3; tmp[4:6] = tmp[20:22] op out[10:12]\n" +
		"round 2: recv tmp[6:7]<-7; tmp[7:8] = out[11:12]\n"
	if got.String() != want {
		t.Errorf("embedded:\n%s\nwant:\n%s", got, want)
	}
	if got.ScratchLen != 22 {
		t.Errorf("scratch %d, want 22 (the sub-schedule's scratch at 20)", got.ScratchLen)
	}
	// The phase is 4 rounds long: what follows starts at round 5.
	if b.Len() != 5 {
		t.Errorf("%d rounds after the phase, want 5", b.Len())
	}
	defer func() {
		if recover() == nil {
			t.Error("a sub-schedule longer than its phase was embedded")
		}
	}()
	e.embed(&b, s, 1)
}
