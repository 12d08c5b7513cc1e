// Command gocoll-demo runs every collective with every algorithm at several
// rank counts, ranks as goroutines over the in-process transport, checks
// every result and prints a table of algorithm, size and time per call.
//
//	gocoll-demo [-ranks 2,3,4,8] [-sizes 8,65536,1048576] [-iters 20]
//	gocoll-demo -info   (the GOCOLL_ environment variables)
package main

import (
	"flag"
	"fmt"
	"github.com/gocoll/gocoll/internal/cmdhelp"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/envvar"
	"github.com/gocoll/gocoll/mpi"
)

func main() {
	ranks := flag.String("ranks", "2,3,4,8", "comma-separated rank counts")
	sizes := flag.String("sizes", "8,65536,1048576", "comma-separated message sizes in bytes (of the whole vector)")
	iters := flag.Int("iters", 20, "timed calls per measurement")
	info := flag.Bool("info", false, "list gocoll's environment variables and exit")
	cmdhelp.Help{Name: "gocoll-demo", Summary: "run every collective and algorithm with ranks as goroutines, check and time them", Usage: []string{"gocoll-demo [-ranks 2,3,4,8] [-sizes 8,65536,1048576] [-iters 20]", "gocoll-demo -info"}, About: `Runs every collective with every algorithm at several rank counts, ranks
as goroutines over the in-process transport, checks every result and
prints a table of algorithm, size and time per call. -info lists gocoll's
environment variables.`}.Set(flag.CommandLine, os.Args[1:])
	flag.Parse()
	if *info {
		envvar.Print(os.Stdout)
		return
	}
	ps, err := ints(*ranks)
	if err == nil {
		var ss []int
		ss, err = ints(*sizes)
		if err == nil {
			err = run(ps, ss, *iters)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gocoll-demo:", err)
		os.Exit(1)
	}
}

func ints(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("bad number %q", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func run(ps, sizes []int, iters int) error {
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "collective\talgorithm\tranks\tbytes\ttime/call\tresult\t")
	failed := 0
	for _, c := range algorithms.Collectives {
		for _, alg := range algorithms.HostNames(c) {
			for _, p := range ps {
				for _, size := range sizes {
					n := max(size/8/p, 1) * p // float64 elements, a multiple of p
					d, err := measure(c, alg, p, n, iters)
					result := "ok"
					if err != nil {
						result, failed = "FAILED: "+err.Error(), failed+1
					}
					fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t\n", c, alg, p, n*8, d.Round(100*time.Nanosecond), result)
				}
			}
		}
	}
	tw.Flush()
	if failed > 0 {
		return fmt.Errorf("%d checks failed", failed)
	}
	fmt.Println("all results checked: PASS")
	return nil
}

// measure runs one collective on p ranks with n float64 elements in the
// whole vector, checks the result and returns the slowest rank's mean time
// per call.
func measure(c algorithms.Collective, alg string, p, n, iters int) (time.Duration, error) {
	times := make([]time.Duration, p)
	err := mpi.RunLocal(p, func(comm *mpi.Comm) error {
		r := comm.Rank()
		x := make([]float64, n)
		for i := range x {
			x[i] = float64(r*n + i) // integers: sums are exact
		}
		out := make([]float64, n)
		if c == algorithms.ReduceScatter || c == algorithms.ReduceScatterBlock {
			out = out[:n/p]
		}
		counts := make([]int, p)
		for i := range counts {
			counts[i] = n / p
		}
		call := func() error {
			opt := mpi.WithAlgorithm(alg)
			switch c {
			case algorithms.Allreduce:
				return mpi.Allreduce(comm, x, out, mpi.Sum, opt)
			case algorithms.ReduceScatter:
				return mpi.ReduceScatter(comm, x, out, counts, mpi.Sum, opt)
			case algorithms.ReduceScatterBlock:
				return mpi.ReduceScatterBlock(comm, x, out, mpi.Sum, opt)
			default:
				return mpi.Allgather(comm, x[:n/p], out, opt)
			}
		}
		if err := call(); err != nil { // warm-up, and the call checked
			return err
		}
		if err := check(c, p, r, n, out); err != nil {
			return err
		}
		start := time.Now()
		for range iters {
			if err := call(); err != nil {
				return err
			}
		}
		times[r] = time.Since(start) / time.Duration(iters)
		return nil
	})
	return slices.Max(times), err
}

// check compares out with the expected result on rank r.
func check(c algorithms.Collective, p, r, n int, out []float64) error {
	for j, v := range out {
		i := j // index in the whole vector
		if c == algorithms.ReduceScatter || c == algorithms.ReduceScatterBlock {
			i += r * (n / p)
		}
		var want float64
		switch c {
		case algorithms.Allgather:
			want = float64((i/(n/p))*n + i%(n/p))
		default:
			for q := range p {
				want += float64(q*n + i)
			}
		}
		if v != want {
			return fmt.Errorf("rank %d element %d: got %v, want %v", r, j, v, want)
		}
	}
	return nil
}
