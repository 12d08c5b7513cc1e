// Package fit measures the model's machine (executor/model.Machine) on the
// ranks of a communicator. It serves two callers with one measurement
// and one copy of the fitting math: gocoll-tune (over package mpi; its
// -machine-only run is what gocoll-compare -cluster gives auto-tuned),
// and coll's in-job fit (over a communicator's own transport, at the
// first call the model decides across nodes; coll/fit.go). It imports
// neither: a communicator is the small interface Comm (measure.go).
//
// The machine has two levels, and each is fitted from the pair of ranks
// that uses it: two ranks of one node (the transport within a node:
// node_alpha, node_beta) and two ranks of different nodes (the network:
// alpha, beta), each pair exchanging messages of increasing size while
// every other rank waits. An exchange is one round of the model (each
// rank of the pair sends n bytes to the other at once), so its time is
// alpha + beta n, which Line fits to the sizes. The reduction (gamma) and
// copy (delta) speeds are rank 0's, alone. The shm step (sync) is timed
// where the communicator can (SyncTimer: gocoll-tune's 8-byte shm
// allreduce on node 0's ranks). What a job cannot measure (the network,
// on one node; the node, with one rank per node; sync without a timer)
// keeps the base machine's value (Options.Base), and Result.Describe says
// so.
package fit

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/executor/model"
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
	alpha = median(rest)
	return max(alpha, 0), beta, nil
}

// median returns the median of xs (the mean of the middle two for an
// even count); xs is sorted in place.
func median(xs []float64) float64 {
	slices.Sort(xs)
	m := xs[len(xs)/2]
	if len(xs)%2 == 0 {
		m = (xs[len(xs)/2-1] + m) / 2
	}
	return m
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

// Result is a fitted machine and what it was fitted from.
type Result struct {
	Machine      model.Machine
	Nodes        *algorithms.NodeMap
	Pairs        Pairs
	Intra, Inter []Point // the exchanges; nil where the pair does not exist
	SyncMeasured bool    // sync is node 0's shm step (SyncTimer)
	LocalBytes   int     // gamma and delta were timed over buffers of this size
	// Cost is how long Measure took on this rank, from its start to the
	// last broadcast: what the fit cost the job.
	Cost time.Duration
}

// Describe says what was fitted, from which ranks, and what was not.
func (r Result) Describe() string {
	m := r.Machine
	var b strings.Builder
	where := r.Nodes.String()
	if r.Nodes.OneNode() {
		where = "one node"
	}
	fmt.Fprintf(&b, "machine fitted on %d ranks, %s, in %v:\n", r.Nodes.P(), where, r.Cost.Round(time.Millisecond))
	if r.Pairs.HasInter {
		fmt.Fprintf(&b, "  between nodes (rank %d <-> rank %d): alpha %.2f µs, beta %s\n", r.Pairs.Inter[0], r.Pairs.Inter[1], m.Alpha*1e6, perByte(m.Beta))
		fmt.Fprintf(&b, "    exchanged: %s\n", points(r.Inter))
	} else {
		fmt.Fprintf(&b, "  between nodes: not measured (one node); alpha %.2f µs, beta %s kept\n", m.Alpha*1e6, perByte(m.Beta))
	}
	if r.Pairs.HasIntra {
		fmt.Fprintf(&b, "  within a node (rank %d <-> rank %d): node_alpha %.2f µs, node_beta %s\n", r.Pairs.Intra[0], r.Pairs.Intra[1], m.NodeAlpha*1e6, perByte(m.NodeBeta))
		fmt.Fprintf(&b, "    exchanged: %s\n", points(r.Intra))
	} else {
		fmt.Fprintf(&b, "  within a node: not measured (one rank per node); node_alpha %.2f µs, node_beta %s kept\n", m.NodeAlpha*1e6, perByte(m.NodeBeta))
	}
	switch {
	case r.SyncMeasured:
		fmt.Fprintf(&b, "  shm step (8 B shm allreduce on node 0's %d ranks): sync %.2f µs\n", r.Nodes.Size(0), m.Sync*1e6)
	case r.Nodes.Size(0) < 2:
		fmt.Fprintf(&b, "  shm step: not measured (rank 0 alone on its node); sync %.2f µs kept\n", m.Sync*1e6)
	default:
		fmt.Fprintf(&b, "  shm step: not measured here; sync %.2f µs kept\n", m.Sync*1e6)
	}
	fmt.Fprintf(&b, "  rank 0, %s: gamma (float32 sum) %s, delta (memmove) %s\n", mib(r.LocalBytes), perByte(m.Gamma), perByte(m.Delta))
	return b.String()
}

// Summary is the fitted machine on one line, with the cost of the fit
// (GOCOLL_DEBUG=info's line of the in-job fit).
func (r Result) Summary() string {
	m := r.Machine
	var parts []string
	if r.Pairs.HasInter {
		parts = append(parts, fmt.Sprintf("alpha %.2f µs, beta %s (ranks %d, %d)", m.Alpha*1e6, perByte(m.Beta), r.Pairs.Inter[0], r.Pairs.Inter[1]))
	}
	if r.Pairs.HasIntra {
		parts = append(parts, fmt.Sprintf("node_alpha %.2f µs, node_beta %s (ranks %d, %d)", m.NodeAlpha*1e6, perByte(m.NodeBeta), r.Pairs.Intra[0], r.Pairs.Intra[1]))
	}
	parts = append(parts, fmt.Sprintf("gamma %s, delta %s", perByte(m.Gamma), perByte(m.Delta)))
	return fmt.Sprintf("%s; the fit took %v", strings.Join(parts, "; "), r.Cost.Round(100*time.Microsecond))
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

// mib prints a buffer size: "16 MiB", "512 KiB".
func mib(n int) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d KiB", n>>10)
}
