package main

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/coll/counters"
)

// The C half's counters are package counters' host, cached, fallback and
// fast counts: the report's lines and the test query read them, a host
// call decided from the cache counting as both host and cached.
func TestCCounters(t *testing.T) {
	set := func(coll, k int, v uint64) { atomic.StoreUint64(cCounter(coll, k), v) }
	defer func() {
		for i := range calls {
			for k := range nCounters {
				set(i, k, 0)
			}
		}
	}()
	ar, ag := int(algorithms.Allreduce), int(algorithms.Allgather)
	base := counters.Of(counters.Allreduce)
	set(ar, kHost, 3)
	set(ar, kHostCached, 4)
	set(ar, kCached, 5)
	set(ar, kFallback, 1)
	set(ar, kMemo, 6)
	set(ag, kHost, 2)
	set(ag, kFast, 4)
	set(ag, kFastMemo, 3)
	for key, v := range map[string]int64{
		"MPI_Allreduce.host": base.Host + 13, "MPI_Allreduce.cached": base.Cached + 15, "MPI_Allreduce.fallback": base.Fallback + 1,
		"MPI_Allreduce.go": base.Go, "MPI_Allgather.cached": 0, "MPI_Reduce_scatter.host": 0,
		"MPI_Allgather.fast": 4, "MPI_Allreduce.fast": 0, "MPI_Allgather.fast_remembered": 3, "MPI_Allreduce.fast_remembered": 0,
		"MPI_Barrier.fast_remembered": -1, "MPI_Allreduce.remembered": 6, "MPI_Allgather.remembered": 0, "MPI_Barrier.remembered": -1, ".remembered": -1,
		"MPI_Allreduce.native": -1, "MPI_Allreduce": -1, "": -1,
	} {
		if got := lookup(key); got != v {
			t.Errorf("%q: %d, want %d", key, got, v)
		}
	}
	if got := hostCalls(); got != 15 {
		t.Errorf("hostCalls: %d, want 15", got)
	}
	var b strings.Builder
	counters.Report(&b, 7)
	for _, want := range []string{"gocoll: rank 7: report: MPI_Allgather fast=4 go=0 host=2\n", " host=13 cached=15\n"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
}

// GOCOLL_REPORT is 0 or 1; anything else is an error naming it.
func TestReportVariable(t *testing.T) {
	for v, want := range map[string]bool{"": false, "0": false, "1": true} {
		if c := mustConfig(t, map[string]string{"GOCOLL_REPORT": v}, "openmpi"); c.report != want {
			t.Errorf("GOCOLL_REPORT=%q: report %v", v, c.report)
		}
	}
	if _, err := loadConfig(envOf(map[string]string{"GOCOLL_REPORT": "yes"}), "mpich"); err == nil || !strings.Contains(err.Error(), "GOCOLL_REPORT=yes") {
		t.Errorf("GOCOLL_REPORT=yes: %v", err)
	}
}
