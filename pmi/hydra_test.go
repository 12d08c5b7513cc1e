package pmi

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// buildProg builds testdata/pmiprog.
func buildProg(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "pmiprog")
	out, err := exec.Command("go", "build", "-o", bin, "./testdata/pmiprog").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// cleanEnv is the test's environment without any PMI_ variable, in case
// the test itself runs under a launcher.
func cleanEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PMI_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// runBounded runs a command that may not take longer than 30 seconds.
func runBounded(t *testing.T, env []string, name string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = env
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("%s %v did not finish in 30 s:\n%s", name, args, out)
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return string(out), code
}

func TestSingleton(t *testing.T) {
	out, code := runBounded(t, cleanEnv(), buildProg(t))
	if code != 0 || strings.TrimSpace(out) != "SINGLETON" {
		t.Errorf("without a launcher: exit %d, output %q", code, out)
	}
}

// TestUnderHydra runs the PMI-1 and the PMI-2 client (hydra speaks both)
// under MPICH's own launcher, in both of its connection modes.
func TestUnderHydra(t *testing.T) {
	mpiexec, err := exec.LookPath("mpiexec.mpich")
	if err != nil {
		t.Skip("mpiexec.mpich (MPICH's hydra) is not installed: apt-get install mpich")
	}
	bin := buildProg(t)
	for _, version := range []string{"1", "2"} {
		for _, mode := range []struct {
			name string
			args []string
		}{
			{"PMI_FD", []string{"-n", "3", bin}},
			{"PMI_PORT", []string{"-pmi-port", "-n", "3", bin}},
		} {
			t.Run("PMI-"+version+"/"+mode.name, func(t *testing.T) {
				out, code := runBounded(t, cleanEnv("GOCOLL_PMI="+version), mpiexec, mode.args...)
				if code != 0 {
					t.Fatalf("exit %d:\n%s", code, out)
				}
				for r := range 3 {
					if want := fmt.Sprintf("PASS rank %d of 3 via PMI-%s", r, version); !strings.Contains(out, want) {
						t.Errorf("no %q in:\n%s", want, out)
					}
				}
			})
		}
	}
	t.Run("abort", func(t *testing.T) {
		// Only the exit code is checked: hydra kills the job as soon as
		// the abort arrives and sometimes drops what the aborting rank
		// wrote to stderr just before (seen about 1 run in 10 under load).
		out, code := runBounded(t, cleanEnv("PMIPROG_ABORT=1"), mpiexec, "-n", "3", bin)
		if code != 5 {
			t.Errorf("abort with code 5 under hydra: exit %d, output:\n%s", code, out)
		}
		// MPICH 4.0.2's hydra does not know PMI-2's abort: it ends the
		// job (exit 255, "Unrecognized PMI command: abort") instead of
		// exiting with the code. The job must end, not hang.
		out, code = runBounded(t, cleanEnv("GOCOLL_PMI=2", "PMIPROG_ABORT=1"), mpiexec, "-n", "3", bin)
		if code == 0 || strings.Contains(out, "PASS") {
			t.Errorf("abort under hydra with PMI-2: exit %d, output:\n%s", code, out)
		}
	})
}
