package tcp

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/gocoll/gocoll/transport"
)

func callTag(seq, round int) transport.Tag {
	return transport.Tag{Context: 9, Seq: uint32(seq), Round: uint32(round)}
}

func waitAsync(t *testing.T, ep *Endpoint, ops []transport.Op) chan error {
	done := make(chan error, 1)
	ep.Start(ops)
	go func() { done <- wait(t, ep, ops) }()
	return done
}

// connectAll makes every pair's connection.
func connectAll(t *testing.T, eps []*Endpoint) {
	for a := range eps {
		for b := a + 1; b < len(eps); b++ {
			if err := pairExchange(t, eps, a, b, 10); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// When rank 2 goes away in the middle of a call, rank 0's other ops of
// that call fail at once naming rank 2, and rank 1, which waits in the
// same call for rank 0, learns it from rank 0's abandon frame; ops of
// other calls still work.
func TestAbandonNamesTheFailedRank(t *testing.T) {
	eps := newJob(t, 3, loopback(io.Discard))
	connectAll(t, eps)
	r0 := []transport.Op{
		{Peer: 2, Tag: callTag(1, 0), Buf: make([]byte, 8), Recv: true},
		{Peer: 1, Tag: callTag(1, 1), Buf: make([]byte, 8), Recv: true},
	}
	d0 := waitAsync(t, eps[0], r0)
	d1 := waitAsync(t, eps[1], []transport.Op{{Peer: 0, Tag: callTag(1, 2), Buf: make([]byte, 8), Recv: true}})
	// Both ranks' ops are posted (Start has returned): no need to wait.
	eps[2].Close()
	<-d0
	for i := range r0 {
		var te *transport.Error
		if !errors.As(r0[i].Err, &te) || te.Peer != 2 || !errors.Is(r0[i].Err, transport.ErrPeerFailed) {
			t.Errorf("rank 0, op %d: %v, want a failure naming rank 2", i, r0[i].Err)
		}
	}
	err := <-d1
	var te *transport.Error
	if !errors.As(err, &te) || te.Peer != 2 || !strings.Contains(err.Error(), "reported by rank 0") {
		t.Errorf("rank 1: %v, want rank 2's failure reported by rank 0", err)
	}
	// No clock needed for "at once": without rank 0's abandon frame rank 1
	// would fail only at its timeout (20 s), naming rank 0.
	if err := pairExchange(t, eps, 0, 1, 1000); err != nil {
		t.Errorf("a later call between live ranks: %v", err)
	}
}

// Rank 0 waits for rank 1, which waits for rank 2, which never sends.
// Rank 0 started first and would time out first; but rank 1's status
// frames say it waits for rank 2, so rank 0 holds off, and both name
// rank 2.
//
// The order is made, not slept for: until rank 0 has read rank 1's
// status frame (rank 1 waits for rank 2), the test keeps rank 0's stall
// at zero (the progress stamp its watchdog counts from); then it dates
// rank 1's stall a quarter of the timeout back and rank 0's three
// quarters. However slow the machine, rank 0 reaches its timeout first,
// knowing that rank 1 waits for rank 2; had it given up on rank 1 (at the
// timeout, or by itself at twice the timeout) it would name rank 1.
func TestStalledRankBlamed(t *testing.T) {
	const timeout = time.Second
	eps := newJob(t, 3, func(int) Options {
		return Options{Addr: "127.0.0.1", Secret: testSecret, Timeout: timeout, Log: io.Discard}
	})
	connectAll(t, eps)
	rank1At0, rank2At1 := eps[0].peers[1], eps[1].peers[2]
	d0 := waitAsync(t, eps[0], []transport.Op{{Peer: 1, Tag: callTag(1, 1), Buf: make([]byte, 8), Recv: true}})
	d1 := waitAsync(t, eps[1], []transport.Op{{Peer: 2, Tag: callTag(1, 0), Buf: make([]byte, 8), Recv: true}})
	for end := time.Now().Add(10 * time.Second); rank1At0.statusFor.Load() != 2+1; time.Sleep(time.Millisecond) {
		rank1At0.progress.Store(eps[0].now())
		if time.Now().After(end) {
			t.Fatal("rank 0 has no status frame from rank 1 saying it waits for rank 2 after 10 s")
		}
	}
	rank2At1.progress.Store(eps[1].now() - int64(timeout/4))
	rank1At0.progress.Store(eps[0].now() - int64(3*timeout/4))
	for r, done := range []chan error{d0, d1} {
		err := <-done
		var te *transport.Error
		if !errors.Is(err, transport.ErrTimeout) || !errors.As(err, &te) || te.Peer != 2 {
			t.Errorf("rank %d: %v, want a timeout naming rank 2", r, err)
		}
	}
}

// Two ranks waiting for each other (mismatched calls) fail at the
// timeout with a deadlock, not at twice the timeout: the watchdog says
// deadlock at its first tick past the timeout, when the peer's status
// frame says it waits for this rank (a peer waiting for another rank is
// given up on only at twice the timeout, with another message). The
// message is the proof; no clock is read here that a loaded machine
// could make late.
func TestDeadlockFound(t *testing.T) {
	const timeout = 600 * time.Millisecond
	eps := newJob(t, 2, func(int) Options {
		return Options{Addr: "127.0.0.1", Secret: testSecret, Timeout: timeout, Log: io.Discard}
	})
	connectAll(t, eps)
	d0 := waitAsync(t, eps[0], []transport.Op{{Peer: 1, Tag: callTag(1, 0), Buf: make([]byte, 8), Recv: true}})
	d1 := waitAsync(t, eps[1], []transport.Op{{Peer: 0, Tag: callTag(2, 0), Buf: make([]byte, 8), Recv: true}})
	for r, done := range []chan error{d0, d1} {
		err := <-done
		if !errors.Is(err, transport.ErrTimeout) || !strings.Contains(err.Error(), "deadlock") {
			t.Errorf("rank %d: %v, want a deadlock", r, err)
		}
	}
}
