package main

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/executor/model"
	"github.com/gocoll/gocoll/ops"
	"github.com/gocoll/gocoll/schedule"
	"github.com/gocoll/gocoll/tuner"
)

// The cluster mode prints the model beside what it measured: every
// configuration's price by executor/model on the emulated node map with
// the machine gocoll-tune fitted on the same cluster in the same run (for
// auto and auto-tuned, the price of the algorithm each one's tuner
// chooses for that call), and measured/model; at the end, the model's
// error at 64 KiB and up against the 25% the issue holds it to.

// modelFunc gives the model's time (µs) of a configuration at a size of
// the table, and for auto and auto-tuned the algorithm it stands for; ok
// false: none.
type modelFunc func(config string, k key) (us float64, chose string, ok bool)

// predictor prices collbench's calls on the emulated cluster.
type predictor struct {
	machine model.Machine
	nodes   *algorithms.NodeMap
	tuners  map[string]*tuner.Tuner // by configuration: the tuner its runs build (the same environment)
	cache   map[predKey]prediction
}

type predKey struct {
	config string
	k      key
}

type prediction struct {
	us    float64
	chose string
	ok    bool
}

func newPredictor(m model.Machine, nodes *algorithms.NodeMap, tuners map[string]*tuner.Tuner) *predictor {
	return &predictor{machine: m, nodes: nodes, tuners: tuners, cache: map[predKey]prediction{}}
}

// pricing returns the modelFunc of the calls of rs, once measured: their
// shapes depend on how collbench measured (datatype, size per rank or
// total), which its output says.
func (pr *predictor) pricing(rs *runs) modelFunc {
	return func(config string, k key) (float64, string, bool) {
		return pr.price(rs.first.heads[k.coll], config, k)
	}
}

// price returns the model's time (µs) of configuration config at k,
// measured as h says, and for a configuration the tuner decides (auto,
// auto-tuned) the algorithm its tuner chooses.
func (pr *predictor) price(h head, config string, k key) (float64, string, bool) {
	pk := predKey{config, k}
	if p, ok := pr.cache[pk]; ok {
		return p.us, p.chose, p.ok
	}
	var p prediction
	if coll, q, e, err := pr.call(h, k); err == nil {
		name := config
		if t, ok := pr.tuners[config]; ok {
			ch, err := t.Choose(q)
			if err == nil && ch.Alg != nil {
				name, p.chose = ch.Alg.Name, ch.Alg.Name
			}
		}
		if a, err := algorithms.Lookup(coll, name); err == nil {
			m := pr.machine
			if a.SizeDependent { // hierarchical: its shm form on host memory, as the tuner prices it
				m = m.ShmForm()
			}
			t := model.Algorithm(a, q.Params, e, m).Time
			p.us, p.ok = t*1e6, !math.IsInf(t, 0)
		}
	}
	pr.cache[pk] = p
	return p.us, p.chose, p.ok
}

// call is the call collbench makes at k (measured as h says) on the
// cluster's ranks, as the tuner sees it, and its element size.
func (pr *predictor) call(h head, k key) (algorithms.Collective, tuner.Query, int, error) {
	coll, err := collectiveOf(k.coll)
	if err != nil {
		return 0, tuner.Query{}, 0, err
	}
	e, ok := typeSize(h.dtype)
	if !ok {
		return 0, tuner.Query{}, 0, fmt.Errorf("unknown datatype %s", h.dtype)
	}
	p := pr.nodes.P()
	n := int(k.bytes) / e // collbench's line says the bytes of whole elements
	params := algorithms.Params{P: p, Commutative: true, Nodes: pr.nodes, SharedMemory: pr.nodes.OneNode()}
	switch coll {
	case algorithms.Allreduce:
		params.Count = n
	case algorithms.ReduceScatter: // recvcounts as even as can be, the first n % p one more
		params.Counts = schedule.EvenBlocks(n, p).Counts
	default: // reduce_scatter_block, and allgather's output: p blocks
		if coll == algorithms.Allgather && h.size == "per-rank" {
			n *= p
		}
		params.Counts = make([]int, p)
		for r := range p {
			params.Counts[r] = n / p
		}
	}
	q := tuner.Query{Collective: coll, Bytes: int64(params.Total() * e), Params: params}
	return coll, q, e, nil
}

// typeSize is the size of an element of the datatype collbench names
// (-d), from ops' table of the predefined datatypes.
func typeSize(name string) (int, bool) {
	for _, t := range ops.Types() {
		if t.String() == name {
			return t.Size(), true
		}
	}
	return 0, false
}

// modelTable prints, per collective of rs, the model's time of every
// configuration at every size and measured/model (auto and auto-tuned:
// priced as the algorithm each chose, which the first columns name).
func modelTable(w io.Writer, rs *runs, price modelFunc) {
	autos := autosOf(rs.configs)
	for _, coll := range rs.first.colls {
		fmt.Fprintf(w, "%s, the model: each configuration's price on the fitted machine (%s: of the algorithm the tuner chose), µs, and measured/model\n", rs.first.heads[coll].call, strings.Join(autos, ", "))
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprint(tw, "bytes\t")
		for _, a := range autos {
			fmt.Fprintf(tw, "%s chose\t", a)
		}
		for _, c := range rs.configs {
			fmt.Fprintf(tw, "%s\t/model\t", c)
		}
		fmt.Fprintln(tw)
		for _, b := range rs.keys(coll) {
			k := key{coll, b}
			fmt.Fprintf(tw, "%d\t", b)
			for _, a := range autos {
				_, chose, _ := price(a, k)
				if chose == "" {
					chose = "-"
				}
				fmt.Fprintf(tw, "%s\t", chose)
			}
			for _, c := range rs.configs {
				m, _, ok := price(c, k)
				t, ok2 := rs.best(c, k)
				fmt.Fprintf(tw, "%s\t%s\t", num(m, ok), num(t/m, ok && ok2 && m > 0))
			}
			fmt.Fprintln(tw)
		}
		tw.Flush()
		fmt.Fprintln(w)
	}
}

// modelError is the model's error at one configuration and size.
type modelError struct {
	config string
	k      key
	ratio  float64 // measured/model
}

// modelErrors returns measured/model of every configuration at every size
// of at least min bytes (the size of the table: per rank for a per-rank
// allgather).
func modelErrors(rs *runs, price modelFunc, min int64) []modelError {
	var out []modelError
	for _, coll := range rs.first.colls {
		for _, b := range rs.keys(coll) {
			if b < min {
				continue
			}
			k := key{coll, b}
			for _, c := range rs.configs {
				m, _, ok := price(c, k)
				t, ok2 := rs.best(c, k)
				if ok && ok2 && m > 0 {
					out = append(out, modelError{c, k, t / m})
				}
			}
		}
	}
	return out
}

// modelTarget is how far the model may be from measured at 64 KiB and up
// (issue 13): |measured/model - 1| <= 25%.
const (
	modelTarget    = 0.25
	modelTargetMin = 64 << 10
)

// summarizeErrors prints the model's largest and median error over errs,
// the sizes of at least min bytes, against the target.
func summarizeErrors(w io.Writer, errs []modelError, min int64) {
	if len(errs) == 0 {
		fmt.Fprintf(w, "model error at >= %d bytes: no sizes measured there\n", min)
		return
	}
	dev := func(e modelError) float64 { return math.Abs(e.ratio - 1) }
	worst := slices.MaxFunc(errs, func(a, b modelError) int { return cmp.Compare(dev(a), dev(b)) })
	var devs []float64
	within := 0
	for _, e := range errs {
		devs = append(devs, dev(e))
		if dev(e) <= modelTarget {
			within++
		}
	}
	verdict := "met"
	if dev(worst) > modelTarget {
		verdict = "not met"
	}
	fmt.Fprintf(w, "model error at >= %d bytes (|measured/model - 1| over %d configurations and sizes): max %.0f%% (%s %s %d B: measured/model %.2f), median %.0f%%; %d of %d within %.0f%%: target %s\n",
		min, len(errs), 100*dev(worst), worst.k.coll, worst.config, worst.k.bytes, worst.ratio,
		100*median(devs), within, len(errs), 100*modelTarget, verdict)
}
