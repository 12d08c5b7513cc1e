package fit

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/executor/model"
)

// A fake communicator: ranks are goroutines, links are channels, and
// time is virtual: the leader's end of a link advances the clock by what
// the exchange would take on a link of the given kind, so that the
// planner's budget and the fitted line can be checked exactly.

// clock is a virtual clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// bucket is a link through a token bucket, as tc tbf is: a message passes
// at line rate while the bucket holds tokens (burst bytes at most, one
// per byte, refilled at rate bytes a second, also while the link is
// idle), then at rate; each exchange also costs alpha. Both directions
// are alike.
type bucket struct {
	alpha        time.Duration
	rate, line   float64 // bytes a second
	burst        float64 // bytes; 0: no limiter
	tokens       float64
	lastEnd      time.Time
	started      bool
	idleRefilled float64
}

// cost returns how long an exchange of n bytes each way starting at now
// takes.
func (b *bucket) cost(now time.Time, n int64) time.Duration {
	if b.burst == 0 {
		return b.alpha + time.Duration(float64(n)/b.rate*1e9)
	}
	if !b.started {
		b.tokens, b.started = b.burst, true
	} else {
		b.tokens = min(b.burst, b.tokens+now.Sub(b.lastEnd).Seconds()*b.rate)
	}
	// The latency first: the link idles meanwhile.
	b.tokens = min(b.burst, b.tokens+b.alpha.Seconds()*b.rate)
	fast := min(float64(n), b.tokens)
	b.tokens -= fast
	d := b.alpha + time.Duration((fast/b.line+(float64(n)-fast)/b.rate)*1e9)
	b.lastEnd = now.Add(d)
	return d
}

type fakeWorld struct {
	nodes *algorithms.NodeMap
	clk   *clock
	kind  func(pair [2]int) *bucket // the link between a pair

	mu    sync.Mutex
	cond  *sync.Cond
	gen   int
	count int
	slot  []float64
	pipes map[[2]int]*pipe
}

type pipe struct{ ab, ba chan []byte }

func newFakeWorld(nodes *algorithms.NodeMap, kind func([2]int) *bucket) *fakeWorld {
	w := &fakeWorld{nodes: nodes, clk: &clock{t: time.Unix(0, 0)}, kind: kind, pipes: map[[2]int]*pipe{}}
	w.cond = sync.NewCond(&w.mu)
	return w
}

// barrier returns once every rank has called it, running f (if not nil)
// on the last one to arrive, before any leaves.
func (w *fakeWorld) barrier(f func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	gen := w.gen
	w.count++
	if w.count == w.nodes.P() {
		if f != nil {
			f()
		}
		w.count, w.gen = 0, w.gen+1
		w.cond.Broadcast()
		return
	}
	for gen == w.gen {
		w.cond.Wait()
	}
}

type fakeComm struct {
	w     *fakeWorld
	rank  int
	links int // Link calls, every rank alike
	bcast int
}

func (c *fakeComm) Rank() int                  { return c.rank }
func (c *fakeComm) Nodes() *algorithms.NodeMap { return c.w.nodes }

func (c *fakeComm) Link(pair [2]int) (Link, error) {
	c.links++
	w := c.w
	w.barrier(func() { w.pipes[pair] = &pipe{make(chan []byte, 1), make(chan []byte, 1)} })
	w.mu.Lock()
	p := w.pipes[pair]
	w.mu.Unlock()
	switch c.rank {
	case pair[0]:
		return &fakeEnd{in: p.ba, out: p.ab, clk: w.clk, b: w.kind(pair)}, nil
	case pair[1]:
		return &fakeEnd{in: p.ab, out: p.ba}, nil
	}
	return nil, nil
}

func (c *fakeComm) Bcast(vals []float64, root int) error {
	c.bcast++
	w := c.w
	if c.rank == root {
		w.mu.Lock()
		w.slot = append([]float64(nil), vals...)
		w.mu.Unlock()
	}
	w.barrier(nil)
	w.mu.Lock()
	copy(vals, w.slot)
	w.mu.Unlock()
	w.barrier(nil) // the slot is free again
	return nil
}

// fakeEnd is one end of a link; the leader's (b set) moves the clock.
type fakeEnd struct {
	in, out chan []byte
	clk     *clock
	b       *bucket
}

func (e *fakeEnd) Exchange(send, recv []byte) error {
	e.out <- append([]byte(nil), send...)
	got := <-e.in
	if len(got) != len(recv) {
		return fmt.Errorf("sent %d bytes, received %d", len(send), len(got))
	}
	copy(recv, got)
	if e.b != nil {
		e.clk.add(e.b.cost(e.clk.now(), int64(len(send))))
	}
	return nil
}

// measureFake runs Measure on every rank of the fake world and checks
// that all agree.
func measureFake(t *testing.T, w *fakeWorld, o Options) Result {
	t.Helper()
	o.now = w.clk.now
	p := w.nodes.P()
	res, errs := make([]Result, p), make([]error, p)
	var wg sync.WaitGroup
	for r := range p {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[r], errs[r] = Measure(&fakeComm{w: w, rank: r}, o)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	for r := range res {
		if res[r].Machine != res[0].Machine || len(res[r].Inter) != len(res[0].Inter) || len(res[r].Intra) != len(res[0].Intra) {
			t.Fatalf("rank %d fitted %+v, rank 0 %+v", r, res[r].Machine, res[0].Machine)
		}
	}
	return res[0]
}

// links are the kinds of link of the tests: between nodes, 50 µs and a
// token bucket of 1 MB at the rate (the emulated clusters': tc tbf, line
// rate 10 GB/s); within a node 2 µs, 5 GB/s, no limiter.
func links(rate float64) func([2]int) *bucket {
	nodes := algorithms.BlockNodeMap(8, 4)
	return func(pair [2]int) *bucket {
		if nodes.Node(pair[0]) != nodes.Node(pair[1]) {
			return &bucket{alpha: 50 * time.Microsecond, rate: rate, line: 10e9, burst: 1 << 20}
		}
		return &bucket{alpha: 2 * time.Microsecond, rate: 5e9}
	}
}

// The in-job fit recovers a rate-limited network's beta (1 Gbit/s and
// 200 Mbit/s behind a 1 MB burst: 8 and 40 ns/B) within 5% and the
// node's alpha and beta within 5%, within its budget (plus the last
// exchange it committed): the drain spends the burst before the
// bandwidth sizes are timed, which without it would look 16 times faster.
func TestInJobRecoversRateLimitedLink(t *testing.T) {
	for _, tc := range []struct {
		rate    float64
		largest int64 // the largest size the budget allows
	}{{125e6, 1 << 20}, {25e6, 256 << 10}} {
		w := newFakeWorld(algorithms.BlockNodeMap(8, 4), links(tc.rate))
		o := InJob(model.Default)
		r := measureFake(t, w, o)
		m := r.Machine
		if !near(m.Beta, 1/tc.rate, 0.05) {
			t.Errorf("rate %g: beta %.3f ns/B, want %.3f\n%s", tc.rate, m.Beta*1e9, 1e9/tc.rate, r.Describe())
		}
		if !near(m.NodeAlpha, 2e-6, 0.05) || !near(m.NodeBeta, 0.2e-9, 0.05) {
			t.Errorf("rate %g: node alpha %g beta %g, want 2 µs, 0.2 ns/B\n%s", tc.rate, m.NodeAlpha, m.NodeBeta, r.Describe())
		}
		if got := r.Inter[len(r.Inter)-1].Bytes; got != tc.largest {
			t.Errorf("rate %g: largest exchange %d B, want %d\n%s", tc.rate, got, tc.largest, r.Describe())
		}
		if r.Cost > o.Budget+o.Budget/5 {
			t.Errorf("rate %g: the fit took %v of virtual time, budget %v\n%s", tc.rate, r.Cost, o.Budget, r.Describe())
		}
		if m.Sync != model.Default.Sync || r.SyncMeasured || m.Gamma <= 0 || m.Delta <= 0 {
			t.Errorf("rate %g: sync %g (measured %v), gamma %g, delta %g: want the base's sync and local speeds", tc.rate, m.Sync, r.SyncMeasured, m.Gamma, m.Delta)
		}
		t.Logf("rate %g B/s: %s\n%s", tc.rate, r.Summary(), r.Describe())
	}
}

// Without a drain the burst hides the rate: the same fit of the 200
// Mbit/s link times 64 KiB at line rate and reads a beta a third off.
// (What the drain is for.)
func TestWithoutDrainTheBurstHidesTheRate(t *testing.T) {
	w := newFakeWorld(algorithms.BlockNodeMap(8, 4), links(25e6))
	o := InJob(model.Default)
	o.Drain = 0
	r := measureFake(t, w, o)
	if near(r.Machine.Beta, 1/25e6, 0.2) {
		t.Errorf("beta %.3f ns/B without the drain: the burst did not show\n%s", r.Machine.Beta*1e9, r.Describe())
	}
}

// Without a budget (gocoll-tune's options) every size is exchanged; with
// one, a slow link stops early yet still has two sizes of the bandwidth
// regime.
func TestToolMeasuresEverySize(t *testing.T) {
	w := newFakeWorld(algorithms.BlockNodeMap(8, 4), links(125e6))
	r := measureFake(t, w, Tool(3, model.Default))
	if len(r.Inter) != 11 || r.Inter[0].Bytes != 4 || r.Inter[10].Bytes != 4<<20 || len(r.Intra) != 11 {
		t.Errorf("inter %v, intra %v: want 4 B..4 MiB each", r.Inter, r.Intra)
	}
	if !near(r.Machine.Beta, 8e-9, 0.02) {
		t.Errorf("beta %.3f ns/B, want 8", r.Machine.Beta*1e9)
	}
	w = newFakeWorld(algorithms.BlockNodeMap(8, 4), links(2.5e6)) // 20 Mbit/s
	o := InJob(model.Default)
	r = measureFake(t, w, o)
	var large int
	for _, p := range r.Inter {
		if p.Bytes >= o.BandwidthFrom {
			large++
		}
	}
	if large != 1 || !near(r.Machine.Beta, 1/2.5e6, 0.05) {
		t.Errorf("20 Mbit/s: %d sizes of the bandwidth regime, beta %.1f ns/B, want 1 (the mandatory one) and 400\n%s", large, r.Machine.Beta*1e9, r.Describe())
	}
}

// Where there is no pair across nodes or within one, the base machine's
// values stay and Describe says so; every rank takes part in the same
// links and broadcasts.
func TestMeasureWhatExists(t *testing.T) {
	base := model.Default
	for _, tc := range []struct {
		nodes              []int
		hasIntra, hasInter bool
		want               string
	}{
		{[]int{0, 0, 0}, true, false, "between nodes: not measured (one node)"},
		{[]int{0, 1, 2}, false, true, "within a node: not measured (one rank per node)"},
		{[]int{0, 1, 1}, true, true, "shm step: not measured (rank 0 alone on its node)"},
	} {
		m := algorithms.NodeMapOf(tc.nodes)
		w := newFakeWorld(m, func(pair [2]int) *bucket { return &bucket{alpha: 10 * time.Microsecond, rate: 1e9} })
		r := measureFake(t, w, InJob(base))
		if (r.Inter != nil) != tc.hasInter || (r.Intra != nil) != tc.hasIntra {
			t.Errorf("%v: inter %v, intra %v", tc.nodes, r.Inter, r.Intra)
		}
		if !tc.hasInter && (r.Machine.Alpha != base.Alpha || r.Machine.Beta != base.Beta) {
			t.Errorf("%v: network %g %g, want the base's", tc.nodes, r.Machine.Alpha, r.Machine.Beta)
		}
		if !tc.hasIntra && (r.Machine.NodeAlpha != base.NodeAlpha || r.Machine.NodeBeta != base.NodeBeta) {
			t.Errorf("%v: node %g %g, want the base's", tc.nodes, r.Machine.NodeAlpha, r.Machine.NodeBeta)
		}
		if d := r.Describe(); !strings.Contains(d, tc.want) {
			t.Errorf("%v: Describe lacks %q:\n%s", tc.nodes, tc.want, d)
		}
	}
}

// Options Measure cannot follow fail on every rank before any exchange.
func TestOptionsChecked(t *testing.T) {
	for _, sizes := range [][]int64{nil, {2, 64}, {64, 64}, {1024, 8}, {8, 8 << 30}} {
		o := InJob(model.Default)
		o.Sizes = sizes
		if _, err := Measure(&fakeComm{w: newFakeWorld(algorithms.NodeMapOf([]int{0, 1}), nil)}, o); err == nil {
			t.Errorf("sizes %v: no error", sizes)
		}
	}
}
