package main

/*
#include "fast.h"
*/
import "C"

import (
	"os"
	"strings"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/tuner"
)

// enableFast turns on fast.c's C paths for small calls, except where the
// user asked to see or choose what runs: GOCOLL_DEBUG=info (one line per
// call comes from Go) and a forced algorithm other than shm.
func enableFast() {
	if strings.EqualFold(os.Getenv("GOCOLL_DEBUG"), "info") || os.Getenv("GOCOLL_CHECK") != "" {
		return
	}
	bits := map[algorithms.Collective]C.int{
		algorithms.Allreduce: C.FAST_ALLREDUCE, algorithms.ReduceScatterBlock: C.FAST_REDUCE_SCATTER_BLOCK,
		algorithms.Allgather: C.FAST_ALLGATHER,
	}
	on := C.int(C.FAST_BARRIER)
	for c, bit := range bits {
		if v := os.Getenv(tuner.ForceVar(c)); v == "" || v == "auto" || v == "shm" {
			on |= bit
		}
	}
	C.gocoll_fast_enabled = on
}

// fastAttach lets fast.c use e's shared segment, if it has one.
func fastAttach(e *commEntry) {
	lay, ok := e.c.SharedLayout()
	if !ok {
		return
	}
	crowded := 0
	if lay.Crowded {
		crowded = 1
	}
	C.gocoll_fast_attach(C.int(e.handle), lay.Base, C.int(lay.P), C.int(lay.Rank), C.long(lay.Slot),
		C.long(lay.DataOffset), C.long(lay.CtlOffset), C.long(lay.BellOffset), C.int(crowded))
}

// fastDetach stops fast.c from using a communicator being freed.
func fastDetach(e *commEntry) { C.gocoll_fast_detach(C.int(e.handle)) }

// fastCalls names the calls of fast.c, by the bit wait_all passes.
var fastCalls = map[C.int]string{
	C.FAST_ALLREDUCE: "MPI_Allreduce", C.FAST_REDUCE_SCATTER_BLOCK: "MPI_Reduce_scatter_block",
	C.FAST_ALLGATHER: "MPI_Allgather", C.FAST_BARRIER: "MPI_Barrier",
}

//export go_fast_wait
func go_fast_wait(comm C.MPI_Comm, which C.int) (rc C.int) {
	call := fastCalls[which]
	if call == "" {
		call = "MPI collective (fast path)"
	}
	defer guard(call, &rc)
	e, err := lookupComm(call, comm)
	if err != nil {
		return fail(nil, err)
	}
	return fail(e, e.c.WaitShared(call))
}
