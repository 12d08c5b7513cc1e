package coll

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gocoll/gocoll/internal/pause"
)

// progressLoop knows the communicators with requests in flight, so
// that any gocoll call, or the progress goroutine (run), can move them
// all.
type progressLoop struct {
	mu    sync.Mutex
	list  []*Comm
	comms atomic.Int32 // len(list), read without the lock
	// waiters counts the goroutines in Request.wait, which move every
	// request themselves: the progress goroutine stands aside meanwhile
	// rather than contend with them for the communicators and the cores.
	waiters atomic.Int32
	wake    chan struct{}
	thread  sync.Once
}

// processLoop is the process's: every communicator of a process shares
// it (tests that run ranks as goroutines give each its own: OwnProgress).
var processLoop = newProgressLoop()

func newProgressLoop() *progressLoop { return &progressLoop{wake: make(chan struct{}, 1)} }

func (e *progressLoop) add(c *Comm) {
	e.mu.Lock()
	e.list = append(e.list, c)
	e.comms.Store(int32(len(e.list)))
	e.mu.Unlock()
	if c.cfg.ProgressThread {
		e.thread.Do(func() { go e.run() })
		select {
		case e.wake <- struct{}{}:
		default:
		}
	}
}

func (e *progressLoop) remove(c *Comm) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i, x := range e.list {
		if x == c {
			e.list = append(e.list[:i], e.list[i+1:]...)
			break
		}
	}
	e.comms.Store(int32(len(e.list)))
}

// progressAll moves every communicator's requests; it reports whether
// anything moved.
func (e *progressLoop) progressAll() bool {
	if e.comms.Load() == 0 {
		return false
	}
	e.mu.Lock()
	list := append([]*Comm(nil), e.list...)
	e.mu.Unlock()
	moved := false
	for _, c := range list {
		if c.progress() {
			moved = true
		}
	}
	return moved
}

// spinRounds is how many idle rounds the progress goroutine polls before
// it starts to sleep: a peer's step typically comes within microseconds,
// and a sleep costs tens (the kernel's timer slack).
const spinRounds = 32

// run is the progress goroutine (GOCOLL_PROGRESS_THREAD=1): while
// requests are in flight it moves them, polling at once while they move
// and backing off to short sleeps while they wait for peers; with none in
// flight it sleeps until one starts.
func (e *progressLoop) run() {
	idle := 0
	for {
		if e.comms.Load() == 0 {
			<-e.wake
			idle = 0
			continue
		}
		if e.waiters.Load() > 0 {
			pause.For(50 * time.Microsecond)
			continue
		}
		if e.progressAll() {
			idle = 0
			continue
		}
		idle++
		switch {
		case idle < spinRounds:
			runtime.Gosched()
		default:
			pause.For(time.Duration(min(idle-spinRounds, 200)) * time.Microsecond / 4)
		}
	}
}

// Progress moves every request in flight on; gocoll calls that do not
// otherwise move them (point-to-point) call it.
func Progress() { processLoop.progressAll() }

// InFlight reports whether any communicator of the process has requests
// in flight: a blocking point-to-point call then moves them while it
// waits (Progress), as MPI's progress rule asks.
func InFlight() bool { return processLoop.comms.Load() > 0 }

// patience paces a waiter that moves several communicators' requests in
// turn: it yields, then sleeps briefly, while nothing moves; once nothing
// has moved for the communicator's timeout it says so, and the waiter
// finishes its own call with the transport's blocking wait, whose timeout
// names the peer that does not answer: a stall ends in an error, never a
// hang.
type patience struct {
	b     pause.Backoff
	since time.Time
}

func (p *patience) moved() { p.b.Reset() }

// stalled backs off once and reports whether nothing has moved for
// timeout (0: never).
func (p *patience) stalled(timeout time.Duration) bool {
	if p.b.Rounds() == 0 {
		p.since = time.Now()
	}
	p.b.Idle()
	return timeout > 0 && p.b.Rounds()%256 == 0 && time.Since(p.since) > timeout
}
