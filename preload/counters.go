package main

/*
#include "preload.h"
*/
import "C"

import (
	"os"
	"strings"
	"unsafe"

	"github.com/gocoll/gocoll/coll/counters"
)

// Which path each call took is package counters' table, as in
// libgocoll.so: coll counts the calls gocoll runs and their algorithms,
// gc_run the fallbacks among them (coll sees the preload's choice as
// forced), and the C half, in gc_counters (preload.h), the calls it hands
// to the host MPI, the fallbacks among those, the decisions served from
// the cache and the calls the shared-memory engine's C half ran; those
// are counters' Host, Cached, Fallback and Fast sources.
// GOCOLL_REPORT=1 prints them at MPI_Finalize; gocoll_test_counter reads
// them for tests.

// calls are package counters' calls, by the C half's collective index
// (GC_ALLREDUCE ..., the order of algorithms.Collectives).
var calls = [C.GC_NCOLL]counters.Call{counters.Allreduce, counters.ReduceScatter, counters.ReduceScatterBlock, counters.Allgather}

// The C half's counters (preload.h).
const (
	kHost       = C.GC_K_HOST
	kHostCached = C.GC_K_HOST_CACHED
	kCached     = C.GC_K_CACHED
	kFallback   = C.GC_K_FALLBACK
	kMemo       = C.GC_K_MEMO
	kFast       = C.GC_K_FAST
	kFastMemo   = C.GC_K_FAST_MEMO
	kCorrected  = C.GC_K_CORRECTED
	nCounters   = C.GC_NCOUNTERS
)

// cCounter is the C half's shared counter k of collective index i, which
// gc_counter adds to the threads' own (tests set it).
func cCounter(i, k int) *uint64 { return (*uint64)(unsafe.Pointer(&C.gc_counters[i][k])) }

// cCount returns the sum of the C half's counters ks of call c (0 for a
// call the C half does not intercept).
func cCount(c counters.Call, ks ...int) int64 {
	for i, ci := range calls {
		if ci != c {
			continue
		}
		var n uint64
		for _, k := range ks {
			n += uint64(C.gc_counter(C.int(i), C.int(k)))
		}
		return int64(n)
	}
	return 0
}

// A host call decided from the cache costs the C half one counter
// (GC_K_HOST_CACHED, or GC_K_MEMO when it matched the thread's last host
// call), which counts as a host call and as a cached one.
func init() {
	counters.SetSource(counters.Host, func(c counters.Call) int64 { return cCount(c, kHost, kHostCached, kMemo) })
	counters.SetSource(counters.Cached, func(c counters.Call) int64 { return cCount(c, kCached, kHostCached, kMemo) })
	counters.SetSource(counters.Fallback, func(c counters.Call) int64 { return cCount(c, kFallback) })
	counters.SetSource(counters.Fast, func(c counters.Call) int64 { return cCount(c, kFast) })
	counters.SetSource(counters.Corrected, func(c counters.Call) int64 { return cCount(c, kCorrected) })
}

// hostCalls is the number of calls the host MPI ran, over the collectives.
func hostCalls() int64 {
	var n int64
	for _, c := range calls {
		n += counters.Get(c, counters.Host)
	}
	return n
}

// report prints the GOCOLL_REPORT lines on stderr, at MPI_Finalize.
func report() { counters.Report(os.Stderr, int(C.gc_world_rank())) }

// gocoll_test_counter returns the counter named by key ("<call>.<counter>",
// e.g. "MPI_Allreduce.cached"), 0 for one never counted, or -1 for an
// unknown key. "<call>.remembered" is the preload's own: of the call's
// host calls, those that matched the thread's last one and went straight
// to the host (in no report: libgocoll.so has no such path);
// "<call>.fast_remembered" the same of the calls the engine's C half ran;
// "<call>.requests" the nonblocking calls and persistent starts gocoll
// ran as requests, "<call>.requests_host" the nonblocking and persistent
// calls handed to the host's. For tests: they find it with dlsym(RTLD_DEFAULT,
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
	return C.longlong(lookup(C.GoString(key)))
}

// lookup answers gocoll_test_counter.
func lookup(key string) int64 {
	for suffix, k := range map[string]int{".remembered": kMemo, ".fast_remembered": kFastMemo,
		".requests": C.GC_K_REQUEST, ".requests_host": C.GC_K_REQUEST_HOST} {
		if name, ok := strings.CutSuffix(key, suffix); ok {
			for _, c := range calls {
				if c.String() == name {
					return cCount(c, k)
				}
			}
			return -1
		}
	}
	return counters.Lookup(key)
}
