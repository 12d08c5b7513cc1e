package model

import (
	"sync"

	"github.com/gocoll/gocoll/algorithms"
)

// A size-dependent algorithm (the hierarchical ones) builds schedules
// whose shape depends on the counts: which flat algorithm each phase runs.
// Within one choice the shape is fixed and message lengths are
// proportional to the counts, like any other algorithm's. So its plan is
// one plan per choice, each prepared at the plan's own (unit) count with
// the choice fixed (algorithms.Algorithm.AtSize) and scaled like any
// other: a handful of traces (three bands of sizes for the hierarchical
// ones), each prepared the first time a Cost needs it, so that pricing
// every size costs what pricing a flat algorithm does. Which choice a
// count gets is the algorithms package's rule; the model only asks.

// sizedPlan holds the plans of a size-dependent algorithm's shapes.
type sizedPlan struct {
	a                 *algorithms.Algorithm
	base              algorithms.Params
	elemSize, maxWork int
	approx            bool // every shape estimated (Approximate)

	mu    sync.Mutex
	plans map[*algorithms.Algorithm]*Plan // by the fixed algorithm (AtSize); nil: cannot price
}

// prepareSized returns a's plan on base, or nil where a's restrictions
// fail (they do not depend on the size).
func prepareSized(a *algorithms.Algorithm, base algorithms.Params, elemSize, maxWork int, approx bool) *Plan {
	if a.AtSize == nil || a.Check(base) != nil || base.P < 1 {
		return nil
	}
	return &Plan{p: base.P, sized: &sizedPlan{a: a, base: base, elemSize: elemSize, maxWork: maxWork, approx: approx, plans: map[*algorithms.Algorithm]*Plan{}}}
}

// at returns the plan of the shape a builds at scale times the base's
// counts, prepared (at the base's counts) when first asked for; nil where
// it cannot be priced (too long to trace and nodes not alike).
func (sp *sizedPlan) at(scale int64) *Plan {
	f := sp.a.AtSize(scaled(sp.base, scale))
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if pl, ok := sp.plans[f]; ok {
		return pl
	}
	var pl *Plan
	ok := false
	if !sp.approx {
		pl, ok = prepare(f, sp.base, sp.elemSize, sp.maxWork)
	}
	if !ok {
		pl = Approximate(f, sp.base, sp.elemSize)
	}
	sp.plans[f] = pl
	return pl
}

// scaled returns call b with every count multiplied by s.
func scaled(b algorithms.Params, s int64) algorithms.Params {
	if s == 1 {
		return b
	}
	b.Count *= int(s)
	if b.Counts != nil {
		c := make([]int, len(b.Counts))
		for i, x := range b.Counts {
			c[i] = x * int(s)
		}
		b.Counts = c
	}
	return b
}
