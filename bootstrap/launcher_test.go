package bootstrap

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
)

// KVSAllgather gives every rank every blob, in one key where it fits and
// in chunks where it does not, over successive generations.
func TestKVSAllgather(t *testing.T) {
	const n = 5
	kvs := Local(n)
	blob := func(gen, r int) []byte {
		return bytes.Repeat([]byte(fmt.Sprintf("g%d r%d =; ", gen, r)), 1+gen*r*7)
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for gen := range 4 {
				all, err := KVSAllgather(kvs[r], gen, 40, blob(gen, r))
				if err != nil {
					errs[r] = err
					return
				}
				for q := range n {
					if !bytes.Equal(all[q], blob(gen, q)) {
						errs[r] = fmt.Errorf("gen %d: rank %d's blob is %q", gen, q, all[q])
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}
