// Package pause sleeps for short times, for the backoff of loops that
// poll requests.
//
// time.Sleep of less than a millisecond takes about a millisecond when
// the Go runtime has nothing else to run: its timers wait in epoll, whose
// timeout counts whole milliseconds. A 20 µs backoff that way adds a
// millisecond of latency to every request that was waiting for a peer.
// A nanosleep system call sleeps for the time asked plus the kernel's
// timer slack (50 µs by default), on the calling thread only.
package pause

import (
	"runtime"
	"syscall"
	"time"
)

// For sleeps for about d: at least d, and under a millisecond plus the
// kernel's timer slack when d is.
func For(d time.Duration) {
	if d >= time.Millisecond {
		time.Sleep(d)
		return
	}
	ts := syscall.NsecToTimespec(int64(d))
	for syscall.Nanosleep(&ts, &ts) == syscall.EINTR {
	}
}

// Backoff paces a loop that polls for what a peer does: its first 64
// idle rounds yield the processor, the later ones sleep 20 µs each (For).
// The zero value is ready.
type Backoff struct{ idle int }

// Idle backs off after a round in which nothing moved.
func (b *Backoff) Idle() {
	if b.idle++; b.idle > 64 {
		For(20 * time.Microsecond)
	} else {
		runtime.Gosched()
	}
}

// Reset starts over after a round in which something moved.
func (b *Backoff) Reset() { b.idle = 0 }

// Rounds is the number of idle rounds since the last Reset.
func (b *Backoff) Rounds() int { return b.idle }
