package coll

import (
	"encoding/binary"
	"fmt"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/mpierr"
	"github.com/gocoll/gocoll/ops"
)

// With GOCOLL_CHECK=1 every collective starts with an exchange of
// signatures: which call, on what shape of data, with which op and root,
// and whether this rank's arguments are valid. A rank that finds another
// rank's signature different from its own fails with a message naming
// both, instead of hanging or corrupting memory; a rank with invalid
// arguments makes every rank fail, not only itself.

// The calls a signature can name, beyond the algorithms' collectives.
const (
	callAllgatherv = 100 + iota
	callBarrier
)

// signature describes a call for the cross-rank check.
type signature struct {
	call    int    // an algorithms.Collective or one of the call constants
	count   int64  // Count, or the sum of Counts
	counts  uint64 // hash of Counts (0 when uniform)
	typ     ops.Type
	mult    int
	op      ops.Op
	user    bool // a user-defined op
	root    int
	inPlace bool
	device  bool // CUDA device buffers (set by run, which classifies them)
	// reproducible: the call asked for the canonical association
	// (mpi.Reproducible); ranks that disagree would run other algorithms.
	reproducible bool
}

const sigLen = 40

func signatureOf(c algorithms.Collective, a Args) signature {
	s := signature{call: int(c), count: int64(a.Count), typ: a.Type, mult: max(a.Mult, 1), root: a.Root, inPlace: a.InPlace, reproducible: a.Reproducible}
	if a.Counts != nil {
		s.count = 0
		for _, n := range a.Counts {
			s.count += int64(n)
		}
		s.counts = hashInts(a.Counts)
	}
	if c.Reduces() {
		s.op, s.user = a.Op.Builtin, a.Op.Builtin == ops.OpNull
	}
	switch c {
	case algorithms.Bcast, algorithms.Reduce, algorithms.Gather:
		s.inPlace = false // only the root may be in place
	}
	if c == algorithms.Gather {
		s.typ, s.mult = ops.Byte, a.elemSize() // send and receive types may differ
	}
	return s
}

func (s signature) encode(valid bool, b []byte) {
	binary.LittleEndian.PutUint32(b[0:], uint32(s.call))
	binary.LittleEndian.PutUint64(b[4:], uint64(s.count))
	binary.LittleEndian.PutUint64(b[12:], s.counts)
	binary.LittleEndian.PutUint16(b[20:], uint16(s.typ))
	binary.LittleEndian.PutUint32(b[22:], uint32(s.mult))
	b[26] = byte(s.op)
	b[27] = flag(s.user) | flag(s.inPlace)<<1 | flag(valid)<<2 | flag(s.device)<<3 | flag(s.reproducible)<<4
	binary.LittleEndian.PutUint32(b[28:], uint32(int32(s.root)))
}

func decode(b []byte) (signature, bool) {
	return signature{
		call:         int(binary.LittleEndian.Uint32(b[0:])),
		count:        int64(binary.LittleEndian.Uint64(b[4:])),
		counts:       binary.LittleEndian.Uint64(b[12:]),
		typ:          ops.Type(binary.LittleEndian.Uint16(b[20:])),
		mult:         int(binary.LittleEndian.Uint32(b[22:])),
		op:           ops.Op(b[26]),
		user:         b[27]&1 != 0,
		inPlace:      b[27]&2 != 0,
		device:       b[27]&8 != 0,
		reproducible: b[27]&16 != 0,
		root:         int(int32(binary.LittleEndian.Uint32(b[28:]))),
	}, b[27]&4 != 0
}

func flag(b bool) byte {
	if b {
		return 1
	}
	return 0
}

func (s signature) String() string {
	name := map[int]string{callAllgatherv: "MPI_Allgatherv", callBarrier: "MPI_Barrier"}[s.call]
	if name == "" {
		name = algorithms.Collective(s.call).String()
	}
	if s.call == callBarrier {
		return name + "()"
	}
	op := ""
	switch {
	case s.user:
		op = ", user op"
	case s.op != ops.OpNull:
		op = ", " + s.op.String()
	}
	in := ""
	if s.inPlace {
		in = ", MPI_IN_PLACE"
	}
	counts := ""
	if s.counts != 0 {
		counts = fmt.Sprintf(" (counts hash %x)", s.counts)
	}
	root := ""
	switch algorithms.Collective(s.call) {
	case algorithms.Bcast, algorithms.Reduce, algorithms.Gather:
		root = fmt.Sprintf(", root %d", s.root)
	}
	mem := ""
	if s.device {
		mem = ", device memory"
	}
	if s.reproducible {
		mem += ", reproducible"
	}
	return fmt.Sprintf("%s(count %d%s, %v x%d%s%s%s%s)", name, s.count, counts, s.typ, s.mult, op, in, root, mem)
}

// checked runs body with the cross-rank check when GOCOLL_CHECK is on:
// run exchanges the signature right before executing; if body fails
// before reaching run (invalid arguments), the exchange happens here, so
// that the other ranks learn of it instead of waiting.
func (c *Comm) checked(sig signature, body func() error) error {
	if !c.cfg.Check {
		return body()
	}
	c.mu.Lock()
	c.pending, c.hasPending = sig, true
	c.mu.Unlock()
	err := body()
	c.mu.Lock()
	unsent := c.hasPending
	c.hasPending = false
	c.mu.Unlock()
	if unsent && err != nil {
		c.mu.Lock()
		c.drain()
		c.exchange("", sig, false)
		c.mu.Unlock()
	}
	return err
}

// exchange gathers every rank's signature (gatherRecords: Bruck's
// allgather straight on the transport, which needs nothing that might
// itself mismatch) and compares them; c.mu is held.
func (c *Comm) exchange(call string, sig signature, valid bool) error {
	mine := make([]byte, sigLen)
	sig.encode(valid, mine)
	name := "collective check"
	if call != "" {
		name = call
	}
	buf, err := c.gatherRecords(name, "GOCOLL_CHECK", mine, sigLen)
	if err != nil {
		return err
	}
	if call == "" {
		return nil // this rank already has its own error
	}
	// Every rank compares all signatures with rank 0's, in rank order, so
	// that every rank reports the same pair: whichever rank's message ends
	// the job, it names the same calls.
	ref, _ := decode(buf[:sigLen])
	for q := range c.Size() {
		theirs, ok := decode(buf[q*sigLen:])
		if !ok {
			return &mpierr.Error{Call: call, Class: mpierr.Other,
				Msg: fmt.Sprintf("rank %d passed invalid arguments to %v (see its error); GOCOLL_CHECK stopped the call on every rank", q, theirs)}
		}
		if theirs != ref {
			return &mpierr.Error{Call: call, Class: mpierr.Other,
				Msg: fmt.Sprintf("collective mismatch across ranks (GOCOLL_CHECK=1): rank 0 calls %v but rank %d calls %v", ref, q, theirs)}
		}
	}
	return nil
}

// Rejected is for callers that check arguments before reaching coll (the
// C ABI, the Go API): with GOCOLL_CHECK on, it tells the other ranks,
// which wait in the call's signature exchange, that this rank's call had
// invalid arguments. Every rank then fails the call and the communicator
// stays in step; without it, the others would compare their call with
// this rank's next one. It does nothing without the check.
func (c *Comm) Rejected(call string) {
	if !c.cfg.Check {
		return
	}
	sig := signature{call: callID(call)}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.drain()
		c.exchange("", sig, false)
	}
}

// callID is the signature's call number for an MPI call's name.
func callID(call string) int {
	switch call {
	case "MPI_Allgatherv":
		return callAllgatherv
	case "MPI_Barrier":
		return callBarrier
	}
	for _, c := range append(append([]algorithms.Collective{}, algorithms.Collectives...), algorithms.Rooted...) {
		if c.String() == call {
			return int(c)
		}
	}
	return -1
}
