package envvar

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gocoll/gocoll/algorithms"
)

// Settings are gocoll's GOCOLL_ variables, each parsed and checked once,
// here, beside the list that documents them (All), so that every part
// reads the same value and an invalid one is the same error everywhere.
// Their readers: job (timeout, transport, debug, and the PMI version it
// hands package pmi), coll (ConfigFromEnv, NewConfig: coll's own, and
// the tuner's and the device's, which it hands tuner.New and gpu.Open),
// the C ABI (capi: GOCOLL_DEBUG, GOCOLL_CHECK and the forced algorithms
// for its C fast path), the preload (preload/config.go, which hands its C
// half what it needs as exported values); and the front ends (capi, the
// preload, mpi) hand GOCOLL_OPS_ISA to package ops (ops.CapISA), which
// reads no environment.
//
// Not here: the variables gocollrun sets for its ranks (GOCOLL_JOB_ID,
// GOCOLL_JOB_SECRET, GOCOLL_HOST, GOCOLL_NUM_HOSTS, GOCOLL_TCP_ADDR on
// remote hosts) are the launcher's protocol with its ranks, like PMI_FD,
// read where the protocol is spoken (job, bootstrap); and the test-only
// hooks (GOCOLL_PRELOAD_FAULT, GOCOLL_PRELOAD_EXCLUDE, GOCOLL_TUNE_TEST) stay with the
// preload tests that use them.
type Settings struct {
	Debug        bool          // GOCOLL_DEBUG=info: a line per call
	Report       bool          // GOCOLL_REPORT=1
	Check        bool          // GOCOLL_CHECK=1
	Reproducible bool          // GOCOLL_REPRODUCIBLE=1
	Timeout      time.Duration // GOCOLL_TIMEOUT; DefaultTimeout if unset
	// Transport is GOCOLL_TRANSPORT, lower case: auto (also for unset),
	// shm, tcp or hostmpi; which of them a mode accepts is the mode's to
	// say (tcp standalone, hostmpi under LD_PRELOAD).
	Transport   string
	SharedSlot  int  // GOCOLL_SHM_SLOT in bytes; 0: the shm algorithms' default
	SharedNoCMA bool // GOCOLL_SHM_CMA=0
	// ProgressThread (GOCOLL_PROGRESS_THREAD=1): nonblocking calls move
	// on a thread of their own.
	ProgressThread bool
	// Fit (GOCOLL_FIT, 1 unless set to 0): the job fits the model's
	// machine at the first call the model decides across nodes, unless
	// the tuning file gives one (coll/fit.go). FitSave (GOCOLL_FIT_SAVE):
	// where rank 0 of the fitting communicator writes the machine, as a
	// tuning file, for the next job's GOCOLL_TUNING_FILE.
	Fit     bool
	FitSave string

	// Forced holds GOCOLL_<COLLECTIVE>_ALGORITHM of each collective that
	// sets one other than auto: an algorithm of the collective or, for
	// the four tuned ones, Native (which only the preload's tuner
	// accepts; tuner.New rejects it as it rejects any unknown name).
	Forced     map[algorithms.Collective]string
	TuningFile string // GOCOLL_TUNING_FILE: a path, read by the tuner
	// Tune is GOCOLL_TUNE: TuneDefault (unset: run-time tuning under
	// LD_PRELOAD, none standalone), TuneRuntime or TuneOff.
	Tune      TuneMode
	TuneCalls int      // GOCOLL_TUNE_CALLS: timed calls per candidate and class (DefaultTuneCalls if unset)
	TuneSave  string   // GOCOLL_TUNE_SAVE: where rank 0 writes the measured decisions at MPI_Finalize
	Fallback  Fallback // GOCOLL_FALLBACK; "" reads as FallbackWarn

	CUDA      CUDAMode // GOCOLL_CUDA
	CUDANoIPC bool     // GOCOLL_CUDA_IPC=0
	CUDASlot  int      // GOCOLL_CUDA_SLOT in bytes; 0: the device group's default
	// CUDAHostSync is GOCOLL_CUDA_SYNC=host: a device group's ranks meet
	// on the host rather than with stream memory operations.
	CUDAHostSync bool
	// PMI is GOCOLL_PMI: 1 or 2, or 0 where unset (package pmi then
	// picks by the launcher).
	PMI int
	// OpsISA is GOCOLL_OPS_ISA: "go", "avx2" or "avx512", or "" (also
	// for best): the best the CPU has. The front ends hand it to
	// ops.CapISA.
	OpsISA string
}

// parseBytes reads a size in bytes with an optional K, M or G suffix
// (powers of 1024).
func parseBytes(v string) (int, bool) {
	v = strings.ToUpper(v)
	shift := 0
	switch {
	case strings.HasSuffix(v, "K"):
		shift = 10
	case strings.HasSuffix(v, "M"):
		shift = 20
	case strings.HasSuffix(v, "G"):
		shift = 30
	}
	if shift > 0 {
		v = v[:len(v)-1]
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 || n > 1<<40>>shift {
		return 0, false
	}
	return n << shift, true
}

// DefaultTimeout is GOCOLL_TIMEOUT's default.
const DefaultTimeout = 300 * time.Second

// Native is the name under which the preload registers the host MPI's
// own collective as a candidate (preload/native.Name; a test keeps the
// two equal, as envvar cannot import the preload).
const Native = "native"

// Tuned lists the collectives that have a GOCOLL_<COLLECTIVE>_ALGORITHM
// variable: the four gocoll is about, then the rooted ones.
var Tuned = append(append([]algorithms.Collective{}, algorithms.Collectives...), algorithms.Rooted...)

// ForceVar returns the environment variable that forces collective c's
// algorithm, e.g. GOCOLL_ALLREDUCE_ALGORITHM.
func ForceVar(c algorithms.Collective) string { return "GOCOLL_" + c.EnvName() + "_ALGORITHM" }

// Fallback says what happens when a forced algorithm cannot run a call.
type Fallback string

const (
	FallbackWarn   Fallback = "warn"   // use the tuned choice, say so once on stderr
	FallbackError  Fallback = "error"  // fail the call
	FallbackSilent Fallback = "silent" // use the tuned choice quietly
)

// TuneMode is the value of GOCOLL_TUNE.
type TuneMode uint8

const (
	TuneDefault TuneMode = iota // unset: runtime under LD_PRELOAD, off standalone
	TuneRuntime                 // measure the host against gocoll during the first calls
	TuneOff                     // the rules and the model decide alone
)

// DefaultTuneCalls is GOCOLL_TUNE_CALLS's default.
const DefaultTuneCalls = 8

// CUDAMode is the value of GOCOLL_CUDA.
type CUDAMode uint8

const (
	// CUDAAuto uses the driver when the machine has one, and sees device
	// memory once the application has initialised CUDA.
	CUDAAuto CUDAMode = iota
	// CUDAOff never loads the driver: every buffer is host memory.
	CUDAOff
	// CUDAOn requires the driver and a device: start-up fails, saying
	// which is missing, without them.
	CUDAOn
)

func (m CUDAMode) String() string { return [...]string{"auto", "off", "on"}[m] }

// ParseCUDA reads a value of GOCOLL_CUDA: auto (or empty), off, on.
func ParseCUDA(s string) (CUDAMode, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "auto":
		return CUDAAuto, nil
	case "off", "0", "no":
		return CUDAOff, nil
	case "on", "1", "yes":
		return CUDAOn, nil
	}
	return CUDAAuto, fmt.Errorf("GOCOLL_CUDA=%s: want auto, off or on", s)
}

// Parse reads Settings through getenv (os.Getenv, or a map in tests).
// An error names the variable, its value and what it wants; with one,
// the other variables are still parsed, and the error is the first in
// All's order of checks below.
func Parse(getenv func(string) string) (Settings, error) {
	s := Settings{Timeout: DefaultTimeout, Transport: "auto", Fallback: FallbackWarn, Fit: true}
	var first error
	fail := func(err error) {
		if first == nil {
			first = err
		}
	}
	flag := func(name, on, off string, to *bool) {
		switch v := strings.TrimSpace(getenv(name)); strings.ToLower(v) {
		case "", off:
		case on:
			*to = true
		default:
			fail(fmt.Errorf("%s=%s: want %s or %s", name, v, off, on))
		}
	}
	s.Forced = parseForced(getenv, fail)
	switch f := Fallback(strings.ToLower(strings.TrimSpace(getenv("GOCOLL_FALLBACK")))); f {
	case "":
	case FallbackWarn, FallbackError, FallbackSilent:
		s.Fallback = f
	default:
		fail(fmt.Errorf("GOCOLL_FALLBACK=%s: want warn, error or silent", f))
	}
	s.TuningFile = getenv("GOCOLL_TUNING_FILE")
	switch v := strings.ToLower(strings.TrimSpace(getenv("GOCOLL_TUNE"))); v {
	case "":
	case "runtime", "on", "1":
		s.Tune = TuneRuntime
	case "off", "0":
		s.Tune = TuneOff
	default:
		fail(fmt.Errorf("GOCOLL_TUNE=%s: want runtime or off", v))
	}
	s.TuneCalls = DefaultTuneCalls
	if v := strings.TrimSpace(getenv("GOCOLL_TUNE_CALLS")); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			fail(fmt.Errorf("GOCOLL_TUNE_CALLS=%s: want a number of calls from 1 to 1000", v))
		} else {
			s.TuneCalls = n
		}
	}
	s.TuneSave = getenv("GOCOLL_TUNE_SAVE")
	flag("GOCOLL_REPORT", "1", "0", &s.Report)
	flag("GOCOLL_CHECK", "1", "0", &s.Check)
	flag("GOCOLL_REPRODUCIBLE", "1", "0", &s.Reproducible)
	flag("GOCOLL_SHM_CMA", "0", "1", &s.SharedNoCMA)
	flag("GOCOLL_PROGRESS_THREAD", "1", "0", &s.ProgressThread)
	noFit := false
	flag("GOCOLL_FIT", "0", "1", &noFit)
	s.Fit = !noFit
	s.FitSave = strings.TrimSpace(getenv("GOCOLL_FIT_SAVE"))
	switch v := strings.TrimSpace(getenv("GOCOLL_DEBUG")); strings.ToLower(v) {
	case "", "off", "warn":
	case "info":
		s.Debug = true
	default:
		fail(fmt.Errorf("GOCOLL_DEBUG=%s: want off, warn or info", v))
	}
	if v := strings.TrimSpace(getenv("GOCOLL_TIMEOUT")); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			d, err = time.ParseDuration(v + "s") // a number of seconds
		}
		if err != nil || d < 0 {
			fail(fmt.Errorf("GOCOLL_TIMEOUT=%s: want a duration such as 300s or 5m", v))
		} else {
			s.Timeout = d
		}
	}
	switch v := strings.TrimSpace(getenv("GOCOLL_TRANSPORT")); strings.ToLower(v) {
	case "", "auto":
	case "shm", "tcp", "hostmpi":
		s.Transport = strings.ToLower(v)
	default:
		fail(fmt.Errorf("GOCOLL_TRANSPORT=%s: want auto, shm, tcp or (under LD_PRELOAD) hostmpi", v))
	}
	if v := strings.TrimSpace(getenv("GOCOLL_SHM_SLOT")); v != "" {
		n, err := strconv.Atoi(strings.TrimSuffix(strings.ToUpper(v), "K"))
		if err != nil || n <= 0 {
			fail(fmt.Errorf("GOCOLL_SHM_SLOT=%s: want a size in KiB, such as 128K", v))
		} else {
			s.SharedSlot = n << 10
		}
	}
	var err error
	if s.CUDA, err = ParseCUDA(getenv("GOCOLL_CUDA")); err != nil {
		fail(err)
	}
	switch v := getenv("GOCOLL_CUDA_IPC"); v {
	case "", "1", "on":
	case "0", "off":
		s.CUDANoIPC = true
	default:
		fail(fmt.Errorf("GOCOLL_CUDA_IPC=%s: want 1 or 0", v))
	}
	if v := strings.TrimSpace(getenv("GOCOLL_CUDA_SLOT")); v != "" {
		if n, ok := parseBytes(v); ok && n >= 4<<10 && n <= 1<<30 {
			s.CUDASlot = n
		} else {
			fail(fmt.Errorf("GOCOLL_CUDA_SLOT=%s: want a size from 4K to 1G, such as 1M", v))
		}
	}
	switch v := strings.ToLower(strings.TrimSpace(getenv("GOCOLL_CUDA_SYNC"))); v {
	case "", "memops":
	case "host":
		s.CUDAHostSync = true
	default:
		fail(fmt.Errorf("GOCOLL_CUDA_SYNC=%s: want memops or host", v))
	}
	switch v := getenv("GOCOLL_PMI"); v {
	case "":
	case "1", "2":
		s.PMI = int(v[0] - '0')
	default:
		fail(fmt.Errorf("GOCOLL_PMI=%q: want 1 or 2 (the PMI version to speak)", v))
	}
	switch v := strings.ToLower(strings.TrimSpace(getenv("GOCOLL_OPS_ISA"))); v {
	case "", "best":
	case "go", "avx2", "avx512":
		s.OpsISA = v
	default:
		fail(fmt.Errorf("GOCOLL_OPS_ISA=%s: want best, avx512, avx2 or go", v))
	}
	return s, first
}

// parseForced reads GOCOLL_<COLLECTIVE>_ALGORITHM of every collective
// (nil where none is forced). An unknown name is an error naming the
// variable and listing the valid names.
func parseForced(getenv func(string) string, fail func(error)) map[algorithms.Collective]string {
	var forced map[algorithms.Collective]string
	for _, c := range Tuned {
		v := ForceVar(c)
		name := strings.TrimSpace(getenv(v))
		if name == "" || name == "auto" {
			continue
		}
		// Native is the host's collective, a candidate of the four that
		// the preload intercepts; the rooted ones it never sees.
		if name != Native || !slices.Contains(algorithms.Collectives, c) {
			if _, err := algorithms.Lookup(c, name); err != nil {
				fail(fmt.Errorf("%s=%s: %v", v, name, err))
				continue
			}
		}
		if forced == nil {
			forced = map[algorithms.Collective]string{}
		}
		forced[c] = name
	}
	return forced
}

var process struct {
	once sync.Once
	s    Settings
	err  error
}

// FromEnv is Parse(os.Getenv), done once per process, at the first call:
// every part of gocoll that asks gets the same Settings (or the same
// error): the C ABI's fast path and pmi.FromEnv. MPI initialisation
// (job.Start, coll.ConfigFromEnv, mpi.Init, MPI_Init) parses the
// environment as it is then, since a Go program may set variables before
// mpi.Init (and tests do, between jobs).
func FromEnv() (Settings, error) {
	process.once.Do(func() { process.s, process.err = Parse(os.Getenv) })
	return process.s, process.err
}
