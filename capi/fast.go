package main

/*
#include "fast.h"

static void gocoll_fast_counted(int call) { __atomic_fetch_add(&gocoll_fast_calls[call], 1, __ATOMIC_RELAXED); }
*/
import "C"

import (
	"strings"
	"unsafe"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/coll/counters"
	"github.com/gocoll/gocoll/envvar"
	"github.com/gocoll/gocoll/intranode/engine" // also the engine's C half, which fast.c calls
)

// enableFast turns on fast.c's C paths for small calls, except where the
// user asked to see or choose what runs: GOCOLL_DEBUG=info (one line per
// call comes from Go) and a forced algorithm other than shm.
func enableFast() {
	set, _ := envvar.FromEnv() // MPI_Init has checked the error
	if set.Debug || set.Check {
		return
	}
	forced := map[counters.Call]algorithms.Collective{
		counters.Allreduce: algorithms.Allreduce, counters.ReduceScatter: algorithms.ReduceScatter,
		counters.ReduceScatterBlock: algorithms.ReduceScatterBlock, counters.Allgather: algorithms.Allgather,
		counters.Bcast: algorithms.Bcast,
	}
	on := C.int(1) << C.GOCOLL_CALL_BARRIER
	for c, coll := range forced {
		if v := set.Forced[coll]; v == "" || v == "shm" {
			on |= 1 << C.int(c)
		}
	}
	C.gocoll_fast_enabled = on
}

// fastAttach lets fast.c use e's shared segment, if it has one.
func fastAttach(e *commEntry) {
	lay, ok := e.c.SharedLayout()
	crowded, usable := engine.Attachable(lay)
	if !ok || !usable {
		return // no segment, or not the layout the C half was built for: Go runs the calls
	}
	C.gocoll_fast_attach(C.int(e.handle), lay.Base, C.int(lay.P), C.int(lay.Rank), C.long(lay.Slot),
		C.long(lay.DataOffset), C.int(crowded))
}

// fastDetach stops fast.c from using a communicator being freed.
func fastDetach(e *commEntry) { C.gocoll_fast_detach(C.int(e.handle)) }

// fastBcast runs a bcast that Go decoded (a derived datatype, which fast.c
// does not know) on the fast path when it is one for it: the engine
// decides by the bytes, the same on every rank, so ranks that describe
// the buffer with different datatypes meet on one path. Returns -1 if not.
func fastBcast(buf unsafe.Pointer, bytes int64, root C.int, comm C.MPI_Comm) C.int {
	var pl C.struct_gocoll_placed
	rc := C.gocoll_fast_bcast_bytes(buf, C.long(bytes), root, comm, &pl)
	if rc >= 0 {
		C.gocoll_fast_counted(C.GOCOLL_CALL_BCAST)
	}
	return rc
}

//export gocoll_fast_wait
func gocoll_fast_wait(comm C.MPI_Comm, which C.int) (rc C.int) {
	call := counters.Call(which).String()
	if strings.HasPrefix(call, "call(") {
		call = "MPI collective (fast path)"
	}
	defer guard(call, &rc)
	e, err := lookupComm(call, comm)
	if err != nil {
		return fail(nil, err)
	}
	return fail(e, e.c.WaitShared(call))
}
