// Command gocoll-compare measures gocoll against the host MPIs with one
// benchmark program, bench/collbench.c, built three ways: with gocoll's
// mpicc (run under gocollrun), with mpicc.openmpi and with mpicc.mpich (run
// natively), and, when the preload library is built, the two host builds
// again with LD_PRELOAD=libgocoll-preload.so. The configurations are run in
// turn, repetition after repetition, so that machine noise hits all alike;
// the best (lowest) time of each configuration and size is kept. It prints
// the latency table, the ratio gocoll/best-host per collective and size,
// and draws the latencies.
//
//	gocoll-compare [-np 2,4] [-m 8:16777216] [-reps 3] [-iters 100] [-c allreduce,...] [-plot docs/compare] [-csv out.csv]
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
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

func main() {
	nps := flag.String("np", "2,4", "rank counts")
	sizes := flag.String("m", "8:16777216", "MIN:MAX message sizes in bytes")
	reps := flag.Int("reps", 3, "repetitions of every configuration (best kept)")
	iters := flag.Int("iters", 100, "collbench iterations per size")
	colls := flag.String("c", "allreduce,reduce_scatter_block,allgather", "collectives")
	plotPrefix := flag.String("plot", "", "draw PREFIX-npN-COLLECTIVE.svg (or .png)")
	csvOut := flag.String("csv", "", "write all measurements as CSV")
	flag.Parse()
	root, err := repoRoot()
	if err == nil {
		err = run(root, *nps, *sizes, *reps, *iters, *colls, *plotPrefix, *csvOut)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gocoll-compare:", err)
		os.Exit(1)
	}
}

func repoRoot() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		return "", fmt.Errorf("finding the repository (run inside it): %v", err)
	}
	return strings.TrimSpace(string(out)), nil
}

func run(root, nps, sizes string, reps, iters int, colls, plotPrefix, csvOut string) error {
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
	}
	var csv bytes.Buffer
	csv.WriteString("np,config,collective,bytes,us\n")
	for _, f := range strings.Split(nps, ",") {
		np, err := strconv.Atoi(f)
		if err != nil {
			return fmt.Errorf("bad -np %q", f)
		}
		best := map[string]map[key]float64{}
		for rep := range reps {
			for _, c := range configs {
				fmt.Fprintf(os.Stderr, "\rnp=%d repetition %d/%d: %-16s", np, rep+1, reps, c.name)
				argv := append(c.launch(np), c.binary, "-c", colls, "-m", sizes, "-i", strconv.Itoa(iters))
				cmd := exec.Command(argv[0], argv[1:]...)
				cmd.Env = append(os.Environ(), c.env...)
				out, err := cmd.Output()
				if err != nil {
					return fmt.Errorf("%s: %v\n%s", strings.Join(argv, " "), err, out)
				}
				if best[c.name] == nil {
					best[c.name] = map[key]float64{}
				}
				sc := bufio.NewScanner(bytes.NewReader(out))
				for sc.Scan() {
					fs := strings.Fields(sc.Text())
					if len(fs) != 5 {
						continue
					}
					b, _ := strconv.ParseInt(fs[1], 10, 64)
					us, _ := strconv.ParseFloat(fs[2], 64)
					k := key{fs[0], b}
					if old, ok := best[c.name][k]; !ok || us < old {
						best[c.name][k] = us
					}
				}
			}
		}
		fmt.Fprintln(os.Stderr)
		report(np, configs, best)
		for _, c := range configs {
			for k, us := range best[c.name] {
				fmt.Fprintf(&csv, "%d,%s,%s,%d,%.3f\n", np, c.name, k.coll, k.bytes, us)
			}
		}
		if plotPrefix != "" {
			if err := plotCompare(plotPrefix, np, configs, best); err != nil {
				return err
			}
		}
	}
	if csvOut != "" {
		return os.WriteFile(csvOut, csv.Bytes(), 0o644)
	}
	return nil
}

// report prints, per collective, the best time of every configuration and
// the ratio of gocoll to the faster host MPI (below 1: gocoll is faster).
func report(np int, configs []config, best map[string]map[key]float64) {
	var keys []key
	for k := range best["gocoll"] {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b key) int {
		if a.coll != b.coll {
			return strings.Compare(a.coll, b.coll)
		}
		return int(a.bytes - b.bytes)
	})
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "np=%d\tbytes\t", np)
	for _, c := range configs {
		fmt.Fprintf(tw, "%s µs\t", c.name)
	}
	fmt.Fprintln(tw, "gocoll/best-host\t")
	for _, k := range keys {
		fmt.Fprintf(tw, "%s\t%d\t", k.coll, k.bytes)
		for _, c := range configs {
			fmt.Fprintf(tw, "%.2f\t", best[c.name][k])
		}
		host := math.Min(best["openmpi"][k], best["mpich"][k])
		fmt.Fprintf(tw, "%.2f\t\n", best["gocoll"][k]/host)
	}
	tw.Flush()
	fmt.Println()
}
