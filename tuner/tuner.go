// Package tuner picks the algorithm of each collective call.
//
// The choice is data, not code: an ordered list of rules, each naming a
// collective, a range of message sizes, a range of rank counts and an
// algorithm. The first rule that matches the call and whose algorithm's
// restrictions hold wins. Rules come from GOCOLL_TUNING_FILE first, then
// from the built-in defaults (defaults.go), which end with a rule that
// always matches. Environment variables can force an algorithm per
// collective; a forced algorithm whose restrictions fail falls back to the
// tuned choice, as GOCOLL_FALLBACK says.
package tuner

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/gocoll/gocoll/algorithms"
)

// Rule selects an algorithm for calls of one collective whose size in bytes
// and number of ranks fall in the given ranges (a zero maximum means no
// limit).
type Rule struct {
	Collective string `json:"collective"` // allreduce, reduce_scatter, reduce_scatter_block, allgather
	MinBytes   int64  `json:"min_bytes,omitempty"`
	MaxBytes   int64  `json:"max_bytes,omitempty"`
	MinRanks   int    `json:"min_ranks,omitempty"`
	MaxRanks   int    `json:"max_ranks,omitempty"`
	PowerOfTwo bool   `json:"power_of_two,omitempty"` // only when p is a power of two
	Algorithm  string `json:"algorithm"`
}

func (r Rule) matches(c algorithms.Collective, bytes int64, p int) bool {
	return r.Collective == CollectiveName(c) &&
		bytes >= r.MinBytes && (r.MaxBytes == 0 || bytes <= r.MaxBytes) &&
		p >= r.MinRanks && (r.MaxRanks == 0 || p <= r.MaxRanks) &&
		(!r.PowerOfTwo || p&(p-1) == 0)
}

// CollectiveName returns the collective's name in rules and in
// environment variables (lower case): allreduce, reduce_scatter, ...
func CollectiveName(c algorithms.Collective) string { return strings.ToLower(c.EnvName()) }

// File is the format of GOCOLL_TUNING_FILE.
type File struct {
	Rules []Rule `json:"rules"`
}

// Fallback says what happens when a forced algorithm cannot run a call.
type Fallback string

const (
	FallbackWarn   Fallback = "warn"   // use the tuned choice, say so once on stderr
	FallbackError  Fallback = "error"  // fail the call
	FallbackSilent Fallback = "silent" // use the tuned choice quietly
)

// Tuner chooses algorithms. It is safe for concurrent use.
type Tuner struct {
	force    map[algorithms.Collective]string
	rules    []Rule // tuning file first, then defaults
	fallback Fallback
	log      io.Writer

	mu     sync.Mutex
	warned map[string]bool
}

// Env reads configuration by name, like os.Getenv.
type Env func(string) string

// New returns a tuner configured from env (os.Getenv if nil). It fails on
// an unknown algorithm name, an unreadable tuning file or a bad
// GOCOLL_FALLBACK value, naming the variable.
func New(env Env) (*Tuner, error) {
	if env == nil {
		env = os.Getenv
	}
	t := &Tuner{force: map[algorithms.Collective]string{}, fallback: FallbackWarn, log: os.Stderr, warned: map[string]bool{}}
	for _, c := range algorithms.Collectives {
		v := ForceVar(c)
		name := strings.TrimSpace(env(v))
		if name == "" || name == "auto" {
			continue
		}
		if _, err := algorithms.Lookup(c, name); err != nil {
			return nil, fmt.Errorf("%s=%s: %v", v, name, err)
		}
		t.force[c] = name
	}
	switch f := Fallback(strings.ToLower(strings.TrimSpace(env("GOCOLL_FALLBACK")))); f {
	case "":
	case FallbackWarn, FallbackError, FallbackSilent:
		t.fallback = f
	default:
		return nil, fmt.Errorf("GOCOLL_FALLBACK=%s: want warn, error or silent", f)
	}
	if path := env("GOCOLL_TUNING_FILE"); path != "" {
		rules, err := ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("GOCOLL_TUNING_FILE: %v", err)
		}
		t.rules = rules
	}
	t.rules = append(t.rules, Defaults...)
	return t, nil
}

// ForceVar returns the environment variable that forces collective c's
// algorithm, e.g. GOCOLL_ALLREDUCE_ALGORITHM.
func ForceVar(c algorithms.Collective) string { return "GOCOLL_" + c.EnvName() + "_ALGORITHM" }

// ReadFile reads and validates a tuning file.
func ReadFile(path string) ([]Rule, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f File
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	for i, r := range f.Rules {
		c, ok := collectiveByName(r.Collective)
		if !ok {
			return nil, fmt.Errorf("%s: rule %d: unknown collective %q (valid: allreduce, reduce_scatter, reduce_scatter_block, allgather)", path, i+1, r.Collective)
		}
		if _, err := algorithms.Lookup(c, r.Algorithm); err != nil {
			return nil, fmt.Errorf("%s: rule %d: %v", path, i+1, err)
		}
	}
	return f.Rules, nil
}

func collectiveByName(name string) (algorithms.Collective, bool) {
	for _, c := range algorithms.Collectives {
		if CollectiveName(c) == name {
			return c, true
		}
	}
	return 0, false
}

// SetLog redirects the tuner's warnings (stderr by default).
func (t *Tuner) SetLog(w io.Writer) { t.log = w }

// Forced returns the algorithm the environment forces for c, or "".
func (t *Tuner) Forced(c algorithms.Collective) string { return t.force[c] }

// Query describes one call.
type Query struct {
	Collective algorithms.Collective
	Bytes      int64 // the message size: the whole vector of an Allreduce or ReduceScatter, the whole output of an Allgather
	Params     algorithms.Params
	Force      string // an algorithm forced for this call only, or ""
}

// Choice is the tuner's answer.
type Choice struct {
	Alg *algorithms.Algorithm
	// How says where the choice came from: "tuned", "forced", or
	// "tuned (forced X cannot run: reason)".
	How string
}

// Choose returns the algorithm for a call.
func (t *Tuner) Choose(q Query) (Choice, error) {
	name, how := q.Force, "forced"
	if name == "" {
		name = t.force[q.Collective]
	}
	if name != "" && name != "auto" {
		a, err := algorithms.Lookup(q.Collective, name)
		if err != nil {
			return Choice{}, err
		}
		restriction := a.Check(q.Params)
		if restriction == nil {
			return Choice{a, how}, nil
		}
		if t.fallback == FallbackError {
			return Choice{}, fmt.Errorf("forced algorithm cannot run this call (GOCOLL_FALLBACK=error): %v", restriction)
		}
		c := t.tuned(q)
		c.How = fmt.Sprintf("tuned (forced %s cannot run: %v)", name, restriction)
		if t.fallback == FallbackWarn {
			t.warnOnce(q.Collective.String()+"/"+name, fmt.Sprintf("gocoll: %s: %v; using %s instead\n", q.Collective, restriction, c.Alg.Name))
		}
		return c, nil
	}
	return t.tuned(q), nil
}

// tuned returns the first rule's algorithm whose restrictions hold.
func (t *Tuner) tuned(q Query) Choice {
	for _, r := range t.rules {
		if !r.matches(q.Collective, q.Bytes, q.Params.P) {
			continue
		}
		a, err := algorithms.Lookup(q.Collective, r.Algorithm)
		if err == nil && a.Check(q.Params) == nil {
			return Choice{a, "tuned"}
		}
	}
	// The defaults end with an order-preserving catch-all per collective,
	// so this is unreachable unless they are broken.
	panic("tuner: no rule matches " + q.Collective.String())
}

func (t *Tuner) warnOnce(key, msg string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.warned[key] {
		return
	}
	t.warned[key] = true
	io.WriteString(t.log, msg)
}
