package coll_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/coll"
	"github.com/gocoll/gocoll/mpierr"
	"github.com/gocoll/gocoll/ops"
	"github.com/gocoll/gocoll/transport/inproc"
)

// FuzzCollectives decodes its input into one collective call on 1 to 3
// ranks (ranks as goroutines, the in-process transport and a shared
// segment, GOCOLL_CHECK on): the collective, datatype, op, count or
// recvcounts, root, MPI_IN_PLACE, a forced algorithm, and per rank a
// receive or send buffer that is too short, missing, longer than needed,
// or overlapping the other. It predicts, from the arguments alone, which
// ranks' calls are invalid and with which MPI error classes, and checks:
// no panic and no hang; an invalid call fails with one of its classes,
// and the other ranks fail too (the check); a valid call gives the
// reference result on every rank; and no byte outside the part of each
// buffer the call may write changes.
//
// The seed corpus (testdata/fuzz/FuzzCollectives) runs with `go test`;
// `go test -fuzz FuzzCollectives ./coll` explores further.
func FuzzCollectives(f *testing.F) {
	f.Add([]byte{2, 0, 0, 0, 10})
	f.Fuzz(func(t *testing.T, data []byte) {
		fc := decodeCall(data)
		fc.run(t)
	})
}

// The choices the decoder picks from.
var (
	fuzzColls = []string{"allreduce", "reduce_scatter", "reduce_scatter_block", "allgather", "allgatherv", "bcast", "reduce", "barrier"}
	fuzzTypes = []ops.Type{ops.Int32, ops.Int64, ops.Uint8, ops.Double, ops.Float, ops.Int16, ops.TypeNull, ops.Type(250)}
	fuzzOps   = []string{"sum", "prod", "max", "min", "band", "bor", "bxor", "land", "lor", "lxor", "maxloc", "null", "keepleft", "usersum"}
	fuzzAlgs  = []string{"", "", "", "auto", "ring", "recursive_doubling", "rabenseifner", "recursive_halving", "pairwise", "bruck", "shm", "native", "no-such-algorithm", "hierarchical"}
)

// fuzzCall is one decoded call.
type fuzzCall struct {
	p        int
	coll     string
	typ      ops.Type
	op       string
	count    int
	counts   []int // reduce_scatter, allgatherv
	root     int
	inPlace  bool
	alg      string
	mismatch bool // the last rank passes count+1 (or a larger counts[0])
	// per rank: elements missing from (negative: added to) the receive
	// and send buffers, a nil send buffer, a send buffer inside the
	// receive buffer at this element offset (-1: none)
	recvShort, sendShort []int
	sendNil              []bool
	overlap              []int
}

// reader hands out the input's bytes, then zeros.
type reader struct{ b []byte }

func (r *reader) byte() int {
	if len(r.b) == 0 {
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return int(v)
}

func decodeCall(data []byte) *fuzzCall {
	r := &reader{data}
	fc := &fuzzCall{p: 1 + r.byte()%3}
	fc.coll = fuzzColls[r.byte()%len(fuzzColls)]
	fc.typ = fuzzTypes[r.byte()%len(fuzzTypes)]
	fc.op = fuzzOps[r.byte()%len(fuzzOps)]
	switch c := r.byte(); {
	case c < 200:
		fc.count = c%43 - 2 // -2..40
	case c < 250:
		fc.count = 1000 + (c-200)*97 // larger: several shm steps
	default:
		fc.count = 40000 + c
	}
	flags := r.byte()
	fc.inPlace = flags&1 != 0
	fc.mismatch = flags&2 != 0 && fc.p > 1
	nCounts := fc.p
	if flags&4 != 0 {
		nCounts = fc.p + 1 - 2*(flags>>3&1) // one too many or too few
	}
	for range nCounts {
		fc.counts = append(fc.counts, r.byte()%23-1) // -1..21
	}
	fc.root = r.byte()%(fc.p+2) - 1 // -1..p
	fc.alg = fuzzAlgs[r.byte()%len(fuzzAlgs)]
	for range fc.p {
		b := r.byte()
		rs := []int{0, 0, 0, 0, 1, 3, -2, 1 << 20}[b&7]
		ss := []int{0, 0, 0, 0, 1, 2, -3, 0}[b>>3&7]
		fc.recvShort = append(fc.recvShort, rs)
		fc.sendShort = append(fc.sendShort, ss)
		fc.sendNil = append(fc.sendNil, b>>6 == 3)
		ov := -1
		if b>>6 == 2 {
			ov = r.byte() % 8
		}
		fc.overlap = append(fc.overlap, ov)
	}
	return fc
}

func (fc *fuzzCall) String() string {
	return fmt.Sprintf("%s p=%d %v %s count=%d counts=%v root=%d inPlace=%v alg=%q mismatch=%v recvShort=%v sendShort=%v sendNil=%v overlap=%v",
		fc.coll, fc.p, fc.typ, fc.op, fc.count, fc.counts, fc.root, fc.inPlace, fc.alg, fc.mismatch, fc.recvShort, fc.sendShort, fc.sendNil, fc.overlap)
}

// rooted and reducing describe the collectives.
func (fc *fuzzCall) rooted() bool { return fc.coll == "bcast" || fc.coll == "reduce" }
func (fc *fuzzCall) reducing() bool {
	return slices.Contains([]string{"allreduce", "reduce_scatter", "reduce_scatter_block", "reduce"}, fc.coll)
}
func (fc *fuzzCall) vector() bool { return fc.coll == "reduce_scatter" || fc.coll == "allgatherv" }

// rankArgs are one rank's view of the call: its count or counts (the
// mismatch changes the last rank's), and how many elements its buffers
// need and have.
type rankArgs struct {
	count     int
	counts    []int
	recvNeed  int // elements of the receive buffer the call uses
	sendNeed  int // elements of the send buffer the call reads
	recvLen   int
	sendLen   int
	recvExtra int // elements the caller has beyond recvNeed
	classes   []mpierr.Class
	// badAlg: the forced algorithm does not exist, which coll finds
	// after GOCOLL_CHECK's exchange, so a mismatch is reported instead.
	badAlg bool
}

func (fc *fuzzCall) args(r int) rankArgs {
	a := rankArgs{count: fc.count, counts: slices.Clone(fc.counts)}
	if fc.mismatch && r == fc.p-1 {
		a.count++
		if len(a.counts) > 0 {
			a.counts[0]++
		}
	}
	bad := func(c mpierr.Class) { a.classes = append(a.classes, c) }
	p := fc.p
	total, before, mine := 0, 0, 0
	countsOK := true
	if fc.vector() {
		if len(a.counts) != p {
			bad(mpierr.Arg)
			countsOK = false
		}
		for i, n := range a.counts {
			if n < 0 {
				bad(mpierr.Count)
				countsOK = false
			}
			if i < r {
				before += max(n, 0)
			}
			total += max(n, 0)
		}
		if countsOK {
			mine = a.counts[r]
		}
	} else if fc.coll != "barrier" && a.count < 0 {
		bad(mpierr.Count)
	}
	if fc.coll != "barrier" && !fc.typ.Valid() {
		bad(mpierr.Type)
	}
	if fc.reducing() && !fc.opValid() {
		bad(mpierr.Op)
	}
	if fc.rooted() && (fc.root < 0 || fc.root >= p) {
		bad(mpierr.Root)
	}
	if !fc.rooted() && fc.coll != "barrier" && fc.alg != "" && fc.alg != "auto" {
		names := algorithms.Names(fuzzCollective(fc.coll))
		a.badAlg = !slices.Contains(names, fc.alg)
	}
	n := max(a.count, 0)
	switch fc.coll {
	case "allreduce":
		a.recvNeed, a.sendNeed = n, n
	case "reduce_scatter":
		a.recvNeed, a.sendNeed = mine, total
		if fc.inPlace {
			a.recvNeed = total
		}
	case "reduce_scatter_block":
		a.recvNeed, a.sendNeed = n, n*p
		if fc.inPlace {
			a.recvNeed = n * p
		}
	case "allgather":
		a.recvNeed, a.sendNeed = n*p, n
	case "allgatherv":
		a.recvNeed, a.sendNeed = total, mine
	case "bcast":
		a.recvNeed = n
	case "reduce":
		a.sendNeed = n
		if r == fc.root {
			a.recvNeed = n
		}
		if fc.inPlace && r != fc.root && fc.root >= 0 && fc.root < p {
			bad(mpierr.Buffer)
		}
	}
	if fc.inPlace && fc.coll != "bcast" && (fc.coll != "reduce" || r == fc.root) {
		a.sendNeed = 0
	}
	if fc.coll == "barrier" {
		a.recvNeed, a.sendNeed = 0, 0
	}
	a.recvLen = max(a.recvNeed-fc.recvShort[r], 0)
	if fc.recvShort[r] < 0 {
		a.recvExtra = -fc.recvShort[r]
	}
	a.sendLen = max(a.sendNeed-fc.sendShort[r], 0)
	o := fc.overlap[r]
	switch {
	case fc.sendNil[r]:
		a.sendLen = 0
	case o >= 0 && !fc.inPlaceSend(r):
		// The send buffer is a piece of the receive buffer, from element
		// o, as much of it as fits.
		a.sendLen = min(a.sendLen, max(a.recvLen+a.recvExtra-o, 0))
	}
	if a.recvLen < a.recvNeed {
		bad(mpierr.Buffer)
	}
	if a.sendLen < a.sendNeed && !fc.inPlaceSend(r) {
		bad(mpierr.Buffer)
	}
	// The parts the call uses overlap.
	if o >= 0 && !fc.sendNil[r] && !fc.inPlaceSend(r) && a.sendNeed > 0 && a.recvNeed > 0 && o < a.recvNeed {
		bad(mpierr.Buffer)
	}
	return a
}

// inPlaceSend reports whether rank r's send buffer is MPI_IN_PLACE.
func (fc *fuzzCall) inPlaceSend(r int) bool {
	if !fc.inPlace || fc.coll == "bcast" || fc.coll == "barrier" {
		return false
	}
	return fc.coll != "reduce" || r == fc.root
}

func (fc *fuzzCall) opValid() bool {
	switch fc.op {
	case "null":
		return false
	case "keepleft", "usersum":
		return true
	}
	return fc.typ.Valid() && ops.Allowed(builtinOp(fc.op), fc.typ)
}

func builtinOp(name string) ops.Op {
	return map[string]ops.Op{"sum": ops.Sum, "prod": ops.Prod, "max": ops.Max, "min": ops.Min, "band": ops.Band, "bor": ops.Bor,
		"bxor": ops.Bxor, "land": ops.Land, "lor": ops.Lor, "lxor": ops.Lxor, "maxloc": ops.Maxloc}[name]
}

func fuzzCollective(name string) algorithms.Collective {
	switch name {
	case "reduce_scatter":
		return algorithms.ReduceScatter
	case "reduce_scatter_block":
		return algorithms.ReduceScatterBlock
	case "allgather", "allgatherv":
		return algorithms.Allgather
	}
	return algorithms.Allreduce
}

// collOp is the op as coll takes it.
func (fc *fuzzCall) collOp() coll.Op {
	size := max(fc.typ.Size(), 1)
	switch fc.op {
	case "null":
		return coll.Op{}
	case "keepleft": // a op b = a: associative, not commutative
		return coll.Op{User: func(ops.Type) ops.Kernel {
			return ops.UserKernel(func(in, inout []byte, n int) { copy(inout, in[:n*size]) }, size)
		}}
	case "usersum": // a sum, as a user op: commutative
		return coll.Op{Commutative: true, User: func(ops.Type) ops.Kernel {
			return ops.UserKernel(func(in, inout []byte, n int) {
				for i := range n {
					fc.put(inout, i, fc.get(in, i)+fc.get(inout, i))
				}
			}, size)
		}}
	}
	return coll.Op{Builtin: builtinOp(fc.op)}
}

const guardLen = 64

// guarded is a buffer of n elements with guard bytes around it and
// extra elements after it, all filled with a pattern that must survive.
type guarded struct {
	back       []byte
	off, n     int // the buffer: back[off : off+n bytes]
	used       int // bytes the call may write
	extraBytes int
	sealed     []byte // back before the call
}

// seal records the buffer's bytes before the call.
func (g *guarded) seal() { g.sealed = slices.Clone(g.back) }

func newGuarded(nBytes, extraBytes int) *guarded {
	g := &guarded{back: make([]byte, guardLen+nBytes+extraBytes+guardLen), off: guardLen, n: nBytes, extraBytes: extraBytes}
	for i := range g.back {
		g.back[i] = 0xA5 ^ byte(i*7)
	}
	return g
}

func (g *guarded) buf() []byte {
	end := g.off + g.n + g.extraBytes
	return g.back[g.off:end:end]
}

// outside reports the first byte outside [off, off+used) that changed.
func (g *guarded) outside() int {
	for i, b := range g.back {
		if i >= g.off && i < g.off+g.used {
			continue
		}
		if b != g.sealed[i] {
			return i - g.off
		}
	}
	return math.MinInt
}

// value is rank r's element i, chosen so that every reduction is exact in
// every type (small, non-negative for unsigned types).
func (fc *fuzzCall) value(r, i int) int64 {
	switch fc.op {
	case "prod":
		return int64(1 + (r+i)%2)
	case "land", "lor", "lxor":
		return int64((r*3 + i) % 4 % 2)
	}
	v := int64((r*7+i*3)%11) + 1
	if fc.typ == ops.Uint8 || fc.typ == ops.Int16 {
		return v
	}
	return v - 6
}

func (fc *fuzzCall) put(b []byte, i int, v int64) {
	switch s := fc.typ.Size(); fc.typ {
	case ops.Double:
		binary.LittleEndian.PutUint64(b[i*s:], math.Float64bits(float64(v)))
	case ops.Float:
		binary.LittleEndian.PutUint32(b[i*s:], math.Float32bits(float32(v)))
	case ops.Uint8:
		b[i] = byte(v)
	case ops.Int16:
		binary.LittleEndian.PutUint16(b[i*s:], uint16(v))
	case ops.Int32:
		binary.LittleEndian.PutUint32(b[i*s:], uint32(v))
	case ops.Int64:
		binary.LittleEndian.PutUint64(b[i*s:], uint64(v))
	}
}

func (fc *fuzzCall) get(b []byte, i int) int64 {
	switch s := fc.typ.Size(); fc.typ {
	case ops.Double:
		return int64(math.Float64frombits(binary.LittleEndian.Uint64(b[i*s:])))
	case ops.Float:
		return int64(math.Float32frombits(binary.LittleEndian.Uint32(b[i*s:])))
	case ops.Uint8:
		return int64(b[i])
	case ops.Int16:
		return int64(int16(binary.LittleEndian.Uint16(b[i*s:])))
	case ops.Int32:
		return int64(int32(binary.LittleEndian.Uint32(b[i*s:])))
	case ops.Int64:
		return int64(binary.LittleEndian.Uint64(b[i*s:]))
	}
	return 0
}

// fold is the reference reduction of element i over the ranks, as the
// element's bytes.
func (fc *fuzzCall) fold(i int) []byte {
	acc := fc.value(0, i)
	for r := 1; r < fc.p; r++ {
		v := fc.value(r, i)
		switch fc.op {
		case "sum", "usersum":
			acc += v
		case "prod":
			acc *= v
		case "max":
			acc = max(acc, v)
		case "min":
			acc = min(acc, v)
		case "band":
			acc &= v
		case "bor":
			acc |= v
		case "bxor":
			acc ^= v
		case "land":
			acc = b2i(acc != 0 && v != 0)
		case "lor":
			acc = b2i(acc != 0 || v != 0)
		case "lxor":
			acc = b2i((acc != 0) != (v != 0))
		case "keepleft":
		}
	}
	b := make([]byte, fc.typ.Size())
	fc.put(b, 0, acc)
	return b
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func (fc *fuzzCall) run(t *testing.T) {
	tu := fallbackTuner(t, "silent")
	cfg := &coll.Config{Tuner: tu, JobID: "fuzz", Check: true, Timeout: 20 * time.Second}
	eps := inproc.New(fc.p)
	defer func() {
		for _, ep := range eps {
			ep.Close()
		}
	}()
	ranks := make([]int, fc.p)
	for i := range ranks {
		ranks[i] = i
	}
	args := make([]rankArgs, fc.p)
	anyBad, badAlg := false, false
	for r := range fc.p {
		args[r] = fc.args(r)
		anyBad = anyBad || len(args[r].classes) > 0
		badAlg = badAlg || args[r].badAlg
	}
	// All ranks valid but their calls differ: the check fails them all.
	mismatched := !anyBad && fc.mismatch && fc.coll != "barrier"
	if mismatched && fc.vector() && len(fc.counts) == 0 {
		mismatched = false
	}
	size := max(fc.typ.Size(), 1)
	recv := make([]*guarded, fc.p)
	send := make([]*guarded, fc.p)
	errs := make([]error, fc.p)
	var wg sync.WaitGroup
	for r := range fc.p {
		a := args[r]
		recv[r] = newGuarded(a.recvLen*size, a.recvExtra*size)
		send[r] = newGuarded(a.sendLen*size, 0)
		rb, sb := recv[r].buf()[:a.recvLen*size], send[r].buf()
		if fc.sendNil[r] {
			sb = nil
		} else if o := fc.overlap[r]; o >= 0 && !fc.inPlaceSend(r) {
			// The send buffer is a piece of the receive buffer.
			start := min(o*size, len(recv[r].buf()))
			end := start + a.sendLen*size
			sb = recv[r].buf()[start:end:end]
			send[r] = nil
		}
		// Inputs: in the send buffer, or in place in the receive buffer.
		if fc.inPlaceSend(r) || fc.coll == "bcast" {
			fc.fillInPlace(r, a, rb)
		} else {
			for i := 0; i < len(sb)/size; i++ {
				fc.put(sb, i, fc.value(r, i))
			}
		}
		// What the call may write: the used part of the receive buffer.
		recv[r].used = min(a.recvNeed, a.recvLen) * size
		var counts []int // only the calls that take recvcounts pass them
		if fc.vector() {
			counts = a.counts
		}
		ca := coll.Args{Recv: rb, Send: sb, InPlace: fc.inPlace && fc.coll != "bcast", Count: a.count, Counts: counts,
			Type: fc.typ, Op: fc.collOp(), Root: fc.root, Algorithm: fc.alg}
		if fc.coll == "reduce" && r != fc.root && fc.root >= 0 && fc.root < fc.p {
			recv[r].used = 0 // ignored off the root
		}
		recv[r].seal()
		if send[r] != nil {
			send[r].seal()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := coll.NewComm(eps[r], ranks, 1, "MPI_COMM_WORLD", cfg)
			if err == nil && fc.p > 1 {
				err = c.AttachShared()
			}
			if err == nil {
				err = fc.call(c, ca)
			}
			if c != nil {
				c.Close() // unmaps the segment, closes its pidfds
			}
			errs[r] = err
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatalf("%v: the ranks hang", fc)
	}
	for r := range fc.p {
		a := args[r]
		err := errs[r]
		var me *mpierr.Error
		switch {
		case len(a.classes) > 0:
			if !errors.As(err, &me) || !slices.Contains(a.classes, me.Class) {
				t.Errorf("%v: rank %d: got %v, want an error of class %v", fc, r, err, a.classes)
			}
		case anyBad || mismatched:
			if !errors.As(err, &me) || me.Class != mpierr.Other {
				t.Errorf("%v: rank %d: got %v, want the check's MPI_ERR_OTHER", fc, r, err)
			}
		case badAlg:
			if !errors.As(err, &me) || me.Class != mpierr.Arg {
				t.Errorf("%v: rank %d: got %v, want MPI_ERR_ARG for the algorithm", fc, r, err)
			}
		case err != nil:
			t.Errorf("%v: rank %d: valid call failed: %v", fc, r, err)
		default:
			fc.checkResult(t, r, a, recv[r].buf()[:a.recvLen*size])
		}
		if i := recv[r].outside(); i != math.MinInt {
			t.Errorf("%v: rank %d: byte %d of the receive buffer, outside what the call may write, changed (err %v)", fc, r, i, err)
		}
		if send[r] != nil {
			send[r].used = 0
			if i := send[r].outside(); i != math.MinInt {
				t.Errorf("%v: rank %d: byte %d of the send buffer changed (err %v)", fc, r, i, err)
			}
		}
	}
}

// fillInPlace puts rank r's input where an in-place call (or Bcast) reads it.
func (fc *fuzzCall) fillInPlace(r int, a rankArgs, rb []byte) {
	size := fc.typ.Size()
	if size == 0 {
		return
	}
	at, n := 0, len(rb)/size
	switch fc.coll {
	case "allgather":
		at, n = r*a.count, a.count
	case "allgatherv":
		if len(a.counts) != fc.p {
			return
		}
		for q := range r {
			at += max(a.counts[q], 0)
		}
		n = a.counts[r]
	case "bcast":
		if r != fc.root {
			return
		}
	}
	for i := 0; i < n && (at+i+1)*size <= len(rb); i++ {
		fc.put(rb, at+i, fc.value(r, i))
	}
}

func (fc *fuzzCall) call(c *coll.Comm, a coll.Args) error {
	switch fc.coll {
	case "allreduce":
		return c.Allreduce(a)
	case "reduce_scatter":
		return c.ReduceScatter(a)
	case "reduce_scatter_block":
		return c.ReduceScatterBlock(a)
	case "allgather":
		return c.Allgather(a)
	case "allgatherv":
		return c.Allgatherv(a)
	case "bcast":
		return c.Bcast(a)
	case "reduce":
		return c.Reduce(a)
	}
	return c.Barrier()
}

// checkResult compares rank r's receive buffer with the reference.
func (fc *fuzzCall) checkResult(t *testing.T, r int, a rankArgs, rb []byte) {
	size := fc.typ.Size()
	elem := func(i int) []byte { return rb[i*size : (i+1)*size] }
	want := make([]byte, size)
	check := func(i int, w []byte) bool {
		if string(elem(i)) != string(w) {
			t.Errorf("%v: rank %d: element %d is %x, want %x", fc, r, i, elem(i), w)
			return false
		}
		return true
	}
	switch fc.coll {
	case "allreduce":
		for i := range a.count {
			if !check(i, fc.fold(i)) {
				return
			}
		}
	case "reduce":
		if r == fc.root {
			for i := range a.count {
				if !check(i, fc.fold(i)) {
					return
				}
			}
		}
	case "reduce_scatter", "reduce_scatter_block":
		counts := a.counts
		if fc.coll == "reduce_scatter_block" {
			counts = slices.Repeat([]int{a.count}, fc.p)
		}
		off := 0
		for q := range r {
			off += counts[q]
		}
		for i := range counts[r] {
			if !check(i, fc.fold(off+i)) {
				return
			}
		}
	case "allgather", "allgatherv":
		counts := a.counts
		if fc.coll == "allgather" {
			counts = slices.Repeat([]int{a.count}, fc.p)
		}
		at := 0
		for q := range fc.p {
			for i := range counts[q] {
				fc.put(want, 0, fc.value(q, i))
				if !check(at+i, want) {
					return
				}
			}
			at += counts[q]
		}
	case "bcast":
		for i := range a.count {
			fc.put(want, 0, fc.value(fc.root, i))
			if !check(i, want) {
				return
			}
		}
	}
}
