//go:build !linux

// The shared-memory engine needs Linux (/dev/shm segments, futex waits,
// cross-memory attach). Elsewhere Attach fails, a communicator has no
// segment, and the tuner never picks the shm algorithms; the rest of
// this file only keeps the package's API building.

package intranode

import (
	"errors"
	"time"
	"unsafe"

	"github.com/gocoll/gocoll/ops"
)

// Exchange is what Attach needs from the communicator it serves.
type Exchange interface {
	Bcast(buf []byte) error
	AllTrue(ok bool) (bool, error)
}

// Options tune a group.
type Options struct {
	JobID   string
	Context uint32
	Slot    int
	Timeout time.Duration
	NoCMA   bool
	CMAMin  int
}

// Group is not available off Linux.
type Group struct{}

// Attach fails off Linux: the shm algorithms need Linux futexes.
func Attach(x Exchange, rank, p int, opts Options) (*Group, error) {
	return nil, errors.New("intranode: needs Linux")
}

func (g *Group) Close() error                                                 { return nil }
func (g *Group) Barrier() error                                               { return nil }
func (g *Group) Allreduce(in, out []byte, r ops.Reduction) error              { return nil }
func (g *Group) ReduceScatter(in, out []byte, c []int, r ops.Reduction) error { return nil }
func (g *Group) Allgather(in, out []byte, c []int, elem int) error            { return nil }
func (g *Group) Bcast(buf []byte, root int) error                             { return nil }

// Call is not available off Linux.
type Call struct{}

func (g *Group) StartAllreduce(in, out []byte, r ops.Reduction) *Call              { return &Call{} }
func (g *Group) StartReduceScatter(in, out []byte, c []int, r ops.Reduction) *Call { return &Call{} }
func (g *Group) StartAllgather(in, out []byte, c []int, elem int) *Call            { return &Call{} }
func (c *Call) Progress() (done, moved bool, err error)                            { return true, false, nil }
func (c *Call) Finish() error                                                      { return nil }

// Layout is not available off Linux.
type Layout struct {
	Base                  unsafe.Pointer
	P, Rank, Slot         int
	BellOffset, CtlOffset int
	DataOffset            int
	Crowded               bool // more ranks than cores: wait briefly, then sleep
}

func (g *Group) Layout() Layout     { return Layout{} }
func (g *Group) CMA() (bool, error) { return false, errors.New("needs Linux") }
func (g *Group) Wait() error        { return nil }
