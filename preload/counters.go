package main

/*
#include "preload.h"
*/
import "C"

import (
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"unsafe"

	"github.com/gocoll/gocoll/algorithms"
)

// Which path each call took: the C half's counters (gc_counters, see
// preload.h), read by the finalize report (GOCOLL_REPORT=1) and by
// gocoll_test_counter. The C half counts the host's calls, the fallbacks
// among them and the decisions served from the cache; countRun counts the
// calls gocoll runs.

// The C half's counter indices (preload.h).
const (
	kGo         = C.GC_K_GO
	kFallback   = C.GC_K_FALLBACK
	kHost       = C.GC_K_HOST
	kHostCached = C.GC_K_HOST_CACHED
	kCached     = C.GC_K_CACHED
	kAlg        = C.GC_K_ALG // + the algorithm's index in algorithms.Names
	maxAlgs     = C.GC_MAXALGS
)

// counter returns collective coll's counter k.
func counter(coll, k int) *uint64 {
	return (*uint64)(unsafe.Pointer(&C.gc_counters[coll][k]))
}

// countRun counts a call gocoll runs now, with its algorithm c.alg.
func countRun(c *C.struct_gc_call) {
	coll := int(c.coll)
	atomic.AddUint64(counter(coll, kGo), 1)
	if a := int(c.alg); a >= 0 && a < maxAlgs {
		atomic.AddUint64(counter(coll, kAlg+a), 1)
	}
	if c.how == 2 {
		atomic.AddUint64(counter(coll, kFallback), 1)
	}
}

// Counters as reported: k, or these sums of the C half's.
const (
	keyHost   = -1 // GC_K_HOST + GC_K_HOST_CACHED
	keyCached = -2 // GC_K_CACHED + GC_K_HOST_CACHED
)

// load reads collective coll's counter k (or keyHost, keyCached).
func load(coll, k int) uint64 {
	switch k {
	case keyHost:
		return atomic.LoadUint64(counter(coll, kHost)) + atomic.LoadUint64(counter(coll, kHostCached))
	case keyCached:
		return atomic.LoadUint64(counter(coll, kCached)) + atomic.LoadUint64(counter(coll, kHostCached))
	}
	return atomic.LoadUint64(counter(coll, k))
}

// hostCalls is the number of calls the host MPI ran, over the collectives.
func hostCalls() uint64 {
	var n uint64
	for i := range algorithms.Collectives {
		n += load(i, keyHost)
	}
	return n
}

// reportLines returns the GOCOLL_REPORT lines of world rank rank: one per
// collective with a counter other than zero,
//
//	gocoll: rank R: report: MPI_Allreduce go=5 ring=3 shm=2 fallback=1 host=7 cached=9
//
// keys in that order (the algorithms sorted by name), those at zero left
// out except go.
func reportLines(rank int) []string {
	var lines []string
	for i, cl := range algorithms.Collectives {
		var b strings.Builder
		any := false
		get := func(k int) uint64 {
			v := load(i, k)
			any = any || v != 0
			return v
		}
		fmt.Fprintf(&b, "gocoll: rank %d: report: %s go=%d", rank, cl, get(kGo))
		for a, name := range algorithms.Names(cl) {
			if v := get(kAlg + a); v != 0 {
				fmt.Fprintf(&b, " %s=%d", name, v)
			}
		}
		for _, k := range []struct {
			name string
			k    int
		}{{"fallback", kFallback}, {"host", keyHost}, {"cached", keyCached}} {
			if v := get(k.k); v != 0 {
				fmt.Fprintf(&b, " %s=%d", k.name, v)
			}
		}
		if any {
			lines = append(lines, b.String())
		}
	}
	return lines
}

// report prints the GOCOLL_REPORT lines on stderr, at MPI_Finalize.
func report() {
	for _, l := range reportLines(int(C.gc_world_rank())) {
		fmt.Fprintln(os.Stderr, l)
	}
}

// counterIndex returns the collective and counter of a
// gocoll_test_counter key, "<call>.<counter>" (MPI_Allreduce.cached,
// MPI_Allgather.ring), or false.
func counterIndex(key string) (coll, k int, ok bool) {
	call, name, found := strings.Cut(key, ".")
	if !found {
		return 0, 0, false
	}
	for i, cl := range algorithms.Collectives {
		if cl.String() != call {
			continue
		}
		switch name {
		case "go":
			return i, kGo, true
		case "fallback":
			return i, kFallback, true
		case "host":
			return i, keyHost, true
		case "cached":
			return i, keyCached, true
		}
		for a, n := range algorithms.Names(cl) {
			if n == name && a < maxAlgs {
				return i, kAlg + a, true
			}
		}
	}
	return 0, 0, false
}

// gocoll_test_counter returns the counter named by key ("<call>.<counter>",
// e.g. "MPI_Allreduce.cached"), 0 for one never counted, or -1 for an
// unknown key. For tests: they find it with dlsym(RTLD_DEFAULT,
// "gocoll_test_counter"), absent when the library is not preloaded.
//
//export gocoll_test_counter
func gocoll_test_counter(key *C.char) (v C.longlong) {
	defer func() {
		if r := recover(); r != nil {
			internal("gocoll_test_counter", r)
			v = -1
		}
	}()
	if key == nil {
		return -1
	}
	coll, k, ok := counterIndex(C.GoString(key))
	if !ok {
		return -1
	}
	return C.longlong(load(coll, k))
}
