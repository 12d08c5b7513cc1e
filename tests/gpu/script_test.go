// Package gputest checks the device check bundle (make gpu-bundle,
// build/gpu-bundle/ with its run.sh, from tests/gpu) as far as a machine
// without a GPU can: run.sh's arguments; that a copy of the bundle, moved
// away from the build, says plainly what is missing without a driver;
// that its wrappers and programs name no path of the build; that it is
// under 64 MiB and carries this machine's MPICH runtime; and that
// `run.sh --self-test` in the copy, on the stand-in CUDA driver and
// runtime (tests/gpu/c), runs every group of checks on 1, 2, 4 and 8 ranks
// under gocollrun (IPC and staged) and under LD_PRELOAD over each host
// MPI installed (MPICH's from the bundle's own runtime), that gocoll
// itself runs the LD_PRELOAD calls on device memory, that the -ipc runs
// used CUDA IPC and the -staged ones did not, that the realloc runs saw
// addresses reused, that the copy's mpicc builds and runs a C example,
// that the timing tables and their summary lines have their form (the
// stand-in's times mean nothing), and that every check passed. On a GPU
// machine, run the bundle itself.
package gputest

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gocoll/gocoll/tests/internal/harness"
)

// TestMain builds the bundle first (make gpu-bundle, which builds gocoll
// too), as the other test packages build what they need: a missing piece
// is a failure, never a skip.
func TestMain(m *testing.M) { harness.Main(m, 2, "gpu-bundle", nil) }

// run runs a script with arguments and returns its output and exit status.
func run(t *testing.T, env []string, script string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(script, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), code
}

// bundleCopy copies build/gpu-bundle to a new temporary folder, as a user
// copies it to a GPU machine, and returns the copy's path.
func bundleCopy(t *testing.T) string {
	t.Helper()
	tmp, err := filepath.EvalSymlinks(t.TempDir()) // run.sh and mpicc name their folder with links resolved
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(tmp, "moved", "gpu-bundle")
	os.MkdirAll(filepath.Dir(dir), 0o755)
	if out, err := exec.Command("cp", "-a", filepath.Join(harness.Root, "build", "gpu-bundle"), dir).CombinedOutput(); err != nil {
		t.Fatalf("copying the bundle: %v: %s", err, out)
	}
	return dir
}

// The source tree's run.sh checks its arguments before it builds
// anything.
func TestArguments(t *testing.T) {
	script := filepath.Join(harness.Root, "tests", "gpu", "run.sh")
	out, code := run(t, nil, script, "--help")
	if code != 0 || !strings.Contains(out, "usage: run.sh") || !strings.Contains(out, "--self-test") {
		t.Errorf("--help: exit %d\n%s", code, out)
	}
	for _, bad := range [][]string{{"--bogus"}, {"--ranks", "0"}, {"--ranks", "x"}, {"--ranks", ""}, {"--max-bytes", "lots"},
		{"--timeout", "-3"}, {"--budget", "0"}, {"--mpi", "lam"}, {"--ranks"}} {
		out, code := run(t, nil, script, bad...)
		if code != 2 || !strings.Contains(out, "run.sh: ") || strings.Contains(out, "make gpu-bundle") {
			t.Errorf("%q: exit %d, want 2 with a message and nothing built\n%s", bad, code, out)
		}
	}
}

// The bundle carries no path of the build: the wrappers and run.sh name
// none, and the test programs find gocoll's library from where they are.
func TestRelocatable(t *testing.T) {
	b := filepath.Join(harness.Root, "build", "gpu-bundle")
	for _, f := range []string{"run.sh", "bin/mpicc", "bin/mpicxx", "bin/mpif90"} {
		data, err := os.ReadFile(filepath.Join(b, f))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(data), harness.Root) {
			t.Errorf("%s names the build's folder %s", f, harness.Root)
		}
	}
	// What the GPU machine's tool carries: 64 MiB at most.
	if out, err := exec.Command("du", "-sm", b).Output(); err != nil {
		t.Fatal(err)
	} else if mib, _ := strconv.Atoi(strings.Fields(string(out))[0]); mib >= 64 {
		t.Errorf("the bundle is %d MiB, want under 64", mib)
	}
	progs, _ := filepath.Glob(filepath.Join(b, "tests", "gpuc*"))
	n := 0
	for _, p := range progs {
		if strings.HasSuffix(p, ".c") {
			continue
		}
		f, err := elf.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		needed, _ := f.ImportedLibraries()
		runpath, _ := f.DynString(elf.DT_RUNPATH)
		rpath, _ := f.DynString(elf.DT_RPATH)
		f.Close()
		if filepath.Base(p) != "gpucoll" && filepath.Base(p) != "gpucalls" {
			continue // built with a host MPI's mpicc: its own libraries
		}
		n++
		if !contains(needed, "libgocoll.so.0") || strings.Join(runpath, ":") != "$ORIGIN/../lib" || len(rpath) != 0 {
			t.Errorf("%s: needs %v, runpath %v, rpath %v; want libgocoll.so.0 (the soname) found in $ORIGIN/../lib only", p, needed, runpath, rpath)
		}
	}
	if n != 2 {
		t.Errorf("tests/gpucoll and tests/gpucalls are not both in the bundle: %v", progs)
	}
}

// hasMPICH says whether this machine has MPICH's compiler and launcher,
// which the bundle then carries.
func hasMPICH() bool {
	for _, p := range []string{"mpicc.mpich", "mpiexec.mpich", "hydra_pmi_proxy"} {
		if _, err := exec.LookPath(p); err != nil {
			return false
		}
	}
	return true
}

// The bundle carries this machine's MPICH runtime for the LD_PRELOAD runs
// on a machine with no MPI: the launcher, its proxy, libmpich and what
// they need but the C runtime, UCX's shared-memory module; BUILD names
// them.
func TestMPICHRuntime(t *testing.T) {
	if !hasMPICH() {
		t.Skip("no MPICH here: the bundle carries no MPICH runtime")
	}
	b := filepath.Join(harness.Root, "build", "gpu-bundle")
	out, err := exec.Command("tar", "-tJf", filepath.Join(b, "mpich-runtime.tar.xz")).CombinedOutput()
	if err != nil {
		t.Fatalf("tar -tJf mpich-runtime.tar.xz: %v\n%s", err, out)
	}
	files := strings.Fields(string(out))
	for _, f := range []string{"mpich/bin/mpiexec.hydra", "mpich/bin/mpiexec.mpich", "mpich/bin/hydra_pmi_proxy",
		"mpich/lib/libmpich.so.12", "mpich/lib/libhwloc.so.15", "mpich/lib/libucp.so.0", "mpich/lib/libucs.so.0",
		"mpich/lib/ucx/libuct_cma.so.0"} {
		if !contains(files, f) {
			t.Errorf("mpich-runtime.tar.xz has no %s: %v", f, files)
		}
	}
	for _, f := range files {
		if regexp.MustCompile(`/lib(c|m|dl|pthread|rt|resolv|gcc_s|stdc\+\+|z)\.so|ld-linux|libibverbs|libuct_ib`).MatchString(f) {
			t.Errorf("mpich-runtime.tar.xz carries %s, which the C runtime has or the machine does not need", f)
		}
	}
	build, _ := os.ReadFile(filepath.Join(b, "BUILD"))
	if !strings.Contains(string(build), "MPICH runtime for the LD_PRELOAD runs: mpich-runtime.tar.xz") ||
		!strings.Contains(string(build), "libmpich.so.12") {
		t.Errorf("BUILD does not name the MPICH runtime:\n%s", build)
	}
}

// On a machine with no MPI installed, as the GPU machine is, run.sh's
// default (--mpi auto) runs the LD_PRELOAD checks over the bundle's own
// MPICH runtime, which must be whole: tests/gpu/without-mpi.sh takes this
// machine's MPI launchers and the libraries MPICH needs out of sight (a
// mount namespace, overlayfs), then the copy's self-test runs. Skipped
// where that cannot be made (not root, no overlayfs).
func TestWithoutMPI(t *testing.T) {
	if !hasMPICH() {
		t.Skip("no MPICH here: the bundle carries no MPICH runtime")
	}
	b := bundleCopy(t)
	out, code := run(t, nil, filepath.Join(harness.Root, "tests", "gpu", "without-mpi.sh"), filepath.Join(b, "run.sh"),
		"--self-test", "--quick", "--ranks", "2", "--no-time", "--timeout", "120", "--budget", "600")
	if code == 3 && strings.HasPrefix(out, "without-mpi.sh: ") {
		t.Skip(strings.TrimSpace(out))
	}
	summary := sections(out)["summary"]
	if code != 0 || !strings.Contains(out, "run.sh: MPICH: the bundle's runtime (mpich-runtime.tar.xz), unpacked in "+b+"/mpich-runtime.") ||
		strings.Contains(out, "preload-openmpi") {
		t.Fatalf("exit %d: want the LD_PRELOAD runs over the bundle's MPICH runtime only\n%s", code, out)
	}
	for _, c := range []string{"mpich-runtime", "preload-mpich-np2-libmpich", "preload-mpich-np2-device"} {
		if !regexp.MustCompile(`(?m)^  ` + c + ` +1 passed, +0 failed`).MatchString(summary) {
			t.Errorf("no %s check passed\n%s", c, summary)
		}
	}
}

// A timing table that runs out of its --time-budget skips the cells left,
// says so, and still prints its summary lines and every rank's verdict.
// Up to 16 MiB the cells' smallest cost, even on the stand-in, is far
// more than the budget: some are skipped however fast this machine is.
func TestTableBudget(t *testing.T) {
	b := filepath.Join(harness.Root, "build", "gpu-bundle")
	out, code := run(t, []string{"LD_LIBRARY_PATH=" + filepath.Join(b, "stub"), "GOCOLL_CUDA=on"},
		filepath.Join(b, "bin", "gocollrun"), "-n", "2", filepath.Join(b, "tests", "gpucoll"),
		"--checks", "none", "--max-bytes", "16777216", "--time-budget", "0.05")
	if code != 0 || !regexp.MustCompile(`(?m)^gpucoll: \d+ of \d+ cells skipped: the time budget`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^ +\d+ +\d+/\d+ .*skipped`).MatchString(out) ||
		len(regexp.MustCompile(`(?m)^summary MPI_\w+ np=2: `).FindAllString(out, -1)) != 4 ||
		len(regexp.MustCompile(`(?m)^rank \d: \d+ passed, 0 failed$`).FindAllString(out, -1)) != 2 {
		t.Errorf("exit %d; want skipped cells said, 4 summary lines and 2 verdicts\n%s", code, out)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Without a driver a copy of the bundle stops at once, saying what is
// missing, and still prints the summary line.
func TestReportsMissingGPU(t *testing.T) {
	for _, p := range []string{"/usr/lib/x86_64-linux-gnu/libcuda.so.1", "/usr/lib64/libcuda.so.1", "/usr/lib/libcuda.so.1"} {
		if _, err := os.Stat(p); err == nil {
			t.Skip("this machine has a CUDA driver: " + p)
		}
	}
	b := bundleCopy(t)
	out, code := run(t, []string{"LD_LIBRARY_PATH="}, filepath.Join(b, "run.sh"), "--quick")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 2 || !strings.Contains(out, "run.sh: cannot run the GPU checks: no NVIDIA GPU driver (libcuda.so.1 not found") ||
		!strings.HasPrefix(lines[len(lines)-1], "0 passed, 1 failed (setup: no NVIDIA GPU driver") {
		t.Errorf("exit %d\n%s", code, out)
	}
}

// The whole check on stand-in device memory, which the CPU cannot touch,
// from a copy of the bundle: every run, under gocollrun and under
// LD_PRELOAD over each host MPI installed (Open MPI, MPICH), added up.
// Under LD_PRELOAD gocoll must run every call on device memory itself:
// the host MPIs here are not CUDA-aware (any CPU access to the stand-in
// memory crashes), and the GOCOLL_DEBUG=info run's finalize reports must
// count every check's collective, on every rank, as a device call gocoll
// ran.
func TestSelfTest(t *testing.T) {
	var mpis []string
	for _, m := range []struct{ name, cc, run string }{
		{"openmpi", "mpicc.openmpi", "mpirun.openmpi"},
		{"mpich", "mpicc.mpich", "mpiexec.mpich"},
	} {
		if _, err := exec.LookPath(m.cc); err != nil {
			continue
		}
		if _, err := exec.LookPath(m.run); err == nil {
			mpis = append(mpis, m.name)
		}
	}
	// Quick checks, a small timing table; a per-run limit and a budget
	// for a loaded 2-core machine, not the GPU machine's 4 minutes. The
	// runs over MPICH use the bundle's MPICH runtime, as on the GPU
	// machine, which has no MPI.
	ranks := []int{1, 2, 4, 8}
	args := []string{"--self-test", "--quick", "--ranks", "1 2 4 8", "--max-bytes", "4096", "--timeout", "120", "--budget", "900"}
	switch len(mpis) {
	case 0:
		t.Log("no host MPI: no LD_PRELOAD runs")
		args = append(args, "--no-preload")
	case 1:
		args = append(args, "--mpi", mpis[0])
	default:
		args = append(args, "--mpi", "both")
	}
	bundled := contains(mpis, "mpich") && hasMPICH()
	if bundled {
		args = append(args, "--bundled-mpich")
	}
	b := bundleCopy(t)
	out, code := run(t, nil, filepath.Join(b, "run.sh"), args...)
	sec := sections(out)
	summary := "==== summary ====\n" + sec["summary"]
	m := regexp.MustCompile(`(?m)^(\d+) passed, (\d+) failed$`).FindAllStringSubmatch(out, -1)
	if code != 0 || len(m) == 0 || m[len(m)-1][2] != "0" || m[len(m)-1][1] == "0" ||
		!strings.HasSuffix(strings.TrimSpace(out), m[len(m)-1][0]) {
		fails := regexp.MustCompile(`(?m)^.*(FAIL|timed out|exited with status|verdict lines).*$`).FindAllString(out, 60)
		t.Fatalf("exit %d; the first failures:\n%s\n%s", code, strings.Join(fails, "\n"), summary)
	}
	// Every run, each with its verdicts; the path and reuse checks.
	for _, n := range ranks {
		runs := []string{"realloc-np1", "misaligned-np1", "gocollrun-np1", "calls-np1"}
		if n > 1 {
			runs = nil
			for _, r := range []string{"gocollrun", "realloc", "misaligned", "calls"} {
				runs = append(runs, r+"-np"+strconv.Itoa(n)+"-ipc", r+"-np"+strconv.Itoa(n)+"-staged")
			}
		}
		runs = append(runs, "time-np"+strconv.Itoa(n))
		for _, r := range runs {
			if c := regexp.MustCompile(`(?m)^rank \d+: [1-9]\d* passed, 0 failed$`).FindAllString(sec[r], -1); len(c) != n {
				t.Errorf("%s: %d ranks' verdicts with checks passed, want %d\n%s", r, len(c), n, sec[r])
			}
		}
		checks := []string{"realloc-np1-reuse"}
		if n > 1 {
			np := "-np" + strconv.Itoa(n)
			checks = []string{"gocollrun" + np + "-ipc-path", "gocollrun" + np + "-staged-path", "realloc" + np + "-ipc-reuse", "realloc" + np + "-staged-reuse"}
		}
		for _, c := range checks {
			if !regexp.MustCompile(`(?m)^  ` + c + ` +1 passed, +0 failed`).MatchString(summary) {
				t.Errorf("no %s check passed\n%s", c, summary)
			}
		}
	}
	if c := regexp.MustCompile(`(?m)^rank 0: [1-9]\d* passed, 0 failed$`).FindAllString(sec["calls-cuda-off"], -1); len(c) != 1 {
		t.Errorf("calls-cuda-off: no verdict with checks passed\n%s", sec["calls-cuda-off"])
	}
	// The timing tables: the baselines, a table per collective, one
	// summary line per collective and rank count in its run and again in
	// the summary; their form only (the stand-in's times mean nothing).
	// --max-bytes 4096: the largest size is 4 KiB; the smallest is 8 B,
	// but the reduce-scatters' one float per rank.
	for _, n := range ranks {
		name := "time-np" + strconv.Itoa(n)
		for _, want := range []string{"gpucoll: the stand-in driver (no GPU): these times mean nothing",
			"gpucoll: baseline: an empty kernel's launch + cuStreamSynchronize: median ",
			"gpucoll: baseline: device-to-device copy of 8 MiB",
			"MPI_Allreduce (MPI_FLOAT, MPI_SUM) on " + strconv.Itoa(n) + " rank", "MPI_Allgather (MPI_CHAR) on ",
			"MPI_Reduce_scatter_block (MPI_FLOAT, MPI_SUM) on ", "MPI_Reduce_scatter (MPI_FLOAT, MPI_SUM) on "} {
			if !strings.Contains(sec[name], want) {
				t.Errorf("%s: no %q\n%s", name, want, sec[name])
			}
		}
		for c, f := range map[string]string{"MPI_Allreduce": "2pn", "MPI_Reduce_scatter_block": "(p+1)n", "MPI_Reduce_scatter": "(p+1)n", "MPI_Allgather": "2pn"} {
			small, moved := 8, 2*n*4
			if f == "(p+1)n" {
				small, moved = max(8, 4*n), (n+1)*4
			}
			re := regexp.MustCompile(`(?m)^summary ` + c + ` np=` + strconv.Itoa(n) + `: ` + strconv.Itoa(small) +
				` B in \d+\.\d µs = [\d.]+x launch\+sync \([\d.]+ µs\); 4 KiB in \d+\.\d µs = [\d.]+x its traffic bound \(` +
				regexp.QuoteMeta(f) + ` = ` + strconv.Itoa(moved) + ` KiB over \d+ GB/s\)$`)
			if !re.MatchString(sec[name]) || !re.MatchString(sec["summary"]) {
				t.Errorf("%s: no summary line of %s like %s in its run and in the summary\n%s\n%s", name, c, re, sec[name], summary)
			}
		}
	}
	if !strings.Contains(summary, "  (self-test: the stand-in driver's times mean nothing") {
		t.Errorf("the summary does not say the stand-in's times mean nothing\n%s", summary)
	}
	if !strings.Contains(sec["gocollrun-np2-ipc"], "gpucoll: CUDA runtime libcudart.so.12") {
		t.Errorf("the cudart checks did not find the stand-in runtime\n%s", sec["gocollrun-np2-ipc"])
	}
	// The copy's mpicc named the copy, built the example against it, and
	// the example ran.
	if !strings.Contains(sec["wrapper"], "-I"+b+"/include -L"+b+"/lib -Wl,-rpath,"+b+"/lib x.c -lgocoll") ||
		!regexp.MustCompile(`(?m)^  wrapper +3 passed, +0 failed`).MatchString(summary) {
		t.Errorf("the wrapper check: mpicc -show does not name the copy %s, or a check failed\n%s\n%s", b, sec["wrapper"], summary)
	}
	if strings.Contains(out, "-> host MPI (CUDA device buffer)") {
		t.Errorf("calls on device memory went to the host MPI\n%s", out)
	}
	// gocoll never makes a blocking-sync event (its waits would sleep
	// until an interrupt): the stand-in counts them in every process.
	events := regexp.MustCompile(`(?m)^stubcuda: pid \d+: .*events created (\d+) \(blocking-sync (\d+)\)(, memop batches \d+)?$`).FindAllStringSubmatch(out, -1)
	made := 0
	for _, e := range events {
		n, _ := strconv.Atoi(e[1])
		made += n
		if e[2] != "0" {
			t.Errorf("a process made %s events with CU_EVENT_BLOCKING_SYNC: %s", e[2], e[0])
		}
	}
	if len(events) == 0 || made == 0 {
		t.Errorf("%d stand-in reports count events, %d events made in all", len(events), made)
	}
	counts := regexp.MustCompile(`(?m)^rank (\d+): (\d+) passed, (\d+) failed$`)
	report := regexp.MustCompile(`(?m)^gocoll: rank \d+: finalize: .* calls run by gocoll (\d+) \(on device memory (\d+)\)`)
	for _, mpi := range mpis {
		name := "preload-" + mpi + "-np2"
		if _, ok := sec[name]; !ok || !strings.Contains(sec[name], "MPI_Allreduce (MPI_FLOAT, MPI_SUM) on 2 ranks") ||
			!regexp.MustCompile(`(?m)^summary MPI_Allreduce np=2: `).MatchString(sec[name]) {
			t.Errorf("%s: no run with an MPI_Allreduce timing table\n%s", name, out)
		}
		calls := sec[name+"-calls"]
		// Each rank's own verdict: the same checks, all passed.
		c := counts.FindAllStringSubmatch(calls, -1)
		if len(c) != 2 || c[0][1] == c[1][1] || c[0][2] != c[1][2] {
			t.Errorf("%s-calls: %d verdict lines, want one from each of 2 ranks with the same checks\n%s", name, len(c), calls)
			continue
		}
		p, _ := strconv.Atoi(c[0][2])
		f, _ := strconv.Atoi(c[0][3])
		f1, _ := strconv.Atoi(c[1][3])
		reports := report.FindAllStringSubmatch(calls, -1)
		if p == 0 || f != 0 || f1 != 0 || len(reports) != 2 {
			t.Errorf("%s-calls: %d passed, %d and %d failed, %d finalize reports for 2 ranks\n%s", name, p, f, f1, len(reports), calls)
			continue
		}
		for _, r := range reports {
			// Each check is one collective on device memory.
			if r[2] != strconv.Itoa(p) {
				t.Errorf("%s-calls: gocoll ran %s calls on device memory on a rank, want one per check (%d)\n%s", name, r[2], p, calls)
			}
		}
		// run.sh counts GOCOLL_DEBUG's lines per call, in each rank's own
		// standard error (and leaves them out of the output).
		lines := regexp.MustCompile(`(?m)^run.sh: `+name+`-calls: rank \d+: gocoll ran (\d+) calls on device memory \(finalize report\), (\d+) GOCOLL_DEBUG lines with memory=device, of (\d+); 0 went to the host MPI`).FindAllStringSubmatch(calls, -1)
		if len(lines) != 2 {
			t.Errorf("%s-calls: %d ranks' counts of device calls, want 2\n%s", name, len(lines), calls)
		}
		for _, l := range lines {
			if l[1] != strconv.Itoa(p) || l[2] != strconv.Itoa(p) || l[3] != strconv.Itoa(p) {
				t.Errorf("%s-calls: %q: want every one of the %d checks run by gocoll on device memory", name, l[0], p)
			}
		}
		if !regexp.MustCompile(`(?m)^  ` + name + `-device +1 passed, +0 failed`).MatchString(summary) {
			t.Errorf("%s: run.sh did not check the device calls\n%s", name, summary)
		}
	}
	// The runs over MPICH used the bundle's runtime: whole, and loaded.
	if bundled {
		if !regexp.MustCompile(`(?m)^  mpich-runtime +1 passed, +0 failed`).MatchString(summary) ||
			!strings.Contains(sec["mpich-runtime"], "mpich/lib/libmpich.so.12: carried: libhwloc.so.15") {
			t.Errorf("no mpich-runtime check passed\n%s\n%s", sec["mpich-runtime"], summary)
		}
		for _, n := range ranks[1:] {
			name := "preload-mpich-np" + strconv.Itoa(n)
			if !regexp.MustCompile(`(?m)^  `+name+`-libmpich +1 passed, +0 failed`).MatchString(summary) ||
				!regexp.MustCompile(`(?m)^gpucoll: MPI library: `+regexp.QuoteMeta(b)+`/mpich-runtime\.\w+/mpich/lib/libmpich\.so\.12 \(PMPI_Init\)$`).MatchString(sec[name]) {
				t.Errorf("%s did not load libmpich.so.12 from the bundle's runtime\n%s\n%s", name, sec[name], summary)
			}
		}
		if m, _ := filepath.Glob(filepath.Join(b, "mpich-runtime.*")); len(m) != 1 {
			t.Errorf("the unpacked MPICH runtime was not removed at exit: %v", m)
		}
	}
}

// sections splits the script's output at its "==== name ====" lines.
func sections(out string) map[string]string {
	sec := map[string]string{}
	name := ""
	for _, line := range strings.SplitAfter(out, "\n") {
		if rest, ok := strings.CutPrefix(line, "==== "); ok {
			name, _, _ = strings.Cut(rest, " ")
			continue
		}
		if name != "" {
			sec[name] += line
		}
	}
	return sec
}
