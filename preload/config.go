package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/coll"
	"github.com/gocoll/gocoll/envvar"
	"github.com/gocoll/gocoll/ops"
	"github.com/gocoll/gocoll/preload/native"
	"github.com/gocoll/gocoll/tuner"
)

// config is what every communicator shares, read once from the
// environment at the first collective after MPI_Init.
type config struct {
	// tuner chooses between the host MPI (native) and gocoll's
	// algorithms: GOCOLL_*_ALGORITHM, GOCOLL_TUNING_FILE, then Rules
	// (the measured crossovers), then tuner.Defaults.
	tuner *tuner.Tuner
	// gocollOnly chooses among gocoll's algorithms only: for calls on
	// CUDA device memory, which gocoll runs on its device executor (the
	// host MPI may not be CUDA-aware; Params.DeviceMemory keeps the shm
	// algorithms out), and for calls of a pair the host must not run
	// (host.go). The same forced algorithms, GOCOLL_FALLBACK and rules,
	// less every native one (GOCOLL_*_ALGORITHM=native is honoured in C,
	// before the tuner is asked).
	gocollOnly *tuner.Tuner
	// own chooses gocoll's candidate for run-time tuning (tune.go):
	// gocoll's own tuner as it chooses standalone (tuner.Defaults, then
	// the model), not the measured rules less native, which name the
	// algorithm that beat the host where and when they were measured
	// (recursive_doubling for MPICH's 3-384 KiB allreduces, where the
	// shared-memory engine now takes a fifth of its time).
	own *tuner.Tuner
	// coll is the configuration of gocoll's communicators. Its tuner only
	// looks up the algorithm the preload tuner chose (passed as
	// coll.Args.Algorithm), so it reads no environment. Its Device is
	// GOCOLL_CUDA's and GOCOLL_CUDA_IPC's (coll.Config.LoadDevice): with a
	// runtime, gocoll runs calls on device memory itself.
	coll  *coll.Config
	debug bool
	// report: GOCOLL_REPORT=1 prints, at MPI_Finalize, which path each
	// collective's calls took (counters.go). It changes nothing else.
	report    bool
	transport string // auto, shm or hostmpi
	timeout   time.Duration
	// fault, for tests: panic inside the fault-th collective gocoll runs
	// (fault.go; always 0 without the gocolltest build tag).
	fault int64
	// exclude, for tests: (ops.Op, ops.Type) pairs this rank keeps from
	// the host (GOCOLL_PRELOAD_EXCLUDE).
	exclude [][2]uint8
	// names are each collective's algorithms in the order the C half's
	// decision cache indexes them.
	names [4][]string
	// Run-time tuning (tune.go): on (GOCOLL_TUNE, on by default here),
	// timed calls per candidate (GOCOLL_TUNE_CALLS), the file the
	// verdicts are saved to (GOCOLL_TUNE_SAVE), and the test hook
	// (GOCOLL_TUNE_TEST, -tags gocolltest only).
	tune      bool
	tuneCalls int
	tuneSave  string
	tuneTest  tuneTest
}

// tuneTest is run-time tuning's test hook (fault.go): each rank's trial
// times, replaced (µs, host then gocoll), and a delay in every trial of
// the host [0] or gocoll [1].
type tuneTest struct {
	fake  map[int][2]float64
	delay [2]time.Duration
}

// loadConfig reads the GOCOLL_ variables of LD_PRELOAD mode, with the
// measured rules of host MPI flavor ("openmpi" or "mpich"). Errors name
// the variable.
func loadConfig(env func(string) string, flavor string) (*config, error) {
	set, err := envvar.Parse(env)
	if err == nil {
		err = ops.CapISA(set.OpsISA) // for the process: before gocoll's first reduction
	}
	if err != nil {
		return nil, err
	}
	t, err := tuner.NewWithOptions(set, tuner.Options{Extra: native.Candidate(), Rules: measuredRules[flavor]})
	if err != nil {
		return nil, err
	}
	plain, err := tuner.New(envvar.Settings{})
	if err != nil {
		return nil, err
	}
	own, err := gocollOnlyTuner(set, measuredRules[flavor])
	if err != nil {
		return nil, err
	}
	c := &config{tuner: t, gocollOnly: own, own: plain, transport: "auto", timeout: 300 * time.Second}
	for i, cl := range algorithms.Collectives {
		c.names[i] = algorithms.Names(cl)
	}
	c.debug, c.report, c.timeout = set.Debug, set.Report, set.Timeout
	c.tune, c.tuneCalls, c.tuneSave = set.Tune != envvar.TuneOff, set.TuneCalls, set.TuneSave
	if c.tuneTest, err = loadTuneTest(env); err != nil {
		return nil, err
	}
	switch set.Transport {
	case "auto":
	case "shm", "hostmpi":
		c.transport = set.Transport
	default:
		return nil, fmt.Errorf("GOCOLL_TRANSPORT=%s: under LD_PRELOAD want auto, shm or hostmpi", set.Transport)
	}
	// coll's own settings: the shm algorithms' slot, GOCOLL_CHECK.
	c.coll = &coll.Config{Tuner: plain, JobID: "preload", Timeout: c.timeout}
	c.coll.Apply(set)
	if err := c.coll.LoadDevice(set); err != nil {
		if !strings.HasPrefix(err.Error(), "GOCOLL_CUDA") {
			err = fmt.Errorf("GOCOLL_CUDA: %v", err)
		}
		return nil, err
	}
	if c.fault, err = loadFault(env); err != nil {
		return nil, err
	}
	if v := env("GOCOLL_PRELOAD_EXCLUDE"); v != "" {
		if c.exclude, err = parseExclude(v); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// gocollOnlyTuner returns the tuner of calls the host must not run (config.gocollOnly):
// GOCOLL_TUNING_FILE's rules, then rules (the measured ones), without
// native, then tuner.Defaults.
func gocollOnlyTuner(set envvar.Settings, rules []tuner.Rule) (*tuner.Tuner, error) {
	var all []tuner.Rule
	if path := set.TuningFile; path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("GOCOLL_TUNING_FILE: %v", err)
		}
		var f tuner.File
		dec := json.NewDecoder(strings.NewReader(string(data)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&f); err != nil {
			return nil, fmt.Errorf("GOCOLL_TUNING_FILE: %s: %v", path, err)
		}
		all = append(all, f.Rules...)
	}
	all = append(all, rules...)
	gocoll := make([]tuner.Rule, 0, len(all))
	for _, r := range all {
		if r.Algorithm != native.Name {
			gocoll = append(gocoll, r)
		}
	}
	own := set
	own.TuningFile = "" // read above
	own.Forced = map[algorithms.Collective]string{}
	for cl, name := range set.Forced {
		if name != native.Name { // such calls never reach the tuner
			own.Forced[cl] = name
		}
	}
	return tuner.NewWithOptions(own, tuner.Options{Rules: gocoll})
}

// choose asks the tuner of a call's memory: the device tuner for device
// memory (q.Params.DeviceMemory).
func (c *config) choose(q tuner.Query) (tuner.Choice, error) {
	if q.Params.DeviceMemory {
		return c.gocollOnly.Choose(q)
	}
	return c.tuner.Choose(q)
}

// cudaOn reports whether gocoll has a CUDA runtime: calls on device
// memory are then gocoll's; without one (GOCOLL_CUDA=off, or no driver)
// they go to the host MPI.
func (c *config) cudaOn() bool { return c.coll.Device.Runtime != nil }

// cudaNote says, in the start-up line of GOCOLL_DEBUG=info, what happens
// to device memory.
func (c *config) cudaNote() string {
	switch {
	case !c.cudaOn():
		return "CUDA off (device buffers go to the host MPI)"
	case c.coll.Device.NoIPC:
		return fmt.Sprintf("CUDA %s (device buffers run in gocoll, staged)", c.coll.Device.Runtime.Mode())
	}
	return fmt.Sprintf("CUDA %s (device buffers run in gocoll)", c.coll.Device.Runtime.Mode())
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
