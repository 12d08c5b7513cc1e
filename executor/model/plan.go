package model

import (
	"math"
	"sync"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/schedule"
)

// A Plan is what the model keeps of one algorithm on one call shape: a
// compact trace per rank (or per rank class) of who talks to whom, how
// many bytes, and how many are reduced and copied, in each round. Pricing
// it on a machine (Cost) replays the rounds; the schedules themselves are
// gone once traced.
type Plan struct {
	p int

	// states are the simulated ranks: every rank (classes false), or the
	// ranks of node 0, each standing for every rank with its local rank
	// (classes true; see symmetric).
	states   []state
	classes  bool
	numNodes int // nodes among the states

	// sized: the plan of a size-dependent algorithm, which holds no trace
	// of its own but one plan per shape of its schedules (sized.go).
	sized *sizedPlan

	// costs: per state and round, the bytes that price it (link), made
	// on the first Cost.
	once  sync.Once
	costs [][]roundCost

	// direct: a Direct (shm) algorithm, priced by formula (shm.go).
	direct   *algorithms.Algorithm
	base     algorithms.Params
	elemSize int
}

// state is the trace of one simulated rank.
type state struct {
	node   int32
	rounds []round
	xfers  []xfer
	// The counts of Cost, for this rank (bytes at scale 1).
	commRounds, messages  int
	sent, reduced, copied int64
	scratch               int64
}

// round is one round of one rank: xfers[x0:x0+ns] are its sends and
// xfers[x0+ns:x0+nx] its receives.
type round struct {
	x0, ns, nx      int32
	reduced, copied int64
}

// xfer is one message: the state of its peer, whether it crosses nodes,
// and its bytes.
type xfer struct {
	peer  int32
	inter bool
	bytes int64
}

// identity maps a rank to its own state.
var identity = func(q int) int32 { return int32(q) }

// Classes reports whether the plan prices one node's ranks for all
// (rank-symmetric algorithm on alike nodes). A size-dependent
// algorithm's plan answers for the shape of its unit count.
func (pl *Plan) Classes() bool {
	if pl.sized != nil {
		v := pl.sized.at(1)
		return v != nil && v.Classes()
	}
	return pl.classes
}

// States returns the number of ranks the plan simulates (for a
// size-dependent algorithm, at its unit count; 0 where it cannot be
// priced).
func (pl *Plan) States() int {
	if pl.sized != nil {
		if v := pl.sized.at(1); v != nil {
			return v.States()
		}
		return 0
	}
	return len(pl.states)
}

// setNodes sets every state's node from nodes (nil: each its own).
func (pl *Plan) setNodes(nodes *algorithms.NodeMap, p int) {
	pl.numNodes = p
	if nodes != nil {
		pl.numNodes = nodes.NumNodes()
	}
	for r := range pl.states {
		pl.states[r].node = int32(r)
		if nodes != nil {
			pl.states[r].node = int32(nodes.Node(r))
		}
	}
}

// trace returns the compact trace of schedule s of rank r, with stateOf
// giving a peer's state; a peer crosses nodes when its node (pl's map,
// through nodeOf) differs from r's.
func (pl *Plan) trace(s *schedule.Schedule, r, elemSize int, stateOf func(int) int32) state {
	return traceOf(s, r, elemSize, stateOf, pl.nodeOfFunc())
}

// nodeOfFunc returns the node of a rank under the plan's map: the states'
// nodes when every rank is a state.
func (pl *Plan) nodeOfFunc() func(int) int32 {
	return func(q int) int32 { return pl.states[q].node }
}

func traceOf(s *schedule.Schedule, r, elemSize int, stateOf, nodeOf func(int) int32) state {
	st := state{scratch: int64(s.ScratchLen * elemSize), node: nodeOf(r)}
	nx := 0
	for i := range s.Rounds {
		nx += len(s.Rounds[i].Sends) + len(s.Rounds[i].Recvs)
	}
	st.rounds = make([]round, len(s.Rounds))
	st.xfers = make([]xfer, 0, nx)
	e := int64(elemSize)
	me := nodeOf(r)
	for i := range s.Rounds {
		sr := &s.Rounds[i]
		rd := round{x0: int32(len(st.xfers)), ns: int32(len(sr.Sends)), nx: int32(len(sr.Sends) + len(sr.Recvs))}
		for _, t := range sr.Sends {
			b := int64(t.Range.Len) * e
			st.xfers = append(st.xfers, xfer{stateOf(t.Peer), nodeOf(t.Peer) != me, b})
			st.sent += b
		}
		for _, t := range sr.Recvs {
			st.xfers = append(st.xfers, xfer{stateOf(t.Peer), nodeOf(t.Peer) != me, int64(t.Range.Len) * e})
		}
		for _, x := range sr.Steps {
			if x.Kind == schedule.Reduce {
				rd.reduced += int64(x.Dst.Len) * e
			} else {
				rd.copied += int64(x.Dst.Len) * e
			}
		}
		if sr.Communicates() {
			st.commRounds++
		}
		st.messages += len(sr.Sends)
		st.reduced += rd.reduced
		st.copied += rd.copied
		st.rounds[i] = rd
	}
	return st
}

// roundCost is what one round of one rank moves, at scale 1: the larger
// of what it sends and receives within its node, and the larger of what
// its node sends and receives across nodes in that round; -1 where it
// has no message of that kind.
type roundCost struct{ intra, link int64 }

// link computes pl.costs, once: what Cost needs of every round beyond the
// peers, whatever the machine and scale.
func (pl *Plan) link() {
	rounds := 0
	pl.costs = make([][]roundCost, len(pl.states))
	for r := range pl.states {
		rounds = max(rounds, len(pl.states[r].rounds))
		pl.costs[r] = make([]roundCost, len(pl.states[r].rounds))
	}
	out := make([]int64, pl.numNodes)
	in := make([]int64, pl.numNodes)
	for i := range rounds {
		// What each node sends and receives across nodes this round.
		clear(out)
		clear(in)
		for r := range pl.states {
			st := &pl.states[r]
			if i >= len(st.rounds) {
				continue
			}
			rd := st.rounds[i]
			for j, x := range st.xfers[rd.x0 : rd.x0+rd.nx] {
				if !x.inter {
					continue
				}
				if int32(j) < rd.ns {
					out[st.node] += x.bytes
				} else {
					in[st.node] += x.bytes
				}
			}
		}
		for r := range pl.states {
			st := &pl.states[r]
			if i >= len(st.rounds) {
				continue
			}
			rd := st.rounds[i]
			rc := roundCost{-1, -1}
			var sent, recv int64
			for j, x := range st.xfers[rd.x0 : rd.x0+rd.nx] {
				switch {
				case x.inter:
					rc.link = max(out[st.node], in[st.node])
				case int32(j) < rd.ns:
					sent += x.bytes
					rc.intra = 0
				default:
					recv += x.bytes
					rc.intra = 0
				}
			}
			if rc.intra >= 0 {
				rc.intra = max(sent, recv)
			}
			pl.costs[r][i] = rc
		}
	}
}

// equal reports whether two traces price alike: the same rounds, peers
// (as states), node crossings and bytes.
func (s *state) equal(o *state) bool {
	if len(s.rounds) != len(o.rounds) || len(s.xfers) != len(o.xfers) || s.scratch != o.scratch {
		return false
	}
	for i := range s.rounds {
		if s.rounds[i] != o.rounds[i] {
			return false
		}
	}
	for i := range s.xfers {
		if s.xfers[i] != o.xfers[i] {
			return false
		}
	}
	return true
}

// Prepare traces algorithm a on the call described by base (Rank is
// ignored) with elements of elemSize bytes, for Cost to price on any
// machine. It returns nil when a's restrictions fail. It builds one
// rank's schedule at a time; for a rank-symmetric algorithm (symmetric)
// on alike nodes, only the ranks of node 0 and a few others to check the
// symmetry.
func Prepare(a *algorithms.Algorithm, base algorithms.Params, elemSize int) *Plan {
	pl, _ := PrepareWithin(a, base, elemSize, 0)
	return pl
}

// PrepareWithin is Prepare that gives up, returning false, where it would
// trace every rank (no symmetry to use) and p times the rounds of rank
// 0's schedule exceeds maxWork (0: no limit). A nil plan with true: a's
// restrictions fail.
//
// A size-dependent algorithm's plan (sized.go) never gives up: it
// prepares each shape of the algorithm's schedules when a Cost first
// needs it, within maxWork, and estimates one too long to trace as
// Approximate does.
func PrepareWithin(a *algorithms.Algorithm, base algorithms.Params, elemSize, maxWork int) (*Plan, bool) {
	if a.SizeDependent {
		return prepareSized(a, base, elemSize, maxWork, false), true
	}
	return prepare(a, base, elemSize, maxWork)
}

// Approximate prices algorithm a as if every node did what node 0 does,
// with the nodes permuted (turned, say, as the pairwise exchange turns
// the ranks), on nodes of k consecutive ranks where base.Nodes has them
// all alike (else nil, as where a's restrictions fail). It builds node
// 0's k schedules only and checks nothing: an estimate, for the tuner, of
// algorithms too long to trace on every rank whose traffic is such a
// permutation (the pairwise exchange; the hierarchical algorithms with a
// ring across nodes). A size-dependent algorithm's plan estimates each
// shape of its schedules so.
func Approximate(a *algorithms.Algorithm, base algorithms.Params, elemSize int) *Plan {
	if a.SizeDependent {
		return prepareSized(a, base, elemSize, 0, true)
	}
	if a.Direct || a.Build == nil || a.Check(base) != nil || base.P < 1 {
		return Prepare(a, base, elemSize)
	}
	k := 1
	if n := base.Nodes; n != nil {
		k = n.MaxPerNode()
		if base.P%k != 0 {
			return nil
		}
		for r := range base.P {
			if n.Node(r) != r/k {
				return nil
			}
		}
	}
	return prepareNodeClasses(a, base, k, elemSize, false)
}

func prepare(a *algorithms.Algorithm, base algorithms.Params, elemSize, maxWork int) (*Plan, bool) {
	p := base.P
	nodes := base.Nodes
	if nodes == nil && base.SharedMemory && p > 0 {
		nodes = algorithms.NodeMapOf(make([]int, p))
	}
	if a.Direct {
		if nodes == nil || !nodes.OneNode() {
			return nil, true
		}
		b := base
		b.SharedMemory = true
		if a.Check(b) != nil {
			return nil, true
		}
		return &Plan{p: p, direct: a, base: b, elemSize: elemSize}, true
	}
	if a.Check(base) != nil || a.Build == nil || p < 1 {
		return nil, true
	}
	if k, kind, ok := symmetric(a, base, nodes); ok {
		var pl *Plan
		if kind == nodeSym {
			pl = prepareNodeClasses(a, base, k, elemSize, true)
		} else {
			pl = prepareClasses(a, base, kind, k, elemSize, true)
		}
		if pl != nil {
			return pl, true
		}
	}
	pl := &Plan{p: p, states: make([]state, p)}
	pl.setNodes(nodes, p)
	nodeOf := pl.nodeOfFunc()
	for r := range p {
		q := base
		q.Rank = r
		s := a.Build(q)
		if r == 0 && maxWork > 0 && p*len(s.Rounds) > maxWork {
			return nil, false
		}
		pl.states[r] = traceOf(s, r, elemSize, identity, nodeOf)
	}
	return pl, true
}

// prepareClasses prices a rank-symmetric algorithm on nodes of k
// consecutive ranks from one schedule: rank 0's, traced with every peer
// as its place relative to rank 0 (q-0 turned, or q xor 0). Sampled other
// ranks must trace, relative to themselves (q-r, or q xor r), exactly
// alike; then rank r does what rank 0 does moved by r, and so the ranks
// of node 0 (states 0..k-1, every peer standing for its local rank) do
// what every node does: every rank finishes every round when the rank of
// node 0 with its local rank does, and every node's link carries what
// node 0's does. Nil when a sample differs.
func prepareClasses(a *algorithms.Algorithm, base algorithms.Params, kind symKind, k, elemSize int, check bool) *Plan {
	p := base.P
	rel := func(r int) func(int) int32 {
		if kind == xorSym {
			return func(q int) int32 { return int32(q ^ r) }
		}
		return func(q int) int32 { return int32(((q-r)%p + p) % p) }
	}
	abs := func(d int32, r int) int {
		if kind == xorSym {
			return int(d) ^ r
		}
		return (int(d) + r) % p
	}
	zero := func(int) int32 { return 0 }
	q := base
	q.Rank = 0
	t0 := traceOf(a.Build(q), 0, elemSize, rel(0), zero)
	for _, r := range samples(p, k) {
		if !check {
			break
		}
		q.Rank = r
		tr := traceOf(a.Build(q), r, elemSize, rel(r), zero)
		if !tr.equal(&t0) {
			return nil
		}
	}
	pl := &Plan{p: p, states: make([]state, k), classes: true, numNodes: 1}
	for j := range k {
		st := t0
		st.xfers = make([]xfer, len(t0.xfers))
		for i, x := range t0.xfers {
			peer := abs(x.peer, j)
			st.xfers[i] = xfer{peer: int32(peer % k), inter: peer >= k, bytes: x.bytes}
		}
		pl.states[j] = st
	}
	return pl
}

// prepareNodeClasses prices an algorithm whose nodes all do what node 0
// does, with the nodes permuted, on nodes of k consecutive ranks: node
// j's rank with local rank l talks to the same local ranks as node 0's,
// on nodes moved by j (turned, (j'-j) mod N, or j' xor j), and moves the
// same bytes. It traces node 0's k ranks, each from its own schedule, so
// that the states 0..k-1 stand for every node's ranks, as in
// prepareClasses. With check, sampled ranks of other nodes must trace,
// relative to their node, exactly as the rank of node 0 with their local
// rank, under one of the two permutations for all samples; else nil.
func prepareNodeClasses(a *algorithms.Algorithm, base algorithms.Params, k, elemSize int, check bool) *Plan {
	p := base.P
	n := (p + k - 1) / k
	zero := func(int) int32 { return 0 }
	pl := &Plan{p: p, states: make([]state, k), classes: true, numNodes: 1}
	q := base
	for l := range k {
		q.Rank = l
		pl.states[l] = traceOf(a.Build(q), l, elemSize, identity, zero)
	}
	if check {
		ok := false
		var traced []*schedule.Schedule
		for _, turn := range []func(j, j2 int) int{
			func(j, j2 int) int { return ((j2-j)%n + n) % n },
			func(j, j2 int) int { return j2 ^ j },
		} {
			ok = true
			for i, r := range samples(p, k) {
				if i == len(traced) {
					q.Rank = r
					traced = append(traced, a.Build(q))
				}
				rel := func(x int) int32 { return int32(turn(r/k, x/k)*k + x%k) }
				tr := traceOf(traced[i], r, elemSize, rel, zero)
				if !tr.equal(&pl.states[r%k]) {
					ok = false
					break
				}
			}
			if ok {
				break
			}
		}
		if !ok {
			return nil
		}
	}
	for l := range pl.states {
		st := &pl.states[l]
		for i, x := range st.xfers {
			st.xfers[i] = xfer{peer: x.peer % int32(k), inter: x.peer >= int32(k), bytes: x.bytes}
		}
	}
	return pl
}

// samples returns ranks other than 0 to check a symmetry on, on nodes of
// k ranks: the neighbours of rank 0, the edges of node 0 and node 1, the
// middle, the last, and a spread of others.
func samples(p, k int) []int {
	var out []int
	seen := map[int]bool{}
	add := func(r int) {
		if r > 0 && r < p && !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	for _, r := range []int{1, k - 1, k, 2*k - 1, p / 2, p/2 + 1, p - 1} {
		add(r)
	}
	for i := 1; i <= 3; i++ {
		add(int(uint64(i)*0x9e3779b97f4a7c15>>33) % p)
	}
	return out
}

// symmetric returns k, the number of ranks per node, and the symmetry,
// when a's schedules on this call are claimed rank-symmetric: every rank
// r does what rank 0 does with every peer moved by r (turned by r, or
// xor r), on nodes of k consecutive ranks. That holds for the ring
// algorithms and Bruck (rotation: rank r is rank 0 turned by r) and for
// recursive doubling and halving with p a power of two (exclusive-or), on
// equal blocks, with nodes of k consecutive ranks (k a power of two for
// the exclusive-or). The hierarchical algorithms (with their phases fixed:
// algorithms.Algorithm.AtSize) are symmetric by nodes (nodeSym): each
// node does what node 0 does, with the nodes turned when the flat
// algorithm across them is (a ring, Bruck) or xor-ed (recursive doubling
// or halving, Rabenseifner, on a power of two of nodes); which one, and
// whether at all (not where the flat algorithm folds a number of nodes
// that is not a power of two), the samples say. Prepare checks samples
// anyway; the tests check every rank.
func symmetric(a *algorithms.Algorithm, base algorithms.Params, nodes *algorithms.NodeMap) (int, symKind, bool) {
	kind, ok := symmetries[a.Collective.String()+"/"+a.Name]
	if !ok || !equalBlocks(base) {
		return 0, 0, false
	}
	p := base.P
	k := 1
	if nodes != nil {
		k = nodes.MaxPerNode()
		if p%k != 0 {
			return 0, 0, false
		}
		for r := range p {
			if nodes.Node(r) != r/k {
				return 0, 0, false
			}
		}
	}
	if kind == xorSym && (!pow2(p) || !pow2(k)) || kind == nodeSym && k == 1 {
		return 0, 0, false
	}
	return k, kind, true
}

type symKind uint8

const (
	rotation symKind = iota
	xorSym
	nodeSym
)

// symmetries are the algorithms that symmetric vouches for.
var symmetries = map[string]symKind{
	"MPI_Allreduce/ring":                          rotation,
	"MPI_Allgather/ring":                          rotation,
	"MPI_Allgather/bruck":                         rotation,
	"MPI_Reduce_scatter/ring":                     rotation,
	"MPI_Reduce_scatter_block/ring":               rotation,
	"MPI_Allreduce/recursive_doubling":            xorSym,
	"MPI_Allreduce/rabenseifner":                  xorSym,
	"MPI_Allgather/recursive_doubling":            xorSym,
	"MPI_Reduce_scatter/recursive_halving":        xorSym,
	"MPI_Reduce_scatter_block/recursive_halving":  xorSym,
	"MPI_Reduce_scatter/recursive_doubling":       xorSym,
	"MPI_Reduce_scatter_block/recursive_doubling": xorSym,
	"MPI_Allreduce/hierarchical":                  nodeSym,
	"MPI_Allgather/hierarchical":                  nodeSym,
	"MPI_Reduce_scatter/hierarchical":             nodeSym,
	"MPI_Reduce_scatter_block/hierarchical":       nodeSym,
}

func pow2(x int) bool { return x > 0 && x&(x-1) == 0 }

// equalBlocks reports whether every rank's block of the call is the same
// size.
func equalBlocks(b algorithms.Params) bool {
	if b.Counts == nil {
		return b.P > 0 && b.Count%b.P == 0
	}
	for _, c := range b.Counts {
		if c != b.Counts[0] {
			return false
		}
	}
	return true
}

// Cost prices the plan on machine m with every byte count multiplied by
// scale: a plan prepared at one element per block prices n elements per
// block at scale n, exactly where the algorithm's message lengths are
// proportional to the call's counts (the tests check that they are).
//
// A size-dependent algorithm's plan prices, at each scale, the shape of
// schedule the algorithm builds at that scale's counts (sized.go).
func (pl *Plan) Cost(m Machine, scale int64) Cost {
	if pl.sized != nil {
		v := pl.sized.at(scale)
		if v == nil {
			return Cost{Time: math.Inf(1)}
		}
		return v.Cost(m, scale)
	}
	if pl.direct != nil {
		return shmCost(pl.direct, pl.base, pl.elemSize, scale, m)
	}
	var c Cost
	rounds := 0
	for i := range pl.states {
		st := &pl.states[i]
		rounds = max(rounds, len(st.rounds))
		c.Rounds = max(c.Rounds, st.commRounds)
		c.Messages = max(c.Messages, st.messages)
		c.SentBytes = max(c.SentBytes, st.sent*scale)
		c.ReducedBytes = max(c.ReducedBytes, st.reduced*scale)
		c.CopiedBytes = max(c.CopiedBytes, st.copied*scale)
		c.ScratchBytes = max(c.ScratchBytes, st.scratch*scale)
	}
	pl.once.Do(pl.link)
	na, nb := m.node()
	n := len(pl.states)
	now := make([]float64, n)  // when each rank finished its last round
	next := make([]float64, n) // the same, one round later
	s := float64(scale)
	for i := range rounds {
		for r := range pl.states {
			st := &pl.states[r]
			if i >= len(st.rounds) {
				next[r] = now[r]
				continue
			}
			rd := &st.rounds[i]
			t := now[r]
			if rd.nx > 0 {
				// Wait for every peer of this round to be ready.
				for _, x := range st.xfers[rd.x0 : rd.x0+rd.nx] {
					t = max(t, now[x.peer])
				}
				rc := pl.costs[r][i]
				var d float64
				if rc.intra >= 0 {
					d = na + nb*(float64(rc.intra)*s)
				}
				if rc.link >= 0 {
					d = max(d, m.Alpha+m.Beta*(float64(rc.link)*s))
				}
				t += d
			}
			next[r] = t + m.Gamma*(float64(rd.reduced)*s) + m.Delta*(float64(rd.copied)*s)
		}
		now, next = next, now
	}
	for _, t := range now {
		c.Time = max(c.Time, t)
	}
	if math.IsNaN(c.Time) {
		c.Time = math.Inf(1)
	}
	return c
}

// UnitCount returns the smallest count of a call of collective c on p
// ranks whose multiples every algorithm splits evenly: one element per
// block (the Counts of each rank), or for an allreduce, whose algorithms
// cut the vector in p blocks or, folded to a power of two, p' blocks,
// lcm(p, p') elements (Count). A plan prepared at the unit count and
// priced at scale s prices s units exactly.
func UnitCount(c algorithms.Collective, p int) int {
	if c != algorithms.Allreduce {
		return 1
	}
	p2 := 1
	for p2*2 <= p {
		p2 *= 2
	}
	return p / gcd(p, p2) * p2
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
