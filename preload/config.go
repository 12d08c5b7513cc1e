package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/coll"
	"github.com/gocoll/gocoll/tuner"
)

// config is what every communicator shares, read once from the
// environment at the first collective after MPI_Init.
type config struct {
	// tuner chooses between the host MPI (native) and gocoll's
	// algorithms: GOCOLL_*_ALGORITHM, GOCOLL_TUNING_FILE, then Rules
	// (the measured crossovers), then tuner.Defaults.
	tuner *tuner.Tuner
	// coll is the configuration of gocoll's communicators. Its tuner only
	// looks up the algorithm the preload tuner chose (passed as
	// coll.Args.Algorithm), so it reads no environment.
	coll      *coll.Config
	debug     bool
	transport string // auto, shm or hostmpi
	timeout   time.Duration
	// fault, for tests: panic inside the fault-th collective gocoll runs.
	fault int64
	// names are each collective's algorithms in the order the C half's
	// decision cache indexes them.
	names [4][]string
}

// loadConfig reads the GOCOLL_ variables of LD_PRELOAD mode, with the
// measured rules of host MPI flavor ("openmpi" or "mpich"). Errors name
// the variable.
func loadConfig(env func(string) string, flavor string) (*config, error) {
	t, err := tuner.NewWithOptions(env, tuner.Options{Native: true, Rules: measuredRules[flavor]})
	if err != nil {
		return nil, err
	}
	plain, err := tuner.New(func(string) string { return "" })
	if err != nil {
		return nil, err
	}
	c := &config{tuner: t, transport: "auto", timeout: 300 * time.Second}
	for i, cl := range algorithms.Collectives {
		c.names[i] = algorithms.Names(cl)
	}
	switch v := strings.ToLower(env("GOCOLL_DEBUG")); v {
	case "", "off", "warn":
	case "info":
		c.debug = true
	default:
		return nil, fmt.Errorf("GOCOLL_DEBUG=%s: want off, warn or info", v)
	}
	switch v := strings.ToLower(env("GOCOLL_TRANSPORT")); v {
	case "", "auto":
	case "shm", "hostmpi":
		c.transport = v
	default:
		return nil, fmt.Errorf("GOCOLL_TRANSPORT=%s: under LD_PRELOAD want auto, shm or hostmpi", v)
	}
	if v := env("GOCOLL_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			d, err = time.ParseDuration(v + "s")
		}
		if err != nil || d < 0 {
			return nil, fmt.Errorf("GOCOLL_TIMEOUT=%s: want a duration such as 300s or 5m", v)
		}
		c.timeout = d
	}
	// The shared segments of the shm algorithms (coll.Config).
	slot, check := 0, false
	if v := env("GOCOLL_SHM_SLOT"); v != "" {
		n, err := strconv.Atoi(strings.TrimSuffix(strings.ToUpper(v), "K"))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("GOCOLL_SHM_SLOT=%s: want a size in KiB, such as 128K", v)
		}
		slot = n << 10
	}
	switch v := env("GOCOLL_CHECK"); v {
	case "", "0":
	case "1":
		check = true
	default:
		return nil, fmt.Errorf("GOCOLL_CHECK=%s: want 0 or 1", v)
	}
	c.coll = &coll.Config{Tuner: plain, JobID: "preload", Timeout: c.timeout, SharedSlot: slot, Check: check}
	if v := env("GOCOLL_PRELOAD_FAULT"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("GOCOLL_PRELOAD_FAULT=%s: want a call number (1, 2, ...)", v)
		}
		c.fault = n
	}
	return c, nil
}

// algIndex returns the index of name among collective i's algorithms.
func (c *config) algIndex(i int, name string) int {
	for j, n := range c.names[i] {
		if n == name {
			return j
		}
	}
	return -1
}
