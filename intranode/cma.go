//go:build linux

package intranode

import (
	"errors"
	"fmt"
	"syscall"
	"unsafe"

	"github.com/gocoll/gocoll/internal/linuxsys"
)

// Cross-memory attach (CMA): a rank reads a peer's block straight from
// the peer's buffer with process_vm_readv(2), one copy instead of two
// through the segment. See Allgather for when, and docs/tuning.md
// ("Why CMA and where") for the measurements behind it.

// CMAMin is the default cmaMin, the longest block in bytes from which
// Allgather reads peers' blocks with CMA instead of copying them through
// the slots; CMAMinCrowded where there are more ranks than cores. Below
// them the copy's one step per slot beats CMA's two steps and system
// calls (see docs/tuning.md, "Why CMA and where", for the measurements).
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

// CMAMin returns the shortest block Allgather reads with CMA (longer
// ones too), or 0 if it never does.
func (g *Group) CMAMin() int {
	if !g.cma || g.p == 1 {
		return 0
	}
	return g.cmaMin
}

// Allgather by CMA (Call's allgatherCMA) is two steps: every rank
// publishes the address of its block (in) and the step; once all have,
// each reads every peer's block straight into out, and publishes one more
// step: done reading. The call ends only when every rank has, so that no
// rank's block changes (the caller may reuse in) while a peer still
// reads it.

// copyOwn copies this rank's block into out, unless it is there.
func (c *Call) copyOwn() {
	own := c.out[c.displ[c.g.rank]*c.elem : (c.displ[c.g.rank]+c.counts[c.g.rank])*c.elem]
	if len(c.in) > 0 && &own[0] != &c.in[0] {
		move(own, c.in)
	}
}

// readPeers reads every peer's block into out that early has not read
// (readBlock).
func (c *Call) readPeers() {
	g := c.g
	for i := 1; i < g.p; i++ {
		if q := (g.rank + i) % g.p; !g.got[q] { // not everyone from rank 0 first
			c.readBlock(q)
		}
	}
}

// readFailed is the error for a failed read of rank q's block: q's death
// (ESRCH, or q gone by the time we look) blames q, as waitAll would.
func (g *Group) readFailed(q int, err error) error {
	if errors.Is(err, syscall.ESRCH) || linuxsys.Exited(g.pidfds[q], g.pids[q]) {
		return g.giveUp(g.explained(q))
	}
	return fmt.Errorf("intranode: allgather: process_vm_readv from rank %d: %w", q, err)
}
