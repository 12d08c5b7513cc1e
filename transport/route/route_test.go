package route_test

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/gocoll/gocoll/bootstrap"
	"github.com/gocoll/gocoll/transport"
	"github.com/gocoll/gocoll/transport/inproc"
	"github.com/gocoll/gocoll/transport/route"
	"github.com/gocoll/gocoll/transport/tcp"
	"github.com/gocoll/gocoll/transport/transporttest"
)

// evenOdd sends even peers to the first transport, odd ones to the
// second. Both ends of a pair must pick the same transport, and peer
// parity alone is not symmetric (rank 0 sees peer 1 as odd, rank 1 sees
// peer 0 as even), so ranks use their own parity too: "even" is a peer
// whose parity is this rank's.
func evenOdd(rank int) func(peer int) int {
	return func(peer int) int { return (rank + peer) % 2 }
}

// lowerParity picks by the parity of the pair's lower rank: neighbours
// in a ring alternate between the transports.
func lowerParity(rank int) func(peer int) int {
	return func(peer int) int { return min(rank, peer) % 2 }
}

func routed(n int, a, b []transport.Transport) []transport.Transport {
	return routedBy(n, a, b, evenOdd)
}

func routedBy(n int, a, b []transport.Transport, pick func(rank int) func(int) int) []transport.Transport {
	out := make([]transport.Transport, n)
	for r := range n {
		out[r] = route.New(r, n, []transport.Transport{a[r], b[r]}, pick(r))
	}
	return out
}

func TestConformanceTwoInproc(t *testing.T) {
	transporttest.Run(t, func(t *testing.T, n int) []transport.Transport {
		return routed(n, inproc.New(n), inproc.New(n))
	})
}

// tcpJob starts an in-process tcp job over loopback.
func tcpJob(t *testing.T, n int) []transport.Transport {
	kvs := bootstrap.Local(n)
	out := make([]transport.Transport, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ep, err := tcp.New(kvs[r], tcp.Options{Addr: "127.0.0.1", Secret: []byte("route test"), Timeout: 20 * time.Second, Log: io.Discard})
			out[r], errs[r] = ep, err
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestConformanceInprocTCP(t *testing.T) {
	// Two-rank tests go over tcp here, and over inproc below; with more
	// ranks both carry traffic.
	t.Run("EvenOdd", func(t *testing.T) {
		transporttest.Run(t, func(t *testing.T, n int) []transport.Transport {
			return routedBy(n, inproc.New(n), tcpJob(t, n), evenOdd)
		})
	})
	t.Run("LowerParity", func(t *testing.T) {
		transporttest.Run(t, func(t *testing.T, n int) []transport.Transport {
			return routedBy(n, inproc.New(n), tcpJob(t, n), lowerParity)
		})
	})
}

// recorder is a transport that completes sends at once and records which
// ops it was given, by address.
type recorder struct {
	rank, size int
	started    []*transport.Op
	record     bool
}

func (f *recorder) Rank() int { return f.rank }
func (f *recorder) Size() int { return f.size }
func (f *recorder) Start(ops []transport.Op) error {
	for i := range ops {
		ops[i].Reset()
		if f.record {
			f.started = append(f.started, &ops[i])
		}
		ops[i].Complete(len(ops[i].Buf), nil)
	}
	return nil
}
func (f *recorder) Test(ops []transport.Op) (bool, error) {
	return true, f.Wait(ops)
}
func (f *recorder) Wait(ops []transport.Op) error {
	for i := range ops {
		if !ops[i].Done() {
			return fmt.Errorf("op %d waited on before it was started here", i)
		}
	}
	return transport.FirstError(ops)
}
func (f *recorder) Close() error { return nil }

// Each op reaches the transport of its peer, in place, and invalid peers
// reach none.
func TestSplitsInPlace(t *testing.T) {
	const n = 6
	a, b := &recorder{rank: 2, size: n, record: true}, &recorder{rank: 2, size: n, record: true}
	r := route.New(2, n, []transport.Transport{a, b}, evenOdd(2))
	peers := []int{1, 3, 0, 4, 5, 2, -1, 0, 1, 6, 4}
	ops := make([]transport.Op, len(peers))
	for i, p := range peers {
		ops[i] = transport.Op{Peer: p, Buf: make([]byte, i)}
	}
	if err := r.Start(ops); err != nil {
		t.Fatal(err)
	}
	err := r.Wait(ops)
	if !errors.Is(err, transport.ErrBadPeer) {
		t.Fatalf("Wait: %v, want ErrBadPeer from the invalid peers", err)
	}
	var wantA, wantB []*transport.Op
	for i, p := range peers {
		switch {
		case p < 0 || p >= n || p == 2:
			if !errors.Is(ops[i].Err, transport.ErrBadPeer) {
				t.Errorf("op %d to peer %d: %v, want ErrBadPeer", i, p, ops[i].Err)
			}
		case p%2 == 0:
			wantA = append(wantA, &ops[i])
		default:
			wantB = append(wantB, &ops[i])
		}
	}
	for _, c := range []struct {
		name      string
		got, want []*transport.Op
	}{{"even", a.started, wantA}, {"odd", b.started, wantB}} {
		if len(c.got) != len(c.want) {
			t.Fatalf("%s transport got %d ops, want %d", c.name, len(c.got), len(c.want))
		}
		for i := range c.got {
			if c.got[i] != c.want[i] {
				t.Errorf("%s transport op %d is not the caller's op (moved or wrong)", c.name, i)
			}
		}
	}
}

func TestNoAllocations(t *testing.T) {
	const n = 8
	ts := []transport.Transport{&recorder{rank: 0, size: n}, &recorder{rank: 0, size: n}}
	r := route.New(0, n, ts, evenOdd(0))
	ops := make([]transport.Op, 2*(n-1))
	for i := range ops {
		ops[i] = transport.Op{Peer: 1 + i%(n-1), Recv: i%2 == 0}
	}
	allocs := testing.AllocsPerRun(1000, func() {
		r.Start(ops)
		r.Wait(ops)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per Start+Wait, want 0", allocs)
	}
}

func TestNewPanicsOnMismatch(t *testing.T) {
	for name, f := range map[string]func(){
		"rank": func() { route.New(1, 4, []transport.Transport{&recorder{rank: 0, size: 4}}, evenOdd(1)) },
		"size": func() { route.New(0, 4, []transport.Transport{&recorder{rank: 0, size: 5}}, evenOdd(0)) },
		"pick": func() { route.New(0, 4, []transport.Transport{&recorder{rank: 0, size: 4}}, evenOdd(0)) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s mismatch: no panic", name)
				}
			}()
			f()
		}()
	}
}
