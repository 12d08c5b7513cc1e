//go:build linux

package shm

import (
	"syscall"
	"unsafe"
)

// System calls the standard library's syscall package does not wrap. Each
// is a thin shim; callers decide what an error means.

const (
	prSetPtracer = 0x59616d61 // PR_SET_PTRACER ("Yama")
)

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
