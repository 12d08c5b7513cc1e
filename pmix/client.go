//go:build cgo

package pmix

/*
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "pmix_dl.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"sync"
	"unsafe"

	"github.com/gocoll/gocoll/bootstrap"
)

// libName is the PMIx client library's soname (PMIx v2 to v5 keep it).
const libName = "libpmix.so.2"

// Client is one rank's connection to the PMIx server that started it
// (Open MPI's mpirun, Slurm's srun --mpi=pmix). It implements
// bootstrap.Launcher and bootstrap.NodeMapper. Its methods may be called
// from several goroutines; they are served one at a time, except Abort,
// which does not wait for a call in progress (a Fence, typically).
type Client struct {
	rank, size int
	nodes      []int
	launcher   string // for Name: "Open MPI mpirun", ...
	all        C.gc_pmix_proc_t
	kvs        bootstrap.KVS // Put, Fence and Get, carried by Allgather

	mu        sync.Mutex
	done      bool // after Finalize
	gen       int  // Allgathers so far, for their keys
	traffic   bootstrap.Traffic
	localGets int
}

var (
	_ bootstrap.Launcher   = (*Client)(nil)
	_ bootstrap.NodeMapper = (*Client)(nil)
)

// Init loads libpmix.so.2 and connects to the PMIx server that started
// this process, as its environment describes (see InEnv), then reads the
// job's size and every rank's node. It fails, naming the call, when there
// is no PMIx server in the environment, when the library is missing, or
// when the server cannot be reached.
func Init() (*Client, error) {
	in, launcher := InEnv()
	if !in {
		return nil, errors.New("pmix: no PMIx server in the environment (PMIX_NAMESPACE, PMIX_RANK and PMIX_SERVER_URI* are unset)")
	}
	if err := load(libName); err != nil {
		return nil, err
	}
	var me C.gc_pmix_proc_t
	if err := check("PMIx_Init", C.gocoll_pmix_init(&me)); err != nil {
		return nil, err
	}
	c := &Client{rank: int(me.rank), launcher: launcher, all: me}
	c.all.rank = C.GC_PMIX_RANK_WILDCARD
	c.traffic.Other = 1
	if err := c.readJob(); err != nil {
		C.gocoll_pmix_finalize()
		return nil, err
	}
	c.kvs = bootstrap.Gathered(c.rank, c.size, c.Allgather)
	return c, nil
}

// load opens the library named name, or says why it cannot.
func load(name string) error {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var buf [512]C.char
	if C.gocoll_pmix_load(cname, &buf[0], C.int(len(buf))) != 0 {
		return errors.New(C.GoString(&buf[0]))
	}
	return nil
}

// Version is the loaded library's version string ("OpenPMIx 4.2.2...").
func Version() (string, error) {
	if err := load(libName); err != nil {
		return "", err
	}
	return C.GoString(C.gocoll_pmix_version()), nil
}

// Error is a failed PMIx call.
type Error struct {
	Call   string // "PMIx_Init", "PMIx_Get(pmix.job.size)", ...
	Status int    // pmix_status_t
	Name   string // from PMIx_Error_string
}

func (e *Error) Error() string {
	return fmt.Sprintf("pmix: %s: %s (%d)", e.Call, e.Name, e.Status)
}

// check turns a pmix_status_t into an error.
func check(call string, st C.gc_pmix_status_t) error {
	if st == C.GC_PMIX_SUCCESS {
		return nil
	}
	e := &Error{Call: call, Status: int(st), Name: "unknown status"}
	if s := C.gocoll_pmix_error_string(st); s != nil {
		e.Name = C.GoString(s)
	}
	return e
}

// readJob reads the job's size and the node of every rank: job-level
// data the server hands over at PMIx_Init, so local gets.
func (c *Client) readJob() error {
	size, err := c.getInt(C.GC_PMIX_RANK_WILDCARD, C.GC_PMIX_JOB_SIZE)
	if err != nil {
		return err
	}
	if size < 1 || c.rank >= size {
		return fmt.Errorf("pmix: rank %d of a job of size %d", c.rank, size)
	}
	c.size = size
	// Node ids as PMIx numbers them, else host names, renumbered 0, 1, ...
	// in order of first appearance.
	ids := map[string]int{}
	c.nodes = make([]int, size)
	for r := range size {
		var id string
		n, err := c.getInt(C.gc_pmix_rank_t(r), C.GC_PMIX_NODEID)
		if err == nil {
			id = strconv.Itoa(n)
		} else if id, err = c.getString(C.gc_pmix_rank_t(r), C.GC_PMIX_HOSTNAME); err != nil {
			return fmt.Errorf("pmix: the server gives neither the node id nor the host of rank %d: %w", r, err)
		}
		if _, ok := ids[id]; !ok {
			ids[id] = len(ids)
		}
		c.nodes[r] = ids[id]
	}
	return nil
}

// get reads key of rank (or of the job, for PMIX_RANK_WILDCARD) from the
// local store first (PMIX_OPTIONAL), and asks the server only if it is
// not there. f reads the value before it is released. The caller holds
// c.mu or has not published c yet.
func (c *Client) get(rank C.gc_pmix_rank_t, name string, f func(*C.gc_pmix_value_t) error) error {
	key := C.CString(name)
	defer C.free(unsafe.Pointer(key))
	proc := c.all
	proc.rank = rank
	var v *C.gc_pmix_value_t
	st := C.gocoll_pmix_get(&proc, key, 1, &v)
	if st == C.GC_PMIX_SUCCESS {
		c.localGets++
	} else {
		if st = C.gocoll_pmix_get(&proc, key, 0, &v); st == C.GC_PMIX_SUCCESS {
			c.traffic.Gets++
		}
	}
	call := "PMIx_Get(" + name + ")"
	if rank != C.GC_PMIX_RANK_WILDCARD {
		call = fmt.Sprintf("PMIx_Get(rank %d, %s)", rank, name)
	}
	if err := check(call, st); err != nil {
		return err
	}
	defer C.gocoll_pmix_value_release(v)
	if err := f(v); err != nil {
		return fmt.Errorf("pmix: %s: %w", call, err)
	}
	return nil
}

func (c *Client) getInt(rank C.gc_pmix_rank_t, key string) (int, error) {
	var n C.longlong
	err := c.get(rank, key, func(v *C.gc_pmix_value_t) error {
		if C.gocoll_pmix_value_int(v, &n) != 0 {
			return fmt.Errorf("value of type %d is not a non-negative integer", v._type)
		}
		return nil
	})
	return int(n), err
}

func (c *Client) getString(rank C.gc_pmix_rank_t, key string) (string, error) {
	var s string
	err := c.get(rank, key, func(v *C.gc_pmix_value_t) error {
		p := C.gocoll_pmix_value_string(v)
		if p == nil {
			return fmt.Errorf("value of type %d is not a string", v._type)
		}
		s = C.GoString(p)
		return nil
	})
	return s, err
}

// Rank is this process's rank in the job, 0 <= Rank < Size.
func (c *Client) Rank() int { return c.rank }

// Size is the number of ranks in the job (PMIX_JOB_SIZE).
func (c *Client) Size() int { return c.size }

// Nodes returns the node of every rank, numbered 0, 1, ... in order of
// their lowest rank: ranks with equal numbers share a node.
func (c *Client) Nodes() ([]int, error) { return append([]int(nil), c.nodes...), nil }

// Name says "PMIx (<launcher>)" for messages.
func (c *Client) Name() string { return "PMIx (" + c.launcher + ")" }

// Put keeps a pair until the next Fence, which sends every pair put since
// the last one in one Allgather (bootstrap.Gathered): PMIx's own keys are
// per rank, gocoll's KVS keys are job-wide.
func (c *Client) Put(key, value string) error { return c.kvs.Put(key, value) }

// Fence is one Allgather of the pairs put since the last Fence.
func (c *Client) Fence() error { return c.kvs.Fence() }

// Get returns a value put by any rank before the last Fence.
func (c *Client) Get(key string) (string, error) { return c.kvs.Get(key) }

var errFinalized = errors.New("pmix: client already finalized")

// Allgather gives every rank's blob in rank order: PMIx_Put of this rank's
// blob under a key of its own, PMIx_Commit, one PMIx_Fence over the job
// with PMIX_COLLECT_DATA, which brings every rank's blob into the local
// store, then a local PMIx_Get per rank. Every rank must call it the same
// number of times.
func (c *Client) Allgather(mine []byte) ([][]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return nil, errFinalized
	}
	name := "gocoll.ag" + strconv.Itoa(c.gen)
	c.gen++
	key := C.CString(name)
	defer C.free(unsafe.Pointer(key))
	var p unsafe.Pointer
	if len(mine) > 0 {
		p = unsafe.Pointer(&mine[0])
	}
	if err := check("PMIx_Put", C.gocoll_pmix_put_bytes(key, p, C.size_t(len(mine)))); err != nil {
		return nil, err
	}
	// Commit sends what was put to the server: the round trip of the put.
	if err := check("PMIx_Commit", C.gocoll_pmix_commit()); err != nil {
		return nil, err
	}
	c.traffic.Puts++
	c.traffic.Bytes += len(name) + len(mine)
	if err := check("PMIx_Fence", C.gocoll_pmix_fence_collect(&c.all)); err != nil {
		return nil, err
	}
	c.traffic.Fences++
	out := make([][]byte, c.size)
	for r := range c.size {
		err := c.get(C.gc_pmix_rank_t(r), name, func(v *C.gc_pmix_value_t) error {
			var b *C.char
			var n C.size_t
			if C.gocoll_pmix_value_bytes(v, &b, &n) != 0 {
				return fmt.Errorf("value of type %d is not a byte object", v._type)
			}
			if n > math.MaxInt32 { // C.GoBytes takes an int
				return fmt.Errorf("blob of %d bytes", n)
			}
			out[r] = C.GoBytes(unsafe.Pointer(b), C.int(n))
			return nil
		})
		if err != nil {
			return nil, err
		}
		// The blobs came with the fence, whether the get was local or not.
		c.traffic.Bytes += len(name) + len(out[r])
	}
	return out, nil
}

// Traffic is what this rank has asked of the server: PMIx_Init as one
// request, a put (with its commit) and a fence per Allgather, and the
// gets that the local store could not serve (see LocalGets). Bytes counts
// the keys and values put and fetched.
func (c *Client) Traffic() bootstrap.Traffic {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.traffic
}

// LocalGets is the number of PMIx_Gets served by the local store (with
// PMIX_OPTIONAL), which Traffic does not count: job data from PMIx_Init
// and blobs brought by collecting fences.
func (c *Client) LocalGets() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.localGets
}

// Abort asks the server to kill the whole job with exit status code.
// Open MPI's mpirun does not show msg, so a non-empty one is written to
// standard error here first. Abort does not wait for a call in progress
// on another goroutine; a caller that gets control back (mpirun lets it)
// should exit with code.
func (c *Client) Abort(code int, msg string) error {
	if msg != "" {
		fmt.Fprintf(os.Stderr, "pmix: rank %d aborts the job with code %d: %s\n", c.rank, code, msg)
	}
	cmsg := C.CString(msg)
	defer C.free(unsafe.Pointer(cmsg))
	return check("PMIx_Abort", C.gocoll_pmix_abort(C.int(code), cmsg))
}

// Finalize disconnects from the server; later calls fail.
func (c *Client) Finalize() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return errFinalized
	}
	c.done = true
	return check("PMIx_Finalize", C.gocoll_pmix_finalize())
}
