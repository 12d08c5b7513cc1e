// Command pmiprog is the rank program of the pmi tests: it puts a key,
// fences, reads every rank's key back, and prints PASS. With
// PMIPROG_ABORT=<rank>, that rank aborts the job with exit code 5 instead.
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
	if err := c.Put("toolong", strings.Repeat("y", c.MaxValueLen()+1)); err == nil {
		fail("rank %d: a value over vallen_max was accepted", r)
	}
	// A second round on the same keys: values replace the first ones.
	check(c.Fence())
	check(c.Put(fmt.Sprintf("k-%d", r), fmt.Sprintf("w-%d", r)))
	check(c.Fence())
	v, err := c.Get(fmt.Sprintf("k-%d", (r+1)%n))
	check(err)
	if v != fmt.Sprintf("w-%d", (r+1)%n) {
		fail("rank %d: second round read %q", r, v)
	}
	check(c.Finalize())
	fmt.Printf("PASS rank %d of %d kvs %s\n", r, n, c.KVSName())
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
