package envvar

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Settings are the GOCOLL_ variables that several parts of gocoll read
// (job, coll, the C ABI, the preload and its C half), each parsed and
// checked once, here, beside the list that documents them (All), so that
// every part reads the same value and an invalid one is the same error
// everywhere. Variables with one reader stay with it: the tuner's
// (GOCOLL_<COLLECTIVE>_ALGORITHM, GOCOLL_TUNING_FILE, GOCOLL_FALLBACK:
// tuner.New), the device's (GOCOLL_CUDA, GOCOLL_CUDA_IPC: package gpu and
// coll.Config.LoadDevice), the launcher's (GOCOLL_PMI: package pmi) and
// the kernels' (GOCOLL_OPS_ISA: package ops, at its initialisation).
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
}

// DefaultTimeout is GOCOLL_TIMEOUT's default.
const DefaultTimeout = 300 * time.Second

// Parse reads Settings through getenv (os.Getenv, or a map in tests).
// An error names the variable, its value and what it wants.
func Parse(getenv func(string) string) (Settings, error) {
	s := Settings{Timeout: DefaultTimeout, Transport: "auto"}
	flag := func(name, on, off string, to *bool) error {
		switch v := strings.TrimSpace(getenv(name)); strings.ToLower(v) {
		case "", off:
		case on:
			*to = true
		default:
			return fmt.Errorf("%s=%s: want %s or %s", name, v, off, on)
		}
		return nil
	}
	if err := flag("GOCOLL_REPORT", "1", "0", &s.Report); err != nil {
		return s, err
	}
	if err := flag("GOCOLL_CHECK", "1", "0", &s.Check); err != nil {
		return s, err
	}
	if err := flag("GOCOLL_REPRODUCIBLE", "1", "0", &s.Reproducible); err != nil {
		return s, err
	}
	if err := flag("GOCOLL_SHM_CMA", "0", "1", &s.SharedNoCMA); err != nil {
		return s, err
	}
	if err := flag("GOCOLL_PROGRESS_THREAD", "1", "0", &s.ProgressThread); err != nil {
		return s, err
	}
	switch v := strings.TrimSpace(getenv("GOCOLL_DEBUG")); strings.ToLower(v) {
	case "", "off", "warn":
	case "info":
		s.Debug = true
	default:
		return s, fmt.Errorf("GOCOLL_DEBUG=%s: want off, warn or info", v)
	}
	if v := strings.TrimSpace(getenv("GOCOLL_TIMEOUT")); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			d, err = time.ParseDuration(v + "s") // a number of seconds
		}
		if err != nil || d < 0 {
			return s, fmt.Errorf("GOCOLL_TIMEOUT=%s: want a duration such as 300s or 5m", v)
		}
		s.Timeout = d
	}
	switch v := strings.TrimSpace(getenv("GOCOLL_TRANSPORT")); strings.ToLower(v) {
	case "", "auto":
	case "shm", "tcp", "hostmpi":
		s.Transport = strings.ToLower(v)
	default:
		return s, fmt.Errorf("GOCOLL_TRANSPORT=%s: want auto, shm, tcp or (under LD_PRELOAD) hostmpi", v)
	}
	if v := strings.TrimSpace(getenv("GOCOLL_SHM_SLOT")); v != "" {
		n, err := strconv.Atoi(strings.TrimSuffix(strings.ToUpper(v), "K"))
		if err != nil || n <= 0 {
			return s, fmt.Errorf("GOCOLL_SHM_SLOT=%s: want a size in KiB, such as 128K", v)
		}
		s.SharedSlot = n << 10
	}
	return s, nil
}

var process struct {
	once sync.Once
	s    Settings
	err  error
}

// FromEnv is Parse(os.Getenv), done once per process: every part of
// gocoll that asks gets the same Settings (or the same error).
func FromEnv() (Settings, error) {
	process.once.Do(func() { process.s, process.err = Parse(os.Getenv) })
	return process.s, process.err
}
