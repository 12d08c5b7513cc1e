package main

/*
#include "preload.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/gocoll/gocoll/bootstrap"
	"github.com/gocoll/gocoll/transport/hostmpi"
)

// ptr is the address of a buffer for the host MPI (nil when empty).
func ptr(b []byte) unsafe.Pointer {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Pointer(unsafe.SliceData(b))
}

// mpiError is a host MPI error class returned by a PMPI call.
type mpiError struct {
	call  string
	class int
}

func (e *mpiError) Error() string {
	return fmt.Sprintf("%s failed (host MPI error class %d)", e.call, e.class)
}

func check(call string, rc C.int) error {
	if rc == 0 {
		return nil
	}
	return &mpiError{call, int(rc)}
}

// pmpiComm is the hostmpi transport's MPI: PMPI point-to-point calls on
// gocoll's private communicator. Its methods run on the goroutine that
// entered Go from the intercepted collective, so on the application's
// thread.
type pmpiComm struct {
	comm       C.gc_handle
	rank, size int
	ub         int
	truncate   int // the host's MPI_ERR_TRUNCATE
}

func newPMPIComm(comm C.gc_handle, rank, size int) (*pmpiComm, error) {
	var ub C.int
	if err := check("MPI_Comm_get_attr(MPI_TAG_UB)", C.gc_tag_ub(&ub)); err != nil {
		return nil, err
	}
	return &pmpiComm{comm: comm, rank: rank, size: size, ub: int(ub), truncate: int(C.gc_host_class(14))}, nil
}

func (m *pmpiComm) Rank() int  { return m.rank }
func (m *pmpiComm) Size() int  { return m.size }
func (m *pmpiComm) TagUB() int { return m.ub }

func (m *pmpiComm) Isend(buf []byte, peer, tag int) (hostmpi.Request, error) {
	var req C.gc_handle
	err := check("MPI_Isend", C.gc_isend(ptr(buf), C.int64_t(len(buf)), C.int(peer), C.int(tag), m.comm, &req))
	return hostmpi.Request(req), err
}

func (m *pmpiComm) Irecv(buf []byte, peer, tag int) (hostmpi.Request, error) {
	var req C.gc_handle
	err := check("MPI_Irecv", C.gc_irecv(ptr(buf), C.int64_t(len(buf)), C.int(peer), C.int(tag), m.comm, &req))
	return hostmpi.Request(req), err
}

func (m *pmpiComm) Test(r hostmpi.Request) (bool, hostmpi.Result) {
	req := C.gc_handle(r)
	var flag, source, class, cancelled C.int
	var n C.int64_t
	if rc := C.gc_test(&req, &flag, &n, &source, &class, &cancelled); rc != 0 {
		return true, hostmpi.Result{Err: check("MPI_Test", rc)}
	}
	if flag == 0 {
		return false, hostmpi.Result{}
	}
	res := hostmpi.Result{N: int(n), Source: int(source), Cancelled: cancelled != 0}
	switch {
	case class == 0 || res.Cancelled:
	case int(class) == m.truncate:
		res.Truncated = true
	default:
		res.Err = &mpiError{"MPI_Test", int(class)}
	}
	return true, res
}

func (m *pmpiComm) Cancel(r hostmpi.Request) error {
	req := C.gc_handle(r)
	return check("MPI_Cancel", C.gc_cancel(&req))
}

// allgatherOn is bootstrap's collective exchange over comm:
// PMPI_Allgather of the lengths, then PMPI_Allgatherv of the bytes.
func allgatherOn(comm C.gc_handle, size int) bootstrap.Allgather {
	return func(mine []byte) ([][]byte, error) {
		lens := make([]C.int, size)
		if err := check("MPI_Allgather", C.gc_allgather_int(comm, C.int(len(mine)), &lens[0])); err != nil {
			return nil, err
		}
		displs := make([]C.int, size)
		total := 0
		for i, n := range lens {
			displs[i] = C.int(total)
			total += int(n)
		}
		all := make([]byte, total)
		if err := check("MPI_Allgatherv", C.gc_allgatherv_bytes(comm, ptr(mine), C.int(len(mine)), ptr(all), &lens[0], &displs[0])); err != nil {
			return nil, err
		}
		out := make([][]byte, size)
		for i := range out {
			out[i] = all[displs[i] : int(displs[i])+int(lens[i])]
		}
		return out, nil
	}
}
