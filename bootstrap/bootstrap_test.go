package bootstrap_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/gocoll/gocoll/bootstrap"
)

func TestLocalPutFenceGet(t *testing.T) {
	const n = 5
	kvs := bootstrap.Local(n)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for _, k := range kvs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := range 3 {
				k.Put(fmt.Sprintf("addr-%d-%d", round, k.Rank()), fmt.Sprintf("v%d.%d", round, k.Rank()))
				k.Fence()
				for r := range n {
					v, err := k.Get(fmt.Sprintf("addr-%d-%d", round, r))
					if err != nil || v != fmt.Sprintf("v%d.%d", round, r) {
						errs[k.Rank()] = fmt.Errorf("round %d: get %d: %q %v", round, r, v, err)
					}
				}
				k.Fence()
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if _, err := kvs[0].Get("missing"); err == nil {
		t.Error("missing key found")
	}
}
