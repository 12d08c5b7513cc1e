//go:build linux

package shm

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gocoll/gocoll/transport"
)

// waitAsync runs ops on ep in the background and returns the channel its
// error comes on.
func waitAsync(ep *Endpoint, ops []transport.Op) chan error {
	done := make(chan error, 1)
	go func() { done <- exchange(ep, ops) }()
	return done
}

func within(t *testing.T, done chan error, d time.Duration, who string) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		t.Fatalf("%s still waiting after %v", who, d)
		return nil
	}
}

// Rank 0 waits for rank 1, which waits for rank 2, which never answers.
// Rank 0 started waiting first, so it would time out first; but rank 1
// is asleep in Wait and beating, so rank 0 holds off, rank 1 blames rank
// 2, and every rank names rank 2.
func TestStallBlamedOnStalledRank(t *testing.T) {
	const timeout = 400 * time.Millisecond
	eps := localJob(t, 3, Options{Timeout: timeout})
	start := time.Now()
	d0 := waitAsync(eps[0], []transport.Op{{Peer: 1, Tag: tag(1), Buf: make([]byte, 8), Recv: true}})
	time.Sleep(timeout / 4)
	d1 := waitAsync(eps[1], []transport.Op{{Peer: 2, Tag: tag(1), Buf: make([]byte, 8), Recv: true}})
	for r, done := range []chan error{d0, d1} {
		err := within(t, done, 10*timeout, "a rank")
		var te *transport.Error
		if !errors.Is(err, transport.ErrTimeout) || !errors.As(err, &te) || te.Peer != 2 {
			t.Errorf("rank %d: %v, want a timeout naming rank 2", r, err)
		}
	}
	if d := time.Since(start); d > 2*timeout+time.Second {
		t.Errorf("the ranks failed after %v, timeout %v", d, timeout)
	}
	// Rank 2 itself learns that its peers gave up on it.
	if err := exchange(eps[2], []transport.Op{{Peer: 0, Tag: tag(2), Buf: []byte{1}}}); !errors.Is(err, transport.ErrTimeout) {
		t.Errorf("the stalled rank: %v, want its endpoint failed", err)
	}
}

// Two ranks that wait for each other (mismatched calls) fail at the
// timeout, saying it is a deadlock.
func TestDeadlockReported(t *testing.T) {
	const timeout = 300 * time.Millisecond
	eps := localJob(t, 2, Options{Timeout: timeout})
	d0 := waitAsync(eps[0], []transport.Op{{Peer: 1, Tag: tag(1), Buf: make([]byte, 8), Recv: true}})
	d1 := waitAsync(eps[1], []transport.Op{{Peer: 0, Tag: tag(2), Buf: make([]byte, 8), Recv: true}})
	for r, done := range []chan error{d0, d1} {
		err := within(t, done, 10*timeout, "a deadlocked rank")
		if !errors.Is(err, transport.ErrTimeout) || !strings.Contains(err.Error(), "deadlock") {
			t.Errorf("rank %d: %v, want a timeout that says deadlock", r, err)
		}
	}
}

// A receiver that stops in the middle of reading a rendezvous send with
// CMA used to keep the sender's Wait, and its Close, waiting for ever:
// the buffer was returned only when the reader was done or dead. Now the
// sender takes it back once it has found the reader stalled.
func TestStalledReaderReleasesSend(t *testing.T) {
	eps := localJob(t, 2, Options{Timeout: 300 * time.Millisecond})
	send := []transport.Op{{Peer: 1, Tag: tag(1), Buf: pattern(1<<20, 1)}}
	if err := eps[0].Start(send); err != nil {
		t.Fatal(err)
	}
	// Rank 1 "begins reading" (the slot goes from posted to reading, as
	// rendezvous does before process_vm_readv) and then never moves.
	e := eps[0]
	e.mu.Lock()
	if len(e.rdv) != 1 {
		e.mu.Unlock()
		t.Fatalf("%d rendezvous sends, want 1", len(e.rdv))
	}
	r := e.rdv[0]
	if !atomic.CompareAndSwapUint64(&e.slots[r.slot], slotWord(r.gen, slotPosted, 0), slotWord(r.gen, slotReading, 0)) {
		e.mu.Unlock()
		t.Fatal("the slot is not posted")
	}
	e.mu.Unlock()
	done := make(chan error, 1)
	go func() { done <- e.Wait(send) }()
	err := within(t, done, 10*time.Second, "the sender")
	var te *transport.Error
	if !errors.Is(err, transport.ErrTimeout) || !errors.As(err, &te) || te.Peer != 1 {
		t.Errorf("the send: %v, want a timeout naming rank 1", err)
	}
	closed := make(chan error, 1)
	go func() { closed <- e.Close() }()
	within(t, closed, 10*time.Second, "Close")
}
