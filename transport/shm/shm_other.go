//go:build !linux

package shm

import (
	"errors"

	"github.com/gocoll/gocoll/bootstrap"
	"github.com/gocoll/gocoll/transport"
)

// Endpoint is the shared-memory transport, which exists on Linux only.
type Endpoint struct{ rank, size int }

// New fails: the transport needs Linux (futexes, process_vm_readv).
func New(kvs bootstrap.KVS, opts Options) (*Endpoint, error) {
	return nil, errors.New("shm: needs Linux")
}

func (e *Endpoint) Reaches(peer int) bool { return false }
func (e *Endpoint) Rank() int             { return e.rank }
func (e *Endpoint) Size() int             { return e.size }
func (e *Endpoint) Close() error          { return nil }

func (e *Endpoint) Start(ops []transport.Op) error {
	for i := range ops {
		ops[i].Reset()
		ops[i].Complete(0, &transport.Error{Peer: ops[i].Peer, Err: transport.ErrBadPeer})
	}
	return nil
}

func (e *Endpoint) Wait(ops []transport.Op) error { return transport.FirstError(ops) }

func (e *Endpoint) Test(ops []transport.Op) (bool, error) { return true, transport.FirstError(ops) }
