package main

/*
#include "mpi.h"
*/
import "C"

import (
	"slices"
	"unsafe"

	"github.com/gocoll/gocoll/coll"
	"github.com/gocoll/gocoll/mpierr"
)

//export gocoll_Comm_rank
func gocoll_Comm_rank(comm C.MPI_Comm, rank *C.int) (rc C.int) {
	const call = "MPI_Comm_rank"
	defer guard(call, &rc)
	e, err := prologue(call, comm)
	if err == nil && rank == nil {
		err = mpierr.New(call, mpierr.Arg, "rank is NULL")
	}
	if err != nil {
		return fail(e, err)
	}
	*rank = C.int(e.c.Rank())
	return C.MPI_SUCCESS
}

//export gocoll_Comm_size
func gocoll_Comm_size(comm C.MPI_Comm, size *C.int) (rc C.int) {
	const call = "MPI_Comm_size"
	defer guard(call, &rc)
	e, err := prologue(call, comm)
	if err == nil && size == nil {
		err = mpierr.New(call, mpierr.Arg, "size is NULL")
	}
	if err != nil {
		return fail(e, err)
	}
	*size = C.int(e.c.Size())
	return C.MPI_SUCCESS
}

// register gives a new communicator a handle; it inherits the error
// handler of its parent.
func register(parent *commEntry, c *coll.Comm) *commEntry {
	ranks := c.Ranks()
	e := &commEntry{c: c, p2p: lib.hub.Comm(c.Context(), ranks, c.Rank()), errh: parent.errh}
	state.Lock()
	e.handle = C.MPI_Comm(state.comms.add(e))
	state.Unlock()
	fastAttach(e)
	return e
}

//export gocoll_Comm_dup
func gocoll_Comm_dup(comm C.MPI_Comm, newcomm *C.MPI_Comm) (rc C.int) {
	const call = "MPI_Comm_dup"
	defer guard(call, &rc)
	e, err := prologue(call, comm)
	if err == nil && newcomm == nil {
		err = mpierr.New(call, mpierr.Arg, "newcomm is NULL")
	}
	if err != nil {
		return fail(e, err)
	}
	c, err := e.c.Dup(e.c.Name() + "/dup")
	if err != nil {
		return fail(e, err)
	}
	*newcomm = register(e, c).handle
	return C.MPI_SUCCESS
}

//export gocoll_Comm_split
func gocoll_Comm_split(comm C.MPI_Comm, color, key C.int, newcomm *C.MPI_Comm) (rc C.int) {
	const call = "MPI_Comm_split"
	defer guard(call, &rc)
	e, err := prologue(call, comm)
	if err == nil && newcomm == nil {
		err = mpierr.New(call, mpierr.Arg, "newcomm is NULL")
	}
	if err != nil {
		return fail(e, err)
	}
	c, err := e.c.Split(int(color), int(key), e.c.Name()+"/split")
	if err != nil {
		return fail(e, err)
	}
	if c == nil {
		*newcomm = commNull
		return C.MPI_SUCCESS
	}
	*newcomm = register(e, c).handle
	return C.MPI_SUCCESS
}

// splitTypeShared is MPI_COMM_TYPE_SHARED (MPICH ABI).
const splitTypeShared = C.MPI_COMM_TYPE_SHARED

//export gocoll_Comm_split_type
func gocoll_Comm_split_type(comm C.MPI_Comm, splitType, key C.int, info C.MPI_Info, newcomm *C.MPI_Comm) (rc C.int) {
	const call = "MPI_Comm_split_type"
	defer guard(call, &rc)
	e, err := prologue(call, comm)
	switch {
	case err != nil:
	case newcomm == nil:
		err = mpierr.New(call, mpierr.Arg, "newcomm is NULL")
	case splitType != splitTypeShared && splitType != C.MPI_UNDEFINED:
		err = mpierr.New(call, mpierr.Arg, "split_type %d is not MPI_COMM_TYPE_SHARED (%d) or MPI_UNDEFINED: gocoll knows no other", int(splitType), int(splitTypeShared))
	}
	if err != nil {
		return fail(e, err)
	}
	// info carries hints only, which an implementation may ignore; gocoll
	// has no info objects, so there is none to read.
	_ = info
	c, err := e.c.SplitType(splitType == splitTypeShared, int(key), e.c.Name()+"/shared")
	if err != nil {
		return fail(e, err)
	}
	if c == nil {
		*newcomm = commNull
		return C.MPI_SUCCESS
	}
	*newcomm = register(e, c).handle
	return C.MPI_SUCCESS
}

//export gocoll_Comm_free
func gocoll_Comm_free(comm *C.MPI_Comm) (rc C.int) {
	const call = "MPI_Comm_free"
	defer guard(call, &rc)
	if comm == nil {
		return fail(nil, mpierr.New(call, mpierr.Arg, "comm is NULL"))
	}
	e, err := prologue(call, *comm)
	if err == nil && (*comm == commWorld || *comm == commSelf) {
		err = mpierr.New(call, mpierr.Comm, "MPI_COMM_WORLD and MPI_COMM_SELF cannot be freed")
	}
	if err != nil {
		return fail(e, err)
	}
	fastDetach(e)
	state.Lock()
	state.comms.remove(uint32(*comm))
	state.Unlock()
	e.c.Free()
	*comm = commNull
	return C.MPI_SUCCESS
}

//export gocoll_Comm_compare
func gocoll_Comm_compare(c1, c2 C.MPI_Comm, result *C.int) (rc C.int) {
	const call = "MPI_Comm_compare"
	defer guard(call, &rc)
	a, err := prologue(call, c1)
	if err != nil {
		return fail(nil, err)
	}
	b, err := lookupComm(call, c2)
	if err == nil && result == nil {
		err = argNull(call, "result")
	}
	if err != nil {
		return fail(a, err)
	}
	ra, rb := a.c.Ranks(), b.c.Ranks()
	switch {
	case c1 == c2:
		*result = C.MPI_IDENT
	case slices.Equal(ra, rb):
		*result = C.MPI_CONGRUENT
	default:
		slices.Sort(ra)
		slices.Sort(rb)
		if slices.Equal(ra, rb) {
			*result = C.MPI_SIMILAR
		} else {
			*result = C.MPI_UNEQUAL
		}
	}
	return C.MPI_SUCCESS
}

//export gocoll_Comm_set_errhandler
func gocoll_Comm_set_errhandler(comm C.MPI_Comm, errh C.MPI_Errhandler) (rc C.int) {
	const call = "MPI_Comm_set_errhandler"
	defer guard(call, &rc)
	e, err := prologue(call, comm)
	if err != nil {
		return fail(e, err)
	}
	switch errh {
	case errFatal, errReturn, errAbort:
	default:
		return fail(e, mpierr.New(call, mpierr.Arg, "unknown error handler %#x (gocoll has MPI_ERRORS_ARE_FATAL, MPI_ERRORS_RETURN, MPI_ERRORS_ABORT)", uint32(errh)))
	}
	state.Lock()
	e.errh = errh
	state.Unlock()
	return C.MPI_SUCCESS
}

//export gocoll_Comm_get_errhandler
func gocoll_Comm_get_errhandler(comm C.MPI_Comm, errh *C.MPI_Errhandler) (rc C.int) {
	const call = "MPI_Comm_get_errhandler"
	defer guard(call, &rc)
	e, err := prologue(call, comm)
	if err == nil && errh == nil {
		err = mpierr.New(call, mpierr.Arg, "errhandler is NULL")
	}
	if err != nil {
		return fail(e, err)
	}
	state.Lock()
	*errh = e.errh
	state.Unlock()
	return C.MPI_SUCCESS
}

//export gocoll_Error_string
func gocoll_Error_string(code C.int, str *C.char, resultlen *C.int) (rc C.int) {
	const call = "MPI_Error_string"
	defer guard(call, &rc)
	s, err := errorString(int(code))
	if err != nil {
		return fail(nil, mpierr.New(call, mpierr.Arg, "unknown error code %d", int(code)))
	}
	if str == nil || resultlen == nil {
		return fail(nil, argNull(call, nullName(str == nil, "string", "resultlen")))
	}
	*resultlen = putString(str, s, C.MPI_MAX_ERROR_STRING)
	return C.MPI_SUCCESS
}

//export gocoll_Error_class
func gocoll_Error_class(code C.int, class *C.int) (rc C.int) {
	const call = "MPI_Error_class"
	defer guard(call, &rc)
	if _, err := errorString(int(code)); err != nil {
		return fail(nil, mpierr.New(call, mpierr.Arg, "unknown error code %d", int(code)))
	}
	if class == nil {
		return fail(nil, argNull(call, "errorclass"))
	}
	*class = code
	return C.MPI_SUCCESS
}

//export gocoll_Type_size
func gocoll_Type_size(dt C.MPI_Datatype, size *C.int) (rc C.int) {
	const call = "MPI_Type_size"
	defer guard(call, &rc)
	if err := ready(call); err != nil {
		return fail(nil, err)
	}
	d, err := lookupTypeAny(call, dt)
	if err == nil && size == nil {
		err = argNull(call, "size")
	}
	if err != nil {
		return fail(nil, err)
	}
	*size = C.int(d.size())
	return C.MPI_SUCCESS
}

// lookupTypeAny decodes a datatype handle, committed or not.
func lookupTypeAny(call string, dt C.MPI_Datatype) (*datatype, error) {
	state.Lock()
	d, ok := state.types.get(uint32(dt))
	state.Unlock()
	if ok {
		return d, nil
	}
	return lookupType(call, dt)
}

//export gocoll_Type_contiguous
func gocoll_Type_contiguous(count C.int, old C.MPI_Datatype, newtype *C.MPI_Datatype) (rc C.int) {
	const call = "MPI_Type_contiguous"
	defer guard(call, &rc)
	if err := ready(call); err != nil {
		return fail(nil, err)
	}
	if count < 0 {
		return fail(nil, mpierr.New(call, mpierr.Count, "count is negative (%d)", int(count)))
	}
	if newtype == nil {
		return fail(nil, mpierr.New(call, mpierr.Arg, "newtype is NULL"))
	}
	od, err := lookupTypeAny(call, old)
	if err != nil {
		return fail(nil, err)
	}
	if count > 0 && int64(od.size()) > maxBuffer/int64(count) {
		return fail(nil, mpierr.New(call, mpierr.Count, "count %d of %d-byte elements: larger than a process can hold", int(count), od.size()))
	}
	d := &datatype{base: od.base, count: od.count * int(count)}
	state.Lock()
	h := state.types.add(d)
	state.Unlock()
	d.handle = C.MPI_Datatype(h)
	*newtype = d.handle
	return C.MPI_SUCCESS
}

//export gocoll_Type_commit
func gocoll_Type_commit(dt *C.MPI_Datatype) (rc C.int) {
	const call = "MPI_Type_commit"
	defer guard(call, &rc)
	if err := ready(call); err != nil {
		return fail(nil, err)
	}
	if dt == nil {
		return fail(nil, mpierr.New(call, mpierr.Arg, "datatype is NULL"))
	}
	state.Lock()
	d, ok := state.types.get(uint32(*dt))
	if ok {
		d.committed = true
	}
	state.Unlock()
	if !ok {
		if _, builtin := builtinTypes[uint32(*dt)]; !builtin {
			return fail(nil, mpierr.New(call, mpierr.Type, "invalid datatype (handle %#x)", uint32(*dt)))
		}
	}
	return C.MPI_SUCCESS
}

//export gocoll_Type_free
func gocoll_Type_free(dt *C.MPI_Datatype) (rc C.int) {
	const call = "MPI_Type_free"
	defer guard(call, &rc)
	if err := ready(call); err != nil {
		return fail(nil, err)
	}
	if dt == nil {
		return fail(nil, mpierr.New(call, mpierr.Arg, "datatype is NULL"))
	}
	state.Lock()
	ok := state.types.remove(uint32(*dt))
	state.Unlock()
	if !ok {
		return fail(nil, mpierr.New(call, mpierr.Type, "cannot free datatype %#x (predefined or invalid)", uint32(*dt)))
	}
	*dt = typeNull
	return C.MPI_SUCCESS
}

//export gocoll_Op_create
func gocoll_Op_create(fn unsafe.Pointer, commute C.int, op *C.MPI_Op) (rc C.int) {
	const call = "MPI_Op_create"
	defer guard(call, &rc)
	if err := ready(call); err != nil {
		return fail(nil, err)
	}
	if fn == nil || op == nil {
		return fail(nil, mpierr.New(call, mpierr.Arg, "user function or op is NULL"))
	}
	state.Lock()
	h := state.userOps.add(&userOp{fn: fn, commutative: commute != 0})
	state.Unlock()
	*op = C.MPI_Op(h)
	return C.MPI_SUCCESS
}

//export gocoll_Op_free
func gocoll_Op_free(op *C.MPI_Op) (rc C.int) {
	const call = "MPI_Op_free"
	defer guard(call, &rc)
	if err := ready(call); err != nil {
		return fail(nil, err)
	}
	if op == nil {
		return fail(nil, mpierr.New(call, mpierr.Arg, "op is NULL"))
	}
	state.Lock()
	ok := state.userOps.remove(uint32(*op))
	state.Unlock()
	if !ok {
		return fail(nil, mpierr.New(call, mpierr.Op, "cannot free op %#x (predefined or invalid)", uint32(*op)))
	}
	*op = opNull
	return C.MPI_SUCCESS
}

//export gocoll_Op_commutative
func gocoll_Op_commutative(op C.MPI_Op, commute *C.int) (rc C.int) {
	const call = "MPI_Op_commutative"
	defer guard(call, &rc)
	if err := ready(call); err != nil {
		return fail(nil, err)
	}
	if commute == nil {
		return fail(nil, argNull(call, "commute"))
	}
	if _, ok := builtinOps[uint32(op)]; ok {
		*commute = 1
		return C.MPI_SUCCESS
	}
	state.Lock()
	u, ok := state.userOps.get(uint32(op))
	state.Unlock()
	if !ok {
		return fail(nil, mpierr.New(call, mpierr.Op, "invalid op (handle %#x)", uint32(op)))
	}
	*commute = cbool(u.commutative)
	return C.MPI_SUCCESS
}
