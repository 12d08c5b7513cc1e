package coll_test

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gocoll/gocoll/coll"
	"github.com/gocoll/gocoll/ops"
)

func int64s(v []int64) []byte {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(x))
	}
	return b
}

func int64At(b []byte, i int) int64 { return int64(binary.LittleEndian.Uint64(b[8*i:])) }

// rankVector is rank r's input: r*1000 + i + k.
func rankVector(r, n, k int) []byte {
	v := make([]int64, n)
	for i := range v {
		v[i] = int64(r*1000 + i + k)
	}
	return int64s(v)
}

// sumOf checks that out holds the sum over p ranks of rankVector(r, n, k).
func sumOf(p, n, k int, out []byte) error {
	for i := range n {
		want := int64(0)
		for r := range p {
			want += int64(r*1000 + i + k)
		}
		if got := int64At(out, i); got != want {
			return fmt.Errorf("element %d is %d, want %d", i, got, want)
		}
	}
	return nil
}

var opSum = coll.Op{Builtin: ops.Sum}

// Several nonblocking calls in flight on one communicator and on a
// duplicate, a blocking call between them, completed in another order:
// every route (the shm engine's calls and the host executor's schedules,
// both stepped) with and without the progress goroutine.
func TestNonblockingInFlight(t *testing.T) {
	for _, thread := range []bool{false, true} {
		for _, alg := range []string{"auto", "shm", "ring", "recursive_doubling", "rabenseifner"} {
			for _, p := range []int{1, 2, 3, 5} {
				const n = 1003
				jobWith(t, p, func(cfg *coll.Config) { cfg.ProgressThread = thread }, func(c *coll.Comm) error {
					d, err := c.Dup("dup")
					if err != nil {
						return err
					}
					defer d.Free()
					var reqs []*coll.Request
					outs := make([][]byte, 3)
					for k := range 2 {
						outs[k] = make([]byte, 8*n)
						r, err := c.Iallreduce(coll.Args{Send: rankVector(c.Rank(), n, k), Recv: outs[k], Count: n, Type: ops.Int64, Op: opSum, Algorithm: alg})
						if err != nil {
							return err
						}
						reqs = append(reqs, r)
					}
					gathered := make([]byte, 8*p)
					rg, err := d.Iallgather(coll.Args{Send: int64s([]int64{int64(c.Rank())}), Recv: gathered, Count: 1, Type: ops.Int64})
					if err != nil {
						return err
					}
					blocking := make([]byte, 8*n)
					if err := c.Allreduce(coll.Args{Send: rankVector(c.Rank(), n, 7), Recv: blocking, Count: n, Type: ops.Int64, Op: opSum, Algorithm: alg}); err != nil {
						return err
					}
					if err := sumOf(p, n, 7, blocking); err != nil {
						return fmt.Errorf("the blocking call: %w", err)
					}
					for !func() bool { done, _ := rg.Test(); return done }() {
					}
					for k := 1; k >= 0; k-- {
						if err := reqs[k].Wait(); err != nil {
							return err
						}
						if err := sumOf(p, n, k, outs[k]); err != nil {
							return fmt.Errorf("request %d: %w", k, err)
						}
					}
					for r := range p {
						if int64At(gathered, r) != int64(r) {
							return fmt.Errorf("iallgather: block %d is %d", r, int64At(gathered, r))
						}
					}
					return nil
				})
			}
		}
	}
}

// A persistent allreduce runs three times with new data each time; a
// start of an active request is refused; Wait and Test on an inactive
// one return at once.
func TestPersistent(t *testing.T) {
	for _, alg := range []string{"auto", "shm", "ring"} {
		for _, p := range []int{1, 2, 4} {
			const n = 300
			job(t, p, func(c *coll.Comm) error {
				send := make([]byte, 8*n)
				out := make([]byte, 8*n)
				r, err := c.AllreduceInit(coll.Args{Send: send, Recv: out, Count: n, Type: ops.Int64, Op: opSum, Algorithm: alg})
				if err != nil {
					return err
				}
				if err := r.Wait(); err != nil {
					return fmt.Errorf("wait on an inactive request: %v", err)
				}
				for k := range 3 {
					copy(send, rankVector(c.Rank(), n, k))
					if err := r.Start(); err != nil {
						return err
					}
					if k == 1 {
						if err := r.Start(); err == nil || !strings.Contains(err.Error(), "already active") {
							return fmt.Errorf("a second start: %v", err)
						}
					}
					if err := r.Wait(); err != nil {
						return err
					}
					if err := sumOf(p, n, k, out); err != nil {
						return fmt.Errorf("start %d: %w", k, err)
					}
				}
				if done, err := r.Test(); !done || err != nil {
					return fmt.Errorf("test of an inactive request: %v %v", done, err)
				}
				return nil
			})
		}
	}
}

// Reduce-scatter requests of every shape (zero blocks, empty calls),
// completed by Test loops.
func TestIreduceScatterShapes(t *testing.T) {
	for _, p := range []int{2, 3} {
		job(t, p, func(c *coll.Comm) error {
			for shape := range 4 {
				for form := range 3 {
					counts := make([]int, p)
					total := 0
					for q := range counts {
						counts[q] = []int{(q*5 + 1) % 4, 1, 2*q + 3, 0}[shape]
						total += counts[q]
					}
					a := coll.Args{Send: rankVector(c.Rank(), total, 0), Recv: make([]byte, 8*counts[c.Rank()]), Counts: counts, Type: ops.Int64, Op: opSum}
					if form == 1 {
						a = coll.Args{InPlace: true, Recv: rankVector(c.Rank(), total, 0), Counts: counts, Type: ops.Int64, Op: opSum}
					}
					r, err := c.IreduceScatter(a)
					if err != nil {
						return err
					}
					if err := testUntilDone(r, 10*time.Second); err != nil {
						return fmt.Errorf("shape %d form %d: %w", shape, form, err)
					}
				}
			}
			return nil
		})
	}
}

// MPI's progress rule: a rank blocked in a collective on one communicator
// still moves its requests on another, which a peer may be waiting for
// before it reaches the blocking call. Rank 0 starts an allreduce on the
// duplicate, then blocks in an allreduce on the world; rank 1 waits for
// the duplicate's first. Each rank has its own progress engine, as
// processes do, so only rank 0's blocking call can move rank 0's request.
func TestBlockingCallMovesOtherRequests(t *testing.T) {
	for _, alg := range []string{"ring", "recursive_doubling"} {
		const n = 1003
		done := make(chan struct{})
		go func() {
			defer close(done)
			jobWith(t, 2, nil, func(c *coll.Comm) error {
				c.OwnProgress()
				d, err := c.Dup("dup")
				if err != nil {
					return err
				}
				defer d.Free()
				out := make([]byte, 8*n)
				r, err := d.Iallreduce(coll.Args{Send: rankVector(c.Rank(), n, 1), Recv: out, Count: n, Type: ops.Int64, Op: opSum, Algorithm: alg})
				if err != nil {
					return err
				}
				blocking := make([]byte, 8*n)
				world := func() error {
					return c.Allreduce(coll.Args{Send: rankVector(c.Rank(), n, 2), Recv: blocking, Count: n, Type: ops.Int64, Op: opSum, Algorithm: alg})
				}
				if c.Rank() == 0 {
					if err := world(); err != nil {
						return err
					}
					if err := r.Wait(); err != nil {
						return err
					}
				} else {
					if err := r.Wait(); err != nil {
						return err
					}
					if err := world(); err != nil {
						return err
					}
				}
				if err := sumOf(2, n, 1, out); err != nil {
					return fmt.Errorf("the duplicate's allreduce: %w", err)
				}
				return sumOf(2, n, 2, blocking)
			})
		}()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: rank 0's blocking allreduce did not move its request on the duplicate (hung)", alg)
		}
	}
}

// An error of a nonblocking or persistent call names the call the program
// made, not the blocking one it shares its checks with.
func TestRequestErrorsNameTheirCall(t *testing.T) {
	jobWith(t, 1, nil, func(c *coll.Comm) error {
		short := make([]byte, 4)
		a := coll.Args{Send: rankVector(0, 4, 0), Recv: short, Count: 4, Type: ops.Int64, Op: opSum}
		for _, tc := range []struct {
			want string
			call func() (*coll.Request, error)
		}{
			{"MPI_Iallreduce:", func() (*coll.Request, error) { return c.Iallreduce(a) }},
			{"MPI_Allreduce_init:", func() (*coll.Request, error) { return c.AllreduceInit(a) }},
			{"MPI_Ireduce_scatter_block:", func() (*coll.Request, error) { return c.IreduceScatterBlock(a) }},
			{"MPI_Allgather_init:", func() (*coll.Request, error) {
				return c.AllgatherInit(coll.Args{Send: rankVector(0, 4, 0), Recv: short, Count: 4, Type: ops.Int64})
			}},
		} {
			_, err := tc.call()
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				return fmt.Errorf("got %v, want an error starting %q", err, tc.want)
			}
		}
		return nil
	})
}

// testUntilDone calls r.Test until r completes, returning its error, or
// fails after limit.
func testUntilDone(r *coll.Request, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		done, err := r.Test()
		if done || err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("never done by Test in %v", limit)
		}
	}
}
