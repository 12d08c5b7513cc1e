// Package preload tests libgocoll-preload.so the way users run it: test
// programs built with the host MPIs' own compilers (mpicc.openmpi,
// mpicc.mpich, mpif90.*), unchanged, launched by mpirun.openmpi and
// mpiexec.mpich with the library preloaded, at 1 to 5 ranks, with every
// algorithm forced in turn. Each program checks its results against a
// reference it computes itself and prints `N passed, N failed`, and says
// how many calls gocoll should have run: the test counts the
// GOCOLL_DEBUG=info lines of every rank against that, so a silent
// fallback to the host MPI fails the test.
package preload

import (
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocoll/gocoll/algorithms"
	"github.com/gocoll/gocoll/tests/internal/harness"
	"github.com/gocoll/gocoll/tuner"
)

func TestMain(m *testing.M) {
	harness.Main(m, 2, "lib", func() {
		// `make test` prints this after go test, which shows nothing of a
		// package that passes.
		summary := fmt.Sprintf("tests/preload: %d runs of the test programs under LD_PRELOAD (Open MPI and MPICH, 1..5 ranks): %d passed, %d failed\n",
			totals.runs, totals.passed, totals.failed)
		os.WriteFile(filepath.Join(harness.Root, "build", "tests-preload.txt"), []byte(summary), 0o644)
		fmt.Print(summary)
	})
}

// preloadLib is the library under test.
func preloadLib() string { return filepath.Join(harness.Root, "build", "lib", "libgocoll-preload.so") }

// totals sums the checks of every run, for the summary.
var totals struct{ runs, passed, failed int }

// hostMPI is one host MPI: its compilers and how to launch a job with
// environment variables for the ranks.
type hostMPI struct {
	name   string // openmpi or mpich
	cc, fc string
	run    string
	args   func(np int, env []string) []string
}

var hostMPIs = []hostMPI{
	{name: "openmpi", cc: "mpicc.openmpi", fc: "mpif90.openmpi", run: "mpirun.openmpi",
		args: func(np int, env []string) []string {
			// As root, with more ranks than cores; shared memory and self
			// only (no network needed).
			a := []string{"--allow-run-as-root", "--oversubscribe", "--mca", "btl", "self,vader", "-np", strconv.Itoa(np)}
			for _, e := range env {
				a = append(a, "-x", e)
			}
			return a
		}},
	{name: "mpich", cc: "mpicc.mpich", fc: "mpif90.mpich", run: "mpiexec.mpich",
		args: func(np int, env []string) []string {
			a := []string{"-n", strconv.Itoa(np)}
			for _, e := range env {
				k, v, _ := strings.Cut(e, "=")
				a = append(a, "-genv", k, v)
			}
			return a
		}},
}

// need fails the test if a host MPI's tool is missing.
func need(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is missing: `make deps` installs Open MPI and MPICH (Debian packages openmpi-bin libopenmpi-dev mpich libmpich-dev gfortran)", tool)
		}
	}
}

// compile builds a test program of testdata once per compiler.
func compile(t *testing.T, compiler string, name string, srcs ...string) string {
	var flags []string
	if strings.Contains(compiler, "f90") {
		// Open MPI's mpif.h needs the mismatch allowance with gfortran 12.
		flags = []string{"-fallow-argument-mismatch"}
	}
	for i, s := range srcs {
		srcs[i] = filepath.Join("tests", "preload", "testdata", s)
	}
	return harness.Compile(t, compiler, name, flags, srcs...)
}

// round is one setting of the algorithm variables.
type round struct {
	name string
	env  []string
}

// rounds returns auto, then rounds that together force every algorithm
// of every collective (round i forces the i-th of each), then native.
func rounds() []round {
	rs := []round{{name: "auto"}}
	for i, env := range tuner.ForcedRounds() {
		rs = append(rs, round{name: fmt.Sprintf("forced%d", i), env: append(env, "GOCOLL_FALLBACK=silent")})
	}
	var native []string
	for _, c := range algorithms.Collectives {
		native = append(native, tuner.ForceVar(c)+"=native")
	}
	return append(rs, round{name: "native", env: native})
}

// job is one run of a test program.
type job struct {
	mpi   hostMPI
	np    int
	round round
	env   []string // more variables for the ranks
	prog  string
	args  []string
	fault bool // a panic is injected: "internal error" is expected
}

func (j job) String() string {
	return fmt.Sprintf("%s np=%d %s %s %v %v", j.mpi.name, j.np, j.round.name, filepath.Base(j.prog), j.args, j.env)
}

// result is what a job printed.
type result struct {
	out    string // standard output of rank 0 and the launcher
	errs   string // standard error of every rank, rank after rank
	code   int
	passed int
	failed int
	// from the program
	wantGocoll, wantHost, nonComm int
	// from the GOCOLL_DEBUG lines
	gocoll, tunedNative, host, forcedNative int
	// tuned native although no forced algorithm was refused
	plainNative int
	liveDups    []int
	dupsMade    []int
}

var (
	countsRE  = regexp.MustCompile(`(?m)^(\d+) passed, (\d+) failed$`)
	expectRE  = regexp.MustCompile(`(?m)^expect gocoll=(\d+) host=(\d+)(?: noncommutative=(\d+))?$`)
	gocollRE  = regexp.MustCompile(`(?m)^gocoll: rank \d+: MPI_\w+ comm=\S+ bytes=\d+ p=\d+ algorithm=\w+ \(`)
	tunedRE   = regexp.MustCompile(`(?m)^gocoll: rank -?\d+: MPI_\w+ -> host MPI \(tuned: native`)
	plainRE   = regexp.MustCompile(`(?m)^gocoll: rank -?\d+: MPI_\w+ -> host MPI \(tuned: native for \d+ bytes at p=\d+\)`)
	failureRE = regexp.MustCompile(`(?i)gocoll: MPI_|error|failed|panic|timed out`)
	forcedRE  = regexp.MustCompile(`(?m)^gocoll: rank -?\d+: MPI_\w+ -> host MPI \(forced: native\)`)
	hostRE    = regexp.MustCompile(`(?m)^gocoll: rank -?\d+: MPI_\w+ -> host MPI \(`)
	finalizeR = regexp.MustCompile(`(?m)^gocoll: rank \d+: finalize: .* private duplicates made (\d+), freed \d+, live (\d+);`)
)

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

// runRanks runs prog with args on np ranks of m under the preload with
// env, each rank's standard error in a file of its own (rank.sh): it
// returns the launcher's output, its exit status and each rank's standard
// error. A run still going after 2 minutes fails the test as a hang, and
// so does a rank without exactly one standard error file.
func runRanks(t *testing.T, what string, m hostMPI, np int, env []string, prog string, args ...string) (out string, code int, errs []string) {
	t.Helper()
	dir, err := os.MkdirTemp(harness.Work, "run-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if !slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "LD_PRELOAD=") }) {
		env = append([]string{"LD_PRELOAD=" + preloadLib()}, env...)
	}
	argv := append(m.args(np, env), filepath.Join(harness.Root, "tests", "preload", "testdata", "rank.sh"), dir, prog)
	argv = append(argv, args...)
	cmd := exec.Command(m.run, argv...)
	cmd.Env = harness.BaseEnv()
	cmd.Dir = harness.Work
	done := make(chan struct{})
	var b []byte
	go func() { b, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill()
		<-done
		t.Fatalf("%s: still running after 2 minutes (hang)\n%s", what, b)
	}
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("%s: %v", what, err)
		}
		code = ee.ExitCode()
	}
	for rank := range np {
		files, _ := filepath.Glob(filepath.Join(dir, fmt.Sprintf("rank-%d.*", rank)))
		if len(files) != 1 {
			t.Fatalf("%s: %d standard error files for rank %d: %v\n%s", what, len(files), rank, files, b)
		}
		e, err := os.ReadFile(files[0])
		if err != nil {
			t.Fatalf("%s: rank %d's standard error: %v\n%s", what, rank, err, b)
		}
		if !strings.HasPrefix(string(e), "rank.sh: ") {
			// How a lost standard error showed before internal/loadwait
			// (the library's Go runtime, starting beside rank.sh's shell,
			// closed a descriptor the shell had just reused); should it show
			// again, say what the folder held.
			ls, _ := exec.Command("ls", "-l", "--full-time", dir).CombinedOutput()
			t.Logf("%s: rank %d's standard error file %s lacks rank.sh's first line (%d bytes); the folder:\n%s", what, rank, files[0], len(e), ls)
		}
		errs = append(errs, string(e))
	}
	return string(b), code, errs
}

// launch runs a job with GOCOLL_DEBUG=info and collects what it printed.
func launch(t *testing.T, j job) result {
	t.Helper()
	env := append(append([]string{"GOCOLL_DEBUG=info"}, j.round.env...), j.env...)
	out, code, errs := runRanks(t, fmt.Sprint(j), j.mpi, j.np, env, j.prog, j.args...)
	r := result{out: out, code: code, errs: strings.Join(errs, "")}
	if m := countsRE.FindAllStringSubmatch(r.out, -1); len(m) > 0 {
		r.passed, r.failed = atoi(m[len(m)-1][1]), atoi(m[len(m)-1][2])
	}
	if m := expectRE.FindStringSubmatch(r.out); m != nil {
		r.wantGocoll, r.wantHost, r.nonComm = atoi(m[1]), atoi(m[2]), atoi(m[3])
	}
	r.gocoll = len(gocollRE.FindAllString(r.errs, -1))
	r.tunedNative = len(tunedRE.FindAllString(r.errs, -1))
	r.plainNative = len(plainRE.FindAllString(r.errs, -1))
	r.forcedNative = len(forcedRE.FindAllString(r.errs, -1))
	r.host = len(hostRE.FindAllString(r.errs, -1)) - r.tunedNative - r.forcedNative
	for _, m := range finalizeR.FindAllStringSubmatch(r.errs, -1) {
		r.dupsMade = append(r.dupsMade, atoi(m[1]))
		r.liveDups = append(r.liveDups, atoi(m[2]))
	}
	return r
}

// check runs a job and checks it: every result right, and every call
// where it belongs.
func check(t *testing.T, j job) result {
	t.Helper()
	start := time.Now()
	r := launch(t, j)
	totals.runs++
	totals.passed += r.passed
	totals.failed += r.failed
	if r.code != 0 && r.failed == 0 {
		totals.failed++ // a run that died counts as a failure
	}
	t.Logf("%v: %d passed, %d failed; gocoll ran %d calls, tuned native %d, other host %d (%.1fs)",
		j, r.passed, r.failed, r.gocoll, r.tunedNative, r.host+r.forcedNative, time.Since(start).Seconds())
	fail := func(format string, a ...any) {
		t.Helper()
		errs := r.errs
		if len(errs) > 6000 {
			// The middle is left out, but for the lines that say what
			// went wrong: which rank failed first is the clue to a rare
			// failure.
			var kept strings.Builder
			for line := range strings.Lines(errs[3000 : len(errs)-3000]) {
				if failureRE.MatchString(line) {
					kept.WriteString(line)
				}
			}
			errs = errs[:3000] + "\n... (errors in between:)\n" + kept.String() + "...\n" + errs[len(errs)-3000:]
		}
		t.Errorf("%v: %s\nstdout:\n%s\nstderr of the ranks (GOCOLL_DEBUG=info):\n%s", j, fmt.Sprintf(format, a...), r.out, errs)
	}
	switch {
	case r.code != 0 || r.failed != 0 || r.passed == 0:
		fail("%d passed, %d failed, exit %d", r.passed, r.failed, r.code)
		return r
	case !j.fault && (strings.Contains(r.errs, "internal error") || strings.Contains(r.errs, "panic")):
		fail("a panic or internal error")
		return r
	case len(r.liveDups) != j.np:
		fail("%d finalize reports for %d ranks", len(r.liveDups), j.np)
		return r
	}
	for _, live := range r.liveDups {
		// The program frees every communicator it makes: only
		// MPI_COMM_WORLD's duplicate may be left at MPI_Finalize.
		if live > 1 {
			fail("%d private duplicates still alive at MPI_Finalize: a leak", live)
		}
	}
	if j.fault {
		r.wantGocoll -= j.np // the call that panics stops before its line
	}
	if j.round.name == "native" {
		if r.gocoll != 0 || r.tunedNative != 0 || r.forcedNative+r.host != r.wantGocoll+r.wantHost {
			fail("native: gocoll ran %d calls, host %d forced + %d other, want all %d calls on the host",
				r.gocoll, r.forcedNative, r.host, r.wantGocoll+r.wantHost)
		}
		return r
	}
	if r.gocoll+r.tunedNative != r.wantGocoll || r.host != r.wantHost || r.forcedNative != 0 {
		fail("gocoll ran %d calls and the tuner chose the host for %d (want %d together); the host took %d others (want %d)",
			r.gocoll, r.tunedNative, r.wantGocoll, r.host, r.wantHost)
	}
	if strings.HasPrefix(j.round.name, "forced") && r.plainNative > 0 {
		// A forced algorithm runs every call it can; the tuner takes
		// the others (a non-commutative op, no shared segment), and its
		// lines say which forced algorithm could not run.
		fail("%d calls went to the host although an algorithm was forced that could run them", r.plainNative)
	}
	if strings.HasPrefix(j.round.name, "forced") {
		// Each call says the forced algorithm by name (paths_test.go).
		if err := forcedByName(j.round.env, r.errs); err != nil {
			fail("%v", err)
		}
	}
	return r
}

// The C test program under both MPIs, np = 1..5, every algorithm forced
// in turn, auto, and native.
func TestC(t *testing.T) {
	for _, m := range hostMPIs {
		t.Run(m.name, func(t *testing.T) {
			need(t, m.cc, m.run)
			prog := compile(t, m.cc, "coll-"+m.name, "coll.c")
			for np := 1; np <= 5; np++ {
				for i, rd := range rounds() {
					var args []string
					switch {
					case rd.name == "forced0" && np == map[string]int{"openmpi": 4, "mpich": 2}[m.name]:
						// Communicators made and freed (MPICH makes communicators slowly
						// when oversubscribed: 50 ms each at 4 ranks on 2 cores).
						args = []string{"-churn", "1000"}
					case rd.name == "forced1":
						args = []string{"-threads"} // MPI_THREAD_SERIALIZED from another thread
					case rd.name == "native", m.name == "mpich" && np > 2 && rd.name == "auto":
						// MPICH busy-polls: oversubscribed, its own
						// collectives are slow.
						args = []string{"-quick"}
					}
					r := check(t, job{mpi: m, np: np, round: rd, prog: prog, args: args})
					if len(args) > 0 && args[0] == "-churn" {
						for _, d := range r.dupsMade {
							if d < 1000 {
								t.Errorf("%s np=%d: only %d private duplicates made for 1000 communicators", m.name, np, d)
							}
						}
					}
					_ = i
				}
			}
		})
	}
}

// gocoll's transports between hosts: the host MPI's point-to-point for
// every pair, and two emulated hosts (GOCOLL_HOST), so that shared memory
// and the host MPI carry one schedule together.
func TestTransports(t *testing.T) {
	rs := rounds()
	for _, m := range hostMPIs {
		t.Run(m.name, func(t *testing.T) {
			need(t, m.cc, m.run)
			prog := compile(t, m.cc, "coll-"+m.name, "coll.c")
			for _, np := range []int{2, 3, 4} {
				check(t, job{mpi: m, np: np, round: rs[1+np%3], prog: prog, env: []string{"GOCOLL_TRANSPORT=hostmpi"}})
			}
			for _, np := range []int{4, 5} {
				for _, rd := range []round{rs[1], rs[3]} {
					r := check(t, job{mpi: m, np: np, round: rd, prog: prog, env: []string{"PRELOAD_TEST_HOSTS=2"}})
					if !strings.Contains(r.errs, "hostmpi to [") || !regexp.MustCompile(`shm to \[\d`).MatchString(r.errs) {
						t.Errorf("%s np=%d: the ranks did not use both transports:\n%s", m.name, np, r.errs[:min(len(r.errs), 2000)])
					}
					// The communicator's node map, from the host names
					// exchanged at its setup: ranks alternate between the
					// two hosts.
					nodes := map[int]string{4: "2 nodes x 2", 5: "2 nodes (3,2)"}[np]
					if want := fmt.Sprintf("MPI_COMM_WORLD set up: p=%d on %s, ", np, nodes); strings.Count(r.errs, want) != np {
						t.Errorf("%s np=%d: want %q from every rank:\n%s", m.name, np, want, r.errs[:min(len(r.errs), 2000)])
					}
					// Forced, hierarchical runs its intra-node phases on
					// each host's shared segment, and says so.
					if slices.Contains(rd.env, "GOCOLL_ALLREDUCE_ALGORITHM=hierarchical") &&
						(!strings.Contains(r.errs, "algorithm=hierarchical (forced) form=shm") || strings.Contains(r.errs, "form=schedule")) {
						t.Errorf("%s np=%d %s: hierarchical did not run in the shared-memory form:\n%s", m.name, np, rd.name, r.errs[:min(len(r.errs), 2000)])
					}
				}
			}
		})
	}
}

// faultLib builds, once per test binary, a copy of the library with the
// test-only fault hook (-tags gocolltest, preload/fault.go), which the
// library `make` builds lacks.
var faultLib = sync.OnceValues(func() (string, error) {
	lib := filepath.Join(harness.Work, "libgocoll-preload-gocolltest.so")
	cmd := exec.Command("go", "build", "-tags", "gocolltest", "-buildmode=c-shared",
		"-ldflags", `-extldflags "-Wl,--version-script=`+filepath.Join(harness.Root, "preload", "exports.map")+`"`,
		"-o", lib, "./preload")
	cmd.Dir = harness.Root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build -tags gocolltest ./preload: %v\n%s", err, out)
	}
	return lib, nil
})

// A panic inside gocoll becomes MPI_ERR_INTERN through the
// communicator's error handler, and later calls work. The fault hook
// that injects it is in a library built for tests only, not in the
// release one.
func TestPanicBecomesMPIError(t *testing.T) {
	const hook = "a panic on purpose" // the injected panic's message
	release, err := os.ReadFile(preloadLib())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(release), hook) {
		t.Errorf("%s has the test-only fault hook (%q)", preloadLib(), hook)
	}
	lib, err := faultLib()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range hostMPIs {
		t.Run(m.name, func(t *testing.T) {
			need(t, m.cc, m.run)
			prog := compile(t, m.cc, "coll-"+m.name, "coll.c")
			r := check(t, job{mpi: m, np: 2, round: rounds()[1], prog: prog, args: []string{"-fault"},
				env: []string{"LD_PRELOAD=" + lib, "GOCOLL_PRELOAD_FAULT=3"}, fault: true})
			if !strings.Contains(r.errs, "internal error") {
				t.Errorf("no internal error reported:\n%s", r.errs)
			}
		})
	}
}

// The Fortran bindings: mpif.h, `use mpi` and `use mpi_f08`, built with
// each MPI's mpif90. Open MPI's Fortran calls PMPI_ directly, so these
// prove the library's Fortran entry points.
func TestFortran(t *testing.T) {
	rs := rounds()
	for _, m := range hostMPIs {
		t.Run(m.name, func(t *testing.T) {
			need(t, m.fc, m.run)
			for k, src := range []string{"fixed.f", "usempi.f90", "f08.f90"} {
				prog := compile(t, m.fc, strings.TrimSuffix(strings.TrimSuffix(src, ".f90"), ".f")+"-"+m.name, src)
				for np := 1; np <= 5; np++ {
					// Each program sees every rank count; across the
					// three, every round.
					check(t, job{mpi: m, np: np, round: rs[(np+2*k)%len(rs)], prog: prog})
				}
			}
		})
	}
}

// With GOCOLL_CUDA=off, calls with CUDA device buffers go to the host
// MPI, also when the driver is loaded after MPI_Init. The driver is a
// stand-in built with libcuda.so.1 as its soname. (With CUDA on, gocoll
// runs them: the device check's run.sh --self-test, tests/gpu.)
func TestDeviceBuffersFallBack(t *testing.T) {
	fake := filepath.Join(harness.Work, "fake", "libcuda.so.1")
	os.MkdirAll(filepath.Dir(fake), 0o755)
	if b, err := exec.Command("gcc", "-shared", "-fPIC", "-O2", "-Wl,-soname,libcuda.so.1", "-o", fake,
		filepath.Join(harness.Root, "tests", "preload", "testdata", "fakecuda.c")).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	for _, m := range hostMPIs {
		t.Run(m.name, func(t *testing.T) {
			need(t, m.cc, m.run)
			prog := compile(t, m.cc, "device-"+m.name, "device.c")
			r := check(t, job{mpi: m, np: 2, round: rounds()[1], prog: prog, args: []string{fake},
				env: []string{"GOCOLL_CUDA=off"}})
			if n := strings.Count(r.errs, "-> host MPI (CUDA device buffer)"); n != 4 {
				t.Errorf("%d calls fell back for a device buffer, want 4:\n%s", n, r.errs)
			}
		})
	}
}

// A program that loads its MPI code with dlopen(RTLD_LOCAL), as Python
// loads mpi4py: libmpi is not in the global scope when the library first
// looks for it.
func TestRTLDLocal(t *testing.T) {
	for _, m := range hostMPIs {
		t.Run(m.name, func(t *testing.T) {
			need(t, m.cc, m.run)
			so := filepath.Join(harness.Work, "libdlopen-"+m.name+".so")
			if b, err := exec.Command(m.cc, "-shared", "-fPIC", "-O2", "-o", so, filepath.Join(harness.Root, "tests", "preload", "testdata", "dlopen_lib.c")).CombinedOutput(); err != nil {
				t.Fatalf("%v\n%s", err, b)
			}
			main := filepath.Join(harness.Work, "dlopen-main")
			if b, err := exec.Command("gcc", "-O2", "-o", main, filepath.Join(harness.Root, "tests", "preload", "testdata", "dlopen_main.c"), "-ldl").CombinedOutput(); err != nil {
				t.Fatalf("%v\n%s", err, b)
			}
			for _, np := range []int{2, 3} {
				check(t, job{mpi: m, np: np, round: rounds()[1], prog: main, args: []string{so}})
			}
		})
	}
}

// The library exports the collectives and their Fortran names, and the
// tests' counter query, nothing else: no Go runtime symbol can interpose
// on anything of the process.
func TestExports(t *testing.T) {
	f, err := elf.Open(preloadLib())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.DynamicSymbols()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range syms {
		if s.Section != elf.SHN_UNDEF && elf.ST_BIND(s.Info) != elf.STB_LOCAL && s.Name != "" {
			got = append(got, s.Name)
		}
	}
	var want []string
	for _, c := range []string{"Allreduce", "Reduce_scatter", "Reduce_scatter_block", "Allgather"} {
		lower := strings.ToLower(c)
		want = append(want, "MPI_"+c, "MPI_"+c+"_c", "mpi_"+lower+"_", "mpi_"+lower, "mpi_"+lower+"__",
			"MPI_"+strings.ToUpper(c), "mpi_"+lower+"_f08_")
	}
	// The nonblocking and persistent forms (Open MPI 4.1 names the
	// persistent ones MPIX_), and the completion calls, which must tell
	// gocoll's requests from the host's.
	for _, c := range []string{"Allreduce", "Reduce_scatter", "Reduce_scatter_block", "Allgather"} {
		want = append(want, "MPI_I"+strings.ToLower(c[:1])+c[1:], "MPI_I"+strings.ToLower(c[:1])+c[1:]+"_c",
			"MPI_"+c+"_init", "MPI_"+c+"_init_c", "MPIX_"+c+"_init")
	}
	want = append(want, "MPI_Wait", "MPI_Test", "MPI_Waitall", "MPI_Testall", "MPI_Waitany", "MPI_Testany",
		"MPI_Waitsome", "MPI_Testsome", "MPI_Start", "MPI_Startall", "MPI_Request_free", "MPI_Request_get_status",
		"MPI_Cancel")
	want = append(want, "gocoll_test_counter") // for tests (paths_test.go); no MPI defines it
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("exported symbols:\n got %v\nwant %v", got, want)
	}
	// No load-time dependency on any MPI library.
	libs, _ := f.ImportedLibraries()
	for _, l := range libs {
		if strings.Contains(l, "mpi") {
			t.Errorf("the library needs %s at load time", l)
		}
	}
}

// Processes that never call MPI load the library and notice nothing: a
// shell, and launchers started with LD_PRELOAD in their own environment.
func TestHarmlessWithoutMPI(t *testing.T) {
	out, err := exec.Command("sh", "-c", "LD_PRELOAD="+preloadLib()+" sh -c 'echo $((6*7)); ls / >/dev/null; true | cat'").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "42" {
		t.Errorf("a shell under LD_PRELOAD: %v: %q", err, out)
	}
	for _, m := range hostMPIs {
		need(t, m.cc, m.run)
		prog := compile(t, m.cc, "coll-"+m.name, "coll.c")
		// The launcher and its helpers get the library too, and
		// MPI_Abort keeps its exit code.
		cmd := exec.Command(m.run, append(m.args(2, nil), prog, "-quick")...)
		cmd.Env = append(os.Environ(), "LD_PRELOAD="+preloadLib())
		cmd.Dir = harness.Work
		out, err := cmd.CombinedOutput()
		if err != nil || !countsRE.Match(out) || !strings.Contains(string(out), " 0 failed") {
			t.Errorf("%s with LD_PRELOAD in the launcher's environment: %v\n%s", m.name, err, out)
		}
	}
}
