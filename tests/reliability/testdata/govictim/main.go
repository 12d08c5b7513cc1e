// Command govictim is victim.c for Go programs: it runs one collective of
// package mpi in a loop, checking every result, until a test kills, stops
// or ends one of its ranks. It prints `rank R pid P job J comm-rank C
// path N` once the first call has worked (N: the path counter -path of
// mpi.Counters, so the test knows which algorithm the job ran); a failed call prints
// `gocoll: <error> (rank R)` and exits 76, a wrong result prints
// `rank R: WRONG ...` and exits 2.
//
//	govictim -coll NAME -count N [-exit RANK] [-comm world|dup|split] [-ignore-term] [-path KEY]
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/gocoll/gocoll/mpi"
)

func main() {
	collName := flag.String("coll", "allreduce", "allreduce, reduce_scatter, reduce_scatter_block, allgather, allgatherv or barrier")
	n := flag.Int("count", 16, "elements per rank (per block)")
	exitRank := flag.Int("exit", -1, "world rank that exits in the middle of the job")
	commName := flag.String("comm", "world", "world, dup or split (the ranks reversed)")
	ignoreTerm := flag.Bool("ignore-term", false, "ignore SIGTERM")
	path := flag.String("path", "MPI_Allreduce.go", "the path counter printed once the first call has worked: <call>.go or <call>.<algorithm>")
	flag.Parse()
	if *ignoreTerm {
		signal.Ignore(syscall.SIGTERM)
	}
	world, err := mpi.Init()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	wrank := world.Rank()
	c := world
	switch *commName {
	case "dup":
		c, err = world.Dup()
	case "split":
		c, err = world.Split(0, -wrank)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	rank, size := c.Rank(), c.Size()
	in := make([]int32, *n*size)
	out := make([]int32, *n*size)
	counts := make([]int, size)
	for q := range counts {
		counts[q] = *n
	}
	wrong := func(i int, got, want int64) {
		fmt.Printf("rank %d: WRONG %s: element %d is %d, want %d\n", wrank, *collName, i, got, want)
		os.Exit(2)
	}
	sumr := int64(size * (size - 1) / 2)
	var start time.Time
	for it := 0; ; it++ {
		for i := range in {
			in[i] = int32(rank + i + it)
		}
		switch *collName {
		case "allreduce":
			err = mpi.Allreduce(c, in[:*n], out[:*n], mpi.Sum)
			for i := 0; err == nil && i < *n; i++ {
				if want := sumr + int64(size*(i+it)); int64(out[i]) != want {
					wrong(i, int64(out[i]), want)
				}
			}
		case "reduce_scatter", "reduce_scatter_block":
			if *collName == "reduce_scatter" {
				err = mpi.ReduceScatter(c, in, out[:*n], counts, mpi.Sum)
			} else {
				err = mpi.ReduceScatterBlock(c, in, out[:*n], mpi.Sum)
			}
			for i := 0; err == nil && i < *n; i++ {
				if want := sumr + int64(size*(rank**n+i+it)); int64(out[i]) != want {
					wrong(i, int64(out[i]), want)
				}
			}
		case "allgather", "allgatherv":
			if *collName == "allgatherv" {
				err = mpi.Allgatherv(c, in[:*n], out, counts)
			} else {
				err = mpi.Allgather(c, in[:*n], out)
			}
			for q := 0; err == nil && q < size; q++ {
				for i := 0; i < *n; i++ {
					if want := int64(q + i + it); int64(out[q**n+i]) != want {
						wrong(q**n+i, int64(out[q**n+i]), want)
					}
				}
			}
		case "barrier":
			err = c.Barrier()
		default:
			fmt.Fprintln(os.Stderr, "govictim: unknown collective", *collName)
			os.Exit(64)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "gocoll: %v (rank %d)\n", err, wrank)
			os.Exit(76)
		}
		if it == 0 {
			fmt.Printf("rank %d pid %d job %s comm-rank %d path %d\n", wrank, os.Getpid(), os.Getenv("GOCOLL_JOB_ID"), rank, pathCount(*path))
			start = time.Now()
		}
		t := time.Since(start)
		if wrank == *exitRank && t > 300*time.Millisecond {
			fmt.Printf("rank %d: exiting in the middle of the job\n", wrank)
			os.Exit(3)
		}
		if t > time.Minute {
			break
		}
	}
	fmt.Printf("rank %d: done\n", wrank)
	mpi.Finalize()
}

// pathCount returns the counter key ("<call>.go" or "<call>.<algorithm>")
// of mpi.Counters, -1 for a key of another form.
func pathCount(key string) int64 {
	call, counter, ok := strings.Cut(key, ".")
	if !ok {
		return -1
	}
	cc := mpi.Counters()[call]
	if counter == "go" {
		return cc.Go
	}
	return cc.Algorithms[counter]
}
