// Package tuner picks the algorithm of each collective call.
//
// The choice is data, not code: an ordered list of rules, each naming a
// collective, a range of message sizes, ranges of rank counts, nodes and
// ranks per node, and an algorithm. The first rule that matches the call
// and whose algorithm's restrictions hold wins. Rules come from
// GOCOLL_TUNING_FILE first, then from the built-in defaults (defaults.go),
// which hold where they were measured (up to 8 ranks on one node). Outside
// every rule the model decides (model.go), on the tuning file's machine or
// model.Default. A collective with one algorithm (the rooted ones: Bcast,
// Reduce, Gather) has it chosen as the only one. Environment variables
// (envvar.Settings.Forced) can force an algorithm per collective, rooted
// ones included; a forced algorithm whose restrictions fail falls back to
// the tuned choice, as GOCOLL_FALLBACK says.
//
// # Extra candidates
//
// A user of the tuner may register one candidate that gocoll does not
// schedule (Options.Extra): under LD_PRELOAD, package preload registers
// the host MPI's own collective as "native" (preload/native). Its name
// then goes wherever an algorithm name goes (GOCOLL_*_ALGORITHM, tuning
// file rules, Options.Rules), and Choose answers with Choice.Extra set
// and no Alg. A tuner without it (New) rejects the name as it rejects
// any unknown one.
package tuner

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/envvar"
	"github.com/gocoll/gocoll/executor/model"
)

// Rule selects an algorithm for calls of one collective whose size in bytes,
// number of ranks, number of nodes and ranks per node (the most on one
// node) fall in the given ranges (a zero maximum means no limit). A rule
// applies only where it was measured: give it the range of ranks and nodes
// it was measured at; outside every rule the model decides (model.go).
type Rule struct {
	Collective string `json:"collective"` // allreduce, reduce_scatter, reduce_scatter_block, allgather
	MinBytes   int64  `json:"min_bytes,omitempty"`
	MaxBytes   int64  `json:"max_bytes,omitempty"`
	MinRanks   int    `json:"min_ranks,omitempty"`
	MaxRanks   int    `json:"max_ranks,omitempty"`
	MinNodes   int    `json:"min_nodes,omitempty"`
	MaxNodes   int    `json:"max_nodes,omitempty"`
	MinPerNode int    `json:"min_ranks_per_node,omitempty"`
	MaxPerNode int    `json:"max_ranks_per_node,omitempty"`
	PowerOfTwo bool   `json:"power_of_two,omitempty"` // only when p is a power of two
	Algorithm  string `json:"algorithm"`
}

// inRange checks the size, rank and node bounds of the rule.
func (r Rule) inRange(bytes int64, s Shape) bool {
	p := s.P
	return bytes >= r.MinBytes && (r.MaxBytes == 0 || bytes <= r.MaxBytes) &&
		p >= r.MinRanks && (r.MaxRanks == 0 || p <= r.MaxRanks) &&
		s.Nodes >= r.MinNodes && (r.MaxNodes == 0 || s.Nodes <= r.MaxNodes) &&
		s.PerNode >= r.MinPerNode && (r.MaxPerNode == 0 || s.PerNode <= r.MaxPerNode) &&
		(!r.PowerOfTwo || p&(p-1) == 0)
}

// CollectiveName returns the collective's name in rules and in
// environment variables (lower case): allreduce, reduce_scatter, ...
func CollectiveName(c algorithms.Collective) string { return strings.ToLower(c.EnvName()) }

// File is the format of GOCOLL_TUNING_FILE: rules, and optionally the
// machine the model decides with outside them (gocoll-tune writes both)
// and what made the file.
type File struct {
	Provenance *Provenance `json:"provenance,omitempty"`
	Machine    *Machine    `json:"machine,omitempty"`
	Rules      []Rule      `json:"rules"`
}

// Provenance says what wrote a tuning file (gocoll-tune fills it in,
// as internal/provenance heads every measurement): the command line, the
// commit, the machine it measured and when. The tuner does not read it.
type Provenance struct {
	Command string `json:"command"`
	Commit  string `json:"commit"`
	Machine string `json:"machine"`
	Date    string `json:"date,omitempty"`
	Data    string `json:"data,omitempty"`
}

// Fallback says what happens when a forced algorithm cannot run a call
// (GOCOLL_FALLBACK, parsed by package envvar).
type Fallback = envvar.Fallback

const (
	FallbackWarn   = envvar.FallbackWarn   // use the tuned choice, say so once on stderr
	FallbackError  = envvar.FallbackError  // fail the call
	FallbackSilent = envvar.FallbackSilent // use the tuned choice quietly
)

// Extra is a candidate the tuner does not schedule itself, registered
// by the tuner's user (Options.Extra): the host MPI's own collective
// under LD_PRELOAD (preload/native).
type Extra struct {
	// Name is the candidate's name in rules and GOCOLL_*_ALGORITHM.
	Name string
	// Called is how the model's reasons name it: "the host".
	Called string
	// Refuse says why the candidate cannot run a call, or nil. It may
	// look at Commutative, SharedMemory, DeviceMemory and Reproducible
	// only: the model keeps its choices by those.
	Refuse func(algorithms.Params) error
	// EstimatedBy are the algorithms whose best modelled time stands for
	// the candidate's where the model decides (it cannot price what it
	// does not schedule); the model chooses gocoll's best only where it
	// is Margin times faster than that. Without them the model never
	// chooses the candidate.
	EstimatedBy []string
	Margin      float64
}

// refuses is Refuse, nil for a candidate without restrictions.
func (x *Extra) refuses(p algorithms.Params) error {
	if x.Refuse == nil {
		return nil
	}
	return x.Refuse(p)
}

// Options configures NewWithOptions.
type Options struct {
	// Extra, if set, is one more candidate besides gocoll's algorithms.
	Extra *Extra
	// Rules are tried after the tuning file's rules and before Defaults:
	// LD_PRELOAD mode puts its measured native/gocoll crossovers here.
	// With an Extra, Defaults are not used: outside these rules and the
	// file's, the model decides between it and gocoll (model.go).
	Rules []Rule
	// Machine is the model's machine, for calls outside every rule; nil:
	// the tuning file's, or else model.Default.
	Machine *model.Machine
}

// Tuner chooses algorithms. It is safe for concurrent use.
type Tuner struct {
	force    map[algorithms.Collective]string
	rules    []Rule // tuning file first, then Options.Rules, then defaults
	fallback Fallback
	log      io.Writer
	extra    *Extra   // Options.Extra, or nil
	sources  []string // where each rule comes from, for Choice.Why
	fromFile []bool   // whether each rule is GOCOLL_TUNING_FILE's

	mu     sync.Mutex
	warned map[string]bool

	// compiled is rules with collectives and algorithms resolved, made
	// on first use: Choose runs on every call and must not look names up.
	compileOnce sync.Once
	compiled    []compiledRule

	// The model, outside every rule (model.go).
	machine model.Machine
	models  modelCache
	last    atomic.Pointer[shapeOf] // the shape of the last node map seen

	// given: the tuning file or Options gave the machine (no in-job fit
	// replaces it). root: the tuner WithMachine made this one from (nil:
	// none); derived: the tuners made from this one, by machine (guarded
	// by mu).
	given   bool
	root    *Tuner
	derived map[model.Machine]*Tuner
}

type compiledRule struct {
	Rule
	coll  algorithms.Collective
	alg   *algorithms.Algorithm // nil for the extra candidate
	extra bool
	why   string // for GOCOLL_DEBUG=info: "rule 3 (defaults)"
	file  bool   // from GOCOLL_TUNING_FILE
}

func (t *Tuner) compile() {
	for i, r := range t.rules {
		c, ok := collectiveByName(r.Collective)
		if !ok {
			continue
		}
		cr := compiledRule{Rule: r, coll: c, extra: t.isExtra(r.Algorithm), why: t.sources[i], file: t.fromFile[i]}
		if !cr.extra {
			a, err := algorithms.Lookup(c, r.Algorithm)
			if err != nil {
				continue
			}
			cr.alg = a
		}
		t.compiled = append(t.compiled, cr)
	}
}

// New returns a tuner configured by s (envvar.Parse's): its forced
// algorithms, tuning file and fallback policy. It fails on a forced
// name that is not an algorithm of its collective (envvar.Parse lets
// envvar.Native through, for the preload's tuner), an unreadable tuning
// file, naming the variable.
func New(s envvar.Settings) (*Tuner, error) { return NewWithOptions(s, Options{}) }

// NewWithOptions is New with the options of LD_PRELOAD mode: an extra
// candidate ("native"), and extra rules between the tuning file and the
// defaults. It fails, naming the rule, on a rule with an unknown
// collective or algorithm.
func NewWithOptions(s envvar.Settings, opts Options) (*Tuner, error) {
	t := &Tuner{force: map[algorithms.Collective]string{}, fallback: FallbackWarn, log: os.Stderr, warned: map[string]bool{}, extra: opts.Extra, machine: model.Default}
	for _, c := range envvar.Tuned {
		name := s.Forced[c]
		if name == "" || name == "auto" {
			continue
		}
		if err := t.checkName(c, name); err != nil {
			return nil, fmt.Errorf("%s=%s: %v", ForceVar(c), name, err)
		}
		t.force[c] = name
	}
	if s.Fallback != "" {
		t.fallback = s.Fallback
	}
	add := func(rules []Rule, source string, file bool) {
		for i := range rules {
			t.rules = append(t.rules, rules[i])
			t.sources = append(t.sources, fmt.Sprintf("rule %d of %s", i+1, source))
			t.fromFile = append(t.fromFile, file)
		}
	}
	if path := s.TuningFile; path != "" {
		f, err := readTuningFile(path, t.extraName())
		if err != nil {
			return nil, fmt.Errorf("GOCOLL_TUNING_FILE: %v", err)
		}
		add(f.Rules, path, true)
		if f.Machine != nil {
			t.machine, t.given = f.Machine.Model(), true
		}
	}
	if err := checkRules(opts.Rules, t.extraName()); err != nil {
		return nil, fmt.Errorf("tuner options: %v", err)
	}
	add(opts.Rules, "the measured rules", false)
	if opts.Extra == nil {
		add(Defaults, "the defaults", false)
	}
	if opts.Machine != nil {
		t.machine, t.given = *opts.Machine, true
	}
	return t, nil
}

// MachineGiven reports whether the model's machine was given, by the
// tuning file's "machine" or Options.Machine, rather than model.Default:
// coll's in-job fit does not replace a given machine.
func (t *Tuner) MachineGiven() bool { return t.given }

// WithMachine returns a tuner that decides as t does (its forced
// algorithms, rules, fallback and extra candidate) but with machine m
// outside every rule: coll's communicators decide with it once the job
// has fitted its machine, and the model's reasons say "model on the
// fitted machine". The tuner of one machine is made once per t
// and shared, with its cache of the model's choices, by every caller.
func (t *Tuner) WithMachine(m model.Machine) *Tuner {
	if t.root != nil {
		return t.root.WithMachine(m)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if d, ok := t.derived[m]; ok {
		return d
	}
	d := &Tuner{force: t.force, rules: t.rules, fallback: t.fallback, log: t.log, extra: t.extra, sources: t.sources, fromFile: t.fromFile,
		machine: m, given: true, root: t}
	if t.derived == nil {
		t.derived = map[model.Machine]*Tuner{}
	}
	t.derived[m] = d
	return d
}

// isExtra reports whether name is the extra candidate's.
func (t *Tuner) isExtra(name string) bool { return t.extra != nil && name == t.extra.Name }

// extraName is the extra candidate's name, or "".
func (t *Tuner) extraName() string {
	if t.extra == nil {
		return ""
	}
	return t.extra.Name
}

// checkName fails for a name that is neither an algorithm of c nor the
// extra candidate's (a candidate of the four collectives only: the
// rooted ones are never the host's).
func (t *Tuner) checkName(c algorithms.Collective, name string) error {
	if t.isExtra(name) && !rooted(c) {
		return nil
	}
	_, err := algorithms.Lookup(c, name)
	return err
}

// ForceVar returns the environment variable that forces collective c's
// algorithm, e.g. GOCOLL_ALLREDUCE_ALGORITHM.
func ForceVar(c algorithms.Collective) string { return envvar.ForceVar(c) }

// rooted reports whether c is a rooted collective (Bcast, Reduce, Gather).
func rooted(c algorithms.Collective) bool { return slices.Contains(algorithms.Rooted, c) }

// ForcedRounds returns environments that together force every host
// algorithm of every collective (algorithms.HostNames: the CUDA-only ones
// would fall back on host memory): round i sets each collective's
// variable to its i-th algorithm (wrapping around for collectives with
// fewer), so that len(result) runs of a program try every algorithm
// once. Tests and benchmarks of host memory iterate over it.
func ForcedRounds() [][]string {
	var rounds [][]string
	for i := 0; ; i++ {
		var env []string
		more := false
		for _, c := range algorithms.Collectives {
			names := algorithms.HostNames(c)
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
func ReadFile(path string) ([]Rule, error) {
	f, err := readTuningFile(path, "")
	return f.Rules, err
}

// ReadTuningFile reads and validates a tuning file, its machine included.
func ReadTuningFile(path string) (File, error) { return readTuningFile(path, "") }

// readTuningFile reads a tuning file whose rules may name the extra
// candidate extra ("": none).
func readTuningFile(path string, extra string) (File, error) {
	var f File
	data, err := os.ReadFile(path)
	if err != nil {
		return f, err
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return f, fmt.Errorf("%s: %v", path, err)
	}
	if err := checkRules(f.Rules, extra); err != nil {
		return f, fmt.Errorf("%s: %v", path, err)
	}
	if m := f.Machine; m != nil && (m.Alpha < 0 || m.Beta < 0 || m.Gamma < 0 || m.Delta < 0 || m.NodeAlpha < 0 || m.NodeBeta < 0 || m.Sync < 0) {
		return f, fmt.Errorf("%s: machine: negative parameter", path)
	}
	return f, nil
}

// SaveMachine writes machine m into the tuning file at path, headed by
// pv (nil: none): a new file with no rules, or an existing one with its
// machine and provenance replaced and its rules kept as they are (a
// run-time tuning file may hold rules this tuner cannot check, such as
// the preload's "native"). The file is written beside itself and renamed
// into place, so that a job reading it never sees half of it. It fails,
// leaving the file alone, where an existing file is not a tuning file.
func SaveMachine(path string, m Machine, pv *Provenance) error {
	f := File{Rules: []Rule{}}
	if data, err := os.ReadFile(path); err == nil {
		if err := json.Unmarshal(data, &f); err != nil {
			return fmt.Errorf("%s: not a tuning file, left alone: %v", path, err)
		}
		if f.Rules == nil {
			f.Rules = []Rule{}
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	f.Machine, f.Provenance = &m, pv
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(append(data, '\n'))
	if err = errors.Join(err, tmp.Close()); err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

// checkRules fails, naming the rule, on an unknown collective or algorithm
// (extra, if not "", is a known one).
func checkRules(rules []Rule, extra string) error {
	for i, r := range rules {
		c, ok := collectiveByName(r.Collective)
		if !ok {
			return fmt.Errorf("rule %d: unknown collective %q (valid: allreduce, reduce_scatter, reduce_scatter_block, allgather)", i+1, r.Collective)
		}
		if extra != "" && r.Algorithm == extra {
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

// Source says where a choice came from.
type Source uint8

const (
	FromRule  Source = iota + 1 // a rule; Choice.Why names it
	FromModel                   // the model, outside every rule; Why has its estimates
	Forced                      // GOCOLL_*_ALGORITHM or Query.Force
	Only                        // the collective's only algorithm (Bcast's, Reduce's, Gather's), none forced
)

// Choice is the tuner's answer.
type Choice struct {
	Alg *algorithms.Algorithm // nil when Extra is set
	// Extra is the name of the extra candidate chosen (Options.Extra),
	// or "".
	Extra  string
	Source Source
	// Why says, for a tuned choice, which rule or model estimate decided:
	// "rule 5 of the defaults", or "model (...): ring 1.2 ms, next ...".
	Why string
	// File: the rule that decided is GOCOLL_TUNING_FILE's (the user's
	// word, or a decision measured by an earlier run: never measured
	// again at run time).
	File bool
	// Fallback: a forced algorithm (Refused) could not run the call, for
	// the reason Refusal, and this is the tuned choice instead
	// (GOCOLL_FALLBACK=warn or silent).
	Fallback bool
	Refused  string
	Refusal  error
}

// Name returns the chosen algorithm's name, or the extra candidate's.
func (c Choice) Name() string {
	if c.Extra != "" {
		return c.Extra
	}
	return c.Alg.Name
}

// How says where the choice came from, for people: "tuned", "forced",
// "only algorithm", or "tuned (forced X cannot run: reason)".
func (c Choice) How() string {
	switch {
	case c.Fallback:
		return fmt.Sprintf("tuned (forced %s cannot run: %v)", c.Refused, c.Refusal)
	case c.Source == Forced:
		return "forced"
	case c.Source == Only:
		return "only algorithm"
	}
	return "tuned"
}

// Choose returns the algorithm for a call.
func (t *Tuner) Choose(q Query) (Choice, error) {
	name := q.Force
	if name == "" {
		name = t.force[q.Collective]
	}
	if t.isExtra(name) && !rooted(q.Collective) {
		if restriction := t.extra.refuses(q.Params); restriction != nil {
			return t.fallBack(q, name, restriction)
		}
		return Choice{Extra: name, Source: Forced}, nil
	}
	if name != "" && name != "auto" {
		a, err := algorithms.Lookup(q.Collective, name)
		if err != nil {
			return Choice{}, err
		}
		restriction := a.Check(q.Params)
		if restriction == nil {
			return Choice{Alg: a, Source: Forced}, nil
		}
		return t.fallBack(q, name, restriction)
	}
	return t.tunedOrError(q)
}

// tunedOrError is tuned, or an error where no algorithm can run the call.
func (t *Tuner) tunedOrError(q Query) (Choice, error) {
	c := t.tuned(q)
	if c.Alg == nil && c.Extra == "" {
		return Choice{}, errors.New(c.Why)
	}
	return c, nil
}

// fallBack answers a call whose forced algorithm name cannot run it, for
// the reason restriction, as GOCOLL_FALLBACK says.
func (t *Tuner) fallBack(q Query, name string, restriction error) (Choice, error) {
	if t.fallback == FallbackError {
		return Choice{}, fmt.Errorf("forced algorithm cannot run this call (GOCOLL_FALLBACK=error): %v", restriction)
	}
	c, err := t.tunedOrError(q)
	if err != nil {
		return Choice{}, err
	}
	c.Fallback, c.Refused, c.Refusal = true, name, restriction
	if t.fallback == FallbackWarn {
		t.warnOnce(q.Collective.String()+"/"+name, fmt.Sprintf("gocoll: %s: %v; using %s instead\n", q.Collective, restriction, c.Name()))
	}
	return c, nil
}

// tuned returns the first rule's algorithm whose restrictions hold, or
// outside every rule the model's choice.
func (t *Tuner) tuned(q Query) Choice {
	// A collective with one candidate (each rooted one today) has
	// nothing to tune: neither rules nor the model are asked.
	if all := algorithms.All(q.Collective); len(all) == 1 && (t.extra == nil || rooted(q.Collective)) {
		if err := all[0].Check(q.Params); err != nil {
			return Choice{Why: err.Error()}
		}
		return Choice{Alg: all[0], Source: Only}
	}
	t.compileOnce.Do(t.compile)
	sh := t.shape(q.Params)
	for i := range t.compiled {
		r := &t.compiled[i]
		if r.coll != q.Collective || !r.inRange(q.Bytes, sh) {
			continue
		}
		if r.extra {
			if t.extra.refuses(q.Params) != nil {
				continue
			}
			return Choice{Extra: t.extra.Name, Source: FromRule, Why: r.why, File: r.file}
		}
		if r.alg.Placed(q.Params) && r.alg.Check(q.Params) == nil {
			return Choice{Alg: r.alg, Source: FromRule, Why: r.why, File: r.file}
		}
	}
	return t.modelChoice(q, sh)
}

func (t *Tuner) warnOnce(key, msg string) {
	if t.root != nil { // one warning per process, whatever the machine
		t.root.warnOnce(key, msg)
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.warned[key] {
		return
	}
	t.warned[key] = true
	io.WriteString(t.log, msg)
}

// ClassRange returns the bytes [lo, hi] of b's size class: the model's
// (eight per doubling; one per size up to 16 bytes), inside which the
// model's choice never changes. Run-time tuning (package preload)
// decides once per class.
func ClassRange(b int64) (lo, hi int64) {
	c := sizeClass(b)
	if c <= 16 {
		return int64(c), int64(c)
	}
	e, f := int64(c/8), int64(c%8)
	return (8+f)<<e>>3 + 1, (9 + f) << e >> 3
}

// Span returns the bytes [lo, hi] around q.Bytes, inside q's size class
// (ClassRange), where Choose answers q's other fields as it answers q:
// no rule of q's collective begins or ends inside. A caller may keep one
// answer for every size of the span (the preload's C half does).
func (t *Tuner) Span(q Query) (lo, hi int64) {
	lo, hi = ClassRange(q.Bytes)
	t.compileOnce.Do(t.compile)
	for i := range t.compiled {
		r := &t.compiled[i]
		if r.coll != q.Collective {
			continue
		}
		// A rule holds from MinBytes to MaxBytes: its edges are MinBytes
		// and MaxBytes+1, where an answer may change.
		edges := []int64{r.MinBytes}
		if r.MaxBytes > 0 {
			edges = append(edges, r.MaxBytes+1)
		}
		for _, edge := range edges {
			if edge <= q.Bytes {
				lo = max(lo, edge)
			} else {
				hi = min(hi, edge-1)
			}
		}
	}
	return lo, hi
}
