package main

/*
#include "fast.h"
*/
import "C"

import (
	"fmt"
	"os"

	"github.com/gocoll/gocoll/internal/counters"
)

// fastBits are the fast.c calls' places in gocoll_fast_calls.
var fastBits = map[counters.Call]C.int{
	counters.Allreduce: C.FAST_ALLREDUCE, counters.ReduceScatterBlock: C.FAST_REDUCE_SCATTER_BLOCK,
	counters.Allgather: C.FAST_ALLGATHER, counters.Barrier: C.FAST_BARRIER,
}

// The fast path counts in C (mpi.c's FAST); its counts are the Fast
// counters of package counters.
func init() {
	counters.SetSource(counters.Fast, func(c counters.Call) int64 {
		if bit, ok := fastBits[c]; ok {
			return int64(C.gocoll_fast_count(bit))
		}
		return 0
	})
}

// gocoll_test_counter is a test hook, not MPI: the path counter named by
// key, "<call>.<counter>" (e.g. "MPI_Allreduce.fast",
// "MPI_Allreduce.ring"), of this process; 0 if it never moved, -1 for an
// unknown call or counter name. tests/c/gocoll_counters.h declares it.
//
//export gocoll_test_counter
func gocoll_test_counter(key *C.char) (v C.longlong) {
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(os.Stderr, "gocoll: gocoll_test_counter: internal error: %v\n", r)
			v = -1
		}
	}()
	if key == nil {
		return -1
	}
	return C.longlong(counters.Lookup(C.GoString(key)))
}
