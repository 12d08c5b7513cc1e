//go:build gocolltest

package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"
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

// loadTuneTest reads GOCOLL_TUNE_TEST, run-time tuning's test hook:
// comma-separated RANK:HOST_US:GOCOLL_US (the times that rank's trials
// measured, replaced: skewed timings) and host=US or gocoll=US (a delay
// in each trial of that candidate: a candidate slower on purpose).
func loadTuneTest(env func(string) string) (tuneTest, error) {
	var tt tuneTest
	v := env("GOCOLL_TUNE_TEST")
	if v == "" {
		return tt, nil
	}
	bad := fmt.Errorf("GOCOLL_TUNE_TEST=%s: want RANK:HOST_US:GOCOLL_US, host=US or gocoll=US, separated by commas", v)
	for _, item := range strings.Split(v, ",") {
		if k, us, ok := strings.Cut(item, "="); ok {
			n, err := strconv.ParseFloat(us, 64)
			if err != nil || n < 0 || (k != "host" && k != "gocoll") {
				return tt, bad
			}
			i := 0
			if k == "gocoll" {
				i = 1
			}
			tt.delay[i] = time.Duration(n * float64(time.Microsecond))
			continue
		}
		f := strings.Split(item, ":")
		if len(f) != 3 {
			return tt, bad
		}
		r, err1 := strconv.Atoi(f[0])
		h, err2 := strconv.ParseFloat(f[1], 64)
		g, err3 := strconv.ParseFloat(f[2], 64)
		if err1 != nil || err2 != nil || err3 != nil || r < 0 {
			return tt, bad
		}
		if tt.fake == nil {
			tt.fake = map[int][2]float64{}
		}
		tt.fake[r] = [2]float64{h, g}
	}
	return tt, nil
}
