//go:build linux

package intranode

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gocoll/gocoll/intranode/intranodetest"
	"github.com/gocoll/gocoll/ops"
	"github.com/gocoll/gocoll/transport"
)

// run attaches p goroutine ranks and runs f on each.
func run(t *testing.T, p, slot int, f func(g *Group) error) {
	t.Helper()
	runOpts(t, p, func(int) Options { return Options{JobID: "test", Slot: slot, Timeout: 10 * time.Second} }, f)
}

func sum64(dst, a, b []byte) {
	for i := 0; i+8 <= len(dst); i += 8 {
		binary.LittleEndian.PutUint64(dst[i:], binary.LittleEndian.Uint64(a[i:])+binary.LittleEndian.Uint64(b[i:]))
	}
}

// affine is a non-commutative op on (m, c) pairs of uint32: a then b.
func affine(dst, a, b []byte) {
	for i := 0; i+8 <= len(dst); i += 8 {
		am, ac := binary.LittleEndian.Uint32(a[i:]), binary.LittleEndian.Uint32(a[i+4:])
		bm, bc := binary.LittleEndian.Uint32(b[i:]), binary.LittleEndian.Uint32(b[i+4:])
		binary.LittleEndian.PutUint32(dst[i:], am*bm)
		binary.LittleEndian.PutUint32(dst[i+4:], ac*bm+bc)
	}
}

func input(r, n int) []byte {
	b := make([]byte, 8*n)
	for i := range n {
		binary.LittleEndian.PutUint32(b[8*i:], uint32(r*7+i+1))
		binary.LittleEndian.PutUint32(b[8*i+4:], uint32(r*3+i))
	}
	return b
}

// reference folds the inputs of all ranks in rank order.
func reference(p, n int, k ops.Kernel) []byte {
	acc := input(0, n)
	for q := 1; q < p; q++ {
		k(acc, acc, input(q, n))
	}
	return acc
}

// Every collective against a naive reference, in small and chunked
// steps (a tiny slot forces many chunks), in place and not, for a
// commutative and a non-commutative op.
func TestCollectives(t *testing.T) {
	for _, p := range []int{1, 2, 3, 5} {
		for _, slot := range []int{64, 4096} {
			for _, n := range []int{0, 1, 7, 100, 1003} {
				t.Run(fmt.Sprintf("p=%d/slot=%d/n=%d", p, slot, n), func(t *testing.T) {
					run(t, p, slot, func(g *Group) error {
						r := g.Rank()
						for _, k := range []ops.Kernel{sum64, affine} {
							red := ops.UserReduction(k, 8)
							want := reference(p, n, k)
							out := make([]byte, 8*n)
							if err := g.Allreduce(input(r, n), out, red); err != nil {
								return err
							}
							if !bytes.Equal(out, want) {
								return errors.New("allreduce differs from the reference")
							}
							buf := input(r, n)
							if err := g.Allreduce(buf, buf, red); err != nil {
								return err
							}
							if !bytes.Equal(buf, want) {
								return errors.New("in-place allreduce differs")
							}
							// Reduce-scatter with irregular counts summing to n.
							counts := make([]int, p)
							left := n
							for q := range p {
								counts[q] = min(left, (q*5+n)%7)
								left -= counts[q]
							}
							counts[p-1] += left
							lo := 0
							for _, c := range counts[:r] {
								lo += c
							}
							mine := make([]byte, 8*counts[r])
							if err := g.ReduceScatter(input(r, n), mine, counts, red); err != nil {
								return err
							}
							if !bytes.Equal(mine, want[8*lo:8*(lo+counts[r])]) {
								return errors.New("reduce-scatter differs")
							}
							ip := input(r, n)
							if err := g.ReduceScatter(ip, ip, counts, red); err != nil {
								return err
							}
							if !bytes.Equal(ip[:8*counts[r]], want[8*lo:8*(lo+counts[r])]) {
								return errors.New("in-place reduce-scatter differs")
							}
							// Allgather of the shards gives the result back.
							full := make([]byte, 8*n)
							if err := g.Allgather(mine, full, counts, 8); err != nil {
								return err
							}
							if !bytes.Equal(full, want) {
								return errors.New("allgather of the shards differs")
							}
							// In place: each rank's shard already in its block.
							clear(full)
							copy(full[8*lo:], mine)
							if err := g.Allgather(full[8*lo:8*(lo+counts[r])], full, counts, 8); err != nil {
								return err
							}
							if !bytes.Equal(full, want) {
								return errors.New("in-place allgather differs")
							}
						}
						b := input(0, n)
						if r != 0 {
							b = make([]byte, 8*n)
						}
						if err := g.Bcast(b, 0); err != nil {
							return err
						}
						if !bytes.Equal(b, input(0, n)) {
							return errors.New("bcast differs")
						}
						return g.Barrier()
					})
				})
			}
		}
	}
}

// The segment file is gone once the group is attached.
func TestNothingLeftBehind(t *testing.T) {
	before, _ := filepath.Glob("/dev/shm/gocoll-test-*")
	run(t, 3, 0, func(g *Group) error { return g.Barrier() })
	after, _ := filepath.Glob("/dev/shm/gocoll-test-*")
	if len(after) > len(before) {
		t.Fatalf("segments left in /dev/shm: %v", after)
	}
}

// A rank that never arrives makes the others fail after the timeout,
// naming it, instead of waiting forever.
func TestStalledPeerTimesOut(t *testing.T) {
	x := intranodetest.NewExchange(2)
	var g [2]*Group
	var wg sync.WaitGroup
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			g[r], err = Attach(x.Rank(r), r, 2, Options{JobID: "test", Timeout: 300 * time.Millisecond})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	defer g[0].Close()
	defer g[1].Close()
	start := time.Now()
	err := g[0].Barrier() // rank 1 never comes
	var pe *transport.Error
	if !errors.As(err, &pe) || pe.Peer != 1 || !errors.Is(err, ErrTimeout) {
		t.Fatalf("got %v, want a timeout naming rank 1", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("took %v", d)
	}
	_ = os.Getpid
}

// Without a slot set, the steps go by size class (Steps): allreduce in
// one step up to DefaultSlot, then a step per LargeChunk and one more;
// reduce-scatter a step per LargeChunk of the longest block (at most a
// slot's share); the results are the reference's at sizes around every
// boundary, for a commutative and a non-commutative op. With the slot
// set, every step is the slot.
func TestSizeClasses(t *testing.T) {
	if g := stepsFor(2, 1<<20, false); g != (Steps{OneStep: DefaultSlot, Chunk: LargeChunk, Piece: LargeChunk, Gather: LargeChunk}) {
		t.Errorf("steps of 2 ranks by size class: %+v", g)
	}
	if g := stepsFor(4, 1<<20, false); g.Piece != 256<<10 {
		t.Errorf("steps of 4 ranks by size class: %+v, want a piece of a slot's share", g)
	}
	if g := stepsFor(4, 64<<10, true); g != (Steps{OneStep: 64 << 10, Chunk: 64 << 10, Piece: 16 << 10, Gather: 64 << 10}) {
		t.Errorf("steps of a set slot: %+v", g)
	}
	const elem = 8
	sizes := []int{DefaultSlot/elem - 1, DefaultSlot / elem, DefaultSlot/elem + 1, LargeChunk / elem,
		LargeChunk/elem + 3, 2*LargeChunk/elem + 5}
	for _, p := range []int{1, 2, 3} {
		runOpts(t, p, func(int) Options { return Options{JobID: "test", Timeout: 10 * time.Second} }, func(g *Group) error {
			if g.Slot() != DefaultCapacity {
				return fmt.Errorf("slot %d, want DefaultCapacity", g.Slot())
			}
			r := g.Rank()
			for _, n := range sizes {
				for _, k := range []ops.Kernel{sum64, affine} {
					red := ops.UserReduction(k, 8)
					want := reference(p, n, k)
					out := make([]byte, elem*n)
					before := g.ctl[r].step.Load()
					if err := g.Allreduce(input(r, n), out, red); err != nil {
						return err
					}
					steps := 1
					if n*elem > DefaultSlot {
						steps = (n*elem+LargeChunk-1)/LargeChunk + 1
					}
					if took := g.ctl[r].step.Load() - before; took != uint64(steps) {
						return fmt.Errorf("allreduce of %d bytes: %d steps, want %d", n*elem, took, steps)
					}
					if !bytes.Equal(out, want) {
						return fmt.Errorf("allreduce of %d bytes differs from the reference", n*elem)
					}
					counts := make([]int, p)
					for q := range counts {
						counts[q] = n / p
					}
					counts[0] += n % p
					mine := make([]byte, elem*counts[r])
					before = g.ctl[r].step.Load()
					if err := g.ReduceScatter(input(r, n), mine, counts, red); err != nil {
						return err
					}
					piece := min(LargeChunk, g.Slot()/p)
					if took, want := g.ctl[r].step.Load()-before, (counts[0]*elem+piece-1)/piece; took != uint64(max(want, 1)) {
						return fmt.Errorf("reduce_scatter of %d bytes: %d steps, want %d", n*elem, took, want)
					}
					lo := 0
					for _, c := range counts[:r] {
						lo += c
					}
					if !bytes.Equal(mine, want[elem*lo:elem*(lo+counts[r])]) {
						return fmt.Errorf("reduce_scatter of %d bytes differs from the reference", n*elem)
					}
				}
			}
			return nil
		})
	}
}

// A rank that reads nothing in a step (a reduce-scatter block of zero
// elements, a bcast's root) leaves it without waiting for the others,
// and waits for them before it writes its slot again: here rank 0,
// whose blocks are empty, runs ahead through many reduce-scatters and
// bcasts while rank 1 reduces slowly (a user op that sleeps), and every
// result is still the reference's. Without the wait, rank 0 would
// rewrite the slot rank 1 reads.
func TestQuietStepsRunAhead(t *testing.T) {
	slow := func(dst, a, b []byte) {
		time.Sleep(200 * time.Microsecond)
		sum64(dst, a, b)
	}
	for _, slot := range []int{0, 4096} {
		run(t, 2, slot, func(g *Group) error {
			r := g.Rank()
			k := ops.Kernel(sum64)
			if r == 1 {
				k = slow
			}
			red := ops.UserReduction(k, 8)
			for call := range 20 {
				n := 40 + call // every element in rank 1's block
				counts := []int{0, n}
				want := reference(2, n, sum64)
				in := input(r, n)
				for i := range in {
					in[i] += byte(call)
				}
				for q := range 2 {
					w := input(q, n)
					for i := range w {
						w[i] += byte(call)
					}
					if q == 0 {
						copy(want, w)
					} else {
						sum64(want, want, w)
					}
				}
				out := make([]byte, 8*counts[r])
				if err := g.ReduceScatter(in, out, counts, red); err != nil {
					return err
				}
				if r == 1 && !bytes.Equal(out, want) {
					return fmt.Errorf("call %d: reduce_scatter differs from the reference", call)
				}
				b := make([]byte, 8*n)
				if r == 0 {
					copy(b, in)
				}
				if err := g.Bcast(b, 0); err != nil {
					return err
				}
				if w := input(0, n); r == 1 {
					for i := range w {
						w[i] += byte(call)
					}
					if !bytes.Equal(b, w) {
						return fmt.Errorf("call %d: bcast differs", call)
					}
				}
			}
			return g.Barrier()
		})
	}
}
