//go:build linux

package intranode

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/gocoll/gocoll/intranode/intranodetest"
	"github.com/gocoll/gocoll/ops"
	"github.com/gocoll/gocoll/transport"
)

// attach returns the groups of p goroutine ranks on one segment.
func attach(t *testing.T, p int, o Options) []*Group {
	t.Helper()
	x := intranodetest.NewExchange(p)
	gs := make([]*Group, p)
	errs := make([]error, p)
	var wg sync.WaitGroup
	for r := range p {
		wg.Add(1)
		go func() {
			defer wg.Done()
			gs[r], errs[r] = Attach(x.Rank(r), r, p, o)
		}()
	}
	wg.Wait()
	for _, g := range gs {
		if g != nil {
			t.Cleanup(func() { g.Close() })
		}
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return gs
}

// stepCall is one collective of TestProgressNeverWaits: start begins it
// on rank r's group with fresh buffers and returns the call and where its
// result lands.
type stepCall struct {
	name  string
	start func(g *Group) (*Call, []byte)
}

// doubles is rank r's input for call k: n doubles with fractions, so
// that another association of the sum would give other bits.
func doubles(r, k, n int) []byte {
	b := make([]byte, 8*n)
	for i := range n {
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(float64(r*1000+i+k)/7+1e-3*float64(i%13)))
	}
	return b
}

// stepCalls are the calls every rank makes, in order, with a slot of
// agSlot bytes: one step and many chunks, in place and not, irregular
// and empty blocks, a non-commutative op, and allgathers both through
// the slots and (from agCMAMin bytes a block, where CMA is on) by CMA.
func stepCalls(p int) []stepCall {
	sum, _ := ops.ReductionOf(ops.Sum, ops.Double)
	aff := ops.UserReduction(affine, 8)
	var calls []stepCall
	for _, n := range []int{0, 1, 32, 33, 1003} {
		for _, red := range []struct {
			name string
			r    ops.Reduction
		}{{"sum", sum}, {"affine", aff}} {
			k := len(calls)
			calls = append(calls, stepCall{fmt.Sprintf("allreduce %s n=%d", red.name, n), func(g *Group) (*Call, []byte) {
				out := make([]byte, 8*n)
				return g.StartAllreduce(doubles(g.Rank(), k, n), out, red.r), out
			}})
		}
		k := len(calls)
		calls = append(calls, stepCall{fmt.Sprintf("allreduce in place n=%d", n), func(g *Group) (*Call, []byte) {
			buf := doubles(g.Rank(), k, n)
			return g.StartAllreduce(buf, buf, sum), buf
		}})
	}
	for _, shape := range []func(q int) int{
		func(q int) int { return 0 },
		func(q int) int { return (q*5 + 1) % 4 },
		func(q int) int { return 40*q + 3 },
	} {
		counts := make([]int, p)
		total := 0
		for q := range counts {
			counts[q] = shape(q)
			total += counts[q]
		}
		k := len(calls)
		calls = append(calls, stepCall{fmt.Sprintf("reduce_scatter %v", counts), func(g *Group) (*Call, []byte) {
			out := make([]byte, 8*counts[g.Rank()])
			return g.StartReduceScatter(doubles(g.Rank(), k, total), out, counts, sum), out
		}}, stepCall{fmt.Sprintf("reduce_scatter in place %v", counts), func(g *Group) (*Call, []byte) {
			buf := doubles(g.Rank(), k, total)
			return g.StartReduceScatter(buf, buf, counts, aff), buf
		}})
	}
	for _, size := range agSizes {
		counts := make([]int, p)
		for q := range counts {
			counts[q] = size + q%2 // uneven blocks
		}
		k := len(calls)
		calls = append(calls, stepCall{fmt.Sprintf("allgather %v", counts), func(g *Group) (*Call, []byte) {
			out := make([]byte, p*(size+1))
			return g.StartAllgather(block(g.Rank(), k, counts[g.Rank()]), out, counts, 1), out
		}})
	}
	return calls
}

// Progress never waits for a peer: one goroutine steps the calls of all
// p ranks by Progress alone, each rank going on to its next call as soon
// as one is done, so a Progress that waited would hang the test; the
// results have the bits of the blocking calls, made on the same groups.
func TestProgressNeverWaits(t *testing.T) {
	for p := 1; p <= 8; p++ {
		for _, cma := range []bool{true, false} {
			t.Run(fmt.Sprintf("p=%d/cma=%v", p, cma), func(t *testing.T) {
				gs := attach(t, p, Options{JobID: "test", Slot: agSlot, CMAMin: agCMAMin, NoCMA: !cma, Timeout: 10 * time.Second})
				if ok, why := gs[0].CMA(); p > 1 && ok != cma {
					t.Skipf("CMA is %v here (%v)", ok, why)
				}
				calls := stepCalls(p)
				want := make([][][]byte, p) // want[r][k]: rank r's result of call k, blocking
				var wg sync.WaitGroup
				errs := make([]error, p)
				for r, g := range gs {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for _, sc := range calls {
							c, out := sc.start(g)
							if errs[r] = c.Finish(); errs[r] != nil {
								return
							}
							want[r] = append(want[r], out)
						}
					}()
				}
				wg.Wait()
				if err := errors.Join(errs...); err != nil {
					t.Fatal(err)
				}
				got := make([][][]byte, p)
				stepped := make(chan error, 1)
				go func() { stepped <- stepAll(gs, calls, got) }()
				select {
				case err := <-stepped:
					if err != nil {
						t.Fatal(err)
					}
				case <-time.After(40 * time.Second):
					t.Fatal("a Progress never returned (it waits for a peer that only this goroutine moves)")
				}
				for r := range p {
					for k, sc := range calls {
						if !bytes.Equal(got[r][k], want[r][k]) {
							t.Fatalf("rank %d, %s: stepped result differs from the blocking call's", r, sc.name)
						}
					}
				}
			})
		}
	}
}

// stepAll moves every rank through calls by Progress alone, from this
// goroutine, and puts rank r's result of call k in got[r][k].
func stepAll(gs []*Group, calls []stepCall, got [][][]byte) error {
	p := len(gs)
	next := make([]int, p)
	cur := make([]*Call, p)
	outs := make([][]byte, p)
	deadline := time.Now().Add(30 * time.Second)
	for left := p * len(calls); left > 0; {
		for r, g := range gs {
			if cur[r] == nil {
				if next[r] == len(calls) {
					continue
				}
				cur[r], outs[r] = calls[next[r]].start(g)
			}
			t0 := time.Now()
			done, _, err := cur[r].Progress()
			if d := time.Since(t0); d > time.Second {
				return fmt.Errorf("rank %d, %s: a Progress took %v", r, calls[next[r]].name, d)
			}
			if err != nil {
				return fmt.Errorf("rank %d, %s: %w", r, calls[next[r]].name, err)
			}
			if done {
				got[r] = append(got[r], outs[r])
				cur[r] = nil
				next[r]++
				left--
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d calls never finished (next calls %v)", left, next)
		}
	}
	return nil
}

// A call moved only by Progress still gives up on a peer that never
// comes, after the timeout, naming it; Progress returns meanwhile.
func TestProgressTimesOut(t *testing.T) {
	gs := attach(t, 2, Options{JobID: "test", Timeout: 300 * time.Millisecond})
	c := gs[0].StartAllreduce(make([]byte, 8), make([]byte, 8), ops.UserReduction(sum64, 8)) // rank 1 never comes
	start := time.Now()
	var err error
	for done := false; !done; {
		done, _, err = c.Progress()
		if time.Since(start) > 5*time.Second {
			t.Fatal("still waiting after 5 s")
		}
	}
	var pe *transport.Error
	if !errors.As(err, &pe) || pe.Peer != 1 || !errors.Is(err, ErrTimeout) {
		t.Fatalf("got %v, want a timeout naming rank 1", err)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Fatalf("gave up after %v, before the timeout", d)
	}
	if done, _, again := c.Progress(); !done || again != err {
		t.Fatalf("after the failure Progress says %v, %v", done, again)
	}
}

// Finish after Progress keeps counting the timeout from when Progress
// first found the peer missing.
func TestFinishAfterProgressTimesOut(t *testing.T) {
	gs := attach(t, 2, Options{JobID: "test", Timeout: 800 * time.Millisecond})
	c := gs[0].StartAllgather(make([]byte, 8), make([]byte, 16), []int{8, 8}, 1)
	start := time.Now()
	for time.Since(start) < 500*time.Millisecond {
		if done, _, err := c.Progress(); done {
			t.Fatalf("done without the peer: %v", err)
		}
	}
	err := c.Finish()
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("got %v, want a timeout", err)
	}
	if d := time.Since(start); d > 800*time.Millisecond+350*time.Millisecond {
		t.Fatalf("gave up after %v: Finish restarted the timeout", d)
	}
}
