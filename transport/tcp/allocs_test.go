package tcp

import (
	"fmt"
	"io"
	"testing"

	"github.com/gocoll/gocoll/transport"
)

// Steady state allocates nothing (doc.go): once two ranks have exchanged
// messages of a size, exchanging them again allocates nothing, small and
// large (more than one read or writev). testing.AllocsPerRun counts the
// whole process: both endpoints, their readers and writers.
func TestSteadyStateExchangeAllocatesNothing(t *testing.T) {
	for _, size := range []int{64, 8 << 20} {
		t.Run(fmt.Sprintf("%dB", size), func(t *testing.T) {
			eps := newJob(t, 2, loopback(io.Discard))
			ops0 := []transport.Op{{Peer: 1, Tag: callTag(1, 0), Buf: pattern(size, 1)}, {Peer: 1, Tag: callTag(1, 1), Buf: make([]byte, size), Recv: true}}
			ops1 := []transport.Op{{Peer: 0, Tag: callTag(1, 1), Buf: pattern(size, 2)}, {Peer: 0, Tag: callTag(1, 0), Buf: make([]byte, size), Recv: true}}
			start, done := make(chan struct{}), make(chan error)
			go func() {
				for range start {
					eps[1].Start(ops1)
					done <- eps[1].Wait(ops1)
				}
			}()
			defer close(start)
			step := func() error {
				start <- struct{}{}
				eps[0].Start(ops0)
				err := eps[0].Wait(ops0)
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
