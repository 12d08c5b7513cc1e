package reliability

import (
	"github.com/gocoll/gocoll/tests/internal/harness"

	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// shmMaps returns the gocoll segments (/dev/shm/gocoll-*) that process
// pid maps, and which of them are unlinked (the kernel says "(deleted)").
func shmMaps(pid int) (paths []string, unlinked map[string]bool, err error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	unlinked = map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		_, path, ok := strings.Cut(sc.Text(), " /dev/shm/gocoll-")
		if !ok {
			continue
		}
		path = "/dev/shm/gocoll-" + path
		path, deleted := strings.CutSuffix(path, " (deleted)")
		if !slices.Contains(paths, path) {
			paths = append(paths, path)
		}
		unlinked[path] = deleted
	}
	return paths, unlinked, sc.Err()
}

// Under LD_PRELOAD no gocollrun cleans /dev/shm after the job: a rank
// SIGKILLed in the middle of gocoll's collectives must leave no segment
// because gocoll unlinks every segment as soon as every rank has mapped
// it. The test reads the segments each rank maps while the job runs
// (/proc/PID/maps): there must be some (gocoll's shm algorithm runs on
// MPI_COMM_WORLD and a split), already unlinked, and none of them may
// exist once the host MPI's launcher has ended the job.
func TestPreloadKilledRankLeavesNoSegment(t *testing.T) {
	lib := filepath.Join(harness.Root, "build", "lib", "libgocoll-preload.so")
	if _, err := os.Stat(lib); err != nil {
		t.Fatalf("%s is missing: make builds it", lib)
	}
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 11))
	for _, m := range []struct {
		name, cc string
		argv     func(env ...string) []string
	}{
		{"openmpi", "mpicc.openmpi", func(env ...string) []string {
			a := []string{"mpirun.openmpi", "--allow-run-as-root", "--oversubscribe", "--mca", "btl", "self,vader", "-np", "4"}
			for _, e := range env {
				a = append(a, "-x", e)
			}
			return a
		}},
		{"mpich", "mpicc.mpich", func(env ...string) []string {
			a := []string{"mpiexec.mpich", "-n", "4"}
			for _, e := range env {
				k, v, _ := strings.Cut(e, "=")
				a = append(a, "-genv", k, v)
			}
			return a
		}},
	} {
		if _, err := exec.LookPath(m.cc); err != nil {
			t.Fatalf("%s is missing: `make deps` installs Open MPI and MPICH", m.cc)
		}
		bin := harness.Compile(t, m.cc, "victim-"+m.name, nil, "tests/reliability/c/victim.c")
		victim := rng.IntN(4)
		delay := time.Duration(50+rng.IntN(400)) * time.Millisecond
		t.Run(m.name, func(t *testing.T) {
			argv := append(m.argv("LD_PRELOAD="+lib, "GOCOLL_TIMEOUT="+stallTimeout.String(), "GOCOLL_ALLREDUCE_ALGORITHM=shm"),
				bin, "-ignore-term", "-coll", "allreduce", "-count", "50000", "-comm", "split")
			j := startJob(t, nil, argv...)
			pids := map[int]int{}
			for _, mm := range j.waitFor(ready, 4, time.Minute) {
				r, _ := strconv.Atoi(mm[1])
				pids[r], _ = strconv.Atoi(mm[2])
			}
			defer syscall.Kill(pids[victim], syscall.SIGKILL)
			var segments []string
			for r, pid := range pids {
				paths, unlinked, err := shmMaps(pid)
				if err != nil {
					t.Fatalf("rank %d: %v", r, err)
				}
				for _, p := range paths {
					if !unlinked[p] {
						t.Errorf("rank %d maps %s, which is still linked while the job runs", r, p)
					}
					if !slices.Contains(segments, p) {
						segments = append(segments, p)
					}
				}
			}
			if len(segments) == 0 {
				t.Fatalf("no rank maps a gocoll segment: gocoll's shm algorithm did not run, and this test would prove nothing\n%s", j.output())
			}
			time.Sleep(delay)
			if err := syscall.Kill(pids[victim], syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			j.wait(stallTimeout + time.Minute)
			for r, pid := range pids {
				for end := time.Now().Add(10 * time.Second); alive(pid) && time.Now().Before(end); {
					time.Sleep(20 * time.Millisecond)
				}
				if alive(pid) {
					t.Errorf("rank %d (pid %d) outlived the job by 10 s", r, pid)
					syscall.Kill(pid, syscall.SIGKILL)
				}
			}
			for _, p := range segments {
				if _, err := os.Lstat(p); err == nil {
					t.Errorf("%s is left in /dev/shm after rank %d was killed", p, victim)
					os.Remove(p)
				}
			}
			t.Logf("rank %d SIGKILLed after %v; the job had %d segments: %v", victim, delay, len(segments), segments)
			if t.Failed() {
				t.Logf("output:\n%s", j.output())
			}
		})
	}
}
