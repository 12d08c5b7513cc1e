package main

/*
#include "mpi.h"
*/
import "C"

import (
	"fmt"
	"github.com/gocoll/gocoll/envvar"
	"os"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/coll"
	"github.com/gocoll/gocoll/coll/counters"
	"github.com/gocoll/gocoll/intranode/engine"
	"github.com/gocoll/gocoll/job"
	"github.com/gocoll/gocoll/mpierr"
	"github.com/gocoll/gocoll/ops"
	"github.com/gocoll/gocoll/p2p"
)

// lib is the library's life cycle.
var lib struct {
	sync.Mutex
	initialized, finalized bool
	job                    *job.Job
	cfg                    *coll.Config
	hub                    *p2p.Hub
	thread                 C.int
	world, self            *commEntry
}

func world() *commEntry {
	lib.Lock()
	defer lib.Unlock()
	return lib.world
}

func theJob() *job.Job {
	lib.Lock()
	defer lib.Unlock()
	return lib.job
}

// abortJob ends the whole job with the given exit code.
func abortJob(code int) {
	if code == 0 {
		code = 1
	}
	theJob().Abort(code, "gocoll: aborting the job")
}

// phase is where the library is in its life: it is read on every call,
// without a lock.
var phase atomic.Int32

const (
	phaseNew = iota
	phaseRunning
	phaseFinalized
)

// ready fails calls made before MPI_Init or after MPI_Finalize.
func ready(call string) error {
	switch phase.Load() {
	case phaseNew:
		return mpierr.New(call, mpierr.Other, "called before MPI_Init")
	case phaseFinalized:
		return mpierr.New(call, mpierr.Other, "called after MPI_Finalize")
	}
	return nil
}

//export gocoll_Init
func gocoll_Init() (rc C.int) {
	defer guard("MPI_Init", &rc)
	var provided C.int
	return gocoll_Init_thread(C.MPI_THREAD_SINGLE, &provided)
}

//export gocoll_Init_thread
func gocoll_Init_thread(required C.int, provided *C.int) (rc C.int) {
	const call = "MPI_Init"
	defer guard(call, &rc)
	lib.Lock()
	again := lib.initialized
	lib.Unlock()
	if again {
		if phase.Load() == phaseFinalized {
			return fail(nil, mpierr.New(call, mpierr.Other, "called after MPI_Finalize: MPI cannot be initialized again"))
		}
		return fail(nil, mpierr.New(call, mpierr.Other, "MPI is already initialized"))
	}
	// The settings are parsed once, here, and given to the job and to
	// every communicator.
	set, err := envvar.Parse(os.Getenv)
	if err != nil {
		return initFailed(err)
	}
	if err := ops.CapISA(set.OpsISA); err != nil {
		return initFailed(err)
	}
	j, err := job.StartWith(set)
	if err != nil {
		return initFailed(err)
	}
	cfg, err := coll.NewConfig(set)
	if err != nil {
		return initFailed(err)
	}
	cfg.JobID, cfg.Timeout = j.JobID, j.Timeout
	engine.SetCanonical(cfg.Reproducible) // the C fast path's reductions
	ranks := make([]int, j.Size)
	for i := range ranks {
		ranks[i] = i
	}
	w, err := coll.NewComm(j.T, ranks, 1, "MPI_COMM_WORLD", cfg)
	if err != nil {
		return initFailed(err)
	}
	s, err := coll.NewComm(j.T, []int{j.Rank}, 2, "MPI_COMM_SELF", cfg)
	if err != nil {
		return initFailed(err)
	}
	// Which ranks share a node, from the host ids the job exchanged:
	// sub-communicators derive theirs from it.
	if err := w.SetNodes(algorithms.NewNodeMap(j.Hosts)); err != nil {
		return initFailed(err)
	}
	if err := s.SetNodes(algorithms.NewNodeMap(j.Hosts[j.Rank : j.Rank+1])); err != nil {
		return initFailed(err)
	}
	if j.OneHost() && j.Size > 1 {
		// A shared segment lets the shm algorithms run; without one the
		// transport algorithms do.
		if err := w.AttachShared(); err != nil && cfg.Debug != nil {
			fmt.Fprintf(cfg.Debug, "gocoll: rank %d: no shared segment for MPI_COMM_WORLD: %v\n", j.Rank, err)
		}
	}
	hub := p2p.NewHub(j.T)
	we := &commEntry{c: w, p2p: hub.Comm(1, ranks, j.Rank), errh: errFatal, handle: commWorld}
	se := &commEntry{c: s, p2p: hub.Comm(2, []int{j.Rank}, 0), errh: errFatal, handle: commSelf}
	state.Lock()
	if state.comms.items == nil {
		state.comms.items = map[uint32]*commEntry{}
	}
	state.comms.items[commWorld], state.comms.items[commSelf] = we, se
	state.Unlock()
	fastAttach(we)
	enableFast()
	worldEntry.Store(we)
	lib.Lock()
	lib.initialized, lib.job, lib.cfg, lib.hub, lib.world, lib.self = true, j, cfg, hub, we, se
	phase.Store(phaseRunning)
	// Every thread level is served: communicators, the point-to-point hub
	// and the handle tables are safe for concurrent use.
	lib.thread = min(max(required, C.MPI_THREAD_SINGLE), C.MPI_THREAD_MULTIPLE)
	th := lib.thread
	lib.Unlock()
	if provided != nil {
		*provided = th
	}
	return C.MPI_SUCCESS
}

// initFailed reports a failure to start: there is no communicator yet, so
// the error is fatal.
func initFailed(err error) C.int {
	fmt.Fprintf(os.Stderr, "gocoll: MPI_Init: %v\n", err)
	os.Exit(1)
	return C.MPI_ERR_OTHER
}

// MPI_Initialized, MPI_Finalized, MPI_Get_version and
// MPI_Get_library_version may be called before MPI_Init and after
// MPI_Finalize (the standard says so); gocoll allows
// MPI_Get_processor_name too. A NULL output pointer is MPI_ERR_ARG, as in
// MPICH: before MPI_Init (no error handler yet) it ends the process
// (fail).

//export gocoll_Initialized
func gocoll_Initialized(flag *C.int) (rc C.int) {
	const call = "MPI_Initialized"
	defer guard(call, &rc)
	if flag == nil {
		return fail(nil, argNull(call, "flag"))
	}
	lib.Lock()
	defer lib.Unlock()
	*flag = cbool(lib.initialized)
	return C.MPI_SUCCESS
}

//export gocoll_Finalized
func gocoll_Finalized(flag *C.int) (rc C.int) {
	const call = "MPI_Finalized"
	defer guard(call, &rc)
	if flag == nil {
		return fail(nil, argNull(call, "flag"))
	}
	lib.Lock()
	defer lib.Unlock()
	*flag = cbool(lib.finalized)
	return C.MPI_SUCCESS
}

//export gocoll_Query_thread
func gocoll_Query_thread(provided *C.int) (rc C.int) {
	const call = "MPI_Query_thread"
	defer guard(call, &rc)
	if err := ready(call); err != nil {
		return fail(nil, err)
	}
	if provided == nil {
		return fail(nil, argNull(call, "provided"))
	}
	lib.Lock()
	defer lib.Unlock()
	*provided = lib.thread
	return C.MPI_SUCCESS
}

//export gocoll_Finalize
func gocoll_Finalize() (rc C.int) {
	const call = "MPI_Finalize"
	defer guard(call, &rc)
	if err := ready(call); err != nil {
		return fail(nil, err)
	}
	w := world()
	// No rank may close its transports while a peer still needs them
	// (gocoll's own barrier: the report counts the program's calls).
	if err := w.c.Sync(); err != nil {
		return fail(w, err)
	}
	lib.Lock()
	lib.finalized = true
	phase.Store(phaseFinalized)
	j, report := lib.job, lib.cfg.Report
	lib.Unlock()
	if report {
		counters.Report(os.Stderr, j.Rank)
	}
	state.Lock()
	for _, e := range state.comms.items {
		fastDetach(e)
		e.c.Close()
	}
	state.Unlock()
	if err := j.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "gocoll: MPI_Finalize: %v\n", err)
	}
	return C.MPI_SUCCESS
}

//export gocoll_Abort
func gocoll_Abort(comm C.MPI_Comm, code C.int) (rc C.int) {
	defer guard("MPI_Abort", &rc)
	j := theJob()
	rank := -1
	if j != nil {
		rank = j.Rank
	}
	fmt.Fprintf(os.Stderr, "gocoll: MPI_Abort called on rank %d with error code %d; aborting the job\n", rank, int(code))
	if j != nil {
		j.Abort(int(code), fmt.Sprintf("MPI_Abort on rank %d", rank))
	}
	os.Exit(int(code))
	return 0
}

//export gocoll_Get_version
func gocoll_Get_version(version, subversion *C.int) (rc C.int) {
	const call = "MPI_Get_version"
	defer guard(call, &rc)
	if version == nil || subversion == nil {
		return fail(nil, argNull(call, nullName(version == nil, "version", "subversion")))
	}
	*version, *subversion = C.MPI_VERSION, C.MPI_SUBVERSION
	return C.MPI_SUCCESS
}

// Version is gocoll's version, as MPI_Get_library_version reports it.
const Version = "0.1"

//export gocoll_Get_library_version
func gocoll_Get_library_version(version *C.char, resultlen *C.int) (rc C.int) {
	const call = "MPI_Get_library_version"
	defer guard(call, &rc)
	if version == nil || resultlen == nil {
		return fail(nil, argNull(call, nullName(version == nil, "version", "resultlen")))
	}
	s := fmt.Sprintf("gocoll %s (MPICH ABI; collectives: ring, recursive doubling/halving, Rabenseifner, Bruck, pairwise)", Version)
	*resultlen = putString(version, s, C.MPI_MAX_LIBRARY_VERSION_STRING)
	return C.MPI_SUCCESS
}

//export gocoll_Get_processor_name
func gocoll_Get_processor_name(name *C.char, resultlen *C.int) (rc C.int) {
	const call = "MPI_Get_processor_name"
	defer guard(call, &rc)
	if name == nil || resultlen == nil {
		return fail(nil, argNull(call, nullName(name == nil, "name", "resultlen")))
	}
	host, _ := os.Hostname()
	*resultlen = putString(name, host, C.MPI_MAX_PROCESSOR_NAME)
	return C.MPI_SUCCESS
}

// putString copies s (truncated to max-1 bytes) and a NUL into dst.
func putString(dst *C.char, s string, max int) C.int {
	if len(s) > max-1 {
		s = s[:max-1]
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(dst)), len(s)+1)
	copy(b, s)
	b[len(s)] = 0
	return C.int(len(s))
}

// nullName is a if first, else b: which of two pointers is NULL.
func nullName(first bool, a, b string) string {
	if first {
		return a
	}
	return b
}

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}
