package coll

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/executor/model"
	"github.com/gocoll/gocoll/internal/provenance"
	"github.com/gocoll/gocoll/internal/version"
	"github.com/gocoll/gocoll/ops"
	"github.com/gocoll/gocoll/transport"
	"github.com/gocoll/gocoll/tuner"
	"github.com/gocoll/gocoll/tuner/fit"
)

// The in-job fit of the model's machine (GOCOLL_FIT, on by default).
//
// Outside every rule the model decides, on model.Default (a 100 Gbit/s
// fabric) unless the tuning file gives a machine; on another network its
// choices can be far off (ring instead of Rabenseifner on 1 Gbit/s
// links: 1.5-1.7 times slower). So the job measures its own machine, once,
// where the model's choice depends on it: at the first call whose choice
// is the model's (Choice.Source FromModel) on a communicator that spans
// several nodes, unless the tuning file gave a machine. That condition
// depends only on the call's arguments, the rules and the communicator's
// node map and state, which every rank of the communicator has alike, so
// every rank enters the fit at the same call. Within one node the model
// never decides below 9 ranks (the defaults' range), and its node
// parameters are the reference machine's measured ones; so one node never
// fits.
//
// The fit is collective over the communicator, run with c.mu held,
// straight on its transport and the host executor (as gatherRecords):
//
//  1. Agreement: the lowest rank that already knows a machine fitted in
//     this job (by another communicator; a process's ranks share what
//     they know, cfg.fit), measured at every level this communicator has
//     (across nodes, within one), is found with an allreduce, and
//     broadcasts it: then nothing is measured.
//  2. Otherwise fit.Measure with fit.InJob's bounds: the pair across nodes
//     and the pair within a node (tuner/fit.PairsOf) exchange 8 B to 4 MiB
//     within 150 ms while the others wait, rank 0 times its reduction and
//     copy, and every rank fits the same points to the same machine.
//
// The communicator then decides with cfg.Tuner.WithMachine(the machine)
// for the rest of the job, and so do the communicators made from it
// (inheritFit: their creation is collective over it, after the fit on
// every rank or before it on every rank). A communicator fits or agrees
// once; a failure keeps the machine it had, and says so.

// jobFit is what a process's ranks know of the machine fitted in the job:
// the first one a communicator of theirs measured or agreed on, or a
// later one that measured more of it (levels).
type jobFit struct {
	mu       sync.Mutex
	machine  model.Machine
	levels   levels // what was measured; 0: nothing known
	measured int    // fits measured by this process's ranks (tests)
	agreed   int    // fits agreed on without measuring
}

// levels are the levels of the machine a fit measured: between nodes,
// within a node.
type levels uint32

const (
	network levels = 1 << iota
	node
)

// levelsOf are the levels a fit on node map m measures (the pairs it
// has).
func levelsOf(m *algorithms.NodeMap) levels {
	ps, l := fit.PairsOf(m), levels(0)
	if ps.HasInter {
		l |= network
	}
	if ps.HasIntra {
		l |= node
	}
	return l
}

// know records m, of levels l, as the job's machine unless one of those
// levels or more is known already, and counts how it came.
func (j *jobFit) know(m model.Machine, l levels, measured bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.levels == 0 || l&j.levels == j.levels && l != j.levels {
		j.machine, j.levels = m, l
	}
	if measured {
		j.measured++
	} else {
		j.agreed++
	}
}

// known returns the job's machine if one is known that measured every
// level of want.
func (j *jobFit) known(want levels) (model.Machine, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.machine, j.levels != 0 && j.levels&want == want
}

// tuner is the tuner c decides with: the configuration's, or the one of
// the machine it fitted.
func (c *Comm) tuner() *tuner.Tuner {
	if c.fitTuner != nil {
		return c.fitTuner
	}
	return c.cfg.Tuner
}

// choose is decide's question to the tuner for a call of c (named call):
// its choice, and where that is the model's and c should fit the machine
// first (wantsFit), the fit, then the choice on the fitted machine.
// c.mu is held.
func (c *Comm) choose(call string, q tuner.Query) (tuner.Choice, error) {
	ch, err := c.tuner().Choose(q)
	if err != nil || ch.Source != tuner.FromModel || !c.wantsFit() {
		return ch, err
	}
	c.fitMachine(call, q, ch)
	return c.tuner().Choose(q)
}

// wantsFit reports whether a call of c that the model decides fits the
// machine first: GOCOLL_FIT is on, the tuning file gave no machine, c
// spans several nodes and has not fitted yet. Every rank of c answers
// alike.
func (c *Comm) wantsFit() bool {
	return c.cfg.Fit && !c.fitDone && c.nodes != nil && c.nodes.NumNodes() > 1 && !c.cfg.Tuner.MachineGiven()
}

// inheritFit gives a communicator made from parent (Dup, Split) the
// machine parent decides with, and parent's state: fitted or not.
func (c *Comm) inheritFit(parent *Comm) {
	parent.mu.Lock()
	c.fitTuner, c.fitDone = parent.fitTuner, parent.fitDone
	parent.mu.Unlock()
}

// fitMachine agrees on the job's machine with c's other ranks, or
// measures it with them, and makes c decide with it. Collective over c;
// c.mu is held. The call (call, q) and the model's choice before (was)
// are for GOCOLL_DEBUG=info.
func (c *Comm) fitMachine(call string, q tuner.Query, was tuner.Choice) {
	c.fitDone = true
	start := time.Now()
	m, from, res, err := c.agreeOrMeasure()
	if err != nil {
		fmt.Fprintf(os.Stderr, "gocoll: rank %d: %s: the in-job fit of the machine failed; the model keeps its machine: %v\n", c.rank, c.name, err)
		return
	}
	c.fitTuner = c.cfg.Tuner.WithMachine(m)
	if res != nil && c.rank == 0 && c.cfg.FitSave != "" {
		c.saveFit(res)
	}
	if c.cfg.Debug == nil {
		return
	}
	at := fmt.Sprintf("at %s of %d B (the model chose %s across %d nodes)", call, q.Bytes, was.Name(), c.nodes.NumNodes())
	if res == nil {
		fmt.Fprintf(c.cfg.Debug, "gocoll: rank %d: %s: the job's machine, rank %d's, agreed on %s in %v: %s\n",
			c.rank, c.name, from, at, time.Since(start).Round(time.Microsecond), machineLine(m))
		return
	}
	fmt.Fprintf(c.cfg.Debug, "gocoll: rank %d: %s: machine fitted in the job %s: %s\n", c.rank, c.name, at, res.Summary())
	if c.rank == 0 {
		for _, l := range strings.Split(strings.TrimRight(res.Describe(), "\n"), "\n") {
			fmt.Fprintf(c.cfg.Debug, "gocoll: rank 0: %s\n", l)
		}
	}
}

// agreeOrMeasure returns the machine c's ranks agree on: the job's known
// one of the lowest rank that knows one measuring every level c has
// (from), or else the one they measure now (res). Collective over c;
// c.mu is held.
func (c *Comm) agreeOrMeasure() (m model.Machine, from int, res *fit.Result, err error) {
	p, want := c.Size(), levelsOf(c.nodes)
	mine, has := c.cfg.fit.known(want)
	who := []byte{0, 0, 0, 0}
	binary.LittleEndian.PutUint32(who, uint32(p))
	if has {
		binary.LittleEndian.PutUint32(who, uint32(c.rank))
	}
	if err := c.ownAllreduceMin(who); err != nil {
		return m, 0, nil, err
	}
	if from = int(binary.LittleEndian.Uint32(who)); from < p {
		vals := machineVals(mine)
		if err := c.ownBcast(vals, from); err != nil {
			return m, 0, nil, err
		}
		m = machineOf(vals)
		c.cfg.fit.know(m, want, false)
		return m, from, nil, nil
	}
	r, err := fit.Measure(fitComm{c}, fit.InJob(c.cfg.Tuner.Machine()))
	if err != nil {
		return m, 0, nil, err
	}
	c.cfg.fit.know(r.Machine, want, true)
	return r.Machine, 0, &r, nil
}

// saveFit writes the fitted machine to GOCOLL_FIT_SAVE (rank 0 of the
// fitting communicator), headed by what fitted it.
func (c *Comm) saveFit(r *fit.Result) {
	pv := &tuner.Provenance{
		Command: fmt.Sprintf("%s (the in-job fit of %s, rank 0 of %d, %s)", provenance.CommandLine(os.Args), c.name, c.Size(), r.Nodes),
		Commit:  "gocoll " + version.Version,
		Machine: provenance.Machine(),
		Date:    time.Now().UTC().Format(time.RFC3339),
	}
	if err := tuner.SaveMachine(c.cfg.FitSave, tuner.MachineOf(r.Machine), pv); err != nil {
		fmt.Fprintf(os.Stderr, "gocoll: rank %d: GOCOLL_FIT_SAVE: %v\n", c.rank, err)
	}
}

// machineLine is a machine on one line, for GOCOLL_DEBUG=info.
func machineLine(m model.Machine) string {
	return fmt.Sprintf("alpha %.2f µs, beta %.3f ns/B; node_alpha %.2f µs, node_beta %.3f ns/B; gamma %.3f ns/B, delta %.3f ns/B",
		m.Alpha*1e6, m.Beta*1e9, m.NodeAlpha*1e6, m.NodeBeta*1e9, m.Gamma*1e9, m.Delta*1e9)
}

// machineVals and machineOf turn a machine into the values a broadcast
// carries and back.
func machineVals(m model.Machine) []float64 {
	return []float64{m.Alpha, m.Beta, m.Gamma, m.Delta, m.NodeAlpha, m.NodeBeta, m.Sync}
}

func machineOf(v []float64) model.Machine {
	return model.Machine{Alpha: v[0], Beta: v[1], Gamma: v[2], Delta: v[3], NodeAlpha: v[4], NodeBeta: v[5], Sync: v[6]}
}

// ownRun runs algorithm a's schedule for params on the host executor,
// now, with c.mu held: gocoll's own exchanges of the fit (as
// gatherRecords), which must not go through decide. what names the
// exchange in errors.
func (c *Comm) ownRun(what string, a *algorithms.Algorithm, params algorithms.Params, buf []byte, size int, kernel ops.Kernel) error {
	params.P, params.Rank, params.Commutative, params.InPlace = c.Size(), c.rank, true, true
	c.seq++
	sched, s := a.Build(params), &c.steps
	s.hc = c.hostCall(sched, buf, buf, c.scratchBytes(sched.ScratchLen*size), size, kernel)
	if err := s.host.Run(&s.hc); err != nil {
		return c.runError("the in-job fit", a.Name+" ("+what+")", err)
	}
	return nil
}

// ownAllreduceMin replaces the uint32 in buf by its minimum over c's
// ranks (recursive doubling).
func (c *Comm) ownAllreduceMin(buf []byte) error {
	a, _ := algorithms.Lookup(algorithms.Allreduce, "recursive_doubling")
	k, err := ops.Lookup(ops.Min, ops.Uint32)
	if err != nil {
		return err
	}
	return c.ownRun("who knows a machine", a, algorithms.Params{Count: 1}, buf, 4, k)
}

// ownBcast gives every rank of c root's vals (binomial tree).
func (c *Comm) ownBcast(vals []float64, root int) error {
	buf := make([]byte, 8*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint64(buf[8*i:], math.Float64bits(v))
	}
	a, _ := algorithms.Lookup(algorithms.Bcast, "binomial")
	if err := c.ownRun("the fit's results", a, algorithms.Params{Root: root, Count: len(buf)}, buf, 1, nil); err != nil {
		return err
	}
	for i := range vals {
		vals[i] = math.Float64frombits(binary.LittleEndian.Uint64(buf[8*i:]))
	}
	return nil
}

// fitComm is c as tuner/fit measures on it: its pairs exchange straight
// over its transport, with a tag of their own (a sequence number every
// rank takes alike), and its broadcasts are ownBcast. c.mu is held.
type fitComm struct{ c *Comm }

func (f fitComm) Rank() int                            { return f.c.rank }
func (f fitComm) Nodes() *algorithms.NodeMap           { return f.c.nodes }
func (f fitComm) Bcast(vals []float64, root int) error { return f.c.ownBcast(vals, root) }

func (f fitComm) Link(pair [2]int) (fit.Link, error) {
	c := f.c
	c.seq++
	peer := -1
	switch c.rank {
	case pair[0]:
		peer = pair[1]
	case pair[1]:
		peer = pair[0]
	default:
		return nil, nil
	}
	return &fitLink{c: c, peer: peer, tag: transport.Tag{Context: c.ctx, Seq: c.seq}}, nil
}

// fitLink is one end of a pair of c's ranks: an exchange is a receive and
// a send posted at once, each round of the pair a tag round of its own.
type fitLink struct {
	c    *Comm
	peer int // in c
	tag  transport.Tag
	ops  [2]transport.Op
}

func (l *fitLink) Exchange(send, recv []byte) error {
	l.tag.Round++
	peer := l.c.ranks[l.peer]
	l.ops[0] = transport.Op{Peer: peer, Tag: l.tag, Buf: recv, Recv: true}
	l.ops[1] = transport.Op{Peer: peer, Tag: l.tag, Buf: send}
	err := l.c.t.Start(l.ops[:])
	if err == nil {
		err = l.c.t.Wait(l.ops[:])
	}
	if err == nil && l.ops[0].N != len(recv) {
		err = fmt.Errorf("received %d bytes of %d", l.ops[0].N, len(recv))
	}
	if err != nil {
		return l.c.runError("the in-job fit", fmt.Sprintf("exchange with rank %d", l.peer), err)
	}
	return nil
}
