//go:build cgo

package pmix

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestLoadMissingLibrary(t *testing.T) {
	err := load("libgocoll-no-such-pmix.so.2")
	if err == nil || !strings.HasPrefix(err.Error(), "pmix: cannot load libgocoll-no-such-pmix.so.2: ") {
		t.Errorf("load of a missing library: %v", err)
	}
}

func TestInitWithoutServer(t *testing.T) {
	clearLaunchEnv(t)
	c, err := Init()
	if err == nil || !strings.Contains(err.Error(), "no PMIx server in the environment") {
		t.Errorf("Init without a PMIx environment = %v, %v", c, err)
	}
}

// buildCheck builds testdata/pmixcheck.
func buildCheck(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "pmixcheck")
	out, err := exec.Command("go", "build", "-o", bin, "./testdata/pmixcheck").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// launchEnv is the test's environment without launcher variables, plus
// extra.
func launchEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PMIX_") && !strings.HasPrefix(kv, "OMPI_") && !strings.HasPrefix(kv, "SLURM_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// runBounded runs a command that may not take longer than 60 seconds.
func runBounded(t *testing.T, env []string, name string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = env
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("%s %v did not finish in 60 s:\n%s", name, args, out)
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return string(out), code
}

// TestInitUnreachable points the client at a server that is not there:
// Init must fail at once, naming PMIx_Init and the status.
func TestInitUnreachable(t *testing.T) {
	if err := load(libName); err != nil {
		t.Skipf("libpmix is not installed (apt-get install libpmix2): %v", err)
	}
	uri := "1.0;tcp4://127.0.0.1:1"
	out, code := runBounded(t, launchEnv("PMIX_NAMESPACE=gocolltest", "PMIX_RANK=0",
		"PMIX_SERVER_URI4="+uri, "PMIX_SERVER_URI41="+uri, "PMIX_SERVER_URI3="+uri, "PMIX_SERVER_URI2="+uri,
		"PMIX_SERVER_URI21="+uri), buildCheck(t))
	if code == 0 || !regexp.MustCompile(`pmix: PMIx_Init: \S.* \(-?\d+\)`).MatchString(out) {
		t.Errorf("with no server at %s: exit %d, output:\n%s", uri, code, out)
	}
}

// mpirun returns Open MPI's launcher and the arguments that let it run
// here (as root, more ranks than cores), or skips the test where Open MPI
// is not installed (tools/deps.sh installs it).
func mpirun(t *testing.T) (string, []string, []string) {
	bin, err := exec.LookPath("mpirun.openmpi")
	if err != nil {
		t.Skip("mpirun.openmpi is not installed: apt-get install openmpi-bin")
	}
	env := launchEnv("OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
	return bin, env, []string{"--oversubscribe"}
}

// TestUnderMpirun runs testdata/pmixcheck under Open MPI's mpirun at 1 to
// 4 ranks: rank, size and node map against Open MPI's variables, then
// Allgathers of up to 100 KB and the KVS over them.
func TestUnderMpirun(t *testing.T) {
	launcher, env, args := mpirun(t)
	prog := buildCheck(t)
	for np := 1; np <= 4; np++ {
		t.Run(fmt.Sprintf("np=%d", np), func(t *testing.T) {
			out, code := runBounded(t, env, launcher, append(args, "-np", fmt.Sprint(np), prog)...)
			if code != 0 {
				t.Fatalf("exit %d:\n%s", code, out)
			}
			for r := range np {
				want := fmt.Sprintf("rank %d of %d (PMIx (Open MPI mpirun)): nodes ", r, np)
				if !strings.Contains(out, want) {
					t.Errorf("no line %q in:\n%s", want, out)
				}
			}
			// Every Allgather is one put and one fence, and no get goes
			// to the server: the fences bring the blobs.
			if n := strings.Count(out, "17 round trips (8 puts, 8 fences, 0 gets, 0 bulk gets, 1 other)"); n != np {
				t.Errorf("%d of %d ranks report the expected traffic:\n%s", n, np, out)
			}
			t.Log(out)
		})
	}
}

// TestAbortUnderMpirun: one rank aborts while the others wait in a fence;
// mpirun must end the job with the code, killing the others or failing
// their fence (Open MPI 4.1 fails it: PMIX_ERR_PARTIAL_SUCCESS).
func TestAbortUnderMpirun(t *testing.T) {
	launcher, env, args := mpirun(t)
	out, code := runBounded(t, env, launcher, append(args, "-np", "3", buildCheck(t), "-abort")...)
	if code != 3 || !strings.Contains(out, "pmix: rank 2 aborts the job with code 3: pmixcheck aborts on purpose") {
		t.Errorf("exit %d (want 3), output:\n%s", code, out)
	}
	if strings.Contains(out, "succeeded despite the abort") {
		t.Errorf("a fence succeeded without the aborted rank:\n%s", out)
	}
}
