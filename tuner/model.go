package tuner

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strings"
	"sync"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/executor/model"
)

// Outside every rule, the model decides: it prices every algorithm of the
// collective that can run the call (executor/model, on the tuner's
// machine) and takes the cheapest. Decisions are cached per collective,
// size class (eight per doubling of the size, priced at the class's top),
// rank count, node shape and the call's restrictions, so that a
// communicator's steady state looks a map up under a read lock and
// allocates nothing; the traces the model
// priced (one plan per algorithm and shape) are kept to price other sizes
// of the same shape, on any tuner's machine. The hierarchical algorithms,
// whose phases' flat algorithms change with the size, are candidates
// where there is something to compose (more than one node, more than one
// rank a node); their plan holds one trace per choice of phases
// (model.PrepareWithin, algorithms.Algorithm.AtSize), each priced at the
// sizes that choice is made at. On host memory they run in their
// shared-memory form (coll/hierarchy.go), whose intra-node phases are the
// shm engine's steps, not messages: their plans are priced on
// model.Machine.ShmForm (PricedPlan.Cost), except where the host's
// collective is a candidate (below).
//
// The model prices the shape, not the exact map: nodes of PerNode
// consecutive ranks, the last one short where PerNode does not divide p.
// An algorithm that would take the model more than maxWork rank-rounds
// to trace (no symmetry to use, or uneven nodes, at thousands of ranks)
// is estimated from node 0's schedules alone (model.Approximate), on nodes
// of k consecutive ranks, k the largest divisor of p that is at most
// PerNode, so that all nodes are alike (a hierarchical algorithm's
// too-long shapes are estimated on the shape's own nodes, and where those
// are not alike left unpriced at the sizes that need them). The call is the size class's
// top size rounded to a multiple of the unit count (model.UnitCount:
// one element per block). Where the real map is not so placed, or the
// call's size not such a multiple, the price is an estimate of the
// call's.
//
// With an extra candidate (Options.Extra: the host MPI's collective, in
// LD_PRELOAD mode), which the model cannot price, the model estimates it
// by the best of the algorithms it names (Extra.EstimatedBy), and chooses
// gocoll only where gocoll's best beats that by more than Extra.Margin.

// Shape is what the rules and the model see of a communicator: its ranks,
// its nodes and the most ranks on one node. Without a node map, ranks
// that share a segment (Params.SharedMemory) are one node; otherwise
// every rank counts as its own node.
type Shape struct {
	P, Nodes, PerNode int
}

// Composes reports whether the hierarchical algorithms have phases to
// compose on the shape: more than one node, of more than one rank. On one
// node, or one rank a node, they are a flat algorithm under another name
// (algorithms.Composes says the same of a node map).
func (s Shape) Composes() bool { return s.Nodes > 1 && s.PerNode > 1 }

func (s Shape) String() string {
	if s.Nodes == 1 {
		return fmt.Sprintf("p=%d on one node", s.P)
	}
	return fmt.Sprintf("p=%d, %d nodes, up to %d a node", s.P, s.Nodes, s.PerNode)
}

// shapeOf remembers the shape of one node map.
type shapeOf struct {
	m *algorithms.NodeMap
	Shape
}

// shape returns the call's shape; a node map's is computed once (per map
// seen last), not per call.
func (t *Tuner) shape(p algorithms.Params) Shape {
	if p.Nodes == nil {
		if p.SharedMemory || p.P <= 1 {
			return Shape{p.P, 1, p.P}
		}
		return Shape{p.P, p.P, 1}
	}
	if s := t.last.Load(); s != nil && s.m == p.Nodes {
		return s.Shape
	}
	s := &shapeOf{m: p.Nodes, Shape: Shape{p.P, p.Nodes.NumNodes(), p.Nodes.MaxPerNode()}}
	t.last.Store(s)
	return s.Shape
}

// Machine is a tuning file's model machine: seconds per message and per
// byte (see model.Machine).
type Machine struct {
	Alpha     float64 `json:"alpha"`                // per message between nodes
	Beta      float64 `json:"beta"`                 // per byte of a node's traffic between nodes
	Gamma     float64 `json:"gamma"`                // per byte reduced
	Delta     float64 `json:"delta"`                // per byte copied
	NodeAlpha float64 `json:"node_alpha,omitempty"` // per message within a node; 0 (with node_beta): as between nodes
	NodeBeta  float64 `json:"node_beta,omitempty"`  // per byte within a node
	Sync      float64 `json:"sync,omitempty"`       // per step of the shm algorithms; 0: node_alpha
}

// Model returns m as the model's machine.
func (m Machine) Model() model.Machine {
	return model.Machine{Alpha: m.Alpha, Beta: m.Beta, Gamma: m.Gamma, Delta: m.Delta, NodeAlpha: m.NodeAlpha, NodeBeta: m.NodeBeta, Sync: m.Sync}
}

// MachineOf returns the tuning file form of m.
func MachineOf(m model.Machine) Machine {
	return Machine{Alpha: m.Alpha, Beta: m.Beta, Gamma: m.Gamma, Delta: m.Delta, NodeAlpha: m.NodeAlpha, NodeBeta: m.NodeBeta, Sync: m.Sync}
}

// Machine returns the machine the model decides with.
func (t *Tuner) Machine() model.Machine { return t.machine }

type modelKey struct {
	plans planKey
	class int32
}

type planKey struct {
	coll                        algorithms.Collective
	shape                       Shape
	commutative, shared, device bool
	reproducible                bool // only algorithms that compute the canonical association
}

type pricedPlan = PricedPlan

// PricedPlan is the model's trace of one algorithm on one shape.
type PricedPlan struct {
	Alg  *algorithms.Algorithm
	Plan *model.Plan
	// Approx: estimated from node 0's schedules (model.Approximate), too
	// long to trace on every rank.
	Approx bool
}

// Plans returns the model's traces of collective c's algorithms that can
// run a call of shape sh (at unit size: see ShapeParams), as the tuner
// prices them; shared, do not modify.
func Plans(c algorithms.Collective, sh Shape, commutative, shared, device bool) []PricedPlan {
	return plansFor(planKey{coll: c, shape: sh, commutative: commutative, shared: shared, device: device})
}

// Cost is the plan's price at scale s on machine m as the tuner prices
// it: a hierarchical algorithm's, where shm (host memory), on
// m.ShmForm(), since there it runs in its shared-memory form, its
// intra-node phases on the shm engine.
func (pp PricedPlan) Cost(m model.Machine, s int64, shm bool) model.Cost {
	if pp.Alg.SizeDependent && shm {
		m = m.ShmForm()
	}
	return pp.Plan.Cost(m, s)
}

type modelCache struct {
	mu      sync.RWMutex
	choices map[modelKey]Choice
}

// plans are the model's traces per shape, whatever the machine: shared
// by every tuner of the process (gocoll-model's three). At most
// maxPlans shapes are kept; beyond, the cache starts again.
var plans struct {
	sync.Mutex
	m map[planKey][]pricedPlan
}

const maxPlans = 16

func plansFor(pk planKey) []pricedPlan {
	plans.Lock()
	defer plans.Unlock()
	if pp, ok := plans.m[pk]; ok {
		return pp
	}
	if plans.m == nil || len(plans.m) >= maxPlans {
		plans.m = map[planKey][]pricedPlan{}
	}
	pp := preparePlans(pk)
	plans.m[pk] = pp
	return pp
}

// sizeClass returns the class of a size: eight per doubling, each
// class (lo, hi] so that a power of two is the top of its class (the shm
// algorithms change method at one: 128 KiB an allreduce step).
func sizeClass(b int64) int32 {
	if b <= 16 {
		return int32(max(b, 0))
	}
	x := uint64(b - 1)
	e := bits.Len64(x) - 1
	return int32(e*8) + int32(x>>(e-3)&7)
}

// classBytes returns the size a class is priced at: its top.
func classBytes(c int32) int64 {
	if c <= 16 {
		return int64(c)
	}
	e, f := int64(c/8), int64(c%8)
	return (9 + f) << e >> 3
}

// modelChoice returns the model's choice for a call outside every rule.
func (t *Tuner) modelChoice(q Query, sh Shape) Choice {
	pk := planKey{coll: q.Collective, shape: sh, commutative: q.Params.Commutative, shared: q.Params.SharedMemory, device: q.Params.DeviceMemory, reproducible: q.Params.Reproducible}
	key := modelKey{plans: pk, class: sizeClass(q.Bytes)}
	t.models.mu.RLock()
	c, ok := t.models.choices[key]
	t.models.mu.RUnlock()
	if ok {
		return c
	}
	t.models.mu.Lock()
	defer t.models.mu.Unlock()
	if c, ok := t.models.choices[key]; ok {
		return c
	}
	if t.models.choices == nil {
		t.models.choices = map[modelKey]Choice{}
	}
	var x *Extra
	if t.extra != nil && t.extra.refuses(q.Params) == nil {
		x = t.extra
	}
	c = decide(plansFor(pk), pk, classBytes(key.class), t.machine, x)
	if t.root != nil { // WithMachine's: coll's fitted machine
		c.Why = strings.Replace(c.Why, "model (", "model on the fitted machine (", 1)
	}
	t.models.choices[key] = c
	return c
}

// Estimate returns the model's choice for a call as the tuner makes it
// outside every rule, whatever the rules say: for gocoll-model.
func (t *Tuner) Estimate(q Query) Choice {
	t.compileOnce.Do(t.compile)
	return t.modelChoice(q, t.shape(q.Params))
}

// ShapeParams returns the call the model prices for shape sh at unit
// size: p ranks on nodes of equal size (see the top of this file), one
// unit count (model.UnitCount) of 1-byte elements.
func ShapeParams(c algorithms.Collective, sh Shape, commutative, shared, device bool) algorithms.Params {
	b := algorithms.Params{P: sh.P, Commutative: commutative, SharedMemory: shared, DeviceMemory: device, Nodes: canonical(sh, false)}
	if c == algorithms.Allreduce {
		b.Count = model.UnitCount(c, sh.P)
		return b
	}
	b.Counts = make([]int, sh.P)
	for i := range b.Counts {
		b.Counts[i] = 1
	}
	return b
}

// Scale returns the multiple of the unit call of ShapeParams nearest to
// bytes (at least 1).
func Scale(c algorithms.Collective, p int, bytes int64) int64 {
	u := int64(model.UnitCount(c, p))
	if c != algorithms.Allreduce {
		u = int64(p)
	}
	return max((bytes+u/2)/u, 1)
}

// maxWork bounds the ranks times rounds the model traces for one
// algorithm on one shape (see the top of this file): about half a
// second at most.
const maxWork = 1 << 19

// canonical returns the node map the model prices shape sh on: nodes of
// sh.PerNode consecutive ranks (all of p on one node), or with even, of k,
// the largest divisor of p at most sh.PerNode; nil when every rank is its
// own node.
func canonical(sh Shape, even bool) *algorithms.NodeMap {
	k := sh.PerNode
	if sh.Nodes <= 1 {
		k = sh.P
	}
	for even && k > 1 && sh.P%k != 0 {
		k--
	}
	if k <= 1 {
		return nil
	}
	return algorithms.BlockNodeMap(sh.P, k)
}

func preparePlans(pk planKey) []pricedPlan {
	base := ShapeParams(pk.coll, pk.shape, pk.commutative, pk.shared, pk.device)
	base.Reproducible = pk.reproducible
	var out []pricedPlan
	for _, a := range algorithms.All(pk.coll) {
		if a.SizeDependent && !pk.shape.Composes() {
			continue // a flat algorithm that is priced already
		}
		// A size-dependent algorithm's plan prepares each shape of its
		// schedules when a size first needs it, within maxWork, and
		// estimates one too long to trace (model.PrepareWithin).
		pl, ok := model.PrepareWithin(a, base, 1, maxWork)
		if !ok {
			// Too long to trace on every rank: estimated from node 0,
			// on even nodes.
			even := base
			even.Nodes = canonical(pk.shape, true)
			pl = model.Approximate(a, even, 1)
		}
		if pl != nil {
			out = append(out, pricedPlan{a, pl, !ok})
		}
	}
	return out
}

// decide prices the plans at bytes and returns the cheapest, or the extra
// candidate x (nil: none) unless gocoll's best wins by x.Margin.
func decide(plans []pricedPlan, pk planKey, bytes int64, m model.Machine, x *Extra) Choice {
	s := Scale(pk.coll, pk.shape.P, bytes)
	best, second, host := -1, -1, -1
	times := make([]float64, len(plans))
	for i, pp := range plans {
		// The shm form's price on host memory; not where the host's
		// collective is weighed (LD_PRELOAD), whose estimate is a flat
		// textbook algorithm's: no unmeasured discount tips a call from
		// the host.
		times[i] = pp.Cost(m, s, !pk.device && x == nil).Time
		if math.IsInf(times[i], 1) {
			continue
		}
		switch {
		case best < 0 || times[i] < times[best]:
			best, second = i, best
		case second < 0 || times[i] < times[second]:
			second = i
		}
		if x != nil && slices.Contains(x.EstimatedBy, pp.Alg.Name) && (host < 0 || times[i] < times[host]) {
			host = i
		}
	}
	if best < 0 { // Choose turns this into the call's error
		return Choice{Source: FromModel, Why: fmt.Sprintf("no %s algorithm can run a call of %s%s", pk.coll, pk.shape, map[bool]string{true: " in reproducible mode"}[pk.reproducible])}
	}
	where := fmt.Sprintf("model (%s, %d B): ", pk.shape, bytes)
	if host >= 0 && times[best]*x.Margin >= times[host] {
		return Choice{Extra: x.Name, Source: FromModel, Why: fmt.Sprintf("%sgocoll's best %s %s is not %.0f%% under %s's estimate (%s %s)",
			where, plans[best].Alg.Name, us(times[best]), (x.Margin-1)*100, x.Called, plans[host].Alg.Name, us(times[host]))}
	}
	why := where + plans[best].Alg.Name + " " + us(times[best])
	if second >= 0 {
		why += ", next " + plans[second].Alg.Name + " " + us(times[second])
	}
	if host >= 0 {
		why += fmt.Sprintf(", %s estimated at %s (%s)", x.Called, us(times[host]), plans[host].Alg.Name)
	}
	return Choice{Alg: plans[best].Alg, Source: FromModel, Why: why}
}

func us(t float64) string { return fmt.Sprintf("%.3g µs", t*1e6) }
