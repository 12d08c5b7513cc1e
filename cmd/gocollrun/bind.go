package main

import (
	"os/exec"
	"runtime"
	"syscall"
	"unsafe"
)

// startPinned starts a rank's process; when ranks are pinned, the process
// inherits an affinity to one core: the forking thread takes that affinity
// for the fork (a child inherits its parent thread's mask, and every
// thread the child makes inherits it in turn), then gets its own back.
func (j *job) startPinned(cmd *exec.Cmd, r *rank) error {
	cpu, ok := j.coreFor(r)
	if !ok {
		return cmd.Start()
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var old cpuSet
	if getAffinity(&old) != nil {
		return cmd.Start()
	}
	var one cpuSet
	one.set(cpu)
	if setAffinity(&one) != nil {
		return cmd.Start()
	}
	err := cmd.Start()
	setAffinity(&old)
	return err
}

// coreFor returns the core local rank r is pinned to, if ranks are pinned.
func (j *job) coreFor(r *rank) (int, bool) {
	if !r.local || j.opts.bindTo == "none" {
		return 0, false
	}
	local, nth := 0, 0
	for _, q := range j.ranks {
		if q.local {
			if q.id < r.id {
				nth++
			}
			local++
		}
	}
	var cores cpuSet
	if getAffinity(&cores) != nil {
		return 0, false
	}
	allowed := cores.list()
	if len(allowed) == 0 || (j.opts.bindTo == "auto" && local > len(allowed)) {
		return 0, false
	}
	return allowed[nth%len(allowed)], true
}

// cpuSet is the kernel's cpu_set_t (1024 CPUs).
type cpuSet [16]uint64

func (s *cpuSet) set(cpu int) { s[cpu/64] |= 1 << (cpu % 64) }

func (s *cpuSet) list() []int {
	var out []int
	for i := range 1024 {
		if s[i/64]&(1<<(i%64)) != 0 {
			out = append(out, i)
		}
	}
	return out
}

func getAffinity(s *cpuSet) error {
	_, _, e := syscall.RawSyscall(syscall.SYS_SCHED_GETAFFINITY, 0, unsafe.Sizeof(*s), uintptr(unsafe.Pointer(s)))
	if e != 0 {
		return e
	}
	return nil
}

func setAffinity(s *cpuSet) error {
	_, _, e := syscall.RawSyscall(syscall.SYS_SCHED_SETAFFINITY, 0, unsafe.Sizeof(*s), uintptr(unsafe.Pointer(s)))
	if e != 0 {
		return e
	}
	return nil
}
