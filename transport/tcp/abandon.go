package tcp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/gocoll/gocoll/transport"
)

// Failures spread along the connections, so that every rank of a
// collective fails soon and names the rank that failed, not the neighbour
// that gave up because of it (see "Failures" in the package doc):
//
//   - a rank whose op fails because its peer died or stalled abandons the
//     op's call (context and sequence number): it fails its other pending
//     ops of that call with the same error, and sends every connected
//     peer an abandon frame naming the call, the failed rank and why; a
//     rank that receives one does the same, once per call;
//   - a rank that has waited for a quarter of the timeout tells its
//     connected peers, every quarter of the timeout, which rank it waits
//     for (a status frame), so that they do not blame it for a stall
//     further down the line.

// Control frames use the data frame's 24-byte header:
//
//	status   kind 2 | waiting-for rank + 1 (0: none) | 0 | 0 | length 0
//	abandon  kind 3 | context | seq | failed rank | length n
//	         payload: cause (1: failed, 2: timed out), then n-1 bytes of text
const (
	kindStatus  = 2
	kindAbandon = 3

	causeFailed  = 1
	causeTimeout = 2

	maxReason = 1024 // bytes of text in an abandon frame
)

// abandonMemory is how many abandoned calls an endpoint remembers, so
// that it forwards each once.
const abandonMemory = 64

// noticeError is the failure of a rank as another rank reported it.
type noticeError struct {
	cause  error // transport.ErrPeerFailed or transport.ErrTimeout
	reason string
	from   int
	then   string // what the reporting rank did next, if known
}

func (e *noticeError) Error() string {
	if e.then != "" {
		return fmt.Sprintf("%s (reported by rank %d, %s)", e.reason, e.from, e.then)
	}
	return fmt.Sprintf("%s (reported by rank %d)", e.reason, e.from)
}

func (e *noticeError) Unwrap() error { return e.cause }

// spreads reports whether a failed op's error abandons its call: a peer
// that died, closed or stalled, not a truncation or this endpoint's Close.
func (e *Endpoint) spreads(err error) bool {
	return err != nil && !e.closed.Load() &&
		(errors.Is(err, transport.ErrPeerFailed) || errors.Is(err, transport.ErrTimeout))
}

// abandon gives up the call of tag because of err, which names the rank
// that failed: it fails this endpoint's pending ops of the call and tells
// every connected peer, the one that told us included.
func (e *Endpoint) abandon(tag transport.Tag, err error) {
	var te *transport.Error
	if !errors.As(err, &te) || te.Peer < 0 {
		return
	}
	key := uint64(tag.Context)<<32 | uint64(tag.Seq)
	e.abandonMu.Lock()
	if slices.ContainsFunc(e.abandoned, func(a abandonedCall) bool { return a.key == key }) {
		e.abandonMu.Unlock()
		return
	}
	if len(e.abandoned) >= abandonMemory {
		e.abandoned = e.abandoned[1:]
	}
	e.abandoned = append(e.abandoned, abandonedCall{key, err})
	e.abandonMu.Unlock()

	cause, reason := byte(causeFailed), te.Err.Error()
	if errors.Is(err, transport.ErrTimeout) {
		cause = causeTimeout
	}
	var ne *noticeError
	if errors.As(err, &ne) {
		reason = ne.reason // forward the first-hand account
	}
	if len(reason) > maxReason-1 {
		reason = reason[:maxReason-1]
	}
	frame := make([]byte, headerLen+1+len(reason))
	binary.LittleEndian.PutUint32(frame, kindAbandon)
	binary.LittleEndian.PutUint32(frame[4:], tag.Context)
	binary.LittleEndian.PutUint32(frame[8:], tag.Seq)
	binary.LittleEndian.PutUint32(frame[12:], uint32(te.Peer))
	binary.LittleEndian.PutUint64(frame[16:], uint64(1+len(reason)))
	frame[headerLen] = cause
	copy(frame[headerLen+1:], reason)
	for _, p := range e.peers {
		if p == nil {
			continue
		}
		p.failCall(tag, err)
		// The rank that told us hears it back too: should this rank end
		// next, its connection's closing is then explained there too.
		if p.rank != te.Peer {
			p.queueCtrl(frame)
		}
	}
}

// abandonedCall is a call given up, and the failure that made it so.
type abandonedCall struct {
	key uint64 // context<<32 | seq
	err error
}

// rootCause adds to err, the failure of an op of tag's call, the failure
// that had made the call be abandoned, if one had: an op posted after the
// news came, which then fails because a neighbour gave up and went away,
// also names the rank that failed first.
func (e *Endpoint) rootCause(tag transport.Tag, err error) error {
	key := uint64(tag.Context)<<32 | uint64(tag.Seq)
	var te, first *transport.Error
	if !errors.As(err, &te) {
		return err
	}
	e.abandonMu.Lock()
	defer e.abandonMu.Unlock()
	for _, a := range e.abandoned {
		if a.key == key && errors.As(a.err, &first) && first.Peer != te.Peer {
			return &transport.Error{Peer: te.Peer, Err: fmt.Errorf("%w; the call had already failed: %v", te.Err, a.err)}
		}
	}
	return err
}

// causeGrace is how long an op that failed because its peer went away
// (closed, reset, refused) waits for news that the call had already
// failed elsewhere, before it reports the peer. A rank that gives up
// because of another's failure, and ends, tells its connected peers first;
// but a peer that was only connecting to it then hears the news from a
// third rank, a little later than the connection's end.
const causeGrace = 150 * time.Millisecond

// awaitCause is rootCause after up to causeGrace of waiting for news of
// the call, for an op that failed first hand because its peer went away.
func (e *Endpoint) awaitCause(tag transport.Tag, err error) error {
	var ne *noticeError
	if !errors.Is(err, transport.ErrPeerFailed) || errors.As(err, &ne) {
		return e.rootCause(tag, err)
	}
	for end := time.Now().Add(causeGrace); ; time.Sleep(5 * time.Millisecond) {
		if rc := e.rootCause(tag, err); rc != err || !time.Now().Before(end) || e.closed.Load() {
			return rc
		}
	}
}

// failCall fails the pending ops with p of the call of tag, except those
// its reader or writer is working on (they end by themselves).
func (p *peer) failCall(tag transport.Tag, err error) {
	same := func(op *transport.Op) bool { return op.Tag.Context == tag.Context && op.Tag.Seq == tag.Seq }
	p.mu.Lock()
	var failed []*transport.Op
	keep := func(q []*transport.Op) []*transport.Op {
		return slices.DeleteFunc(q, func(op *transport.Op) bool {
			if same(op) {
				failed = append(failed, op)
				return true
			}
			return false
		})
	}
	p.posted = keep(p.posted)
	p.sendq = keep(p.sendq)
	p.mu.Unlock()
	for _, op := range failed {
		p.finish(op, 0, err)
	}
}

// failPending fails every pending op with p that its reader and writer
// are not working on, leaving the connection up.
func (p *peer) failPending(err error) {
	p.mu.Lock()
	failed := append(p.posted, p.sendq...)
	p.posted, p.sendq = nil, nil
	p.mu.Unlock()
	for _, op := range failed {
		p.finish(op, 0, err)
	}
}

// queueCtrl queues a control frame for p's writer, if p is connected or
// its connection is on the way (the writer starts on it); a peer never
// connected needs no news.
func (p *peer) queueCtrl(frame []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state == stateIdle || p.state == stateFailed || p.err != nil {
		return
	}
	p.ctrl = append(p.ctrl, frame)
	p.ep.ctrlPending.Add(1)
	if p.state == stateConnected {
		p.signal()
	}
}

// onAbandon handles an abandon frame from p.
func (p *peer) onAbandon(tag transport.Tag, culprit uint32, payload []byte) {
	if len(payload) == 0 || int(culprit) >= p.ep.size {
		return
	}
	cause := transport.ErrPeerFailed
	if payload[0] == causeTimeout {
		cause = transport.ErrTimeout
	}
	err := &transport.Error{Peer: int(culprit), Err: &noticeError{cause: cause, reason: string(payload[1:]), from: p.rank}}
	p.mu.Lock()
	if p.lastWords == nil {
		p.lastWords = err
	}
	p.mu.Unlock()
	p.ep.abandon(tag, err)
}

// explained returns the error for p's connection closing after p told of
// another rank's failure: most likely p gave up because of it (and
// exited, under MPI_ERRORS_ARE_FATAL), so that rank is the one to blame.
// It returns nil if p told of none.
func (p *peer) explained() error {
	p.mu.Lock()
	lw := p.lastWords
	p.mu.Unlock()
	var te *transport.Error
	var ne *noticeError
	if lw == nil || !errors.As(lw, &te) || !errors.As(lw, &ne) {
		return nil
	}
	return &transport.Error{Peer: te.Peer, Err: &noticeError{cause: ne.cause, reason: ne.reason,
		from: ne.from, then: "which then closed its connection"}}
}

// sendStatus tells every connected peer which rank this one waits for.
func (e *Endpoint) sendStatus(waitingFor int) {
	frame := make([]byte, headerLen)
	binary.LittleEndian.PutUint32(frame, kindStatus)
	binary.LittleEndian.PutUint32(frame[4:], uint32(waitingFor+1))
	for _, p := range e.peers {
		if p != nil {
			p.queueCtrl(frame)
		}
	}
}

// flushCtrl gives the writers up to limit to send queued control frames,
// so that a rank about to exit on an error (MPI_ERRORS_ARE_FATAL) has
// told its peers why first.
func (e *Endpoint) flushCtrl(limit time.Duration) {
	deadline := time.Now().Add(limit)
	for e.ctrlPending.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
}
