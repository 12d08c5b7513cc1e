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
