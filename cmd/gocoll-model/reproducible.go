package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/executor/model"
)

// reproducibleMain is `gocoll-model reproducible [-p P] [-k K]`: what
// reproducible mode costs in the model, on p ranks in nodes of k
// consecutive ranks (k = 1: one rank per node) on model.Default, 8-byte
// elements. For each reducing collective (MPI_Reduce_scatter with uneven
// blocks, 1/2, 1 and 3/2 of the mean) and size from 8 B to 256 MiB it
// prints the cheapest schedule algorithm, the cheapest that computes the
// canonical association (Params.Reproducible: those Check lets run) and
// the ratio of their prices. The shm algorithms (one node, no schedule)
// are left out: their canonical order costs the same messages.
func reproducibleMain(args []string) {
	fs := flag.NewFlagSet("reproducible", flag.ExitOnError)
	p := fs.Int("p", 1024, "ranks")
	k := fs.Int("k", 8, "ranks per node (consecutive); 1: one rank per node")
	help.Set(fs, args)
	fs.Parse(args)
	if worst := reproducibleTable(os.Stdout, *p, *k); worst > 0 {
		fmt.Printf("largest ratio: %.2f\n", worst)
	}
}

// reproducibleTable writes the table and returns its largest ratio.
func reproducibleTable(w io.Writer, p, k int) float64 {
	worst := 0.0
	for _, c := range []algorithms.Collective{algorithms.Allreduce, algorithms.ReduceScatterBlock, algorithms.ReduceScatter} {
		fmt.Fprintf(w, "%s p=%d, %d a node, model.Default\n%10s %24s %10s %24s %10s %6s\n", c, p, k, "bytes", "best", "µs", "best canonical", "µs", "ratio")
		for _, bytes := range []int{8, 64, 512, 4 << 10, 32 << 10, 256 << 10, 2 << 20, 16 << 20, 128 << 20, 256 << 20} {
			base := reproducibleCall(c, p, k, max(1, bytes/8))
			best, bestC := math.Inf(1), math.Inf(1)
			var name, nameC string
			for _, a := range algorithms.All(c) {
				if !a.IsSchedule() || a.Check(base) != nil {
					continue
				}
				t := model.Algorithm(a, base, 8, model.Default).Time
				if t < best {
					best, name = t, a.Name
				}
				rp := base
				rp.Reproducible = true
				if a.Check(rp) != nil {
					continue
				}
				if t := model.Algorithm(a, rp, 8, model.Default).Time; t < bestC {
					bestC, nameC = t, a.Name
				}
			}
			worst = max(worst, bestC/best)
			fmt.Fprintf(w, "%10d %24s %10.2f %24s %10.2f %6.2f\n", bytes, name, best*1e6, nameC, bestC*1e6, bestC/best)
		}
	}
	return worst
}

// reproducibleCall is the call priced: n elements in all.
func reproducibleCall(c algorithms.Collective, p, k, n int) algorithms.Params {
	base := algorithms.Params{P: p, Count: n, Commutative: true}
	if c != algorithms.Allreduce {
		base.Count, base.Counts = 0, make([]int, p)
		for i := range base.Counts {
			base.Counts[i] = max(1, n/p)
			if c == algorithms.ReduceScatter {
				base.Counts[i] = max(1, n/p*(1+i%3)/2)
			}
		}
	}
	if k > 1 {
		base.Nodes = algorithms.BlockNodeMap(p, min(k, p))
	}
	return base
}
