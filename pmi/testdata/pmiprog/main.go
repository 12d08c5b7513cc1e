// Command pmiprog is the rank program of the pmi tests, under any PMI
// launcher (hydra, Slurm; PMI-1 or PMI-2): it puts a key, fences, reads
// every rank's key back, runs an Allgather, and prints PASS with the
// launcher's name. With PMIPROG_ABORT=<rank>, that rank aborts the job
// with exit code 5 instead.
package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/gocoll/gocoll/pmi"
)

func main() {
	c, ok, err := pmi.FromEnv()
	if err != nil {
		fail("FromEnv: %v", err)
	}
	if !ok {
		fmt.Println("SINGLETON")
		return
	}
	r, n := c.Rank(), c.Size()
	if os.Getenv("PMIPROG_ABORT") == fmt.Sprint(r) {
		check(c.Abort(5, "pmiprog was asked to abort"))
		select {} // the launcher kills this process
	}
	long := strings.Repeat("x", 900)
	check(c.Put(fmt.Sprintf("k-%d", r), fmt.Sprintf("v-%d", r)))
	check(c.Put(fmt.Sprintf("long-%d", r), fmt.Sprintf("%d%s", r, long)))
	check(c.Fence())
	for p := range n {
		v, err := c.Get(fmt.Sprintf("k-%d", p))
		check(err)
		if v != fmt.Sprintf("v-%d", p) {
			fail("rank %d: key of rank %d is %q", r, p, v)
		}
		v, err = c.Get(fmt.Sprintf("long-%d", p))
		check(err)
		if v != fmt.Sprintf("%d%s", p, long) {
			fail("rank %d: long key of rank %d has %d bytes", r, p, len(v))
		}
	}
	if _, err := c.Get("missing"); err == nil {
		fail("rank %d: a missing key was found", r)
	}
	maxValue := c.(interface{ MaxValueLen() int }).MaxValueLen()
	if err := c.Put("toolong", strings.Repeat("y", maxValue+1)); err == nil {
		fail("rank %d: a value over vallen_max was accepted", r)
	}
	// A second round. Under PMI-1 a key put again replaces its value;
	// PMI-2 servers keep the first (hydra's proxy caches what it got), so
	// there the round uses new keys, as KVSAllgather does.
	key := "k-"
	if _, pmi1 := c.(*pmi.Client); !pmi1 {
		key = "k2-"
	}
	check(c.Fence())
	check(c.Put(fmt.Sprintf("%s%d", key, r), fmt.Sprintf("w-%d", r)))
	check(c.Fence())
	v, err := c.Get(fmt.Sprintf("%s%d", key, (r+1)%n))
	check(err)
	if v != fmt.Sprintf("w-%d", (r+1)%n) {
		fail("rank %d: second round read %q", r, v)
	}
	// Allgather: a blob of 3000+r bytes, over several values, per rank.
	blob := func(p int) []byte {
		b := make([]byte, 3000+p)
		for i := range b {
			b[i] = byte(p*7 + i)
		}
		return b
	}
	all, err := c.Allgather(blob(r))
	check(err)
	if len(all) != n {
		fail("rank %d: Allgather returned %d blobs for %d ranks", r, len(all), n)
	}
	for p := range n {
		if string(all[p]) != string(blob(p)) {
			fail("rank %d: Allgather's blob of rank %d is wrong (%d bytes)", r, p, len(all[p]))
		}
	}
	traffic := c.Traffic()
	check(c.Finalize())
	fmt.Printf("PASS rank %d of %d via %s: %v\n", r, n, c.Name(), traffic)
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
