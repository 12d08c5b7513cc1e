package main

/*
#include "fast.h"
*/
import "C"

import (
	"fmt"
	"os"

	"github.com/gocoll/gocoll/coll/counters"
)

// The fast path counts in C (mpi.c's FAST, by GOCOLL_CALL_ code: the
// counters.Call, generated into engine_gen.h); its counts are the Fast
// counters of package counters.
func init() {
	counters.SetSource(counters.Fast, func(c counters.Call) int64 {
		return int64(C.gocoll_fast_count(C.int(c)))
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
