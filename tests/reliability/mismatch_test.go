package reliability

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The paths a collective can take on one host, each as an environment:
// the defaults (the C fast path and the shm algorithms), the schedule
// algorithms over the shared-memory transport, and over TCP.
var paths = []struct {
	name string
	env  []string
}{
	{"default", nil},
	{"shm-transport", []string{"GOCOLL_ALLREDUCE_ALGORITHM=ring", "GOCOLL_REDUCE_SCATTER_BLOCK_ALGORITHM=ring",
		"GOCOLL_REDUCE_SCATTER_ALGORITHM=ring", "GOCOLL_ALLGATHER_ALGORITHM=ring"}},
	{"tcp", []string{"GOCOLL_TRANSPORT=tcp", "GOCOLL_ALLREDUCE_ALGORITHM=recursive_doubling",
		"GOCOLL_REDUCE_SCATTER_BLOCK_ALGORITHM=recursive_halving", "GOCOLL_REDUCE_SCATTER_ALGORITHM=pairwise",
		"GOCOLL_ALLGATHER_ALGORITHM=bruck"}},
}

// With GOCOLL_CHECK=1, every kind of mismatch through the C ABI (count,
// op, user op, datatype of the same size, collective, barrier, in place,
// root, recvcounts, invalid arguments on one rank) fails on every rank
// with the right class, and the communicator keeps working.
func TestCheckCatchesMismatchesInC(t *testing.T) {
	bin := compile(t, "tests/reliability/c/mismatch.c", "mismatch")
	for _, path := range paths {
		for _, n := range []int{2, 3, 5} {
			env := append([]string{"GOCOLL_CHECK=1", "GOCOLL_TIMEOUT=10s", "GOCOLL_FALLBACK=silent"}, path.env...)
			out, code := run(t, time.Minute, env, gocollrun(n, bin)...)
			expectRanks(t, fmt.Sprintf("mismatch, %s, %d ranks", path.name, n), out, code, n)
		}
	}
}

// With the default error handler the check's message names the call and
// both ranks' arguments, and the job ends.
func TestCheckMessage(t *testing.T) {
	bin := compile(t, "tests/reliability/c/mismatch.c", "mismatch")
	for _, tc := range []struct{ c, want string }{
		{"count", `gocoll: MPI_Allreduce: collective mismatch across ranks \(GOCOLL_CHECK=1\): rank 0 calls MPI_Allreduce\(count 10, MPI_INT x1, MPI_SUM\) but rank 2 calls MPI_Allreduce\(count 9, MPI_INT x1, MPI_SUM\)`},
		{"datatype", `rank 0 calls MPI_Allreduce\(count 10, MPI_INT x1, MPI_SUM\) but rank 2 calls MPI_Allreduce\(count 10, MPI_FLOAT x1, MPI_SUM\)`},
		{"collective", `rank 0 calls MPI_Allreduce\(.*\) but rank 2 calls MPI_Allgather\(`},
		{"bcast-root", `gocoll: MPI_Bcast: .*rank 0 calls MPI_Bcast\(.*root 0\) but rank 2 calls MPI_Bcast\(.*root 1\)`},
		{"invalid-count", `gocoll: MPI_Allreduce: (count is negative|.*rank 2 passed invalid arguments)`},
	} {
		out, code := run(t, time.Minute, []string{"GOCOLL_CHECK=1"}, gocollrun(3, bin, "-fatal", tc.c)...)
		if code == 0 || strings.Contains(out, "still running") {
			t.Errorf("%s: exit %d, the job went on:\n%s", tc.c, code, out)
		}
		if !regexp.MustCompile(tc.want).MatchString(out) {
			t.Errorf("%s: no message matching %q:\n%s", tc.c, tc.want, out)
		}
	}
}

// Calls that can never match (one rank on another communicator), which
// no signature check can see, still end within the timeout on every path,
// and the shared-memory transport calls it a deadlock.
//
// Twice the timeout is the most a rank waits for one that waits: the
// job must end within that, plus a slack, after the last rank has
// entered the deadlocked call (its `calling` line), which leaves
// gocollrun's start-up out. The slack is 3 s, or four times the measured
// start-up (gocollrun to every rank's `calling` line) on a machine slow
// enough for that to be more.
func TestDeadlockEnds(t *testing.T) {
	bin := compile(t, "tests/reliability/c/mismatch.c", "mismatch")
	const timeout = 2 * time.Second
	calling := regexp.MustCompile(`^rank (\d+): calling$`)
	for _, path := range paths {
		j := startJob(t, append([]string{"GOCOLL_TIMEOUT=" + timeout.String()}, path.env...), gocollrun(4, bin, "-deadlock")...)
		j.waitFor(calling, 4, time.Minute)
		in := time.Now()
		startup := in.Sub(j.start)
		code := j.wait(time.Minute)
		took := j.ended.Sub(in)
		out := j.output()
		if code == 0 {
			t.Errorf("%s: exit %d:\n%s", path.name, code, out)
		}
		// The first rank to fail ends the job (MPI_ERRORS_ARE_FATAL): over
		// TCP that may be the partner of the rank that found the
		// deadlock, which only sees the connection close.
		if !regexp.MustCompile(`(?m)^gocoll: MPI_Allreduce: MPI_Allreduce failed on MPI_COMM_WORLD.*(timed out|connection closed)`).MatchString(out) {
			t.Errorf("%s: no timeout message:\n%s", path.name, out)
		}
		if path.name == "shm-transport" && !strings.Contains(out, "deadlock") {
			t.Errorf("%s: the message does not say deadlock:\n%s", path.name, out)
		}
		bound := 2*timeout + max(3*time.Second, 4*startup)
		if took > bound {
			t.Errorf("%s: the job ended %v after every rank called, GOCOLL_TIMEOUT=%v, bound %v (start-up %v)",
				path.name, took.Round(time.Millisecond), timeout, bound, startup.Round(time.Millisecond))
		}
		t.Logf("%s: the job ended %v after every rank called (bound %v, start-up %v)", path.name,
			took.Round(time.Millisecond), bound.Round(time.Millisecond), startup.Round(time.Millisecond))
	}
}

// Without GOCOLL_CHECK, counts that disagree between ranks may fail or
// complete, but never write outside the receive buffer or into the send
// buffer (each ends at a PROT_NONE page, with canary bytes before it),
// never crash and never hang.
func TestMismatchWithoutCheckStaysInBuffers(t *testing.T) {
	bin := compile(t, "tests/reliability/c/canary.c", "canary")
	cases := []string{"allreduce-short", "allreduce-long", "allreduce-zero", "rsb-short", "rsb-long",
		"rs-shifted", "rs-long", "allgather-short", "allgather-long", "allgatherv-long"}
	intact := regexp.MustCompile(`(?m)^rank (\d+): rc (\d+), buffers intact$`)
	classes := map[string]int{}
	for _, path := range paths {
		for _, c := range cases {
			for _, n := range []int{10, 5000} {
				what := fmt.Sprintf("%s, %s, n=%d", c, path.name, n)
				out, code := run(t, 30*time.Second, append([]string{"GOCOLL_TIMEOUT=2s"}, path.env...), gocollrun(3, bin, "-case", c, "-n", fmt.Sprint(n))...)
				m := intact.FindAllStringSubmatch(out, -1)
				if code != 0 || len(m) != 3 || strings.Contains(out, "CORRUPT") {
					t.Errorf("%s: exit %d, %d of 3 ranks intact:\n%s", what, code, len(m), out)
				}
				for _, r := range m {
					classes[r[2]]++
				}
			}
		}
	}
	t.Logf("outcomes by MPI error class over every rank of every run: %v", classes)
}
