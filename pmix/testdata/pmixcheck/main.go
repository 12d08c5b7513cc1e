// Command pmixcheck is run by pmix's tests under mpirun: it checks what
// the PMIx client reports against Open MPI's own variables and runs
// Allgathers of several sizes, checking every byte. It prints one line
// per rank and exits 0 only if everything matched.
//
// With -abort, the last rank aborts the job with code 3 while the others
// wait in an Allgather, which must not succeed (nor hang).
//
// With -bench n it times n Allgathers of 64 bytes (an address card) and
// prints rank 0's mean and the traffic of one.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/gocoll/gocoll/pmix"
)

func main() {
	bench := flag.Int("bench", 0, "time this many 64-byte Allgathers")
	abort := flag.Bool("abort", false, "the last rank aborts the job")
	flag.Parse()
	if *abort {
		c, err := pmix.Init()
		if err != nil {
			fmt.Fprintln(os.Stderr, "pmixcheck:", err)
			os.Exit(1)
		}
		if c.Rank() == c.Size()-1 {
			// The launcher may let the caller return; it exits then.
			if err := c.Abort(3, "pmixcheck aborts on purpose"); err != nil {
				fmt.Fprintln(os.Stderr, "pmixcheck:", err)
			}
			os.Exit(3)
		}
		// mpirun kills this rank, or ends its fence with an error.
		if _, err = c.Allgather([]byte("waits for the last rank")); err == nil {
			fmt.Fprintln(os.Stderr, "pmixcheck: Allgather succeeded despite the abort")
		} else {
			fmt.Fprintln(os.Stderr, "pmixcheck: Allgather failed after the abort:", err)
		}
		os.Exit(1)
	}
	if err := run(*bench); err != nil {
		fmt.Fprintln(os.Stderr, "pmixcheck:", err)
		os.Exit(1)
	}
}

func envInt(name string) (int, error) {
	n, err := strconv.Atoi(os.Getenv(name))
	if err != nil {
		return 0, fmt.Errorf("%s=%q", name, os.Getenv(name))
	}
	return n, nil
}

// blob is rank r's contribution to Allgather number i: n bytes that
// depend on r, i and the position.
func blob(r, i, n int) []byte {
	b := make([]byte, n)
	for k := range b {
		b[k] = byte(r*31 + i*7 + k*13 + k>>8)
	}
	return b
}

func run(bench int) error {
	start := time.Now()
	c, err := pmix.Init()
	if err != nil {
		return err
	}
	initTime := time.Since(start)
	rank, err1 := envInt("OMPI_COMM_WORLD_RANK")
	size, err2 := envInt("OMPI_COMM_WORLD_SIZE")
	lrank, err3 := envInt("OMPI_COMM_WORLD_LOCAL_RANK")
	if err1 != nil || err2 != nil || err3 != nil {
		return fmt.Errorf("not under Open MPI's mpirun: %v %v %v", err1, err2, err3)
	}
	if c.Rank() != rank || c.Size() != size {
		return fmt.Errorf("PMIx says rank %d of %d, Open MPI says %d of %d", c.Rank(), c.Size(), rank, size)
	}
	nodes, err := c.Nodes()
	if err != nil {
		return err
	}
	if len(nodes) != size {
		return fmt.Errorf("Nodes has %d entries for %d ranks", len(nodes), size)
	}
	// This rank's local rank is the number of lower ranks on its node
	// (mpirun maps by slot, so a node's ranks are in rank order).
	mine := 0
	for r := range rank {
		if nodes[r] == nodes[rank] {
			mine++
		}
	}
	if mine != lrank {
		return fmt.Errorf("Nodes %v puts %d lower ranks on this rank's node, OMPI_COMM_WORLD_LOCAL_RANK=%d", nodes, mine, lrank)
	}
	if bench > 0 {
		return runBench(c, bench, initTime)
	}
	sizes := []int{0, 1, 64, 1000, 4096, 65536, 100 << 10}
	for i, n := range sizes {
		// Ranks give different sizes, so a mix-up cannot go unseen.
		all, err := c.Allgather(blob(rank, i, n+rank))
		if err != nil {
			return fmt.Errorf("Allgather %d: %w", i, err)
		}
		if len(all) != size {
			return fmt.Errorf("Allgather %d: %d blobs for %d ranks", i, len(all), size)
		}
		for r, b := range all {
			if !bytes.Equal(b, blob(r, i, n+r)) {
				return fmt.Errorf("Allgather %d: rank %d's blob of %d bytes is wrong (%d bytes)", i, r, n+r, len(b))
			}
		}
	}
	// The KVS over Allgather: keys put by every rank, read after a fence.
	if err := c.Put("card-"+strconv.Itoa(rank), "addr"+strconv.Itoa(rank*rank)); err != nil {
		return err
	}
	if err := c.Fence(); err != nil {
		return err
	}
	for r := range size {
		v, err := c.Get("card-" + strconv.Itoa(r))
		if err != nil {
			return err
		}
		if v != "addr"+strconv.Itoa(r*r) {
			return fmt.Errorf("Get(card-%d) = %q", r, v)
		}
	}
	t := c.Traffic()
	fmt.Printf("rank %d of %d (%s): nodes %v, %d Allgathers OK; traffic %v; %d local gets\n",
		rank, size, c.Name(), nodes, len(sizes)+1, t, c.LocalGets())
	return c.Finalize()
}

func runBench(c *pmix.Client, n int, initTime time.Duration) error {
	card := blob(c.Rank(), 0, 64)
	if _, err := c.Allgather(card); err != nil { // warm-up
		return err
	}
	before, localBefore := c.Traffic(), c.LocalGets()
	start := time.Now()
	for range n {
		if _, err := c.Allgather(card); err != nil {
			return err
		}
	}
	mean := time.Since(start) / time.Duration(n)
	after := c.Traffic()
	if c.Rank() == 0 {
		fmt.Printf("np=%d: Init %v; Allgather of 64 B: %v mean over %d; per Allgather: %d puts, %d fences, %d server gets, %d local gets, %d bytes\n",
			c.Size(), initTime.Round(time.Microsecond), mean.Round(time.Microsecond), n,
			(after.Puts-before.Puts)/n, (after.Fences-before.Fences)/n, (after.Gets-before.Gets)/n,
			(c.LocalGets()-localBefore)/n, (after.Bytes-before.Bytes)/n)
	}
	return c.Finalize()
}
