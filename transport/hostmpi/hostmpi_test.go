package hostmpi

import (
	"errors"
	"sync"
	"testing"

	"github.com/gocoll/gocoll/transport"
	"github.com/gocoll/gocoll/transport/transporttest"
)

// simWorld is an in-process model of MPI point-to-point on one
// communicator, with the rules the transport relies on: a receive matches
// the first message from its source (or any source) with its tag, in the
// order sent (non-overtaking); messages of at most eagerMax bytes complete
// at the sender at once, longer ones when received (rendezvous); a longer
// message than the receive buffer truncates with an error at the
// receiver; unmatched requests can be cancelled. The real thing, PMPI
// calls on the host MPI, is exercised by the LD_PRELOAD tests
// (tests/preload) with GOCOLL_TRANSPORT=hostmpi and with emulated hosts.
type simWorld struct {
	mu       sync.Mutex
	n, tagUB int
	eagerMax int
	reqs     map[Request]*simReq
	next     Request
	// queues per destination rank, in the order posted or sent
	posted     [][]*simReq // receives not matched yet
	unexpected [][]*simReq // sends not matched yet
}

type simReq struct {
	recv      bool
	src, dst  int // src is AnySource for a wildcard receive
	tag       int
	buf       []byte
	data      []byte // an eager send's copy
	done      bool
	res       Result
	cancelled bool
}

type simComm struct {
	w    *simWorld
	rank int
}

func newSimWorld(n, tagUB int) []*simComm {
	w := &simWorld{n: n, tagUB: tagUB, eagerMax: 1024, reqs: map[Request]*simReq{},
		posted: make([][]*simReq, n), unexpected: make([][]*simReq, n)}
	out := make([]*simComm, n)
	for r := range out {
		out[r] = &simComm{w: w, rank: r}
	}
	return out
}

func (c *simComm) Rank() int  { return c.rank }
func (c *simComm) Size() int  { return c.w.n }
func (c *simComm) TagUB() int { return c.w.tagUB }

var errSimTag = errors.New("sim: tag out of range")

func (w *simWorld) add(r *simReq) Request {
	w.next++
	w.reqs[w.next] = r
	return w.next
}

func (c *simComm) Isend(buf []byte, peer, tag int) (Request, error) {
	w := c.w
	if tag < 0 || tag > w.tagUB {
		return 0, errSimTag
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	s := &simReq{src: c.rank, dst: peer, tag: tag, buf: buf}
	h := w.add(s)
	for i, r := range w.posted[peer] {
		if (r.src == c.rank || r.src == AnySource) && r.tag == tag {
			w.posted[peer] = append(w.posted[peer][:i:i], w.posted[peer][i+1:]...)
			w.deliver(s, r)
			return h, nil
		}
	}
	if len(buf) <= w.eagerMax {
		s.data = append([]byte(nil), buf...)
		s.done = true
	}
	w.unexpected[peer] = append(w.unexpected[peer], s)
	return h, nil
}

func (c *simComm) Irecv(buf []byte, peer, tag int) (Request, error) {
	w := c.w
	if tag < 0 || tag > w.tagUB {
		return 0, errSimTag
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	r := &simReq{recv: true, src: peer, dst: c.rank, tag: tag, buf: buf}
	h := w.add(r)
	for i, s := range w.unexpected[c.rank] {
		if (peer == AnySource || s.src == peer) && s.tag == tag {
			w.unexpected[c.rank] = append(w.unexpected[c.rank][:i:i], w.unexpected[c.rank][i+1:]...)
			w.deliver(s, r)
			return h, nil
		}
	}
	w.posted[c.rank] = append(w.posted[c.rank], r)
	return h, nil
}

// deliver copies send s into receive r and completes both.
func (w *simWorld) deliver(s, r *simReq) {
	data := s.buf
	if s.data != nil || s.done {
		data = s.data
	}
	n := copy(r.buf, data)
	r.res = Result{N: n, Source: s.src, Truncated: len(data) > len(r.buf)}
	r.done, s.done = true, true
}

func (c *simComm) Test(h Request) (bool, Result) {
	w := c.w
	w.mu.Lock()
	defer w.mu.Unlock()
	r := w.reqs[h]
	if r == nil || !r.done {
		return false, Result{}
	}
	delete(w.reqs, h)
	res := r.res
	res.Cancelled = r.cancelled
	return true, res
}

func (c *simComm) Cancel(h Request) error {
	w := c.w
	w.mu.Lock()
	defer w.mu.Unlock()
	r := w.reqs[h]
	if r == nil || r.done {
		return nil
	}
	q := &w.posted[r.dst]
	if !r.recv {
		q = &w.unexpected[r.dst]
	}
	for i, x := range *q {
		if x == r {
			*q = append((*q)[:i:i], (*q)[i+1:]...)
			r.done, r.cancelled = true, true
		}
	}
	return nil
}

func simJob(notify bool, tagUB int) transporttest.Job {
	return func(t *testing.T, n int) []transport.Transport {
		out := make([]transport.Transport, n)
		for r, c := range newSimWorld(n, tagUB) {
			ep, err := New(c, Options{Notify: notify})
			if err != nil {
				t.Fatal(err)
			}
			out[r] = ep
		}
		return out
	}
}

func TestConformance(t *testing.T) {
	transporttest.Run(t, simJob(true, 1<<31-1))
}

// MPI guarantees only 32767 as MPI_TAG_UB: tags wrap sooner, and MPI's
// non-overtaking rule keeps the messages apart.
func TestConformanceSmallTagUB(t *testing.T) {
	transporttest.Run(t, simJob(true, 1<<15-1))
}

func TestTagLayout(t *testing.T) {
	for _, ub := range []int{1<<15 - 1, 1<<28 - 1, 1<<31 - 1} {
		l := newLayout(ub)
		if l.bye > ub {
			t.Errorf("ub %d: goodbye tag %d out of range", ub, l.bye)
		}
		seen := map[int]transport.Tag{}
		for ctx := range uint32(3) {
			for seq := range uint32(5) {
				for round := range uint32(7) {
					tg := transport.Tag{Context: ctx, Seq: seq, Round: round}
					v := l.tag(tg)
					if v < 0 || v >= l.bye {
						t.Fatalf("ub %d: %v -> %d, out of range", ub, tg, v)
					}
					if old, dup := seen[v]; dup {
						t.Fatalf("ub %d: %v and %v share tag %d", ub, old, tg, v)
					}
					seen[v] = tg
				}
			}
		}
		// The largest fields still fit.
		if v := l.tag(transport.Tag{Context: ^uint32(0), Seq: ^uint32(0), Round: ^uint32(0)}); v < 0 || v >= l.bye {
			t.Errorf("ub %d: all-ones tag -> %d", ub, v)
		}
	}
	if _, err := New(newSimWorld(2, 100)[0], Options{}); err == nil {
		t.Error("MPI_TAG_UB 100 accepted")
	}
}

// Wait calls Idle while it waits, so another transport keeps moving.
func TestIdleCalledWhileWaiting(t *testing.T) {
	comms := newSimWorld(2, 1<<31-1)
	var idles int
	ep, _ := New(comms[0], Options{Idle: func() {
		idles++
		if idles == 100 { // the peer sends only once we have idled a while
			comms[1].Isend([]byte{7}, 0, 5)
		}
	}})
	ops := []transport.Op{{Peer: 1, Tag: transport.Tag{Round: 5}, Buf: make([]byte, 1), Recv: true}}
	if err := ep.Start(ops); err != nil {
		t.Fatal(err)
	}
	if err := ep.Wait(ops); err != nil || ops[0].N != 1 || ops[0].Buf[0] != 7 || idles < 100 {
		t.Fatalf("got %v, %d bytes, %d idles", err, ops[0].N, idles)
	}
}
