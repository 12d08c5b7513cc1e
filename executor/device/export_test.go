package device

import "time"

// SetMaxIdle sets how long an unused IPC mapping stays open, for a test;
// the returned function restores it.
func SetMaxIdle(d time.Duration) (restore func()) {
	old := maxIdle
	maxIdle = d
	return func() { maxIdle = old }
}

// SetClock makes the IPC mapping policy read the time from now, for a
// test; the returned function restores it.
func SetClock(now func() time.Time) (restore func()) {
	old := clock
	clock = now
	return func() { clock = old }
}
