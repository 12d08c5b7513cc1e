package coll

import (
	"os"

	"github.com/gocoll/gocoll/envvar"
	"github.com/gocoll/gocoll/tuner"
)

// ConfigFromEnv reads the GOCOLL_ variables every communicator of a job
// shares, parsed once by envvar.Parse: the tuner's (forced algorithms,
// GOCOLL_TUNING_FILE, GOCOLL_FALLBACK), coll's own (Apply) and the
// device's (LoadDevice). It parses the environment as it is when the job
// starts, not envvar.FromEnv's copy of it at process start: tests change
// the environment between jobs of one process.
func ConfigFromEnv() (*Config, error) {
	s, err := envvar.Parse(os.Getenv)
	if err != nil {
		return nil, err
	}
	return NewConfig(s)
}

// NewConfig is the configuration s (envvar.Parse's) describes: for an
// initialisation that parses once and hands the same Settings to
// job.StartWith.
func NewConfig(s envvar.Settings) (*Config, error) {
	t, err := tuner.New(s)
	if err != nil {
		return nil, err
	}
	cfg := &Config{Tuner: t}
	if s.Debug {
		cfg.Debug = os.Stderr
	}
	cfg.Apply(s)
	if err := cfg.LoadDevice(s); err != nil {
		return nil, err
	}
	return cfg, nil
}

// Apply sets cfg from the envvar.Settings that tune package coll itself
// in every mode (standalone, Go, LD_PRELOAD): GOCOLL_SHM_SLOT,
// GOCOLL_SHM_CMA, GOCOLL_CHECK, GOCOLL_REPRODUCIBLE, GOCOLL_REPORT,
// GOCOLL_PROGRESS_THREAD, GOCOLL_FIT and GOCOLL_FIT_SAVE.
func (cfg *Config) Apply(s envvar.Settings) {
	cfg.SharedSlot, cfg.SharedNoCMA = s.SharedSlot, s.SharedNoCMA
	cfg.Check, cfg.Reproducible, cfg.Report = s.Check, s.Reproducible, s.Report
	cfg.ProgressThread = s.ProgressThread
	cfg.Fit, cfg.FitSave = s.Fit, s.FitSave
}
