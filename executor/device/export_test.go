package device

import (
	"io"
	"time"

	"github.com/gocoll/gocoll/gpu"
)

// SetWarnOutput sends the executor's warnings to w until restore is
// called, and forgets which runtimes have warned.
func SetWarnOutput(w io.Writer) (restore func()) {
	warnMu.Lock()
	old := warnOutput
	warnOutput, warned = w, map[*gpu.Runtime]bool{}
	warnMu.Unlock()
	return func() {
		warnMu.Lock()
		warnOutput = old
		warnMu.Unlock()
	}
}

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

// Runtime returns the executor's runtime.
func (x *Executor) Runtime() *gpu.Runtime { return x.rt }
