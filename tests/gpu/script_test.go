// Package gputest checks tests/gpu/run.sh, the GPU check script, as far
// as a machine without a GPU can: its arguments, that it says plainly
// what is missing, and (--self-test, with a stand-in CUDA runtime) that it
// builds gpucoll.c, runs it under gocollrun and LD_PRELOAD and adds up the
// results. On a GPU machine, run the script itself.
package gputest

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

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

// The whole flow on host memory posing as device memory: build, run
// under gocollrun and under LD_PRELOAD, add up.
func TestSelfTest(t *testing.T) {
	root, _ := filepath.Abs("../..")
	for _, f := range []string{"build/bin/gocollrun", "build/bin/mpicc", "build/lib/libgocoll.so", "build/lib/libgocoll-preload.so"} {
		if _, err := os.Stat(filepath.Join(root, f)); err != nil {
			t.Skipf("%s is not built (make build)", f)
		}
	}
	args := []string{"--self-test", "--quick", "--ranks", "2", "--max-bytes", "4096"}
	if _, err := exec.LookPath("mpirun.openmpi"); err != nil {
		args = append(args, "--no-preload")
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
}
