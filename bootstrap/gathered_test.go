package bootstrap_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/gocoll/gocoll/bootstrap"
)

// goroutineAllgather is an allgather among n goroutines, as an MPI
// library would run it among processes.
func goroutineAllgather(n int) []bootstrap.Allgather {
	var mu sync.Mutex
	cond := sync.NewCond(&mu)
	var gen, arrived int
	slots := make([][]byte, n)
	var out [][]byte
	fns := make([]bootstrap.Allgather, n)
	for r := range fns {
		fns[r] = func(mine []byte) ([][]byte, error) {
			mu.Lock()
			defer mu.Unlock()
			g := gen
			slots[r] = append([]byte(nil), mine...)
			arrived++
			if arrived == n {
				out = slots
				slots = make([][]byte, n)
				arrived, gen = 0, gen+1
				cond.Broadcast()
				return out, nil
			}
			for g == gen {
				cond.Wait()
			}
			return out, nil
		}
	}
	return fns
}

func TestGatheredPutFenceGet(t *testing.T) {
	const n = 4
	ag := goroutineAllgather(n)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k := bootstrap.Gathered(r, n, ag[r])
			if k.Rank() != r || k.Size() != n {
				errs[r] = fmt.Errorf("rank %d of %d", k.Rank(), k.Size())
				return
			}
			for round := range 3 {
				// Several keys per rank per round, of every length up to
				// the limit, and a rank that puts nothing.
				if r != 2 {
					k.Put(fmt.Sprintf("a-%d-%d", round, r), fmt.Sprintf("v%d.%d", round, r))
					k.Put(fmt.Sprintf("b-%d-%d", round, r), strings.Repeat("x", bootstrap.MaxValueLen-round))
				}
				if err := k.Fence(); err != nil {
					errs[r] = err
					return
				}
				for q := range n {
					v, err := k.Get(fmt.Sprintf("a-%d-%d", round, q))
					if q == 2 {
						if err == nil {
							errs[r] = errors.New("rank 2 put nothing, yet its key is there")
						}
						continue
					}
					w, err2 := k.Get(fmt.Sprintf("b-%d-%d", round, q))
					if err != nil || err2 != nil || v != fmt.Sprintf("v%d.%d", round, q) || len(w) != bootstrap.MaxValueLen-round {
						errs[r] = fmt.Errorf("round %d: rank %d's keys: %q %v %d %v", round, q, v, err, len(w), err2)
					}
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

func TestGatheredErrors(t *testing.T) {
	k := bootstrap.Gathered(0, 1, func([]byte) ([][]byte, error) { return nil, errors.New("network down") })
	if err := k.Put("k", strings.Repeat("x", bootstrap.MaxValueLen+1)); err == nil {
		t.Error("overlong value accepted")
	}
	if err := k.Fence(); err == nil || !strings.Contains(err.Error(), "network down") {
		t.Errorf("failed allgather: %v", err)
	}
	k = bootstrap.Gathered(0, 2, func(b []byte) ([][]byte, error) { return [][]byte{b}, nil })
	if err := k.Fence(); err == nil {
		t.Error("short allgather accepted")
	}
	k = bootstrap.Gathered(0, 1, func([]byte) ([][]byte, error) { return [][]byte{{200}}, nil })
	if err := k.Fence(); err == nil {
		t.Error("corrupt contribution accepted")
	}
}
