// Package counters counts, per collective call, which path ran it: the C
// fast path, gocoll's Go half, each algorithm, a forced algorithm's
// fallback, and under LD_PRELOAD the host MPI and the decision cache. It
// is what GOCOLL_REPORT=1 prints at MPI_Finalize, what the Go API's
// mpi.Counters returns and what the test hook gocoll_test_counter reads.
//
// Counting is one atomic add on a fixed table: it allocates nothing and
// takes no lock, so it stays on in every run (it never changes which path
// runs). The counts are the process's: ranks that share a process
// (mpi.RunLocal's goroutines) add to the same counters. Coll counts the
// calls Go runs (Ran); the algorithms' counters are indexed by the
// registry's IDs and reported by its names (package algorithms).
package counters

import (
	"fmt"
	"io"
	"strings"
	"sync/atomic"

	"github.com/gocoll/gocoll/algorithms"
)

// Call is a collective call, by its MPI name.
type Call uint8

const (
	Allreduce Call = iota
	ReduceScatter
	ReduceScatterBlock
	Allgather
	Allgatherv
	Barrier
	Bcast
	Reduce
	Gather
	numCalls
)

var callNames = [numCalls]string{
	"MPI_Allreduce", "MPI_Reduce_scatter", "MPI_Reduce_scatter_block", "MPI_Allgather",
	"MPI_Allgatherv", "MPI_Barrier", "MPI_Bcast", "MPI_Reduce", "MPI_Gather",
}

// collectives are the registry's collectives whose algorithms run each
// call: Allgatherv runs Allgather's, Barrier Allgather's bruck.
var collectives = [numCalls]algorithms.Collective{
	algorithms.Allreduce, algorithms.ReduceScatter, algorithms.ReduceScatterBlock, algorithms.Allgather,
	algorithms.Allgather, algorithms.Allgather, algorithms.Bcast, algorithms.Reduce, algorithms.Gather,
}

// String returns the call's MPI name, e.g. MPI_Allreduce.
func (c Call) String() string {
	if c < numCalls {
		return callNames[c]
	}
	return fmt.Sprintf("call(%d)", uint8(c))
}

// CallOf returns the call of an MPI name. It allocates nothing: coll calls
// it on every collective.
func CallOf(name string) (Call, bool) {
	switch name {
	case "MPI_Allreduce":
		return Allreduce, true
	case "MPI_Reduce_scatter":
		return ReduceScatter, true
	case "MPI_Reduce_scatter_block":
		return ReduceScatterBlock, true
	case "MPI_Allgather":
		return Allgather, true
	case "MPI_Allgatherv":
		return Allgatherv, true
	case "MPI_Barrier":
		return Barrier, true
	case "MPI_Bcast":
		return Bcast, true
	case "MPI_Reduce":
		return Reduce, true
	case "MPI_Gather":
		return Gather, true
	}
	return 0, false
}

// Path is a counter of every call that names no algorithm.
type Path uint8

const (
	// Fast counts calls completed by the C fast path (capi/fast.c)
	// without entering Go's collective code (a slow peer's wait may still
	// be handed to Go's futex wait).
	Fast Path = iota
	// Go counts calls that gocoll's Go half ran with an algorithm: the
	// algorithms' counters sum to it.
	Go
	// Fallback counts calls where a forced algorithm could not run and
	// the tuner's choice ran instead (GOCOLL_FALLBACK=warn or silent).
	Fallback
	// Host counts calls handed to the host MPI (LD_PRELOAD).
	Host
	// Cached counts calls decided from a communicator's decision cache
	// (LD_PRELOAD).
	Cached
	// Corrected counts calls gocoll ran where the tuner would have given
	// them to the host MPI, which is wrong on their (op, datatype)
	// (LD_PRELOAD).
	Corrected
	// Device counts the calls Go ran on CUDA device memory (their
	// algorithms' counters say how: oneshot, twoshot, hoststaged, a
	// schedule).
	Device
	// DeviceStaged counts device calls whose data went through the
	// device group's slots because a buffer could not be shared (a
	// twoshot allreduce, in chunks).
	DeviceStaged
	// DeviceFallback counts device calls the device group could not run
	// (a buffer without an IPC handle, one a peer could not map, or one
	// misaligned) that ran as the tuner's choice without it instead.
	DeviceFallback
	numPaths
)

var pathNames = [numPaths]string{"fast", "go", "fallback", "host", "cached", "corrected", "device", "device_staged", "device_fallback"}

// String returns the counter's name in reports and keys, e.g. fast.
func (p Path) String() string {
	if p < numPaths {
		return pathNames[p]
	}
	return fmt.Sprintf("path(%d)", uint8(p))
}

// table holds, per call, the paths' counters then one per algorithm ID.
var table [numCalls][]atomic.Int64

func init() {
	for c := range table {
		table[c] = make([]atomic.Int64, int(numPaths)+algorithms.NumIDs())
	}
}

// Add counts one call of c on path p.
func Add(c Call, p Path) { table[c][p].Add(1) }

// Ran counts one call of c run by Go with algorithm a, and a fallback if
// a is the tuner's choice after a forced algorithm could not run.
func Ran(c Call, a *algorithms.Algorithm, fallback bool) {
	t := table[c]
	t[Go].Add(1)
	if id := a.ID(); id >= 0 {
		t[int(numPaths)+id].Add(1)
	}
	if fallback {
		t[Fallback].Add(1)
	}
}

// sources read, per path, counts kept outside Go: the C fast path's
// array (libgocoll.so), the preload's C half's host and cache counters.
var sources [numPaths]atomic.Pointer[func(Call) int64]

// SetSource makes f, which reads counts of path p kept outside Go (in C),
// part of every call's counter of p. A Fast source also marks the
// process as having a fast path: its reports show fast even at 0.
func SetSource(p Path, f func(Call) int64) { sources[p].Store(&f) }

// Get returns call c's counter of path p.
func Get(c Call, p Path) int64 {
	n := table[c][p].Load()
	if f := sources[p].Load(); f != nil {
		n += (*f)(c)
	}
	return n
}

// Algorithm returns how many calls of c algorithm name ran; false if c
// has no such algorithm.
func Algorithm(c Call, name string) (int64, bool) {
	a, err := algorithms.Lookup(collectives[c], name)
	if err != nil || a.ID() < 0 {
		return 0, false
	}
	return table[c][int(numPaths)+a.ID()].Load(), true
}

// Lookup returns the counter named by key, "<call>.<counter>" (e.g.
// "MPI_Allreduce.fast", "MPI_Allreduce.ring"): the counter of this
// process, 0 if it never moved, -1 for an unknown call or counter name.
func Lookup(key string) int64 {
	name, counter, ok := strings.Cut(key, ".")
	if !ok {
		return -1
	}
	c, ok := CallOf(name)
	if !ok {
		return -1
	}
	for p := range numPaths {
		if counter == pathNames[p] {
			return Get(c, p)
		}
	}
	if n, ok := Algorithm(c, counter); ok {
		return n
	}
	return -1
}

// AlgorithmCount is how many calls one algorithm ran.
type AlgorithmCount struct {
	Name  string
	Calls int64
}

// Counts are one call's counters.
type Counts struct {
	Call       string
	HasFast    bool // the process has a C fast path (libgocoll.so)
	Fast, Go   int64
	Algorithms []AlgorithmCount // those that ran, by name
	Fallback   int64
	Host       int64
	Cached     int64
	Corrected  int64
	// Device, DeviceStaged and DeviceFallback: calls on CUDA memory (see
	// the Path constants).
	Device, DeviceStaged, DeviceFallback int64
}

// String is the report's form: `MPI_Allreduce fast=10 go=5 ring=3 shm=2`,
// the keys in that order (fast, go, the algorithms by name, device,
// device_staged, device_fallback, fallback, host, cached, corrected),
// those that are 0 left out except go, and fast where the
// process has a fast path (HasFast).
func (c Counts) String() string {
	var b strings.Builder
	b.WriteString(c.Call)
	if c.HasFast || c.Fast != 0 {
		fmt.Fprintf(&b, " fast=%d", c.Fast)
	}
	fmt.Fprintf(&b, " go=%d", c.Go)
	for _, a := range c.Algorithms {
		if a.Calls != 0 {
			fmt.Fprintf(&b, " %s=%d", a.Name, a.Calls)
		}
	}
	for _, kv := range []struct {
		k string
		v int64
	}{{"device", c.Device}, {"device_staged", c.DeviceStaged}, {"device_fallback", c.DeviceFallback},
		{"fallback", c.Fallback}, {"host", c.Host}, {"cached", c.Cached}, {"corrected", c.Corrected}} {
		if kv.v != 0 {
			fmt.Fprintf(&b, " %s=%d", kv.k, kv.v)
		}
	}
	return b.String()
}

// Of returns call c's counters.
func Of(c Call) Counts {
	out := Counts{Call: c.String(), HasFast: sources[Fast].Load() != nil, Fast: Get(c, Fast), Go: Get(c, Go), Fallback: Get(c, Fallback),
		Host: Get(c, Host), Cached: Get(c, Cached), Corrected: Get(c, Corrected),
		Device: Get(c, Device), DeviceStaged: Get(c, DeviceStaged), DeviceFallback: Get(c, DeviceFallback)}
	for _, a := range algorithms.All(collectives[c]) {
		if n := table[c][int(numPaths)+a.ID()].Load(); n != 0 {
			out.Algorithms = append(out.Algorithms, AlgorithmCount{a.Name, n})
		}
	}
	return out
}

// Snapshot returns the counters of every call that has a nonzero one, in
// a fixed order (Allreduce, Reduce_scatter, Reduce_scatter_block,
// Allgather, Allgatherv, Barrier, Bcast, Reduce, Gather).
func Snapshot() []Counts {
	var out []Counts
	for c := range numCalls {
		k := Of(c)
		if k.Fast != 0 || k.Go != 0 || len(k.Algorithms) != 0 || k.Fallback != 0 || k.Host != 0 || k.Cached != 0 || k.Corrected != 0 {
			out = append(out, k)
		}
	}
	return out
}

// Report writes GOCOLL_REPORT's lines for world rank rank, one per call
// with a nonzero counter:
//
//	gocoll: rank 0: report: MPI_Allreduce fast=10 go=5 ring=3 shm=2
func Report(w io.Writer, rank int) {
	var b strings.Builder
	for _, k := range Snapshot() {
		fmt.Fprintf(&b, "gocoll: rank %d: report: %s\n", rank, k)
	}
	io.WriteString(w, b.String()) // one write: lines of ranks sharing w stay whole
}
