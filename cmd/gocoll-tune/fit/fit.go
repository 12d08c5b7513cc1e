// Package fit measures the model's machine (executor/model.Machine) on the
// ranks of a communicator, for gocoll-tune (which gocoll-compare -cluster
// runs).
//
// The machine has two levels, and each is fitted from the pair of ranks
// that uses it: two ranks of one node (the transport within a node:
// node_alpha, node_beta) and two ranks of different nodes (the network:
// alpha, beta), each pair exchanging messages from 4 B to 4 MiB while
// every other rank waits. An exchange is one round of the model (each
// rank of the pair sends n bytes to the other at once), so its time is
// alpha + beta n, which Line fits to the sizes. The shm step (sync) is
// an 8-byte shm allreduce on node 0's ranks, and the reduction (gamma)
// and copy (delta) speeds are rank 0's, alone, over 16 MiB. What a job
// cannot measure (the network, on one node; the node, with one rank per
// node) keeps model.Default's value, and Result.Describe says so.
package fit

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/executor/model"
	"github.com/gocoll/gocoll/mpi"
	"github.com/gocoll/gocoll/ops"
)

// Point is one measured exchange: the bytes each rank of the pair sent
// the other, and the seconds one exchange took.
type Point struct {
	Bytes   int64
	Seconds float64
}

// Line fits t = alpha + beta n to the points in two regimes, since a
// link's time is not one straight line everywhere: a rate limiter (tc
// tbf, a NIC's) passes a burst at line rate, so exchanges up to the burst
// say little of the bandwidth. Beta is the least-squares slope of the
// large exchanges (from a 16th of the largest size up; at least the two
// largest sizes), alpha the median of t - beta n over the exchanges whose
// bandwidth term is at most half their time (else the smallest's). A
// slope or intercept that noise makes negative is zero. It needs two
// distinct sizes.
func Line(pts []Point) (alpha, beta float64, err error) {
	pts = slices.Clone(pts)
	slices.SortStableFunc(pts, func(a, b Point) int { return cmp.Compare(a.Bytes, b.Bytes) })
	for _, p := range pts {
		if p.Seconds <= 0 || p.Bytes < 0 {
			return 0, 0, fmt.Errorf("fit: bad point %+v", p)
		}
	}
	if len(pts) < 2 || pts[0].Bytes == pts[len(pts)-1].Bytes {
		return 0, 0, fmt.Errorf("fit: %d points of one size, want at least two sizes", len(pts))
	}
	// The large exchanges: from a 16th of the largest, and down to the
	// second largest size whatever it is.
	largest := pts[len(pts)-1].Bytes
	i := len(pts) - 1
	for i > 0 && (pts[i-1].Bytes >= largest/16 || pts[i].Bytes == largest) {
		i--
	}
	var sn, st, snn, snt float64
	for _, p := range pts[i:] {
		n := float64(p.Bytes)
		sn, st, snn, snt = sn+n, st+p.Seconds, snn+n*n, snt+n*p.Seconds
	}
	k := float64(len(pts) - i)
	beta = max((k*snt-sn*st)/(k*snn-sn*sn), 0)
	var rest []float64
	for _, p := range pts {
		if b := beta * float64(p.Bytes); b <= p.Seconds/2 {
			rest = append(rest, p.Seconds-b)
		}
	}
	if len(rest) == 0 {
		rest = []float64{pts[0].Seconds - beta*float64(pts[0].Bytes)}
	}
	slices.Sort(rest)
	alpha = rest[len(rest)/2]
	if len(rest)%2 == 0 {
		alpha = (rest[len(rest)/2-1] + alpha) / 2
	}
	return max(alpha, 0), beta, nil
}

// Pairs are the two pairs of ranks the machine is fitted from.
type Pairs struct {
	Intra, Inter       [2]int // ranks of one node; ranks of two nodes
	HasIntra, HasInter bool   // false: no node has two ranks; one node
}

// PairsOf picks the pairs on node map m: within a node, rank 0 and the
// next rank of its node (or, where rank 0 is alone, the first two ranks
// of the first node that has two); across nodes, rank 0 and the first
// rank of node 1 (nodes are numbered by their lowest rank).
func PairsOf(m *algorithms.NodeMap) Pairs {
	var ps Pairs
	for n := range m.NumNodes() {
		if rs := m.Ranks(n); len(rs) >= 2 {
			ps.Intra, ps.HasIntra = [2]int{rs[0], rs[1]}, true
			break
		}
	}
	if m.NumNodes() >= 2 {
		ps.Inter, ps.HasInter = [2]int{m.Ranks(0)[0], m.Ranks(1)[0]}, true
	}
	return ps
}

// nodesOf returns c's node map as MPI programs learn it, from node, the
// communicator of this rank's node (SplitShared): each rank's node is
// named by the lowest rank of c on it.
func nodesOf(c, node *mpi.Comm) (*algorithms.NodeMap, error) {
	first := []int32{int32(c.Rank())}
	if err := mpi.Bcast(node, first, 0); err != nil { // rank 0 of node: the lowest of c's ranks there
		return nil, err
	}
	all := make([]int32, c.Size())
	if err := mpi.Allgather(c, first, all); err != nil {
		return nil, err
	}
	ids := make([]int, len(all))
	for r, f := range all {
		ids[r] = int(f)
	}
	return algorithms.NodeMapOf(ids), nil
}

// Result is a fitted machine and what it was fitted from.
type Result struct {
	Machine      model.Machine
	Nodes        *algorithms.NodeMap
	Pairs        Pairs
	Intra, Inter []Point // the exchanges; nil where the pair does not exist
	SyncMeasured bool    // node 0 has two ranks or more: sync is its shm step
}

// Exchange sizes: 4 B to 4 MiB by factors of 4.
const (
	minExchange = 4
	maxExchange = 4 << 20
)

// Measure fits the machine on c's ranks, reps repetitions of every
// timing (the median kept). Collective over c; every rank returns the
// same Result.
func Measure(c *mpi.Comm, reps int) (Result, error) {
	var res Result
	node, err := c.SplitShared(0)
	if err != nil {
		return res, err
	}
	defer node.Free()
	nodes, err := nodesOf(c, node)
	if err != nil {
		return res, err
	}
	res.Nodes, res.Pairs = nodes, PairsOf(nodes)
	res.Machine = model.Default
	m := &res.Machine
	if res.Pairs.HasIntra {
		if res.Intra, err = exchanges(c, res.Pairs.Intra, reps); err != nil {
			return res, fmt.Errorf("within a node: %w", err)
		}
		if m.NodeAlpha, m.NodeBeta, err = Line(res.Intra); err != nil {
			return res, err
		}
	}
	if res.Pairs.HasInter {
		if res.Inter, err = exchanges(c, res.Pairs.Inter, reps); err != nil {
			return res, fmt.Errorf("between nodes: %w", err)
		}
		if m.Alpha, m.Beta, err = Line(res.Inter); err != nil {
			return res, err
		}
	}
	if nodes.Size(0) >= 2 {
		if m.Sync, err = shmStep(c, node, nodes, reps); err != nil {
			return res, fmt.Errorf("shm step: %w", err)
		}
		res.SyncMeasured = true
	}
	local := []float64{0, 0}
	if c.Rank() == 0 {
		const n = 16 << 20
		a, b := make([]byte, n), make([]byte, n)
		k, _ := ops.Lookup(ops.Sum, ops.Float)
		local[0] = timeLocal(func() { k(a, a, b) }) / n
		local[1] = timeLocal(func() { copy(a, b) }) / n
	}
	if err := mpi.Bcast(c, local, 0); err != nil { // the others wait here
		return res, err
	}
	m.Gamma, m.Delta = local[0], local[1]
	return res, nil
}

// exchanges times the exchange of every size between the ranks of pair
// while the other ranks wait, and gives every rank the points.
func exchanges(c *mpi.Comm, pair [2]int, reps int) ([]Point, error) {
	in := c.Rank() == pair[0] || c.Rank() == pair[1]
	sub, err := c.Split(map[bool]int{true: 0, false: -1}[in], c.Rank())
	if err != nil {
		return nil, err
	}
	var sizes []int64
	for n := int64(minExchange); n <= maxExchange; n *= 4 {
		sizes = append(sizes, n)
	}
	secs := make([]float64, len(sizes))
	var failed error
	if sub != nil {
		for i, n := range sizes {
			send, recv := make([]byte, n), make([]byte, 2*n)
			secs[i], failed = Time(sub, reps, func() error {
				return mpi.Allgather(sub, send, recv, mpi.WithAlgorithm("ring")) // one round: n each way
			})
			if failed != nil {
				break
			}
		}
		sub.Free()
	}
	what := fmt.Sprintf("the exchange between ranks %d and %d", pair[0], pair[1])
	if err := share(c, secs, pair[0], failed, what); err != nil {
		return nil, err
	}
	pts := make([]Point, len(sizes))
	for i := range sizes {
		pts[i] = Point{sizes[i], secs[i]}
	}
	return pts, nil
}

// shmStep times an 8-byte shm allreduce (one step of the shm engine) on
// node 0's ranks (node: this rank's node communicator) while the others
// wait.
func shmStep(c, node *mpi.Comm, nodes *algorithms.NodeMap, reps int) (float64, error) {
	t := []float64{0}
	var failed error
	if nodes.Node(c.Rank()) == 0 {
		send, recv := make([]float32, 2), make([]float32, 2)
		t[0], failed = Time(node, reps, func() error {
			return mpi.Allreduce(node, send, recv, mpi.Sum, mpi.WithAlgorithm("shm"))
		})
	}
	if err := share(c, t, 0, failed, "the shm allreduce on node 0"); err != nil {
		return 0, err
	}
	return t[0], nil
}

// share gives every rank of c the times root measured (vals), or the
// failure of the measurement what: a rank whose own measurement failed
// returns its error, the others one that names what and root.
func share(c *mpi.Comm, vals []float64, root int, failed error, what string) error {
	if failed != nil {
		vals[0] = -1
	}
	if err := mpi.Bcast(c, vals, root); err != nil {
		return err
	}
	if failed != nil {
		return failed
	}
	if vals[0] < 0 {
		return fmt.Errorf("%s failed (see rank %d)", what, root)
	}
	return nil
}

// Time returns the slowest rank's median time of call over reps
// repetitions, each of enough calls back to back to last about a
// millisecond (after one call to warm up).
func Time(c *mpi.Comm, reps int, call func() error) (float64, error) {
	if err := call(); err != nil { // warm up (and build the schedule)
		return 0, err
	}
	iters := 1
	for {
		d, err := timeIters(c, iters, call)
		if err != nil {
			return 0, err
		}
		if d*float64(iters) > 1e-3 || iters >= 1<<16 {
			break
		}
		iters *= 4
	}
	var times []float64
	for range max(reps, 1) {
		d, err := timeIters(c, iters, call)
		if err != nil {
			return 0, err
		}
		times = append(times, d)
	}
	slices.Sort(times)
	return times[len(times)/2], nil
}

// timeIters returns the slowest rank's time per call of iters calls.
func timeIters(c *mpi.Comm, iters int, call func() error) (float64, error) {
	c.Barrier()
	t0 := time.Now()
	for range iters {
		if err := call(); err != nil {
			return 0, err
		}
	}
	d := []float64{time.Since(t0).Seconds() / float64(iters)}
	if err := mpi.AllreduceInPlace(c, d, mpi.Max); err != nil {
		return 0, err
	}
	return d[0], nil
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

// Describe says what was fitted, from which ranks, and what was not.
func (r Result) Describe() string {
	m := r.Machine
	var b strings.Builder
	where := r.Nodes.String()
	if r.Nodes.OneNode() {
		where = "one node"
	}
	fmt.Fprintf(&b, "machine fitted on %d ranks, %s:\n", r.Nodes.P(), where)
	if r.Pairs.HasInter {
		fmt.Fprintf(&b, "  between nodes (rank %d <-> rank %d): alpha %.2f µs, beta %s\n", r.Pairs.Inter[0], r.Pairs.Inter[1], m.Alpha*1e6, perByte(m.Beta))
		fmt.Fprintf(&b, "    exchanged: %s\n", points(r.Inter))
	} else {
		fmt.Fprintf(&b, "  between nodes: not measured (one node); model.Default's alpha %.2f µs, beta %s kept\n", m.Alpha*1e6, perByte(m.Beta))
	}
	if r.Pairs.HasIntra {
		fmt.Fprintf(&b, "  within a node (rank %d <-> rank %d): node_alpha %.2f µs, node_beta %s\n", r.Pairs.Intra[0], r.Pairs.Intra[1], m.NodeAlpha*1e6, perByte(m.NodeBeta))
		fmt.Fprintf(&b, "    exchanged: %s\n", points(r.Intra))
	} else {
		fmt.Fprintf(&b, "  within a node: not measured (one rank per node); model.Default's node_alpha %.2f µs, node_beta %s kept\n", m.NodeAlpha*1e6, perByte(m.NodeBeta))
	}
	if r.SyncMeasured {
		fmt.Fprintf(&b, "  shm step (8 B shm allreduce on node 0's %d ranks): sync %.2f µs\n", r.Nodes.Size(0), m.Sync*1e6)
	} else {
		fmt.Fprintf(&b, "  shm step: not measured (rank 0 alone on its node); model.Default's sync %.2f µs kept\n", m.Sync*1e6)
	}
	fmt.Fprintf(&b, "  rank 0, 16 MiB: gamma (float32 sum) %s, delta (memmove) %s\n", perByte(m.Gamma), perByte(m.Delta))
	return b.String()
}

// points lists the exchanges: bytes each way, µs.
func points(pts []Point) string {
	var parts []string
	for _, p := range pts {
		parts = append(parts, fmt.Sprintf("%d B %.1f µs", p.Bytes, p.Seconds*1e6))
	}
	return strings.Join(parts, ", ")
}

// perByte prints seconds per byte as ns/B and the bandwidth it means.
func perByte(s float64) string {
	if s <= 0 {
		return "0 ns/B"
	}
	return fmt.Sprintf("%.3f ns/B (%.3g GB/s)", s*1e9, 1/s/1e9)
}
