//go:build linux

package intranode

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/gocoll/gocoll/intranode/intranodetest"
)

// runOpts is run with Options of the test's choosing per rank.
func runOpts(t *testing.T, p int, opts func(r int) Options, f func(g *Group) error) {
	t.Helper()
	x := intranodetest.NewExchange(p)
	errs := make([]error, p)
	var wg sync.WaitGroup
	for r := range p {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g, err := Attach(x.Rank(r), r, p, opts(r))
			if err == nil {
				err = f(g)
				g.Close()
			}
			errs[r] = err
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
}

// block is rank q's block of an allgather test: n bytes that name q,
// the call and the position.
func block(q, call, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(q*31 + call*7 + i*13 + i>>8)
	}
	return b
}

// The sizes of TestAllgatherEverySize, in bytes per block, with a slot of
// 256 bytes and CMA from 1000: around both thresholds.
var agSizes = []int{0, 1, 8, 255, 256, 257, 999, 1000, 1001, 3000}

const (
	agSlot   = 256
	agCMAMin = 1000
)

// allgatherAll runs Allgather (equal blocks of every size in agSizes,
// then uneven and zero blocks, each out of place and in place) on g and
// checks every result, and, through the steps each call took, which path
// ran it: CMA takes two steps, the slots one per slot of the longest
// block.
func allgatherAll(g *Group, elem int, cma bool) error {
	p, r := g.Size(), g.Rank()
	var shapes [][]int
	for _, n := range agSizes {
		counts := make([]int, p)
		for q := range counts {
			counts[q] = n / elem
		}
		shapes = append(shapes, counts)
	}
	for _, v := range [][]int{{0, 3000}, {3000, 0}, {1, 1200}, {0, 0}, {500, 1001}, {2000, 7, 0}} {
		counts := make([]int, p)
		for q := range counts {
			counts[q] = v[q%len(v)] / elem
		}
		shapes = append(shapes, counts)
	}
	for call, counts := range shapes {
		displ := make([]int, p+1)
		longest := 0
		for q, c := range counts {
			displ[q+1] = displ[q] + c
			longest = max(longest, c*elem)
		}
		want := make([]byte, 0, displ[p]*elem)
		for q, c := range counts {
			want = append(want, block(q, call, c*elem)...)
		}
		steps := 2
		if !cma || longest < agCMAMin {
			steps = (longest + agSlot - 1) / agSlot
		}
		for _, inPlace := range []bool{false, true} {
			out := bytes.Repeat([]byte{0xee}, len(want))
			in := block(r, call, counts[r]*elem)
			if inPlace {
				copy(out[displ[r]*elem:], in)
				in = out[displ[r]*elem : displ[r+1]*elem]
			}
			before := g.ctl[r].step.Load()
			if err := g.Allgather(in, out, counts, elem); err != nil {
				return err
			}
			if took := g.ctl[r].step.Load() - before; took != uint64(steps) {
				return fmt.Errorf("counts %v elem %d in place %v: %d steps, want %d (cma %v)", counts, elem, inPlace, took, steps, cma)
			}
			if !bytes.Equal(out, want) {
				for i := range out {
					if out[i] != want[i] {
						return fmt.Errorf("counts %v elem %d in place %v: byte %d is %#x, want %#x", counts, elem, inPlace, i, out[i], want[i])
					}
				}
			}
		}
	}
	return nil
}

// Allgather and Allgatherv at every size around the slot and the CMA
// threshold, equal, uneven and zero blocks, in place and not, on 2 to 8
// ranks: with CMA, with CMA turned off, and with CMA refused by one rank's
// kernel (every rank then copies through the slots, and says why).
func TestAllgatherEverySize(t *testing.T) {
	for _, mode := range []string{"cma", "off", "refused"} {
		for p := 2; p <= 8; p++ {
			t.Run(fmt.Sprintf("%s/p=%d", mode, p), func(t *testing.T) {
				opts := func(r int) Options {
					o := Options{JobID: "test", Slot: agSlot, CMAMin: agCMAMin, Timeout: 10 * time.Second}
					o.NoCMA = mode == "off"
					o.refuseCMA = mode == "refused" && r == p-1
					return o
				}
				runOpts(t, p, opts, func(g *Group) error {
					cma, why := g.CMA()
					if cma != (mode == "cma") {
						return fmt.Errorf("CMA() = %v (%v) in mode %s", cma, why, mode)
					}
					if !cma && why == nil {
						return errors.New("CMA is off and CMA() gives no reason")
					}
					for _, elem := range []int{1, 8} {
						if err := allgatherAll(g, elem, cma); err != nil {
							return err
						}
					}
					return nil
				})
			})
		}
	}
}

// A read that the kernel refuses in the middle of a CMA allgather (after
// Attach found CMA working) fails the call on that rank with the reason,
// instead of leaving its block of out as it was; the other ranks finish
// theirs, and nobody waits for ever.
func TestAllgatherCMAReadRefused(t *testing.T) {
	const p = 3
	n := 4 * agCMAMin
	runOpts(t, p, func(int) Options {
		return Options{JobID: "test", Slot: agSlot, CMAMin: agCMAMin, Timeout: 10 * time.Second}
	}, func(g *Group) error {
		r := g.Rank()
		counts := []int{n, n, n}
		out := make([]byte, p*n)
		if r == 1 {
			g.refuseCMA = true
		}
		err := g.Allgather(block(r, 0, n), out, counts, 1)
		if r == 1 {
			if err == nil {
				return errors.New("a refused read returned no error")
			}
			return nil
		}
		if err != nil {
			return err
		}
		for q := range p {
			if !bytes.Equal(out[q*n:(q+1)*n], block(q, 0, n)) {
				return fmt.Errorf("block %d differs", q)
			}
		}
		return nil
	})
}

// A CMA allgather allocates nothing in steady state: 2 ranks, 50 calls a
// window, passing when one of three windows is clean (a window can catch
// the runtime growing a cache once; a call that allocates does so in all).
func TestAllgatherCMAAllocs(t *testing.T) {
	const p, n, calls = 2, 64 << 10, 50
	x := intranodetest.NewExchange(p)
	var groups [p]*Group
	var wg sync.WaitGroup
	for r := range p {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			groups[r], err = Attach(x.Rank(r), r, p, Options{JobID: "test", CMAMin: 1, Timeout: 10 * time.Second})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	defer groups[0].Close()
	defer groups[1].Close()
	if ok, why := groups[0].CMA(); !ok {
		t.Fatalf("no CMA here: %v", why)
	}
	in := [p][]byte{block(0, 0, n), block(1, 0, n)}
	out := [p][]byte{make([]byte, p*n), make([]byte, p*n)}
	counts := []int{n, n}
	// Ranks run in goroutines of their own, started once: a window
	// allocates nothing but what the calls do.
	var start [p]chan struct{}
	done := make(chan error, p)
	for r := range p {
		start[r] = make(chan struct{})
		go func() {
			for range start[r] {
				var err error
				for range calls {
					if err = groups[r].Allgather(in[r], out[r], counts, 1); err != nil {
						break
					}
				}
				done <- err
			}
		}()
		defer close(start[r])
	}
	window := func() (uint64, error) {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for r := range p {
			start[r] <- struct{}{}
		}
		var err error
		for range p {
			if e := <-done; e != nil {
				err = e
			}
		}
		runtime.ReadMemStats(&after)
		return after.Mallocs - before.Mallocs, err
	}
	if _, err := window(); err != nil { // warm up
		t.Fatal(err)
	}
	var got uint64
	for range 3 {
		var err error
		if got, err = window(); err != nil {
			t.Fatal(err)
		}
		if got == 0 {
			return
		}
	}
	t.Fatalf("%d allocations in %d calls on %d ranks", got, calls, p)
}
