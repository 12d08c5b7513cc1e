// Command gocoll-tune measures this machine and writes tuning rules for it
// (the GOCOLL_TUNING_FILE format).
//
//	gocollrun -n 4 gocoll-tune [-min 8] [-max 16M] [-reps 5] [-o rules.json] [-model 2,3,4,...]
//
// It runs in three parts:
//
//  1. The transport between rank 0 and rank 1 (shared memory on one host,
//     TCP across hosts or with GOCOLL_TRANSPORT=tcp): a ping-pong from 8 B
//     to 4 MiB, fitted to alpha (latency) + beta (seconds per byte); and the
//     reduction kernel (float32 sum) and memmove, for gamma and delta.
//  2. Every algorithm of every collective on this job's ranks, at sizes
//     from -min to -max by factors of 4, measured in turn and repeated (the
//     median of -reps is kept), so that noise hits all alike. The fastest
//     at each size gives the rules for exactly this many ranks.
//  3. For the rank counts of -model, the model executor prices every
//     schedule with the fitted alpha, beta, gamma and delta, and the
//     cheapest at each size gives the rules for those rank counts (the shm
//     algorithms, which the model cannot price, are left to the measured
//     rules and to the defaults).
//
// Rank 0 prints what it measured and writes the rules.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/executor/model"
	"github.com/gocoll/gocoll/internal/units"
	"github.com/gocoll/gocoll/mpi"
	"github.com/gocoll/gocoll/tuner"
)

type options struct {
	min, max int64
	reps     int
	out      string
	model    []int
}

func main() {
	var o options
	minS := flag.String("min", "8", "smallest message (bytes; K and M suffixes)")
	maxS := flag.String("max", "16M", "largest message")
	flag.IntVar(&o.reps, "reps", 5, "repetitions per measurement (median kept)")
	flag.StringVar(&o.out, "o", "", "write the rules here (default: print them)")
	modelS := flag.String("model", "2,3,4,5,6,7,8,12,16,24,32,64,128,256,512,1024", "rank counts to extrapolate to with the model")
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
	m, err := measureMachine(c, o)
	if err != nil {
		return err
	}
	var rules []tuner.Rule
	var table []measured
	for _, coll := range algorithms.Collectives {
		if coll == algorithms.ReduceScatter {
			continue // shares its algorithms with the block form, measured below
		}
		res, err := measureCollective(c, coll, o)
		if err != nil {
			return err
		}
		table = append(table, res...)
		r := rulesFromWinners(coll, c.Size(), c.Size(), res)
		rules = append(rules, r...)
		if coll == algorithms.ReduceScatterBlock {
			for _, x := range r {
				x.Collective = tuner.CollectiveName(algorithms.ReduceScatter)
				rules = append(rules, x)
			}
		}
	}
	for _, coll := range algorithms.Collectives {
		rules = append(rules, modelRules(coll, m, o, c.Size())...)
	}
	if c.Rank() != 0 {
		return nil
	}
	fmt.Printf("machine (rank 0 <-> rank 1, %d ranks): alpha %.2f µs, beta %.3f ns/B (%.1f GB/s), gamma %.3f ns/B (%.1f GB/s), delta %.3f ns/B (%.1f GB/s)\n\n",
		c.Size(), m.Alpha*1e6, m.Beta*1e9, 1/m.Beta/1e9, m.Gamma*1e9, 1/m.Gamma/1e9, m.Delta*1e9, 1/m.Delta/1e9)
	printTable(table)
	data, _ := json.MarshalIndent(tuner.File{Rules: rules}, "", "  ")
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

// modelRules prices every schedule algorithm with the fitted machine for
// the rank counts of -model (other than the measured one) and returns the
// cheapest per size as rules.
func modelRules(coll algorithms.Collective, m model.Machine, o options, measuredP int) []tuner.Rule {
	var rules []tuner.Rule
	for _, p := range o.model {
		if p == measuredP {
			continue
		}
		var res []measured
		for b := o.min; b <= o.max; b *= 4 {
			r := measured{coll: coll.String(), p: p, bytes: b, us: map[string]float64{}}
			for _, a := range algorithms.All(coll) {
				if a.Direct || a.Name == untuned {
					continue
				}
				params := paramsFor(coll, p, b)
				if a.Check(params) != nil {
					continue
				}
				cost := model.Algorithm(a, params, 4, m)
				r.algs = append(r.algs, a.Name)
				r.us[a.Name] = cost.Time * 1e6
				if r.best == "" || r.us[a.Name] < r.us[r.best] {
					r.best = a.Name
				}
			}
			res = append(res, r)
		}
		rules = append(rules, rulesFromWinners(coll, p, p, res)...)
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
