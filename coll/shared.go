package coll

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/gocoll/gocoll/intranode"
	"github.com/gocoll/gocoll/ops"
	"github.com/gocoll/gocoll/transport"
)

// AttachShared gives the communicator a shared-memory segment, so that the
// tuner may run its collectives with the shm algorithms. Every rank must
// be on the same host. Collective over c; if any rank fails, none gets a
// segment and the error says why (the communicator still works).
func (c *Comm) AttachShared() error {
	g, err := intranode.Attach(exchange{c}, c.rank, c.Size(), intranode.Options{
		JobID: c.cfg.JobID, Context: c.ctx, Timeout: c.cfg.Timeout, Slot: c.cfg.SharedSlot, NoCMA: c.cfg.SharedNoCMA})
	if err != nil {
		return err
	}
	if ok, why := g.CMA(); !ok && c.cfg.Debug != nil {
		fmt.Fprintf(c.cfg.Debug, "gocoll: rank %d: %s: shm allgather copies through the segment at every size: cross-memory attach %v\n", c.rank, c.name, why)
	}
	c.mu.Lock()
	c.shared = g
	c.mu.Unlock()
	return nil
}

// Shared reports whether the communicator has a shared segment.
func (c *Comm) Shared() bool { return c.shared != nil }

// exchange lets intranode.Attach use the communicator's collectives.
type exchange struct{ c *Comm }

func (x exchange) Bcast(buf []byte) error {
	return x.c.Bcast(Args{Recv: buf, Count: len(buf), Type: ops.Byte, Root: 0, own: true})
}

func (x exchange) AllTrue(ok bool) (bool, error) {
	v := make([]byte, 4)
	if ok {
		v[0] = 1
	}
	// gocoll's own call: a fixed algorithm, whatever the user forced (the
	// segment being set up cannot serve shm yet).
	err := x.c.Allreduce(Args{InPlace: true, Recv: v, Count: 1, Type: ops.Int32, Op: Op{Builtin: ops.Land},
		Algorithm: "recursive_doubling", own: true})
	return binary.LittleEndian.Uint32(v) == 1, err
}

// inherit attaches a segment to a communicator made from one that has
// one (its ranks are a subset, so they share the host too), and to one
// of several ranks whose node map says they share a node although the
// parent's ranks span several (a node of MPI_Comm_split_type). Every
// member decides alike: the parent's segment is all or none, and the
// members derive the same map. Collective.
func (c *Comm) inherit(parent *Comm) {
	if parent.shared == nil && !(c.OneNode() && c.Size() > 1) {
		return
	}
	if err := c.AttachShared(); err != nil && c.cfg.Debug != nil {
		fmt.Fprintf(c.cfg.Debug, "gocoll: rank %d: %s has no shared segment: %v\n", c.rank, c.name, err)
	}
}

// sharedError wraps a failure of the shared segment as the call's.
func (c *Comm) sharedError(call string, err error) error {
	return c.runError(call, "shm", c.sharedPeer(err))
}

// sharedPeer renames the peer of a failure of the shared segment.
// intranode names peers by their rank in the communicator; the error
// names them by job (world) rank, as transport errors and gocollrun do,
// and runError's message gives both when they differ.
func (c *Comm) sharedPeer(err error) error {
	var te *transport.Error
	if errors.As(err, &te) && te.Peer >= 0 && te.Peer < len(c.ranks) {
		err = &transport.Error{Peer: c.ranks[te.Peer], Err: te.Err}
	}
	return err
}

// SharedLayout describes the communicator's shared segment, for code
// outside Go that follows intranode's protocol (the C ABI's fast path).
func (c *Comm) SharedLayout() (intranode.Layout, bool) {
	if c.shared == nil {
		return intranode.Layout{}, false
	}
	return c.shared.Layout(), true
}

// WaitShared finishes a step of call that outside code started on the
// shared segment and stopped waiting for; the error names the call, the
// communicator and a dead or stalled peer.
func (c *Comm) WaitShared(call string) error {
	if c.shared == nil {
		return errors.New("coll: no shared segment")
	}
	if err := c.shared.Wait(); err != nil {
		return c.sharedError(call, err)
	}
	return nil
}
