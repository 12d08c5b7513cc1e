package main

/*
#include "preload.h"
*/
import "C"

import (
	"fmt"
	"os"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/gocoll/gocoll/gpu"
	"github.com/gocoll/gocoll/internal/version"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/coll"
	"github.com/gocoll/gocoll/coll/counters"
	"github.com/gocoll/gocoll/intranode/engine"
	"github.com/gocoll/gocoll/mpierr"
	"github.com/gocoll/gocoll/ops"
	"github.com/gocoll/gocoll/preload/native"
	"github.com/gocoll/gocoll/tuner"
)

// The Go half's entry points, called by shim.c. Each recovers from any
// panic: none crosses into C.

var (
	cfg         *config
	gocollCalls atomic.Uint64
	deviceCalls atomic.Uint64 // of gocollCalls, those on CUDA device memory
)

// internal reports a recovered panic and returns its MPI error class.
func internal(where string, v any) C.int {
	fmt.Fprintf(os.Stderr, "gocoll: %s: internal error: %v\n%s", where, v, debug.Stack())
	return C.int(mpierr.Intern)
}

// gc_start reads the configuration and registers the host's
// predefined datatypes and ops with the C half, at the first collective
// call after MPI_Init. It returns 0, or -1 after printing what is wrong
// with the environment.
//
//export gc_start
func gc_start() (rc C.int) {
	defer func() {
		if v := recover(); v != nil {
			rc = -internal("starting", v)
		}
	}()
	flavor := "openmpi"
	if C.gc_flavor == C.GC_MPICH {
		flavor = "mpich"
	}
	c, err := loadConfig(os.Getenv, flavor)
	if err == nil && c.coll.ProgressThread {
		err = progressThreadAllowed(int(C.gc_thread_level()))
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "gocoll: %v; every collective call fails (LD_PRELOAD mode)\n", err)
		return -1
	}
	if c.debug { // the C half's copy of GOCOLL_DEBUG
		C.gc_debug = 1
	}
	hh := registerHandles(func(h C.gc_handle) (int64, int64, bool) {
		var lb, ext C.int64_t
		ok := C.gc_type_extent(h, &lb, &ext) == 0
		return int64(lb), int64(ext), ok
	})
	probeStart := time.Now()
	var saved [2]C.gc_handle
	C.gc_errors_return(&saved[0])
	wrong := probeHost(hh, flavor, C.GoString(C.gc_library_version()), hostReduce)
	C.gc_errors_restore(&saved[0])
	probeTime := time.Since(probeStart)
	for _, w := range wrong {
		excludeHost(w.op, w.t, hostWrong)
	}
	for _, x := range c.exclude {
		excludeHost(ops.Op(x[0]), ops.Type(x[1]), testExclude)
	}
	engine.SetCanonical(c.coll.Reproducible) // the engine's C half
	if c.coll.Reproducible {
		// The same on every rank (the environment): no agreement needed.
		for _, t := range ops.Types() {
			for _, op := range ops.Ops() {
				if ops.OrderDependent(op, t) {
					excludeHost(op, t, reproducible)
				}
			}
		}
		C.gc_user_excluded = C.GC_X_REPRODUCIBLE
	}
	for i, cl := range algorithms.Collectives {
		// In reproducible mode a forced native comes to the tuner, which
		// runs it on the host where the order does not matter and falls
		// back (GOCOLL_FALLBACK) where it does.
		if c.tuner.Forced(cl) == native.Name && !c.coll.Reproducible {
			C.gc_forced_native[i] = 1
		}
	}
	cfg = c
	thread := C.int(0)
	if c.coll.ProgressThread {
		thread = 1
	}
	C.gc_register_progress(thread)
	if !c.debug && !c.coll.Check {
		// The engine's C half runs small shm calls; not while every call
		// must come to Go (GOCOLL_DEBUG=info logs each, GOCOLL_CHECK
		// checks each across ranks).
		for i := range algorithms.Collectives {
			C.gc_shm_alg[i] = C.int(c.algIndex(i, "shm"))
		}
	}
	if c.cudaOn() {
		C.gc_cuda = 1
	}
	for i, d := range c.tuneTest.delay {
		C.gc_tune_delay[i] = C.int64_t(d.Nanoseconds())
	}
	if c.debug {
		rank := int(C.gc_world_rank())
		fmt.Fprintf(os.Stderr, "gocoll: rank %d: gocoll %s preloaded over %s (%s), %d datatypes, %d measured rules, %s\n",
			rank, version.Version, flavor, C.GoString(C.gc_library_version()), len(hh.types), len(measuredRules[flavor]), c.cudaNote())
		// One write: the lines of ranks sharing stderr stay whole.
		var b strings.Builder
		fmt.Fprintf(&b, "gocoll: rank %d: host MPI probed in %.1f ms (MPI_Reduce_local, %d datatype and %d op handles): wrong on %d (op, datatype) pairs, which gocoll runs\n",
			rank, probeTime.Seconds()*1e3, len(hh.types), len(hh.ops), len(wrong))
		for _, w := range wrong {
			fmt.Fprintf(&b, "gocoll: rank %d: %s: %s\n", rank, hostWrong.why(w.op, w.t), w.what)
		}
		os.Stderr.WriteString(b.String())
	}
	return 0
}

// query is the tuner's view of a call. Whether the ranks share a host
// (and so a segment for the shm algorithms) is known once the
// communicator is set up; before, at its first calls, the tuner assumes
// they do, and asks again after the setup (gc_run), so that a
// communicator whose rules favour the shm algorithms gets set up at all.
// Either way every rank asks the same question. The node map too is
// known once the communicator is set up (nil before).
func query(c *C.struct_gc_call, shared bool, nodes *algorithms.NodeMap) tuner.Query {
	return tuner.Query{
		Collective: algorithms.Collective(c.coll),
		Bytes:      int64(c.bytes),
		Params: algorithms.Params{P: int(c.cs.size), Rank: int(c.cs.rank), Commutative: c.commutative != 0,
			SharedMemory: shared && c.cs.size > 1, DeviceMemory: c.device != 0, Nodes: nodes,
			Reproducible: exclusion(c.excluded)&reproducible != 0},
	}
}

// gc_decide asks the tuner about a call: the index of gocoll's
// algorithm, -1 for the host MPI (c.how set either way: the C half counts
// fallbacks to the host), -2 when the call must fail
// (GOCOLL_FALLBACK=error), after saying why. A device call (c.device) is
// asked of the device tuner, which never answers native nor an shm
// algorithm.
//
//export gc_decide
func gc_decide(c *C.struct_gc_call) (rc C.int) {
	defer func() {
		if v := recover(); v != nil {
			internal("choosing an algorithm", v)
			rc = -2
		}
	}()
	var st *commState
	if c.cs.id != 0 {
		comms.Lock()
		st = comms.byID[c.cs.id]
		comms.Unlock()
	}
	if cfg.tune && c.device == 0 {
		alg, handled, now, pending := tuneCall(c, st)
		if handled {
			return alg
		}
		if st = now; pending {
			// A request in a cell still on trial: the rules, but not
			// kept, so that the cell's blocking calls come back.
			defer func() { c.lo, c.end = 0, 0 }()
		}
	}
	shared := c.cs.id == 0 || (st != nil && st.c.Shared())
	var nodes *algorithms.NodeMap
	if st != nil {
		nodes = st.nodes
	}
	return decide(c, shared, nodes)
}

// decide asks the tuner about a call (gc_decide's answer), setting
// c.how and the bytes c.lo, c.end its answer holds for (tuner.Span).
func decide(c *C.struct_gc_call, shared bool, nodes *algorithms.NodeMap) C.int {
	q := query(c, shared, nodes)
	ch, err := cfg.choose(q)
	if err != nil {
		fmt.Fprintf(os.Stderr, "gocoll: rank %d: %s: %v\n", int(c.cs.rank), q.Collective, err)
		return -2
	}
	lo, hi := cfg.tuner.Span(q)
	olo, ohi := cfg.gocollOnly.Span(q)
	c.lo, c.end = C.int64_t(max(lo, olo)), C.int64_t(min(hi, ohi)+1)
	switch {
	case ch.Fallback:
		c.how = 2
	case ch.Source == tuner.Forced:
		c.how = 1
	default:
		c.how = 0
	}
	if ch.Extra == native.Name && c.excluded != 0 && ch.Source != tuner.Forced {
		// The host must not run this pair (host.go): gocoll's best
		// instead, whatever the reason it chose the host.
		if ch, err = cfg.gocollOnly.Choose(q); err != nil {
			fmt.Fprintf(os.Stderr, "gocoll: rank %d: %s: %v\n", int(c.cs.rank), q.Collective, err)
			return -2
		}
		c.how |= C.GC_HOW_CORRECTED
	}
	if ch.Extra == native.Name {
		if cfg.debug {
			why := ""
			if ch.Fallback {
				why = fmt.Sprintf("; forced %s cannot run: %v", ch.Refused, ch.Refusal)
			}
			if ch.Why != "" {
				why += "; " + ch.Why // the rule or the model's estimate
			}
			fmt.Fprintf(os.Stderr, "gocoll: rank %d: %s -> host MPI (tuned: native for %d bytes at p=%d%s)\n",
				int(c.cs.rank), q.Collective, q.Bytes, q.Params.P, why)
		}
		return -1
	}
	return C.int(cfg.algIndex(int(c.coll), ch.Alg.Name))
}

// reasons are the texts of the C half's fallback reasons.
var reasons = [...]string{
	C.GC_R_NOT_READY: "MPI not initialized, or gocoll stopped",
	C.GC_R_COMM:      "MPI_COMM_NULL or not a communicator",
	C.GC_R_INTER:     "intercommunicator",
	C.GC_R_FORCED:    "forced: native",
	C.GC_R_DATATYPE:  "derived or unsupported datatype",
	C.GC_R_OP:        "MPI_OP_NULL, MPI_REPLACE, MPI_NO_OP or not an op",
	C.GC_R_OP_TYPE:   "op not defined on the datatype by gocoll",
	C.GC_R_DEVICE:    "CUDA device buffer",
	C.GC_R_BUFFER:    "NULL buffer with data, MPI_IN_PLACE receive buffer or negative count",
	C.GC_R_SIZES:     "send and receive sizes differ",
	C.GC_R_SETUP:     "gocoll could not set this communicator up",
	C.GC_R_LARGE:     "count too large for the host's point-to-point calls",
	C.GC_R_TUNED:     "tuned: native",
	C.GC_R_PROGRESS:  "a request nothing would move while the program blocks in the host MPI (no progress hook in the host: set GOCOLL_PROGRESS_THREAD=1 at MPI_THREAD_MULTIPLE)",
}

// gc_note_host prints why the C half handed a call to the host MPI
// (GOCOLL_DEBUG=info).
//
//export gc_note_host
func gc_note_host(coll, rank, why C.int) {
	defer func() {
		if v := recover(); v != nil {
			internal("logging", v)
		}
	}()
	reason := fmt.Sprintf("reason %d", int(why))
	if int(why) < len(reasons) && reasons[why] != "" {
		reason = reasons[why]
	}
	fmt.Fprintf(os.Stderr, "gocoll: rank %d: %s -> host MPI (%s)\n", int(rank), algorithms.Collective(coll), reason)
}

// gc_run runs a call with gocoll: 0, an MPI error class (gocoll's
// values; the C half maps them to the host's and calls the error
// handler), -1 when the communicator cannot be set up and the host must
// run the call (and every later one on it), or -2 when, the communicator
// now set up, the tuner gives this call to the host after all.
//
//export gc_run
func gc_run(c *C.struct_gc_call) (rc C.int) {
	cl := algorithms.Collective(c.coll)
	defer func() {
		if v := recover(); v != nil {
			rc = internal(cl.String(), v)
		}
	}()
	st, a, rc, ok := prepare(c, "")
	if !ok {
		return rc
	}
	var err error
	switch cl {
	case algorithms.Allreduce:
		err = st.c.Allreduce(a)
	case algorithms.ReduceScatter:
		err = st.c.ReduceScatter(a)
	case algorithms.ReduceScatterBlock:
		err = st.c.ReduceScatterBlock(a)
	case algorithms.Allgather:
		err = st.c.Allgather(a)
	}
	return st.result(err)
}

// prepare readies a call that gocoll runs (blocking, or as a request,
// form " nonblocking" or " persistent" for the debug line):
// the communicator's state and coll's arguments, ok; or, not ok, what
// gc_run returns (-1: the communicator cannot be set up, -2: the
// tuner gives the call to the host after all, or an error class).
func prepare(c *C.struct_gc_call, form string) (st *commState, a coll.Args, rc C.int, ok bool) {
	cl := algorithms.Collective(c.coll)
	st, fresh, err := stateOf(c)
	if err != nil {
		c.cs.native = 1
		fmt.Fprintf(os.Stderr, "gocoll: rank %d: %s: cannot run gocoll on this communicator, the host MPI's collectives will: %v\n", int(c.cs.rank), cl, err)
		return nil, a, -1, false
	}
	if fresh {
		// Decided before the setup: ask again, now that the tuner knows
		// whether there is a shared segment, and forget earlier answers.
		C.gc_forget(c.cs)
		switch alg := decide(c, st.c.Shared(), st.nodes); {
		case alg == -1:
			return nil, a, -2, false
		case alg < 0:
			return nil, a, C.int(mpierr.Arg), false
		default:
			c.alg = alg
		}
	}
	n := gocollCalls.Add(1)
	injectFault(int64(n))
	memory := ""
	if c.device != 0 {
		deviceCalls.Add(1)
		memory = " memory=device"
	}
	a, err = st.args(c)
	if err != nil {
		return nil, a, st.result(err), false
	}
	a.Algorithm = cfg.names[c.coll][c.alg]
	if cfg.debug && c.how&C.GC_HOW_CORRECTED != 0 {
		fmt.Fprintf(os.Stderr, "gocoll: rank %d: %s -> gocoll (%s)\n",
			st.rank, cl, exclusion(c.excluded).why(ops.Op(c.op), ops.Type(c._type)))
	}
	if cfg.debug {
		// The form of a hierarchical call (shm or schedule), as coll
		// says it where it prints the line itself.
		shape := st.c.Form(cl, a.Algorithm, c.device != 0)
		fmt.Fprintf(os.Stderr, "gocoll: rank %d: %s comm=%s bytes=%d p=%d algorithm=%s (%s)%s%s%s\n",
			st.rank, cl, st.name, int64(c.bytes), st.size, a.Algorithm, how(c, cl, st), shape, memory, form)
	}
	if c.how&3 == 2 { // coll sees the preload's choice as forced
		counters.Add(calls[c.coll], counters.Fallback)
	}
	return st, a, 0, true
}

// how is the debug line's "tuned" (with the rule or model estimate that
// decided), "forced", or "tuned (forced X cannot run: why)"; a call the
// host must not run says why ("tuned without the host: ...").
func how(c *C.struct_gc_call, cl algorithms.Collective, st *commState) string {
	corrected := ""
	if c.how&C.GC_HOW_CORRECTED != 0 {
		corrected = exclusion(c.excluded).why(ops.Op(c.op), ops.Type(c._type))
	}
	switch {
	case c.trial != 0:
		return "tuned: run-time trial"
	case c.how&C.GC_HOW_MEASURED != 0:
		return "tuned: measured here"
	}
	switch c.how & 3 {
	case 0:
		if corrected != "" {
			return "tuned without the host: " + corrected
		}
		// Which rule or model estimate decided (asked again: debug only).
		if ch, err := cfg.choose(query(c, st.c.Shared(), st.nodes)); err == nil && ch.Why != "" {
			return "tuned: " + ch.Why
		}
		return "tuned"
	case 1:
		return "forced"
	}
	if corrected != "" {
		corrected = "; without the host: " + corrected
	}
	forced := cfg.tuner.Forced(cl)
	if a, err := algorithms.Lookup(cl, forced); err == nil {
		if r := a.Check(query(c, st.c.Shared(), st.nodes).Params); r != nil {
			return fmt.Sprintf("tuned (forced %s cannot run: %v%s)", forced, r, corrected)
		}
	}
	return "tuned" + corrected
}

// place sets one of a call's buffers, n bytes at p: as Go bytes, or, on a
// device call, by address where the C half found device memory (c.dev,
// c.attrs: the driver is not asked again).
func (st *commState) place(c *C.struct_gc_call, p uintptr, n int64, host *[]byte, dev **gpu.Buffer) {
	if c.device != 0 && n > 0 && p != 0 {
		for i, q := range bufferAddrs(c) {
			if q == p && c.dev[i] != 0 {
				*dev = &gpu.Buffer{Ptr: p, Len: int(n), Mem: gpu.AttrsOf(unsafe.Pointer(&c.attrs[i])).Memory(p)}
				return
			}
		}
	}
	if n > 0 && p != 0 { // C memory: p is a valid pointer from here on
		*host = unsafe.Slice((*byte)(*(*unsafe.Pointer)(unsafe.Pointer(&p))), n)
	}
}

// bufferAddrs are a call's send and receive buffers as numbers: never
// held as pointers, since Open MPI's MPI_IN_PLACE is (void *)1, which
// Go's stack copying takes for a bad pointer and stops the process.
func bufferAddrs(c *C.struct_gc_call) [2]uintptr {
	return [2]uintptr{*(*uintptr)(unsafe.Pointer(&c.sbuf)), *(*uintptr)(unsafe.Pointer(&c.rbuf))}
}

// args converts a call to coll's arguments. The C half has classified
// the buffers (c.device, c.dev, c.attrs): host memory becomes Go bytes,
// device memory is passed by address with its allocation as the driver
// described it.
func (st *commState) args(c *C.struct_gc_call) (coll.Args, error) {
	a := coll.Args{Type: ops.Type(c._type), InPlace: c.inplace != 0}
	if c.op != 0 {
		a.Op = coll.Op{Builtin: ops.Op(c.op)}
	} else {
		a.Op = userOp(c)
	}
	elem, count, p := int64(c.elem), int64(c.count), int64(st.size)
	b := bufferAddrs(c)
	send, recv := b[0], b[1]
	switch algorithms.Collective(c.coll) {
	case algorithms.Allreduce:
		a.Count = int(count)
		st.place(c, recv, count*elem, &a.Recv, &a.RecvDevice)
		if !a.InPlace {
			st.place(c, send, count*elem, &a.Send, &a.SendDevice)
		}
	case algorithms.ReduceScatterBlock:
		a.Count = int(count)
		if a.InPlace {
			st.place(c, recv, count*elem*p, &a.Recv, &a.RecvDevice)
		} else {
			st.place(c, recv, count*elem, &a.Recv, &a.RecvDevice)
			st.place(c, send, count*elem*p, &a.Send, &a.SendDevice)
		}
	case algorithms.ReduceScatter:
		if cap(st.counts) < st.size {
			st.counts = make([]int, st.size)
		}
		a.Counts = st.counts[:st.size]
		var total int64
		for i := range a.Counts {
			if c.counts64 != 0 {
				a.Counts[i] = int(*(*int64)(unsafe.Add(c.counts, 8*i)))
			} else {
				a.Counts[i] = int(*(*C.int)(unsafe.Add(c.counts, 4*i)))
			}
			total += int64(a.Counts[i])
		}
		if a.InPlace {
			st.place(c, recv, total*elem, &a.Recv, &a.RecvDevice)
		} else {
			st.place(c, recv, int64(a.Counts[st.rank])*elem, &a.Recv, &a.RecvDevice)
			st.place(c, send, total*elem, &a.Send, &a.SendDevice)
		}
	case algorithms.Allgather:
		a.Count = int(count)
		st.place(c, recv, count*elem*p, &a.Recv, &a.RecvDevice)
		if !a.InPlace {
			st.place(c, send, count*elem, &a.Send, &a.SendDevice)
		}
	}
	return a, nil
}

// userOp applies a user-defined op with the host's MPI_Reduce_local, so
// that C and Fortran functions alike are called as the host calls them.
func userOp(c *C.struct_gc_call) coll.Op {
	dt, op, elem := c.dt, c.mpiop, int(c.elem)
	return coll.Op{Commutative: c.commutative != 0, User: func(ops.Type) ops.Kernel {
		return ops.UserKernel(func(in, inout []byte, n int) {
			if n == 0 {
				return
			}
			if rc := C.gc_reduce_local(ptr(in), ptr(inout), C.int64_t(n), dt, op); rc != 0 {
				panic(fmt.Sprintf("MPI_Reduce_local failed (host MPI error %d)", int(rc)))
			}
		}, elem)
	}}
}

// gc_drop_comm drops the state of a communicator being freed.
//
//export gc_drop_comm
func gc_drop_comm(id C.int) {
	defer func() {
		if v := recover(); v != nil {
			internal("MPI_Comm_free", v)
		}
	}()
	free(id)
}

// gc_finish runs at MPI_Finalize.
//
//export gc_finish
func gc_finish() {
	defer func() {
		if v := recover(); v != nil {
			internal("MPI_Finalize", v)
		}
	}()
	finish()
}

// progressThreadAllowed says whether GOCOLL_PROGRESS_THREAD=1 may run over
// a host MPI that provides thread support level (MPI_Query_thread): the
// progress thread calls the host's point-to-point functions (the hostmpi
// transport, user ops through MPI_Reduce_local) from a thread of its own,
// which MPI allows only at MPI_THREAD_MULTIPLE.
func progressThreadAllowed(level int) error {
	const multiple = 3 // MPI_THREAD_MULTIPLE on Open MPI and MPICH alike
	if level == multiple {
		return nil
	}
	names := []string{"MPI_THREAD_SINGLE", "MPI_THREAD_FUNNELED", "MPI_THREAD_SERIALIZED"}
	had := "an unknown level"
	if level >= 0 && level < len(names) {
		had = names[level]
	}
	return fmt.Errorf("GOCOLL_PROGRESS_THREAD=1: the progress thread calls the host MPI from a thread of its own, which needs MPI_THREAD_MULTIPLE, but the host provides %s: initialise MPI with MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...) or unset GOCOLL_PROGRESS_THREAD", had)
}
