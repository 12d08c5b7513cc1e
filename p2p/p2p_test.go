package p2p_test

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gocoll/gocoll/p2p"
	"github.com/gocoll/gocoll/transport/inproc"
)

// run runs f on n ranks, each with its own hub over an in-process job and
// a world communicator of context 1.
func run(t *testing.T, n int, f func(c *p2p.Comm, rank int) error) {
	t.Helper()
	eps := inproc.New(n)
	ranks := make([]int, n)
	for i := range ranks {
		ranks[i] = i
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = f(p2p.NewHub(eps[r]).Comm(1, ranks, r), r)
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("hang")
	}
	for _, ep := range eps {
		ep.Close()
	}
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

func send(c *p2p.Comm, buf []byte, dest, tag int) error {
	r, err := c.Isend(buf, dest, tag)
	if err != nil {
		return err
	}
	_, err = r.Wait()
	return err
}

func recv(c *p2p.Comm, buf []byte, src, tag int) (p2p.Status, error) {
	r, err := c.Irecv(buf, src, tag)
	if err != nil {
		return p2p.Status{}, err
	}
	return r.Wait()
}

func payload(n, seed int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*13 + seed)
	}
	return b
}

func TestPingPongSizes(t *testing.T) {
	run(t, 2, func(c *p2p.Comm, r int) error {
		for _, n := range []int{0, 1, p2p.Eager, p2p.Eager + 1, 1 << 20} {
			if r == 0 {
				if err := send(c, payload(n, 1), 1, 7); err != nil {
					return err
				}
				got := make([]byte, n)
				if st, err := recv(c, got, 1, 8); err != nil || st.Count != n || !bytes.Equal(got, payload(n, 2)) {
					return fmt.Errorf("size %d: pong %v %v", n, st, err)
				}
			} else {
				got := make([]byte, n)
				st, err := recv(c, got, 0, 7)
				if err != nil || st.Source != 0 || st.Tag != 7 || st.Count != n || !bytes.Equal(got, payload(n, 1)) {
					return fmt.Errorf("size %d: ping %+v %v", n, st, err)
				}
				if err := send(c, payload(n, 2), 0, 8); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// Rank 0 receives from any source, any tag: every message arrives once,
// with its source and tag in the status; messages from one sender arrive
// in the order sent.
func TestWildcardsAndOrder(t *testing.T) {
	const n, per = 5, 20
	run(t, n, func(c *p2p.Comm, r int) error {
		if r != 0 {
			for i := range per {
				size := []int{3, p2p.Eager + 100}[i%2]
				msg := payload(size, r*100+i)
				if err := send(c, msg, 0, r*1000+i); err != nil {
					return err
				}
			}
			return nil
		}
		next := make([]int, n)
		for range (n - 1) * per {
			buf := make([]byte, 2*p2p.Eager)
			st, err := recv(c, buf, p2p.AnySource, p2p.AnyTag)
			if err != nil {
				return err
			}
			i := next[st.Source]
			if st.Tag != st.Source*1000+i {
				return fmt.Errorf("from %d: tag %d, want %d (overtaken)", st.Source, st.Tag, st.Source*1000+i)
			}
			if !bytes.Equal(buf[:st.Count], payload(st.Count, st.Source*100+i)) {
				return fmt.Errorf("from %d message %d: wrong data", st.Source, i)
			}
			next[st.Source]++
		}
		return nil
	})
}

// A receive for a specific tag skips earlier messages with other tags.
func TestTagSelection(t *testing.T) {
	run(t, 2, func(c *p2p.Comm, r int) error {
		if r == 0 {
			for _, tag := range []int{1, 2, 3} {
				if err := send(c, []byte{byte(tag)}, 1, tag); err != nil {
					return err
				}
			}
			return nil
		}
		for _, tag := range []int{3, 1, 2} {
			b := make([]byte, 1)
			if st, err := recv(c, b, 0, tag); err != nil || b[0] != byte(tag) || st.Tag != tag {
				return fmt.Errorf("tag %d: got %v %v", tag, b, err)
			}
		}
		return nil
	})
}

func TestTruncationProcNullSelf(t *testing.T) {
	run(t, 2, func(c *p2p.Comm, r int) error {
		if r == 0 {
			if err := send(c, payload(100, 0), 1, 0); err != nil {
				return err
			}
			return send(c, payload(3*p2p.Eager, 0), 1, 1)
		}
		for tag, n := range []int{100, 3 * p2p.Eager} {
			b := make([]byte, 10)
			st, err := recv(c, b, 0, tag)
			if !errors.Is(err, p2p.ErrTruncate) || st.Count != 10 {
				return fmt.Errorf("%d bytes into 10: %+v %v", n, st, err)
			}
		}
		if st, err := recv(c, nil, p2p.ProcNull, 5); err != nil || st.Source != p2p.ProcNull {
			return fmt.Errorf("PROC_NULL receive: %+v %v", st, err)
		}
		if err := send(c, []byte{1}, p2p.ProcNull, 5); err != nil {
			return err
		}
		// To oneself, before and after the receive is posted.
		if err := send(c, payload(2*p2p.Eager, 9), 1, 4); err != nil {
			return err
		}
		b := make([]byte, 2*p2p.Eager)
		if st, err := recv(c, b, 1, 4); err != nil || st.Source != 1 || !bytes.Equal(b, payload(2*p2p.Eager, 9)) {
			return fmt.Errorf("self message: %+v %v", st, err)
		}
		return nil
	})
}

// Many outstanding nonblocking operations, completed with Test and Wait.
func TestManyOutstanding(t *testing.T) {
	const n = 4
	run(t, n, func(c *p2p.Comm, r int) error {
		var reqs []*p2p.Request
		bufs := make([][]byte, n)
		for q := range n {
			bufs[q] = make([]byte, 5000)
			req, err := c.Irecv(bufs[q], q, 9)
			if err != nil {
				return err
			}
			reqs = append(reqs, req)
		}
		for q := range n {
			req, err := c.Isend(payload(5000, r*n+q), q, 9)
			if err != nil {
				return err
			}
			reqs = append(reqs, req)
		}
		for pending := len(reqs); pending > 0; {
			pending = 0
			for _, req := range reqs {
				if done, _, err := req.Test(); err != nil {
					return err
				} else if !done {
					pending++
				}
			}
		}
		for q := range n {
			if !bytes.Equal(bufs[q], payload(5000, q*n+r)) {
				return fmt.Errorf("from %d: wrong data", q)
			}
		}
		return nil
	})
}
