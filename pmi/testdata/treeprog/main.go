// Command treeprog is the rank program of the tree tests and of the
// start-up measurements, under any PMI launcher (hydra, Slurm; PMI-1 or
// PMI-2). It runs -calls Allgathers of blobs of -bytes bytes (plus the
// rank) and checks every byte, by one of three ways:
//
//	-mode tree  bootstrap.Tree over the client, at any size
//	-mode hook  the client's Allgather after UseTree (the tree from
//	            treeMinRanks ranks on, where the server has no bulk get)
//	-mode kvs   the client's Allgather as it is (bootstrap.KVSAllgather)
//
// Every rank prints "PASS rank R of N via NAME: first=T1 later=T2 traffic
// (...)": T1 is the first call's time (the tree's set-up included), T2
// the mean of the others', the traffic that of the Allgathers alone.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/gocoll/gocoll/bootstrap"
	"github.com/gocoll/gocoll/pmi"
)

func main() {
	mode := flag.String("mode", "tree", "tree, hook or kvs")
	calls := flag.Int("calls", 3, "Allgathers to run")
	size := flag.Int("bytes", 115, "blob size (plus the rank)")
	timeout := flag.Duration("timeout", 20*time.Second, "the tree's timeout")
	flag.Parse()
	c, ok, err := pmi.FromEnv()
	if err != nil {
		fail("FromEnv: %v", err)
	}
	if !ok {
		fail("no PMI launcher")
	}
	r, n := c.Rank(), c.Size()
	opts := bootstrap.TreeOptions{Addr: "127.0.0.1", Timeout: *timeout}
	allgather := c.Allgather
	switch *mode {
	case "tree":
		t := bootstrap.NewTree(c, opts)
		defer t.Close()
		allgather = t.Allgather
	case "hook":
		c.(bootstrap.TreeUser).UseTree(opts)
	case "kvs":
	default:
		fail("-mode %s: want tree, hook or kvs", *mode)
	}
	blob := func(call, p int) []byte {
		return bytes.Repeat([]byte{byte(call*13 + p)}, *size+p)
	}
	check(c.Fence()) // so that the first call's time is its own
	before := c.Traffic()
	var first, later time.Duration
	for call := range *calls {
		began := time.Now()
		all, err := allgather(blob(call, r))
		took := time.Since(began)
		if err != nil {
			fail("rank %d: Allgather %d: %v", r, call, err)
		}
		if call == 0 {
			first = took
		} else {
			later += took
		}
		if len(all) != n {
			fail("rank %d: Allgather %d returned %d blobs for %d ranks", r, call, len(all), n)
		}
		for p := range n {
			if !bytes.Equal(all[p], blob(call, p)) {
				fail("rank %d: Allgather %d: rank %d's blob is wrong (%d bytes)", r, call, p, len(all[p]))
			}
		}
	}
	after := c.Traffic()
	if *calls > 1 {
		later /= time.Duration(*calls - 1)
	}
	if t, ok := c.(bootstrap.TreeUser); ok {
		check(t.EndTree())
	}
	check(c.Finalize())
	fmt.Printf("PASS rank %d of %d via %s: first=%dus later=%dus traffic (%d puts, %d fences, %d gets)\n",
		r, n, c.Name(), first.Microseconds(), later.Microseconds(),
		after.Puts-before.Puts, after.Fences-before.Fences, after.Gets-before.Gets)
}

func check(err error) {
	if err != nil {
		fail("%v", err)
	}
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "FAIL "+format+"\n", args...)
	os.Exit(1)
}
