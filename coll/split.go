package coll

import (
	"encoding/binary"
	"errors"
	"math/bits"
	"slices"
	"sync"

	"github.com/gocoll/gocoll/mpierr"
	"github.com/gocoll/gocoll/ops"
)

// maxContexts bounds the number of communicators that can exist at once in
// a process. Context ids 0..2 are reserved (0 unused, 1 world, 2 self).
const maxContexts = 8192

// contextPool hands out context ids. Every process of a job has one; a new
// communicator takes the lowest id that is free on all its members, found
// with a bitwise-AND allreduce of their free masks (disjoint groups made by
// one split may share an id: they never talk to each other).
type contextPool struct {
	mu   sync.Mutex
	used [maxContexts / 64]uint64
}

func newContextPool() *contextPool {
	p := &contextPool{}
	p.used[0] = 0b111
	return p
}

// freeMask returns the free ids as bytes (bit i set: id i free).
func (p *contextPool) freeMask() []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	b := make([]byte, len(p.used)*8)
	for i, w := range p.used {
		binary.LittleEndian.PutUint64(b[8*i:], ^w)
	}
	return b
}

// take marks id used.
func (p *contextPool) take(id uint32) {
	p.mu.Lock()
	p.used[id/64] |= 1 << (id % 64)
	p.mu.Unlock()
}

// release marks id free again.
func (p *contextPool) release(id uint32) {
	if id <= 2 {
		return
	}
	p.mu.Lock()
	p.used[id/64] &^= 1 << (id % 64)
	p.mu.Unlock()
}

// lowest returns the lowest id set in mask, or false.
func lowest(mask []byte) (uint32, bool) {
	for i := 0; i+8 <= len(mask); i += 8 {
		if w := binary.LittleEndian.Uint64(mask[i:]); w != 0 {
			return uint32(i*8 + bits.TrailingZeros64(w)), true
		}
	}
	return 0, false
}

// contexts returns the job's context pool.
func (cfg *Config) contexts() *contextPool {
	cfg.poolOnce.Do(func() { cfg.pool = newContextPool() })
	return cfg.pool
}

// newContext agrees on a context id with every rank of c: collective over c.
func (c *Comm) newContext(call string) (uint32, error) {
	mask := c.cfg.contexts().freeMask()
	// gocoll's own call: a fixed algorithm, whatever the user forced.
	err := c.Allreduce(Args{InPlace: true, Recv: mask, Count: len(mask) / 8, Type: ops.Uint64, Op: Op{Builtin: ops.Band},
		Algorithm: "recursive_doubling", own: true})
	if err != nil {
		return 0, err
	}
	id, ok := lowest(mask)
	if !ok {
		return 0, &mpierr.Error{Call: call, Class: mpierr.Other, Msg: "too many communicators in use (free some with MPI_Comm_free)"}
	}
	return id, nil
}

// Dup returns a communicator with the same ranks and a new context:
// collective over c.
func (c *Comm) Dup(name string) (*Comm, error) {
	id, err := c.newContext("MPI_Comm_dup")
	if err != nil {
		return nil, err
	}
	c.cfg.contexts().take(id)
	d := &Comm{t: c.t, ranks: slices.Clone(c.ranks), rank: c.rank, ctx: id, name: name, cfg: c.cfg, loop: c.loop}
	d.setNodes(c.nodes) // a map never changes: the duplicate shares it
	d.inheritFit(c)
	d.inherit(c)
	return d, nil
}

// Undefined is the color of a rank that joins no communicator in Split.
const Undefined = -32766

// Split partitions c by color; within a color, ranks are ordered by key,
// then by their rank in c. It returns nil for color Undefined. Collective
// over c.
func (c *Comm) Split(color, key int, name string) (*Comm, error) {
	return c.split("MPI_Comm_split", color, key, name)
}

// split is Split, its errors naming call.
func (c *Comm) split(call string, color, key int, name string) (*Comm, error) {
	if color < 0 && color != Undefined {
		return nil, &mpierr.Error{Call: call, Class: mpierr.Arg, Msg: "color must be non-negative or MPI_UNDEFINED"}
	}
	p := c.Size()
	all := make([]byte, 16*p)
	mine := make([]byte, 16)
	binary.LittleEndian.PutUint64(mine, uint64(int64(color)))
	binary.LittleEndian.PutUint64(mine[8:], uint64(int64(key)))
	// gocoll's own call: a fixed algorithm, whatever the user forced (a
	// forced shm cannot run on a communicator without a segment).
	if err := c.Allgather(Args{Send: mine, Recv: all, Count: 2, Type: ops.Int64, Algorithm: "bruck", own: true}); err != nil {
		return nil, err
	}
	id, err := c.newContext(call)
	if err != nil {
		return nil, err
	}
	if color == Undefined {
		return nil, nil
	}
	type member struct{ key, rank int }
	var members []member
	for r := range p {
		if int(int64(binary.LittleEndian.Uint64(all[16*r:]))) == color {
			members = append(members, member{int(int64(binary.LittleEndian.Uint64(all[16*r+8:]))), r})
		}
	}
	slices.SortStableFunc(members, func(a, b member) int { return a.key - b.key })
	ranks := make([]int, len(members))
	parent := make([]int, len(members)) // rank in c of each new rank
	newRank := -1
	for i, m := range members {
		ranks[i], parent[i] = c.ranks[m.rank], m.rank
		if m.rank == c.rank {
			newRank = i
		}
	}
	if newRank < 0 {
		return nil, errors.New("coll: split lost this rank")
	}
	c.cfg.contexts().take(id)
	s := &Comm{t: c.t, ranks: ranks, rank: newRank, ctx: id, name: name, cfg: c.cfg, loop: c.loop}
	s.setNodes(subNodes(c.nodes, parent))
	s.inheritFit(c)
	s.inherit(c)
	return s, nil
}

// Free releases the communicator: later calls fail, and its context id can
// be reused. Not for the world communicator. Collective, as
// MPI_Comm_free is: a device group's ranks meet before freeing their
// regions (Close, at MPI_Finalize, follows a barrier of its own).
func (c *Comm) Free() {
	c.close(true)
	c.cfg.contexts().release(c.ctx)
}

// Ranks returns the transport ranks of the communicator, in rank order.
func (c *Comm) Ranks() []int { return slices.Clone(c.ranks) }
