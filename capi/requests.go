package main

/*
#include "mpi.h"
#include "fast.h"

static void gocoll_fast_hold(int d) { __atomic_add_fetch(&gocoll_fast_held, d, __ATOMIC_RELEASE); }
*/
import "C"

import (
	"github.com/gocoll/gocoll/internal/pause"
	"unsafe"

	"github.com/gocoll/gocoll/coll"
	"github.com/gocoll/gocoll/mpierr"
	"github.com/gocoll/gocoll/p2p"
)

// The nonblocking (MPI_I*) and persistent (MPI_*_init) collectives, and
// the completion calls every request shares: Wait, Test and their
// -all/-any forms, Start, Startall, Request_free.

// form is how a collective entry point runs its call: blocking (nil),
// started at once (MPI_I*), or prepared for MPI_Start (MPI_*_init).
type form struct {
	persistent bool
	req        *C.MPI_Request
}

// collective runs a checked call in form f: blocking, or as a request
// whose handle goes to *f.req.
func collective(e *commEntry, call string, f *form, a coll.Args, blocking func(coll.Args) error, start, prepare func(coll.Args) (*coll.Request, error)) C.int {
	if f == nil {
		return fail(e, blocking(a))
	}
	if f.req == nil {
		return rejected(e, call, argNull(call, "request"))
	}
	var r *coll.Request
	var err error
	if f.persistent {
		r, err = prepare(a)
	} else {
		C.gocoll_fast_hold(1)
		if r, err = start(a); err != nil {
			C.gocoll_fast_hold(-1)
		}
	}
	if err != nil {
		return fail(e, err)
	}
	state.Lock()
	*f.req = C.MPI_Request(state.requests.add(&request{cr: r, comm: e, held: !f.persistent}))
	state.Unlock()
	return C.MPI_SUCCESS
}

//export gocoll_Iallreduce
func gocoll_Iallreduce(sendbuf, recvbuf unsafe.Pointer, count C.int, dt C.MPI_Datatype, op C.MPI_Op, comm C.MPI_Comm, req *C.MPI_Request) C.int {
	return allreduce("MPI_Iallreduce", &form{req: req}, nil, sendbuf, recvbuf, int64(count), dt, op, comm)
}

//export gocoll_Iallreduce_c
func gocoll_Iallreduce_c(sendbuf, recvbuf unsafe.Pointer, count C.MPI_Count, dt C.MPI_Datatype, op C.MPI_Op, comm C.MPI_Comm, req *C.MPI_Request) C.int {
	return allreduce("MPI_Iallreduce_c", &form{req: req}, nil, sendbuf, recvbuf, int64(count), dt, op, comm)
}

//export gocoll_Allreduce_init
func gocoll_Allreduce_init(sendbuf, recvbuf unsafe.Pointer, count C.int, dt C.MPI_Datatype, op C.MPI_Op, comm C.MPI_Comm, info C.MPI_Info, req *C.MPI_Request) C.int {
	return allreduce("MPI_Allreduce_init", &form{persistent: true, req: req}, nil, sendbuf, recvbuf, int64(count), dt, op, comm)
}

//export gocoll_Allreduce_init_c
func gocoll_Allreduce_init_c(sendbuf, recvbuf unsafe.Pointer, count C.MPI_Count, dt C.MPI_Datatype, op C.MPI_Op, comm C.MPI_Comm, info C.MPI_Info, req *C.MPI_Request) C.int {
	return allreduce("MPI_Allreduce_init_c", &form{persistent: true, req: req}, nil, sendbuf, recvbuf, int64(count), dt, op, comm)
}

//export gocoll_Ireduce_scatter_block
func gocoll_Ireduce_scatter_block(sendbuf, recvbuf unsafe.Pointer, count C.int, dt C.MPI_Datatype, op C.MPI_Op, comm C.MPI_Comm, req *C.MPI_Request) C.int {
	return reduceScatterBlock("MPI_Ireduce_scatter_block", &form{req: req}, nil, sendbuf, recvbuf, int64(count), dt, op, comm)
}

//export gocoll_Ireduce_scatter_block_c
func gocoll_Ireduce_scatter_block_c(sendbuf, recvbuf unsafe.Pointer, count C.MPI_Count, dt C.MPI_Datatype, op C.MPI_Op, comm C.MPI_Comm, req *C.MPI_Request) C.int {
	return reduceScatterBlock("MPI_Ireduce_scatter_block_c", &form{req: req}, nil, sendbuf, recvbuf, int64(count), dt, op, comm)
}

//export gocoll_Reduce_scatter_block_init
func gocoll_Reduce_scatter_block_init(sendbuf, recvbuf unsafe.Pointer, count C.int, dt C.MPI_Datatype, op C.MPI_Op, comm C.MPI_Comm, info C.MPI_Info, req *C.MPI_Request) C.int {
	return reduceScatterBlock("MPI_Reduce_scatter_block_init", &form{persistent: true, req: req}, nil, sendbuf, recvbuf, int64(count), dt, op, comm)
}

//export gocoll_Reduce_scatter_block_init_c
func gocoll_Reduce_scatter_block_init_c(sendbuf, recvbuf unsafe.Pointer, count C.MPI_Count, dt C.MPI_Datatype, op C.MPI_Op, comm C.MPI_Comm, info C.MPI_Info, req *C.MPI_Request) C.int {
	return reduceScatterBlock("MPI_Reduce_scatter_block_init_c", &form{persistent: true, req: req}, nil, sendbuf, recvbuf, int64(count), dt, op, comm)
}

//export gocoll_Ireduce_scatter
func gocoll_Ireduce_scatter(sendbuf, recvbuf unsafe.Pointer, recvcounts *C.int, dt C.MPI_Datatype, op C.MPI_Op, comm C.MPI_Comm, req *C.MPI_Request) C.int {
	return reduceScatter("MPI_Ireduce_scatter", &form{req: req}, nil, sendbuf, recvbuf, intCounts(recvcounts), recvcounts == nil || isInPlace(unsafe.Pointer(recvcounts)), dt, op, comm)
}

//export gocoll_Ireduce_scatter_c
func gocoll_Ireduce_scatter_c(sendbuf, recvbuf unsafe.Pointer, recvcounts *C.MPI_Count, dt C.MPI_Datatype, op C.MPI_Op, comm C.MPI_Comm, req *C.MPI_Request) C.int {
	return reduceScatter("MPI_Ireduce_scatter_c", &form{req: req}, nil, sendbuf, recvbuf, countCounts(recvcounts), recvcounts == nil || isInPlace(unsafe.Pointer(recvcounts)), dt, op, comm)
}

//export gocoll_Reduce_scatter_init
func gocoll_Reduce_scatter_init(sendbuf, recvbuf unsafe.Pointer, recvcounts *C.int, dt C.MPI_Datatype, op C.MPI_Op, comm C.MPI_Comm, info C.MPI_Info, req *C.MPI_Request) C.int {
	return reduceScatter("MPI_Reduce_scatter_init", &form{persistent: true, req: req}, nil, sendbuf, recvbuf, intCounts(recvcounts), recvcounts == nil || isInPlace(unsafe.Pointer(recvcounts)), dt, op, comm)
}

//export gocoll_Reduce_scatter_init_c
func gocoll_Reduce_scatter_init_c(sendbuf, recvbuf unsafe.Pointer, recvcounts *C.MPI_Count, dt C.MPI_Datatype, op C.MPI_Op, comm C.MPI_Comm, info C.MPI_Info, req *C.MPI_Request) C.int {
	return reduceScatter("MPI_Reduce_scatter_init_c", &form{persistent: true, req: req}, nil, sendbuf, recvbuf, countCounts(recvcounts), recvcounts == nil || isInPlace(unsafe.Pointer(recvcounts)), dt, op, comm)
}

//export gocoll_Iallgather
func gocoll_Iallgather(sendbuf unsafe.Pointer, scount C.int, stype C.MPI_Datatype, recvbuf unsafe.Pointer, rcount C.int, rtype C.MPI_Datatype, comm C.MPI_Comm, req *C.MPI_Request) C.int {
	return allgather("MPI_Iallgather", &form{req: req}, nil, sendbuf, int64(scount), stype, recvbuf, int64(rcount), rtype, comm)
}

//export gocoll_Iallgather_c
func gocoll_Iallgather_c(sendbuf unsafe.Pointer, scount C.MPI_Count, stype C.MPI_Datatype, recvbuf unsafe.Pointer, rcount C.MPI_Count, rtype C.MPI_Datatype, comm C.MPI_Comm, req *C.MPI_Request) C.int {
	return allgather("MPI_Iallgather_c", &form{req: req}, nil, sendbuf, int64(scount), stype, recvbuf, int64(rcount), rtype, comm)
}

//export gocoll_Allgather_init
func gocoll_Allgather_init(sendbuf unsafe.Pointer, scount C.int, stype C.MPI_Datatype, recvbuf unsafe.Pointer, rcount C.int, rtype C.MPI_Datatype, comm C.MPI_Comm, info C.MPI_Info, req *C.MPI_Request) C.int {
	return allgather("MPI_Allgather_init", &form{persistent: true, req: req}, nil, sendbuf, int64(scount), stype, recvbuf, int64(rcount), rtype, comm)
}

//export gocoll_Allgather_init_c
func gocoll_Allgather_init_c(sendbuf unsafe.Pointer, scount C.MPI_Count, stype C.MPI_Datatype, recvbuf unsafe.Pointer, rcount C.MPI_Count, rtype C.MPI_Datatype, comm C.MPI_Comm, info C.MPI_Info, req *C.MPI_Request) C.int {
	return allgather("MPI_Allgather_init_c", &form{persistent: true, req: req}, nil, sendbuf, int64(scount), stype, recvbuf, int64(rcount), rtype, comm)
}

// intCounts and countCounts read p recvcounts of either width.
func intCounts(counts *C.int) func(int) []int64 {
	return func(n int) []int64 {
		out := make([]int64, n)
		for i, v := range unsafe.Slice(counts, n) {
			out[i] = int64(v)
		}
		return out
	}
}

func countCounts(counts *C.MPI_Count) func(int) []int64 {
	return func(n int) []int64 {
		out := make([]int64, n)
		for i, v := range unsafe.Slice(counts, n) {
			out[i] = int64(v)
		}
		return out
	}
}

// test completes q if it can, without waiting. A collective's status has
// no source, tag or count.
func (q *request) test() (bool, p2p.Status, error) {
	if q.cr == nil {
		return q.r.Test()
	}
	done, err := q.cr.Test()
	if done {
		q.release()
	}
	return done, emptyStatus, err
}

// wait completes q.
func (q *request) wait() (p2p.Status, error) {
	if q.cr == nil {
		return waitP2P(q.r)
	}
	err := q.cr.Wait()
	q.release()
	return emptyStatus, err
}

// release lets the C fast path run again once no collective request is
// active.
func (q *request) release() {
	if q.held {
		q.held = false
		C.gocoll_fast_hold(-1)
	}
}

// done reports whether q has completed, without completing it (Testall
// completes all or none).
func (q *request) done() bool {
	if q.cr != nil {
		return q.cr.Done() || !q.cr.Active()
	}
	done, _, _ := q.r.Test()
	return done
}

// retire frees a completed request's handle unless it is persistent,
// which stays, inactive, until MPI_Request_free.
func retire(q *request, h *C.MPI_Request) {
	if q.cr != nil && q.cr.Persistent() {
		return
	}
	freeRequest(h)
}

//export gocoll_Wait
func gocoll_Wait(req *C.MPI_Request, status *C.MPI_Status) (rc C.int) {
	const call = "MPI_Wait"
	defer guard(call, &rc)
	if err := ready(call); err != nil {
		return fail(nil, err)
	}
	if req == nil {
		return fail(nil, argNull(call, "request"))
	}
	q, ok, err := takeRequest(call, *req)
	if err != nil {
		return fail(nil, err)
	}
	if !ok {
		setStatus(status, emptyStatus, nil)
		return C.MPI_SUCCESS
	}
	st, err := q.wait()
	err = p2pError(call, err)
	setStatus(status, st, err)
	retire(q, req)
	return fail(q.comm, err)
}

//export gocoll_Test
func gocoll_Test(req *C.MPI_Request, flag *C.int, status *C.MPI_Status) (rc C.int) {
	const call = "MPI_Test"
	defer guard(call, &rc)
	if err := ready(call); err != nil {
		return fail(nil, err)
	}
	if req == nil || flag == nil {
		return fail(nil, mpierr.New(call, mpierr.Arg, "request or flag is NULL"))
	}
	q, ok, err := takeRequest(call, *req)
	if err != nil {
		return fail(nil, err)
	}
	if !ok {
		*flag = 1
		setStatus(status, emptyStatus, nil)
		return C.MPI_SUCCESS
	}
	done, st, err := q.test()
	if !done {
		*flag = 0
		return C.MPI_SUCCESS
	}
	*flag = 1
	err = p2pError(call, err)
	setStatus(status, st, err)
	retire(q, req)
	return fail(q.comm, err)
}

// requestArray decodes the arguments of the -all and -any calls.
func requestArray(call string, count C.int, reqs *C.MPI_Request) ([]C.MPI_Request, error) {
	if err := ready(call); err != nil {
		return nil, err
	}
	if count < 0 {
		return nil, mpierr.New(call, mpierr.Count, "count is negative (%d)", int(count))
	}
	if count > 0 && reqs == nil {
		return nil, argNull(call, "array_of_requests")
	}
	return unsafe.Slice(reqs, int(count)), nil
}

//export gocoll_Waitall
func gocoll_Waitall(count C.int, reqs *C.MPI_Request, statuses *C.MPI_Status) (rc C.int) {
	const call = "MPI_Waitall"
	defer guard(call, &rc)
	hs, err := requestArray(call, count, reqs)
	if err != nil {
		return fail(nil, err)
	}
	ignore := statuses == nil || uintptr(unsafe.Pointer(statuses)) == statusIgnore
	var sts []C.MPI_Status
	if !ignore {
		sts = unsafe.Slice(statuses, int(count))
	}
	var firstErr error
	var errComm *commEntry
	settle := func(i int, q *request, st p2p.Status, err error) {
		if !ignore {
			setStatus(&sts[i], st, err)
		}
		if err != nil && firstErr == nil {
			firstErr = err
			if q != nil {
				errComm = q.comm
			}
		}
	}
	// Test them all in turn rather than wait for one: a request later in
	// the array may be what a peer needs before it completes an earlier
	// one.
	left := make([]bool, len(hs))
	n := 0
	for i := range hs {
		_, ok, err := takeRequest(call, hs[i])
		switch {
		case err != nil:
			settle(i, nil, p2p.Status{}, err)
		case !ok:
			settle(i, nil, emptyStatus, nil)
		default:
			left[i] = true
			n++
		}
	}
	var b pause.Backoff
	for n > 0 {
		moved := false
		for i := range hs {
			if !left[i] {
				continue
			}
			q, _, _ := takeRequest(call, hs[i])
			if n == 1 {
				st, err := q.wait()
				settle(i, q, st, p2pError(call, err))
				retire(q, &hs[i])
				left[i], n = false, 0
				break
			}
			done, st, err := q.test()
			if done {
				settle(i, q, st, p2pError(call, err))
				retire(q, &hs[i])
				left[i] = false
				n--
				moved = true
			}
		}
		if !moved && n > 0 {
			b.Idle()
		}
	}
	if firstErr != nil && !ignore {
		// MPI: with several requests, the error is reported per status.
		firstErr = &mpierr.Error{Call: call, Class: mpierr.Class(C.MPI_ERR_IN_STATUS), Msg: "a request failed (see the statuses)", Err: firstErr}
	}
	return fail(errComm, firstErr)
}

//export gocoll_Testall
func gocoll_Testall(count C.int, reqs *C.MPI_Request, flag *C.int, statuses *C.MPI_Status) (rc C.int) {
	const call = "MPI_Testall"
	defer guard(call, &rc)
	hs, err := requestArray(call, count, reqs)
	if err == nil && flag == nil {
		err = argNull(call, "flag")
	}
	if err != nil {
		return fail(nil, err)
	}
	coll.Progress()
	for i := range hs {
		q, ok, err := takeRequest(call, hs[i])
		if err != nil {
			return fail(nil, err)
		}
		if ok && !q.done() {
			*flag = 0
			return C.MPI_SUCCESS
		}
	}
	// All complete: complete them as Waitall does.
	*flag = 1
	return gocoll_Waitall(count, reqs, statuses)
}

//export gocoll_Waitany
func gocoll_Waitany(count C.int, reqs *C.MPI_Request, index *C.int, status *C.MPI_Status) (rc C.int) {
	const call = "MPI_Waitany"
	defer guard(call, &rc)
	return anyOf(call, true, count, reqs, index, nil, status)
}

//export gocoll_Testany
func gocoll_Testany(count C.int, reqs *C.MPI_Request, index, flag *C.int, status *C.MPI_Status) (rc C.int) {
	const call = "MPI_Testany"
	defer guard(call, &rc)
	if flag == nil {
		return fail(nil, argNull(call, "flag"))
	}
	return anyOf(call, false, count, reqs, index, flag, status)
}

// anyOf is Waitany (wait) and Testany: it completes one active request
// and sets *index to it, or MPI_UNDEFINED where none is active.
func anyOf(call string, wait bool, count C.int, reqs *C.MPI_Request, index, flag *C.int, status *C.MPI_Status) C.int {
	hs, err := requestArray(call, count, reqs)
	if err == nil && index == nil {
		err = argNull(call, "index")
	}
	if err != nil {
		return fail(nil, err)
	}
	var b pause.Backoff
	for {
		active := false
		for i := range hs {
			q, ok, err := takeRequest(call, hs[i])
			if err != nil {
				return fail(nil, err)
			}
			if !ok || q.cr != nil && !q.cr.Active() {
				continue
			}
			active = true
			done, st, err := q.test()
			if !done {
				continue
			}
			*index = C.int(i)
			if flag != nil {
				*flag = 1
			}
			err = p2pError(call, err)
			setStatus(status, st, err)
			retire(q, &hs[i])
			return fail(q.comm, err)
		}
		if !active {
			*index = C.MPI_UNDEFINED
			if flag != nil {
				*flag = 1
			}
			setStatus(status, emptyStatus, nil)
			return C.MPI_SUCCESS
		}
		if !wait {
			*index = C.MPI_UNDEFINED
			*flag = 0
			return C.MPI_SUCCESS
		}
		b.Idle()
	}
}

//export gocoll_Start
func gocoll_Start(req *C.MPI_Request) (rc C.int) {
	const call = "MPI_Start"
	defer guard(call, &rc)
	if err := ready(call); err != nil {
		return fail(nil, err)
	}
	if req == nil {
		return fail(nil, argNull(call, "request"))
	}
	return start(call, *req)
}

//export gocoll_Startall
func gocoll_Startall(count C.int, reqs *C.MPI_Request) (rc C.int) {
	const call = "MPI_Startall"
	defer guard(call, &rc)
	hs, err := requestArray(call, count, reqs)
	if err != nil {
		return fail(nil, err)
	}
	for _, h := range hs {
		if rc := start(call, h); rc != C.MPI_SUCCESS {
			return rc
		}
	}
	return C.MPI_SUCCESS
}

// start starts the persistent request h.
func start(call string, h C.MPI_Request) C.int {
	q, ok, err := takeRequest(call, h)
	if err == nil && (!ok || q.cr == nil || !q.cr.Persistent()) {
		err = mpierr.New(call, mpierr.Request, "not a persistent request (MPI_Start starts what MPI_*_init made)")
	}
	if err != nil {
		return fail(nil, err)
	}
	C.gocoll_fast_hold(1)
	if err := q.cr.Start(); err != nil {
		C.gocoll_fast_hold(-1)
		return fail(q.comm, err)
	}
	q.held = true
	return C.MPI_SUCCESS
}

//export gocoll_Request_free
func gocoll_Request_free(req *C.MPI_Request) (rc C.int) {
	const call = "MPI_Request_free"
	defer guard(call, &rc)
	if err := ready(call); err != nil {
		return fail(nil, err)
	}
	if req == nil {
		return fail(nil, argNull(call, "request"))
	}
	q, ok, err := takeRequest(call, *req)
	if err == nil && !ok {
		err = mpierr.New(call, mpierr.Request, "request is MPI_REQUEST_NULL")
	}
	if err != nil {
		return fail(nil, err)
	}
	// An active request still completes (MPI): gocoll completes it here,
	// as its buffers may be reused once the program learns it is done.
	if q.cr != nil && q.cr.Active() || q.r != nil && !q.done() {
		q.wait()
	}
	freeRequest(req)
	return C.MPI_SUCCESS
}
