// Package schedule defines the data every gocoll algorithm produces and every
// executor consumes: the list of rounds one rank performs in one collective.
//
// An algorithm never moves a byte. It describes, for one rank, which element
// ranges of which buffer to send to and receive from which peers in each
// round, and which local reduce and copy steps follow. Executors give that
// description meaning (package executor/...): the host executor moves real
// bytes of host memory over a transport; the device executor runs the same
// schedule on CUDA device memory, staging messages through pinned host
// memory or copying GPU to GPU with CUDA IPC, and reducing with GPU
// kernels; the model executor prices it; the check executor proves the
// result symbolically.
//
// Everything here counts elements, never bytes; executors multiply by the
// element size at the last moment.
package schedule

import (
	"fmt"
	"strings"
)

// Buffer names one of the three memory areas a schedule refers to.
type Buffer uint8

const (
	// Input is the caller's send buffer. Schedules only read it. When the
	// caller passes MPI_IN_PLACE, executors alias Input to the part of Output
	// that holds this rank's contribution, so a schedule must stay correct
	// under that aliasing; the check executor verifies both cases.
	Input Buffer = iota
	// Output is the caller's receive buffer.
	Output
	// Scratch is temporary memory owned by the executor, Schedule.ScratchLen
	// elements long, with undefined contents at the start.
	Scratch
)

func (b Buffer) String() string {
	switch b {
	case Input:
		return "in"
	case Output:
		return "out"
	case Scratch:
		return "tmp"
	}
	return fmt.Sprintf("buf%d", uint8(b))
}

// Range is Len consecutive elements of a buffer starting at element Off.
type Range struct {
	Buf      Buffer
	Off, Len int
}

// End returns the element just past the range.
func (r Range) End() int { return r.Off + r.Len }

// Empty reports whether the range holds no element.
func (r Range) Empty() bool { return r.Len == 0 }

// Overlaps reports whether r and o share at least one element.
func (r Range) Overlaps(o Range) bool {
	return r.Buf == o.Buf && r.Len > 0 && o.Len > 0 && r.Off < o.End() && o.Off < r.End()
}

// Sub returns the part of r that starts off elements in and is n long.
func (r Range) Sub(off, n int) Range { return Range{r.Buf, r.Off + off, n} }

func (r Range) String() string { return fmt.Sprintf("%s[%d:%d]", r.Buf, r.Off, r.End()) }

// Transfer is one message of a round: Range is sent to, or received from,
// Peer (a rank of the communicator). Between one pair of ranks, the
// transfers of one round are matched in the order they are listed.
type Transfer struct {
	Peer  int
	Range Range
}

// StepKind says what a local step does.
type StepKind uint8

const (
	// Copy sets Dst = A.
	Copy StepKind = iota
	// Reduce sets Dst = A op B, element by element, with A as the left
	// operand: the order matters for non-commutative ops.
	Reduce
)

// Step is one local operation after a round's messages have completed.
// Dst may be the very same range as A or B (an in-place update) but must not
// overlap either of them partially.
type Step struct {
	Kind   StepKind
	Dst, A Range
	B      Range // Reduce only
}

func (s Step) String() string {
	if s.Kind == Copy {
		return fmt.Sprintf("%v = %v", s.Dst, s.A)
	}
	return fmt.Sprintf("%v = %v op %v", s.Dst, s.A, s.B)
}

// Round is one communication round: every send and receive is posted at
// once, the round waits for all of them, then the steps run in order.
// A round with no transfer is a purely local round.
//
// Sends read their source as it stands when the round begins, so a
// receive of the same round must not land in a range that one of its sends
// reads; the check executor rejects schedules that do.
type Round struct {
	Sends []Transfer
	Recvs []Transfer
	Steps []Step
}

// Communicates reports whether the round sends or receives anything.
func (r *Round) Communicates() bool { return len(r.Sends)+len(r.Recvs) > 0 }

// Schedule is everything one rank does in one collective call.
type Schedule struct {
	Rounds     []Round
	ScratchLen int // elements of scratch the executor must provide
}

// CommRounds counts the rounds that send or receive something.
func (s *Schedule) CommRounds() int {
	n := 0
	for i := range s.Rounds {
		if s.Rounds[i].Communicates() {
			n++
		}
	}
	return n
}

// String prints the schedule one round per line, for golden tests and
// debugging.
func (s *Schedule) String() string {
	var b strings.Builder
	for i, r := range s.Rounds {
		fmt.Fprintf(&b, "round %d:", i)
		for _, t := range r.Sends {
			fmt.Fprintf(&b, " send %v->%d", t.Range, t.Peer)
		}
		for _, t := range r.Recvs {
			fmt.Fprintf(&b, " recv %v<-%d", t.Range, t.Peer)
		}
		for _, st := range r.Steps {
			fmt.Fprintf(&b, "; %v", st)
		}
		b.WriteByte('\n')
	}
	return b.String()
}
