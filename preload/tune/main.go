// Command tune measures, on this machine, where the host MPIs' own
// collectives beat gocoll's under LD_PRELOAD, and writes the rules that
// make GOCOLL_*_ALGORITHM=auto choose accordingly (preload/rules.go).
//
//	make lib && go run ./preload/tune -write     # regenerate the rules
//	go run ./preload/tune -table latency.md      # measure only
//	go run ./preload/tune -np 2,4 -np-of mpich=2 -save m.json -write
//	go run ./preload/tune -load m.json -write    # derive again, no measuring
//
// -np-of gives one MPI rank counts of its own (MPICH 4.0 busy-polls: run
// oversubscribed, one collbench sweep takes minutes); -save keeps the
// measurements, from which -load derives the rules again (after a change
// to how rules are derived, or with another -margin) without measuring.
// The log on stderr, the -table and the -save file are headed by the
// command, commit and machine (internal/provenance).
//
// It builds bench/collbench.c (a latency benchmark with a barrier before
// every call) with mpicc.openmpi and mpicc.mpich and runs it on
// MPI_Allreduce, MPI_Reduce_scatter_block and MPI_Allgather, MPI_FLOAT,
// 8 B to 16 MiB, every size the whole vector or output (-total: the size
// the tuner's rules are written in), for each host
// MPI and rank count, in several configurations: natively, and under the
// preload library with auto and with each of gocoll's algorithms forced.
// Every repetition runs every configuration once, in a fresh random
// order, so that the machine's noise (other processes, frequency
// changes) falls on all of them alike; the medians over repetitions are
// compared.
//
// A gocoll algorithm wins a size if its median beats the host's by more
// than -margin; otherwise the host does (native), so that auto is never
// slower than the host MPI by more than the noise. Among algorithms within
// the margin of the fastest, the previous size's winner is kept, so that
// noise does not cut sizes into many small ranges. Runs of sizes with the
// same winners become one rule, with boundaries halfway (1.5x) between
// measured sizes; the first rule of a collective starts at 0 bytes and
// the last has no upper bound. Rank counts: the np=2 measurement gives the
// rules for p <= 2, the largest np's for p above it, and each other np
// the range up to it. MPI_Reduce_scatter, which tune does not time, gets
// MPI_Reduce_scatter_block's rules (the same algorithms).
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/internal/provenance"
	"github.com/gocoll/gocoll/preload/native"
	"github.com/gocoll/gocoll/tuner"
)

var (
	mpisFlag  = flag.String("mpi", "openmpi,mpich", "host MPIs to measure")
	npFlag    = flag.String("np", "2,4", "rank counts")
	reps      = flag.Int("reps", 3, "repetitions of every configuration (interleaved)")
	iters     = flag.Int("iters", 100, "collbench iterations per size (after 10 warm-up calls)")
	slowIters = flag.Int("slow-iters", 20, "iterations where MPICH runs more ranks than cores (it busy-polls: each run takes minutes)")
	maxBytes  = flag.Int64("max", 16<<20, "largest size in bytes")
	margin    = flag.Float64("margin", 0.10, "a gocoll algorithm must beat the host by this fraction")
	write     = flag.Bool("write", false, "write preload/rules.go")
	tableOut  = flag.String("table", "", "also write the latency table (markdown) to this file")
	verbose   = flag.Bool("v", false, "print every run")
	npOf      = flag.String("np-of", "", "rank counts of one MPI instead of -np's, e.g. mpich=2 (oversubscribed MPICH busy-polls: minutes a run)")
	saveFlag  = flag.String("save", "", "also write the measurements (JSON) to this file")
	loadFlag  = flag.String("load", "", "derive the rules from measurements -save wrote instead of measuring")
)

// rankCounts returns each MPI's rank counts: -np's, or -np-of's for the
// MPI it names.
func rankCounts(mpis []hostMPI) (map[string][]int, error) {
	parse := func(list string) ([]int, error) {
		var nps []int
		for _, s := range strings.Split(list, ",") {
			n, err := strconv.Atoi(s)
			if err != nil || n < 2 {
				return nil, fmt.Errorf("rank count %q: want rank counts of at least 2", s)
			}
			nps = append(nps, n)
		}
		sort.Ints(nps)
		return nps, nil
	}
	all, err := parse(*npFlag)
	if err != nil {
		return nil, fmt.Errorf("-np: %v", err)
	}
	out := map[string][]int{}
	for _, m := range mpis {
		out[m.name] = all
	}
	if *npOf != "" {
		name, list, ok := strings.Cut(*npOf, "=")
		if _, known := hostMPIs[name]; !ok || !known {
			return nil, fmt.Errorf("-np-of %q: want MPI=N,N... (openmpi or mpich)", *npOf)
		}
		if out[name], err = parse(list); err != nil {
			return nil, fmt.Errorf("-np-of: %v", err)
		}
	}
	return out, nil
}

// npWords says which rank counts were measured, for the rules' comment.
func npWords(mpis []hostMPI, nps map[string][]int) string {
	var parts []string
	for _, m := range mpis {
		parts = append(parts, fmt.Sprintf("np=%s (%s)", strings.Trim(strings.Join(strings.Fields(fmt.Sprint(nps[m.name])), ","), "[]"), m.name))
	}
	return strings.Join(parts, ", ")
}

// machine says where and when the measurements were made.
type machine struct {
	CPU   string // /proc/cpuinfo's model name
	Cores int
	Date  string // UTC, 2006-01-02
}

// thisMachine is the machine tune runs on, today.
func thisMachine() machine {
	return machine{CPU: provenance.CPUModel(), Cores: runtime.NumCPU(), Date: time.Now().UTC().Format("2006-01-02")}
}

// saved is what -save writes and -load reads.
type saved struct {
	Provenance provenance.Header // the command, commit and machine that measured
	MPIs       []string
	NPs        map[string][]int
	Reps       int
	MaxSize    int64
	Machine    machine
	Samples    samples
}

// collectives are collbench's, by its names.
var collectives = []struct {
	bench string
	coll  algorithms.Collective
}{
	{"allreduce", algorithms.Allreduce},
	{"reduce_scatter_block", algorithms.ReduceScatterBlock},
	{"allgather", algorithms.Allgather},
}

type hostMPI struct{ name, cc, run string }

var hostMPIs = map[string]hostMPI{
	"openmpi": {"openmpi", "mpicc.openmpi", "mpirun.openmpi"},
	"mpich":   {"mpich", "mpicc.mpich", "mpiexec.mpich"},
}

// config is one way of running collbench.
type config struct {
	name    string   // native, auto, or forced<i>
	env     []string // for the ranks
	preload bool
}

func configs() []config {
	cs := []config{{name: "native"}, {name: "auto", preload: true}}
	for i, env := range tuner.ForcedRounds() {
		cs = append(cs, config{name: fmt.Sprintf("forced%d", i), env: env, preload: true})
	}
	return cs
}

// algorithm returns the algorithm a config runs for collective c.
func (cf config) algorithm(c algorithms.Collective) string {
	if !strings.HasPrefix(cf.name, "forced") {
		return cf.name
	}
	i, _ := strconv.Atoi(strings.TrimPrefix(cf.name, "forced"))
	names := algorithms.HostNames(c) // as tuner.ForcedRounds
	return names[i%len(names)]
}

// samples[mpi][np][collective][column][bytes] are the per-call times in
// microseconds, one per repetition.
type samples map[string]map[int]map[string]map[string]map[int64][]float64

func (s samples) add(mpi string, np int, coll, col string, bytes int64, us float64) {
	if s[mpi] == nil {
		s[mpi] = map[int]map[string]map[string]map[int64][]float64{}
	}
	if s[mpi][np] == nil {
		s[mpi][np] = map[string]map[string]map[int64][]float64{}
	}
	if s[mpi][np][coll] == nil {
		s[mpi][np][coll] = map[string]map[int64][]float64{}
	}
	if s[mpi][np][coll][col] == nil {
		s[mpi][np][coll][col] = map[int64][]float64{}
	}
	s[mpi][np][coll][col][bytes] = append(s[mpi][np][coll][col][bytes], us)
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	w := slices.Clone(v)
	sort.Float64s(w)
	if len(w)%2 == 1 {
		return w[len(w)/2]
	}
	return (w[len(w)/2-1] + w[len(w)/2]) / 2
}

func main() {
	flag.Parse()
	root, err := repoRoot()
	if err != nil {
		fail(err)
	}
	lib := filepath.Join(root, "build", "lib", "libgocoll-preload.so")
	if _, err := os.Stat(lib); err != nil && *loadFlag == "" {
		fail(fmt.Errorf("%s is missing: run `make lib` first", lib))
	}
	var mpis []hostMPI
	for _, name := range strings.Split(*mpisFlag, ",") {
		m, ok := hostMPIs[name]
		if !ok {
			fail(fmt.Errorf("unknown MPI %q (openmpi, mpich)", name))
		}
		mpis = append(mpis, m)
	}
	nps, err := rankCounts(mpis)
	if err != nil {
		fail(err)
	}
	var names []string
	for _, m := range mpis {
		names = append(names, m.name)
	}
	// The header of what this run writes (the log on stderr, -table,
	// -save): with -load, the measurement's own header beside it.
	h := provenance.New(root, names...)
	var data samples
	where := thisMachine()
	if *loadFlag != "" {
		var sv saved
		b, err := os.ReadFile(*loadFlag)
		if err == nil {
			err = json.Unmarshal(b, &sv)
		}
		if err != nil {
			fail(fmt.Errorf("-load: %v", err))
		}
		mpis = mpis[:0]
		for _, name := range sv.MPIs {
			mpis = append(mpis, hostMPIs[name])
		}
		data, nps, *reps, *maxBytes, where = sv.Samples, sv.NPs, sv.Reps, sv.MaxSize, sv.Machine
		h = h.From(*loadFlag, sv.Provenance)
	} else {
		fmt.Fprint(os.Stderr, h.Comment(), "\n")
		data = measureAll(root, lib, mpis, nps)
	}
	if *saveFlag != "" {
		sv := saved{Provenance: h, NPs: nps, Reps: *reps, MaxSize: *maxBytes, Machine: where, Samples: data}
		for _, m := range mpis {
			sv.MPIs = append(sv.MPIs, m.name)
		}
		b, err := json.MarshalIndent(sv, "", " ")
		if err == nil {
			err = os.WriteFile(*saveFlag, b, 0o644)
		}
		if err != nil {
			fail(fmt.Errorf("-save: %v", err))
		}
	}

	var table bytes.Buffer
	writeTable(&table, data, mpis, nps)
	os.Stdout.Write(table.Bytes())
	if *tableOut != "" {
		if err := os.WriteFile(*tableOut, append([]byte(h.Markdown()), table.Bytes()...), 0o644); err != nil {
			fail(err)
		}
	}
	rules := map[string][]tuner.Rule{}
	for _, m := range mpis {
		rules[m.name] = derive(data[m.name], nps[m.name])
	}
	var src bytes.Buffer
	writeRules(&src, rules, mpis, nps, where)
	if *write {
		path := filepath.Join(root, "preload", "rules.go")
		if err := os.WriteFile(path, src.Bytes(), 0o644); err != nil {
			fail(err)
		}
		fmt.Fprintf(os.Stderr, "wrote %s\n", path)
	} else {
		fmt.Println("\nRules (not written; -write writes preload/rules.go):")
		os.Stdout.Write(src.Bytes())
	}
}

// measureAll runs collbench in every configuration, -reps times, each
// repetition in a fresh random order.
func measureAll(root, lib string, mpis []hostMPI, nps map[string][]int) samples {
	dir, err := os.MkdirTemp("", "gocoll-tune-")
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(dir)
	for _, m := range mpis {
		if _, err := exec.LookPath(m.cc); err != nil {
			fail(fmt.Errorf("%s is missing: `make deps` installs it", m.cc))
		}
		out, err := exec.Command(m.cc, "-O2", "-o", filepath.Join(dir, "collbench-"+m.name), filepath.Join(root, "bench", "collbench.c")).CombinedOutput()
		if err != nil {
			fail(fmt.Errorf("%s: %v\n%s", m.cc, err, out))
		}
	}

	type run struct {
		m  hostMPI
		np int
		cf config
	}
	var runs []run
	for _, m := range mpis {
		for _, np := range nps[m.name] {
			for _, cf := range configs() {
				runs = append(runs, run{m, np, cf})
			}
		}
	}
	data := samples{}
	start := time.Now()
	for rep := range *reps {
		rand.Shuffle(len(runs), func(i, j int) { runs[i], runs[j] = runs[j], runs[i] })
		for k, r := range runs {
			t0 := time.Now()
			out, err := bench(r.m, r.np, r.cf, lib, filepath.Join(dir, "collbench-"+r.m.name))
			if err != nil {
				fail(fmt.Errorf("%s np=%d %s: %v\n%s", r.m.name, r.np, r.cf.name, err, out))
			}
			n := 0
			for _, line := range strings.Split(string(out), "\n") {
				f := strings.Fields(line)
				if len(f) != 5 || strings.HasPrefix(line, "#") {
					continue
				}
				b, err1 := strconv.ParseInt(f[1], 10, 64)
				us, err2 := strconv.ParseFloat(f[2], 64)
				if err1 != nil || err2 != nil {
					continue
				}
				for _, c := range collectives {
					if c.bench == f[0] {
						data.add(r.m.name, r.np, f[0], r.cf.algorithm(c.coll), b, us)
						n++
					}
				}
			}
			if n == 0 {
				fail(fmt.Errorf("%s np=%d %s: no results:\n%s", r.m.name, r.np, r.cf.name, out))
			}
			fmt.Fprintf(os.Stderr, "rep %d/%d run %d/%d: %s np=%d %s (%.1fs, %.0fs so far)\n", rep+1, *reps, k+1, len(runs),
				r.m.name, r.np, r.cf.name, time.Since(t0).Seconds(), time.Since(start).Seconds())
			if *verbose {
				os.Stderr.Write(out)
			}
		}
	}
	return data
}

// bench runs collbench once.
func bench(m hostMPI, np int, cf config, lib, prog string) ([]byte, error) {
	it := *iters
	if m.name == "mpich" && np > runtime.NumCPU() {
		it = *slowIters
	}
	env := cf.env
	if cf.preload {
		env = append([]string{"LD_PRELOAD=" + lib}, env...)
	}
	var args []string
	switch m.name {
	case "openmpi":
		args = []string{"--allow-run-as-root", "--oversubscribe", "--mca", "btl", "self,vader", "-np", strconv.Itoa(np)}
		for _, e := range env {
			args = append(args, "-x", e)
		}
	default:
		args = []string{"-n", strconv.Itoa(np)}
		for _, e := range env {
			k, v, _ := strings.Cut(e, "=")
			args = append(args, "-genv", k, v)
		}
	}
	args = append(args, prog, "-c", "allreduce,reduce_scatter_block,allgather", "-d", "MPI_FLOAT", "-total",
		"-i", strconv.Itoa(it), "-il", strconv.Itoa(it), "-w", "10", "-wl", "10", "-m", fmt.Sprintf("8:%d", *maxBytes))
	cmd := exec.Command(m.run, args...)
	return cmd.CombinedOutput()
}

// sizes returns the sizes measured, ascending.
func sizes(cols map[string]map[int64][]float64) []int64 {
	var out []int64
	for b := range cols["native"] {
		out = append(out, b)
	}
	slices.Sort(out)
	return out
}

// columns returns the algorithms measured for a collective, sorted.
func columns(cols map[string]map[int64][]float64) []string {
	var out []string
	for c := range cols {
		if c != "native" && c != "auto" {
			out = append(out, c)
		}
	}
	sort.Strings(out)
	return out
}

func writeTable(w io.Writer, data samples, mpis []hostMPI, nps map[string][]int) {
	fmt.Fprintf(w, "Latency in microseconds per call (median of %d interleaved runs; collbench average over ranks).\n", *reps)
	fmt.Fprintf(w, "native: the host MPI alone; auto: under LD_PRELOAD with the rules in force; the others: under LD_PRELOAD with the algorithm forced. * marks the fastest.\n")
	for _, m := range mpis {
		for _, np := range nps[m.name] {
			for _, c := range collectives {
				cols := data[m.name][np][c.bench]
				algs := columns(cols)
				fmt.Fprintf(w, "\n%s, np=%d, MPI_%s\n\n| bytes | native | auto |", m.name, np, upperFirst(c.bench))
				for _, a := range algs {
					fmt.Fprintf(w, " %s |", a)
				}
				fmt.Fprintf(w, "\n|---:|---:|---:|%s\n", strings.Repeat("---:|", len(algs)))
				for _, b := range sizes(cols) {
					all := append([]string{"native", "auto"}, algs...)
					best := ""
					for _, a := range all {
						if best == "" || median(cols[a][b]) < median(cols[best][b]) {
							best = a
						}
					}
					fmt.Fprintf(w, "| %s |", human(b))
					for _, a := range all {
						mark := ""
						if a == best {
							mark = "*"
						}
						fmt.Fprintf(w, " %.2f%s |", median(cols[a][b]), mark)
					}
					fmt.Fprintln(w)
				}
			}
		}
	}
}

func upperFirst(s string) string { return strings.ToUpper(s[:1]) + s[1:] }

func human(b int64) string {
	switch {
	case b >= 1<<20 && b%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", b>>20)
	case b >= 1<<10 && b%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", b>>10)
	}
	return fmt.Sprintf("%d B", b)
}

// choice is what rules say for one size: the winner, and, when the winner
// has a restriction (a commutative op, one host), what takes the calls it
// cannot run.
type choice struct{ win, alt string }

// unrestricted reports whether an algorithm runs every call: it keeps
// rank order and needs no shared segment.
func unrestricted(c algorithms.Collective, name string) bool {
	if name == native.Name {
		return true
	}
	a, err := algorithms.Lookup(c, name)
	return err == nil && !a.Commutative && a.IsSchedule()
}

// derive turns one MPI's measurements into rules.
func derive(data map[int]map[string]map[string]map[int64][]float64, nps []int) []tuner.Rule {
	var rules []tuner.Rule
	for _, c := range collectives {
		for i, np := range nps {
			// Each np's rules hold from the np before it up to this
			// one, on one node: where they were measured (beyond, the
			// tuner's model decides between the host and gocoll).
			minR, maxR := 0, np
			if i > 0 {
				minR = nps[i-1] + 1
			}
			cols := data[np][c.bench]
			ss := sizes(cols)
			var chosen []choice
			prev := choice{}
			for _, b := range ss {
				hostTime := median(cols["native"][b])
				bar := hostTime * (1 - *margin) // to beat, to be chosen over native
				t := func(a string) float64 {
					if a == native.Name {
						return bar
					}
					return median(cols[a][b])
				}
				best, bestAlt := native.Name, native.Name
				for _, a := range columns(cols) {
					if t(a) < t(best) {
						best = a
					}
					if unrestricted(c.coll, a) && t(a) < t(bestAlt) {
						bestAlt = a
					}
				}
				// Within the noise of the best, keep the previous size's
				// choice, so that noise does not cut the sizes into
				// ranges.
				near := func(a, b string) bool { return a != "" && t(a) <= bar && t(a) <= t(b)*(1+*margin) }
				if prev.win != best && best != native.Name && near(prev.win, best) {
					best = prev.win
				}
				if prev.alt != bestAlt && bestAlt != native.Name && unrestricted(c.coll, prev.alt) && near(prev.alt, bestAlt) {
					bestAlt = prev.alt
				}
				ch := choice{win: best}
				if !unrestricted(c.coll, best) {
					ch.alt = bestAlt
				}
				chosen = append(chosen, ch)
				prev = choice{win: best, alt: bestAlt}
			}
			for j := 0; j < len(ss); {
				k := j
				for k+1 < len(ss) && chosen[k+1] == chosen[j] {
					k++
				}
				var lo, hi int64
				if j > 0 {
					lo = ss[j-1]*3/2 + 1
				}
				if k < len(ss)-1 {
					hi = ss[k] * 3 / 2
				}
				for _, coll := range []string{tuner.CollectiveName(c.coll)} {
					r := tuner.Rule{Collective: coll, MinBytes: lo, MaxBytes: hi, MinRanks: minR, MaxRanks: maxR, MaxNodes: 1, Algorithm: chosen[j].win}
					rules = append(rules, r)
					if chosen[j].alt != "" {
						r.Algorithm = chosen[j].alt
						rules = append(rules, r)
					}
				}
				j = k + 1
			}
		}
	}
	// MPI_Reduce_scatter follows MPI_Reduce_scatter_block.
	for _, r := range slices.Clone(rules) {
		if r.Collective == "reduce_scatter_block" {
			r.Collective = "reduce_scatter"
			rules = append(rules, r)
		}
	}
	return rules
}

func writeRules(w io.Writer, rules map[string][]tuner.Rule, mpis []hostMPI, nps map[string][]int, where machine) {
	fmt.Fprintf(w, `// Code generated by "go run ./preload/tune -write"; DO NOT EDIT.

package main

import "github.com/gocoll/gocoll/tuner"

// measuredRules are the crossovers between the host MPI's own collectives
// (native) and gocoll's algorithms, measured under LD_PRELOAD on %d cores
// (%s) at %s, %d interleaved repetitions, medians of collbench's
// per-call latency from 8 B to %s; a gocoll algorithm wins a size where it
// beats the host by more than %.0f%%. Regenerate with
//
//	make lib && go run ./preload/tune -np 2,4 -np-of mpich=2 -save results/preload-tune.json -write
//
// (see docs/preload.md, "How auto chooses between the host MPI and gocoll").
// Measured %s.
var measuredRules = map[string][]tuner.Rule{
`, where.Cores, where.CPU, npWords(mpis, nps), *reps, human(*maxBytes), *margin*100, where.Date)
	for _, m := range mpis {
		fmt.Fprintf(w, "\t%q: {\n", m.name)
		for _, r := range rules[m.name] {
			fmt.Fprintf(w, "\t\t{Collective: %q", r.Collective)
			if r.MinBytes != 0 {
				fmt.Fprintf(w, ", MinBytes: %d", r.MinBytes)
			}
			if r.MaxBytes != 0 {
				fmt.Fprintf(w, ", MaxBytes: %d", r.MaxBytes)
			}
			if r.MinRanks != 0 {
				fmt.Fprintf(w, ", MinRanks: %d", r.MinRanks)
			}
			if r.MaxRanks != 0 {
				fmt.Fprintf(w, ", MaxRanks: %d", r.MaxRanks)
			}
			if r.MaxNodes != 0 {
				fmt.Fprintf(w, ", MaxNodes: %d", r.MaxNodes)
			}
			fmt.Fprintf(w, ", Algorithm: %q},\n", r.Algorithm)
		}
		fmt.Fprintf(w, "\t},\n")
	}
	fmt.Fprintf(w, "}\n")
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("not inside the gocoll repository")
		}
		dir = parent
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "tune:", err)
	os.Exit(1)
}
