//go:build linux

package intranode

import (
	"errors"
	"fmt"
	"runtime"
	"syscall"
	"unsafe"

	"github.com/gocoll/gocoll/internal/linuxsys"
)

// Cross-memory attach (CMA): a rank reads a peer's block straight from
// the peer's buffer with process_vm_readv(2), one copy instead of two
// through the segment. See Allgather for when, and the README's shm
// section for the measurements behind it.

// CMAMin is the default cmaMin, the longest block in bytes from which
// Allgather reads peers' blocks with CMA instead of copying them through
// the slots; CMAMinCrowded where there are more ranks than cores. Below
// them the copy's one step per slot beats CMA's two steps and system
// calls (see the README's shm section for the measurements).
const (
	CMAMin        = 32 << 10
	CMAMinCrowded = 1 << 20
)

// cmaProbe is the word each rank reads from every peer at Attach to learn
// whether process_vm_readv works between them.
var cmaProbe uint64 = 0x6a09e667f3bcc908

// vmRead copies len(dst) bytes at address src of process pid into dst.
// refuseCMA stands in for a kernel that refuses CMA (tests).
func (g *Group) vmRead(pid int, dst []byte, src uintptr) error {
	if g.refuseCMA {
		return syscall.ENOSYS
	}
	return linuxsys.VMRead(pid, dst, src, &g.iov)
}

// probeCMA reads every peer's probe word; it returns nil if all reads
// succeed and return the word.
func (g *Group) probeCMA() error {
	var word [8]byte
	for q := range g.p {
		if q == g.rank {
			continue
		}
		if err := g.vmRead(g.pids[q], word[:], uintptr(g.ctl[q].addr.Load())); err != nil {
			return fmt.Errorf("process_vm_readv from rank %d: %w", q, err)
		}
		if *(*uint64)(unsafe.Pointer(&word)) != cmaProbe {
			return fmt.Errorf("process_vm_readv from rank %d read the wrong word", q)
		}
	}
	return nil
}

// CMA reports whether Allgather may read peers' blocks with
// process_vm_readv, and if not, why.
func (g *Group) CMA() (bool, error) { return g.cma, g.cmaErr }

// allgatherCMA is Allgather by CMA: every rank publishes the address of
// its block (in) and the step; once all have, each reads every peer's
// block straight into out, and publishes one more step: done reading. It
// returns only when every rank has, so that no rank's block changes (the
// caller may reuse in) while a peer still reads it.
func (g *Group) allgatherCMA(in, out []byte, counts, displ []int, elem int) error {
	if len(in) > 0 {
		g.ctl[g.rank].addr.Store(uint64(uintptr(unsafe.Pointer(&in[0]))))
	}
	g.publish()
	own := out[displ[g.rank]*elem : (displ[g.rank]+counts[g.rank])*elem]
	if len(in) > 0 && &own[0] != &in[0] {
		copy(own, in) // while the others arrive
	}
	if err := g.waitAll(); err != nil {
		return err
	}
	var failed error
	for i := 1; i < g.p; i++ {
		q := (g.rank + i) % g.p // not everyone from rank 0 first
		n := counts[q] * elem
		if n == 0 {
			continue
		}
		dst := out[displ[q]*elem : displ[q]*elem+n]
		if err := g.vmRead(g.pids[q], dst, uintptr(g.ctl[q].addr.Load())); err != nil {
			failed = g.readFailed(q, err)
			break
		}
	}
	// Done reading (or given up): the peers may return.
	g.publish()
	err := g.waitAll()
	runtime.KeepAlive(in)
	if failed != nil {
		return failed
	}
	return err
}

// readFailed is the error for a failed read of rank q's block: q's death
// (ESRCH, or q gone by the time we look) blames q, as waitAll would.
func (g *Group) readFailed(q int, err error) error {
	if errors.Is(err, syscall.ESRCH) || linuxsys.Exited(g.pidfds[q], g.pids[q]) {
		return g.giveUp(g.explained(q))
	}
	return fmt.Errorf("intranode: allgather: process_vm_readv from rank %d: %w", q, err)
}
