package main

/*
#include "mpi.h"
*/
import "C"

import (
	"unsafe"

	"github.com/gocoll/gocoll/coll"
	"github.com/gocoll/gocoll/gpu"
	"github.com/gocoll/gocoll/mpierr"
)

// prologue checks that MPI is running and decodes the communicator.
func prologue(call string, comm C.MPI_Comm) (*commEntry, error) {
	if err := ready(call); err != nil {
		return nil, err
	}
	return lookupComm(call, comm)
}

func isInPlace(p unsafe.Pointer) bool { return uintptr(p) == inPlaceInt }

// maxBuffer is the most bytes a buffer argument may span: more than any
// process can map (user space on x86-64 Linux is 2^47 bytes), so a larger
// count x datatype is an error, not a read past the caller's memory.
const maxBuffer = 1 << 47

// cbuf views n bytes of C memory at p; NULL is an error unless n is 0.
func cbuf(call, arg string, p unsafe.Pointer, n int64) ([]byte, error) {
	switch {
	case n < 0:
		return nil, mpierr.New(call, mpierr.Count, "negative count for %s", arg)
	case n > maxBuffer:
		return nil, mpierr.New(call, mpierr.Count, "%s would span %d bytes, more than a process can hold", arg, n)
	case n == 0:
		return nil, nil
	case p == nil:
		return nil, mpierr.New(call, mpierr.Buffer, "%s is NULL with a count of %d bytes", arg, n)
	case isInPlace(p):
		return nil, mpierr.New(call, mpierr.Buffer, "MPI_IN_PLACE is not allowed as %s", arg)
	}
	return unsafe.Slice((*byte)(p), n), nil
}

// send and recv set a call's send or receive buffer (arg names it in
// errors) from a C pointer to n bytes, classified here, once per call:
// host memory as Go bytes, CUDA memory by address (Args.SendDevice,
// RecvDevice), which nothing reads with the CPU.
// Where the C fast path asked the driver already (pl, may be nil), its
// answer is taken instead.
func (e *commEntry) send(a *coll.Args, call, arg string, p unsafe.Pointer, n int64, pl *C.struct_gocoll_placed) error {
	return e.place(call, arg, p, n, &a.Send, &a.SendDevice, pl)
}

func (e *commEntry) recv(a *coll.Args, call, arg string, p unsafe.Pointer, n int64, pl *C.struct_gocoll_placed) error {
	return e.place(call, arg, p, n, &a.Recv, &a.RecvDevice, pl)
}

func (e *commEntry) place(call, arg string, p unsafe.Pointer, n int64, host *[]byte, dev **gpu.Buffer, pl *C.struct_gocoll_placed) error {
	b, err := cbuf(call, arg, p, n)
	if err != nil || len(b) == 0 {
		return err
	}
	m, asked := placed(pl, p)
	if !asked {
		m = e.c.Memory(uintptr(p))
	}
	if m.OnDevice() {
		*dev = &gpu.Buffer{Ptr: uintptr(p), Len: int(n), Mem: m}
		return nil
	}
	*host = b
	return nil
}

// placed is where the fast path found the buffer at p, if it asked.
func placed(pl *C.struct_gocoll_placed, p unsafe.Pointer) (gpu.Memory, bool) {
	if pl == nil || pl.asked == 0 {
		return gpu.Memory{}, false
	}
	for i := range 2 {
		if pl.ptr[i] != p {
			continue
		}
		if pl.dev[i] == 0 {
			return gpu.Memory{}, true
		}
		return gpu.AttrsOf(unsafe.Pointer(&pl.attrs[i])).Memory(uintptr(p)), true
	}
	return gpu.Memory{}, false
}

func checkCount(call, arg string, n int64) error {
	if n < 0 {
		return mpierr.New(call, mpierr.Count, "%s is negative (%d)", arg, n)
	}
	if n > 1<<50 {
		return mpierr.New(call, mpierr.Count, "%s is too large (%d)", arg, n)
	}
	return nil
}

// reduceArgs decodes the arguments shared by the reducing collectives.
func reduceArgs(call string, sendbuf unsafe.Pointer, dt C.MPI_Datatype, op C.MPI_Op, comm C.MPI_Comm) (*commEntry, *datatype, coll.Args, error) {
	e, err := prologue(call, comm)
	if err != nil {
		return nil, nil, coll.Args{}, err
	}
	d, err := lookupType(call, dt)
	if err != nil {
		return e, nil, coll.Args{}, err
	}
	o, err := lookupOp(call, op, d)
	if err != nil {
		return e, nil, coll.Args{}, err
	}
	return e, d, coll.Args{Type: d.base, Mult: d.count, Op: o, InPlace: isInPlace(sendbuf)}, nil
}

//export gocoll_Allreduce
func gocoll_Allreduce(sendbuf, recvbuf unsafe.Pointer, count C.int, dt C.MPI_Datatype, op C.MPI_Op, comm C.MPI_Comm, pl *C.struct_gocoll_placed) C.int {
	return allreduce("MPI_Allreduce", nil, pl, sendbuf, recvbuf, int64(count), dt, op, comm)
}

//export gocoll_Allreduce_c
func gocoll_Allreduce_c(sendbuf, recvbuf unsafe.Pointer, count C.MPI_Count, dt C.MPI_Datatype, op C.MPI_Op, comm C.MPI_Comm) C.int {
	return allreduce("MPI_Allreduce", nil, nil, sendbuf, recvbuf, int64(count), dt, op, comm)
}

func allreduce(call string, f *form, pl *C.struct_gocoll_placed, sendbuf, recvbuf unsafe.Pointer, count int64, dt C.MPI_Datatype, op C.MPI_Op, comm C.MPI_Comm) (rc C.int) {
	defer guard(call, &rc)
	e, d, a, err := reduceArgs(call, sendbuf, dt, op, comm)
	if err == nil {
		err = checkCount(call, "count", count)
	}
	if err != nil {
		return rejected(e, call, err)
	}
	n := count * int64(d.size())
	a.Count = int(count)
	if err = e.recv(&a, call, "recvbuf", recvbuf, n, pl); err == nil && !a.InPlace {
		err = e.send(&a, call, "sendbuf", sendbuf, n, pl)
	}
	if err != nil {
		return rejected(e, call, err)
	}
	return collective(e, call, f, a, e.c.Allreduce, e.c.Iallreduce, e.c.AllreduceInit)
}

//export gocoll_Reduce_scatter_block
func gocoll_Reduce_scatter_block(sendbuf, recvbuf unsafe.Pointer, count C.int, dt C.MPI_Datatype, op C.MPI_Op, comm C.MPI_Comm, pl *C.struct_gocoll_placed) C.int {
	return reduceScatterBlock("MPI_Reduce_scatter_block", nil, pl, sendbuf, recvbuf, int64(count), dt, op, comm)
}

//export gocoll_Reduce_scatter_block_c
func gocoll_Reduce_scatter_block_c(sendbuf, recvbuf unsafe.Pointer, count C.MPI_Count, dt C.MPI_Datatype, op C.MPI_Op, comm C.MPI_Comm) C.int {
	return reduceScatterBlock("MPI_Reduce_scatter_block", nil, nil, sendbuf, recvbuf, int64(count), dt, op, comm)
}

func reduceScatterBlock(call string, f *form, pl *C.struct_gocoll_placed, sendbuf, recvbuf unsafe.Pointer, count int64, dt C.MPI_Datatype, op C.MPI_Op, comm C.MPI_Comm) (rc C.int) {
	defer guard(call, &rc)
	e, d, a, err := reduceArgs(call, sendbuf, dt, op, comm)
	if err == nil {
		err = checkCount(call, "recvcount", count)
	}
	if err != nil {
		return rejected(e, call, err)
	}
	mine := count * int64(d.size())
	total := mine * int64(e.c.Size())
	a.Count = int(count)
	if a.InPlace {
		err = e.recv(&a, call, "recvbuf", recvbuf, total, pl)
	} else if err = e.recv(&a, call, "recvbuf", recvbuf, mine, pl); err == nil {
		err = e.send(&a, call, "sendbuf", sendbuf, total, pl)
	}
	if err != nil {
		return rejected(e, call, err)
	}
	return collective(e, call, f, a, e.c.ReduceScatterBlock, e.c.IreduceScatterBlock, e.c.ReduceScatterBlockInit)
}

//export gocoll_Reduce_scatter
func gocoll_Reduce_scatter(sendbuf, recvbuf unsafe.Pointer, recvcounts *C.int, dt C.MPI_Datatype, op C.MPI_Op, comm C.MPI_Comm, pl *C.struct_gocoll_placed) C.int {
	return reduceScatter("MPI_Reduce_scatter", nil, pl, sendbuf, recvbuf, intCounts(recvcounts), recvcounts == nil || isInPlace(unsafe.Pointer(recvcounts)), dt, op, comm)
}

//export gocoll_Reduce_scatter_c
func gocoll_Reduce_scatter_c(sendbuf, recvbuf unsafe.Pointer, recvcounts *C.MPI_Count, dt C.MPI_Datatype, op C.MPI_Op, comm C.MPI_Comm) C.int {
	return reduceScatter("MPI_Reduce_scatter", nil, nil, sendbuf, recvbuf, countCounts(recvcounts), recvcounts == nil || isInPlace(unsafe.Pointer(recvcounts)), dt, op, comm)
}

func reduceScatter(call string, f *form, pl *C.struct_gocoll_placed, sendbuf, recvbuf unsafe.Pointer, counts func(int) []int64, nullCounts bool, dt C.MPI_Datatype, op C.MPI_Op, comm C.MPI_Comm) (rc C.int) {
	defer guard(call, &rc)
	e, d, a, err := reduceArgs(call, sendbuf, dt, op, comm)
	if err == nil && nullCounts {
		err = mpierr.New(call, mpierr.Arg, "recvcounts is NULL (or MPI_IN_PLACE)")
	}
	if err != nil {
		return rejected(e, call, err)
	}
	var total int64
	a.Counts = make([]int, e.c.Size())
	for i, n := range counts(e.c.Size()) {
		if err := checkCount(call, "recvcounts[i]", n); err != nil {
			return rejected(e, call, mpierr.New(call, mpierr.Count, "recvcounts[%d] is %d", i, n))
		}
		a.Counts[i] = int(n)
		total += n
	}
	size := int64(d.size())
	if a.InPlace {
		err = e.recv(&a, call, "recvbuf", recvbuf, total*size, pl)
	} else if err = e.recv(&a, call, "recvbuf", recvbuf, int64(a.Counts[e.c.Rank()])*size, pl); err == nil {
		err = e.send(&a, call, "sendbuf", sendbuf, total*size, pl)
	}
	if err != nil {
		return rejected(e, call, err)
	}
	return collective(e, call, f, a, e.c.ReduceScatter, e.c.IreduceScatter, e.c.ReduceScatterInit)
}

// gatherTypes decodes the send and receive datatypes of an allgather-like
// call, which must carry the same number of bytes per rank.
func gatherTypes(call string, e *commEntry, inPlace bool, scount int64, stype C.MPI_Datatype, rcount int64, rtype C.MPI_Datatype) (*datatype, error) {
	rd, err := lookupType(call, rtype)
	if err != nil {
		return nil, err
	}
	if err := checkCount(call, "recvcount", rcount); err != nil {
		return nil, err
	}
	if inPlace {
		return rd, nil
	}
	sd, err := lookupType(call, stype)
	if err != nil {
		return nil, err
	}
	if err := checkCount(call, "sendcount", scount); err != nil {
		return nil, err
	}
	if s, r := scount*int64(sd.size()), rcount*int64(rd.size()); s != r {
		return nil, mpierr.New(call, mpierr.Truncate, "each rank sends %d bytes (sendcount x sendtype) but %d are expected (recvcount x recvtype)", s, r)
	}
	return rd, nil
}

//export gocoll_Allgather
func gocoll_Allgather(sendbuf unsafe.Pointer, scount C.int, stype C.MPI_Datatype, recvbuf unsafe.Pointer, rcount C.int, rtype C.MPI_Datatype, comm C.MPI_Comm, pl *C.struct_gocoll_placed) C.int {
	return allgather("MPI_Allgather", nil, pl, sendbuf, int64(scount), stype, recvbuf, int64(rcount), rtype, comm)
}

//export gocoll_Allgather_c
func gocoll_Allgather_c(sendbuf unsafe.Pointer, scount C.MPI_Count, stype C.MPI_Datatype, recvbuf unsafe.Pointer, rcount C.MPI_Count, rtype C.MPI_Datatype, comm C.MPI_Comm) C.int {
	return allgather("MPI_Allgather", nil, nil, sendbuf, int64(scount), stype, recvbuf, int64(rcount), rtype, comm)
}

func allgather(call string, f *form, pl *C.struct_gocoll_placed, sendbuf unsafe.Pointer, scount int64, stype C.MPI_Datatype, recvbuf unsafe.Pointer, rcount int64, rtype C.MPI_Datatype, comm C.MPI_Comm) (rc C.int) {
	defer guard(call, &rc)
	e, err := prologue(call, comm)
	if err != nil {
		return rejected(e, call, err)
	}
	inPlace := isInPlace(sendbuf)
	d, err := gatherTypes(call, e, inPlace, scount, stype, rcount, rtype)
	if err != nil {
		return rejected(e, call, err)
	}
	n := rcount * int64(d.size())
	a := coll.Args{Type: d.base, Mult: d.count, Count: int(rcount), InPlace: inPlace}
	if err = e.recv(&a, call, "recvbuf", recvbuf, n*int64(e.c.Size()), pl); err == nil && !inPlace {
		err = e.send(&a, call, "sendbuf", sendbuf, n, pl)
	}
	if err != nil {
		return rejected(e, call, err)
	}
	return collective(e, call, f, a, e.c.Allgather, e.c.Iallgather, e.c.AllgatherInit)
}

//export gocoll_Allgatherv
func gocoll_Allgatherv(sendbuf unsafe.Pointer, scount C.int, stype C.MPI_Datatype, recvbuf unsafe.Pointer, rcounts, displs *C.int, rtype C.MPI_Datatype, comm C.MPI_Comm) (rc C.int) {
	const call = "MPI_Allgatherv"
	defer guard(call, &rc)
	e, err := prologue(call, comm)
	if err != nil {
		return rejected(e, call, err)
	}
	if rcounts == nil || displs == nil || isInPlace(unsafe.Pointer(rcounts)) || isInPlace(unsafe.Pointer(displs)) {
		return rejected(e, call, mpierr.New(call, mpierr.Arg, "recvcounts or displs is NULL (or MPI_IN_PLACE)"))
	}
	p, me := e.c.Size(), e.c.Rank()
	counts := unsafe.Slice(rcounts, p)
	disp := unsafe.Slice(displs, p)
	inPlace := isInPlace(sendbuf)
	d, err := gatherTypes(call, e, inPlace, int64(scount), stype, int64(counts[me]), rtype)
	if err != nil {
		return rejected(e, call, err)
	}
	size := int64(d.size())
	a := coll.Args{Type: d.base, Mult: d.count, InPlace: inPlace, Counts: make([]int, p), Displs: make([]int, p)}
	var end int64 // extent of recvbuf
	for i := range p {
		if counts[i] < 0 || disp[i] < 0 {
			return rejected(e, call, mpierr.New(call, mpierr.Count, "recvcounts[%d] = %d, displs[%d] = %d", i, counts[i], i, disp[i]))
		}
		a.Counts[i], a.Displs[i] = int(counts[i]), int(disp[i])
		end = max(end, int64(disp[i])+int64(counts[i]))
	}
	if err = e.recv(&a, call, "recvbuf", recvbuf, end*size, nil); err != nil {
		return rejected(e, call, err)
	}
	if !inPlace {
		if err = e.send(&a, call, "sendbuf", sendbuf, int64(counts[me])*size, nil); err != nil {
			return rejected(e, call, err)
		}
	}
	return fail(e, e.c.Allgatherv(a))
}

//export gocoll_Barrier
func gocoll_Barrier(comm C.MPI_Comm) (rc C.int) {
	const call = "MPI_Barrier"
	defer guard(call, &rc)
	e, err := prologue(call, comm)
	if err != nil {
		return rejected(e, call, err)
	}
	return fail(e, e.c.Barrier())
}

//export gocoll_Bcast
func gocoll_Bcast(buf unsafe.Pointer, count C.int, dt C.MPI_Datatype, root C.int, comm C.MPI_Comm, pl *C.struct_gocoll_placed) (rc C.int) {
	const call = "MPI_Bcast"
	defer guard(call, &rc)
	e, err := prologue(call, comm)
	if err != nil {
		return rejected(e, call, err)
	}
	d, err := lookupType(call, dt)
	if err == nil {
		err = checkCount(call, "count", int64(count))
	}
	if err != nil {
		return rejected(e, call, err)
	}
	a := coll.Args{Type: d.base, Mult: d.count, Count: int(count), Root: int(root)}
	if err = e.recv(&a, call, "buffer", buf, int64(count)*int64(d.size()), pl); err != nil {
		return rejected(e, call, err)
	}
	if a.RecvDevice == nil {
		if rc := fastBcast(buf, int64(count)*int64(d.size()), root, comm); rc >= 0 {
			return rc
		}
	}
	return fail(e, e.c.Bcast(a))
}

//export gocoll_Reduce
func gocoll_Reduce(sendbuf, recvbuf unsafe.Pointer, count C.int, dt C.MPI_Datatype, op C.MPI_Op, root C.int, comm C.MPI_Comm) (rc C.int) {
	const call = "MPI_Reduce"
	defer guard(call, &rc)
	e, d, a, err := reduceArgs(call, sendbuf, dt, op, comm)
	if err == nil {
		err = checkCount(call, "count", int64(count))
	}
	if err != nil {
		return rejected(e, call, err)
	}
	n := int64(count) * int64(d.size())
	a.Count, a.Root = int(count), int(root)
	if int(root) == e.c.Rank() {
		err = e.recv(&a, call, "recvbuf", recvbuf, n, nil)
	}
	if err == nil && !a.InPlace {
		err = e.send(&a, call, "sendbuf", sendbuf, n, nil)
	}
	if err != nil {
		return rejected(e, call, err)
	}
	return fail(e, e.c.Reduce(a))
}

//export gocoll_Gather
func gocoll_Gather(sendbuf unsafe.Pointer, scount C.int, stype C.MPI_Datatype, recvbuf unsafe.Pointer, rcount C.int, rtype C.MPI_Datatype, root C.int, comm C.MPI_Comm) (rc C.int) {
	const call = "MPI_Gather"
	defer guard(call, &rc)
	e, err := prologue(call, comm)
	if err != nil {
		return rejected(e, call, err)
	}
	inPlace := isInPlace(sendbuf)
	isRoot := int(root) == e.c.Rank()
	a := coll.Args{InPlace: inPlace, Root: int(root)}
	if isRoot {
		// The receive side is significant at the root only.
		d, err := gatherTypes(call, e, inPlace, int64(scount), stype, int64(rcount), rtype)
		if err != nil {
			return rejected(e, call, err)
		}
		a.Type, a.Mult, a.Count = d.base, d.count, int(rcount)
		n := int64(rcount) * int64(d.size())
		if err = e.recv(&a, call, "recvbuf", recvbuf, n*int64(e.c.Size()), nil); err == nil && !inPlace {
			err = e.send(&a, call, "sendbuf", sendbuf, n, nil)
		}
		if err != nil {
			return rejected(e, call, err)
		}
	} else {
		sd, err := lookupType(call, stype)
		if err == nil {
			err = checkCount(call, "sendcount", int64(scount))
		}
		if err != nil {
			return rejected(e, call, err)
		}
		a.Type, a.Mult, a.Count = sd.base, sd.count, int(scount)
		if err = e.send(&a, call, "sendbuf", sendbuf, int64(scount)*int64(sd.size()), nil); err != nil {
			return rejected(e, call, err)
		}
	}
	return fail(e, e.c.Gather(a))
}
