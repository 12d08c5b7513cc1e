package main

import (
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gocoll/gocoll/algorithms"
)

// Every algorithm of every collective has a counter.
func TestCountersFitAlgorithms(t *testing.T) {
	for _, cl := range algorithms.Collectives {
		if n := len(algorithms.Names(cl)); n > maxAlgs {
			t.Errorf("%s has %d algorithms, the C half counts %d (GC_MAXALGS in preload.h)", cl, n, maxAlgs)
		}
	}
}

// The report's lines and the test query read the same counters, in the
// report's order, zeros left out but go's.
func TestReportAndQuery(t *testing.T) {
	set := func(coll, k int, v uint64) { atomic.StoreUint64(counter(coll, k), v) }
	defer func() {
		for i := range algorithms.Collectives {
			for k := range kAlg + maxAlgs {
				set(i, k, 0)
			}
		}
	}()
	ar, ag := int(algorithms.Allreduce), int(algorithms.Allgather)
	alg := func(cl algorithms.Collective, name string) int {
		return kAlg + slices.Index(algorithms.Names(cl), name)
	}
	set(ar, kGo, 5)
	set(ar, alg(algorithms.Allreduce, "shm"), 2)
	set(ar, alg(algorithms.Allreduce, "ring"), 3)
	set(ar, kFallback, 1)
	set(ar, kHost, 3)
	set(ar, kHostCached, 4)
	set(ar, kCached, 5)
	set(ag, kHost, 2)
	got := reportLines(7)
	want := []string{
		"gocoll: rank 7: report: MPI_Allreduce go=5 ring=3 shm=2 fallback=1 host=7 cached=9",
		"gocoll: rank 7: report: MPI_Allgather go=0 host=2",
	}
	if !slices.Equal(got, want) {
		t.Errorf("report:\n got %q\nwant %q", got, want)
	}
	for key, v := range map[string]int64{
		"MPI_Allreduce.go": 5, "MPI_Allreduce.ring": 3, "MPI_Allreduce.shm": 2, "MPI_Allreduce.rabenseifner": 0,
		"MPI_Allreduce.fallback": 1, "MPI_Allreduce.host": 7, "MPI_Allreduce.cached": 9,
		"MPI_Allgather.host": 2, "MPI_Allgather.bruck": 0, "MPI_Reduce_scatter.pairwise": 0,
		"MPI_Allreduce.bruck": -1, "MPI_Allreduce.native": -1, "MPI_Allreduce": -1, "MPI_Bcast.go": -1,
		"": -1, "MPI_Allreduce.": -1, ".go": -1, "MPI_Allreduce.go.x": -1, "mpi_allreduce.go": -1,
	} {
		got := int64(-1)
		if coll, k, ok := counterIndex(key); ok {
			got = int64(load(coll, k))
		}
		if got != v {
			t.Errorf("%q: %d, want %d", key, got, v)
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
