// Command gocoll-bench is an nccl-tests-style sweep of gocoll's
// collectives: for each collective, datatype and algorithm (or auto), and
// each size from -b to -e bytes, it runs warm-up and timed calls and
// reports the time per call (min, median and max over repetitions), the
// algorithm and bus bandwidths, and optionally checks every result.
//
//	gocollrun -n 4 gocoll-bench [-c allreduce,...] [-a auto|all|ring,...] [-b 8] [-e 64M]
//	          [-d float32,...] [-barrier] [-per-rank] [-check] [-csv f.csv] [-json f.json] [-plot prefix]
//	gocoll-bench -local 4 ...   (ranks as goroutines, no launcher)
//	gocoll-bench -replot results/sweep-np2.csv -plot results/sweep   (draw again, measure nothing)
//
// By default the calls run back to back and the time is the slowest
// rank's mean (nccl-tests); with -barrier a barrier precedes every call,
// only the call is timed, and the time is each rank's mean averaged over
// the ranks (the MPI micro-benchmark suites). A size is the whole vector
// (allreduce, reduce-scatter) or the whole output (allgather), or with
// -per-rank, for allgather, what each rank sends. MPI_Reduce_scatter
// (reduce_scatter) splits the vector with recvcounts as evenly as it can,
// the first n%p ranks one element more. Bandwidths follow nccl-tests:
// algbw = whole bytes / time; busbw = algbw x 2(p-1)/p for allreduce and
// (p-1)/p for reduce-scatter and allgather. Rank 0's table, CSV, JSON and
// plots (plot.go) are headed by the command, the commit and the machine
// (internal/provenance).
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"github.com/gocoll/gocoll/internal/cmdhelp"
	"io"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/internal/provenance"
	"github.com/gocoll/gocoll/internal/units"
	"github.com/gocoll/gocoll/mpi"
)

// Result is one line of the sweep.
type Result struct {
	Collective string  `json:"collective"`
	Algorithm  string  `json:"algorithm"`
	Datatype   string  `json:"datatype"`
	Ranks      int     `json:"ranks"`
	Bytes      int64   `json:"bytes"`
	MinUs      float64 `json:"min_us"`
	MedianUs   float64 `json:"median_us"`
	MaxUs      float64 `json:"max_us"`
	AlgBW      float64 `json:"algbw_gbs"`
	BusBW      float64 `json:"busbw_gbs"`
	Check      string  `json:"check,omitempty"`
	Size       string  `json:"size"`    // what Bytes is: total, or per-rank (allgather with -per-rank)
	Barrier    bool    `json:"barrier"` // a barrier before every call; the time averaged over ranks
}

type options struct {
	colls, algs, types []string
	minB, maxB         int64
	factor             int
	warmup, iters      int
	reps               int
	check              bool
	barrier, perRank   bool
	csv, json, plot    string
	cpuprofile         string
	local              bool // ranks are goroutines (-local)
}

func main() {
	var o options
	colls := flag.String("c", "allreduce,reduce_scatter_block,allgather", "collectives: allreduce, reduce_scatter, reduce_scatter_block, allgather")
	algs := flag.String("a", "auto", "algorithms: auto, all, or names (each collective uses those it has)")
	types := flag.String("d", "float32", "datatypes: "+strings.Join(datatypes, ", ")+" (byte is uint8, MPI_CHAR's size)")
	minB := flag.String("b", "8", "smallest message (bytes; K, M, G suffixes)")
	maxB := flag.String("e", "64M", "largest message")
	flag.IntVar(&o.factor, "f", 2, "size factor between steps")
	flag.IntVar(&o.warmup, "w", 5, "warm-up calls per size")
	flag.IntVar(&o.iters, "n", 20, "timed calls per repetition (fewer for large messages)")
	flag.IntVar(&o.reps, "r", 5, "repetitions (min, median and max are reported)")
	flag.BoolVar(&o.check, "check", false, "check every result")
	flag.BoolVar(&o.barrier, "barrier", false, "a barrier before every call, only the call timed, the time averaged over ranks (as the MPI suites); default back to back, the slowest rank")
	flag.BoolVar(&o.perRank, "per-rank", false, "allgather sizes are what each rank sends (as the MPI suites); default the whole output")
	flag.StringVar(&o.csv, "csv", "", "write the results as CSV (headed by # lines: the command, commit and machine)")
	flag.StringVar(&o.json, "json", "", "write the results as JSON: {\"provenance\": {...}, \"results\": [...]}")
	flag.StringVar(&o.plot, "plot", "", "write a plot per collective: PREFIX-COLLECTIVE-TYPE.svg (or .png with -plot x.png)")
	replotCSV := flag.String("replot", "", "measure nothing: draw -plot's plots from this CSV (one -csv wrote)")
	flag.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile per rank: FILE.RANK")
	local := flag.Int("local", 0, "run N ranks as goroutines of this process instead of under a launcher")
	cmdhelp.Help{Name: "gocoll-bench", Summary: "sweep gocoll's collectives over sizes, datatypes and algorithms (nccl-tests style)", Usage: []string{"gocollrun -n N gocoll-bench [-c allreduce,...] [-a auto|all|ring,...] [-b 8] [-e 64M] [flags]", "gocoll-bench -local N [flags]   (ranks as goroutines, no launcher)", "gocoll-bench -replot FILE.csv -plot PREFIX   (draw again from a CSV, measure nothing)"}, About: `For each collective, datatype and algorithm (or auto), and each size from
-b to -e bytes, runs warm-up and timed calls and reports the time per call
(min, median and max over repetitions), the algorithm and bus bandwidths
(as nccl-tests computes them), and with -check checks every result. By
default the calls run back to back and the time is the slowest rank's
mean; with -barrier a barrier precedes every call and the time is each
rank's mean averaged over the ranks (the MPI micro-benchmark suites).`}.Set(flag.CommandLine, os.Args[1:])
	flag.Parse()
	if *replotCSV != "" {
		if err := replot(*replotCSV, o.plot); err != nil {
			fmt.Fprintln(os.Stderr, "gocoll-bench:", err)
			os.Exit(1)
		}
		return
	}
	o.colls, o.algs, o.types = split(*colls), split(*algs), split(*types)
	var err error
	if o.minB, err = units.ParseBytes(*minB); err == nil {
		o.maxB, err = units.ParseBytes(*maxB)
	}
	if err == nil && (o.factor < 2 || o.minB < 1 || o.maxB < o.minB) {
		err = errors.New("need 1 <= -b <= -e and -f >= 2")
	}
	o.local = *local > 0
	if err == nil {
		if *local > 0 {
			err = mpi.RunLocal(*local, func(c *mpi.Comm) error { return sweep(c, o) })
		} else {
			var c *mpi.Comm
			if c, err = mpi.Init(); err == nil {
				err = errors.Join(sweep(c, o), mpi.Finalize())
			}
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gocoll-bench:", err)
		os.Exit(1)
	}
}

func split(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// collectiveByName maps the -c names.
func collectiveByName(name string) (algorithms.Collective, error) {
	for _, c := range algorithms.Collectives {
		if strings.EqualFold(c.EnvName(), name) {
			return c, nil
		}
	}
	return 0, fmt.Errorf("unknown collective %q", name)
}

// sweep runs every measurement; rank 0 prints and writes the outputs.
func sweep(c *mpi.Comm, o options) error {
	if o.cpuprofile != "" {
		f, err := os.Create(fmt.Sprintf("%s.%d", o.cpuprofile, c.Rank()))
		if err != nil {
			return err
		}
		pprof.StartCPUProfile(f)
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	var results []Result
	type job struct {
		coll     algorithms.Collective
		alg, typ string
	}
	var jobs []job
	for _, name := range o.colls {
		coll, err := collectiveByName(name)
		if err != nil {
			return err
		}
		for _, typ := range o.types {
			for _, alg := range algorithmsFor(coll, o.algs) {
				jobs = append(jobs, job{coll, alg, typ})
			}
		}
	}
	steps := 0
	for b := o.minB; b <= o.maxB; b *= int64(o.factor) {
		steps++
	}
	done := 0
	for _, j := range jobs {
		for b := o.minB; b <= o.maxB; b *= int64(o.factor) {
			if c.Rank() == 0 {
				done++
				fmt.Fprintf(os.Stderr, "\r[%d/%d] %s %s %s %d B          ", done, len(jobs)*steps, j.coll, j.alg, j.typ, b)
			}
			r, err := measure(c, j.coll, j.alg, j.typ, b, o)
			if err != nil {
				return fmt.Errorf("%s %s %s %d B: %w", j.coll, j.alg, j.typ, b, err)
			}
			results = append(results, r)
		}
	}
	if c.Rank() != 0 {
		return nil
	}
	fmt.Fprintln(os.Stderr)
	h := provenance.New("")
	if !o.local {
		h.Command += fmt.Sprintf(" (rank 0 of %d)", c.Size())
	}
	fmt.Print(h.Comment(), "\n")
	// The reference for busbw: one core copying the largest message, now,
	// while the other ranks wait in Finalize (or return).
	mb := min(o.maxB, 1<<30)
	fmt.Printf("memmove (one core, %d bytes): %.2f GB/s\n", mb, memmoveGBs(int(mb)))
	printPattern(os.Stdout, o)
	printTable(results)
	return writeOutputs(results, o, h)
}

// memmoveGBs is the single-core copy bandwidth for n-byte buffers: bytes
// copied per second, the best of a few repetitions, as Go's memmove
// benchmarks count it.
func memmoveGBs(n int) float64 {
	src, dst := make([]byte, n), make([]byte, n)
	for i := range src {
		src[i] = byte(i)
	}
	copy(dst, src) // fault the pages in
	best := time.Duration(1<<63 - 1)
	for range 9 {
		t0 := time.Now()
		copy(dst, src)
		best = min(best, time.Since(t0))
	}
	return float64(n) / best.Seconds() / 1e9
}

// algorithmsFor expands the -a list for one collective.
func algorithmsFor(c algorithms.Collective, want []string) []string {
	var out []string
	for _, a := range want {
		switch {
		case a == "all":
			out = append(out, algorithms.HostNames(c)...)
		case a == "auto" || slices.Contains(algorithms.Names(c), a):
			out = append(out, a)
		}
	}
	return out
}

// printPattern says how the sweep measured.
func printPattern(w io.Writer, o options) {
	if o.barrier {
		fmt.Fprintln(w, "# a barrier before every call, only the call timed; time per call: each rank's mean, averaged over ranks")
	} else {
		fmt.Fprintln(w, "# calls back to back; time per call: the slowest rank's mean")
	}
	if o.perRank {
		fmt.Fprintln(w, "# bytes: the whole vector; allgather: what each rank sends (the output is p times larger); busbw from the whole output")
	} else {
		fmt.Fprintln(w, "# bytes: the whole vector; allgather: the whole output")
	}
}

func printTable(results []Result) {
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "collective\talgorithm\ttype\tranks\tbytes\tmin µs\tmedian µs\tmax µs\talgbw GB/s\tbusbw GB/s\tcheck\t")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%.2f\t%.2f\t%.2f\t%.3f\t%.3f\t%s\t\n",
			r.Collective, r.Algorithm, r.Datatype, r.Ranks, r.Bytes, r.MinUs, r.MedianUs, r.MaxUs, r.AlgBW, r.BusBW, r.Check)
	}
	tw.Flush()
}

// output is what -json writes: the results and what made them.
type output struct {
	Provenance provenance.Header `json:"provenance"`
	Results    []Result          `json:"results"`
}

// writeOutputs writes -csv, -json and -plot's files, each headed by h.
func writeOutputs(results []Result, o options, h provenance.Header) error {
	if o.csv != "" {
		var b strings.Builder
		b.WriteString(h.Comment())
		b.WriteString("collective,algorithm,datatype,ranks,bytes,min_us,median_us,max_us,algbw_gbs,busbw_gbs,check,size,barrier\n")
		for _, r := range results {
			fmt.Fprintf(&b, "%s,%s,%s,%d,%d,%.3f,%.3f,%.3f,%.4f,%.4f,%s,%s,%t\n",
				r.Collective, r.Algorithm, r.Datatype, r.Ranks, r.Bytes, r.MinUs, r.MedianUs, r.MaxUs, r.AlgBW, r.BusBW, r.Check, r.Size, r.Barrier)
		}
		if err := os.WriteFile(o.csv, []byte(b.String()), 0o644); err != nil {
			return err
		}
	}
	if o.json != "" {
		data, _ := json.MarshalIndent(output{h, results}, "", "  ")
		if err := os.WriteFile(o.json, append(data, '\n'), 0o644); err != nil {
			return err
		}
	}
	if o.plot != "" {
		return plotResults(results, o.plot, h)
	}
	return nil
}
