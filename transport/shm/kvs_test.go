//go:build linux

package shm

import (
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// fileKVS is a bootstrap.KVS for the multi-process tests: each key is a
// file in a directory the processes share, and a fence is a file per rank
// per generation. Every wait is bounded by its deadline.
type fileKVS struct {
	dir        string
	rank, size int
	gen        int
	deadline   time.Time
}

func (k *fileKVS) Rank() int { return k.rank }
func (k *fileKVS) Size() int { return k.size }

func (k *fileKVS) Put(key, value string) error {
	tmp := filepath.Join(k.dir, fmt.Sprintf("tmp-%d", k.rank))
	if err := os.WriteFile(tmp, []byte(value), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(k.dir, "kv-"+key))
}

func (k *fileKVS) Get(key string) (string, error) {
	b, err := os.ReadFile(filepath.Join(k.dir, "kv-"+key))
	return string(b), err
}

func (k *fileKVS) Fence() error {
	k.gen++
	if err := os.WriteFile(filepath.Join(k.dir, fmt.Sprintf("fence-%d-%d", k.gen, k.rank)), nil, 0o600); err != nil {
		return err
	}
	for r := 0; r < k.size; {
		if _, err := os.Stat(filepath.Join(k.dir, fmt.Sprintf("fence-%d-%d", k.gen, r))); err == nil {
			r++
			continue
		}
		if time.Now().After(k.deadline) {
			return fmt.Errorf("fence %d: rank %d never came", k.gen, r)
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}
