package algorithms_test

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/executor/check"
	"github.com/gocoll/gocoll/schedule"
)

// nodeMap is a machine for the hierarchical algorithms' checks.
type nodeMap struct {
	name string
	m    *algorithms.NodeMap
}

// blocked returns a map with nodes of the given sizes, each node's ranks
// consecutive.
func blocked(sizes ...int) *algorithms.NodeMap {
	var nodes []int
	for j, k := range sizes {
		for range k {
			nodes = append(nodes, j)
		}
	}
	return algorithms.NodeMapOf(nodes)
}

// roundRobin returns p ranks dealt to n nodes like cards.
func roundRobin(p, n int) *algorithms.NodeMap {
	nodes := make([]int, p)
	for r := range nodes {
		nodes[r] = r % n
	}
	return algorithms.NodeMapOf(nodes)
}

// nodeMaps returns the machines every hierarchical algorithm is checked on.
func nodeMaps(short bool) []nodeMap {
	rng := rand.New(rand.NewPCG(13, 13))
	var uneven []int // 1000 ranks on nodes of 5 to 12
	for left := 1000; left > 0; {
		k := min(left, 5+rng.IntN(8))
		uneven = append(uneven, k)
		left -= k
	}
	shuffled := make([]int, 40) // 40 ranks on 6 nodes, placed at random
	for r := range shuffled {
		shuffled[r] = rng.IntN(6)
	}
	maps := []nodeMap{
		{"2 nodes x 2", blocked(2, 2)},
		{"4 nodes x 2", blocked(2, 2, 2, 2)},
		{"3 nodes (2,3,1)", blocked(2, 3, 1)},
		{"3 nodes (1,4,4)", blocked(1, 4, 4)},
		{"3 nodes (4,4,3)", blocked(4, 4, 3)},
		{"one node of 8", blocked(8)},
		{"64 nodes x 1", roundRobin(64, 64)},
		{"13 round-robin over 4", roundRobin(13, 4)},
		{"96 round-robin over 5", roundRobin(96, 5)},
		{"40 at random over 6", algorithms.NodeMapOf(shuffled)},
		{"16 nodes x 8", blocked(8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8)},
	}
	if !short {
		var big []int
		for range 128 {
			big = append(big, 8)
		}
		maps = append(maps, nodeMap{"128 nodes x 8", blocked(big...)}, nodeMap{"1000 on uneven nodes", blocked(uneven...)})
	}
	return maps
}

// consecutive reports whether each node's ranks are consecutive.
func consecutive(m *algorithms.NodeMap) bool {
	for j := range m.NumNodes() {
		rs := m.Ranks(j)
		for i := 1; i < len(rs); i++ {
			if rs[i] != rs[i-1]+1 {
				return false
			}
		}
	}
	return true
}

// hierCounts returns the element counts checked at p ranks: the usual ones
// and some that put every phase beyond the flat algorithms' switch from
// latency-bound to bandwidth algorithms (1024 elements). From 500 ranks,
// where the reduce-scatter and allgather copy p pieces into or out of the
// slice layout on every rank (a million steps to check), fewer.
func hierCounts(p int, rng *rand.Rand) []int {
	if p >= 500 {
		return []int{p + 1, 2*1025*p/3 + 7 + rng.IntN(p)}
	}
	return append(vectorCounts(p, rng), 2*1025*p/3+7, 5000+rng.IntN(3000))
}

// Every hierarchical algorithm, proven on every node map: commutative and
// not, in place and not. Where a non-commutative op cannot be combined in
// rank order (a node's ranks not consecutive), Check must say so instead.
func TestCheckHierarchical(t *testing.T) {
	for _, c := range algorithms.Collectives {
		a, err := algorithms.Lookup(c, "hierarchical")
		if err != nil {
			t.Fatal(err)
		}
		for _, nm := range nodeMaps(testing.Short()) {
			t.Run(c.EnvName()+"/"+nm.name, func(t *testing.T) {
				t.Parallel()
				p := nm.m.P()
				rng := rand.New(rand.NewPCG(uint64(p), uint64(c)))
				for _, n := range hierCounts(p, rng) {
					for _, params := range cases(c, p, n, rng) {
						params.Nodes = nm.m
						for _, comm := range []bool{true, false} {
							for _, inPlace := range []bool{false, true} {
								params.Commutative, params.InPlace = comm, inPlace
								err := check.Algorithm(c, a, params)
								refused := c.Reduces() && !comm && nm.m.NumNodes() > 1 && nm.m.MaxPerNode() > 1 && !consecutive(nm.m)
								switch {
								case refused && (err == nil || !strings.Contains(err.Error(), "commutative")):
									t.Fatalf("%s: got %v, want Check to refuse a non-commutative op", describe(params), err)
								case !refused && err != nil:
									t.Fatalf("%s: %v", describe(params), err)
								case refused && params.Total() > 0:
									// The restriction is needed: built anyway,
									// the schedule combines out of rank order.
									if err := check.Run(c, params, a.Build); err == nil || !strings.Contains(err.Error(), "rank order") {
										t.Fatalf("%s: refused, but built anyway the check says %v", describe(params), err)
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

// hierMutate builds the hierarchical schedule of every rank and lets f
// damage rank 1's.
func hierMutate(c algorithms.Collective, f func(s *schedule.Schedule)) func(algorithms.Params) *schedule.Schedule {
	a, _ := algorithms.Lookup(c, "hierarchical")
	return func(p algorithms.Params) *schedule.Schedule {
		s := a.Build(p)
		if p.Rank == 1 {
			f(s)
		}
		return s
	}
}

// The check executor catches a broken hierarchical schedule: phases out of
// step, a peer misnumbered, a non-commutative reduce out of rank order, a
// hand-out lost.
func TestCheckRejectsBrokenHierarchical(t *testing.T) {
	m := blocked(2, 2, 2)
	ar := algorithms.Params{P: 6, Count: 12, Nodes: m}
	rs := algorithms.Params{P: 6, Counts: []int{1, 2, 3, 0, 2, 1}, Commutative: true, Nodes: m}
	cases := []struct {
		name   string
		c      algorithms.Collective
		params algorithms.Params
		damage func(s *schedule.Schedule)
		want   string
	}{
		{"a phase one round late", algorithms.Allreduce, ar, func(s *schedule.Schedule) {
			s.Rounds = append([]schedule.Round{{}}, s.Rounds...)
		}, "receive"},
		{"inter-node peer misnumbered", algorithms.Allreduce, ar, func(s *schedule.Schedule) {
			for i := range s.Rounds {
				for j := range s.Rounds[i].Sends {
					if x := &s.Rounds[i].Sends[j]; m.Node(x.Peer) != m.Node(1) {
						x.Peer = (x.Peer + 1) % 6 // the neighbour of the right rank
						return
					}
				}
			}
		}, "receive"},
		{"reduce out of rank order", algorithms.Allreduce, ar, func(s *schedule.Schedule) {
			for i := range s.Rounds {
				for j := range s.Rounds[i].Steps {
					if st := &s.Rounds[i].Steps[j]; st.Kind == schedule.Reduce {
						st.A, st.B = st.B, st.A
						return
					}
				}
			}
		}, "in rank order"},
		{"hand-out lost", algorithms.ReduceScatter, rs, func(s *schedule.Schedule) {
			last := &s.Rounds[len(s.Rounds)-1]
			last.Steps, last.Recvs = nil, nil
		}, "does not receive"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := check.Run(tc.c, tc.params, hierMutate(tc.c, tc.damage))
			if err == nil {
				t.Fatal("broken schedule passed the check")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not mention %q", err, tc.want)
			}
		})
	}
}

// AtSize is the hierarchical algorithm with its phases fixed to a call's:
// at that call it builds exactly what the algorithm builds, on every rank;
// it is one pointer per choice of phases (the three bands of sizes: all
// phases small, the inter-node phase only, none), not size-dependent
// itself, and its schedules at another count keep their phases.
func TestAtSize(t *testing.T) {
	maps := []nodeMap{
		{"4 nodes x 8", blocked(8, 8, 8, 8)},
		{"3 nodes (4,4,3)", blocked(4, 4, 3)},
		{"round-robin 12 on 3", roundRobin(12, 3)},
		{"one node of 8", blocked(8)},
	}
	for _, c := range algorithms.Collectives {
		a, _ := algorithms.Lookup(c, "hierarchical")
		if !a.SizeDependent || a.AtSize == nil {
			t.Fatalf("%v hierarchical: SizeDependent %v, AtSize set %v", c, a.SizeDependent, a.AtSize != nil)
		}
		for _, nm := range maps {
			p := nm.m.P()
			seen := map[*algorithms.Algorithm]int{}
			// Totals around the switches: 1024 elements (the intra-node
			// phases) and 1024 a slice (the inter-node phase).
			for _, per := range []int{1, 1024 / p, 1024/p + 1, 200, 1024, 5000} {
				base := algorithms.Params{P: p, Commutative: true, Nodes: nm.m}
				if c == algorithms.Allreduce {
					base.Count = per * p
				} else {
					base.Counts = make([]int, p)
					for i := range base.Counts {
						base.Counts[i] = per
					}
				}
				f := a.AtSize(base)
				if f.SizeDependent || f.ID() != -1 || f.Name != a.Name || f.Collective != c {
					t.Fatalf("%v %s: AtSize gives %s of %v, SizeDependent %v, ID %d", c, nm.name, f.Name, f.Collective, f.SizeDependent, f.ID())
				}
				seen[f]++
				for r := range p {
					q := base
					q.Rank = r
					if got, want := f.Build(q), a.Build(q); !reflect.DeepEqual(got, want) {
						t.Fatalf("%v %s %d a rank: rank %d's schedule with its phases fixed differs", c, nm.name, per, r)
					}
				}
			}
			want := 3
			if nm.m.OneNode() {
				want = 2 // nothing to compose: the flat algorithm's two sizes
			}
			if len(seen) != want {
				t.Errorf("%v %s: %d fixed-phase algorithms over the sizes, want %d", c, nm.name, len(seen), want)
			}
		}
	}
}
