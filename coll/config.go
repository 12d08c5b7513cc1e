package coll

import (
	"os"

	"github.com/gocoll/gocoll/envvar"
	"github.com/gocoll/gocoll/tuner"
)

// ConfigFromEnv reads the GOCOLL_ variables every communicator of a job
// shares: the tuner's (GOCOLL_<COLLECTIVE>_ALGORITHM, GOCOLL_TUNING_FILE,
// GOCOLL_FALLBACK), envvar.Settings and the device's.
func ConfigFromEnv() (*Config, error) {
	t, err := tuner.New(os.Getenv)
	if err != nil {
		return nil, err
	}
	cfg := &Config{Tuner: t}
	s, err := envvar.FromEnv()
	if err != nil {
		return nil, err
	}
	if s.Debug {
		cfg.Debug = os.Stderr
	}
	cfg.Apply(s)
	if err := cfg.LoadDevice(os.Getenv); err != nil {
		return nil, err
	}
	return cfg, nil
}

// Apply sets cfg from the envvar.Settings that tune package coll itself
// in every mode (standalone, Go, LD_PRELOAD): GOCOLL_SHM_SLOT,
// GOCOLL_SHM_CMA, GOCOLL_CHECK, GOCOLL_REPRODUCIBLE and GOCOLL_REPORT.
func (cfg *Config) Apply(s envvar.Settings) {
	cfg.SharedSlot, cfg.SharedNoCMA = s.SharedSlot, s.SharedNoCMA
	cfg.Check, cfg.Reproducible, cfg.Report = s.Check, s.Reproducible, s.Report
	cfg.ProgressThread = s.ProgressThread
}
