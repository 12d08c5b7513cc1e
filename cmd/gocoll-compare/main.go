// Command gocoll-compare measures gocoll against the host MPIs with one
// benchmark program, bench/collbench.c, built three ways: with gocoll's
// mpicc (run under gocollrun), with mpicc.openmpi and with mpicc.mpich (run
// natively), and, when the preload library is built, the two host builds
// again with LD_PRELOAD=libgocoll-preload.so. collbench measures as the MPI
// suite users run first does (a barrier before every call, MPI_CHAR
// allgather sized per rank, MPI_FLOAT sums sized by the whole vector,
// MPI_Reduce_scatter with recvcounts, 1000 calls up to 8 KiB and 100
// above, the average over ranks). The configurations are run in turn,
// forwards then backwards, repetition after repetition, so that machine
// noise hits all alike; the lowest time of each configuration and size is
// kept. It prints, per rank count and collective, what was measured, the
// times and the ratios gocoll/best-host and preload/native, and draws
// the times and the ratios (plot.go). Its table, CSV and plots are headed
// by the command, the commit and the machine (internal/provenance).
//
//	gocoll-compare [-np 2,4,8] [-mpi openmpi,mpich] [-m 4:16777216] [-reps 3] [-c allreduce,...] [-d MPI_TYPE] [-total]
//	               [-iters 1000] [-iters-large 100] [-plot results/compare] [-csv out.csv]
//	gocoll-compare -cluster 4x2 [-rate 1gbit] [the same flags but -np]
//	gocoll-compare -replot results/compare-np2.csv -plot results/compare
//
// The second form (cluster.go) measures gocoll's algorithms against each
// other on an emulated cluster, and the model beside them (model.go). The
// third measures nothing: it draws the plots again from a CSV the first
// two wrote.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"github.com/gocoll/gocoll/internal/cmdhelp"
	"github.com/gocoll/gocoll/internal/provenance"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// config is one way of running the benchmark.
type config struct {
	name   string
	launch func(np int) []string // launcher argv
	binary string
	env    []string
}

type key struct {
	coll  string
	bytes int64
}

// head is what collbench says of one collective: the call, the datatype
// and whether a size is per rank or total.
type head struct {
	call, dtype, size string
}

// result is one collbench run: its pattern line, its collectives' heads
// in order, and the average per-call time of every collective and size.
type result struct {
	pattern string
	colls   []string
	heads   map[string]head
	us      map[key]float64
}

var headLine = regexp.MustCompile(`^# ([a-z_]+): (MPI_\w+), (MPI_\w+), (?:MPI_SUM, )?size (per-rank|total) `)

// parse reads collbench's output: the comment lines that say how it
// measured, and its `collective bytes avg_us min_us max_us` lines.
func parse(out []byte) (result, error) {
	r := result{heads: map[string]head{}, us: map[key]float64{}}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if p, ok := strings.CutPrefix(line, "# collbench: "); ok {
			r.pattern = p
			continue
		}
		if m := headLine.FindStringSubmatch(line); m != nil {
			r.colls = append(r.colls, m[1])
			r.heads[m[1]] = head{call: m[2], dtype: m[3], size: m[4]}
			continue
		}
		fs := strings.Fields(line)
		if len(fs) != 5 || strings.HasPrefix(line, "#") {
			continue
		}
		b, err1 := strconv.ParseInt(fs[1], 10, 64)
		us, err2 := strconv.ParseFloat(fs[2], 64)
		if _, ok := r.heads[fs[0]]; !ok || err1 != nil || err2 != nil {
			return r, fmt.Errorf("collbench printed %q, not a time line of a collective it announced", line)
		}
		r.us[key{fs[0], b}] = us
	}
	if r.pattern == "" || len(r.us) == 0 {
		return r, fmt.Errorf("no collbench header or no times in:\n%s", out)
	}
	return r, nil
}

// runs are the measurements of one rank count: the first run's headers
// (every configuration's must match them) and every configuration's
// times, all repetitions.
type runs struct {
	np      int
	reps    int
	first   result
	configs []string
	samples map[string]map[key][]float64
}

func newRuns(np, reps int, configs []config) *runs {
	rs := &runs{np: np, reps: reps, samples: map[string]map[key][]float64{}}
	for _, c := range configs {
		rs.configs = append(rs.configs, c.name)
		rs.samples[c.name] = map[key][]float64{}
	}
	return rs
}

// add records one run of config name; its headers must match the others'.
func (rs *runs) add(name string, r result) error {
	if rs.first.pattern == "" {
		rs.first = r
	} else if r.pattern != rs.first.pattern || !slices.Equal(r.colls, rs.first.colls) {
		return fmt.Errorf("%s measured differently: %q %v, the first run %q %v", name, r.pattern, r.colls, rs.first.pattern, rs.first.colls)
	} else {
		for c, h := range r.heads {
			if rs.first.heads[c] != h {
				return fmt.Errorf("%s measured %s as %v, the first run as %v", name, c, h, rs.first.heads[c])
			}
		}
	}
	for k, us := range r.us {
		rs.samples[name][k] = append(rs.samples[name][k], us)
	}
	return nil
}

// best is the lowest time of a configuration at k, and whether there is one.
func (rs *runs) best(name string, k key) (float64, bool) {
	v := rs.samples[name][k]
	if len(v) == 0 {
		return 0, false
	}
	return slices.Min(v), true
}

func median(v []float64) float64 {
	w := slices.Sorted(slices.Values(v))
	if len(w)%2 == 1 {
		return w[len(w)/2]
	}
	return (w[len(w)/2-1] + w[len(w)/2]) / 2
}

// ratio is a/b of the best times of two configurations at k; ok is false
// when one is missing.
func (rs *runs) ratio(a, b string, k key) (float64, bool) {
	x, ok1 := rs.best(a, k)
	y, ok2 := rs.best(b, k)
	return x / y, ok1 && ok2 && y > 0
}

// standalone is gocoll over the faster host MPI at k.
func (rs *runs) standalone(k key) (float64, bool) {
	return rs.overBest("gocoll", []string{"openmpi", "mpich"}, k)
}

// bestOf returns the fastest of configurations names at k, and its time.
func (rs *runs) bestOf(names []string, k key) (string, float64, bool) {
	best, t := "", 0.0
	for _, n := range names {
		if v, ok := rs.best(n, k); ok && (best == "" || v < t) {
			best, t = n, v
		}
	}
	return best, t, best != ""
}

// overBest returns configuration name's lowest time at k over the
// fastest of names there; false where either was not measured.
func (rs *runs) overBest(name string, names []string, k key) (float64, bool) {
	_, t, ok := rs.bestOf(names, k)
	v, ok2 := rs.best(name, k)
	return v / t, ok && ok2 && t > 0
}

func (rs *runs) keys(coll string) []int64 {
	seen := map[int64]bool{}
	for _, name := range rs.configs {
		for k := range rs.samples[name] {
			if k.coll == coll {
				seen[k.bytes] = true
			}
		}
	}
	return slices.Sorted(func(yield func(int64) bool) {
		for b := range seen {
			if !yield(b) {
				return
			}
		}
	})
}

// sizeWords says what a size is, in the table's words.
func sizeWords(h head) string {
	if h.size == "per-rank" {
		return "bytes per rank (what each rank sends; the result is np times larger)"
	}
	return "bytes of the whole vector"
}

// column is a table column after the configurations' times: its head
// and its cell at a size.
type column struct {
	head string
	cell func(k key) string
}

// num is a cell of a time or ratio, "-" when there is none.
func num(v float64, ok bool) string {
	if !ok {
		return "-"
	}
	return fmt.Sprintf("%.2f", v)
}

// tables prints, per collective, what was measured and a line per size:
// the lowest time of every configuration, then cols.
func tables(w io.Writer, rs *runs, over string, cols []column) {
	fmt.Fprintf(w, "np=%d%s: the lowest of %d repetitions (configurations interleaved, forwards then backwards), µs per call\n", rs.np, over, rs.reps)
	fmt.Fprintf(w, "collbench: %s\n", rs.first.pattern)
	for _, coll := range rs.first.colls {
		h := rs.first.heads[coll]
		fmt.Fprintf(w, "\n%s, %s, %s\n", h.call, h.dtype, sizeWords(h))
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprint(tw, "bytes\t")
		for _, c := range rs.configs {
			fmt.Fprintf(tw, "%s\t", c)
		}
		for _, c := range cols {
			fmt.Fprintf(tw, "%s\t", c.head)
		}
		fmt.Fprintln(tw)
		for _, b := range rs.keys(coll) {
			k := key{coll, b}
			fmt.Fprintf(tw, "%d\t", b)
			for _, c := range rs.configs {
				fmt.Fprintf(tw, "%s\t", num(rs.best(c, k)))
			}
			for _, c := range cols {
				fmt.Fprintf(tw, "%s\t", c.cell(k))
			}
			fmt.Fprintln(tw)
		}
		tw.Flush()
	}
	fmt.Fprintln(w)
}

// report prints, per collective, what was measured, the best time of
// every configuration, gocoll over the faster host MPI, and each host
// under the preload over the same host alone (below 1: faster).
func report(w io.Writer, rs *runs, cores int) {
	over := ""
	if rs.np > cores {
		over = fmt.Sprintf(", oversubscribed (%d cores)", cores)
	}
	cols := []column{{"gocoll/best-host", func(k key) string { return num(rs.standalone(k)) }}}
	for _, p := range [][3]string{{"ompi+preload/ompi", "openmpi+preload", "openmpi"}, {"mpich+preload/mpich", "mpich+preload", "mpich"}} {
		if slices.Contains(rs.configs, p[1]) {
			cols = append(cols, column{p[0], func(k key) string { return num(rs.ratio(p[1], p[2], k)) }})
		}
	}
	tables(w, rs, over, cols)
}

// csvRows writes every configuration's lowest and median time per size,
// and with a model (the cluster mode) its time as a last column.
func csvRows(w io.Writer, rs *runs, price modelFunc) {
	for _, coll := range rs.first.colls {
		h := rs.first.heads[coll]
		for _, b := range rs.keys(coll) {
			for _, c := range rs.configs {
				v := rs.samples[c][key{coll, b}]
				if len(v) == 0 {
					continue
				}
				fmt.Fprintf(w, "%d,%s,%s,%s,%s,%d,%.3f,%.3f", rs.np, c, coll, h.dtype, h.size, b, slices.Min(v), median(v))
				if price != nil {
					m, _, ok := price(c, key{coll, b})
					fmt.Fprint(w, ",")
					if ok {
						fmt.Fprintf(w, "%.3f", m)
					}
				}
				fmt.Fprintln(w)
			}
		}
	}
}

// order is the configurations' order in repetition rep: forwards, then
// backwards, so that none always runs first or after the same one.
func order(configs []config, rep int) []config {
	o := slices.Clone(configs)
	if rep%2 == 1 {
		slices.Reverse(o)
	}
	return o
}

type options struct {
	nps, sizes, colls, dtype string
	reps, iters, itersLarge  int
	total                    bool
	plot, csv, replot        string
	cluster, rate            string
	hostMPIs                 string
}

// benchArgs are collbench's arguments but -c.
func (o options) benchArgs() []string {
	args := []string{"-m", o.sizes, "-i", strconv.Itoa(o.iters), "-il", strconv.Itoa(o.itersLarge)}
	if o.dtype != "" {
		args = append(args, "-d", o.dtype)
	}
	if o.total {
		args = append(args, "-total")
	}
	return args
}

// measure runs every configuration reps times, interleaved, into rs.
func measure(rs *runs, configs []config, args []string, reps int) error {
	for rep := range reps {
		for _, c := range order(configs, rep) {
			fmt.Fprintf(os.Stderr, "\rnp=%d repetition %d/%d: %-24s", rs.np, rep+1, reps, c.name)
			argv := append(append(c.launch(rs.np), c.binary), args...)
			cmd := exec.Command(argv[0], argv[1:]...)
			cmd.Env = append(os.Environ(), c.env...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				return fmt.Errorf("%v %s: %v\n%s%s", c.env, strings.Join(argv, " "), err, out, stderr.Bytes())
			}
			r, err := parse(out)
			if err == nil {
				err = rs.add(c.name, r)
			}
			if err != nil {
				return fmt.Errorf("%s: %v", strings.Join(argv, " "), err)
			}
		}
	}
	fmt.Fprintln(os.Stderr)
	return nil
}

func main() {
	var o options
	flag.StringVar(&o.nps, "np", "2,4,8", "rank counts (above the core count the ranks are oversubscribed)")
	flag.StringVar(&o.sizes, "m", "4:16777216", "MIN:MAX sizes in bytes, doubling (collbench -m)")
	flag.IntVar(&o.reps, "reps", 3, "repetitions of every configuration, interleaved; the lowest time is kept")
	flag.IntVar(&o.iters, "iters", 1000, "timed calls per size up to 8 KiB (collbench -i; 200 warm-up calls)")
	flag.IntVar(&o.itersLarge, "iters-large", 100, "timed calls per size above 8 KiB (collbench -il; 10 warm-up calls)")
	flag.StringVar(&o.colls, "c", "allreduce,reduce_scatter,reduce_scatter_block,allgather", "collectives (collbench -c)")
	flag.StringVar(&o.dtype, "d", "", "datatype of every collective, e.g. MPI_DOUBLE (default: MPI_CHAR for allgather, MPI_FLOAT for the reductions)")
	flag.BoolVar(&o.total, "total", false, "allgather sizes are the whole output (default: what each rank sends, as MPI suites count them)")
	flag.StringVar(&o.plot, "plot", "", "draw PREFIX-npN-COLLECTIVE.svg (or .png): time per call, and the ratios to the faster host")
	flag.StringVar(&o.csv, "csv", "", "write every configuration's lowest and median time per size as CSV (headed by # lines)")
	flag.StringVar(&o.replot, "replot", "", "measure nothing: draw -plot's plots from this CSV (one -csv wrote)")
	flag.StringVar(&o.hostMPIs, "mpi", "openmpi,mpich", "host MPIs to compare with, natively and under the preload")
	flag.StringVar(&o.cluster, "cluster", "", "HOSTSxPPN: measure gocoll's algorithms and auto on an emulated cluster instead (root; -np ignored)")
	flag.StringVar(&o.rate, "rate", "1gbit", "the emulated cluster's link rate, each way (tc tbf; \"\" unlimited)")
	cmdhelp.Help{Name: "gocoll-compare", Summary: "measure gocoll against Open MPI and MPICH on this machine (ratio tables)", Usage: []string{"gocoll-compare [flags]"}, About: `Builds bench/collbench.c with gocoll's mpicc, mpicc.openmpi and mpicc.mpich;
runs it under gocollrun, Open MPI and MPICH, and the host builds again with
LD_PRELOAD=build/lib/libgocoll-preload.so (when built); prints per rank
count and collective the lowest time of each and the ratios gocoll/best-host
and preload/native. Run inside the repository, after make build.

With -cluster HOSTSxPPN (as root) it emulates a cluster instead (a network
namespace per host, each linked to a bridge at -rate) and measures gocoll
alone there: every algorithm that runs across hosts forced in turn, auto,
and auto-tuned (auto with the machine gocoll-tune fits on the same ranks
first as GOCOLL_TUNING_FILE); it prints their times, auto and auto-tuned
over the best and the hierarchical algorithm over the best flat one, and
beside them the model's price of each on the fitted machine, with
measured/model; at the end, per collective, at how many sizes each auto
is within 1.10 of the best, and the model's error from 64 KiB.

With -replot FILE.csv -plot PREFIX it measures nothing and draws the
plots again from a CSV it wrote. Tables, CSV and plots are headed by the
command line, the commit and the machine.`}.Set(flag.CommandLine, os.Args[1:])
	flag.Parse()
	var err error
	if o.replot != "" {
		err = replot(o.replot, o.plot)
	} else {
		var root string
		if root, err = repoRoot(); err == nil {
			err = run(root, o)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gocoll-compare:", err)
		os.Exit(1)
	}
}

// repoRoot is the repository: the one whose build/bin holds this
// command, else the one the working directory is in.
func repoRoot() (string, error) {
	if exe, err := os.Executable(); err == nil {
		root := filepath.Dir(filepath.Dir(filepath.Dir(exe)))
		if _, err := os.Stat(filepath.Join(root, "bench", "collbench.c")); err == nil {
			return root, nil
		}
	}
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		return "", fmt.Errorf("finding the repository (run inside it): %v", err)
	}
	return strings.TrimSpace(string(out)), nil
}

func run(root string, o options) error {
	if o.reps < 1 || o.iters < 1 || o.itersLarge < 1 {
		return fmt.Errorf("want -reps, -iters and -iters-large >= 1")
	}
	if o.cluster != "" {
		return runCluster(root, o)
	}
	var nps []int
	for _, f := range strings.Split(o.nps, ",") {
		np, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || np < 1 {
			return fmt.Errorf("bad -np %q", f)
		}
		nps = append(nps, np)
	}
	work, err := os.MkdirTemp("", "gocoll-compare-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	bin := func(n string) string { return filepath.Join(work, n) }
	src := filepath.Join(root, "bench", "collbench.c")
	builds := [][]string{
		{filepath.Join(root, "build", "bin", "mpicc"), "-O2", "-o", bin("gocoll"), src},
		{"mpicc.openmpi", "-O2", "-o", bin("openmpi"), src},
		{"mpicc.mpich", "-O2", "-o", bin("mpich"), src},
	}
	for _, b := range builds {
		if out, err := exec.Command(b[0], b[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("%v: %v\n%s", b, err, out)
		}
	}
	ompi := func(np int) []string {
		return []string{"mpirun.openmpi", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np", strconv.Itoa(np)}
	}
	mpich := func(np int) []string { return []string{"mpiexec.mpich", "-n", strconv.Itoa(np)} }
	configs := []config{
		{name: "gocoll", launch: func(np int) []string {
			return []string{filepath.Join(root, "build", "bin", "gocollrun"), "-n", strconv.Itoa(np)}
		}, binary: bin("gocoll")},
		{name: "openmpi", launch: ompi, binary: bin("openmpi")},
		{name: "mpich", launch: mpich, binary: bin("mpich")},
	}
	preload := filepath.Join(root, "build", "lib", "libgocoll-preload.so")
	if _, err := os.Stat(preload); err == nil {
		configs = append(configs,
			config{name: "openmpi+preload", launch: func(np int) []string {
				return append(ompi(np), "-x", "LD_PRELOAD="+preload)
			}, binary: bin("openmpi")},
			config{name: "mpich+preload", launch: func(np int) []string {
				return append(mpich(np), "-genv", "LD_PRELOAD", preload)
			}, binary: bin("mpich")})
	} else {
		fmt.Fprintf(os.Stderr, "gocoll-compare: %s is not built: no preload columns\n", preload)
	}
	hosts := strings.Split(o.hostMPIs, ",")
	for _, h := range hosts {
		if h != "openmpi" && h != "mpich" {
			return fmt.Errorf("-mpi %q: want openmpi, mpich or both", o.hostMPIs)
		}
	}
	configs = slices.DeleteFunc(configs, func(c config) bool {
		return c.name != "gocoll" && !slices.Contains(hosts, strings.TrimSuffix(c.name, "+preload"))
	})
	args := append([]string{"-c", o.colls}, o.benchArgs()...)
	h := provenance.New(root, hosts...)
	fmt.Print(h.Comment(), "\n")
	var csv bytes.Buffer
	csv.WriteString(h.Comment())
	csv.WriteString("np,config,collective,datatype,size,bytes,min_us,median_us\n")
	for _, np := range nps {
		rs := newRuns(np, o.reps, configs)
		if err := measureInto(rs, configs, args, o, &csv, nil, h); err != nil {
			return err
		}
		report(os.Stdout, rs, runtime.NumCPU())
	}
	return writeCSV(o, &csv)
}

// measureInto measures into rs (see measure), adds its rows to csv (with
// the model's times, when there is one) and draws its plots (-plot),
// headed by h; the caller prints its table.
func measureInto(rs *runs, configs []config, args []string, o options, csv *bytes.Buffer, price modelFunc, h provenance.Header) error {
	if err := measure(rs, configs, args, o.reps); err != nil {
		return err
	}
	csvRows(csv, rs, price)
	if o.plot != "" {
		return plotCompare(o.plot, rs, h)
	}
	return nil
}

// writeCSV writes csv to -csv's file, if one is named.
func writeCSV(o options, csv *bytes.Buffer) error {
	if o.csv != "" {
		return os.WriteFile(o.csv, csv.Bytes(), 0o644)
	}
	return nil
}
