package coll

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/gocoll/gocoll/tuner"
)

// ConfigFromEnv reads the GOCOLL_ variables every communicator of a job
// shares: the tuner's (GOCOLL_<COLLECTIVE>_ALGORITHM, GOCOLL_TUNING_FILE,
// GOCOLL_FALLBACK) and GOCOLL_DEBUG.
func ConfigFromEnv() (*Config, error) {
	t, err := tuner.New(os.Getenv)
	if err != nil {
		return nil, err
	}
	cfg := &Config{Tuner: t}
	switch v := strings.ToLower(os.Getenv("GOCOLL_DEBUG")); v {
	case "", "off", "warn":
	case "info":
		cfg.Debug = os.Stderr
	default:
		return nil, fmt.Errorf("GOCOLL_DEBUG=%s: want off, warn or info", v)
	}
	if err := cfg.LoadEnv(os.Getenv); err != nil {
		return nil, err
	}
	if err := cfg.LoadDevice(os.Getenv); err != nil {
		return nil, err
	}
	return cfg, nil
}

// LoadEnv sets cfg from GOCOLL_SHM_SLOT, GOCOLL_SHM_CMA, GOCOLL_CHECK,
// GOCOLL_REPRODUCIBLE and GOCOLL_REPORT, the variables
// that tune package coll itself in every mode (standalone, Go, LD_PRELOAD);
// errors name the variable.
func (cfg *Config) LoadEnv(getenv func(string) string) error {
	if v := getenv("GOCOLL_SHM_SLOT"); v != "" {
		n, err := strconv.Atoi(strings.TrimSuffix(strings.ToUpper(v), "K"))
		if err != nil || n <= 0 {
			return fmt.Errorf("GOCOLL_SHM_SLOT=%s: want a size in KiB, such as 128K", v)
		}
		cfg.SharedSlot = n << 10
	}
	switch v := getenv("GOCOLL_CHECK"); v {
	case "", "0":
	case "1":
		cfg.Check = true
	default:
		return fmt.Errorf("GOCOLL_CHECK=%s: want 0 or 1", v)
	}
	switch v := getenv("GOCOLL_SHM_CMA"); v {
	case "", "1":
	case "0":
		cfg.SharedNoCMA = true
	default:
		return fmt.Errorf("GOCOLL_SHM_CMA=%s: want 0 or 1", v)
	}
	switch v := getenv("GOCOLL_REPRODUCIBLE"); v {
	case "", "0":
	case "1":
		cfg.Reproducible = true
	default:
		return fmt.Errorf("GOCOLL_REPRODUCIBLE=%s: want 0 or 1", v)
	}
	switch v := getenv("GOCOLL_REPORT"); v {
	case "", "0":
	case "1":
		cfg.Report = true
	default:
		return fmt.Errorf("GOCOLL_REPORT=%s: want 0 or 1", v)
	}
	return nil
}
