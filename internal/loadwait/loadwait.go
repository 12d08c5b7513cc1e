// Package loadwait makes the loading of a gocoll shared library wait until
// the library's Go runtime has started. libgocoll.so and
// libgocoll-preload.so import it for its constructor (wait.c).
//
// A Go c-shared library starts its runtime on a thread of its own from the
// library's initializer and returns at once, so the process's main runs
// while the runtime opens and closes files (/proc/self/cgroup, the cgroup
// CPU quota, transparent huge page sizes). Each gets the lowest free
// descriptor. A program that closes a standard descriptor and then reuses
// its number (dash runs `echo ... >&2` as close(1); dup2(2, 1); a daemon
// closes 0 and opens /dev/null) can have that number taken by the runtime
// in between, its dup2 replace the runtime's file, and the runtime's close
// then close the program's descriptor. Under LD_PRELOAD every process of a
// job, shells and launchers too, loads the library: a test rank's shell lost
// its standard error that way, about once in 150 runs on a loaded machine.
// Waiting in a constructor leaves no runtime start-up running beside main.
package loadwait

import "C"

// gocollLoadWait does nothing: calling it from C is what waits, since cgo
// holds a call into a shared library until its runtime and every package's
// init have run.
//
//export gocollLoadWait
func gocollLoadWait() {}
