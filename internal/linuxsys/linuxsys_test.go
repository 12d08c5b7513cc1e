//go:build linux

package linuxsys

import (
	"os"
	"runtime"
	"testing"
)

// CPUsOf the calling thread is what the runtime counted at start (the
// affinity mask), and the parent's is a count too.
func TestCPUsOf(t *testing.T) {
	if got, want := CPUsOf(0), runtime.NumCPU(); got != want {
		t.Errorf("CPUsOf(0) = %d, runtime.NumCPU() = %d", got, want)
	}
	if n := CPUsOf(os.Getppid()); n < 1 {
		t.Errorf("CPUsOf(parent) = %d", n)
	}
	if n := CPUsOf(-1); n != 0 {
		t.Errorf("CPUsOf(-1) = %d, want 0 (no such process)", n)
	}
}

// NodeCPUs counts at least the CPUs this process may run on.
func TestNodeCPUs(t *testing.T) {
	if n := NodeCPUs(); n < runtime.NumCPU() {
		t.Errorf("NodeCPUs() = %d < runtime.NumCPU() = %d", n, runtime.NumCPU())
	}
}
