//go:build !unix

package tcp

import "syscall"

// Without a raw write, every inline attempt writes nothing and the writer
// goroutine sends the frame.
func rawWrite(fd uintptr, b []byte) (int, error) { return 0, syscall.EAGAIN }
