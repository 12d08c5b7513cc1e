//go:build linux && !amd64 && !arm64

package shm

// sysProcessVMReadv is unknown here: large messages take the copy path.
const sysProcessVMReadv = -1
