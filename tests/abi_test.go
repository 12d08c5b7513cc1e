// Package tests runs gocoll the way C and Fortran users do: programs
// compiled with gocoll's mpicc and mpif90 (and with MPICH's mpicc, for
// the MPICH ABI), launched by gocollrun or MPICH's mpiexec, each checking
// its own results and printing PASS or `N passed, N failed`.
package tests

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/tests/internal/harness"
	"github.com/gocoll/gocoll/tuner"
)

func TestMain(m *testing.M) { harness.Main(m, 1, "build", nil) }

var (
	run          = harness.Run
	gocollrun    = harness.Gocollrun
	expectCounts = harness.ExpectCounts
)

// compile builds src (relative to the repository) with compiler, once.
func compile(t *testing.T, compiler, src, name string) string {
	return harness.Compile(t, compiler, name, []string{"-lm"}, src)
}

// forcedRounds are tuner.ForcedRounds, with GOCOLL_FALLBACK=silent (an
// algorithm that cannot run a call leaves it to the tuner quietly) and
// GOCOLL_REPORT=1, whose lines checkForced reads.
func forcedRounds() [][]string {
	var rounds [][]string
	for _, env := range tuner.ForcedRounds() {
		rounds = append(rounds, append(env, "GOCOLL_FALLBACK=silent", "GOCOLL_REPORT=1"))
	}
	return rounds
}

// forcedBy maps each call a GOCOLL_<COLLECTIVE>_ALGORITHM variable forces
// to that collective (MPI_Allgatherv runs MPI_Allgather's algorithms).
var forcedBy = map[string]algorithms.Collective{
	"MPI_Allreduce": algorithms.Allreduce, "MPI_Reduce_scatter": algorithms.ReduceScatter,
	"MPI_Reduce_scatter_block": algorithms.ReduceScatterBlock, "MPI_Allgather": algorithms.Allgather,
	"MPI_Allgatherv": algorithms.Allgather,
}

// forcedIn returns the algorithm env forces for collective c.
func forcedIn(env []string, c algorithms.Collective) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, tuner.ForceVar(c)+"="); ok {
			return v
		}
	}
	return ""
}

// checkForced reads the GOCOLL_REPORT lines of a run of n ranks under the
// forced round env and checks that every rank reported, that each call in
// want ran, and that for each forced call the forced algorithm ran every
// call Go ran except the fallbacks, which happen only where the
// algorithm's restrictions (the registry's Check) can fail at n ranks.
func checkForced(t *testing.T, what, out string, env []string, n int, want []string) {
	t.Helper()
	rep := harness.ParseReport(t, out)
	for r := range n {
		calls := rep[r]
		if calls == nil {
			t.Errorf("%s: no GOCOLL_REPORT lines from rank %d:\n%s", what, r, out)
			continue
		}
		for _, call := range want {
			if calls[call]["fast"]+calls[call]["go"] == 0 {
				t.Errorf("%s: rank %d reports no %s calls", what, r, call)
			}
		}
		for call, kv := range calls {
			c, ok := forcedBy[call]
			if !ok {
				continue
			}
			x := forcedIn(env, c)
			a, err := algorithms.Lookup(c, x)
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			var others int64
			for _, name := range algorithms.Names(c) {
				if name != x {
					others += kv[name]
				}
			}
			fb := kv["fallback"]
			p := algorithms.Params{P: n, SharedMemory: n > 1}
			canAll := a.Check(p) == nil // any op
			p.Commutative = true
			canSome := a.Check(p) == nil
			switch {
			case others != fb || kv[x]+fb != kv["go"]:
				t.Errorf("%s: rank %d: %s forced to %s: %v; want every call %s or a fallback", what, r, call, x, kv, x)
			case canAll && fb != 0:
				t.Errorf("%s: rank %d: %s forced to %s, which can run any call at %d ranks, fell back %d times: %v", what, r, call, x, n, fb, kv)
			case canSome && kv["go"] > 0 && kv[x] == 0:
				t.Errorf("%s: rank %d: %s forced to %s ran none of its calls: %v", what, r, call, x, kv)
			case !canSome && kv[x] != 0:
				t.Errorf("%s: rank %d: %s forced to %s, which cannot run at %d ranks, ran %d calls", what, r, call, x, n, kv[x])
			}
		}
	}
}

// The examples print PASS at every rank count, each rank its own.
func TestExamples(t *testing.T) {
	progs := map[string]string{
		"allreduce":      "examples/c/allreduce.c",
		"reduce_scatter": "examples/c/reduce_scatter.c",
		"allgather":      "examples/c/allgather.c",
	}
	for name, src := range progs {
		bin := compile(t, filepath.Join(harness.Bin, "mpicc"), src, name)
		for n := 1; n <= 8; n++ {
			out, code := run(t, time.Minute, nil, gocollrun(n, bin)...)
			if code != 0 || strings.Count(out, ": PASS\n") != n || strings.Contains(out, "FAIL") {
				t.Errorf("%s on %d ranks: exit %d:\n%s", name, n, code, out)
			}
		}
	}
	f := compile(t, filepath.Join(harness.Bin, "mpif90"), "examples/fortran/allreduce.f90", "fallreduce")
	for _, n := range []int{1, 2, 3, 4} {
		if out, code := run(t, time.Minute, nil, gocollrun(n, f)...); code != 0 || strings.Count(out, ": PASS\n") != n {
			t.Errorf("fortran allreduce on %d ranks: exit %d:\n%s", n, code, out)
		}
	}
}

// The whole exported subset at p = 1..8, under every forced algorithm.
func TestSubsetEveryAlgorithm(t *testing.T) {
	bin := compile(t, filepath.Join(harness.Bin, "mpicc"), "tests/c/subset.c", "subset")
	for i, env := range forcedRounds() {
		for n := 1; n <= 8; n++ {
			out, code := run(t, 2*time.Minute, env, gocollrun(n, bin)...)
			what := fmt.Sprintf("subset, %d ranks, forced round %d %v", n, i, env)
			expectCounts(t, what, out, code)
			checkForced(t, what, out, env, n, []string{"MPI_Allreduce", "MPI_Reduce_scatter", "MPI_Reduce_scatter_block", "MPI_Allgather", "MPI_Allgatherv"})
		}
	}
}

// The C fast path for small calls on one host (every type and op it
// takes, around its size limit, mixed with calls that go through Go;
// MPI_Reduce_scatter with counts, MPI_Bcast from every root and
// MPI_Allgather of one- and two-byte types compared with the same calls
// through Go),
// and the same program with forced algorithms, which take it only for
// shm. The program checks with gocoll's counters that small calls ran on
// the fast path without entering Go wherever it is on (GOCOLL_REPORT=1
// must not turn it off), and in Go wherever it is off or must decline.
func TestFastPath(t *testing.T) {
	bin := compile(t, filepath.Join(harness.Bin, "mpicc"), "tests/c/fastpath.c", "fastpath")
	envs := append([][]string{nil, {"GOCOLL_REPORT=1"}}, forcedRounds()...)
	for i, env := range envs {
		for _, n := range []int{1, 2, 3, 5} {
			out, code := run(t, 2*time.Minute, env, gocollrun(n, bin)...)
			what := fmt.Sprintf("fastpath, %d ranks, environment %d %v", n, i, env)
			expectCounts(t, what, out, code)
			if i >= 2 {
				checkForced(t, what, out, env, n, []string{"MPI_Allreduce", "MPI_Reduce_scatter", "MPI_Reduce_scatter_block", "MPI_Allgather"})
			} else if rep := harness.ParseReport(t, out); i == 1 && (len(rep) != n || n > 1 && rep[0]["MPI_Barrier"]["fast"] == 0) {
				t.Errorf("%s: want GOCOLL_REPORT lines from every rank, with fast barriers:\n%s", what, out)
			}
		}
	}
}

// With GOCOLL_FALLBACK=error, through the C ABI (tests/c/forced.c), at 1
// to 3 ranks: each forced algorithm runs every call it can, counted as
// its own, and each call it cannot (a non-commutative op for ring and
// recursive_halving, shm without a shared segment) returns MPI_ERR_ARG
// under MPI_ERRORS_RETURN and runs nothing; under the default handler the
// refusal ends the job with a message naming the algorithm.
func TestForcedFallbackError(t *testing.T) {
	bin := compile(t, filepath.Join(harness.Bin, "mpicc"), "tests/c/forced.c", "forced")
	for i, env := range tuner.ForcedRounds() {
		env = append(env, "GOCOLL_FALLBACK=error")
		for _, n := range []int{1, 2, 3} {
			var args []string
			for _, c := range algorithms.Collectives {
				x := forcedIn(env, c)
				a, err := algorithms.Lookup(c, x)
				if err != nil {
					t.Fatal(err)
				}
				can := func(commutative bool) int {
					if a.Check(algorithms.Params{P: n, Commutative: commutative, SharedMemory: n > 1}) == nil {
						return 1
					}
					return 0
				}
				args = append(args, fmt.Sprintf("%s:%s:%d:%d", tuner.CollectiveName(c), x, can(true), can(false)))
			}
			out, code := run(t, 2*time.Minute, env, gocollrun(n, bin, args...)...)
			what := fmt.Sprintf("forced, %d ranks, round %d %v", n, i, args)
			m := regexp.MustCompile(`(?m)^(\d+) passed, (\d+) failed$`).FindAllStringSubmatch(out, -1)
			if code != 0 || len(m) != n {
				t.Errorf("%s: exit %d, %d verdicts for %d ranks:\n%s", what, code, len(m), n, out)
				continue
			}
			for _, v := range m {
				if v[1] == "0" || v[2] != "0" {
					t.Errorf("%s: a rank has %s passed, %s failed:\n%s", what, v[1], v[2], out)
				}
			}
		}
	}
	env := []string{"GOCOLL_FALLBACK=error", "GOCOLL_ALLREDUCE_ALGORITHM=ring"}
	out, code := run(t, time.Minute, env, gocollrun(2, bin, "fatal")...)
	refusal := regexp.MustCompile(`gocoll: MPI_Allreduce: forced algorithm cannot run this call \(GOCOLL_FALLBACK=error\): .*"ring" needs a commutative op`)
	if code == 0 || !refusal.MatchString(out) || strings.Contains(out, "the refused call returned") {
		t.Errorf("a refused call under MPI_ERRORS_ARE_FATAL: exit %d, want the job ended naming ring:\n%s", code, out)
	}
}

// The Fortran bindings: `use mpi` and fixed-form mpif.h.
func TestFortran(t *testing.T) {
	sub := compile(t, filepath.Join(harness.Bin, "mpif90"), "tests/fortran/subset.f90", "fsubset")
	fixed := compile(t, filepath.Join(harness.Bin, "mpif90"), "tests/fortran/fixed.f", "ffixed")
	for _, n := range []int{1, 2, 3, 5} {
		out, code := run(t, time.Minute, nil, gocollrun(n, sub)...)
		harness.ExpectRanks(t, fmt.Sprintf("fortran subset on %d ranks", n), out, code, n)
		if out, code := run(t, time.Minute, nil, gocollrun(n, fixed)...); code != 0 || strings.Count(out, ": fixed-form allreduce: PASS\n") != n {
			t.Errorf("fixed-form on %d ranks: exit %d:\n%s", n, code, out)
		}
	}
}

// A binary built with MPICH's own mpicc runs unchanged on gocoll, found
// as libmpich.so.12 through LD_LIBRARY_PATH, blocking and nonblocking.
func TestMPICHBinaryRunsOnGocoll(t *testing.T) {
	if _, err := exec.LookPath("mpicc.mpich"); err != nil {
		t.Fatal("mpicc.mpich is missing: `make deps` installs it")
	}
	bin := compile(t, "mpicc.mpich", "tests/c/subset.c", "subset-mpich")
	env := []string{"LD_LIBRARY_PATH=" + filepath.Join(harness.Root, "build", "lib", "mpich-abi")}
	out, _ := run(t, time.Minute, env, "ldd", bin)
	if !strings.Contains(out, filepath.Join(harness.Root, "build", "lib", "mpich-abi", "libmpich.so.12")) {
		t.Fatalf("the MPICH binary does not load gocoll:\n%s", out)
	}
	for _, n := range []int{1, 2, 4} {
		out, code := run(t, time.Minute, env, gocollrun(n, bin)...)
		harness.ExpectRanks(t, fmt.Sprintf("MPICH-built subset on %d ranks", n), out, code, n)
	}
	// The nonblocking and persistent forms, their requests and statuses
	// in MPICH's layout.
	nb := compile(t, "mpicc.mpich", "tests/c/nonblocking.c", "nonblocking-on-gocoll")
	for _, n := range []int{1, 3} {
		out, code := run(t, 2*time.Minute, env, gocollrun(n, nb)...)
		harness.ExpectRanks(t, fmt.Sprintf("MPICH-built nonblocking on %d ranks", n), out, code, n)
	}
}

// A gocoll program launched by MPICH's hydra (PMI-1).
func TestHydraLaunchesGocoll(t *testing.T) {
	if _, err := exec.LookPath("mpiexec.mpich"); err != nil {
		t.Fatal("mpiexec.mpich is missing: `make deps` installs it")
	}
	bin := compile(t, filepath.Join(harness.Bin, "mpicc"), "tests/c/subset.c", "subset")
	for _, n := range []int{1, 3} {
		out, code := run(t, time.Minute, nil, "mpiexec.mpich", "-n", strconv.Itoa(n), bin)
		harness.ExpectRanks(t, fmt.Sprintf("subset under mpiexec.mpich -n %d", n), out, code, n)
	}
}

// With the default error handler a bad argument ends the whole job,
// naming the call, the error and the rank.
func TestFatalErrorAbortsTheJob(t *testing.T) {
	bin := compile(t, filepath.Join(harness.Bin, "mpicc"), "tests/c/fatal.c", "fatal")
	out, code := run(t, time.Minute, nil, gocollrun(3, bin)...)
	if code == 0 || strings.Contains(out, "still running") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if !regexp.MustCompile(`gocoll: MPI_Allreduce: invalid datatype.*\(rank 2\)`).MatchString(out) {
		t.Errorf("no message naming the call, the error and the rank:\n%s", out)
	}
}

// A rank killed in the middle of collectives makes gocollrun end the job
// within seconds, naming the rank, and no shared-memory segment is left.
func TestKilledRankEndsTheJob(t *testing.T) {
	bin := compile(t, filepath.Join(harness.Bin, "mpicc"), "tests/c/spin.c", "spin")
	jobID := fmt.Sprintf("killtest%d", time.Now().UnixNano())
	cmd := exec.Command(filepath.Join(harness.Bin, "gocollrun"), "-n", "4", bin)
	cmd.Env = append(os.Environ(), "GOCOLL_JOB_ID="+jobID)
	stdout, _ := cmd.StdoutPipe()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pids := map[int]int{}
	sc := bufio.NewScanner(stdout)
	re := regexp.MustCompile(`^rank (\d+) pid (\d+)$`)
	for len(pids) < 4 && sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			r, _ := strconv.Atoi(m[1])
			pids[r], _ = strconv.Atoi(m[2])
		}
	}
	if len(pids) < 4 {
		cmd.Process.Kill()
		t.Fatalf("ranks did not start: %v\n%s", pids, stderr.String())
	}
	time.Sleep(200 * time.Millisecond) // well inside the allreduce loop
	start := time.Now()
	if err := exec.Command("kill", "-KILL", strconv.Itoa(pids[2])).Run(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("gocollrun exited 0 after a rank was killed")
		}
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatal("job still running 20 s after a rank was killed")
	}
	t.Logf("job ended %v after the kill", time.Since(start))
	if !strings.Contains(stderr.String(), "rank 2") || !strings.Contains(stderr.String(), "SIGKILL") {
		t.Errorf("gocollrun's message does not name rank 2 and SIGKILL:\n%s", stderr.String())
	}
	left, _ := filepath.Glob("/dev/shm/gocoll-" + jobID + "*")
	if len(left) > 0 {
		t.Errorf("shared-memory segments left behind: %v", left)
	}
}

// The wrappers work inside builds that set CC=mpicc (as configure scripts
// do), and -show prints the command.
func TestWrappers(t *testing.T) {
	for _, w := range []string{"mpicc", "mpicxx", "mpif90"} {
		path := filepath.Join(harness.Bin, w)
		out, code := run(t, 30*time.Second, []string{"CC=" + path, "CXX=" + path, "FC=" + path}, path, "-show", "x.c")
		if code != 0 || !strings.Contains(out, "-lgocoll") || !strings.Contains(out, filepath.Join(harness.Root, "include")) {
			t.Errorf("%s -show: exit %d: %s", w, code, out)
		}
	}
	src := filepath.Join(harness.Work, "hello.c")
	os.WriteFile(src, []byte("#include <mpi.h>\nint main(int c, char **v) { MPI_Init(&c, &v); MPI_Finalize(); return 0; }\n"), 0o644)
	cc := filepath.Join(harness.Bin, "mpicc")
	if out, code := run(t, time.Minute, []string{"CC=" + cc}, cc, "-o", filepath.Join(harness.Work, "hello"), src); code != 0 {
		t.Fatalf("mpicc with CC=mpicc: exit %d: %s", code, out)
	}
}

// A program started without any launcher runs as a single rank.
func TestSingletonWithoutLauncher(t *testing.T) {
	bin := compile(t, filepath.Join(harness.Bin, "mpicc"), "tests/c/subset.c", "subset")
	out, code := run(t, time.Minute, nil, bin)
	harness.ExpectRanks(t, "subset without a launcher", out, code, 1)
}

// Calling MPI before MPI_Init is an error that names the call.
func TestCallBeforeInit(t *testing.T) {
	src := filepath.Join(harness.Work, "early.c")
	os.WriteFile(src, []byte("#include <mpi.h>\nint main(void) { int r; MPI_Comm_rank(MPI_COMM_WORLD, &r); return 0; }\n"), 0o644)
	bin := filepath.Join(harness.Work, "early")
	if out, code := run(t, time.Minute, nil, filepath.Join(harness.Bin, "mpicc"), "-o", bin, src); code != 0 {
		t.Fatal(out)
	}
	out, code := run(t, time.Minute, nil, bin)
	if code == 0 || !strings.Contains(out, "MPI_Comm_rank: called before MPI_Init") {
		t.Fatalf("exit %d: %s", code, out)
	}
}

// The main job (make demo, tools/demo.sh) runs the examples, whose ranks
// each print PASS, and fills its timing table: a number for every algorithm of every
// collective at every size.
func TestDemo(t *testing.T) {
	out, code := run(t, 5*time.Minute, []string{"NP=2"}, filepath.Join(harness.Root, "tools", "demo.sh"))
	if code != 0 || strings.Count(out, ": PASS\n") != 4*2 {
		t.Fatalf("demo: exit %d, %d PASS lines, want 4 programs times 2 ranks:\n%s", code, strings.Count(out, ": PASS\n"), out)
	}
	rows := 0
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) != 5 || !strings.HasPrefix(f[0], "MPI_") {
			continue
		}
		rows++
		for _, v := range f[2:] {
			if _, err := strconv.ParseFloat(v, 64); err != nil {
				t.Errorf("demo: %q is not a time in %q", v, line)
			}
		}
	}
	want := 3 // auto, once per collective
	for _, c := range []algorithms.Collective{algorithms.Allreduce, algorithms.ReduceScatterBlock, algorithms.Allgather} {
		want += len(algorithms.HostNames(c))
	}
	if rows != want {
		t.Errorf("demo: %d rows in the timing table, want %d:\n%s", rows, want, out)
	}
	if strings.Contains(out, "gocoll: ") && strings.Contains(out, "instead") {
		t.Errorf("demo: a forced algorithm was refused:\n%s", out)
	}
}
