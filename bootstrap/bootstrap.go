// Package bootstrap is how the ranks of a job find each other before any
// transport exists: a key-value space with a barrier, as PMI-1 offers it
// (KVS). Transports publish their addresses with Put, call Fence, and read
// their peers' with Get.
//
// Around it: Launcher is a rank's connection to the process manager that
// started it (gocollrun, hydra, Slurm's srun, Open MPI's mpirun; packages
// pmi and pmix implement it), with an Allgather of one blob per rank in as
// few round trips as the launcher allows and a count of them (Traffic);
// KVSAllgather is that exchange over put, fence and get alone, and Tree
// the same over TCP from one put and one get per rank, for launchers
// without a bulk get (tree.go); Gathered is a key-value space over an
// existing collective (the host MPI's, under LD_PRELOAD) that needs no
// launcher; HostID says which ranks share a machine (host.go).
package bootstrap

import (
	"fmt"
	"sync"
)

// KVS is one rank's handle on the job's key-value space.
type KVS interface {
	// Rank and Size identify this process in the job.
	Rank() int
	Size() int
	// Put stores a value under key. Keys are job-wide: put each key from
	// one rank only (prefix it with the rank). Values are at most
	// MaxValueLen bytes of printable ASCII without spaces or '='.
	Put(key, value string) error
	// Fence is a barrier over all ranks: every Put made before it on any
	// rank is visible to every Get made after it.
	Fence() error
	// Get returns the value stored under key, or an error if there is none.
	Get(key string) (string, error)
}

// MaxValueLen is the longest value every KVS accepts (PMI-1 servers
// commonly allow 1024 bytes; this leaves room for the protocol).
const MaxValueLen = 900

// Local returns the n handles of an in-process job: for tests, and for
// ranks that are goroutines of one process.
func Local(n int) []KVS {
	s := &localSpace{n: n, kv: map[string]string{}}
	s.cond = sync.NewCond(&s.mu)
	out := make([]KVS, n)
	for r := range out {
		out[r] = &localKVS{s: s, rank: r}
	}
	return out
}

type localSpace struct {
	n    int
	mu   sync.Mutex
	cond *sync.Cond
	kv   map[string]string
	// fence counts arrivals at the current barrier; gen its generation.
	fence, gen int
}

type localKVS struct {
	s    *localSpace
	rank int
}

func (k *localKVS) Rank() int { return k.rank }
func (k *localKVS) Size() int { return k.s.n }

func (k *localKVS) Put(key, value string) error {
	if len(value) > MaxValueLen {
		return fmt.Errorf("bootstrap: value of %q is %d bytes, more than %d", key, len(value), MaxValueLen)
	}
	k.s.mu.Lock()
	defer k.s.mu.Unlock()
	k.s.kv[key] = value
	return nil
}

func (k *localKVS) Fence() error {
	s := k.s
	s.mu.Lock()
	defer s.mu.Unlock()
	gen := s.gen
	s.fence++
	if s.fence == s.n {
		s.fence, s.gen = 0, s.gen+1
		s.cond.Broadcast()
		return nil
	}
	for gen == s.gen {
		s.cond.Wait()
	}
	return nil
}

func (k *localKVS) Get(key string) (string, error) {
	k.s.mu.Lock()
	defer k.s.mu.Unlock()
	v, ok := k.s.kv[key]
	if !ok {
		return "", fmt.Errorf("bootstrap: no value for key %q", key)
	}
	return v, nil
}
