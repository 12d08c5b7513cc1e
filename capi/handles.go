package main

/*
#include "mpi.h"
void gocoll_call_user_fn(void *fn, void *in, void *inout, int len, MPI_Datatype dt);
*/
import "C"

import (
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/gocoll/gocoll/coll"
	"github.com/gocoll/gocoll/mpierr"
	"github.com/gocoll/gocoll/ops"
	"github.com/gocoll/gocoll/ops/mpichabi"
	"github.com/gocoll/gocoll/p2p"
)

// Handle values of the MPICH ABI for the predefined objects, and the
// ranges gocoll hands out for the ones users create.
const (
	commNull   = 0x04000000
	commWorld  = 0x44000000
	commSelf   = 0x44000001
	commFirst  = 0x84000000 // user communicators: commFirst + i
	typeNull   = 0x0c000000
	typeFirst  = 0x8c000100 // derived datatypes
	opNull     = 0x18000000
	opFirst    = 0x98000000 // user ops
	reqNull    = 0x2c000000
	reqFirst   = 0xac000000 // requests
	errFatal   = 0x54000000
	errReturn  = 0x54000001
	errAbort   = 0x54000003
	inPlaceInt = ^uintptr(0) // MPI_IN_PLACE is (void*)-1
)

// builtinTypes and builtinOps map the MPICH-ABI handles of gocoll's
// mpi.h to gocoll's datatypes and ops.
var (
	builtinTypes = mpichabi.Types
	builtinOps   = mpichabi.Ops
)

// datatype is a decoded datatype handle: count elements of base, in a row.
type datatype struct {
	base      ops.Type
	count     int // base elements per element (1 for predefined types)
	committed bool
	handle    C.MPI_Datatype
}

func (d *datatype) size() int { return d.base.Size() * d.count }

// userOp is an op made with MPI_Op_create.
type userOp struct {
	fn          unsafe.Pointer // the C (or Fortran) function
	commutative bool
}

// commEntry is a communicator handle's state.
type commEntry struct {
	c      *coll.Comm
	p2p    *p2p.Comm
	errh   C.MPI_Errhandler
	handle C.MPI_Comm
}

// request is an MPI_Request's state: a point-to-point request (r) or a
// collective one (cr, requests.go).
type request struct {
	r    *p2p.Request
	cr   *coll.Request
	comm *commEntry
	elem int  // datatype size, for the status count
	held bool // an active collective request holds off the C fast path
}

// table hands out handles for user objects.
type table[T any] struct {
	first uint32
	items map[uint32]T
	next  uint32
	free  []uint32
}

func (t *table[T]) add(v T) uint32 {
	if t.items == nil {
		t.items = map[uint32]T{}
	}
	var h uint32
	if n := len(t.free); n > 0 {
		h, t.free = t.free[n-1], t.free[:n-1]
	} else {
		h = t.first + t.next
		t.next++
	}
	t.items[h] = v
	return h
}

func (t *table[T]) get(h uint32) (T, bool) {
	v, ok := t.items[h]
	return v, ok
}

// remove frees handle h for reuse; false if h is not in the table, which
// is left unchanged (so a handle is never on the free list twice).
func (t *table[T]) remove(h uint32) bool {
	if _, ok := t.items[h]; !ok {
		return false
	}
	delete(t.items, h)
	t.free = append(t.free, h)
	return true
}

// state is everything the library keeps between calls.
var state struct {
	sync.Mutex
	comms    table[*commEntry]
	types    table[*datatype]
	userOps  table[*userOp]
	requests table[*request]
}

func init() {
	state.comms.first = commFirst
	state.types.first = typeFirst
	state.userOps.first = opFirst
	state.requests.first = reqFirst
}

// predefined holds a datatype value for each predefined handle, indexed by
// predefinedIndex (unique among them), so that the common case needs no
// map and no allocation.
var predefined [512]*datatype

// predefinedIndex is the low byte of a handle, plus 256 for the pair
// types (0x8c...), whose low bytes repeat the others'.
func predefinedIndex(h uint32) uint32 { return h>>31<<8 | h&0xff }

func init() {
	for h, t := range builtinTypes {
		i := predefinedIndex(h)
		if predefined[i] != nil {
			panic("capi: two predefined datatypes share a low byte")
		}
		predefined[i] = &datatype{base: t, count: 1, committed: true, handle: C.MPI_Datatype(h)}
	}
}

// lookupType decodes a datatype handle; uncommitted derived types are
// refused for communication.
func lookupType(call string, h C.MPI_Datatype) (*datatype, error) {
	key := uint32(h)
	if d := predefined[predefinedIndex(key)]; d != nil && uint32(d.handle) == key {
		return d, nil
	}
	state.Lock()
	d, ok := state.types.get(key)
	state.Unlock()
	switch {
	case !ok:
		return nil, mpierr.New(call, mpierr.Type, "invalid datatype (handle %#x)", key)
	case !d.committed:
		return nil, mpierr.New(call, mpierr.Type, "datatype %#x is not committed (call MPI_Type_commit)", key)
	}
	return d, nil
}

// lookupOp decodes an op handle into coll's op for datatype d.
func lookupOp(call string, h C.MPI_Op, d *datatype) (coll.Op, error) {
	key := uint32(h)
	if key > 0x58000000 && key <= 0x5800000c { // the predefined ops, MPI_MAX..MPI_MAXLOC
		return coll.Op{Builtin: builtinOps[key]}, nil
	}
	state.Lock()
	u, ok := state.userOps.get(key)
	state.Unlock()
	if !ok {
		if key == opNull {
			return coll.Op{}, mpierr.New(call, mpierr.Op, "invalid op MPI_OP_NULL")
		}
		if key == 0x5800000d || key == 0x5800000e {
			return coll.Op{}, mpierr.New(call, mpierr.Op, "MPI_REPLACE and MPI_NO_OP are for one-sided calls only")
		}
		return coll.Op{}, mpierr.New(call, mpierr.Op, "invalid op (handle %#x)", key)
	}
	fn, dt, size := u.fn, d.handle, d.size()
	return coll.Op{Commutative: u.commutative, User: func(ops.Type) ops.Kernel {
		return ops.UserKernel(func(in, inout []byte, n int) {
			if n > 0 {
				C.gocoll_call_user_fn(fn, unsafe.Pointer(&in[0]), unsafe.Pointer(&inout[0]), C.int(n), dt)
			}
		}, size)
	}}, nil
}

// worldEntry is MPI_COMM_WORLD's entry, found without a lock.
var worldEntry atomic.Pointer[commEntry]

// lookupComm decodes a communicator handle.
func lookupComm(call string, h C.MPI_Comm) (*commEntry, error) {
	if h == commWorld {
		if e := worldEntry.Load(); e != nil {
			return e, nil
		}
	}
	state.Lock()
	e, ok := state.comms.get(uint32(h))
	state.Unlock()
	if !ok {
		if uint32(h) == commNull {
			return nil, mpierr.New(call, mpierr.Comm, "invalid communicator MPI_COMM_NULL")
		}
		return nil, mpierr.New(call, mpierr.Comm, "invalid communicator (handle %#x)", uint32(h))
	}
	return e, nil
}
