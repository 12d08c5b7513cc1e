package main

/*
#include "mpi.h"
*/
import "C"

import (
	"errors"
	"unsafe"

	"github.com/gocoll/gocoll/coll"
	"github.com/gocoll/gocoll/gpu"
	"github.com/gocoll/gocoll/internal/pause"
	"github.com/gocoll/gocoll/mpierr"
	"github.com/gocoll/gocoll/p2p"
	"github.com/gocoll/gocoll/transport"
)

const statusIgnore = 1 // MPI_STATUS_IGNORE and MPI_STATUSES_IGNORE are (MPI_Status *)1

func setStatus(st *C.MPI_Status, s p2p.Status, err error) {
	if st == nil || uintptr(unsafe.Pointer(st)) == statusIgnore {
		return
	}
	st.count_lo = C.int(s.Count)
	st.count_hi_and_cancelled = 0
	st.MPI_SOURCE = C.int(s.Source)
	st.MPI_TAG = C.int(s.Tag)
	st.MPI_ERROR = C.int(mpierr.ClassOf(err))
}

// message is a point-to-point buffer, classified once, at the entry:
// host memory as Go bytes, CUDA memory by address (dev), which only the
// driver touches (p2p stages it through pinned host memory).
type message struct {
	host []byte
	dev  *gpu.Buffer
}

// p2pArgs decodes the arguments every point-to-point call shares; arg
// names the buffer in errors.
func p2pArgs(call, arg string, buf unsafe.Pointer, count C.int, dt C.MPI_Datatype, peer, tag C.int, comm C.MPI_Comm, recv bool) (*commEntry, message, int, error) {
	e, err := prologue(call, comm)
	if err != nil {
		return nil, message{}, 0, err
	}
	d, err := lookupType(call, dt)
	if err != nil {
		return e, message{}, 0, err
	}
	if err := checkCount(call, "count", int64(count)); err != nil {
		return e, message{}, 0, err
	}
	p := int(peer)
	switch {
	case p == p2p.ProcNull, recv && p == p2p.AnySource:
	case p < 0 || p >= e.c.Size():
		return e, message{}, 0, mpierr.New(call, mpierr.Rank, "rank %d is not in the communicator (size %d)", p, e.c.Size())
	}
	if tag < 0 && !(recv && tag == p2p.AnyTag) {
		return e, message{}, 0, mpierr.New(call, mpierr.Tag, "invalid tag %d", int(tag))
	}
	b, err := cbuf(call, arg, buf, int64(count)*int64(d.size()))
	if err != nil || len(b) == 0 {
		return e, message{host: b}, d.size(), err
	}
	if m := e.c.Memory(uintptr(buf)); m.OnDevice() {
		return e, message{dev: &gpu.Buffer{Ptr: uintptr(buf), Len: len(b), Mem: m}}, d.size(), nil
	}
	return e, message{host: b}, d.size(), nil
}

// isend and irecv start a send or receive of m, on the host or staged
// from or to device memory.
func (e *commEntry) isend(m message, dest, tag C.int) (*p2p.Request, error) {
	if m.dev != nil {
		return e.p2p.IsendDevice(e.c.CUDA(), *m.dev, int(dest), int(tag))
	}
	return e.p2p.Isend(m.host, int(dest), int(tag))
}

func (e *commEntry) irecv(m message, src, tag C.int) (*p2p.Request, error) {
	if m.dev != nil {
		return e.p2p.IrecvDevice(e.c.CUDA(), *m.dev, int(src), int(tag))
	}
	return e.p2p.Irecv(m.host, int(src), int(tag))
}

// p2pError turns a p2p or transport error into an MPI error.
func p2pError(call string, err error) error {
	if err == nil {
		return nil
	}
	class := mpierr.Other
	switch {
	case errors.Is(err, p2p.ErrTruncate):
		class = mpierr.Truncate
	case errors.Is(err, transport.ErrPeerFailed), errors.Is(err, transport.ErrTimeout):
		class = mpierr.ProcAborted
	}
	return &mpierr.Error{Call: call, Class: class, Msg: "point-to-point message failed", Err: err}
}

//export gocoll_Send
func gocoll_Send(buf unsafe.Pointer, count C.int, dt C.MPI_Datatype, dest, tag C.int, comm C.MPI_Comm) (rc C.int) {
	const call = "MPI_Send"
	defer guard(call, &rc)
	e, m, _, err := p2pArgs(call, "buf", buf, count, dt, dest, tag, comm, false)
	if err != nil {
		return fail(e, err)
	}
	r, err := e.isend(m, dest, tag)
	if err == nil {
		_, err = waitP2P(r)
	}
	return fail(e, p2pError(call, err))
}

//export gocoll_Recv
func gocoll_Recv(buf unsafe.Pointer, count C.int, dt C.MPI_Datatype, src, tag C.int, comm C.MPI_Comm, status *C.MPI_Status) (rc C.int) {
	const call = "MPI_Recv"
	defer guard(call, &rc)
	e, m, _, err := p2pArgs(call, "buf", buf, count, dt, src, tag, comm, true)
	if err != nil {
		return fail(e, err)
	}
	r, err := e.irecv(m, src, tag)
	var st p2p.Status
	if err == nil {
		st, err = waitP2P(r)
	}
	err = p2pError(call, err)
	setStatus(status, st, err)
	return fail(e, err)
}

//export gocoll_Sendrecv
func gocoll_Sendrecv(sbuf unsafe.Pointer, scount C.int, stype C.MPI_Datatype, dest, stag C.int,
	rbuf unsafe.Pointer, rcount C.int, rtype C.MPI_Datatype, src, rtag C.int, comm C.MPI_Comm, status *C.MPI_Status) (rc C.int) {
	const call = "MPI_Sendrecv"
	defer guard(call, &rc)
	e, sm, _, err := p2pArgs(call, "sendbuf", sbuf, scount, stype, dest, stag, comm, false)
	if err != nil {
		return fail(e, err)
	}
	_, rm, _, err := p2pArgs(call, "recvbuf", rbuf, rcount, rtype, src, rtag, comm, true)
	if err != nil {
		return fail(e, err)
	}
	rr, err := e.irecv(rm, src, rtag)
	if err != nil {
		return fail(e, p2pError(call, err))
	}
	sr, err := e.isend(sm, dest, stag)
	if err != nil {
		return fail(e, p2pError(call, err))
	}
	_, serr := waitP2P(sr)
	st, rerr := waitP2P(rr)
	err = p2pError(call, errors.Join(serr, rerr))
	setStatus(status, st, err)
	return fail(e, err)
}

// waitP2P waits for a point-to-point request. While collective requests
// are in flight it moves them too: the peer this rank waits for may
// itself wait for one of them (MPI's progress rule).
func waitP2P(r *p2p.Request) (p2p.Status, error) {
	if !coll.InFlight() {
		return r.Wait()
	}
	var b pause.Backoff
	for {
		if done, st, err := r.Test(); done {
			return st, err
		}
		coll.Progress() // nothing once the requests are done
		b.Idle()
	}
}

func addRequest(e *commEntry, r *p2p.Request, elem int) C.MPI_Request {
	state.Lock()
	defer state.Unlock()
	return C.MPI_Request(state.requests.add(&request{r: r, comm: e, elem: elem}))
}

//export gocoll_Isend
func gocoll_Isend(buf unsafe.Pointer, count C.int, dt C.MPI_Datatype, dest, tag C.int, comm C.MPI_Comm, req *C.MPI_Request) (rc C.int) {
	const call = "MPI_Isend"
	defer guard(call, &rc)
	return startRequest(call, false, buf, count, dt, dest, tag, comm, req)
}

//export gocoll_Irecv
func gocoll_Irecv(buf unsafe.Pointer, count C.int, dt C.MPI_Datatype, src, tag C.int, comm C.MPI_Comm, req *C.MPI_Request) (rc C.int) {
	const call = "MPI_Irecv"
	defer guard(call, &rc)
	return startRequest(call, true, buf, count, dt, src, tag, comm, req)
}

// startRequest is MPI_Isend (recv false) or MPI_Irecv (recv true): peer
// is the destination or the source.
func startRequest(call string, recv bool, buf unsafe.Pointer, count C.int, dt C.MPI_Datatype, peer, tag C.int, comm C.MPI_Comm, req *C.MPI_Request) C.int {
	e, m, size, err := p2pArgs(call, "buf", buf, count, dt, peer, tag, comm, recv)
	if err == nil && req == nil {
		err = argNull(call, "request")
	}
	if err != nil {
		return fail(e, err)
	}
	var r *p2p.Request
	if recv {
		r, err = e.irecv(m, peer, tag)
	} else {
		r, err = e.isend(m, peer, tag)
	}
	if err != nil {
		return fail(e, p2pError(call, err))
	}
	*req = addRequest(e, r, size)
	return C.MPI_SUCCESS
}

// takeRequest finds a request; ok is false for MPI_REQUEST_NULL.
func takeRequest(call string, h C.MPI_Request) (*request, bool, error) {
	if h == reqNull {
		return nil, false, nil
	}
	state.Lock()
	r, ok := state.requests.get(uint32(h))
	state.Unlock()
	if !ok {
		return nil, false, mpierr.New(call, mpierr.Request, "invalid request (handle %#x)", uint32(h))
	}
	return r, true, nil
}

func freeRequest(h *C.MPI_Request) {
	state.Lock()
	state.requests.remove(uint32(*h))
	state.Unlock()
	*h = reqNull
}

// emptyStatus is the status of a null request.
var emptyStatus = p2p.Status{Source: p2p.AnySource, Tag: p2p.AnyTag}

//export gocoll_Get_count
func gocoll_Get_count(status *C.MPI_Status, dt C.MPI_Datatype, count *C.int) (rc C.int) {
	const call = "MPI_Get_count"
	defer guard(call, &rc)
	if status == nil || uintptr(unsafe.Pointer(status)) == statusIgnore || count == nil {
		return fail(nil, mpierr.New(call, mpierr.Arg, "status or count is NULL"))
	}
	d, err := lookupType(call, dt)
	if err != nil {
		return fail(nil, err)
	}
	n := int(status.count_lo)
	switch {
	case d.size() == 0:
		*count = 0
	case n%d.size() != 0:
		*count = C.MPI_UNDEFINED
	default:
		*count = C.int(n / d.size())
	}
	return C.MPI_SUCCESS
}
