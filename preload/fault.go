//go:build gocolltest

package main

import (
	"fmt"
	"strconv"
)

// The fault hook exists only in libraries built with -tags gocolltest
// (tests/preload builds one): a release library neither reads
// GOCOLL_PRELOAD_FAULT nor has a panic on purpose in its call path.

// loadFault reads GOCOLL_PRELOAD_FAULT: the number of the collective
// that panics, or 0.
func loadFault(env func(string) string) (int64, error) {
	v := env("GOCOLL_PRELOAD_FAULT")
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("GOCOLL_PRELOAD_FAULT=%s: want a call number (1, 2, ...)", v)
	}
	return n, nil
}

// injectFault panics in the n-th collective gocoll runs, if that is the
// one GOCOLL_PRELOAD_FAULT names.
func injectFault(n int64) {
	if cfg.fault > 0 && n == cfg.fault {
		panic(fmt.Sprintf("GOCOLL_PRELOAD_FAULT=%d: a panic on purpose", cfg.fault))
	}
}
