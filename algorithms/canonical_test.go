package algorithms_test

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/executor/check"
	"github.com/gocoll/gocoll/executor/host"
	"github.com/gocoll/gocoll/ops"
	"github.com/gocoll/gocoll/transport"
	"github.com/gocoll/gocoll/transport/inproc"
)

// reducing returns the collectives whose algorithms say whether they are
// canonical.
func reducing() []algorithms.Collective {
	return []algorithms.Collective{algorithms.Allreduce, algorithms.ReduceScatter, algorithms.ReduceScatterBlock, algorithms.Reduce}
}

// canonicalCases returns the calls checked at p ranks: counts around the
// block and segment boundaries, uneven recvcounts with zeros.
func canonicalCases(c algorithms.Collective, p int, rng *rand.Rand) []algorithms.Params {
	var out []algorithms.Params
	for _, n := range []int{0, 1, p - 1, p, p + 1, 2*p + 1, 1003} {
		switch c {
		case algorithms.Allreduce, algorithms.Reduce:
			out = append(out, algorithms.Params{P: p, Count: n, Root: n % p})
		default:
			for _, counts := range recvcounts(c, p, n/p+n%2, rng) {
				out = append(out, algorithms.Params{P: p, Counts: counts})
			}
		}
	}
	return out
}

// Every schedule algorithm that says it computes the canonical association
// T(0, p) does, and one that does not say so does not (at a count where
// every rank combines something): Canonical is exactly what the check
// proves.
func TestCanonicalEveryAlgorithm(t *testing.T) {
	for _, c := range reducing() {
		for _, a := range algorithms.All(c) {
			if !a.IsSchedule() {
				continue
			}
			t.Run(c.EnvName()+"/"+a.Name, func(t *testing.T) {
				t.Parallel()
				rng := rand.New(rand.NewPCG(3, uint64(len(a.Name))))
				for p := 1; p <= 64; p++ {
					for _, params := range canonicalCases(c, p, rng) {
						for _, inPlace := range []bool{false, true} {
							params.Commutative, params.InPlace, params.Reproducible = true, inPlace, true
							if !a.Reproducible(params) {
								continue
							}
							if err := check.Canonical(a, params); err != nil {
								t.Fatalf("%s: %v", describe(params), err)
							}
						}
					}
					// Tight: where it does not say so, it does not.
					params := algorithms.Params{P: p, Count: 2*p + 1, Commutative: true, Reproducible: true}
					if c != algorithms.Allreduce && c != algorithms.Reduce {
						params.Count, params.Counts = 0, make([]int, p)
						for i := range params.Counts {
							params.Counts[i] = 2
						}
					}
					if !a.Reproducible(params) && check.Canonical(a, params) == nil {
						t.Errorf("p=%d: computes T(0,p) but does not say so", p)
					}
				}
				if testing.Short() {
					return
				}
				for _, p := range []int{96, 127, 128, 1000, 1024} {
					params := canonicalCases(c, p, rng)[5] // 2p+1 elements
					params.Commutative, params.Reproducible = true, true
					if a.Reproducible(params) {
						if err := check.Canonical(a, params); err != nil {
							t.Fatalf("%s: %v", describe(params), err)
						}
					}
				}
			})
		}
	}
}

// Every reducing collective has, at every p, a schedule algorithm that may
// run in reproducible mode.
func TestCanonicalAlgorithmAtEveryP(t *testing.T) {
	for _, c := range reducing() {
		for p := 1; p <= 1024; p++ {
			params := algorithms.Params{P: p, Count: p, Commutative: true, Reproducible: true}
			if c == algorithms.ReduceScatter || c == algorithms.ReduceScatterBlock {
				params.Count, params.Counts = 0, make([]int, p)
			}
			ok := false
			for _, a := range algorithms.All(c) {
				ok = ok || a.IsSchedule() && a.Check(params) == nil
			}
			if !ok {
				t.Errorf("%s at p=%d: no algorithm computes T(0,p)", c, p)
			}
		}
	}
}

// The hierarchical reductions in reproducible mode: canonical on nodes of
// 2^s consecutive ranks (the last possibly short), and said not to be, and
// not, on other maps.
func TestCanonicalHierarchical(t *testing.T) {
	maps := []struct {
		m    *algorithms.NodeMap
		want bool
	}{
		{algorithms.BlockNodeMap(8, 2), true},
		{algorithms.BlockNodeMap(12, 4), true},
		{algorithms.BlockNodeMap(40, 8), true},
		{algorithms.BlockNodeMap(14, 4), true}, // last node of 2
		{algorithms.BlockNodeMap(9, 3), false},
		{algorithms.NodeMapOf([]int{0, 1, 0, 1, 0, 1, 0, 1}), false},
	}
	for _, c := range []algorithms.Collective{algorithms.Allreduce, algorithms.ReduceScatter, algorithms.ReduceScatterBlock} {
		a, err := algorithms.Lookup(c, "hierarchical")
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range maps {
			p := tc.m.P()
			for _, n := range []int{1, p + 1, 3000, 40000} {
				params := algorithms.Params{P: p, Count: n, Nodes: tc.m, Commutative: true, Reproducible: true}
				if c != algorithms.Allreduce {
					params.Count, params.Counts = 0, make([]int, p)
					for i := range params.Counts {
						params.Counts[i] = n/p + i%3
					}
				}
				if got := a.Reproducible(params); got != tc.want {
					t.Errorf("%s on %s: Reproducible %v, want %v", c, tc.m, got, tc.want)
				}
				err := check.Canonical(a, params)
				if tc.want && err != nil {
					t.Errorf("%s on %s n=%d: %v", c, tc.m, n, err)
				}
				if !tc.want && err == nil && n > 1 {
					t.Errorf("%s on %s n=%d: computes T(0,p) but does not say so", c, tc.m, n)
				}
			}
		}
	}
}

// Real float64 sums through the host executor on goroutine ranks: every
// schedule algorithm that may run in reproducible mode returns, on every
// rank, the bits of T(0, p) computed directly, for data whose sums depend
// on the association (checked: a right-to-left sum differs somewhere).
func TestCanonicalRealFloat64(t *testing.T) {
	sum, _ := ops.Lookup(ops.Sum, ops.Double)
	le := binary.LittleEndian
	for _, p := range []int{3, 5, 6, 7, 8, 12, 13} {
		rng := rand.New(rand.NewPCG(uint64(p), 14))
		for _, c := range []algorithms.Collective{algorithms.Allreduce, algorithms.ReduceScatter, algorithms.ReduceScatterBlock} {
			for _, n := range []int{1, p + 1, 1003} {
				params := algorithms.Params{P: p, Count: n, Commutative: true, Reproducible: true}
				if c != algorithms.Allreduce {
					params.Count, params.Counts = 0, make([]int, p)
					for i := range params.Counts {
						params.Counts[i] = n / p
						if c == algorithms.ReduceScatter {
							params.Counts[i] = rng.IntN(2*n/p + 2)
						}
					}
				}
				total := params.Total()
				in := make([][]float64, p)
				for r := range in {
					in[r] = make([]float64, total)
					for i := range in[r] {
						in[r][i] = (rng.Float64() - 0.5) * math.Ldexp(1, rng.IntN(60)-30)
					}
				}
				var tree func(i, lo, hi int) float64
				tree = func(i, lo, hi int) float64 {
					if hi-lo == 1 {
						return in[lo][i]
					}
					m := algorithms.CanonicalSplit(lo, hi)
					return tree(i, lo, m) + tree(i, m, hi)
				}
				want := make([]float64, total)
				differs := false
				for i := range want {
					want[i] = tree(i, 0, p)
					s := 0.0
					for r := p - 1; r >= 0; r-- {
						s += in[r][i]
					}
					differs = differs || s != want[i]
				}
				if total > 100 && !differs {
					t.Fatalf("p=%d n=%d: data whose sum does not depend on the association", p, n)
				}
				for _, a := range algorithms.All(c) {
					if !a.IsSchedule() || a.Check(params) != nil {
						continue
					}
					outs := runHost(t, a, params, in, host.Kernel(sum))
					bl := params.Blocks()
					for r, got := range outs {
						lo, m := 0, total
						if c != algorithms.Allreduce {
							lo, m = bl.Displs[r], bl.Counts[r]
						}
						for i := range m {
							if g := le.Uint64(got[8*i:]); g != math.Float64bits(want[lo+i]) {
								t.Fatalf("%s %s p=%d n=%d: rank %d element %d is %v, T(0,p) is %v", c, a.Name, p, n, r, lo+i, math.Float64frombits(g), want[lo+i])
							}
						}
					}
				}
			}
		}
	}
}

// runHost runs algorithm a on goroutine ranks with float64 inputs in and
// returns each rank's output bytes.
func runHost(t *testing.T, a *algorithms.Algorithm, params algorithms.Params, in [][]float64, kernel host.Kernel) [][]byte {
	p := params.P
	eps := inproc.New(p)
	defer func() {
		for _, ep := range eps {
			ep.Close()
		}
	}()
	ranks := make([]int, p)
	for r := range ranks {
		ranks[r] = r
	}
	outs, errs := make([][]byte, p), make([]error, p)
	var wg sync.WaitGroup
	for r := range p {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pr := params
			pr.Rank = r
			s := a.Build(pr)
			src := make([]byte, 8*len(in[r]))
			for i, x := range in[r] {
				binary.LittleEndian.PutUint64(src[8*i:], math.Float64bits(x))
			}
			outs[r] = make([]byte, len(src))
			hc := &host.Call{Sched: s, In: src, Out: outs[r], Scratch: make([]byte, s.ScratchLen*8), ElemSize: 8, Reduce: kernel,
				T: eps[r], Ranks: ranks, Tag: transport.Tag{Context: 1, Seq: 1}}
			errs[r] = (&host.Executor{}).Run(hc)
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("%s %s rank %d: %v", a.Collective, a.Name, r, err)
		}
	}
	return outs
}
