package pmi

import (
	"sync"

	"github.com/gocoll/gocoll/bootstrap"
)

// ledger is what a client (PMI-1 or PMI-2) counts: its requests, for
// Traffic, and its Allgathers, whose number names their keys. It has a
// lock of its own, so that counting never waits for a request in
// progress.
type ledger struct {
	mu      sync.Mutex
	gen     int
	traffic bootstrap.Traffic
}

// Traffic is what this rank has asked of the server so far.
func (l *ledger) Traffic() bootstrap.Traffic {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.traffic
}

func (l *ledger) count(f func(*bootstrap.Traffic)) {
	l.mu.Lock()
	f(&l.traffic)
	l.mu.Unlock()
}

// nextGen numbers an Allgather.
func (l *ledger) nextGen() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.gen++
	return l.gen - 1
}
