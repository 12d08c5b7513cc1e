//go:build linux

package shm

import (
	"fmt"
	"testing"

	"github.com/gocoll/gocoll/transport"
)

// Steady state allocates nothing (the schedules' promise holds only if
// the transport keeps it): once a pair of ranks has exchanged messages of
// a size, exchanging them again allocates nothing, eager and rendezvous,
// with CMA and without. testing.AllocsPerRun counts the whole process,
// so rank 1, in a goroutine of its own, counts too.
func TestSteadyStateExchangeAllocatesNothing(t *testing.T) {
	for _, cma := range []bool{true, false} {
		for _, size := range []int{64, 1 << 20} {
			t.Run(fmt.Sprintf("%s/%dB", cmaName(cma), size), func(t *testing.T) {
				restore := useCMA(cma)
				eps := localJob(t, 2, Options{})
				restore()
				send0 := []transport.Op{{Peer: 1, Tag: tag(1), Buf: pattern(size, 1)}, {Peer: 1, Tag: tag(2), Buf: make([]byte, size), Recv: true}}
				send1 := []transport.Op{{Peer: 0, Tag: tag(2), Buf: pattern(size, 2)}, {Peer: 0, Tag: tag(1), Buf: make([]byte, size), Recv: true}}
				start, done := make(chan struct{}), make(chan error)
				go func() {
					for range start {
						done <- exchange(eps[1], send1)
					}
				}()
				defer close(start)
				step := func() error {
					start <- struct{}{}
					err := exchange(eps[0], send0)
					if e := <-done; err == nil {
						err = e
					}
					return err
				}
				for range 3 {
					if err := step(); err != nil {
						t.Fatal(err)
					}
				}
				var err error
				allocs := testing.AllocsPerRun(50, func() {
					if e := step(); err == nil {
						err = e
					}
				})
				if err != nil {
					t.Fatal(err)
				}
				if allocs != 0 {
					t.Errorf("%v allocations per exchange (both ranks), want 0", allocs)
				}
			})
		}
	}
}
