// Package intranodetest is an intranode.Exchange between the goroutine
// ranks of one test process, for the tests of package intranode and of its
// C half (intranode/engine), which attach goroutines to one segment.
package intranodetest

import "sync"

// Exchange is shared by a test's p ranks; Rank(r) is rank r's side of it.
type Exchange struct {
	mu      sync.Mutex
	cond    *sync.Cond
	p       int
	arrived int
	gen     int
	buf     []byte
	all     bool // the answer of the last AllTrue
	acc     bool // the answer of this one so far
}

// NewExchange returns an exchange between p ranks.
func NewExchange(p int) *Exchange {
	x := &Exchange{p: p, acc: true}
	x.cond = sync.NewCond(&x.mu)
	return x
}

// Rank is rank r's side of x: an intranode.Exchange.
func (x *Exchange) Rank(r int) Rank { return Rank{x, r} }

// barrier runs f (under the lock) on every rank, then waits for all.
func (x *Exchange) barrier(f func()) {
	x.mu.Lock()
	defer x.mu.Unlock()
	f()
	gen := x.gen
	x.arrived++
	if x.arrived == x.p {
		x.arrived, x.gen = 0, x.gen+1
		x.cond.Broadcast()
		return
	}
	for gen == x.gen {
		x.cond.Wait()
	}
}

// Rank is one rank's side of an Exchange.
type Rank struct {
	x    *Exchange
	rank int
}

// Bcast copies buf from rank 0 to every rank.
func (r Rank) Bcast(buf []byte) error {
	r.x.barrier(func() {
		if r.rank == 0 {
			r.x.buf = append([]byte(nil), buf...)
		}
	})
	copy(buf, r.x.buf)
	r.x.barrier(func() {})
	return nil
}

// AllTrue returns whether ok is true on every rank.
func (r Rank) AllTrue(ok bool) (bool, error) {
	// The last to arrive sets the answer and starts the next round: a
	// rank reads the answer before it can arrive at the next barrier, and
	// that barrier cannot end before it does.
	r.x.barrier(func() {
		r.x.acc = r.x.acc && ok
		if r.x.arrived == r.x.p-1 {
			r.x.all, r.x.acc = r.x.acc, true
		}
	})
	return r.x.all, nil
}
