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
//
// # Native, in LD_PRELOAD mode
//
// Under LD_PRELOAD (package preload) the host MPI's own collective is one
// more candidate: NewWithOptions with Options.Native accepts the name
// "native" wherever an algorithm name goes (GOCOLL_*_ALGORITHM, tuning
// file rules, Options.Rules), and Choose then answers with Choice.Native
// set and no Alg. Native has no restrictions: the host runs any call. A
// standalone tuner (New) rejects the name as it rejects any unknown one.
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

// inRange checks the size and rank bounds of the rule.
func (r Rule) inRange(bytes int64, p int) bool {
	return bytes >= r.MinBytes && (r.MaxBytes == 0 || bytes <= r.MaxBytes) &&
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

// Native is the algorithm name, in LD_PRELOAD mode only, of the host
// MPI's own implementation of a collective.
const Native = "native"

// Options configures NewWithOptions.
type Options struct {
	// Native accepts the name "native" (the host MPI's collective) as a
	// forced algorithm and in rules. Only LD_PRELOAD mode has a host MPI.
	Native bool
	// Rules are tried after the tuning file's rules and before Defaults:
	// LD_PRELOAD mode puts its measured native/gocoll crossovers here.
	Rules []Rule
}

// Tuner chooses algorithms. It is safe for concurrent use.
type Tuner struct {
	force    map[algorithms.Collective]string
	rules    []Rule // tuning file first, then Options.Rules, then defaults
	fallback Fallback
	log      io.Writer
	native   bool // "native" is a valid name

	mu     sync.Mutex
	warned map[string]bool

	// compiled is rules with collectives and algorithms resolved, made
	// on first use: Choose runs on every call and must not look names up.
	compileOnce sync.Once
	compiled    []compiledRule
}

type compiledRule struct {
	Rule
	coll   algorithms.Collective
	alg    *algorithms.Algorithm // nil for native
	native bool
}

func (t *Tuner) compile() {
	for _, r := range t.rules {
		c, ok := collectiveByName(r.Collective)
		if !ok {
			continue
		}
		cr := compiledRule{Rule: r, coll: c, native: r.Algorithm == Native && t.native}
		if !cr.native {
			a, err := algorithms.Lookup(c, r.Algorithm)
			if err != nil {
				continue
			}
			cr.alg = a
		}
		t.compiled = append(t.compiled, cr)
	}
}

// Env reads configuration by name, like os.Getenv.
type Env func(string) string

// New returns a tuner configured from env (os.Getenv if nil). It fails on
// an unknown algorithm name, an unreadable tuning file or a bad
// GOCOLL_FALLBACK value, naming the variable.
func New(env Env) (*Tuner, error) { return NewWithOptions(env, Options{}) }

// NewWithOptions is New with the options of LD_PRELOAD mode: "native"
// as an algorithm, and extra rules between the tuning file and the
// defaults. It fails, naming the rule, on a rule with an unknown
// collective or algorithm.
func NewWithOptions(env Env, opts Options) (*Tuner, error) {
	if env == nil {
		env = os.Getenv
	}
	t := &Tuner{force: map[algorithms.Collective]string{}, fallback: FallbackWarn, log: os.Stderr, warned: map[string]bool{}, native: opts.Native}
	for _, c := range algorithms.Collectives {
		v := ForceVar(c)
		name := strings.TrimSpace(env(v))
		if name == "" || name == "auto" {
			continue
		}
		if err := t.checkName(c, name); err != nil {
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
		rules, err := readFile(path, opts.Native)
		if err != nil {
			return nil, fmt.Errorf("GOCOLL_TUNING_FILE: %v", err)
		}
		t.rules = rules
	}
	if err := checkRules(opts.Rules, opts.Native); err != nil {
		return nil, fmt.Errorf("tuner options: %v", err)
	}
	t.rules = append(t.rules, opts.Rules...)
	t.rules = append(t.rules, Defaults...)
	return t, nil
}

// checkName fails for a name that is neither an algorithm of c nor, where
// allowed, native.
func (t *Tuner) checkName(c algorithms.Collective, name string) error {
	if name == Native && t.native {
		return nil
	}
	_, err := algorithms.Lookup(c, name)
	return err
}

// ForceVar returns the environment variable that forces collective c's
// algorithm, e.g. GOCOLL_ALLREDUCE_ALGORITHM.
func ForceVar(c algorithms.Collective) string { return "GOCOLL_" + c.EnvName() + "_ALGORITHM" }

// ForcedRounds returns environments that together force every algorithm
// of every collective: round i sets each collective's variable to its
// i-th algorithm (wrapping around for collectives with fewer), so that
// len(result) runs of a program try every algorithm once. Tests and
// benchmarks iterate over it.
func ForcedRounds() [][]string {
	var rounds [][]string
	for i := 0; ; i++ {
		var env []string
		more := false
		for _, c := range algorithms.Collectives {
			names := algorithms.Names(c)
			if i < len(names) {
				more = true
			}
			env = append(env, ForceVar(c)+"="+names[i%len(names)])
		}
		if !more {
			return rounds
		}
		rounds = append(rounds, env)
	}
}

// ReadFile reads and validates a tuning file.
func ReadFile(path string) ([]Rule, error) { return readFile(path, false) }

// readFile reads a tuning file whose rules may name native if native.
func readFile(path string, native bool) ([]Rule, error) {
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
	if err := checkRules(f.Rules, native); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return f.Rules, nil
}

// checkRules fails, naming the rule, on an unknown collective or algorithm.
func checkRules(rules []Rule, native bool) error {
	for i, r := range rules {
		c, ok := collectiveByName(r.Collective)
		if !ok {
			return fmt.Errorf("rule %d: unknown collective %q (valid: allreduce, reduce_scatter, reduce_scatter_block, allgather)", i+1, r.Collective)
		}
		if r.Algorithm == Native && native {
			continue
		}
		if _, err := algorithms.Lookup(c, r.Algorithm); err != nil {
			return fmt.Errorf("rule %d: %v", i+1, err)
		}
	}
	return nil
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
	Alg *algorithms.Algorithm // nil when Native
	// Native: hand the call to the host MPI's own collective (LD_PRELOAD
	// mode only; see Options.Native).
	Native bool
	// How says where the choice came from: "tuned", "forced", or
	// "tuned (forced X cannot run: reason)".
	How string
	// Fallback: a forced algorithm could not run the call, and this is
	// the tuned choice instead (GOCOLL_FALLBACK=warn or silent).
	Fallback bool
}

// Name returns the chosen algorithm's name, or "native".
func (c Choice) Name() string {
	if c.Native {
		return Native
	}
	return c.Alg.Name
}

// Choose returns the algorithm for a call.
func (t *Tuner) Choose(q Query) (Choice, error) {
	name, how := q.Force, "forced"
	if name == "" {
		name = t.force[q.Collective]
	}
	if name == Native && t.native {
		return Choice{Native: true, How: how}, nil
	}
	if name != "" && name != "auto" {
		a, err := algorithms.Lookup(q.Collective, name)
		if err != nil {
			return Choice{}, err
		}
		restriction := a.Check(q.Params)
		if restriction == nil {
			return Choice{Alg: a, How: how}, nil
		}
		if t.fallback == FallbackError {
			return Choice{}, fmt.Errorf("forced algorithm cannot run this call (GOCOLL_FALLBACK=error): %v", restriction)
		}
		c := t.tuned(q)
		c.Fallback = true
		c.How = fmt.Sprintf("tuned (forced %s cannot run: %v)", name, restriction)
		if t.fallback == FallbackWarn {
			t.warnOnce(q.Collective.String()+"/"+name, fmt.Sprintf("gocoll: %s: %v; using %s instead\n", q.Collective, restriction, c.Name()))
		}
		return c, nil
	}
	return t.tuned(q), nil
}

// tuned returns the first rule's algorithm whose restrictions hold.
func (t *Tuner) tuned(q Query) Choice {
	t.compileOnce.Do(t.compile)
	for i := range t.compiled {
		r := &t.compiled[i]
		if r.coll != q.Collective || !r.inRange(q.Bytes, q.Params.P) {
			continue
		}
		if r.native {
			return Choice{Native: true, How: "tuned"}
		}
		if r.alg.Check(q.Params) == nil {
			return Choice{Alg: r.alg, How: "tuned"}
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
