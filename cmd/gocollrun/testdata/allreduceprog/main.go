// Command allreduceprog is a gocoll program for gocollrun's tests on
// emulated hosts: every rank adds up a vector of 1003 doubles with
// mpi.Allreduce, checks the sum and prints PASS with its rank and host.
package main

import (
	"fmt"
	"os"

	"github.com/gocoll/gocoll/mpi"
)

func main() {
	c, err := mpi.Init()
	if err != nil {
		fail("%v", err)
	}
	r, n := c.Rank(), c.Size()
	const count = 1003
	send, sum := make([]float64, count), make([]float64, count)
	for i := range send {
		send[i] = float64(r*count + i)
	}
	if err := mpi.Allreduce(c, send, sum, mpi.Sum); err != nil {
		fail("rank %d: allreduce: %v", r, err)
	}
	for i, v := range sum {
		// The sum over ranks p of p*count+i.
		if want := float64(count*n*(n-1)/2 + n*i); v != want {
			fail("rank %d: element %d is %v, want %v", r, i, v, want)
		}
	}
	if err := mpi.Finalize(); err != nil {
		fail("rank %d: finalize: %v", r, err)
	}
	fmt.Printf("PASS allreduce of %d doubles, rank %d of %d on %s\n", count, r, n, os.Getenv("GOCOLL_HOST"))
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "allreduceprog: "+format+"\n", args...)
	os.Exit(1)
}
