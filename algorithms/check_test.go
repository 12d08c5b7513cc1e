package algorithms_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/executor/check"
)

// rankCounts is every p the check executor proves each algorithm for.
func rankCounts(short bool) []int {
	var ps []int
	for p := 1; p <= 64; p++ {
		ps = append(ps, p)
	}
	big := []int{96, 127, 128, 255, 256, 1000, 1024}
	if short {
		big = []int{96, 127, 128}
	}
	return append(ps, big...)
}

// vectorCounts returns the element counts checked at p ranks. Above 128
// ranks only two: the edge counts (0, 1, p-1, p, 1003) are proven at every
// p up to 128, and the largest rank counts are there for the schedules'
// shape at scale, where each count costs seconds.
func vectorCounts(p int, rng *rand.Rand) []int {
	if p > 128 {
		return []int{p + 1, rng.IntN(4 * p * 3)}
	}
	return []int{0, 1, max(p-1, 0), p, p + 1, 1003, rng.IntN(4 * p * 3)}
}

// recvcounts returns the per-rank block sizes checked for the reduce-scatter
// and allgather family with n elements per block on average: uniform, and
// for the irregular collectives also random sizes with zeros.
func recvcounts(c algorithms.Collective, p, n int, rng *rand.Rand) [][]int {
	uniform := make([]int, p)
	for i := range uniform {
		uniform[i] = n
	}
	// MPI_Reduce_scatter shares its builders with MPI_Reduce_scatter_block,
	// which covers equal counts.
	sets := [][]int{uniform}
	if c == algorithms.ReduceScatter {
		sets = nil
	}
	if c == algorithms.ReduceScatter || c == algorithms.Allgather {
		irregular := make([]int, p)
		for i := range irregular {
			if rng.IntN(3) > 0 {
				irregular[i] = rng.IntN(2*n + 2)
			}
		}
		sets = append(sets, irregular)
	}
	return sets
}

func TestCheckEveryAlgorithm(t *testing.T) {
	for _, c := range algorithms.Collectives {
		for _, a := range algorithms.All(c) {
			if !a.IsSchedule() {
				continue // not a schedule: intranode's tests run it on real data
			}
			t.Run(c.EnvName()+"/"+a.Name, func(t *testing.T) {
				t.Parallel()
				rng := rand.New(rand.NewPCG(1, uint64(len(a.Name))))
				// Without a node map a hierarchical algorithm is the flat
				// algorithm its rule picks, proven here for every p already:
				// the short range checks the delegation (and
				// TestCheckHierarchical the algorithm, on node maps).
				short := testing.Short() || a.Name == "hierarchical"
				for _, p := range rankCounts(short) {
					for _, n := range vectorCounts(p, rng) {
						for _, params := range cases(c, p, n, rng) {
							for _, comm := range []bool{true, false} {
								if a.Commutative && !comm {
									continue
								}
								for _, inPlace := range []bool{false, true} {
									params.Commutative, params.InPlace = comm, inPlace
									if err := check.Algorithm(c, a, params); err != nil {
										t.Fatalf("%s: %v", describe(params), err)
									}
								}
							}
						}
					}
				}
			})
		}
	}
}

// cases returns the calls of collective c at p ranks with about n elements.
func cases(c algorithms.Collective, p, n int, rng *rand.Rand) []algorithms.Params {
	if c == algorithms.Allreduce {
		return []algorithms.Params{{P: p, Count: n}}
	}
	var out []algorithms.Params
	for _, counts := range recvcounts(c, p, n/max(p, 1)+n%2, rng) {
		out = append(out, algorithms.Params{P: p, Counts: counts})
	}
	return out
}

func describe(p algorithms.Params) string {
	s := fmt.Sprintf("p=%d commutative=%v inplace=%v", p.P, p.Commutative, p.InPlace)
	if p.Counts == nil {
		return s + fmt.Sprintf(" count=%d", p.Count)
	}
	if len(p.Counts) > 16 {
		return s + fmt.Sprintf(" counts=%v...", p.Counts[:16])
	}
	return s + fmt.Sprintf(" counts=%v", p.Counts)
}

// The rooted collectives the C ABI needs, proven the same way for every
// root position.
func TestCheckRooted(t *testing.T) {
	for _, c := range algorithms.Rooted {
		for _, a := range algorithms.All(c) {
			t.Run(c.String()+"/"+a.Name, func(t *testing.T) {
				t.Parallel()
				rng := rand.New(rand.NewPCG(2, 3))
				ps := rankCounts(true)
				for _, p := range ps {
					for _, root := range []int{0, p - 1, p / 2, rng.IntN(p)} {
						for _, n := range []int{0, 1, p + 1, 1003} {
							params := algorithms.Params{P: p, Root: root, Count: n}
							if c == algorithms.Gather {
								params.Count, params.Counts = 0, make([]int, p)
								for i := range params.Counts {
									params.Counts[i] = (n + i) % 5
								}
							}
							for _, comm := range []bool{true, false} {
								for _, inPlace := range []bool{false, true} {
									params.Commutative, params.InPlace = comm, inPlace
									if err := check.Algorithm(c, a, params); err != nil {
										t.Fatalf("root=%d %s: %v", root, describe(params), err)
									}
								}
							}
						}
					}
				}
			})
		}
	}
}
