//go:build !gocolltest

package main

// Without the gocolltest build tag there is no fault hook (fault.go):
// GOCOLL_PRELOAD_FAULT is not read.

func loadFault(func(string) string) (int64, error) { return 0, nil }

func injectFault(int64) {}
