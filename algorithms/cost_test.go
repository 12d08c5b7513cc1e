package algorithms_test

import (
	"fmt"
	"testing"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/executor/model"
)

// textbook is the cost of an algorithm on p ranks (a power of two) and n
// bytes, as the literature states it.
type textbook struct {
	rounds        func(p int) int
	sent, reduced func(p, n int) int64
}

func lg(p int) int {
	l := 0
	for 1<<l < p {
		l++
	}
	return l
}

var (
	shareOf   = func(p, n int) int64 { return int64((p - 1) * n / p) }     // (p-1)/p n
	twoShares = func(p, n int) int64 { return int64(2 * (p - 1) * n / p) } // 2(p-1)/p n
	nLgP      = func(p, n int) int64 { return int64(n * lg(p)) }           // n lg p
	nothing   = func(p, n int) int64 { return 0 }                          //
	pMinus1   = func(p int) int { return p - 1 }                           //
	twoPm1    = func(p int) int { return 2 * (p - 1) }                     //
	twoLgP    = func(p int) int { return 2 * lg(p) }                       //
)

var textbooks = map[string]textbook{
	"MPI_Allreduce/ring":                          {twoPm1, twoShares, shareOf},
	"MPI_Allreduce/recursive_doubling":            {lg, nLgP, nLgP},
	"MPI_Allreduce/rabenseifner":                  {twoLgP, twoShares, shareOf},
	"MPI_Allgather/ring":                          {pMinus1, shareOf, nothing},
	"MPI_Allgather/recursive_doubling":            {lg, shareOf, nothing},
	"MPI_Allgather/bruck":                         {lg, shareOf, nothing},
	"MPI_Reduce_scatter_block/ring":               {pMinus1, shareOf, shareOf},
	"MPI_Reduce_scatter_block/pairwise":           {pMinus1, shareOf, shareOf},
	"MPI_Reduce_scatter_block/recursive_halving":  {lg, shareOf, shareOf},
	"MPI_Reduce_scatter_block/recursive_doubling": {lg, shareOf, shareOf},
	// The canonical ones: pairwise_tree has ring's counts; the binomial
	// reduce-scatter's rank p/2 sends the vector, then a quarter less a block.
	"MPI_Allreduce/pairwise_tree_ring":       {twoPm1, twoShares, shareOf},
	"MPI_Allreduce/reduce_bcast":             {twoLgP, nLgP, nLgP},
	"MPI_Allreduce/tree_doubling":            {lg, nLgP, nLgP},
	"MPI_Reduce_scatter_block/pairwise_tree": {pMinus1, shareOf, shareOf},
	"MPI_Reduce_scatter_block/tree_doubling": {lg, nLgP, nLgP},
	// The exchange round moves a block where bitReverse(i) != i: not at p = 2.
	"MPI_Reduce_scatter_block/recursive_doubling_exchange": {func(p int) int { return lg(p) + min(p/4, 1) }, func(p, n int) int64 { return int64((p-1)*n/p + min(p/4, 1)*n/p) }, shareOf},
	"MPI_Reduce_scatter_block/binomial":                    {twoLgP, func(p, n int) int64 { return int64(n + (p/2-1)*n/p) }, nLgP},
}

// The model executor's counts must equal the textbook's for p a power of two.
func TestCostsMatchTextbook(t *testing.T) {
	for _, c := range []algorithms.Collective{algorithms.Allreduce, algorithms.Allgather, algorithms.ReduceScatterBlock} {
		for _, a := range algorithms.All(c) {
			if !a.IsSchedule() {
				continue // not a schedule: nothing for the model to price
			}
			key := c.String() + "/" + a.Name
			tb, ok := textbooks[key]
			hier := a.Name == "hierarchical"
			if !ok && !hier {
				t.Errorf("%s: no textbook cost to compare with", key)
				continue
			}
			for _, p := range []int{2, 4, 8, 16, 64, 256, 1024} {
				n := p * 96 // bytes, divisible by p
				params := algorithms.Params{P: p, Count: n, Commutative: true}
				if c != algorithms.Allreduce {
					params.Count, params.Counts = 0, make([]int, p)
					for i := range params.Counts {
						params.Counts[i] = n / p
					}
				}
				if hier {
					// Without a node map it is the flat algorithm its
					// rule picks; TestHierarchicalCosts prices it on nodes.
					tb, ok = textbooks[c.String()+"/"+algorithms.FlatFor(c, p, n, true).Name]
				}
				got := model.Algorithm(a, params, 1, model.Machine{})
				want := fmt.Sprintf("rounds %d, sent %d, reduced %d", tb.rounds(p), tb.sent(p, n), tb.reduced(p, n))
				have := fmt.Sprintf("rounds %d, sent %d, reduced %d", got.Rounds, got.SentBytes, got.ReducedBytes)
				if have != want {
					t.Errorf("%s p=%d n=%d: model says %s, textbook %s", key, p, n, have, want)
				}
			}
		}
	}
}

// Bruck needs ceil(lg p) rounds on any p; the fold adds two rounds to
// recursive doubling and halving when p is not a power of two.
func TestCostsNonPowerOfTwo(t *testing.T) {
	for _, p := range []int{3, 5, 6, 7, 12, 100, 1000} {
		counts := make([]int, p)
		for i := range counts {
			counts[i] = 10
		}
		ag := algorithms.Params{P: p, Counts: counts}
		bruck, _ := algorithms.Lookup(algorithms.Allgather, "bruck")
		if got := model.Algorithm(bruck, ag, 1, model.Machine{}); got.Rounds != lg(p) || got.SentBytes != int64(10*(p-1)) {
			t.Errorf("bruck p=%d: %d rounds, %d bytes; want %d, %d", p, got.Rounds, got.SentBytes, lg(p), 10*(p-1))
		}
		rd, _ := algorithms.Lookup(algorithms.Allreduce, "recursive_doubling")
		if got := model.Algorithm(rd, algorithms.Params{P: p, Count: 64, Commutative: true}, 1, model.Machine{}); got.Rounds != lg(p)+1 {
			t.Errorf("recursive doubling p=%d: %d rounds, want lg p' + 2 = %d", p, got.Rounds, lg(p)+1)
		}
	}
}

// The model's times order algorithms the way the alpha-beta model says:
// recursive doubling wins tiny messages, ring and Rabenseifner large ones.
func TestModelOrdersAlgorithms(t *testing.T) {
	m := model.Machine{Alpha: 2e-6, Beta: 1e-10, Gamma: 1e-10}
	at := func(name string, p, n int) float64 {
		a, _ := algorithms.Lookup(algorithms.Allreduce, name)
		return model.Algorithm(a, algorithms.Params{P: p, Count: n, Commutative: true}, 1, m).Time
	}
	if at("recursive_doubling", 64, 8) >= at("ring", 64, 8) {
		t.Error("8 bytes on 64 ranks: ring should cost more than recursive doubling")
	}
	if at("recursive_doubling", 64, 64<<20) <= at("rabenseifner", 64, 64<<20) {
		t.Error("64 MiB on 64 ranks: recursive doubling should cost more than Rabenseifner")
	}
}

// On N nodes x k ranks (powers of two) with large messages, the
// hierarchical algorithms cost what their headers say: the flat algorithms'
// textbook costs on k ranks with n elements and on N ranks with n/k, added
// up. Each rank's messages to other nodes carry 1/k of what a flat
// algorithm's would: 2(N-1)/N n/k for the allreduce, (N-1)/N n/k for the
// others.
func TestHierarchicalCosts(t *testing.T) {
	for _, nk := range [][2]int{{2, 2}, {4, 2}, {2, 4}, {8, 8}, {16, 4}, {128, 8}} {
		N, k := nk[0], nk[1]
		p, n := N*k, 2048*N*k // bytes: every phase beyond the switch to bandwidth algorithms
		nodes := make([]int, p)
		for r := range nodes {
			nodes[r] = r / k
		}
		m := algorithms.NodeMapOf(nodes)
		intra := func(f func(p, n int) int64) int64 { return f(k, n) }
		inter := func(f func(p, n int) int64) int64 { return f(N, n/k) }
		for _, c := range []algorithms.Collective{algorithms.Allreduce, algorithms.ReduceScatterBlock, algorithms.Allgather} {
			a, _ := algorithms.Lookup(c, "hierarchical")
			params := algorithms.Params{P: p, Count: n, Commutative: true, Nodes: m}
			var rounds int
			var sent, reduced, network int64
			switch c {
			case algorithms.Allreduce: // ring reduce-scatter, Rabenseifner, ring allgather
				rounds = 2*(k-1) + 2*lg(N)
				sent = 2*intra(shareOf) + inter(twoShares)
				reduced = intra(shareOf) + inter(shareOf)
				network = inter(twoShares)
			case algorithms.ReduceScatterBlock: // ring, ring
				params.Count, params.Counts = 0, make([]int, p)
				for i := range params.Counts {
					params.Counts[i] = n / p
				}
				rounds = k - 1 + N - 1
				sent = intra(shareOf) + inter(shareOf)
				reduced, network = sent, inter(shareOf)
			case algorithms.Allgather: // ring, ring
				params.Count, params.Counts = 0, make([]int, p)
				for i := range params.Counts {
					params.Counts[i] = n / p
				}
				rounds = N - 1 + k - 1
				sent = intra(shareOf) + inter(shareOf)
				network = inter(shareOf)
			}
			got := model.Algorithm(a, params, 1, model.Machine{})
			want := fmt.Sprintf("rounds %d, sent %d, reduced %d", rounds, sent, reduced)
			if have := fmt.Sprintf("rounds %d, sent %d, reduced %d", got.Rounds, got.SentBytes, got.ReducedBytes); have != want {
				t.Errorf("%s on %s, n=%d: model says %s, textbook %s", c, m, n, have, want)
			}
			// Bytes each rank sends to other nodes.
			for r := range p {
				params.Rank = r
				var off int64
				for _, rd := range a.Build(params).Rounds {
					for _, x := range rd.Sends {
						if m.Node(x.Peer) != m.Node(r) {
							off += int64(x.Range.Len)
						}
					}
				}
				if off != network {
					t.Errorf("%s on %s, n=%d: rank %d sends %d bytes to other nodes, want %d", c, m, n, r, off, network)
					break
				}
			}
		}
	}
}
