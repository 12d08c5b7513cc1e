//go:build linux

// Package engine is the C half of gocoll's shared-memory collective
// engine; package intranode is the Go half. The C half (engine.c,
// engine.h) runs small allreduce, reduce_scatter (with counts and
// _block), allgather (any predefined datatype: it is a copy), bcast and
// barrier on a communicator's segment without entering Go, for callers
// in C that cannot afford to enter it (capi/fast.c, the C ABI's entry
// points). It takes one step of the Go half's protocol per call, with the
// Go half's layout for a message that fits one step.
//
// Its constants (the segment's layout, element kinds, op codes, call
// numbers, and the MPICH ABI's handle tables) are generated from the Go
// packages that define them into engine_gen.h:
//
//	go generate ./intranode/engine
//
// and gen's test fails while the committed header differs from what the
// generator writes. Importing this package links the C half into the
// binary; the Go in it is test support.
package engine

//go:generate go run ./gen -o engine_gen.h

/*
#cgo CFLAGS: -O2
#include "engine.h"
#include "kernels.h"
*/
import "C"

import (
	"unsafe"

	"github.com/gocoll/gocoll/intranode"
	"github.com/gocoll/gocoll/ops"
)

// Decline is what a C call returns when it is not one for the engine.
const Decline = C.GOCOLL_SHM_DECLINE

// Attachable says whether the C half, as built, can run calls on segment
// l: it must have the layout engine_gen.h describes (a stale header
// would not). crowded is l.Crowded as the C half takes it, 0 or 1.
// It also caps the C half's kernels at package ops' level (SetISA), which
// the front ends set from GOCOLL_OPS_ISA before they attach a segment.
func Attachable(l intranode.Layout) (crowded int, ok bool) {
	SetISA(ops.ISA())
	if l.BellOffset != C.GOCOLL_SHM_BELL_OFFSET || l.CtlOffset != C.GOCOLL_SHM_CTL_OFFSET {
		return 0, false
	}
	if l.Crowded {
		crowded = 1
	}
	return crowded, true
}

// view is one rank's C view of a group's segment (tests drive the C half
// through it, beside the Go half's calls on the same segment).
type view struct{ s C.struct_gocoll_shm }

func newView(l intranode.Layout) *view {
	v := new(view)
	crowded := 0
	if l.Crowded {
		crowded = 1
	}
	C.gocoll_shm_init(&v.s, l.Base, C.int(l.P), C.int(l.Rank), C.long(l.Slot), C.long(l.DataOffset), C.int(crowded), nil, 0)
	return v
}

func ptr(b []byte) unsafe.Pointer {
	if b == nil {
		return nil
	}
	return unsafe.Pointer(unsafe.SliceData(b))
}

// mpichType is the generated table's size and kind of an MPICH handle.
func mpichType(h uint32) (size, kind int) {
	var k C.int
	size = int(C.gocoll_mpich_type(C.uint(h), &k))
	return size, int(k)
}

// typeKind is the generated table's kind of one of gocoll's datatypes.
func typeKind(t int) int { return int(C.gocoll_shm_kind(C.int(t))) }

// mpichOp is the generated table's op code of an MPICH handle.
func mpichOp(h uint32) int { return int(C.gocoll_mpich_op(C.uint(h))) }

func (v *view) allreduce(in, out []byte, count, kind, size, op int) int {
	return int(C.gocoll_shm_allreduce(&v.s, ptr(in), ptr(out), C.long(count), C.int(kind), C.int(size), C.int(op)))
}

func (v *view) reduceScatter(in, out []byte, counts []int32, count, kind, size, op int) int {
	var c *C.int
	if counts != nil {
		c = (*C.int)(unsafe.Pointer(unsafe.SliceData(counts)))
	}
	return int(C.gocoll_shm_reduce_scatter(&v.s, ptr(in), ptr(out), c, C.long(count), C.int(kind), C.int(size), C.int(op),
		C.GOCOLL_CALL_REDUCE_SCATTER))
}

func (v *view) allgather(in, out []byte, bytes int) int {
	return int(C.gocoll_shm_allgather(&v.s, ptr(in), ptr(out), C.long(bytes)))
}

func (v *view) bcast(buf []byte, root int) int {
	return int(C.gocoll_shm_bcast(&v.s, ptr(buf), C.long(len(buf)), C.int(root)))
}

func (v *view) barrier() int { return int(C.gocoll_shm_barrier(&v.s)) }

// combineAt applies op (a C op code) to n elements of kind k with the C
// kernels of one level (ops' name; tests).
func combineAt(level string, k, op int, dst, a, b []byte, n int) {
	C.gocoll_shm_combine_at(isaLevels[level], C.int(k), C.int(op), ptr(dst), ptr(a), ptr(b), C.long(n))
}

// isaLevels are the C kernels' levels by package ops' names (ops.ISA):
// "go" is the x86-64 baseline there, as Go's own code.
var isaLevels = map[string]C.int{"go": C.GOCOLL_ISA_BASE, "avx2": C.GOCOLL_ISA_AVX2, "avx512": C.GOCOLL_ISA_AVX512}

// SetISA caps the C half's kernels at level, one of package ops' names
// ("go", "avx2", "avx512"; anything else: the best), and returns the
// level they use: the lower of the cap and what the CPU supports.
// Attachable passes on ops.ISA(), so that GOCOLL_OPS_ISA caps both halves.
func SetISA(level string) string {
	l, ok := isaLevels[level]
	if !ok {
		l = C.GOCOLL_NUM_ISAS
	}
	return isaName(C.gocoll_shm_set_isa(l))
}

// ISA returns the level of the C half's kernels.
func ISA() string { return isaName(C.gocoll_shm_isa()) }

func isaName(l C.int) string {
	for name, v := range isaLevels {
		if v == l {
			return name
		}
	}
	return "go"
}

// SetCanonical makes the C half combine contributions in the canonical
// association of reproducible mode (on) or left to right, as the Go half
// does for a call that is not reproducible (off, the default). Callers in
// C set it once, from GOCOLL_REPRODUCIBLE, before their first call.
func SetCanonical(on bool) {
	C.gocoll_shm_canonical = 0
	if on {
		C.gocoll_shm_canonical = 1
	}
}
