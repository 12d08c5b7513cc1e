package coll

import (
	"errors"
	"fmt"
	"slices"

	"github.com/gocoll/gocoll/mpierr"
	"github.com/gocoll/gocoll/ops"
	"github.com/gocoll/gocoll/transport"
)

func argError(call string, class mpierr.Class, format string, a ...any) error {
	return &mpierr.Error{Call: call, Class: class, Msg: fmt.Sprintf(format, a...)}
}

func opError(call string, err error) error {
	var oe *ops.Error
	if errors.As(err, &oe) {
		return &mpierr.Error{Call: call, Class: mpierr.Op, Msg: oe.Msg}
	}
	return &mpierr.Error{Call: call, Class: mpierr.Op, Msg: err.Error()}
}

// runError wraps a failure of the transport during a call.
func (c *Comm) runError(call, alg string, err error) error {
	class, note := mpierr.Other, ""
	var te *transport.Error
	if errors.As(err, &te) {
		switch {
		case errors.Is(err, transport.ErrTruncate):
			class = mpierr.Truncate
		case te.Peer >= 0, errors.Is(err, transport.ErrPeerFailed), errors.Is(err, transport.ErrTimeout):
			class = mpierr.ProcAborted
		}
		if r := slices.Index(c.ranks, te.Peer); r >= 0 {
			note = c.peerNote(r)
		}
	}
	return &mpierr.Error{Call: call, Class: class,
		Msg: fmt.Sprintf("%s failed on %s (rank %d of %d, algorithm %s%s)", call, c.name, c.rank, c.Size(), alg, note), Err: err}
}

// peerNote says which rank of the communicator a failed peer is, when the
// communicator's ranks are not the job's: errors from the transports
// name job (world) ranks, as gocollrun does.
func (c *Comm) peerNote(r int) string {
	if c.ranks[r] == r {
		return ""
	}
	return fmt.Sprintf("; the failed peer, world rank %d, is rank %d of %s", c.ranks[r], r, c.name)
}
