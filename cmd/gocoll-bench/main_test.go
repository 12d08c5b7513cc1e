package main

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/mpi"
)

// TestMain runs the command itself when the tests re-execute their binary
// with GOCOLL_BENCH_MAIN=1 (TestCommandLocal).
func TestMain(m *testing.M) {
	if os.Getenv("GOCOLL_BENCH_MAIN") == "1" {
		os.Args = append([]string{"gocoll-bench"}, strings.Fields(os.Getenv("GOCOLL_BENCH_ARGS"))...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// MPI_Reduce_scatter's recvcounts split the vector as the MPI suites do:
// n/p each, the first n%p ranks one element more.
func TestRecvcounts(t *testing.T) {
	for _, tc := range []struct {
		n, p int
		want []int
	}{
		{7, 3, []int{3, 2, 2}}, {1, 3, []int{1, 0, 0}}, {6, 3, []int{2, 2, 2}},
		{5, 4, []int{2, 1, 1, 1}}, {3, 1, []int{3}}, {11, 4, []int{3, 3, 3, 2}},
	} {
		if got := recvcounts(tc.n, tc.p); !slices.Equal(got, tc.want) {
			t.Errorf("recvcounts(%d, %d) = %v, want %v", tc.n, tc.p, got, tc.want)
		}
	}
}

// A size is the whole vector, or for allgather with -per-rank what each
// rank sends; it is rounded to whole elements (to whole blocks for the
// block collectives), at least one.
func TestLayout(t *testing.T) {
	for _, tc := range []struct {
		coll       algorithms.Collective
		size, p    int
		bytes      int64
		perRank    bool
		n          int
		counts     []int
		reportedAs int64
	}{
		{algorithms.Allreduce, 4, 3, 28, false, 7, nil, 28},
		{algorithms.ReduceScatter, 4, 3, 28, false, 7, []int{3, 2, 2}, 28},
		{algorithms.ReduceScatterBlock, 4, 3, 28, false, 6, []int{2, 2, 2}, 24},
		{algorithms.Allgather, 1, 3, 28, false, 27, []int{9, 9, 9}, 27},
		{algorithms.Allgather, 1, 3, 28, true, 84, []int{28, 28, 28}, 28},
		{algorithms.Allgather, 8, 2, 4, true, 2, []int{1, 1}, 8},
	} {
		n, counts, rep := layout(tc.coll, tc.size, tc.p, tc.bytes, tc.perRank)
		if n != tc.n || !slices.Equal(counts, tc.counts) || rep != tc.reportedAs {
			t.Errorf("layout(%v, %d B elements, p=%d, %d B, per-rank %v) = %d %v %d, want %d %v %d",
				tc.coll, tc.size, tc.p, tc.bytes, tc.perRank, n, counts, rep, tc.n, tc.counts, tc.reportedAs)
		}
	}
}

// checkResult finds a result that is off: a block in the wrong place, a
// wrong sum, a write after a reduce-scatter's block.
func TestCheckResultFails(t *testing.T) {
	p, counts := 3, []int{3, 2, 2}
	good := func(r, displ int) []float32 {
		out := make([]float32, 7)
		for j := range counts[r] {
			for q := range p {
				out[j] += value[float32](q, displ+j)
			}
		}
		return out
	}
	if bad := checkResult(algorithms.ReduceScatter, good(1, 3), p, 1, counts, 3); bad != 0 {
		t.Fatalf("a right result: %d wrong", bad)
	}
	if bad := checkResult(algorithms.ReduceScatter, good(1, 2), p, 1, counts, 3); bad == 0 {
		t.Errorf("rank 1's block taken from the wrong place passed")
	}
	over := good(1, 3)
	over[counts[1]] = 1
	if bad := checkResult(algorithms.ReduceScatter, over, p, 1, counts, 3); bad != 1 {
		t.Errorf("a write after the block: %d wrong, want 1", bad)
	}
	gather := make([]int8, 6)
	for j := range gather {
		gather[j] = gathered[int8](j/2, j%2)
	}
	gather[0], gather[2] = gather[2], gather[0] // ranks 0 and 1 swapped
	if bad := checkResult(algorithms.Allgather, gather, p, 0, nil, 0); bad != 2 {
		t.Errorf("allgather with two blocks swapped: %d wrong, want 2", bad)
	}
}

// Every collective, reduce_scatter with uneven counts included, gives the
// right result for each new datatype at sizes that leave remainders, with
// and without -barrier and -per-rank, at 1 to 3 ranks as goroutines.
func TestMeasureChecks(t *testing.T) {
	colls := []algorithms.Collective{algorithms.Allreduce, algorithms.ReduceScatter, algorithms.ReduceScatterBlock, algorithms.Allgather}
	for p := 1; p <= 3; p++ {
		for _, o := range []options{
			{warmup: 1, iters: 2, reps: 1, check: true},
			{warmup: 1, iters: 2, reps: 1, check: true, barrier: true, perRank: true},
		} {
			var results []Result
			err := mpi.RunLocal(p, func(c *mpi.Comm) error {
				for _, coll := range colls {
					for _, typ := range []string{"int8", "byte", "uint16", "float64", "int64"} {
						for _, b := range []int64{5, 24, 40} {
							r, err := measure(c, coll, "auto", typ, b, o)
							if err != nil {
								return err
							}
							if c.Rank() == 0 {
								results = append(results, r)
							}
						}
					}
				}
				return nil
			})
			if err != nil {
				t.Fatalf("p=%d %+v: %v", p, o, err)
			}
			for _, r := range results {
				wantSize := "total"
				if o.perRank && r.Collective == "MPI_Allgather" {
					wantSize = "per-rank"
				}
				if r.Check != "ok" || r.Size != wantSize || r.Barrier != o.barrier || r.Ranks != p || r.MedianUs <= 0 {
					t.Errorf("p=%d barrier=%v per-rank=%v: %+v", p, o.barrier, o.perRank, r)
				}
			}
			if len(results) != len(colls)*5*3 {
				t.Errorf("p=%d: %d results", p, len(results))
			}
		}
	}
}

// The command with -local, -barrier, -per-rank, -check and the new
// datatypes says how it measured and checks every line.
func TestCommandLocal(t *testing.T) {
	args := "-local 3 -c allreduce,reduce_scatter,reduce_scatter_block,allgather -d int8,byte,float32 -b 5 -e 40 -n 2 -r 1 -w 1 -barrier -per-rank -check"
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "GOCOLL_BENCH_MAIN=1", "GOCOLL_BENCH_ARGS="+args)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("gocoll-bench %s: %v\n%s", args, err, out)
	}
	s := string(out)
	for _, want := range []string{
		"# a barrier before every call, only the call timed; time per call: each rank's mean, averaged over ranks\n",
		"# bytes: the whole vector; allgather: what each rank sends",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("no %q in:\n%s", want, s)
		}
	}
	line := regexp.MustCompile(`(?m)^\s+(MPI_\w+)\s+auto\s+(\w+)\s+3\s+(\d+)\s.*\s(\S+)$`)
	rows := line.FindAllStringSubmatch(s, -1)
	if len(rows) != 4*3*4 {
		t.Errorf("%d result lines, want 48:\n%s", len(rows), s)
	}
	for _, m := range rows {
		if m[4] != "ok" {
			t.Errorf("check %s in %q", m[4], m[0])
		}
	}
	// Allgather's sizes are per rank: 5 bytes of int8 per rank are 5, not
	// the 3 (one per rank) the whole output of 5 would give.
	if !regexp.MustCompile(`(?m)^\s+MPI_Allgather\s+auto\s+int8\s+3\s+5\s`).MatchString(s) {
		t.Errorf("no per-rank 5-byte int8 allgather line:\n%s", s)
	}
}
