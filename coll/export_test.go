package coll

import "github.com/gocoll/gocoll/gpu"

// SetCUDA makes the communicator classify buffers with rt instead of the
// job's runtime: tests run several fake processes as goroutines of one.
// Call it before the communicator's first collective. It lives in a test
// file so that no build of the library has it.
func (c *Comm) SetCUDA(rt *gpu.Runtime) { c.device.rt = rt }
