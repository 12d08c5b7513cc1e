package tests

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gocoll/gocoll/tests/internal/harness"
)

// collbenchRun is one run of bench/collbench.c: its arguments besides the
// iteration counts, and what it must print, worked out here from MPI's
// rules, not from collbench's code.
type collbenchRun struct {
	colls []string
	dtype string // -d, or "" for collbench's defaults
	lo    int64  // -m lo:hi
	hi    int64
	total bool // -total
}

// typeBytes are the sizes of the datatypes the tests use (x86-64).
var typeBytes = map[string]int64{
	"MPI_CHAR": 1, "MPI_INT8_T": 1, "MPI_UNSIGNED_CHAR": 1, "MPI_INT": 4, "MPI_FLOAT": 4,
	"MPI_DOUBLE": 8, "MPI_LONG_DOUBLE": 16, "MPI_C_FLOAT_COMPLEX": 8,
}

var collbenchCalls = map[string]string{
	"allreduce": "MPI_Allreduce", "reduce_scatter": "MPI_Reduce_scatter",
	"reduce_scatter_block": "MPI_Reduce_scatter_block", "allgather": "MPI_Allgather",
}

// expected returns the lines collbench must print at np ranks, in order
// (with -check): the comment lines exactly, the time lines as
// `collective bytes` (their times are checked apart).
func (r collbenchRun) expected(np int64) []string {
	out := []string{
		fmt.Sprintf("# collbench: MPI_Barrier before every call, only the call timed; 2 calls (after 1 warm-up) up to 8192 bytes, "+
			"1 (after 0) above; time per call: each rank's mean, then avg, min and max over %d ranks", np),
		"# collective bytes avg_us min_us max_us",
	}
	for _, c := range r.colls {
		dt := r.dtype
		if dt == "" {
			dt = "MPI_FLOAT"
			if c == "allgather" {
				dt = "MPI_CHAR"
			}
		}
		head := fmt.Sprintf("# %s: %s, %s, ", c, collbenchCalls[c], dt)
		switch {
		case c == "allgather" && !r.total:
			head += "size per-rank (bytes each rank contributes; the result is np times larger)"
		case c == "allgather":
			head += "size total (bytes of the whole result; each rank contributes 1/np of it)"
		case c == "reduce_scatter":
			head += "MPI_SUM, size total (bytes of the whole vector; recvcounts split it as evenly as can be, the first n % np ranks one element more)"
		case c == "reduce_scatter_block":
			head += "MPI_SUM, size total (bytes of the whole vector: np x recvcount elements)"
		default:
			head += "MPI_SUM, size total (bytes of the whole vector)"
		}
		out = append(out, head)
		w := typeBytes[dt]
		for b := r.lo; b <= r.hi; b *= 2 {
			e := b / w // whole elements in the size
			var measured int64
			switch {
			case c == "allgather" && r.total:
				measured = e / np * np * w
			case c == "reduce_scatter_block":
				measured = e / np * np * w
			default:
				measured = e * w
			}
			if measured == 0 {
				out = append(out, fmt.Sprintf("# %s %d: skipped, no whole %s for every rank", c, b, dt))
				continue
			}
			if c == "reduce_scatter" {
				// MPI_Reduce_scatter's recvcounts: e/np each, one more for
				// each of the first e%np ranks.
				line := fmt.Sprintf("# reduce_scatter %d recvcounts", measured)
				for i := range np {
					n := e / np
					if i < e%np {
						n++
					}
					line += fmt.Sprintf(" %d", n)
				}
				out = append(out, line)
			}
			out = append(out, fmt.Sprintf("%s %d", c, measured))
		}
	}
	return append(out, "check: PASS")
}

var collbenchTimeLine = regexp.MustCompile(`^([a-z_]+) (\d+) (\d+\.\d\d) (\d+\.\d\d) (\d+\.\d\d)$`)

// checkCollbench compares collbench's output with want, line by line: a
// time line must carry three times, avg between min and max.
func checkCollbench(t *testing.T, what, out string, code int, want []string) {
	t.Helper()
	if code != 0 {
		t.Fatalf("%s: exit %d:\n%s", what, code, out)
	}
	var got []string
	for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if strings.HasPrefix(l, "gocoll: ") { // the library's own notes
			continue
		}
		if m := collbenchTimeLine.FindStringSubmatch(l); m != nil {
			avg, _ := strconv.ParseFloat(m[3], 64)
			lo, _ := strconv.ParseFloat(m[4], 64)
			hi, _ := strconv.ParseFloat(m[5], 64)
			if !(lo <= avg && avg <= hi) {
				t.Errorf("%s: avg outside min..max in %q", what, l)
			}
			l = m[1] + " " + m[2]
		}
		got = append(got, l)
	}
	for i := 0; i < max(len(got), len(want)); i++ {
		g, w := "(nothing)", "(nothing)"
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			t.Fatalf("%s: line %d is\n\t%s\nwant\n\t%s\nwhole output:\n%s", what, i+1, g, w, out)
		}
	}
}

func (r collbenchRun) args() []string {
	a := []string{"-c", strings.Join(r.colls, ","), "-m", fmt.Sprintf("%d:%d", r.lo, r.hi),
		"-i", "2", "-il", "1", "-w", "1", "-wl", "0", "-check"}
	if r.dtype != "" {
		a = append(a, "-d", r.dtype)
	}
	if r.total {
		a = append(a, "-total")
	}
	return a
}

var allColls = []string{"allreduce", "reduce_scatter", "reduce_scatter_block", "allgather"}

// collbenchRuns cover every collective with the default datatypes and with
// integer, floating-point, complex and byte types, at sizes that leave
// remainders over 2 and 3 ranks, skip sizes below one element per rank,
// and cross the 8 KiB line where the large-message counts start.
var collbenchRuns = []collbenchRun{
	{colls: allColls, lo: 4, hi: 64},
	{colls: allColls, dtype: "MPI_INT", lo: 12, hi: 48},
	{colls: allColls, dtype: "MPI_INT8_T", lo: 5, hi: 40},
	{colls: allColls, dtype: "MPI_DOUBLE", lo: 24, hi: 24576},
	{colls: allColls, dtype: "MPI_LONG_DOUBLE", lo: 16, hi: 96},
	{colls: allColls, dtype: "MPI_C_FLOAT_COMPLEX", lo: 8, hi: 56},
	{colls: []string{"allgather"}, dtype: "MPI_CHAR", lo: 1, hi: 9, total: true},
}

// collbench (bench/collbench.c, which gocoll-compare and preload/tune run
// on every MPI) built with gocoll's mpicc verifies every result it times
// (-check: PASS) at 1 to 3 ranks, and says how it measured: the pattern,
// each collective's datatype and whether its sizes are per rank or total,
// the sizes it measured or skipped, and MPI_Reduce_scatter's recvcounts
// (split as evenly as can be, the first ranks getting the remainder).
func TestCollbench(t *testing.T) {
	bin := compile(t, filepath.Join(harness.Bin, "mpicc"), "bench/collbench.c", "collbench")
	for np := int64(1); np <= 3; np++ {
		for _, r := range collbenchRuns {
			what := fmt.Sprintf("np=%d collbench %s", np, strings.Join(r.args(), " "))
			out, code := run(t, 2*time.Minute, nil, gocollrun(int(np), bin, r.args()...)...)
			checkCollbench(t, what, out, code, r.expected(np))
		}
	}
}

// collbench refuses what it cannot measure: a reduction of a type MPI_SUM
// is not defined on, an unknown type or collective; rank 0 says why and
// the run exits non-zero.
func TestCollbenchRefuses(t *testing.T) {
	bin := compile(t, filepath.Join(harness.Bin, "mpicc"), "bench/collbench.c", "collbench")
	for _, tc := range []struct{ args, want string }{
		{"-c allreduce -d MPI_CHAR", "collbench: MPI_SUM is not defined on MPI_CHAR"},
		{"-c reduce_scatter -d MPI_BYTE", "collbench: MPI_SUM is not defined on MPI_BYTE"},
		{"-d MPI_NOSUCH", "collbench: unknown or unsupported datatype MPI_NOSUCH"},
		{"-c alltoall", "collbench: unknown collective"},
		{"-m 8:4", "collbench: bad -m"},
	} {
		out, code := run(t, time.Minute, nil, gocollrun(2, bin, strings.Fields(tc.args)...)...)
		if code == 0 || !strings.Contains(out, tc.want) || strings.Contains(out, "# collbench:") {
			t.Errorf("collbench %s: exit %d, want non-zero, %q and no measurement:\n%s", tc.args, code, tc.want, out)
		}
	}
}

// The same source built with each host MPI's mpicc runs and verifies
// itself under that MPI, natively and with the preload library: the five
// ways gocoll-compare runs it.
func TestCollbenchHostMPIs(t *testing.T) {
	preload := filepath.Join(harness.Root, "build", "lib", "libgocoll-preload.so")
	r := collbenchRun{colls: allColls, lo: 4, hi: 48}
	for _, m := range []struct {
		name, cc, launcher string
		args               func(env string) []string
	}{
		{"openmpi", "mpicc.openmpi", "mpirun.openmpi", func(env string) []string {
			a := []string{"--allow-run-as-root", "--oversubscribe", "--mca", "btl", "self,vader", "-np", "2"}
			if env != "" {
				a = append(a, "-x", env)
			}
			return a
		}},
		{"mpich", "mpicc.mpich", "mpiexec.mpich", func(env string) []string {
			a := []string{"-n", "2"}
			if k, v, ok := strings.Cut(env, "="); ok {
				a = append(a, "-genv", k, v)
			}
			return a
		}},
	} {
		for _, tool := range []string{m.cc, m.launcher} {
			if _, err := exec.LookPath(tool); err != nil {
				t.Fatalf("%s is missing: `make deps` installs Open MPI and MPICH", tool)
			}
		}
		bin := harness.Compile(t, m.cc, "collbench-"+m.name, []string{"-lm"}, "bench/collbench.c")
		for _, env := range []string{"", "LD_PRELOAD=" + preload} {
			argv := append(append([]string{m.launcher}, m.args(env)...), bin)
			out, code := run(t, 2*time.Minute, nil, append(argv, r.args()...)...)
			checkCollbench(t, fmt.Sprintf("%s %s", m.name, env), out, code, r.expected(2))
		}
	}
}
