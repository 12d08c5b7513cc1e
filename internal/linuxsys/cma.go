//go:build linux

package linuxsys

import (
	"runtime"
	"syscall"
	"unsafe"
)

// Cross-memory attach (CMA): process_vm_readv(2), one copy from another
// process's memory into ours, used by the shm transport and the intranode
// allgather for large blocks.

// sysProcessVMReadv is process_vm_readv's number, -1 where unknown (the
// callers' copy paths then serve every call).
var sysProcessVMReadv = map[string]int{"amd64": 310, "arm64": 270}[runtime.GOARCH]

func init() {
	if sysProcessVMReadv == 0 {
		sysProcessVMReadv = -1
	}
}

const prSetPtracer = 0x59616d61 // PR_SET_PTRACER ("Yama")

// AllowPtraceAny lets any process of this user read this one, which
// process_vm_readv needs under Yama's ptrace_scope=1 (ranks are siblings,
// not descendants of one another). Without Yama it fails harmlessly.
func AllowPtraceAny() {
	syscall.RawSyscall6(syscall.SYS_PRCTL, prSetPtracer, ^uintptr(0), 0, 0, 0, 0)
}

// IOVec is struct iovec. Its base is a uintptr: for the remote side it is
// an address in another process, which must not look like a Go pointer.
// The local side's buffer is kept alive by the caller.
type IOVec struct {
	base uintptr
	len  uintptr
}

// VMRead copies len(dst) bytes at address src of process pid into dst,
// looping over partial reads; iov is the caller's (so the call allocates
// nothing). ENOSYS where the system call's number is unknown.
func VMRead(pid int, dst []byte, src uintptr, iov *[2]IOVec) error {
	if sysProcessVMReadv < 0 {
		return syscall.ENOSYS
	}
	for len(dst) > 0 {
		iov[0] = IOVec{base: uintptr(unsafe.Pointer(&dst[0])), len: uintptr(len(dst))}
		iov[1] = IOVec{base: src, len: uintptr(len(dst))}
		n, _, errno := syscall.Syscall6(uintptr(sysProcessVMReadv), uintptr(pid),
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
