package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/internal/netns"
	"github.com/gocoll/gocoll/tuner"
)

// The cluster mode (-cluster HOSTSxPPN) measures gocoll alone on an
// emulated cluster (package netns: a network namespace per host, one
// rate-limited link each to a bridge), started by gocollrun across the
// namespaces: per collective, every algorithm that can run across hosts
// forced in turn, and auto, interleaved as the host comparison is, each
// run verifying its results (collbench -check). It prints each one's
// time, the best, auto against the best, and the hierarchical algorithm
// against the best flat one; then the model's price of each (model.go),
// on the machine gocoll-tune fits on the same cluster first.

// collectiveOf is the collective collbench calls name.
func collectiveOf(name string) (algorithms.Collective, error) {
	for _, c := range algorithms.Collectives {
		if strings.ToLower(c.EnvName()) == name {
			return c, nil
		}
	}
	return 0, fmt.Errorf("no collective %q (want allreduce, reduce_scatter, reduce_scatter_block or allgather)", name)
}

// parseCluster reads -cluster's HOSTSxPPN.
func parseCluster(s string) (hosts, ppn int, err error) {
	h, p, ok := strings.Cut(s, "x")
	hosts, err1 := strconv.Atoi(h)
	ppn, err2 := strconv.Atoi(p)
	if !ok || err1 != nil || err2 != nil || hosts < 1 || ppn < 1 {
		return 0, 0, fmt.Errorf("-cluster %q: want HOSTSxRANKS_PER_HOST, e.g. 4x2", s)
	}
	return hosts, ppn, nil
}

// clusterConfigs are the configurations measured for collective c: auto,
// then every algorithm that can run across hosts (not the shm family),
// by name.
func clusterConfigs(c algorithms.Collective, launch func(int) []string, binary string) []config {
	cs := []config{{name: "auto", launch: launch, binary: binary}}
	for _, a := range algorithms.All(c) {
		if a.Direct {
			continue
		}
		cs = append(cs, config{name: a.Name, launch: launch, binary: binary,
			env: []string{tuner.ForceVar(c) + "=" + a.Name, "GOCOLL_FALLBACK=error"}})
	}
	return cs
}

func runCluster(root string, o options) error {
	hosts, ppn, err := parseCluster(o.cluster)
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "gocoll-compare-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	bin := filepath.Join(work, "collbench")
	build := []string{filepath.Join(root, "build", "bin", "mpicc"), "-O2", "-o", bin, filepath.Join(root, "bench", "collbench.c")}
	if out, err := exec.Command(build[0], build[1:]...).CombinedOutput(); err != nil {
		return fmt.Errorf("%v: %v\n%s", build, err, out)
	}
	cl, err := netns.New(hosts, o.rate)
	if err != nil {
		return err
	}
	defer cl.Close()
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-stop
		cl.Close()
		os.Exit(130)
	}()
	var list []string
	for _, h := range cl.Hosts {
		list = append(list, fmt.Sprintf("%s:%d", h, ppn))
	}
	np := hosts * ppn
	launch := func(np int) []string {
		return cl.Exec(0, filepath.Join(root, "build", "bin", "gocollrun"), "-n", strconv.Itoa(np),
			"--host", strings.Join(list, ","), "--launcher", "ip netns exec %h", "--bind", cl.Addrs[0])
	}
	fmt.Printf("%s; %d ranks, %d per host, placed by host (gocollrun --host)\n\n", cl, np, ppn)
	pr, err := fitCluster(root, work, launch(np), hosts, ppn)
	if err != nil {
		return err
	}
	var csv bytes.Buffer
	csv.WriteString("np,config,collective,datatype,size,bytes,min_us,median_us,model_us\n")
	var errs []modelError
	for _, name := range strings.Split(o.colls, ",") {
		c, err := collectiveOf(name)
		if err != nil {
			return err
		}
		configs := clusterConfigs(c, launch, bin)
		// -check: every algorithm's results are verified too (one more
		// call per size, untimed); a wrong one fails the run.
		args := append([]string{"-c", name, "-check"}, o.benchArgs()...)
		rs := newRuns(np, o.reps, configs)
		price := pr.pricing(rs)
		if err := measureInto(rs, configs, args, o, &csv, price); err != nil {
			return err
		}
		reportCluster(os.Stdout, rs, price)
		errs = append(errs, modelErrors(rs, price, modelTargetMin)...)
	}
	summarizeErrors(os.Stdout, errs, modelTargetMin)
	return writeCSV(o, &csv)
}

// fitCluster runs gocoll-tune -machine-only on the cluster's ranks
// (launcher argv launch), prints what it fitted and returns the predictor
// of the ranks placed by host on that machine, with the tuner the auto
// runs build from this environment.
func fitCluster(root, work string, launch []string, hosts, ppn int) (*predictor, error) {
	file := filepath.Join(work, "machine.json")
	argv := append(launch, filepath.Join(root, "build", "bin", "gocoll-tune"), "-machine-only", "-o", file)
	fmt.Fprintf(os.Stderr, "fitting the machine: %s\n", strings.Join(argv, " "))
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("%s: %v\n%s", strings.Join(argv, " "), err, out)
	}
	f, err := tuner.ReadTuningFile(file)
	if err != nil {
		return nil, err
	}
	if f.Machine == nil {
		return nil, fmt.Errorf("%s wrote no machine", argv[len(launch)])
	}
	fmt.Printf("%s\n", bytes.TrimSpace(out))
	fmt.Printf("  (gocoll-tune -machine-only on the same ranks; the model's tables below price every configuration with it)\n\n")
	t, err := tuner.New(nil)
	if err != nil {
		return nil, err
	}
	ids := make([]int, hosts*ppn)
	for r := range ids {
		ids[r] = r / ppn
	}
	return newPredictor(f.Machine.Model(), algorithms.NodeMapOf(ids), t), nil
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

// reportCluster prints one collective measured on the emulated cluster:
// every configuration's lowest time, the fastest algorithm, auto over it
// and (when there is one) the hierarchical algorithm over the fastest
// flat one (below 1: faster); then the model's table (modelTable).
func reportCluster(w io.Writer, rs *runs, price modelFunc) {
	algs := slices.DeleteFunc(slices.Clone(rs.configs), func(n string) bool { return n == "auto" })
	flat := slices.DeleteFunc(slices.Clone(algs), func(n string) bool { return n == "hierarchical" })
	cols := []column{
		{"best", func(k key) string {
			name, _, ok := rs.bestOf(algs, k)
			if !ok {
				return "-"
			}
			return name
		}},
		{"auto/best", func(k key) string {
			_, t, ok := rs.bestOf(algs, k)
			auto, ok2 := rs.best("auto", k)
			return num(auto/t, ok && ok2)
		}},
	}
	if len(flat) < len(algs) {
		cols = append(cols, column{"hierarchical/best-flat", func(k key) string {
			_, f, ok := rs.bestOf(flat, k)
			h, ok2 := rs.best("hierarchical", k)
			return num(h/f, ok && ok2)
		}})
	}
	tables(w, rs, "", cols)
	modelTable(w, rs, price)
}
