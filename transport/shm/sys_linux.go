//go:build linux

package shm

import (
	"syscall"
	"time"
	"unsafe"
)

// System calls the standard library's syscall package does not wrap. Each
// is a thin shim; callers decide what an error means.

const (
	futexWait = 0 // FUTEX_WAIT, the shared variant: the word is in a MAP_SHARED segment
	futexWake = 1 // FUTEX_WAKE, shared

	prSetPtracer = 0x59616d61 // PR_SET_PTRACER ("Yama")

	sysPidfdOpen = 434 // pidfd_open(2), the same number on every architecture
)

// futexSleep blocks while *addr == val, for at most d (d <= 0: no limit).
// It returns on a wake, a timeout, a signal, or at once if *addr != val.
func futexSleep(addr *uint32, val uint32, d time.Duration) {
	var ts syscall.Timespec
	var tsp uintptr
	if d > 0 {
		ts = syscall.NsecToTimespec(int64(d))
		tsp = uintptr(unsafe.Pointer(&ts))
	}
	syscall.Syscall6(syscall.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWait, uintptr(val), tsp, 0, 0)
}

// futexWakeAll wakes every thread, in any process, sleeping on addr.
func futexWakeAll(addr *uint32) {
	syscall.Syscall6(syscall.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWake, uintptr(1<<31-1), 0, 0, 0)
}

// allowPtraceAny lets any process of this user attach to this one, which
// process_vm_readv needs under Yama's ptrace_scope=1 (siblings are not
// descendants of one another). Without Yama the call fails harmlessly.
func allowPtraceAny() {
	syscall.RawSyscall6(syscall.SYS_PRCTL, prSetPtracer, ^uintptr(0), 0, 0, 0, 0)
}

// iovec is struct iovec. Its base is a uintptr: for the remote side it
// is an address in another process, which must not look like a Go pointer.
// The local side's buffer is kept alive by the caller.
type iovec struct {
	base uintptr
	len  uintptr
}

// vmRead copies len(dst) bytes at address src of process pid into dst with
// process_vm_readv(2). It loops over partial reads.
func vmRead(pid int, dst []byte, src uintptr, iov *[2]iovec) error {
	nr := sysProcessVMReadv
	if nr < 0 {
		return syscall.ENOSYS
	}
	for len(dst) > 0 {
		iov[0] = iovec{base: uintptr(unsafe.Pointer(&dst[0])), len: uintptr(len(dst))}
		iov[1] = iovec{base: src, len: uintptr(len(dst))}
		n, _, errno := syscall.Syscall6(uintptr(nr), uintptr(pid),
			uintptr(unsafe.Pointer(&iov[0])), 1, uintptr(unsafe.Pointer(&iov[1])), 1, 0)
		if errno == syscall.EINTR {
			continue
		}
		if errno != 0 {
			return errno
		}
		if n == 0 {
			return syscall.EFAULT
		}
		dst = dst[n:]
		src += n
	}
	return nil
}

// pidfdOpen returns a pidfd for pid, or -1 if the kernel has none.
func pidfdOpen(pid int) int {
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

// exited reports whether the process behind pidfd (or pid, when there is
// no pidfd) has exited. A zombie counts as exited through a pidfd, but not
// through kill(pid, 0).
func exited(pidfd, pid int) bool {
	if pidfd >= 0 {
		p := pollFd{fd: int32(pidfd), events: pollIn}
		var ts syscall.Timespec // zero: do not block
		n, _, errno := syscall.Syscall6(syscall.SYS_PPOLL, uintptr(unsafe.Pointer(&p)), 1, uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
		return errno == 0 && n == 1 && p.revents != 0
	}
	return syscall.Kill(pid, 0) == syscall.ESRCH
}

// schedYield gives the core to another runnable thread, if any.
func schedYield() { syscall.Syscall(syscall.SYS_SCHED_YIELD, 0, 0, 0) }
