package shm

import "time"

// Options configures New.
type Options struct {
	// JobID is the same on all ranks and names the segment, so it may
	// hold only letters, digits, '.', '_' and '-'. If empty, rank 0 makes
	// a random one and shares it through the KVS.
	JobID string
	// Timeout fails an op with transport.ErrTimeout once it has seen no
	// progress for this long (0: never).
	Timeout time.Duration
}
