package host_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/bootstrap"
	"github.com/gocoll/gocoll/executor/host"
	"github.com/gocoll/gocoll/ops"
	"github.com/gocoll/gocoll/transport"
	"github.com/gocoll/gocoll/transport/inproc"
	"github.com/gocoll/gocoll/transport/shm"
	"github.com/gocoll/gocoll/transport/tcp"
)

// jobs makes two endpoints of each transport the executor runs on.
var jobs = []struct {
	name string
	make func(t *testing.T) []transport.Transport
}{
	{"inproc", func(t *testing.T) []transport.Transport { return inproc.New(2) }},
	{"shm", func(t *testing.T) []transport.Transport {
		job := fmt.Sprintf("lentest%d", time.Now().UnixNano())
		return parallel(t, func(kvs bootstrap.KVS) (transport.Transport, error) {
			return shm.New(kvs, shm.Options{JobID: job, Timeout: 10 * time.Second})
		})
	}},
	{"tcp", func(t *testing.T) []transport.Transport {
		return parallel(t, func(kvs bootstrap.KVS) (transport.Transport, error) {
			return tcp.New(kvs, tcp.Options{Addr: "127.0.0.1", Secret: []byte("length test"), Timeout: 10 * time.Second, Log: io.Discard})
		})
	}},
}

// parallel creates the two endpoints of a collective constructor.
func parallel(t *testing.T, f func(bootstrap.KVS) (transport.Transport, error)) []transport.Transport {
	kvs := bootstrap.Local(2)
	eps := make([]transport.Transport, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			eps[r], errs[r] = f(kvs[r])
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return eps
}

// A peer that sends a message of the wrong length (longer or shorter than
// the schedule expects, or one byte off) makes the call fail; nothing is
// written outside the input, output and scratch buffers, and the input is
// not written at all. Rank 1 plays the peer: it posts what rank 0's ring
// allreduce sends, and sends, for the first round, a message of the wrong
// length with the tag rank 0 expects.
func TestWrongLengthFails(t *testing.T) {
	const count, elem = 1000, 8
	for _, job := range jobs {
		for _, delta := range []int{-elem, -1, 1, elem, 100000} {
			t.Run(fmt.Sprintf("%s/%+d", job.name, delta), func(t *testing.T) {
				eps := job.make(t)
				defer eps[0].Close()
				defer eps[1].Close()
				ring, _ := algorithms.Lookup(algorithms.Allreduce, "ring")
				s := ring.Build(algorithms.Params{P: 2, Rank: 0, Count: count, Commutative: true})
				tag := transport.Tag{Context: 7, Seq: 1}

				// Rank 0's buffers, each inside a larger array whose
				// margins must survive.
				const margin = 4096
				mk := func(n int, fill byte) []byte {
					b := make([]byte, margin+n+margin)
					for i := range b {
						b[i] = fill ^ byte(i)
					}
					return b
				}
				inB, outB, scrB := mk(count*elem, 1), mk(count*elem, 2), mk(s.ScratchLen*elem, 3)
				want := [][]byte{bytes.Clone(inB), bytes.Clone(outB), bytes.Clone(scrB)}
				in := inB[margin : margin+count*elem : margin+count*elem]
				out := outB[margin : margin+count*elem : margin+count*elem]
				scr := scrB[margin : margin+s.ScratchLen*elem : margin+s.ScratchLen*elem]
				sum, _ := ops.Lookup(ops.Sum, ops.Int64)

				// The rogue: takes everything rank 0 may send, and sends a
				// first-round message of the wrong length.
				expect := s.Rounds[0].Recvs[0].Range.Len * elem
				var rogue []transport.Op
				for i := range s.Rounds {
					rtag := tag
					rtag.Round = uint32(i)
					rogue = append(rogue, transport.Op{Peer: 0, Tag: rtag, Buf: make([]byte, 1<<20), Recv: true})
				}
				rogue = append(rogue, transport.Op{Peer: 0, Tag: tag, Buf: make([]byte, max(expect+delta, 0))})
				if err := eps[1].Start(rogue); err != nil {
					t.Fatal(err)
				}

				call := &host.Call{Sched: s, In: in, Out: out, Scratch: scr, ElemSize: elem, Reduce: host.Kernel(sum),
					T: eps[0], Ranks: []int{0, 1}, Tag: tag}
				done := make(chan error, 1)
				go func() {
					var e host.Executor
					done <- e.Run(call)
				}()
				var err error
				select {
				case err = <-done:
				case <-time.After(30 * time.Second):
					t.Fatal("the executor hangs on a message of the wrong length")
				}
				if err == nil {
					t.Fatalf("a %d-byte message where %d were expected was accepted", expect+delta, expect)
				}
				var te *transport.Error
				if delta > 0 && !(errors.Is(err, transport.ErrTruncate) && errors.As(err, &te) && te.Peer == 1) {
					t.Errorf("a longer message: %v, want ErrTruncate naming rank 1", err)
				}
				if delta < 0 && !strings.Contains(err.Error(), fmt.Sprintf("received %d bytes from rank 1, expected %d", expect+delta, expect)) {
					t.Errorf("a shorter message: %v", err)
				}
				// Only the output and scratch may change, and only inside.
				for i, b := range [][]byte{inB, outB, scrB} {
					w := want[i]
					lo, hi := margin, len(b)-margin
					if i == 0 {
						lo, hi = 0, 0 // the input must not change at all
					}
					for j := range b {
						if (j < lo || j >= hi) && b[j] != w[j] {
							t.Fatalf("buffer %d changed at byte %d (of %d, margins %d): %v", i, j-margin, len(b)-2*margin, margin, err)
						}
					}
				}
			})
		}
	}
}
