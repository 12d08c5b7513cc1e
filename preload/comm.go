package main

/*
#include "preload.h"
*/
import "C"

import (
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"unsafe"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/bootstrap"
	"github.com/gocoll/gocoll/coll"
	"github.com/gocoll/gocoll/coll/counters"
	"github.com/gocoll/gocoll/intranode/engine"
	"github.com/gocoll/gocoll/mpierr"
	"github.com/gocoll/gocoll/transport"
	"github.com/gocoll/gocoll/transport/hostmpi"
	"github.com/gocoll/gocoll/transport/inproc"
	"github.com/gocoll/gocoll/transport/route"
	"github.com/gocoll/gocoll/transport/shm"
)

// commState is gocoll's side of one user communicator: its private
// duplicate, its transports and its coll.Comm. It is made at the first
// call gocoll runs on the communicator and freed by the delete callback
// of the communicator's attribute (MPI_Comm_free), or at MPI_Finalize.
type commState struct {
	id         C.int
	cs         *C.struct_gc_comm // the C half's state (C memory)
	comm       C.gc_handle       // the user's communicator
	name       string
	rank, size int
	dup        C.gc_handle // 0 for a one-rank communicator
	t          transport.Transport
	c          *coll.Comm
	counts     []int // Reduce_scatter's recvcounts, reused
	transports string
	oneHost    bool                // every rank shares this host
	nodes      *algorithms.NodeMap // which ranks share a node, from their host ids
	cells      map[cellKey]*trial  // run-time tuning's cells (tune.go)
}

// comms holds every live commState by id, and counts them for the
// finalize report.
var comms = struct {
	sync.Mutex
	byID                        map[C.int]*commState
	next                        C.int
	setUp, freed, dups, dupsOut int
}{byID: map[C.int]*commState{}}

// stateOf returns the call's commState, setting the communicator up at
// its first call (fresh is then true).
func stateOf(c *C.struct_gc_call) (st *commState, fresh bool, err error) {
	if id := c.cs.id; id != 0 {
		comms.Lock()
		st := comms.byID[id]
		comms.Unlock()
		if st == nil {
			return nil, false, fmt.Errorf("gocoll: communicator state %d is gone", id)
		}
		return st, false, nil
	}
	st, err = setUp(c)
	if err != nil {
		return nil, false, err
	}
	comms.Lock()
	comms.next++
	id := comms.next
	comms.Unlock()
	if st.name == "" {
		st.name = fmt.Sprintf("comm%d", id)
	}
	c0, err := coll.NewComm(st.t, identity(st.size), 1, st.name, cfg.coll)
	if err != nil {
		st.close()
		return nil, false, err
	}
	if err := c0.SetNodes(st.nodes); err != nil {
		st.close()
		return nil, false, err
	}
	st.c = c0
	if st.size > 1 && st.oneHost {
		// The shm algorithms' shared segment: collective over the new
		// communicator, all or none.
		if err := c0.AttachShared(); err != nil {
			st.transports += fmt.Sprintf("; no shared segment: %v", err)
		} else {
			st.transports += "; shared segment"
		}
	}
	st.id = id
	comms.Lock()
	comms.byID[id] = st
	comms.setUp++
	if st.dup != 0 {
		comms.dups++
	}
	comms.Unlock()
	c.cs.id = id
	st.attachEngine()
	if cfg.debug {
		fmt.Fprintf(os.Stderr, "gocoll: rank %d: %s set up: p=%d on %s, %s\n", st.rank, st.name, st.size, st.c.Nodes(), st.transports)
	}
	return st, true, nil
}

func identity(n int) []int {
	r := make([]int, n)
	for i := range r {
		r[i] = i
	}
	return r
}

// setUp makes gocoll's side of the call's communicator. It is collective
// over the communicator (every rank is in the same call): it duplicates
// it, exchanges host names over the duplicate, builds shared memory
// between the ranks of each host and the host MPI's point-to-point
// between hosts, and finally agrees, with an allreduce on the user's
// communicator, that every rank succeeded. If one did not, every rank
// gives up gocoll on this communicator, so that all hand it to the host.
func setUp(c *C.struct_gc_call) (*commState, error) {
	st := &commState{cs: c.cs, comm: c.comm, rank: int(c.cs.rank), size: int(c.cs.size), name: commName(c.comm)}
	err := st.build(c.comm)
	ok := C.int(1)
	if err != nil {
		ok = 0
	}
	if rc := C.gc_allreduce_min_int(c.comm, &ok); rc != 0 && err == nil {
		err = check("MPI_Allreduce", rc)
	}
	if err == nil && ok == 0 {
		err = errors.New("another rank could not set gocoll up")
	}
	if err != nil {
		st.close()
		return nil, err
	}
	return st, nil
}

func (st *commState) build(comm C.gc_handle) error {
	if st.size == 1 {
		st.t = inproc.New(1)[0]
		st.transports = "one rank"
		st.nodes = algorithms.NewNodeMap([]string{bootstrap.HostID()})
		return nil
	}
	if err := check("MPI_Comm_create", C.gc_dup(comm, &st.dup)); err != nil {
		st.dup = 0
		return err
	}
	kvs := bootstrap.Gathered(st.rank, st.size, allgatherOn(st.dup, st.size))
	// Every rank's host id, for the node map: it travels with the shared-
	// memory transport's first exchange (a fence of its own without one).
	if err := kvs.Put(fmt.Sprintf("gocoll-host-%d", st.rank), hex.EncodeToString([]byte(bootstrap.HostID()))); err != nil {
		return err
	}
	var sm *shm.Endpoint
	if cfg.transport != "hostmpi" {
		var err error
		if sm, err = shm.New(kvs, shm.Options{Timeout: cfg.timeout}); err != nil {
			return fmt.Errorf("shared-memory transport: %w", err)
		}
	} else if err := kvs.Fence(); err != nil {
		return err
	}
	hosts := make([]string, st.size)
	for r := range hosts {
		h, err := kvs.Get(fmt.Sprintf("gocoll-host-%d", r))
		if err != nil {
			if sm != nil {
				sm.Close()
			}
			return err
		}
		hosts[r] = h
	}
	st.nodes = algorithms.NewNodeMap(hosts)
	// The transports in order of preference: shared memory to the ranks
	// on this host, the host MPI's point-to-point to any rank. Sharing a
	// host is symmetric, as route requires.
	var plan *route.Plan
	table := route.Table{{
		Name:    "shm",
		Reaches: func(peer int) bool { return sm != nil && sm.Reaches(peer) },
		New:     func() (transport.Transport, error) { return sm, nil },
		Unused: func() {
			if sm != nil {
				sm.Close()
			}
		},
	}, {
		Name:    "hostmpi",
		Reaches: func(int) bool { return true },
		New: func() (transport.Transport, error) {
			m, err := newPMPIComm(st.dup, st.rank, st.size)
			if err != nil {
				return nil, err
			}
			var idle func()
			if plan.Uses("shm") {
				// While waiting for other hosts, keep serving this one
				// (see package hostmpi, "Progress").
				idle = func() { sm.Start(nil) }
			}
			return hostmpi.New(m, hostmpi.Options{Idle: idle})
		},
	}}
	plan, err := table.Pick(st.rank, st.size, cfg.transport)
	if err != nil {
		if sm != nil {
			sm.Close()
		}
		return err
	}
	st.transports = plan.String()
	st.oneHost = !plan.Uses("hostmpi")
	st.t, err = plan.Build()
	return err
}

// attachEngine lets the engine's C half (shim.c) run small shm calls on
// the communicator's shared segment, if it has one.
func (st *commState) attachEngine() {
	lay, ok := st.c.SharedLayout()
	crowded, usable := engine.Attachable(lay)
	if !ok || !usable {
		return // no segment, or not the layout the C half was built for: Go runs the calls
	}
	C.gc_attach_shm(st.cs, lay.Base, C.int(lay.P), C.int(lay.Rank), C.long(lay.Slot), C.long(lay.DataOffset), C.int(crowded))
}

// gc_shm_wait finishes a step the engine's C half stopped waiting for
// on communicator id's segment: 0, or gocoll's MPI error class after
// saying what went wrong (a dead or stalled peer, the timeout).
//
//export gc_shm_wait
func gc_shm_wait(id, call C.int) (rc C.int) {
	name := counters.Call(call).String()
	defer func() {
		if v := recover(); v != nil {
			rc = internal(name, v)
		}
	}()
	comms.Lock()
	st := comms.byID[id]
	comms.Unlock()
	if st == nil {
		return internal(name, fmt.Sprintf("communicator state %d is gone", int(id)))
	}
	return st.result(st.c.WaitShared(name))
}

// result is what a call on the communicator returns to the C half: 0, or
// err's MPI class (gocoll's values) after saying what went wrong on
// standard error, unless the communicator's handler is
// MPI_ERRORS_RETURN (the C half calls the handler).
func (st *commState) result(err error) C.int {
	if err == nil {
		return 0
	}
	if C.gc_errhandler_returns(st.comm) == 0 {
		fmt.Fprintf(os.Stderr, "gocoll: %v (rank %d of %s)\n", err, st.rank, st.name)
	}
	return C.int(mpierr.ClassOf(err))
}

// close releases the transports and the duplicate.
func (st *commState) close() {
	if st.cs != nil {
		C.gc_detach_shm(st.cs) // before the segment goes
	}
	if st.c != nil {
		st.c.Close()
	}
	if st.t != nil {
		st.t.Close()
	}
	if st.dup != 0 {
		C.gc_comm_free(&st.dup)
		st.dup = 0
		comms.Lock()
		comms.dupsOut++
		comms.Unlock()
	}
}

// commName is the name in debug lines: MPI_COMM_WORLD, MPI_COMM_SELF, the
// MPI_Comm_set_name name, or, set later, comm<id>.
func commName(h C.gc_handle) string {
	switch h {
	case C.gc_world():
		return "MPI_COMM_WORLD"
	case C.gc_self():
		return "MPI_COMM_SELF"
	}
	var buf [256]C.char
	if C.gc_comm_name(h, &buf[0], C.int(len(buf))) != 0 {
		return ""
	}
	name := C.GoString(&buf[0])
	return strings.Map(func(r rune) rune {
		if r <= ' ' {
			return '_'
		}
		return r
	}, name)
}

// free drops a communicator's state (its attribute is being deleted).
func free(id C.int) {
	comms.Lock()
	st := comms.byID[id]
	delete(comms.byID, id)
	if st != nil {
		comms.freed++
	}
	comms.Unlock()
	if st != nil {
		st.close()
	}
}

// finish frees every communicator still alive, at MPI_Finalize, and says
// what the library did (GOCOLL_DEBUG=info, GOCOLL_REPORT=1).
func finish() {
	comms.Lock()
	live := make([]*commState, 0, len(comms.byID))
	for id, st := range comms.byID {
		live = append(live, st)
		delete(comms.byID, id)
	}
	setUp, freed, dups, dupsOut := comms.setUp, comms.freed, comms.dups, comms.dupsOut
	comms.Unlock()
	liveDups := dups - dupsOut
	for _, st := range live {
		st.cs.id = 0 // its attribute is deleted later, with nothing left to free
		st.close()
	}
	if cfg != nil && cfg.debug {
		fmt.Fprintf(os.Stderr, "gocoll: rank %d: finalize: communicators set up %d, freed %d, live %d; private duplicates made %d, freed %d, live %d; calls run by gocoll %d (on device memory %d), by the host MPI %d\n",
			int(C.gc_world_rank()), setUp, freed, len(live), dups, dupsOut, liveDups, gocollCalls.Load(), deviceCalls.Load(), hostCalls())
	}
	if cfg != nil && cfg.report {
		report()
		reportTuned(int(C.gc_world_rank()))
	}
	if cfg != nil && cfg.tune && cfg.tuneSave != "" && C.gc_world_rank() == 0 {
		if err := saveTuned(cfg.tuneSave); err != nil {
			fmt.Fprintf(os.Stderr, "gocoll: GOCOLL_TUNE_SAVE: %v\n", err)
		}
	}
}

var _ unsafe.Pointer
