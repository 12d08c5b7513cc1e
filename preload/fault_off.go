//go:build !gocolltest

package main

// Without the gocolltest build tag there is no fault hook (fault.go):
// GOCOLL_PRELOAD_FAULT and GOCOLL_TUNE_TEST are not read.

func loadFault(func(string) string) (int64, error) { return 0, nil }

func injectFault(int64) {}

func loadTuneTest(func(string) string) (tuneTest, error) { return tuneTest{}, nil }
