package bootstrap

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
)

// Allgather is a collective exchange over the ranks of a job: every rank
// passes its bytes and gets every rank's, in rank order. LD_PRELOAD mode
// makes one from the host MPI's PMPI_Allgather and PMPI_Allgatherv.
type Allgather func(mine []byte) ([][]byte, error)

// Gathered returns rank's handle on a key-value space whose only
// communication is allgather: Put keeps the pair, and Fence sends the
// pairs put since the last fence to every rank in one allgather. So a
// job that already has a collective (the host MPI, in LD_PRELOAD mode)
// needs no launcher service to bootstrap gocoll's transports.
func Gathered(rank, size int, allgather Allgather) KVS {
	return &gatheredKVS{rank: rank, size: size, allgather: allgather, kv: map[string]string{}}
}

type gatheredKVS struct {
	rank, size int
	allgather  Allgather

	mu      sync.Mutex
	pending []byte // pairs put since the last fence, encoded
	kv      map[string]string
}

func (k *gatheredKVS) Rank() int { return k.rank }
func (k *gatheredKVS) Size() int { return k.size }

func (k *gatheredKVS) Put(key, value string) error {
	if len(value) > MaxValueLen {
		return fmt.Errorf("bootstrap: value of %q is %d bytes, more than %d", key, len(value), MaxValueLen)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.pending = appendString(k.pending, key)
	k.pending = appendString(k.pending, value)
	k.kv[key] = value
	return nil
}

func (k *gatheredKVS) Fence() error {
	k.mu.Lock()
	mine := k.pending
	k.pending = nil
	k.mu.Unlock()
	all, err := k.allgather(mine)
	if err != nil {
		return fmt.Errorf("bootstrap: fence: %w", err)
	}
	if len(all) != k.size {
		return fmt.Errorf("bootstrap: fence: allgather returned %d contributions for %d ranks", len(all), k.size)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for r, b := range all {
		for len(b) > 0 {
			var key, value string
			if key, b, err = readString(b); err == nil {
				value, b, err = readString(b)
			}
			if err != nil {
				return fmt.Errorf("bootstrap: fence: rank %d's pairs: %w", r, err)
			}
			k.kv[key] = value
		}
	}
	return nil
}

func (k *gatheredKVS) Get(key string) (string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	v, ok := k.kv[key]
	if !ok {
		return "", fmt.Errorf("bootstrap: no value for key %q", key)
	}
	return v, nil
}

// appendString appends s with its length in front.
func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

var errCorrupt = errors.New("corrupt encoding")

// readString reads a string written by appendString.
func readString(b []byte) (string, []byte, error) {
	n, w := binary.Uvarint(b)
	if w <= 0 || uint64(len(b)-w) < n {
		return "", nil, errCorrupt
	}
	return string(b[w : w+int(n)]), b[w+int(n):], nil
}
