//go:build linux

// Package linuxsys holds the few Linux system calls gocoll's shared-memory
// code needs and the standard library does not wrap: futexes on shared
// memory, pidfds and process liveness, sched_yield, a process's CPU
// affinity, process_vm_readv (cma.go). Each is a thin shim; callers decide what an error means.
package linuxsys

import (
	"math/bits"
	"os"
	"runtime"
	"syscall"
	"time"
	"unsafe"
)

const (
	futexWait = 0 // FUTEX_WAIT, the shared variant: the word is in a MAP_SHARED segment
	futexWake = 1 // FUTEX_WAKE, shared

	sysPidfdOpen = 434 // pidfd_open(2), the same number on every architecture
)

// FutexSleep blocks while *addr == val, for at most d (d <= 0: no limit).
// It returns on a wake, a timeout, a signal, or at once if *addr != val.
func FutexSleep(addr *uint32, val uint32, d time.Duration) {
	var ts syscall.Timespec
	var tsp uintptr
	if d > 0 {
		ts = syscall.NsecToTimespec(int64(d))
		tsp = uintptr(unsafe.Pointer(&ts))
	}
	syscall.Syscall6(syscall.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWait, uintptr(val), tsp, 0, 0)
}

// FutexWakeAll wakes every thread, in any process, sleeping on addr.
func FutexWakeAll(addr *uint32) {
	syscall.Syscall6(syscall.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWake, uintptr(1<<31-1), 0, 0, 0)
}

const madvPopulateWrite = 23 // MADV_POPULATE_WRITE, Linux 5.14

// Populate maps every page of mem (a MAP_SHARED mapping) writable now,
// allocating those no process has touched, without changing their
// contents, so that later accesses take no page faults. An older kernel
// refuses (EINVAL): then pages come on first touch, as without it.
func Populate(mem []byte) error {
	if len(mem) == 0 {
		return nil
	}
	_, _, errno := syscall.Syscall(syscall.SYS_MADVISE, uintptr(unsafe.Pointer(&mem[0])), uintptr(len(mem)), madvPopulateWrite)
	if errno != 0 {
		return errno
	}
	return nil
}

// PidfdOpen returns a pidfd for pid, or -1 if the kernel has none.
func PidfdOpen(pid int) int {
	fd, _, errno := syscall.Syscall(sysPidfdOpen, uintptr(pid), 0, 0)
	if errno != 0 {
		return -1
	}
	syscall.CloseOnExec(int(fd))
	return int(fd)
}

type pollFd struct {
	fd      int32
	events  int16
	revents int16
}

const pollIn = 0x1

// Exited reports whether the process behind pidfd (or pid, when there is
// no pidfd) has exited. A zombie counts as exited through a pidfd, but not
// through kill(pid, 0).
func Exited(pidfd, pid int) bool {
	if pidfd >= 0 {
		p := pollFd{fd: int32(pidfd), events: pollIn}
		var ts syscall.Timespec // zero: do not block
		n, _, errno := syscall.Syscall6(syscall.SYS_PPOLL, uintptr(unsafe.Pointer(&p)), 1, uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
		return errno == 0 && n == 1 && p.revents != 0
	}
	return syscall.Kill(pid, 0) == syscall.ESRCH
}

// SchedYield gives the core to another runnable thread, if any.
func SchedYield() { syscall.Syscall(syscall.SYS_SCHED_YIELD, 0, 0, 0) }

// CPUsOf returns how many CPUs process pid may run on (sched_getaffinity;
// pid 0: the calling thread), or 0 where the kernel does not say.
func CPUsOf(pid int) int {
	var mask [128]uint64 // 8192 CPUs
	n, _, errno := syscall.RawSyscall(syscall.SYS_SCHED_GETAFFINITY, uintptr(pid), unsafe.Sizeof(mask), uintptr(unsafe.Pointer(&mask[0])))
	if errno != 0 {
		return 0
	}
	cpus := 0
	for _, w := range mask[:min(int(n)/8, len(mask))] {
		cpus += bits.OnesCount64(w)
	}
	return cpus
}

// NodeCPUs is the number of CPUs a node's ranks share, against which
// shared-memory code decides whether they are crowded (more local ranks
// than CPUs: a waiting rank gives its core away at once): the CPUs this
// process may run on or, if more, those its parent may, the launcher's
// daemon (orted, hydra's proxy, slurmstepd, a shell), which binding
// policies leave unpinned. So two ranks Open MPI pins to a core each are
// not crowded (runtime.NumCPU alone said 1 CPU each, and their waits
// yielded at every poll for nothing), while ranks pinned together, as
// by taskset around the launcher, or in a container's cpuset, still are.
func NodeCPUs() int { return max(runtime.NumCPU(), CPUsOf(os.Getppid())) }
