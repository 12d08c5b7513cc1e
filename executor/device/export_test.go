package device

import "time"

// SetMaxIdle sets how long an unused IPC mapping stays open, for a test;
// the returned function restores it.
func SetMaxIdle(d time.Duration) (restore func()) {
	old := maxIdle
	maxIdle = d
	return func() { maxIdle = old }
}
