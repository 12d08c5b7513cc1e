package fit

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/executor/model"
	"github.com/gocoll/gocoll/ops"
)

// Comm is the communicator a machine is fitted on: its ranks and node
// map, a link between two of its ranks, and a broadcast. Every rank of
// it calls Measure, which calls Link and Bcast on every rank alike, in
// the same order.
type Comm interface {
	Rank() int
	// Nodes is the communicator's node map, the same on every rank.
	Nodes() *algorithms.NodeMap
	// Link returns this rank's end of a link to the other rank of pair,
	// or nil on the ranks outside it. Collective: every rank calls it,
	// with the same pair. A Link that is an io.Closer is closed by both
	// of its ranks when the pair is done.
	Link(pair [2]int) (Link, error)
	// Bcast gives every rank root's vals (the same length everywhere).
	Bcast(vals []float64, root int) error
}

// Link is one rank's end of a pair of ranks.
type Link interface {
	// Exchange sends send to the other rank and receives len(recv) bytes
	// from it, both at once (one round of the model), and returns when
	// both are done. The other rank calls it with the same length.
	Exchange(send, recv []byte) error
}

// SyncTimer is a Comm that can time one step of the shm engine (an 8-byte
// shm allreduce on node 0's ranks): gocoll-tune's. Collective; every
// rank returns the same time.
type SyncTimer interface {
	SyncStep(reps int) (float64, error)
}

// Options bound a fit: the sizes a pair exchanges, how often, and for how
// long.
type Options struct {
	// Sizes are the bytes each rank of a pair sends the other in one
	// exchange, increasing; at least 4 (an exchange carries the
	// leader's word on what comes next).
	Sizes []int64
	// Reps is the least number of timed exchanges of a size, MinTime the
	// least time they take together (small exchanges are repeated until
	// they add up to it); the median is kept.
	Reps    int
	MinTime time.Duration
	// BandwidthFrom is the first size of the bandwidth regime. Before
	// timing the first such size the pair exchanges it untimed until Drain
	// bytes have gone each way, so that a rate limiter's burst (tc tbf's:
	// 1 MB on the emulated clusters) is spent; from then on the exchanges
	// follow each other with no pause, and the limiter stays drained.
	// (Without it, 200 Mbit/s behind tbf's 1 MiB burst reads as line
	// rate up to 256 KiB; with real NICs it costs Drain at line rate.)
	BandwidthFrom, Drain int64
	// Budget bounds the whole fit (0: no bound): the pair across nodes
	// gets three quarters of it, the pair within a node the rest. Sizes
	// below BandwidthFrom and the first size from it are always
	// measured; a larger size only where its predicted time (the last
	// size's median scaled by size, Reps times) fits in what is left of
	// the pair's share, and a size stops at 2 timed exchanges once the
	// share is spent. The drain stops at half the share.
	Budget time.Duration
	// LocalBytes is the size of the buffers rank 0 times the reduction
	// and the copy over (gamma, delta).
	LocalBytes int
	// Base is the machine whose values stay where nothing measures them.
	Base model.Machine

	// now is the clock (tests give a virtual one); nil: time.Now.
	now func() time.Time
}

// InJob are the options of coll's in-job fit: 8 B to 1 KiB for the
// latency, 64 KiB to 4 MiB for the bandwidth (after a drain of 1.5 MiB),
// within 150 ms.
func InJob(base model.Machine) Options {
	return Options{
		Sizes: []int64{8, 64, 1 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20},
		Reps:  5, MinTime: time.Millisecond,
		BandwidthFrom: 64 << 10, Drain: 3 << 19,
		Budget:     150 * time.Millisecond,
		LocalBytes: 1 << 20,
		Base:       base,
	}
}

// Tool are gocoll-tune's options: 4 B to 4 MiB by factors of 4, reps
// timed exchanges of each (at least 1 ms of them), gamma and delta over
// 16 MiB, no time bound.
func Tool(reps int, base model.Machine) Options {
	var sizes []int64
	for n := int64(4); n <= 4<<20; n *= 4 {
		sizes = append(sizes, n)
	}
	return Options{Sizes: sizes, Reps: reps, MinTime: time.Millisecond,
		BandwidthFrom: 64 << 10, Drain: 3 << 19, LocalBytes: 16 << 20, Base: base}
}

func (o Options) clock() time.Time {
	if o.now != nil {
		return o.now()
	}
	return time.Now()
}

// check fails on options Measure cannot follow.
func (o Options) check() error {
	if len(o.Sizes) == 0 || o.Sizes[0] < headerLen || o.Sizes[len(o.Sizes)-1] > math.MaxUint32 {
		return fmt.Errorf("fit: sizes %v: want at least one, of %d bytes to 4 GiB", o.Sizes, headerLen)
	}
	for i := 1; i < len(o.Sizes); i++ {
		if o.Sizes[i] <= o.Sizes[i-1] {
			return fmt.Errorf("fit: sizes %v: want them increasing", o.Sizes)
		}
	}
	return nil
}

// Measure fits the machine on c's ranks within o's bounds. Collective
// over c; every rank returns the same Result (but its own Cost).
func Measure(c Comm, o Options) (Result, error) {
	start := o.clock()
	o.Reps = max(o.Reps, 2)
	if err := o.check(); err != nil {
		return Result{}, err
	}
	nodes := c.Nodes()
	res := Result{Nodes: nodes, Pairs: PairsOf(nodes), Machine: o.Base, LocalBytes: o.LocalBytes}
	m := &res.Machine
	inter := o.Budget * 3 / 4
	var err error
	if res.Pairs.HasInter {
		if res.Inter, err = exchanges(c, res.Pairs.Inter, o, inter); err != nil {
			return res, fmt.Errorf("between nodes: %w", err)
		}
		if m.Alpha, m.Beta, err = Line(res.Inter); err != nil {
			return res, err
		}
	}
	if res.Pairs.HasIntra {
		if res.Intra, err = exchanges(c, res.Pairs.Intra, o, o.Budget-inter); err != nil {
			return res, fmt.Errorf("within a node: %w", err)
		}
		if m.NodeAlpha, m.NodeBeta, err = Line(res.Intra); err != nil {
			return res, err
		}
	}
	if st, ok := c.(SyncTimer); ok && nodes.Size(0) >= 2 {
		if m.Sync, err = st.SyncStep(o.Reps); err != nil {
			return res, fmt.Errorf("shm step: %w", err)
		}
		res.SyncMeasured = true
	}
	local := []float64{0, 0}
	if c.Rank() == 0 {
		local[0], local[1] = localSpeeds(o.LocalBytes)
	}
	if err := c.Bcast(local, 0); err != nil { // the others wait here
		return res, err
	}
	m.Gamma, m.Delta = local[0], local[1]
	res.Cost = o.clock().Sub(start)
	return res, nil
}

// localSpeeds times a float32 sum and a memmove over two buffers of n
// bytes: the best of 5, in seconds per byte.
func localSpeeds(n int) (gamma, delta float64) {
	n = max(n, 1024) &^ 3
	a, b := make([]byte, n), make([]byte, n)
	k, _ := ops.Lookup(ops.Sum, ops.Float)
	return timeLocal(func() { k(a, a, b) }) / float64(n), timeLocal(func() { copy(a, b) }) / float64(n)
}

func timeLocal(f func()) float64 {
	f()
	best := math.Inf(1)
	for range 5 {
		t0 := time.Now()
		f()
		best = min(best, time.Since(t0).Seconds())
	}
	return best
}

// exchanges times the exchanges of the pair within budget while the other
// ranks wait, and gives every rank the points: pair[0] leads (stream) and
// broadcasts what it timed.
func exchanges(c Comm, pair [2]int, o Options, budget time.Duration) ([]Point, error) {
	l, err := c.Link(pair)
	if err != nil {
		return nil, err
	}
	var pts []Point
	var failed error
	if l != nil {
		pts, failed = stream(l, c.Rank() == pair[0], o, budget)
		if cl, ok := l.(io.Closer); ok {
			failed = errors.Join(failed, cl.Close())
		}
	}
	// What the leader timed: ok (1, or -1: it failed), the count, then
	// bytes and seconds of each size.
	vals := make([]float64, 2+2*len(o.Sizes))
	if c.Rank() == pair[0] {
		vals[0], vals[1] = 1, float64(len(pts))
		if failed != nil {
			vals[0] = -1
		}
		for i, p := range pts {
			vals[2+2*i], vals[3+2*i] = float64(p.Bytes), p.Seconds
		}
	}
	if err := c.Bcast(vals, pair[0]); err != nil {
		return nil, err
	}
	if failed != nil {
		return nil, failed
	}
	if vals[0] < 0 {
		return nil, fmt.Errorf("the exchange between ranks %d and %d failed (see rank %d)", pair[0], pair[1], pair[0])
	}
	pts = make([]Point, int(vals[1]))
	for i := range pts {
		pts[i] = Point{int64(vals[2+2*i]), vals[3+2*i]}
	}
	return pts, nil
}

// headerLen is the leader's word at the start of every exchange it sends:
// the size of the next exchange, 0 after the last.
const headerLen = 4

// stream runs the pair's exchanges on one end of its link: the leader
// decides (planner) and times them, and tells the other end in each
// exchange what the next will be; both ends exchange the same sizes the
// same number of times.
func stream(l Link, leader bool, o Options, budget time.Duration) ([]Point, error) {
	largest := o.Sizes[len(o.Sizes)-1]
	send, recv := make([]byte, largest), make([]byte, largest)
	var pl *planner
	if leader {
		pl = newPlanner(o, budget)
	}
	n := o.Sizes[0]
	for {
		var next int64
		if leader {
			next = pl.plan()
			binary.LittleEndian.PutUint32(send, uint32(next))
		}
		if err := l.Exchange(send[:n], recv[:n]); err != nil {
			return nil, err
		}
		if leader {
			pl.record()
		} else {
			next = int64(binary.LittleEndian.Uint32(recv))
			if next != 0 && (next < headerLen || next > largest) {
				return nil, fmt.Errorf("fit: the leader announced an exchange of %d bytes (sizes %v)", next, o.Sizes)
			}
		}
		if next == 0 {
			break
		}
		n = next
	}
	if !leader {
		return nil, nil
	}
	return pl.points(), nil
}

// planner is the leader's side of a pair's exchanges: which size comes
// next, which exchanges are timed, and their times. It decides the
// exchange after the one about to happen from what it has timed before
// that one (the other end must learn it in that exchange), so a size may
// get one exchange more than it needed.
type planner struct {
	o      Options
	budget time.Duration
	start  time.Time
	last   time.Time // when the last exchange ended

	i       int         // the size of the exchange about to happen: o.Sizes[i]
	warm    int         // untimed exchanges of size i left before the drain
	drain   int64       // bytes of size i still to move untimed (the drain)
	timed   int         // timed exchanges of size i committed
	drained bool        // the drain was done
	times   [][]float64 // per size, the timed exchanges' seconds
	pending int         // the size index of the exchange about to happen
	isTimed bool        // and whether it is timed
}

func newPlanner(o Options, budget time.Duration) *planner {
	now := o.clock()
	pl := &planner{o: o, budget: budget, start: now, last: now, times: make([][]float64, len(o.Sizes))}
	pl.enter(0)
	return pl
}

// enter makes size i the current one: one exchange untimed to warm up,
// and before the first size of the bandwidth regime the drain.
func (pl *planner) enter(i int) {
	pl.i, pl.warm, pl.timed, pl.drain = i, 1, 0, 0
	if n := pl.o.Sizes[i]; !pl.drained && pl.o.Drain > 0 && n >= pl.o.BandwidthFrom {
		pl.drained = true
		pl.drain = pl.o.Drain
	}
}

func (pl *planner) elapsed() time.Duration { return pl.o.clock().Sub(pl.start) }

// spent reports whether the budget is gone (never without one).
func (pl *planner) spent(frac float64) bool {
	return pl.budget > 0 && pl.elapsed() >= time.Duration(frac*float64(pl.budget))
}

// plan commits the exchange about to happen (timed or not) and returns
// the size of the one after it, 0 for none.
func (pl *planner) plan() int64 {
	n := pl.o.Sizes[pl.i]
	pl.pending = pl.i
	switch {
	case pl.warm > 0:
		pl.warm--
		pl.isTimed = false
		return n
	case pl.drain > 0 && !pl.spent(0.5):
		pl.drain -= n
		pl.isTimed = false
		return n
	}
	pl.drain = 0
	pl.isTimed = true
	pl.timed++
	if pl.more() {
		return n
	}
	if next, ok := pl.nextSize(); ok {
		pl.enter(next)
		return pl.o.Sizes[next]
	}
	return 0
}

// more reports whether size i needs timed exchanges beyond those
// committed: fewer than Reps, or less than MinTime together (those not
// timed yet counted at the last one's time), unless the budget is gone
// and two are committed.
func (pl *planner) more() bool {
	ts := pl.times[pl.i]
	if pl.timed >= 2 && pl.spent(1) {
		return false
	}
	if pl.timed < pl.o.Reps {
		return true
	}
	if len(ts) == 0 {
		return true
	}
	sum := 0.0
	for _, t := range ts {
		sum += t
	}
	sum += float64(pl.timed-len(ts)) * ts[len(ts)-1]
	return sum < pl.o.MinTime.Seconds()
}

// nextSize returns the size after size i, if the budget allows it: any
// size below the bandwidth regime and its first one; a larger one where
// Reps exchanges at the current size's median time, scaled by size, fit
// in what is left.
func (pl *planner) nextSize() (int, bool) {
	next := pl.i + 1
	if next >= len(pl.o.Sizes) {
		return 0, false
	}
	if pl.budget == 0 || pl.o.Sizes[pl.i] < pl.o.BandwidthFrom {
		return next, true
	}
	ts := pl.times[pl.i]
	if len(ts) == 0 {
		return 0, false
	}
	t := median(append([]float64(nil), ts...)) * float64(pl.o.Sizes[next]) / float64(pl.o.Sizes[pl.i])
	left := (pl.budget - pl.elapsed()).Seconds()
	return next, float64(pl.o.Reps+1)*t <= left
}

// record notes the end of the exchange that plan committed.
func (pl *planner) record() {
	now := pl.o.clock()
	if pl.isTimed {
		pl.times[pl.pending] = append(pl.times[pl.pending], now.Sub(pl.last).Seconds())
	}
	pl.last = now
}

// points are the median times of the sizes timed.
func (pl *planner) points() []Point {
	var pts []Point
	for i, ts := range pl.times {
		if len(ts) > 0 {
			pts = append(pts, Point{pl.o.Sizes[i], median(append([]float64(nil), ts...))})
		}
	}
	return pts
}
