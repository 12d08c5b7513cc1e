package main

/*
#include "preload.h"
*/
import "C"

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/internal/version"
	"github.com/gocoll/gocoll/preload/native"
	"github.com/gocoll/gocoll/tuner"
)

// Run-time tuning (GOCOLL_TUNE=runtime, the default under the preload).
//
// Rules measured on one machine do not hold on the next (the build VM's
// host CPU changed once and the preload's rules went from faster than
// Open MPI to 1.2-1.4x slower). So where the built-in rules or the model
// decide a call, the first calls of its cell, (communicator shape,
// collective, size class, op commutativity), are trials: they alternate
// between the host's collective and gocoll's best candidate (gocoll's
// own choice, as standalone: config.own), one untimed call of each, then
// GOCOLL_TUNE_CALLS timed calls of each, each rank timing its own calls
// (shim.c, trial_start and trial_end). At the last trial every rank
// takes the lower quartile of each candidate's times, the ranks take the
// largest of each over the communicator (one PMPI_Allreduce of two
// doubles, MPI_MAX, on the communicator's private duplicate: every rank
// gets the same numbers, so every rank picks the same winner), and
// gocoll wins where its time is below the host's by tuneMargin. The
// winner holds for the whole class on that communicator: the C half
// keeps it like any decision, so the class's later calls never enter Go
// again. It is kept for the process too: a later communicator of the
// same shape takes it without trials if all of its ranks have it (one
// allreduce at its first call of the cell says whether they do), and
// GOCOLL_TUNE_SAVE writes it as a tuning file's rule.
//
// What every rank must do alike, it does from the call's arguments and
// the communicator's agreed state alone: whether a cell is tuned
// (tunable), its class, which candidate each trial runs (the trial's
// number), and the agreement's point (the last trial). Nothing is tuned
// where the host must not run the call (an excluded pair, reproducible
// mode's order-dependent ones among them), nor a forced algorithm, a
// GOCOLL_TUNING_FILE rule, device memory, a one-rank communicator or an
// empty call; nonblocking and persistent calls take a decided winner
// but make no trials (the built-in choice runs them meanwhile).

// tuneMargin: gocoll wins a cell where its time is below the host's by
// this fraction, so that noise between equals leaves the call to the
// host.
const tuneMargin = 0.03

// cellKey is a cell of one communicator (its shape is the
// communicator's).
type cellKey struct {
	coll        int
	lo          int64 // the class's first byte (tuner.ClassRange)
	commutative bool
}

// trial is one cell's run-time tuning on one communicator.
type trial struct {
	n         int       // trials made
	k         int       // timed trials of each candidate (trialsOf)
	cand      int       // gocoll's candidate, an algorithm index
	host, own []float64 // this rank's timed trials, in µs
	decided   bool
	winner    int // -1 the host, else an algorithm index
	hi        int64
}

// largeTrials is the size from which a cell takes half the timed
// trials: MPI suites warm up with 10 calls there (OSU's and collbench's
// large-message count), which the trials then fit (1+4 of each), and
// the time of one call is less noisy.
const largeTrials = 8 << 10

// trialsOf is the number of timed trials of each candidate of a cell
// whose class starts at lo bytes (the same on every rank).
func trialsOf(lo int64) int {
	if lo > largeTrials {
		return max(1, cfg.tuneCalls/2)
	}
	return cfg.tuneCalls
}

// shapeCell is a cell of the process: a communicator's cell and shape.
type shapeCell struct {
	cellKey
	shape tuner.Shape
}

// verdict is what run-time tuning measured and chose for a cell.
type verdict struct {
	winner       int
	name         string
	host, gocoll float64 // the slowest rank's lower quartile, µs
	hi           int64
}

// measured holds the process's verdicts, for later communicators of the
// same shape and GOCOLL_TUNE_SAVE.
var measured = struct {
	sync.Mutex
	m map[shapeCell]verdict
}{m: map[shapeCell]verdict{}}

// tunable returns gocoll's candidate for a call run-time tuning decides,
// or ok false for a call it leaves to the rules.
func tunable(c *C.struct_gc_call, q tuner.Query) (cand int, ok bool) {
	if c.cs.size < 2 || c.bytes <= 0 || c.excluded != 0 || c.device != 0 || cfg.tuner.Forced(q.Collective) != "" {
		return 0, false
	}
	ch, err := cfg.tuner.Choose(q)
	if err != nil || ch.File || ch.Fallback || (ch.Source != tuner.FromRule && ch.Source != tuner.FromModel) {
		return 0, false
	}
	own, err := cfg.own.Choose(q)
	if err != nil || own.Alg == nil {
		return 0, false
	}
	return cfg.algIndex(int(c.coll), own.Alg.Name), true
}

// shapeOf is the shape of a communicator gocoll has set up.
func (st *commState) shape() tuner.Shape {
	if st.nodes == nil {
		return tuner.Shape{P: st.size, Nodes: 1, PerNode: st.size}
	}
	return tuner.Shape{P: st.size, Nodes: st.nodes.NumNodes(), PerNode: st.nodes.MaxPerNode()}
}

// tuneCall decides a call for run-time tuning, from gc_decide: handled
// false where tuning leaves it to the rules (st, perhaps set up here,
// is the communicator's state, nil if not set up; pending: a request
// in a cell still on trial, whose answer must not be kept); else alg is
// the answer (an algorithm index, or -1 for the host), with c.trial set
// for a trial and c.lo, c.end the class for a decided cell.
func tuneCall(c *C.struct_gc_call, st *commState) (alg C.int, handled bool, _ *commState, pending bool) {
	shared, nodes := true, (*algorithms.NodeMap)(nil)
	if st != nil {
		shared, nodes = st.c.Shared(), st.nodes
	}
	if _, ok := tunable(c, query(c, shared, nodes)); !ok {
		return 0, false, st, false
	}
	if st == nil {
		// The trials need gocoll's side of the communicator: set it up
		// now, collectively (every rank is in this call, deciding the
		// same cell), and ask again knowing whether it has a segment.
		var fresh bool
		var err error
		if st, fresh, err = stateOf(c); err != nil {
			c.cs.native = 1
			fmt.Fprintf(os.Stderr, "gocoll: rank %d: %s: cannot run gocoll on this communicator, the host MPI's collectives will: %v\n",
				int(c.cs.rank), algorithms.Collective(c.coll), err)
			return -1, true, nil, false
		}
		if fresh {
			C.gc_forget(c.cs)
		}
	}
	q := query(c, st.c.Shared(), st.nodes)
	cand, ok := tunable(c, q)
	if !ok {
		return 0, false, st, false
	}
	lo, hi := tuner.ClassRange(int64(c.bytes))
	key := cellKey{coll: int(c.coll), lo: lo, commutative: c.commutative != 0}
	t := st.cells[key]
	if t == nil {
		if c.request != 0 {
			return 0, false, st, true // the rules meanwhile
		}
		t = &trial{cand: cand, hi: hi, k: trialsOf(lo)}
		if st.cells == nil {
			st.cells = map[cellKey]*trial{}
		}
		st.cells[key] = t
		st.adopt(key, t)
	}
	if t.decided {
		c.lo, c.end, c.how = C.int64_t(lo), C.int64_t(hi+1), C.GC_HOW_MEASURED
		if t.winner < 0 && cfg.debug {
			fmt.Fprintf(os.Stderr, "gocoll: rank %d: %s -> host MPI (tuned: native for %d bytes at p=%d; measured here)\n",
				st.rank, q.Collective, q.Bytes, q.Params.P)
		}
		return C.int(t.winner), true, st, false
	}
	if c.request != 0 {
		return 0, false, st, true // trials are blocking calls: the rules meanwhile
	}
	// A trial: gocoll first (untimed), the host (untimed), then each in
	// turn.
	c.trial, c.how = 1, 0
	if t.n%2 == 1 {
		if cfg.debug {
			fmt.Fprintf(os.Stderr, "gocoll: rank %d: %s -> host MPI (tuned: native, run-time trial %d of %d)\n",
				st.rank, q.Collective, t.n+1, 2+2*t.k)
		}
		return -1, true, st, false
	}
	return C.int(t.cand), true, st, false
}

// adopt decides a new cell of st without trials when every rank has a
// verdict for it from an earlier communicator of the same shape, the
// same one (one allreduce says whether they do).
func (st *commState) adopt(key cellKey, t *trial) {
	measured.Lock()
	v, ok := measured.m[shapeCell{key, st.shape()}]
	measured.Unlock()
	mine := 0.0
	if ok {
		mine = float64(v.winner + 2)
	}
	all := [2]C.double{C.double(mine), C.double(-mine)}
	if C.gc_allreduce_max_doubles(st.dup, &all[0], 2) != 0 {
		return
	}
	if hi, lo := float64(all[0]), -float64(all[1]); hi == lo && lo > 0 {
		t.decided, t.winner = true, int(lo)-2
	}
}

// gc_trial_time takes the time of a trial call, in nanoseconds, on this
// rank; at the cell's last trial the ranks agree on its winner.
//
//export gc_trial_time
func gc_trial_time(c *C.struct_gc_call, ns C.int64_t) {
	defer func() {
		if v := recover(); v != nil {
			internal("run-time tuning", v)
		}
	}()
	comms.Lock()
	st := comms.byID[c.cs.id]
	comms.Unlock()
	if st == nil {
		return
	}
	lo, _ := tuner.ClassRange(int64(c.bytes))
	t := st.cells[cellKey{coll: int(c.coll), lo: lo, commutative: c.commutative != 0}]
	if t == nil || t.decided {
		return
	}
	us := float64(ns) / 1e3
	switch {
	case t.n < 2: // untimed: the first call of each
	case t.n%2 == 0:
		t.own = append(t.own, us)
	default:
		t.host = append(t.host, us)
	}
	t.n++
	if t.n == 2+2*t.k {
		st.agree(c, lo, t)
	}
}

// quartile is the lower quartile of a few times (the 2nd of 8, the 1st
// of 4): what a candidate takes when nothing else on the machine gets
// in its way. Another job's time slices only ever add time, so on a
// loaded machine the median of 8 calls mostly measured the load: a
// 4-byte allreduce at 2 ranks under load 3 then took 180-200 ns with
// auto, 120-130 with the engine forced (lat.c's medians).
func quartile(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[(len(s)-1)/4]
}

// agree decides a cell after its last trial, on every rank alike: the
// slowest rank's lower quartile of each candidate.
func (st *commState) agree(c *C.struct_gc_call, lo int64, t *trial) {
	h, g := quartile(t.host), quartile(t.own)
	if f, ok := cfg.tuneTest.fake[st.rank]; ok {
		h, g = f[0], f[1] // the test hook: this rank's times, skewed on purpose
	}
	v := [2]C.double{C.double(h), C.double(g)}
	cl := algorithms.Collective(c.coll)
	if rc := C.gc_allreduce_max_doubles(st.dup, &v[0], 2); rc != 0 {
		fmt.Fprintf(os.Stderr, "gocoll: rank %d: %s: run-time tuning cannot agree (MPI_Allreduce error %d): the host MPI runs %d-%d bytes\n",
			st.rank, cl, int(rc), lo, t.hi)
		v[0], v[1] = 0, 1
	}
	t.decided, t.winner = true, -1
	if float64(v[1]) < float64(v[0])*(1-tuneMargin) {
		t.winner = t.cand
	}
	name := native.Name
	if t.winner >= 0 {
		name = cfg.names[c.coll][t.winner]
	}
	sh := st.shape()
	measured.Lock()
	measured.m[shapeCell{cellKey{int(c.coll), lo, c.commutative != 0}, sh}] = verdict{winner: t.winner, name: name, host: float64(v[0]), gocoll: float64(v[1]), hi: t.hi}
	measured.Unlock()
	if cfg.debug {
		winner := "host MPI"
		if t.winner >= 0 {
			winner = name
		}
		op := ""
		if c.commutative == 0 {
			op = ", non-commutative op"
		}
		fmt.Fprintf(os.Stderr, "gocoll: rank %d: tuned %s comm=%s %s, %d-%d bytes%s: host %.2f µs, %s %.2f µs (the slowest rank's lower quartile of %d calls each) -> %s\n",
			st.rank, cl, st.name, sh, lo, t.hi, op, float64(v[0]), cfg.names[c.coll][t.cand], float64(v[1]), t.k, winner)
	}
}

// saveTuned writes the process's verdicts to GOCOLL_TUNE_SAVE as a
// tuning file (rank 0 of MPI_COMM_WORLD, at MPI_Finalize): a rule per
// cell of a commutative op, with exact ranges (its class's bytes, its
// shape's ranks, nodes and ranks per node), for GOCOLL_TUNING_FILE next
// time, where it decides without trials.
func saveTuned(path string) error {
	measured.Lock()
	cells := make([]shapeCell, 0, len(measured.m))
	for sc := range measured.m {
		if sc.commutative {
			cells = append(cells, sc)
		}
	}
	sort.Slice(cells, func(i, j int) bool {
		a, b := cells[i], cells[j]
		if a.coll != b.coll {
			return a.coll < b.coll
		}
		if a.shape != b.shape {
			return a.shape.P < b.shape.P || (a.shape.P == b.shape.P && (a.shape.Nodes < b.shape.Nodes ||
				(a.shape.Nodes == b.shape.Nodes && a.shape.PerNode < b.shape.PerNode)))
		}
		return a.lo < b.lo
	})
	f := tuner.File{Provenance: &tuner.Provenance{
		Command: "GOCOLL_TUNE=runtime GOCOLL_TUNE_SAVE=" + path + " (libgocoll-preload.so " + version.Version + ")",
		Machine: machine(),
		Date:    time.Now().UTC().Format(time.RFC3339),
		Data:    "run-time tuning: the slowest rank's lower quartile of each candidate's trials, host vs gocoll",
	}, Rules: []tuner.Rule{}}
	for _, sc := range cells {
		v := measured.m[sc]
		f.Rules = append(f.Rules, tuner.Rule{Collective: tuner.CollectiveName(algorithms.Collective(sc.coll)),
			MinBytes: sc.lo, MaxBytes: v.hi, MinRanks: sc.shape.P, MaxRanks: sc.shape.P,
			MinNodes: sc.shape.Nodes, MaxNodes: sc.shape.Nodes, MinPerNode: sc.shape.PerNode, MaxPerNode: sc.shape.PerNode,
			Algorithm: v.name})
	}
	measured.Unlock()
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + fmt.Sprintf(".%d.tmp", os.Getpid())
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// machine names the CPU, for the saved file's provenance.
func machine() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			h, _ := os.Hostname()
			return fmt.Sprintf("%s, %s", h, strings.TrimSpace(v))
		}
	}
	h, _ := os.Hostname()
	return h
}

// reportTuned prints the process's verdicts (GOCOLL_REPORT=1, at
// MPI_Finalize), one line each, as the debug line says them.
func reportTuned(rank int) {
	measured.Lock()
	defer measured.Unlock()
	cells := make([]shapeCell, 0, len(measured.m))
	for sc := range measured.m {
		cells = append(cells, sc)
	}
	sort.Slice(cells, func(i, j int) bool {
		a, b := cells[i], cells[j]
		if a.coll != b.coll || a.shape.P != b.shape.P {
			return a.coll < b.coll || (a.coll == b.coll && a.shape.P < b.shape.P)
		}
		return a.lo < b.lo
	})
	var b strings.Builder
	for _, sc := range cells {
		v := measured.m[sc]
		op := ""
		if !sc.commutative {
			op = ", non-commutative op"
		}
		fmt.Fprintf(&b, "gocoll: rank %d: tuned: %s %s, %d-%d bytes%s: host %.2f µs, gocoll %.2f µs -> %s\n",
			rank, algorithms.Collective(sc.coll), sc.shape, sc.lo, v.hi, op, v.host, v.gocoll, v.name)
	}
	os.Stderr.WriteString(b.String()) // one write: the lines of ranks sharing stderr stay whole
}
