package p2p

import (
	"errors"
	"fmt"

	"github.com/gocoll/gocoll/gpu"
	"github.com/gocoll/gocoll/gpu/devcopy"
)

// Messages in CUDA device memory travel through pinned host memory, as
// host messages: the transports, the envelopes and the matching never see
// a device address, and a peer cannot tell (it may pass host memory, or
// device memory on another GPU).
//
//   - A send copies its buffer down to pinned memory when it starts and
//     sends that copy: IsendDevice returns once the copy has landed,
//     which waits for this process's GPU only, never for a peer (as
//     MPI_Isend may), and the buffer may be reused from then on.
//   - A receive is posted on pinned memory and copied up when it
//     completes, in Wait or Test, which return once the message is in
//     the device buffer (for the CPU and any stream). A truncated
//     message copies up the part that fits, as a host receive keeps it.
//
// The copies run in the buffer's CUDA context on the calling thread,
// after the work the application queued on the context's default streams
// before the call (package devcopy): before IsendDevice for a send,
// before IrecvDevice for a receive. The pinned memory is freed when the
// request completes.

// staged is a request's staging of a device buffer.
type staged struct {
	host devcopy.Host
	up   *devcopy.Copy // a receive's copy up, begun when it was posted
	dst  uintptr       // a receive's device buffer
}

// IsendDevice is Isend of buf, CUDA device memory that rt classified.
func (c *Comm) IsendDevice(rt *gpu.Runtime, buf gpu.Buffer, dest, tag int) (*Request, error) {
	if dest == ProcNull {
		return c.isend(nil, dest, tag, nil)
	}
	ctx := devcopy.Of(rt, buf.Mem)
	host, err := ctx.HostAlloc(buf.Len)
	if err != nil {
		return nil, stageError("pinned host memory for the message", err)
	}
	down, err := ctx.Begin()
	if err == nil {
		down.Queue(host.Addr(), buf.Ptr, buf.Len)
		err = down.Finish()
	}
	if err != nil {
		return nil, stageError("copying the message from device memory", errors.Join(err, host.Free()))
	}
	r, err := c.isend(host.Bytes(), dest, tag, &staged{host: host})
	switch {
	case err != nil && r == nil:
		host.Free() // not started: nothing reads the copy
		return nil, err
	case err != nil:
		// The transport refused the start: it may hold part of it, so
		// the copy stays (a leak, on a failing transport, rather than a
		// read of freed memory).
		return nil, err
	}
	return r, nil
}

// IrecvDevice is Irecv into buf, CUDA device memory that rt classified.
func (c *Comm) IrecvDevice(rt *gpu.Runtime, buf gpu.Buffer, source, tag int) (*Request, error) {
	if source == ProcNull {
		return c.irecv(nil, source, tag, nil)
	}
	ctx := devcopy.Of(rt, buf.Mem)
	host, err := ctx.HostAlloc(buf.Len)
	if err != nil {
		return nil, stageError("pinned host memory for the message", err)
	}
	// The copy up is ordered now, after the application's work so far on
	// the default streams: the buffer is MPI's from here to the end.
	up, err := ctx.Begin()
	if err != nil {
		return nil, stageError("a CUDA stream for the message", errors.Join(err, host.Free()))
	}
	r, err := c.irecv(host.Bytes(), source, tag, &staged{host: host, up: up, dst: buf.Ptr})
	if err != nil {
		up.Finish()
		host.Free()
		return nil, err
	}
	return r, nil
}

// settle ends the staging of a completed request, once: a receive's
// message (what arrived of it, truncated or not) is copied up to the
// device buffer, and the pinned memory is freed. An error of the copy
// becomes the request's.
func (r *Request) settle(st Status, err error) (Status, error) {
	d := r.dev
	if d == nil {
		return st, err
	}
	r.dev = nil
	var serr error
	if d.up != nil {
		if (err == nil || errors.Is(err, ErrTruncate)) && st.Count > 0 {
			d.up.Queue(d.dst, d.host.Addr(), st.Count)
		}
		if serr = d.up.Finish(); serr != nil {
			serr = stageError("copying the message to device memory", serr)
		}
	}
	if ferr := d.host.Free(); ferr != nil && serr == nil {
		serr = stageError("freeing the message's pinned host memory", ferr)
	}
	if serr != nil {
		err, st.Err = serr, serr
		r.h.mu.Lock()
		r.status = st
		r.h.mu.Unlock()
	}
	return st, err
}

func stageError(what string, err error) error {
	return fmt.Errorf("p2p: device buffer: %s: %w", what, err)
}
