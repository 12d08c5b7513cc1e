// Command gocoll-tune measures every algorithm of every collective on this
// machine and prints, per collective and rank count, which algorithm is
// fastest at each message size, plus the tuning rules (GOCOLL_TUNING_FILE
// format) that follow from it.
//
//	gocoll-tune [-ranks 2,4,8] [-min 8] [-max 16777216] [-reps 7] [-rules out.json]
//
// Sizes go up by factors of 4. The algorithms of one size are measured in
// turn, repeatedly (reps rounds, median kept), so that noise from the
// machine hits all of them alike. Ranks are goroutines over the in-process
// transport.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/coll"
	"github.com/gocoll/gocoll/ops"
	"github.com/gocoll/gocoll/transport/inproc"
	"github.com/gocoll/gocoll/tuner"
)

func main() {
	ranks := flag.String("ranks", "2,4,8", "comma-separated rank counts")
	minSize := flag.Int("min", 8, "smallest message in bytes")
	maxSize := flag.Int("max", 16<<20, "largest message in bytes")
	reps := flag.Int("reps", 7, "measurement rounds per size (the median is kept)")
	rulesOut := flag.String("rules", "", "write the derived rules to this file")
	flag.Parse()
	var ps []int
	for _, f := range strings.Split(*ranks, ",") {
		p, err := strconv.Atoi(f)
		if err != nil || p < 2 {
			fmt.Fprintf(os.Stderr, "gocoll-tune: bad rank count %q\n", f)
			os.Exit(2)
		}
		ps = append(ps, p)
	}
	var rules []tuner.Rule
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "collective\tranks\tbytes\tfastest\ttimes (µs, median)")
	for _, c := range algorithms.Collectives {
		for _, p := range ps {
			var best []string
			var sizes []int
			for size := *minSize; size <= *maxSize; size *= 4 {
				times := map[string]time.Duration{}
				names := algorithms.Names(c)
				samples := map[string][]time.Duration{}
				for range *reps {
					for _, alg := range names {
						d, err := measure(c, alg, p, size)
						if err != nil {
							fmt.Fprintln(os.Stderr, "gocoll-tune:", err)
							os.Exit(1)
						}
						samples[alg] = append(samples[alg], d)
					}
				}
				var parts []string
				win := ""
				for _, alg := range names {
					slices.Sort(samples[alg])
					times[alg] = samples[alg][len(samples[alg])/2]
					parts = append(parts, fmt.Sprintf("%s %.1f", alg, float64(times[alg].Nanoseconds())/1e3))
					if win == "" || times[alg] < times[win] {
						win = alg
					}
				}
				fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\n", c, p, size, win, strings.Join(parts, ", "))
				best, sizes = append(best, win), append(sizes, size)
			}
			rules = append(rules, rulesFor(c, p, sizes, best)...)
		}
	}
	tw.Flush()
	out, _ := json.MarshalIndent(tuner.File{Rules: rules}, "", "  ")
	if *rulesOut != "" {
		if err := os.WriteFile(*rulesOut, append(out, '\n'), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "gocoll-tune:", err)
			os.Exit(1)
		}
	} else {
		fmt.Println(string(out))
	}
}

// rulesFor turns the winners at increasing sizes into size ranges, for
// exactly p ranks.
func rulesFor(c algorithms.Collective, p int, sizes []int, best []string) []tuner.Rule {
	var rules []tuner.Rule
	for i := 0; i < len(best); {
		j := i
		for j+1 < len(best) && best[j+1] == best[i] {
			j++
		}
		r := tuner.Rule{Collective: tuner.CollectiveName(c), MinRanks: p, MaxRanks: p, Algorithm: best[i]}
		if i > 0 {
			r.MinBytes = int64(sizes[i-1]+sizes[i]) / 2
		}
		if j+1 < len(best) {
			r.MaxBytes = int64(sizes[j]+sizes[j+1]) / 2
		}
		rules = append(rules, r)
		i = j + 1
	}
	return rules
}

// measure returns the slowest rank's time per call of one collective with
// size bytes (of the whole vector) of float32.
func measure(c algorithms.Collective, alg string, p, size int) (time.Duration, error) {
	tu, err := tuner.New(func(string) string { return "" })
	if err != nil {
		return 0, err
	}
	cfg := &coll.Config{Tuner: tu}
	eps := inproc.New(p)
	defer func() {
		for _, ep := range eps {
			ep.Close()
		}
	}()
	ranks := make([]int, p)
	for i := range ranks {
		ranks[i] = i
	}
	n := max(size/4/p, 1) * p
	iters := max(3, min(200, (1<<22)/max(size, 1)))
	times := make([]time.Duration, p)
	errs := make([]error, p)
	var wg sync.WaitGroup
	for r := range p {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cm, err := coll.NewComm(eps[r], ranks, 1, "tune", cfg)
			if err != nil {
				errs[r] = err
				return
			}
			send, recv := make([]byte, n*4), make([]byte, n*4)
			a := coll.Args{Send: send, Recv: recv, Type: ops.Float, Op: coll.Op{Builtin: ops.Sum}, Algorithm: alg}
			call := func() error {
				switch c {
				case algorithms.Allreduce:
					a.Count = n
					return cm.Allreduce(a)
				case algorithms.ReduceScatter:
					counts := make([]int, p)
					for i := range counts {
						counts[i] = n / p
					}
					a.Counts, a.Recv = counts, recv[:n/p*4]
					return cm.ReduceScatter(a)
				case algorithms.ReduceScatterBlock:
					a.Count, a.Recv = n/p, recv[:n/p*4]
					return cm.ReduceScatterBlock(a)
				}
				a.Count, a.Send = n/p, send[:n/p*4]
				return cm.Allgather(a)
			}
			if err := call(); err != nil {
				errs[r] = err
				return
			}
			start := time.Now()
			for range iters {
				if err := call(); err != nil {
					errs[r] = err
					return
				}
			}
			times[r] = time.Since(start) / time.Duration(iters)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return 0, err
		}
	}
	return slices.Max(times), nil
}
