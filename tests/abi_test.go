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

// forcedRounds are tuner.ForcedRounds, with GOCOLL_FALLBACK=silent: an
// algorithm that cannot run a call leaves it to the tuner quietly.
func forcedRounds() [][]string {
	var rounds [][]string
	for _, env := range tuner.ForcedRounds() {
		rounds = append(rounds, append(env, "GOCOLL_FALLBACK=silent"))
	}
	return rounds
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
			expectCounts(t, fmt.Sprintf("subset, %d ranks, forced round %d %v", n, i, env), out, code)
		}
	}
}

// The C fast path for small calls on one host (every type and op it
// takes, around its size limit, mixed with calls that go through Go),
// and the same program with forced algorithms, which never take it.
func TestFastPath(t *testing.T) {
	bin := compile(t, filepath.Join(harness.Bin, "mpicc"), "tests/c/fastpath.c", "fastpath")
	envs := append([][]string{nil}, forcedRounds()...)
	for i, env := range envs {
		for _, n := range []int{1, 2, 3, 5} {
			out, code := run(t, 2*time.Minute, env, gocollrun(n, bin)...)
			expectCounts(t, fmt.Sprintf("fastpath, %d ranks, environment %d %v", n, i, env), out, code)
		}
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
// as libmpich.so.12 through LD_LIBRARY_PATH.
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
		want += len(algorithms.Names(c))
	}
	if rows != want {
		t.Errorf("demo: %d rows in the timing table, want %d:\n%s", rows, want, out)
	}
	if strings.Contains(out, "gocoll: ") && strings.Contains(out, "instead") {
		t.Errorf("demo: a forced algorithm was refused:\n%s", out)
	}
}
