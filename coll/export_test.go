package coll

import (
	"github.com/gocoll/gocoll/executor/model"
	"github.com/gocoll/gocoll/gpu"
)

// SetCUDA makes the communicator classify buffers with rt instead of the
// job's runtime: tests run several fake processes as goroutines of one.
// Call it before the communicator's first collective. It lives in a test
// file so that no build of the library has it.
func (c *Comm) SetCUDA(rt *gpu.Runtime) { c.device.rt = rt }

// OwnProgress gives the communicator a progress loop of its own, as a
// process of its own has: tests that run ranks as goroutines of one
// process call it on each rank's world communicator before deriving any,
// so that one rank's waits never move another rank's requests.
func (c *Comm) OwnProgress() { c.loop = newProgressLoop() }

// Offloaded reports whether the request's last start ran as one piece on
// a goroutine of its own rather than on a stepper.
func (r *Request) Offloaded() bool {
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	return r.st == stepper(&r.c.steps.piece)
}

// Stepped reports whether r's call has begun and, if so, whether it moved
// through a stepper rather than as one piece on a goroutine of its own.
func (r *Request) Stepped() (begun, stepped bool) {
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	return r.begun, r.begun && r.st != stepper(&r.c.steps.piece)
}

// FitCounts says how many times this configuration's ranks measured the
// machine in the job (one per rank that took part) and agreed on a known
// one instead.
func (cfg *Config) FitCounts() (measured, agreed int) {
	cfg.fit.mu.Lock()
	defer cfg.fit.mu.Unlock()
	return cfg.fit.measured, cfg.fit.agreed
}

// Machine returns the machine c's model decides with, and whether it was
// fitted in the job (fitted, or agreed on).
func (c *Comm) Machine() (model.Machine, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tuner().Machine(), c.fitTuner != nil
}
