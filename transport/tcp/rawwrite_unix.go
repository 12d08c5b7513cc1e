//go:build unix

package tcp

import "syscall"

func rawWrite(fd uintptr, b []byte) (int, error) { return syscall.Write(int(fd), b) }
