package reliability

import (
	"github.com/gocoll/gocoll/tests/internal/harness"

	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// In LD_PRELOAD mode the host MPI's launcher owns the job: a rank that
// dies or stops in the middle of gocoll's collectives must still not
// hang it. The ranks ignore SIGTERM (victim -ignore-term), so that the
// launcher cannot end a survivor before gocoll has noticed the failure;
// where a survivor prints gocoll's message, it must name the collective,
// the communicator and the failed rank. A stopped rank makes the others
// time out (GOCOLL_TIMEOUT=3s) naming it. (Where the host MPI runs a
// call, its own failure handling applies: Open MPI's and MPICH's
// collectives wait for a stopped rank forever.)
func TestPreloadFailureDetection(t *testing.T) {
	lib := filepath.Join(harness.Root, "build", "lib", "libgocoll-preload.so")
	if _, err := os.Stat(lib); err != nil {
		t.Fatalf("%s is missing: make builds it", lib)
	}
	mpis := []struct {
		name, cc string
		argv     func(prog string, env ...string) []string
	}{
		{"openmpi", "mpicc.openmpi", func(prog string, env ...string) []string {
			a := []string{"mpirun.openmpi", "--allow-run-as-root", "--oversubscribe", "--mca", "btl", "self,vader", "-np", "4"}
			for _, e := range env {
				a = append(a, "-x", e)
			}
			return append(a, prog)
		}},
		{"mpich", "mpicc.mpich", func(prog string, env ...string) []string {
			a := []string{"mpiexec.mpich", "-n", "4"}
			for _, e := range env {
				k, v, _ := strings.Cut(e, "=")
				a = append(a, "-genv", k, v)
			}
			return append(a, prog)
		}},
	}
	for _, m := range mpis {
		if _, err := exec.LookPath(m.cc); err != nil {
			t.Fatalf("%s is missing: `make deps` installs Open MPI and MPICH", m.cc)
		}
		bin := harness.Compile(t, m.cc, "victim-"+m.name, nil, "tests/reliability/c/victim.c")
		for _, how := range []failure{killed, stopped} {
			t.Run(m.name+"/"+string(how), func(t *testing.T) {
				// gocoll's own algorithm, not whatever the measured rules give
				// this size (the host MPI's collective has no timeout).
				argv := m.argv(bin, "LD_PRELOAD="+lib, "GOCOLL_TIMEOUT="+stallTimeout.String(), "GOCOLL_ALLREDUCE_ALGORITHM=shm")
				argv = append(argv, "-ignore-term", "-coll", "allreduce", "-count", "50000")
				j := startJob(t, nil, argv...)
				pids := map[int]int{}
				for _, mm := range j.waitFor(ready, 4, 60*time.Second) {
					r, _ := strconv.Atoi(mm[1])
					pids[r], _ = strconv.Atoi(mm[2])
				}
				const victim = 2
				defer syscall.Kill(pids[victim], syscall.SIGKILL)
				time.Sleep(300 * time.Millisecond)
				sig := syscall.SIGKILL
				if how == stopped {
					sig = syscall.SIGSTOP
				}
				t0 := time.Now()
				syscall.Kill(pids[victim], sig)
				j.wait(stallTimeout + 30*time.Second)
				took := time.Since(t0)
				out := j.output()
				if strings.Contains(out, "WRONG") {
					t.Errorf("a rank reported a wrong result:\n%s", out)
				}
				msgs := regexp.MustCompile(`(?m)^gocoll: MPI_\w+: .*$`).FindAllString(out, -1)
				for _, msg := range msgs {
					// A stopped victim that the launcher wakes to end it
					// prints its own message, naming another rank.
					own := strings.HasSuffix(msg, "(rank 2 of MPI_COMM_WORLD)")
					if !strings.Contains(msg, "MPI_Allreduce: ") || !strings.Contains(msg, "failed on MPI_COMM_WORLD ") ||
						!(own || strings.Contains(msg, "rank 2: ")) {
						t.Errorf("%q does not name the call, the communicator and rank 2", msg)
					}
				}
				if how == stopped && len(msgs) == 0 {
					t.Errorf("no rank reported the stalled rank:\n%s", out)
				}
				t.Logf("%s %s: the job ended %v later, %d gocoll messages", m.name, how, took.Round(time.Millisecond), len(msgs))
				// The launcher may exit before the ranks it told to end
				// have: give them a moment.
				for r, pid := range pids {
					for end := time.Now().Add(10 * time.Second); r != victim && alive(pid) && time.Now().Before(end); {
						time.Sleep(20 * time.Millisecond)
					}
					if r != victim && alive(pid) {
						t.Errorf("rank %d (pid %d) outlived the job by 10 s", r, pid)
					}
				}
				if t.Failed() {
					t.Logf("output:\n%s", out)
				}
			})
		}
	}
}
