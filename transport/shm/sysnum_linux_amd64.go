//go:build linux

package shm

const sysProcessVMReadv = 310
