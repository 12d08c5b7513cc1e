package coll

import "github.com/gocoll/gocoll/gpu"

// SetCUDA makes the communicator classify buffers with rt instead of the
// job's runtime: tests run several fake processes as goroutines of one.
// Call it before the communicator's first collective. It lives in a test
// file so that no build of the library has it.
func (c *Comm) SetCUDA(rt *gpu.Runtime) { c.device.rt = rt }

// OwnEngine gives the communicator a progress engine of its own, as a
// process of its own has: tests that run ranks as goroutines of one
// process call it on each rank's world communicator before deriving any,
// so that one rank's waits never move another rank's requests.
func (c *Comm) OwnEngine() { c.eng = newProgressEngine() }
