package main

/*
#include "preload.h"
*/
import "C"

import (
	"slices"
	"sync"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/coll"
	"github.com/gocoll/gocoll/mpierr"
)

// The Go half of the nonblocking and persistent collectives: a call the
// C half gives gocoll becomes a coll.Request, kept here by id; the C
// half's slot (requests.c) holds the id behind the application's handle.

// A preq is one of gocoll's requests and the communicator it runs on.
type preq struct {
	r  *coll.Request
	st *commState
}

var requests struct {
	sync.Mutex
	byID map[C.int]*preq
	next C.int
}

func requestOf(id C.int) *preq {
	requests.Lock()
	defer requests.Unlock()
	return requests.byID[id]
}

func dropRequest(id C.int) {
	requests.Lock()
	delete(requests.byID, id)
	requests.Unlock()
}

// gc_progress moves gocoll's requests on (the C half's progress hook).
//
//export gc_progress
func gc_progress() {
	defer func() {
		if v := recover(); v != nil {
			internal("moving requests", v)
		}
	}()
	coll.Progress()
}

// gc_new_request makes a request of a call that gocoll runs: nonblocking
// (started now) or persistent (started by MPI_Start). It returns as
// gc_run does, *id set on success.
//
//export gc_new_request
func gc_new_request(c *C.struct_gc_call, persistent C.int, id *C.int) (rc C.int) {
	cl := algorithms.Collective(c.coll)
	defer func() {
		if v := recover(); v != nil {
			rc = internal(cl.String(), v)
		}
	}()
	form := " nonblocking"
	if persistent != 0 {
		form = " persistent"
	}
	st, a, rc, ok := prepare(c, form)
	if !ok {
		return rc
	}
	// args lends the communicator's counts slice, which the next call
	// reuses: a request keeps its own.
	a.Counts = slices.Clone(a.Counts)
	var r *coll.Request
	var err error
	switch {
	case cl == algorithms.Allreduce && persistent != 0:
		r, err = st.c.AllreduceInit(a)
	case cl == algorithms.Allreduce:
		r, err = st.c.Iallreduce(a)
	case cl == algorithms.ReduceScatter && persistent != 0:
		r, err = st.c.ReduceScatterInit(a)
	case cl == algorithms.ReduceScatter:
		r, err = st.c.IreduceScatter(a)
	case cl == algorithms.ReduceScatterBlock && persistent != 0:
		r, err = st.c.ReduceScatterBlockInit(a)
	case cl == algorithms.ReduceScatterBlock:
		r, err = st.c.IreduceScatterBlock(a)
	case persistent != 0:
		r, err = st.c.AllgatherInit(a)
	default:
		r, err = st.c.Iallgather(a)
	}
	if err != nil {
		return st.result(err)
	}
	requests.Lock()
	if requests.byID == nil {
		requests.byID = map[C.int]*preq{}
	}
	for requests.next++; requests.next <= 0 || requests.byID[requests.next] != nil; requests.next++ {
	}
	*id = requests.next
	requests.byID[*id] = &preq{r: r, st: st}
	requests.Unlock()
	return 0
}

// gc_request_test moves requests on and sets *flag when request id is
// complete (then inactive; dropped if drop, a nonblocking one), returning
// its error class.
//
//export gc_request_test
func gc_request_test(id C.int, flag *C.int, drop C.int) (rc C.int) {
	defer func() {
		if v := recover(); v != nil {
			*flag = 1
			rc = internal("MPI_Test", v)
		}
	}()
	q := requestOf(id)
	if q == nil {
		*flag = 1
		return 0
	}
	done, err := q.r.Test()
	if !done {
		*flag = 0
		return 0
	}
	*flag = 1
	if drop != 0 {
		dropRequest(id)
	}
	return q.st.result(err)
}

// gc_request_wait completes request id: as gc_request_test, done.
//
//export gc_request_wait
func gc_request_wait(id C.int, drop C.int) (rc C.int) {
	defer func() {
		if v := recover(); v != nil {
			rc = internal("MPI_Wait", v)
		}
	}()
	q := requestOf(id)
	if q == nil {
		return 0
	}
	err := q.r.Wait()
	if drop != 0 {
		dropRequest(id)
	}
	return q.st.result(err)
}

// gc_request_done moves requests on and reports, completing nothing,
// whether request id is complete (MPI_Testall, MPI_Request_get_status).
//
//export gc_request_done
func gc_request_done(id C.int) (rc C.int) {
	defer func() {
		if v := recover(); v != nil {
			rc = 1
			internal("MPI_Request_get_status", v)
		}
	}()
	q := requestOf(id)
	if q == nil {
		return 1
	}
	if !q.r.Done() {
		coll.Progress()
	}
	if q.r.Done() || !q.r.Active() {
		return 1
	}
	return 0
}

// gc_request_start starts the persistent request id.
//
//export gc_request_start
func gc_request_start(id C.int) (rc C.int) {
	defer func() {
		if v := recover(); v != nil {
			rc = internal("MPI_Start", v)
		}
	}()
	q := requestOf(id)
	if q == nil {
		return C.int(mpierr.Request)
	}
	return q.st.result(q.r.Start())
}

// gc_request_free drops request id, completing it first if active (MPI:
// a freed active request still completes).
//
//export gc_request_free
func gc_request_free(id C.int) (rc C.int) {
	defer func() {
		if v := recover(); v != nil {
			rc = internal("MPI_Request_free", v)
		}
	}()
	q := requestOf(id)
	if q == nil {
		return 0
	}
	dropRequest(id)
	if q.r.Active() {
		return q.st.result(q.r.Wait())
	}
	return 0
}
