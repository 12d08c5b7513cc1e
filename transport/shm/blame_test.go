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

// asleepFor waits until ep sleeps in Wait for rank peer, as it says in
// its control block (the word the other ranks read).
func asleepFor(t *testing.T, ep *Endpoint, peer int) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); ep.myCtl.waitingOn.Load() != int32(peer)+1; time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("rank %d is not asleep waiting for rank %d after 10 s (waitingOn %d)", ep.rank, peer, ep.myCtl.waitingOn.Load()-1)
		}
	}
}

// Rank 0 waits for rank 1, which waits for rank 2, which never answers.
// Rank 0 started waiting first, so it would time out first; but rank 1
// is asleep in Wait and beating, so rank 0 holds off, rank 1 blames rank
// 2, and every rank names rank 2.
//
// The order is made, not slept for: rank 0 is held (its lock) from the
// moment it sleeps waiting for rank 1 until rank 1 sleeps waiting for
// rank 2; then rank 0's receive is dated half a timeout before rank 1's,
// which both then wait from. However slow the machine, rank 0 reaches its
// timeout first, with rank 1 asleep and waiting for rank 2; if it gave up
// on rank 1 (at the timeout, or by itself at twice the timeout) it would
// name rank 1.
func TestStallBlamedOnStalledRank(t *testing.T) {
	const timeout = time.Second
	eps := localJob(t, 3, Options{Timeout: timeout})
	ops0 := []transport.Op{{Peer: 1, Tag: tag(1), Buf: make([]byte, 8), Recv: true}}
	ops1 := []transport.Op{{Peer: 2, Tag: tag(1), Buf: make([]byte, 8), Recv: true}}
	d0 := waitAsync(eps[0], ops0)
	asleepFor(t, eps[0], 1)
	eps[0].mu.Lock()
	d1 := waitAsync(eps[1], ops1)
	asleepFor(t, eps[1], 2)
	eps[1].mu.Lock()
	ops1[0].Handle.(*req).since = eps[1].now()
	eps[1].mu.Unlock()
	ops0[0].Handle.(*req).since = eps[0].now() - timeout/2
	eps[0].mu.Unlock()
	for r, done := range []chan error{d0, d1} {
		err := within(t, done, 10*timeout, "a rank")
		var te *transport.Error
		if !errors.Is(err, transport.ErrTimeout) || !errors.As(err, &te) || te.Peer != 2 {
			t.Errorf("rank %d: %v, want a timeout naming rank 2", r, err)
		}
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

// wantPeerFailed fails the test unless err is ErrPeerFailed naming rank.
func wantPeerFailed(t *testing.T, what string, err error, rank int) {
	t.Helper()
	var te *transport.Error
	if !errors.Is(err, transport.ErrPeerFailed) || !errors.As(err, &te) || te.Peer != rank {
		t.Errorf("%s: %v, want ErrPeerFailed naming rank %d", what, err, rank)
	}
}

// failBecauseOf makes ep fail as a rank does that finds rank dead: it
// publishes the death, then fails (refusing and withdrawing rendezvous
// sends). Its unexpected messages are drained first, so that it has
// something to refuse.
func failBecauseOf(ep *Endpoint, rank int) {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	ep.progress()
	ep.peerDied(ep.peers[ep.lidx[rank]])
}

// Rank 1 finds rank 2 dead and, failing, refuses the rendezvous send rank
// 0 posted to it. Rank 0 sees the refusal in the same progress pass that
// has just looked for news (before rank 1 published any): its send must
// still name rank 2, the cause, not rank 1, which only gave up. (On CI a
// ring allreduce's survivor once named its neighbour this way.)
func TestRefusedSendNamesTheCause(t *testing.T) {
	for _, cma := range []bool{true, false} {
		t.Run(cmaName(cma), func(t *testing.T) {
			restore := useCMA(cma)
			eps := localJob(t, 3, Options{})
			restore()
			send := []transport.Op{{Peer: 1, Tag: tag(1), Buf: pattern(1<<20, 1)}}
			eps[0].Start(send)
			failBecauseOf(eps[1], 2)
			e := eps[0]
			e.mu.Lock()
			e.checkRdv() // what progress does after it read the (old) epoch
			e.mu.Unlock()
			done := make(chan error, 1)
			go func() { done <- e.Wait(send) }()
			err := within(t, done, 10*time.Second, "the sender")
			wantPeerFailed(t, "the refused send", err, 2)
		})
	}
}

// Rank 1 finds rank 2 dead and, failing, withdraws the rendezvous send
// whose announcement rank 0 holds unmatched. Rank 0's receive, started
// later, finds the send withdrawn: it must name rank 2, not rank 1.
func TestWithdrawnSendNamesTheCause(t *testing.T) {
	for _, cma := range []bool{true, false} {
		t.Run(cmaName(cma), func(t *testing.T) {
			restore := useCMA(cma)
			eps := localJob(t, 3, Options{})
			restore()
			send := []transport.Op{{Peer: 0, Tag: tag(1), Buf: pattern(1<<20, 1)}}
			eps[1].Start(send)
			e := eps[0]
			e.mu.Lock()
			e.progress() // the announcement is now unexpected
			n := len(e.unexpected)
			e.mu.Unlock()
			if n != 1 {
				t.Fatalf("%d unexpected messages at rank 0, want 1", n)
			}
			failBecauseOf(eps[1], 2)
			recv := []transport.Op{{Peer: 1, Tag: tag(1), Buf: make([]byte, 1<<20), Recv: true}}
			err := within(t, waitAsync(e, recv), 10*time.Second, "the receiver")
			wantPeerFailed(t, "the withdrawn send", err, 2)
		})
	}
}

// Rank 0 finds rank 2 dead and fails; rank 1, failing because of it too,
// ends the job's process; rank 0 then finds rank 1 ended. Rank 3, reading
// the news only now, must name rank 2: an endpoint that has failed
// publishes no more deaths, which are consequences. (Once the CI's ring
// allreduce survivors read both deaths in one pass and named the lower
// rank, the one that only gave up.)
func TestFailedEndpointPublishesNoDeath(t *testing.T) {
	eps := localJob(t, 4, Options{})
	failBecauseOf(eps[0], 2)
	e := eps[0]
	e.mu.Lock()
	e.peerDied(e.peers[e.lidx[1]]) // what checkLiveness does on finding rank 1 ended
	e.mu.Unlock()
	recv := []transport.Op{{Peer: 0, Tag: tag(1), Buf: make([]byte, 8), Recv: true}}
	err := within(t, waitAsync(eps[3], recv), 10*time.Second, "rank 3")
	wantPeerFailed(t, "rank 3", err, 2)
}
