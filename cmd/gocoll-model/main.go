// Command gocoll-model asks gocoll's cost model (executor/model) about
// collectives on machines of many nodes.
//
//	gocoll-model regret [-quick] [-between] [-above] [-cpuprofile file]
//	gocoll-model reproducible [-p ranks] [-k ranks-per-node]
//
// reproducible prices reproducible mode: the cheapest algorithm that
// computes the canonical association against the cheapest of all, per
// reducing collective and size (reproducible.go).
// regret compares the built-in tuner's choices with the model's best over
// a grid of calls: p in {2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128,
// 192, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096}, 1, 8 or 64
// ranks per node (nodes of that many consecutive ranks; fewer ranks than
// that are one node, and a last node short when it does not divide p),
// sizes from 8 B to 1 GiB by factors of 4 (the whole vector of an
// allreduce or reduce-scatter, the whole output of an allgather; rounded
// to the nearest multiple of the unit count, one element per block or for
// an allreduce lcm(p, p'), p' the largest power of two <= p: the size
// column says what was priced), for the four collectives, on three
// machines (model.Default, Slow, Fast: the header names their
// parameters). The tuner of each machine is built-in rules plus that
// machine (tuner.Options.Machine, as a tuning file's "machine" gives
// it). The model's best is the cheapest of the traces the tuner prices
// with (tuner.Plans: every algorithm traced on every rank, or on one node
// for the symmetric ones; the few too long to trace are estimated from
// node 0's ranks and listed at the end), priced at the point's exact size, where
// the tuner decided at its size class's top (powers of two are tops), or
// by a rule. Each line: the point, the tuner's choice and its price, the
// model's best and its price, their ratio (-above: only the points whose
// ratio is above 1); then the largest ratio per machine, where the
// hierarchical algorithm (a candidate on more than one node of more than
// one rank) is the tuner's choice and the model's best, per machine, and
// last the largest ratio of all and where. -between adds 1.5x each size, inside the
// tuner's classes; -quick is the test's reduced grid (see Quick), which
// has them. The table is headed by the command, the commit and the
// machine (internal/provenance), as results/model-regret.txt is.
package main

import (
	"flag"
	"fmt"
	"github.com/gocoll/gocoll/internal/cmdhelp"
	"github.com/gocoll/gocoll/internal/provenance"
	"io"
	"maps"
	"math"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/envvar"
	"github.com/gocoll/gocoll/executor/model"
	"github.com/gocoll/gocoll/tuner"
)

// help is gocoll-model's --help (and its man page, tools/man.sh).
var help = cmdhelp.Help{
	Name:    "gocoll-model",
	Summary: "ask gocoll's cost model about collectives on machines of many nodes",
	Usage: []string{
		"gocoll-model regret [-quick] [-between] [-above] [-cpuprofile file]",
		"gocoll-model reproducible [-p ranks] [-k ranks-per-node]",
	},
	About: `regret compares the built-in tuner's choices with the model's best over a
grid of calls (p from 2 to 4096, 1, 8 or 64 ranks per node, 8 B to 1 GiB,
the four collectives, three machines) and prints each point's ratio, the
largest per machine and of all. reproducible prices reproducible mode:
the cheapest algorithm that computes the canonical association against
the cheapest of all, per reducing collective and size.`,
}

func main() {
	if len(os.Args) >= 2 && cmdhelp.Asked(flag.CommandLine, os.Args[1:2]) {
		help.Write(os.Stdout, nil)
		return
	}
	if len(os.Args) >= 2 && (os.Args[1] == "-version" || os.Args[1] == "--version") {
		fmt.Println(help.VersionLine())
		return
	}
	if len(os.Args) >= 2 && os.Args[1] == "reproducible" {
		reproducibleMain(os.Args[2:])
		return
	}
	if len(os.Args) < 2 || os.Args[1] != "regret" {
		help.Write(os.Stderr, nil)
		os.Exit(2)
	}
	fs := flag.NewFlagSet("regret", flag.ExitOnError)
	quick := fs.Bool("quick", false, "a reduced grid (as the test uses)")
	between := fs.Bool("between", false, "add 1.5x each size (inside the tuner's size classes)")
	above := fs.Bool("above", false, "print only the points where the tuner's choice costs more than the model's best")
	prof := fs.String("cpuprofile", "", "write a CPU profile here")
	help.Set(fs, os.Args[2:])
	fs.Parse(os.Args[2:])
	if *prof != "" {
		f, err := os.Create(*prof)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "gocoll-model:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	g := Full
	if *quick {
		g = Quick
	}
	if *between {
		g.Between = true
	}
	t0 := time.Now()
	fmt.Print(provenance.New("").Comment(), "\n") // results/model-regret.txt's head
	worst, err := Regret(os.Stdout, g, !*above)
	if err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "gocoll-model:", err)
		os.Exit(1)
	}
	fmt.Printf("max regret %.3f at %s (%d points, %.0f s)\n", worst.Ratio, worst, worst.Points, time.Since(t0).Seconds())
}

// Grid is the set of calls regret looks at.
type Grid struct {
	Ps       []int
	PerNode  []int
	MinBytes int64
	MaxBytes int64
	Factor   int64
	// Between adds, after each size b, b*3/2: sizes inside the tuner's
	// size classes (the powers of two are their tops, priced exactly).
	Between  bool
	Machines []Named
}

// Named is a machine with a name.
type Named struct {
	Name string
	M    model.Machine
}

var machines = []Named{{"default", model.Default}, {"slow", model.Slow}, {"fast", model.Fast}}

// Full is the grid of `gocoll-model regret`; Quick is the test's.
var (
	Full = Grid{
		Ps:       []int{2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096},
		PerNode:  []int{1, 8, 64},
		MinBytes: 8, MaxBytes: 1 << 30, Factor: 4,
		Machines: machines,
	}
	Quick = Grid{
		Ps:       []int{2, 3, 8, 12, 64, 96, 256},
		PerNode:  []int{1, 8, 64},
		MinBytes: 8, MaxBytes: 1 << 30, Factor: 16, Between: true,
		Machines: machines,
	}
)

// Point is one call of the grid and what the tuner and the model say.
type Point struct {
	Machine    string
	Collective algorithms.Collective
	Shape      tuner.Shape
	Bytes      int64
	Chosen     string
	ChosenT    float64
	Best       string
	BestT      float64
	Ratio      float64
	Points     int // in a result: how many points were priced
}

func (p Point) String() string {
	return fmt.Sprintf("%s %s p=%d %d/node %s: tuner %s", p.Machine, tuner.CollectiveName(p.Collective), p.Shape.P, p.Shape.PerNode, size(p.Bytes), p.Chosen)
}

// Regret prices every point of g, prints the points (all with verbose,
// else those the tuner does not get right), and returns the worst.
func Regret(w io.Writer, g Grid, verbose bool) (Point, error) {
	fmt.Fprintln(w, "machines (seconds; alpha/beta between nodes, node_alpha/node_beta within one, sync per shm step):")
	for _, m := range g.Machines {
		fmt.Fprintf(w, "  %-8s %+v\n", m.Name, tuner.MachineOf(m.M))
	}
	between := ""
	if g.Between {
		between = " and 1.5x each"
	}
	fmt.Fprintf(w, "p %v, ranks per node %v, sizes %s..%s by x%d%s\n", g.Ps, g.PerNode, size(g.MinBytes), size(g.MaxBytes), g.Factor, between)
	fmt.Fprintf(w, "%-8s %-22s %5s %5s %7s  %-20s %12s  %-20s %12s  %6s\n", "machine", "collective", "p", "/node", "bytes", "tuner", "µs", "model's best", "µs", "ratio")
	var worst Point
	n := 0
	approx := map[string][]string{}
	done := map[tuner.Shape]bool{}
	perMachine := make([]Point, len(g.Machines))
	hier := make([]hierCount, len(g.Machines))
	tuners := make([]*tuner.Tuner, len(g.Machines))
	for i, m := range g.Machines {
		mm := m.M
		tu, err := tuner.NewWithOptions(envvar.Settings{}, tuner.Options{Machine: &mm})
		if err != nil {
			return worst, err
		}
		tuners[i] = tu
	}
	for _, k := range g.PerNode {
		for _, p := range g.Ps {
			sh := shapeOf(p, k)
			if done[sh] {
				continue // fewer ranks than k: one node, as with a smaller k
			}
			done[sh] = true
			for _, c := range algorithms.Collectives {
				base := tuner.ShapeParams(c, sh, true, sh.Nodes == 1, false)
				plans := tuner.Plans(c, sh, true, sh.Nodes == 1, false)
				for _, pp := range plans {
					if pp.Approx {
						key := tuner.CollectiveName(c) + "/" + pp.Alg.Name
						approx[key] = append(approx[key], fmt.Sprintf("p=%d/%d", p, sh.PerNode))
					}
				}
				for i, m := range g.Machines {
					seen := map[int64]bool{}
					var sizes []int64
					for b := g.MinBytes; b <= g.MaxBytes; b *= g.Factor {
						sizes = append(sizes, b)
						if g.Between && b < g.MaxBytes {
							sizes = append(sizes, b*3/2)
						}
					}
					for _, b := range sizes {
						s := tuner.Scale(c, p, b)
						if seen[s] {
							continue
						}
						seen[s] = true
						bytes := int64(base.Total()) * s
						ch, err := tuners[i].Choose(tuner.Query{Collective: c, Bytes: bytes, Params: base})
						if err != nil {
							return worst, err
						}
						pt := Point{Machine: m.Name, Collective: c, Shape: sh, Bytes: bytes, Chosen: ch.Name(), ChosenT: math.Inf(1), BestT: math.Inf(1)}
						for _, pp := range plans {
							t := pp.Cost(m.M, s, true).Time
							if t < pt.BestT {
								pt.Best, pt.BestT = pp.Alg.Name, t
							}
							if pp.Alg == ch.Alg {
								pt.ChosenT = t
							}
						}
						pt.Ratio = pt.ChosenT / pt.BestT
						hier[i].add(pt)
						n++
						if pt.Ratio > worst.Ratio {
							worst = pt
						}
						if pt.Ratio > perMachine[i].Ratio {
							perMachine[i] = pt
						}
						if verbose || pt.Ratio > 1 {
							fmt.Fprintf(w, "%-8s %-22s %5d %5d %7s  %-20s %12.2f  %-20s %12.2f  %6.3f\n", m.Name, tuner.CollectiveName(c), p, sh.PerNode, size(bytes), pt.Chosen, pt.ChosenT*1e6, pt.Best, pt.BestT*1e6, pt.Ratio)
						}
					}
				}
			}
		}
	}
	worst.Points = n
	for i, m := range g.Machines {
		fmt.Fprintf(w, "max regret on %s: %.3f at %s (model's best %s)\n", m.Name, perMachine[i].Ratio, perMachine[i], perMachine[i].Best)
	}
	for i, m := range g.Machines {
		fmt.Fprintf(w, "hierarchical on %s: %s\n", m.Name, hier[i])
	}
	for _, k := range slices.Sorted(maps.Keys(approx)) {
		fmt.Fprintf(w, "estimated from node 0's schedules (too long to trace every rank; model.Approximate): %s at %s\n", k, strings.Join(approx[k], " "))
	}
	return worst, nil
}

// hierCount counts, on one machine, the points where the hierarchical
// algorithm is the tuner's choice (per collective) and the model's best.
type hierCount struct {
	chosen  map[algorithms.Collective]int
	best    int
	regret  float64 // the largest ratio where the tuner chose it
	minSize int64   // the smallest size it was chosen at
}

func (h *hierCount) add(pt Point) {
	if pt.Best == "hierarchical" {
		h.best++
	}
	if pt.Chosen != "hierarchical" {
		return
	}
	if h.chosen == nil {
		h.chosen = map[algorithms.Collective]int{}
	}
	h.chosen[pt.Collective]++
	h.regret = max(h.regret, pt.Ratio)
	if h.minSize == 0 || pt.Bytes < h.minSize {
		h.minSize = pt.Bytes
	}
}

func (h hierCount) String() string {
	n := 0
	var per []string
	for _, c := range algorithms.Collectives {
		n += h.chosen[c]
		per = append(per, fmt.Sprintf("%s %d", tuner.CollectiveName(c), h.chosen[c]))
	}
	s := fmt.Sprintf("the tuner's choice at %d points (%s), the model's best at %d", n, strings.Join(per, ", "), h.best)
	if n > 0 {
		s += fmt.Sprintf("; chosen from %s up, max regret %.3f there", size(h.minSize), h.regret)
	}
	return s
}

// shapeOf returns the shape of p ranks on nodes of k.
func shapeOf(p, k int) tuner.Shape {
	k = min(k, p)
	return tuner.Shape{P: p, Nodes: (p + k - 1) / k, PerNode: k}
}

func size(b int64) string {
	switch {
	case b >= 1<<30 && b%(1<<30) == 0:
		return fmt.Sprintf("%dG", b>>30)
	case b >= 1<<20 && b%(1<<20) == 0:
		return fmt.Sprintf("%dM", b>>20)
	case b >= 1<<10 && b%(1<<10) == 0:
		return fmt.Sprintf("%dK", b>>10)
	}
	return fmt.Sprint(b)
}
