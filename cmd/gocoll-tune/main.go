// Command gocoll-tune measures this machine and writes tuning rules for it
// (the GOCOLL_TUNING_FILE format).
//
//	gocollrun -n 4 gocoll-tune [-min 8] [-max 16M] [-reps 5] [-o rules.json] [-model 2,3,4,...] [-machine-only]
//
// It runs in three parts:
//
//  1. The machine of the model (package tuner/fit, which the in-job fit
//     shares; machine.go): on a job that spans several nodes, an exchange
//     of 4 B to 4 MiB between two ranks of one node fitted to node_alpha
//     and node_beta, and between two ranks of different nodes to alpha
//     and beta; the shm step (sync); the reduction kernel (float32 sum)
//     and memmove, for gamma and delta. On one node only the pair within
//     the node is measured, and the network keeps model.Default's values
//     (it says so).
//  2. Every algorithm of every collective on this job's ranks, at sizes
//     from -min to -max by factors of 4, measured in turn and repeated (the
//     median of -reps is kept), so that noise hits all alike. The fastest
//     at each size gives the rules for exactly this job's shape: its rank
//     count, node count and ranks per node. The hierarchical algorithms
//     are candidates only where the job spans several nodes of more than
//     one rank, the shm algorithms only where it has one.
//  3. For the rank counts of -model, the model executor prices every
//     algorithm with the fitted machine, on nodes of as many ranks as
//     this job has on one node, and the cheapest at each size gives the
//     rules for those shapes.
//
// Rank 0 prints what it measured and writes the machine and the rules,
// each headed by what made them (internal/provenance).
// With -machine-only it stops after part 1 and writes the machine alone
// (gocoll-compare -cluster fits the emulated cluster so).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"github.com/gocoll/gocoll/internal/cmdhelp"
	"math"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/executor/model"
	"github.com/gocoll/gocoll/internal/provenance"
	"github.com/gocoll/gocoll/internal/units"
	"github.com/gocoll/gocoll/mpi"
	"github.com/gocoll/gocoll/tuner"
)

type options struct {
	min, max    int64
	reps        int
	out         string
	model       []int
	machineOnly bool
}

func main() {
	var o options
	minS := flag.String("min", "8", "smallest message (bytes; K and M suffixes)")
	maxS := flag.String("max", "16M", "largest message")
	flag.IntVar(&o.reps, "reps", 5, "repetitions per measurement: rounds of 1000 calls up to 8 KiB (lowest kept), runs of back-to-back calls above (median kept)")
	flag.StringVar(&o.out, "o", "", "write the rules here (default: print them)")
	flag.BoolVar(&o.machineOnly, "machine-only", false, "fit the machine only and write it without rules")
	modelS := flag.String("model", "2,3,4,5,6,7,8,12,16,24,32,64,128,256,512,1024", "rank counts to extrapolate to with the model")
	cmdhelp.Help{Name: "gocoll-tune", Summary: "measure this machine and write tuning rules for it (GOCOLL_TUNING_FILE)", Usage: []string{"gocollrun -n N gocoll-tune [-min 8] [-max 16M] [-reps 5] [-o rules.json] [-model 2,3,4,...] [-machine-only]"}, About: `Fits the cost model's machine (within a node and, on several nodes,
between them), measures every algorithm of every collective on this job's
ranks from -min to -max, and prices other rank counts (-model) with the
fitted machine; rank 0 writes the machine and the rules, to be given to
jobs as GOCOLL_TUNING_FILE.`}.Set(flag.CommandLine, os.Args[1:])
	flag.Parse()
	var err error
	if o.min, err = parseSize(*minS); err == nil {
		if o.max, err = parseSize(*maxS); err == nil {
			o.model, err = parseInts(*modelS)
		}
	}
	if err == nil {
		var c *mpi.Comm
		if c, err = mpi.Init(); err == nil {
			if c.Size() < 2 {
				err = fmt.Errorf("run me on at least 2 ranks: gocollrun -n 4 gocoll-tune")
			} else {
				err = tune(c, o)
			}
			mpi.Finalize()
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gocoll-tune:", err)
		os.Exit(1)
	}
}

// parseSize reads a message size (units.ParseBytes); at least 1 byte.
func parseSize(s string) (int64, error) {
	n, err := units.ParseBytes(s)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("bad size %q", s)
	}
	return n, nil
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("bad rank count %q", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func tune(c *mpi.Comm, o options) error {
	fitted, err := measureMachine(c, o.reps)
	if err != nil {
		return err
	}
	m := tuner.MachineOf(fitted.Machine)
	file := tuner.File{Machine: &m}
	if c.Rank() == 0 {
		h := header(c.Size())
		pv := tuner.Provenance(h)
		file.Provenance = &pv
		fmt.Print(h.Comment(), "\n", fitted.Describe(), "\n")
	}
	if o.machineOnly {
		file.Rules = []tuner.Rule{}
		return writeFile(c, file, o)
	}
	sh := tuner.Shape{P: c.Size(), Nodes: fitted.Nodes.NumNodes(), PerNode: fitted.Nodes.MaxPerNode()}
	var table []measured
	for _, coll := range algorithms.Collectives {
		if coll == algorithms.ReduceScatter {
			continue // shares its algorithms with the block form, measured below
		}
		res, err := measureCollective(c, coll, sh, o)
		if err != nil {
			return err
		}
		table = append(table, res...)
		r := rulesFromWinners(coll, sh, res)
		file.Rules = append(file.Rules, r...)
		if coll == algorithms.ReduceScatterBlock {
			for _, x := range r {
				x.Collective = tuner.CollectiveName(algorithms.ReduceScatter)
				file.Rules = append(file.Rules, x)
			}
		}
	}
	if c.Rank() != 0 {
		return nil
	}
	for _, coll := range algorithms.Collectives {
		file.Rules = append(file.Rules, modelRules(coll, fitted.Machine, o, sh)...)
	}
	printTable(table)
	return writeFile(c, file, o)
}

// header is rank 0's provenance header (the launcher's command line is
// not seen by the ranks: the rank count stands for it).
func header(ranks int) provenance.Header {
	h := provenance.New("")
	h.Command += fmt.Sprintf(" (rank 0 of %d)", ranks)
	return h
}

// writeFile writes the tuning file (rank 0) to -o or stdout.
func writeFile(c *mpi.Comm, file tuner.File, o options) error {
	if c.Rank() != 0 {
		return nil
	}
	data, _ := json.MarshalIndent(file, "", "  ")
	data = append(data, '\n')
	if o.out == "" {
		os.Stdout.Write(data)
		return nil
	}
	return os.WriteFile(o.out, data, 0o644)
}

func printTable(table []measured) {
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "collective\tranks\tbytes\tfastest\ttimes (µs, median)")
	for _, r := range table {
		var parts []string
		for _, a := range r.algs {
			parts = append(parts, fmt.Sprintf("%s %.2f", a, r.us[a]))
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\n", r.coll, r.p, r.bytes, r.best, strings.Join(parts, ", "))
	}
	tw.Flush()
	fmt.Println()
}

// modelRules prices every algorithm with the fitted machine for the
// rank counts of -model (other than the measured shape's), each on nodes
// of as many consecutive ranks as the measured job has on one node (the
// last node short where that does not divide it), and returns the
// cheapest per size as rules for that shape.
func modelRules(coll algorithms.Collective, m model.Machine, o options, job tuner.Shape) []tuner.Rule {
	var rules []tuner.Rule
	for _, p := range o.model {
		if p == job.P {
			continue
		}
		nodes := algorithms.BlockNodeMap(p, job.PerNode)
		sh := tuner.Shape{P: p, Nodes: nodes.NumNodes(), PerNode: nodes.MaxPerNode()}
		var res []measured
		for b := o.min; b <= o.max; b *= 4 {
			r := measured{coll: coll.String(), p: p, bytes: b, us: map[string]float64{}}
			params := paramsFor(coll, p, b)
			params.Nodes, params.SharedMemory = nodes, sh.Nodes == 1
			for _, a := range algorithms.All(coll) {
				if !candidate(a, sh) {
					continue
				}
				cost := model.Algorithm(a, params, 4, m)
				if math.IsInf(cost.Time, 1) {
					continue // cannot run this call
				}
				r.algs = append(r.algs, a.Name)
				r.us[a.Name] = cost.Time * 1e6
				if r.best == "" || r.us[a.Name] < r.us[r.best] {
					r.best = a.Name
				}
			}
			res = append(res, r)
		}
		rules = append(rules, rulesFromWinners(coll, sh, res)...)
	}
	return rules
}

// paramsFor is a call of b bytes of float32 on p ranks.
func paramsFor(coll algorithms.Collective, p int, b int64) algorithms.Params {
	n := max(int(b/4)/p, 1) * p
	params := algorithms.Params{P: p, Commutative: true}
	if coll == algorithms.Allreduce {
		params.Count = n
		return params
	}
	params.Counts = make([]int, p)
	for i := range params.Counts {
		params.Counts[i] = n / p
	}
	return params
}
