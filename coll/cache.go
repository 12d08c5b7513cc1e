package coll

import (
	"slices"
	"sync"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/schedule"
)

// scheduleCache keeps the schedules a communicator has built, so that a
// call with the same shape as an earlier one pays nothing for building.
// Calls with irregular counts are cached by their counts too.
type scheduleCache struct {
	m map[cacheKey]*cacheEntry
	// counts are the last uniform counts handed out, never written once
	// handed out; countsMu lets a nonblocking call's checks (outside the
	// communicator's lock) take them while another call runs.
	countsMu sync.Mutex
	counts   []int
}

type cacheKey struct {
	coll        algorithms.Collective
	alg         *algorithms.Algorithm
	count       int // Count, or the common count of uniform Counts
	root        int
	uniform     bool
	hash        uint64 // of irregular Counts
	commutative bool
	inPlace     bool
	// reproducible: the hierarchical algorithms fix canonical phases
	reproducible bool
}

type cacheEntry struct {
	counts []int // irregular Counts, to tell apart equal hashes
	sched  *schedule.Schedule
}

// maxCached bounds the cache; when full it starts again empty.
const maxCached = 512

func (sc *scheduleCache) get(coll algorithms.Collective, a *algorithms.Algorithm, p algorithms.Params) *schedule.Schedule {
	k := cacheKey{coll: coll, alg: a, count: p.Count, root: p.Root, commutative: p.Commutative, inPlace: p.InPlace, reproducible: p.Reproducible}
	if p.Counts != nil {
		k.uniform = isUniform(p.Counts)
		if k.uniform {
			k.count = p.Counts[0]
		} else {
			k.hash = hashInts(p.Counts)
		}
	}
	if e, ok := sc.m[k]; ok && (k.uniform || p.Counts == nil || slices.Equal(e.counts, p.Counts)) {
		return e.sched
	}
	if sc.m == nil || len(sc.m) >= maxCached {
		sc.m = map[cacheKey]*cacheEntry{}
	}
	// Algorithms may keep p.Counts; hand them a copy the caller cannot change.
	if p.Counts != nil {
		p.Counts = slices.Clone(p.Counts)
	}
	e := &cacheEntry{sched: a.Build(p)}
	if p.Counts != nil && !k.uniform {
		e.counts = p.Counts
	}
	sc.m[k] = e
	return e.sched
}

// uniformCounts returns p copies of n without allocating when the last
// call asked for the same.
func (sc *scheduleCache) uniformCounts(p, n int) []int {
	sc.countsMu.Lock()
	defer sc.countsMu.Unlock()
	if len(sc.counts) != p || (p > 0 && sc.counts[0] != n) {
		sc.counts = make([]int, p)
		for i := range sc.counts {
			sc.counts[i] = n
		}
	}
	return sc.counts
}

func isUniform(counts []int) bool {
	for _, n := range counts {
		if n != counts[0] {
			return false
		}
	}
	return true
}

// hashInts is FNV-1a over the values.
func hashInts(v []int) uint64 {
	h := uint64(14695981039346656037)
	for _, x := range v {
		for range 8 {
			h ^= uint64(x & 0xff)
			h *= 1099511628211
			x >>= 8
		}
	}
	return h
}
