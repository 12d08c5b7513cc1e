// Command gosplitshared is tests/c/splittype.c for package mpi: started
// by gocollrun on emulated hosts, with argv[1] naming each world rank's
// host ("0101": ranks 0 and 2 on one host, 1 and 3 on another), it checks
// that mpi.Init learned the node map from the job (Comm.SplitShared gives
// each rank the ranks of its host, in key order) and that an allreduce
// forced to the shm algorithm runs on the node communicator and, where
// the world spans hosts, fails on the world (the test sets
// GOCOLL_FALLBACK=error). Each rank prints `rank R: N passed, N failed`
// and exits 1 on its own failures.
package main

import (
	"fmt"
	"os"
	"slices"

	"github.com/gocoll/gocoll/mpi"
)

func main() {
	world, err := mpi.Init()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	r, p := world.Rank(), world.Size()
	if len(os.Args) != 2 || len(os.Args[1]) != p {
		fmt.Fprintf(os.Stderr, "usage: gosplitshared HOSTS (one character per rank, %d ranks)\n", p)
		os.Exit(2)
	}
	hosts := os.Args[1]
	passed, failed := 0, 0
	check := func(ok bool, format string, a ...any) {
		if ok {
			passed++
			return
		}
		failed++
		fmt.Fprintf(os.Stderr, "rank %d: FAIL: %s\n", r, fmt.Sprintf(format, a...))
	}
	var want []int32 // the ranks on my host, in reverse order
	oneHost := true
	for q := p - 1; q >= 0; q-- {
		if hosts[q] == hosts[r] {
			want = append(want, int32(q))
		}
		oneHost = oneHost && hosts[q] == hosts[0]
	}
	node, err := world.SplitShared(-r)
	check(err == nil, "SplitShared: %v", err)
	if err == nil {
		got := make([]int32, node.Size())
		err := mpi.Allgather(node, []int32{int32(r)}, got)
		check(err == nil && slices.Equal(got, want) && got[node.Rank()] == int32(r),
			"node communicator of world ranks %v (me %d, %v), want %v", got, node.Rank(), err, want)
		if len(want) > 1 {
			sum := make([]int64, 1)
			err := mpi.Allreduce(node, []int64{int64(r)}, sum, mpi.Sum, mpi.WithAlgorithm("shm"))
			var w int64
			for _, q := range want {
				w += int64(q)
			}
			check(err == nil && sum[0] == w, "shm allreduce on the node communicator: %d (%v), want %d", sum[0], err, w)
		}
		node.Free()
	}
	sum := make([]int64, 1)
	err = mpi.Allreduce(world, []int64{1}, sum, mpi.Sum, mpi.WithAlgorithm("shm"))
	check((err == nil) == oneHost, "shm allreduce on the world (one host: %v): %v", oneHost, err)
	fmt.Printf("rank %d: %d passed, %d failed\n", r, passed, failed)
	if err := mpi.Finalize(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if failed > 0 {
		os.Exit(1)
	}
}
