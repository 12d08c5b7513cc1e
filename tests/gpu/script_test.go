// Package gputest checks tests/gpu/run.sh, the GPU check script, as far
// as a machine without a GPU can: its arguments, that it says plainly
// what is missing, and (--self-test --stub-preload, with a stand-in CUDA
// driver and runtime) that it builds gpucoll.c, runs it under gocollrun
// and LD_PRELOAD on memory the CPU cannot touch, that gocoll itself runs
// the LD_PRELOAD calls on device memory, and that it adds up the results.
// On a GPU machine, run the script itself.
package gputest

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gocoll/gocoll/tests/internal/harness"
)

// TestMain builds gocoll first (make build), as the other test packages
// do: the self-test needs the launcher, the wrappers and both libraries,
// and a missing one is a failure, never a skip.
func TestMain(m *testing.M) { harness.Main(m, 2, "build", nil) }

func script(t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command("./run.sh", args...)
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), code
}

func TestArguments(t *testing.T) {
	out, code := script(t, "--help")
	if code != 0 || !strings.Contains(out, "usage: tests/gpu/run.sh") || !strings.Contains(out, "--self-test") {
		t.Errorf("--help: exit %d\n%s", code, out)
	}
	for _, bad := range [][]string{{"--bogus"}, {"--ranks", "1"}, {"--ranks", "x"}, {"--max-bytes", "lots"},
		{"--timeout", "-3"}, {"--mpi", "lam"}, {"--ranks"}} {
		out, code := script(t, bad...)
		if code != 2 || !strings.Contains(out, "run.sh: ") {
			t.Errorf("%q: exit %d, want 2 with a message\n%s", bad, code, out)
		}
	}
}

// Without a GPU the script stops at once, saying what is missing, and
// still prints the summary line.
func TestReportsMissingGPU(t *testing.T) {
	if _, err := exec.LookPath("nvidia-smi"); err == nil {
		t.Skip("this machine has nvidia-smi")
	}
	out, code := script(t, "--quick")
	if code != 2 || !strings.Contains(out, "no NVIDIA GPU driver (nvidia-smi not found)") ||
		!strings.Contains(out, "0 passed, 1 failed") {
		t.Errorf("exit %d\n%s", code, out)
	}
}

// The whole flow on stand-in device memory, which the CPU cannot touch:
// build, run under gocollrun and under LD_PRELOAD over each host MPI
// installed (Open MPI, MPICH), add up. Under LD_PRELOAD gocoll must run
// every call on device memory itself: the host MPIs here are not
// CUDA-aware (any CPU access to the stand-in memory crashes), and the
// GOCOLL_DEBUG=info run's finalize reports must count every check's
// collective, on every rank, as a device call gocoll ran.
func TestSelfTest(t *testing.T) {
	root, _ := filepath.Abs("../..")
	for _, f := range []string{"build/bin/gocollrun", "build/bin/mpicc", "build/lib/libgocoll.so", "build/lib/libgocoll-preload.so"} {
		if _, err := os.Stat(filepath.Join(root, f)); err != nil {
			t.Fatalf("%s is missing after make build: %v", f, err)
		}
	}
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
	args := []string{"--self-test", "--quick", "--ranks", "2", "--max-bytes", "4096", "--stub-preload"}
	switch len(mpis) {
	case 0:
		t.Log("no host MPI: no LD_PRELOAD runs")
		args = append(args, "--no-preload")
	case 1:
		args = append(args, "--mpi", mpis[0])
	default:
		args = append(args, "--mpi", "both")
	}
	out, code := script(t, args...)
	m := regexp.MustCompile(`(?m)^(\d+) passed, (\d+) failed$`).FindAllStringSubmatch(out, -1)
	if code != 0 || len(m) == 0 || m[len(m)-1][2] != "0" || m[len(m)-1][1] == "0" {
		t.Fatalf("exit %d\n%s", code, out)
	}
	for _, want := range []string{"==== gocollrun-np2 ====", "device us", "==== summary"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in the output\n%s", want, out)
		}
	}
	if strings.Contains(out, "-> host MPI (CUDA device buffer)") {
		t.Errorf("calls on device memory went to the host MPI\n%s", out)
	}
	sec := sections(out)
	counts := regexp.MustCompile(`(?m)^rank (\d+): (\d+) passed, (\d+) failed$`)
	report := regexp.MustCompile(`(?m)^gocoll: rank \d+: finalize: .* calls run by gocoll (\d+) \(on device memory (\d+)\)`)
	for _, mpi := range mpis {
		name := "preload-" + mpi + "-np2"
		if _, ok := sec[name]; !ok || !strings.Contains(sec[name], "device us") {
			t.Errorf("%s: no run with a timing table\n%s", name, out)
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
		if !regexp.MustCompile(`(?m)^  ` + name + `-device +1 passed, +0 failed`).MatchString(out) {
			t.Errorf("%s: run.sh did not check the device calls\n%s", name, out)
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
