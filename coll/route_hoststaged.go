package coll

import (
	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/executor/device"
	"github.com/gocoll/gocoll/gpu"
)

// hostStagedRoute runs the hoststaged algorithm: a call on CUDA memory
// through pinned host memory. Each device buffer has a host image in the
// executor's stage (a host buffer is its own); the input is copied down,
// the shm engine runs the call on the images, and the result is copied
// up. Nothing waits on the GPU for a peer: the ranks meet on the host, in
// the engine.
type hostStagedRoute struct{}

// stagedStep moves a host-staged call through its three phases.
type stagedStep struct {
	c        *Comm
	cl       call
	stage    *device.Stage
	hin      []byte // the images the engine runs on
	hout     []byte
	up       int // bytes of the result, at hout's start
	phase    int // stagedDown, stagedEngine, stagedUp, stagedDone
	engine   stepper
	name     string
	finished error
}

const (
	stagedDown = iota
	stagedEngine
	stagedUp
	stagedDone
)

func (hostStagedRoute) start(c *Comm, cl call, pl plan) (stepper, error) {
	name := cl.label()
	x, err := c.deviceExecutor(name)
	if err != nil {
		return nil, err
	}
	mem := cl.out.gpu().Mem
	if !cl.out.onDevice() {
		mem = cl.in.gpu().Mem
	}
	// In place, the input is part of the output (validate.go): its image
	// is the same part of the output's.
	inPlace := cl.in.onDevice() && cl.out.onDevice() && cl.in.len() > 0 && cl.in.overlaps(cl.out)
	// The images: the output's first (where it is device memory), then
	// the input's, unless it is in place.
	need, at := 0, 0
	if cl.out.onDevice() {
		need += cl.out.len()
	}
	switch {
	case inPlace:
		at = int(cl.in.addr() - cl.out.addr())
	case cl.in.onDevice():
		at = need
		need += cl.in.len()
	}
	var src gpu.Buffer
	if cl.in.onDevice() {
		src = cl.in.gpu()
	}
	// A blocking call waits for the copy down here, in the same entry
	// into the context; a request's Progress polls it.
	blocking := cl.form == ""
	stage, host, err := x.Stage(mem, need, src, at, blocking)
	if err != nil {
		return nil, c.runError(name, pl.alg.Name+" on device memory", err)
	}
	s := &c.steps.staged
	*s = stagedStep{c: c, cl: cl, stage: stage, name: name}
	switch {
	case cl.out.onDevice():
		s.hout = host[:cl.out.len()]
	case cl.out.len() > 0:
		s.hout = cl.out.bytes()
	}
	switch {
	case cl.in.onDevice():
		s.hin = host[at : at+cl.in.len()]
	case cl.in.len() > 0:
		s.hin = cl.in.bytes()
	}
	s.up = cl.out.len()
	if cl.p.InPlace && (cl.coll == algorithms.ReduceScatter || cl.coll == algorithms.ReduceScatterBlock) {
		s.up = cl.p.Counts[c.rank] * cl.size // the result, at the start of recvbuf
	}
	if blocking {
		if err := s.startEngine(); err != nil {
			return nil, s.failed(err)
		}
	}
	return s, nil
}

func (s *stagedStep) wrap(err error) error {
	if err == nil {
		return nil
	}
	return s.c.runError(s.name, "hoststaged on device memory", err)
}

// Progress moves the call as far as it can without waiting: the copy
// down, the engine's steps, the copy up.
func (s *stagedStep) Progress() (done, moved bool, err error) {
	for {
		switch s.phase {
		case stagedDown:
			ok, err := s.stage.Done()
			if err != nil || !ok {
				return err != nil, moved, s.fail(err)
			}
			if err := s.startEngine(); err != nil {
				return true, true, s.fail(err)
			}
		case stagedEngine:
			ok, m, err := s.engine.Progress()
			moved = moved || m
			if err != nil {
				return true, moved, s.failed(err)
			}
			if !ok {
				return false, moved, nil
			}
			if err := s.startUp(false); err != nil {
				return true, true, s.fail(err)
			}
		case stagedUp:
			ok, err := s.stage.Done()
			if err != nil || !ok {
				return err != nil, moved, s.fail(err)
			}
			s.phase = stagedDone
			return true, true, nil
		default:
			return true, false, s.finished
		}
		moved = true
	}
}

// Finish runs the call to the end.
func (s *stagedStep) Finish() error {
	for {
		switch s.phase {
		case stagedDown:
			if err := s.stage.Wait(); err != nil {
				return s.fail(err)
			}
			if err := s.startEngine(); err != nil {
				return s.fail(err)
			}
		case stagedEngine:
			if err := s.engine.Finish(); err != nil {
				return s.failed(err)
			}
			if err := s.startUp(true); err != nil {
				return s.fail(err)
			}
			s.phase = stagedDone
		case stagedUp:
			if err := s.stage.Wait(); err != nil {
				return s.fail(err)
			}
			s.phase = stagedDone
		default:
			return s.finished
		}
	}
}

func (s *stagedStep) startEngine() error {
	cl := &s.cl
	e, err := s.c.startShm(s.name, cl.coll, cl.p, s.hin, s.hout, cl.size, cl.kernel, cl.builtin)
	if err != nil {
		return err
	}
	s.engine, s.phase = e, stagedEngine
	return nil
}

// startUp queues the copy of the result up (with wait, to the end).
func (s *stagedStep) startUp(wait bool) error {
	s.phase = stagedUp
	if !s.cl.out.onDevice() {
		return nil // the engine wrote the host buffer itself
	}
	return s.stage.Up(s.cl.out.slice(0, s.up).gpu(), s.hout[:s.up], wait)
}

// fail ends the call with a driver's error (nil: not ended).
func (s *stagedStep) fail(err error) error {
	if err == nil {
		return nil
	}
	return s.failed(s.wrap(err))
}

// failed ends the call with err, already the call's MPI error; a copy
// still queued is waited for before the buffers go back to the program.
func (s *stagedStep) failed(err error) error {
	if s.phase != stagedDone {
		s.stage.Wait()
		s.phase, s.finished = stagedDone, err
	}
	return s.finished
}
