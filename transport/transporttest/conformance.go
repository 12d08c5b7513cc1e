// Package transporttest is the conformance suite that every gocoll
// transport must pass: inproc, shm, tcp and hostmpi run the same tests
// against the contract written in package transport.
package transporttest

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/gocoll/gocoll/transport"
)

// Job starts a job of n ranks and returns their endpoints, in rank order.
// The suite closes them at the end of each test.
type Job func(t *testing.T, n int) []transport.Transport

// Run runs every conformance test against the transport that job creates.
func Run(t *testing.T, job Job) {
	tests := []struct {
		name string
		fn   func(*testing.T, Job)
	}{
		{"PairSizes", testPairSizes},
		{"ZeroLength", testZeroLength},
		{"NonOvertaking", testNonOvertaking},
		{"TagsMatchOutOfOrder", testTagsOutOfOrder},
		{"UnexpectedSend", testUnexpectedSend},
		{"ShortMessage", testShortMessage},
		{"Truncation", testTruncation},
		{"BadPeer", testBadPeer},
		{"AllToAll", testAllToAll},
		{"ManyRounds", testManyRounds},
		{"ConcurrentContexts", testConcurrentContexts},
		{"CloseFailsPending", testCloseFailsPending},
		{"TestCompletes", testTestCompletes},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, job) })
	}
}

// start creates a job and closes it when the test ends.
func start(t *testing.T, job Job, n int) []transport.Transport {
	eps := job(t, n)
	if len(eps) != n {
		t.Fatalf("job of %d ranks returned %d endpoints", n, len(eps))
	}
	for r, ep := range eps {
		if ep.Rank() != r || ep.Size() != n {
			t.Fatalf("endpoint %d says rank %d of %d", r, ep.Rank(), ep.Size())
		}
	}
	t.Cleanup(func() {
		for _, ep := range eps {
			ep.Close()
		}
	})
	return eps
}

// parallel runs f once per rank, each on its own goroutine, and fails the
// test if any returns an error or if they take longer than a minute.
func parallel(t *testing.T, eps []transport.Transport, f func(ep transport.Transport) error) {
	t.Helper()
	errs := make(chan error, len(eps))
	for _, ep := range eps {
		go func() { errs <- f(ep) }()
	}
	timeout := time.After(time.Minute)
	for range eps {
		select {
		case err := <-errs:
			if err != nil {
				t.Fatal(err)
			}
		case <-timeout:
			t.Fatal("ranks still running after a minute: hang")
		}
	}
}

// pattern returns n bytes that depend on seed.
func pattern(n, seed int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + seed*131 + i>>8)
	}
	return b
}

// exchange starts ops, waits for them and returns the error.
func exchange(ep transport.Transport, ops []transport.Op) error {
	if err := ep.Start(ops); err != nil {
		return err
	}
	return ep.Wait(ops)
}

func tag(round int) transport.Tag { return transport.Tag{Context: 1, Seq: 1, Round: uint32(round)} }

func testPairSizes(t *testing.T, job Job) {
	eps := start(t, job, 2)
	for _, size := range []int{1, 7, 64, 4095, 4096, 65537, 1 << 20, 5<<20 + 3} {
		parallel(t, eps, func(ep transport.Transport) error {
			me, peer := ep.Rank(), 1-ep.Rank()
			got := make([]byte, size)
			ops := []transport.Op{
				{Peer: peer, Tag: tag(size), Buf: got, Recv: true},
				{Peer: peer, Tag: tag(size), Buf: pattern(size, me)},
			}
			if err := exchange(ep, ops); err != nil {
				return err
			}
			if ops[0].N != size || !bytes.Equal(got, pattern(size, peer)) {
				return fmt.Errorf("size %d: rank %d received %d bytes, wrong contents", size, me, ops[0].N)
			}
			return nil
		})
	}
}

// Test alone, called in a loop and never Wait, completes every op of
// small and large (rendezvous) messages: resumable executors rely on it.
func testTestCompletes(t *testing.T, job Job) {
	eps := start(t, job, 2)
	for _, size := range []int{0, 100, 1 << 20} {
		parallel(t, eps, func(ep transport.Transport) error {
			me, peer := ep.Rank(), 1-ep.Rank()
			got := make([]byte, size)
			ops := []transport.Op{
				{Peer: peer, Tag: tag(size), Buf: got, Recv: true},
				{Peer: peer, Tag: tag(size), Buf: pattern(size, me)},
			}
			if err := ep.Start(ops); err != nil {
				return err
			}
			deadline := time.Now().Add(20 * time.Second)
			for {
				done, err := ep.Test(ops)
				if err != nil {
					return err
				}
				if done {
					break
				}
				if time.Now().After(deadline) {
					return fmt.Errorf("size %d: Test never reported the ops complete", size)
				}
				runtime.Gosched()
			}
			if ops[0].N != size || !bytes.Equal(got, pattern(size, peer)) {
				return fmt.Errorf("size %d: rank %d received %d bytes, wrong contents", size, me, ops[0].N)
			}
			return nil
		})
	}
}

func testZeroLength(t *testing.T, job Job) {
	eps := start(t, job, 2)
	parallel(t, eps, func(ep transport.Transport) error {
		peer := 1 - ep.Rank()
		ops := []transport.Op{{Peer: peer, Tag: tag(0), Recv: true}, {Peer: peer, Tag: tag(0)}}
		if err := exchange(ep, ops); err != nil {
			return err
		}
		if ops[0].N != 0 {
			return fmt.Errorf("zero-length message arrived with %d bytes", ops[0].N)
		}
		return nil
	})
}

// Messages with the same tag between one pair arrive in the order sent.
func testNonOvertaking(t *testing.T, job Job) {
	eps := start(t, job, 2)
	const n = 50
	sizes := func(i int) int { return []int{3, 100000, 0, 17}[i%4] }
	parallel(t, eps, func(ep transport.Transport) error {
		if ep.Rank() == 0 {
			ops := make([]transport.Op, n)
			for i := range ops {
				ops[i] = transport.Op{Peer: 1, Tag: tag(0), Buf: pattern(sizes(i), i)}
			}
			return exchange(ep, ops)
		}
		time.Sleep(10 * time.Millisecond) // let the sends queue up
		ops := make([]transport.Op, n)
		for i := range ops {
			ops[i] = transport.Op{Peer: 0, Tag: tag(0), Buf: make([]byte, 100000), Recv: true}
		}
		if err := exchange(ep, ops); err != nil {
			return err
		}
		for i := range ops {
			if ops[i].N != sizes(i) || !bytes.Equal(ops[i].Buf[:ops[i].N], pattern(sizes(i), i)) {
				return fmt.Errorf("message %d overtaken or corrupted (%d bytes)", i, ops[i].N)
			}
		}
		return nil
	})
}

// Receives posted in the opposite order of the sends match by tag.
func testTagsOutOfOrder(t *testing.T, job Job) {
	eps := start(t, job, 2)
	tags := []transport.Tag{{Context: 1, Seq: 1, Round: 0}, {Context: 1, Seq: 1, Round: 1}, {Context: 1, Seq: 2, Round: 0}, {Context: 2, Seq: 1, Round: 0}}
	parallel(t, eps, func(ep transport.Transport) error {
		if ep.Rank() == 0 {
			for i, tg := range tags {
				if err := exchange(ep, []transport.Op{{Peer: 1, Tag: tg, Buf: pattern(100+i, i)}}); err != nil {
					return err
				}
			}
			return nil
		}
		ops := make([]transport.Op, len(tags))
		for i := range tags {
			j := len(tags) - 1 - i
			ops[i] = transport.Op{Peer: 0, Tag: tags[j], Buf: make([]byte, 200), Recv: true}
		}
		if err := exchange(ep, ops); err != nil {
			return err
		}
		for i := range ops {
			j := len(tags) - 1 - i
			if ops[i].N != 100+j || !bytes.Equal(ops[i].Buf[:ops[i].N], pattern(100+j, j)) {
				return fmt.Errorf("tag %v matched the wrong message", tags[j])
			}
		}
		return nil
	})
}

// A send started long before its receive completes once the receive comes.
func testUnexpectedSend(t *testing.T, job Job) {
	eps := start(t, job, 3)
	parallel(t, eps, func(ep transport.Transport) error {
		switch ep.Rank() {
		case 0:
			return exchange(ep, []transport.Op{{Peer: 2, Tag: tag(5), Buf: pattern(3000, 9)}})
		case 2:
			time.Sleep(50 * time.Millisecond)
			ops := []transport.Op{{Peer: 0, Tag: tag(5), Buf: make([]byte, 3000), Recv: true}}
			if err := exchange(ep, ops); err != nil {
				return err
			}
			if !bytes.Equal(ops[0].Buf, pattern(3000, 9)) {
				return errors.New("late receive got wrong data")
			}
		}
		return nil
	})
}

func testShortMessage(t *testing.T, job Job) {
	eps := start(t, job, 2)
	parallel(t, eps, func(ep transport.Transport) error {
		if ep.Rank() == 0 {
			return exchange(ep, []transport.Op{{Peer: 1, Tag: tag(0), Buf: pattern(10, 1)}})
		}
		ops := []transport.Op{{Peer: 0, Tag: tag(0), Buf: make([]byte, 64), Recv: true}}
		if err := exchange(ep, ops); err != nil {
			return err
		}
		if ops[0].N != 10 || !bytes.Equal(ops[0].Buf[:10], pattern(10, 1)) {
			return fmt.Errorf("short message: got %d bytes", ops[0].N)
		}
		return nil
	})
}

func testTruncation(t *testing.T, job Job) {
	eps := start(t, job, 2)
	parallel(t, eps, func(ep transport.Transport) error {
		var ops []transport.Op
		if ep.Rank() == 0 {
			ops = []transport.Op{{Peer: 1, Tag: tag(0), Buf: pattern(100, 1)}}
		} else {
			ops = []transport.Op{{Peer: 0, Tag: tag(0), Buf: make([]byte, 10), Recv: true}}
		}
		err := exchange(ep, ops)
		if ep.Rank() == 1 && !errors.Is(err, transport.ErrTruncate) {
			return fmt.Errorf("receiving 100 bytes into 10: got %v, want ErrTruncate", err)
		}
		return nil
	})
}

func testBadPeer(t *testing.T, job Job) {
	eps := start(t, job, 2)
	for _, peer := range []int{-1, 0, 2} {
		ops := []transport.Op{{Peer: peer, Tag: tag(0), Buf: []byte{1}}}
		err := exchange(eps[0], ops)
		var te *transport.Error
		if !errors.Is(err, transport.ErrBadPeer) || !errors.As(err, &te) {
			t.Errorf("send to peer %d: got %v, want ErrBadPeer", peer, err)
		}
	}
}

// Every rank sends a distinct message to every other rank in one Start.
func testAllToAll(t *testing.T, job Job) {
	for _, n := range []int{3, 5} {
		eps := start(t, job, n)
		parallel(t, eps, func(ep transport.Transport) error {
			me := ep.Rank()
			var ops []transport.Op
			for peer := range n {
				if peer == me {
					continue
				}
				ops = append(ops, transport.Op{Peer: peer, Tag: tag(1), Buf: make([]byte, 1000), Recv: true})
				ops = append(ops, transport.Op{Peer: peer, Tag: tag(1), Buf: pattern(1000, me*n+peer)})
			}
			if err := exchange(ep, ops); err != nil {
				return err
			}
			for _, op := range ops {
				if op.Recv && !bytes.Equal(op.Buf, pattern(1000, op.Peer*n+me)) {
					return fmt.Errorf("rank %d: wrong data from %d", me, op.Peer)
				}
			}
			return nil
		})
	}
}

// A ring of many rounds: messages of each round go to the right neighbour.
func testManyRounds(t *testing.T, job Job) {
	const n, rounds = 4, 2000
	eps := start(t, job, n)
	parallel(t, eps, func(ep transport.Transport) error {
		me := ep.Rank()
		right, left := (me+1)%n, (me+n-1)%n
		send, recv := make([]byte, 64), make([]byte, 64)
		ops := make([]transport.Op, 2)
		for i := range rounds {
			copy(send, pattern(64, me+i))
			ops[0] = transport.Op{Peer: left, Tag: tag(i), Buf: recv, Recv: true}
			ops[1] = transport.Op{Peer: right, Tag: tag(i), Buf: send}
			if err := exchange(ep, ops); err != nil {
				return err
			}
			if !bytes.Equal(recv, pattern(64, left+i)) {
				return fmt.Errorf("round %d: wrong data", i)
			}
		}
		return nil
	})
}

// Two goroutines per rank talk on different contexts at the same time.
func testConcurrentContexts(t *testing.T, job Job) {
	eps := start(t, job, 2)
	parallel(t, eps, func(ep transport.Transport) error {
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for c := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				peer := 1 - ep.Rank()
				for i := range 200 {
					tg := transport.Tag{Context: uint32(10 + c), Seq: uint32(i)}
					got := make([]byte, 256)
					ops := []transport.Op{
						{Peer: peer, Tag: tg, Buf: got, Recv: true},
						{Peer: peer, Tag: tg, Buf: pattern(256, c*1000+i)},
					}
					if err := exchange(ep, ops); err != nil {
						errs[c] = err
						return
					}
					if !bytes.Equal(got, pattern(256, c*1000+i)) {
						errs[c] = fmt.Errorf("context %d call %d: wrong data", c, i)
						return
					}
				}
			}()
		}
		wg.Wait()
		return errors.Join(errs...)
	})
}

// Closing an endpoint fails a receive waiting on it, at its peer, instead of
// leaving the peer blocked forever.
func testCloseFailsPending(t *testing.T, job Job) {
	eps := start(t, job, 2)
	done := make(chan error, 1)
	go func() {
		done <- exchange(eps[1], []transport.Op{{Peer: 0, Tag: tag(0), Buf: make([]byte, 8), Recv: true}})
	}()
	time.Sleep(20 * time.Millisecond)
	eps[0].Close()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("receive from a closed peer succeeded")
		}
		var te *transport.Error
		if !errors.As(err, &te) || te.Peer != 0 {
			t.Fatalf("got %v, want a *transport.Error naming rank 0", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("receive from a closed peer still blocked after 30 s")
	}
	if err := exchange(eps[0], []transport.Op{{Peer: 1, Tag: tag(1), Buf: []byte{1}}}); !errors.Is(err, transport.ErrClosed) {
		t.Fatalf("send on a closed endpoint: got %v, want ErrClosed", err)
	}
}
