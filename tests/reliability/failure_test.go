package reliability

import (
	"github.com/gocoll/gocoll/tests/internal/harness"

	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The timeouts and bounds. A dead peer (SIGKILL, exit) is found without
// any timeout: the shared-memory paths look for dead peers every 100 ms,
// TCP sees the connection close at once. Those jobs run with
// GOCOLL_TIMEOUT=60s, and every survivor must print its own `peer failed`
// error, not a timeout, and well within the timeout (a quarter of it):
// one that waited for the timeout could not, as gocollrun kills the
// survivors 3 s after it sees the death. After a peer stops (SIGSTOP) the
// survivors fail at GOCOLL_TIMEOUT=3s plus a slack: at least stallSlack,
// more on a loaded machine, where the slack is four times the job's
// measured start-up (gocollrun to every rank's first collective), the
// same kind of work (scheduling, waking ranks) the machine's load slows
// down. Waiting twice the timeout (giving up on a waiting neighbour by
// itself) shows in the message, which then names the neighbour.
const (
	deadTimeout  = 60 * time.Second
	stallTimeout = 3 * time.Second
	stallSlack   = 2500 * time.Millisecond
)

// failure is one way a rank goes wrong in the middle of a job.
type failure string

const (
	killed  failure = "SIGKILL" // killed: the process is gone
	stopped failure = "SIGSTOP" // stopped: alive, but never answers
	exited  failure = "exit"    // exits by itself, without MPI_Finalize
)

// scenario is one job in which one rank fails.
type scenario struct {
	name   string
	env    []string // on top of GOCOLL_TIMEOUT
	coll   string   // victim's -coll
	count  int
	comm   string // world, dup or split
	n      int    // ranks
	how    failure
	goMode bool   // the Go program (package mpi) instead of the C one
	path   string // the counter (gocoll_test_counter's key) the job's calls move: the path under test
}

// callNames maps victim's -coll to the MPI call in error messages.
var callNames = map[string]string{
	"allreduce": "MPI_Allreduce", "reduce_scatter": "MPI_Reduce_scatter",
	"reduce_scatter_block": "MPI_Reduce_scatter_block", "allgather": "MPI_Allgather",
	"allgatherv": "MPI_Allgatherv", "barrier": "MPI_Barrier", "bcast": "MPI_Bcast",
}

var commNames = map[string]string{"world": "MPI_COMM_WORLD", "dup": "MPI_COMM_WORLD/dup", "split": "MPI_COMM_WORLD/split"}

// The failure matrix: every way of failing on every path a collective
// can take on one host: the C fast path for small calls, the shm
// algorithms on a communicator's shared segment, the schedule algorithms
// over the shared-memory transport, and over TCP; in C and in Go.
func failureScenarios() []scenario {
	tcp := []string{"GOCOLL_TRANSPORT=tcp"}
	var ss []scenario
	for _, how := range []failure{killed, stopped, exited} {
		ss = append(ss,
			scenario{name: "fastpath-allreduce", coll: "allreduce", count: 16, comm: "world", n: 4, how: how, path: "MPI_Allreduce.fast"},
			scenario{name: "fastpath-barrier", coll: "barrier", comm: "dup", n: 3, how: how, path: "MPI_Barrier.fast"},
			scenario{name: "fastpath-reduce-scatter", coll: "reduce_scatter", count: 8, comm: "split", n: 3, how: how, path: "MPI_Reduce_scatter.fast"},
			scenario{name: "fastpath-bcast", coll: "bcast", count: 16, comm: "dup", n: 3, how: how, path: "MPI_Bcast.fast"},
			scenario{name: "shm-algorithm-allreduce", coll: "allreduce", count: 50000, comm: "split", n: 4, how: how, path: "MPI_Allreduce.shm"},
			scenario{name: "shm-algorithm-allgatherv", coll: "allgatherv", count: 20000, comm: "world", n: 3, how: how, path: "MPI_Allgatherv.shm"},
			// 80000 B a block on 2 ranks (no more than this VM's cores):
			// read with CMA, the owner waiting for its readers.
			scenario{name: "shm-algorithm-allgather-cma", coll: "allgather", count: 20000, comm: "dup", n: 2, how: how, path: "MPI_Allgather.shm"},
			scenario{name: "shm-transport-ring", env: []string{"GOCOLL_ALLREDUCE_ALGORITHM=ring"}, coll: "allreduce", count: 50000, comm: "world", n: 4, how: how, path: "MPI_Allreduce.ring"},
			scenario{name: "shm-transport-reduce-scatter", env: []string{"GOCOLL_REDUCE_SCATTER_ALGORITHM=pairwise"}, coll: "reduce_scatter", count: 3000, comm: "split", n: 3, how: how, path: "MPI_Reduce_scatter.pairwise"},
			scenario{name: "tcp-ring", env: append(tcp, "GOCOLL_ALLREDUCE_ALGORITHM=ring"), coll: "allreduce", count: 50000, comm: "world", n: 4, how: how, path: "MPI_Allreduce.ring"},
			scenario{name: "tcp-allgather-bruck", env: append(tcp, "GOCOLL_ALLGATHER_ALGORITHM=bruck"), coll: "allgather", count: 100, comm: "split", n: 3, how: how, path: "MPI_Allgather.bruck"},
			scenario{name: "go-shm-algorithm", coll: "allreduce", count: 50000, comm: "world", n: 4, how: how, goMode: true, path: "MPI_Allreduce.shm"},
			scenario{name: "go-tcp-recursive-doubling", env: append(tcp, "GOCOLL_ALLREDUCE_ALGORITHM=recursive_doubling"), coll: "allreduce", count: 1000, comm: "dup", n: 4, how: how, goMode: true, path: "MPI_Allreduce.recursive_doubling"},
		)
	}
	return ss
}

// testSeed is the seed of the random choices (which rank fails, and
// when); GOCOLL_TEST_SEED replays a run.
func testSeed(t *testing.T) uint64 {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("GOCOLL_TEST_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("GOCOLL_TEST_SEED=%d", seed)
	return seed
}

// A rank killed, stopped or ending in the middle of collectives makes
// every other rank fail on its own within the bound, with a message that
// names the collective, the communicator and the failed rank; gocollrun
// says which rank failed and how; nothing is left behind.
func TestFailureDetection(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 7))
	cprog := compile(t, "tests/reliability/c/victim.c", "victim")
	goprog := harness.BuildGo(t, "tests/reliability/testdata/govictim", "govictim")
	for _, s := range failureScenarios() {
		victim := rng.IntN(s.n)
		delay := time.Duration(50+rng.IntN(400)) * time.Millisecond
		t.Run(fmt.Sprintf("%s/%s", s.name, s.how), func(t *testing.T) {
			// Two jobs at a time: the stalled ones mostly wait.
			t.Parallel()
			prog := cprog
			if s.goMode {
				prog = goprog
			}
			runScenario(t, s, prog, victim, delay)
		})
	}
}

var ready = regexp.MustCompile(`^rank (\d+) pid (\d+) job (\S+) comm-rank (\d+) path (-?\d+)$`)

func runScenario(t *testing.T, s scenario, prog string, victim int, delay time.Duration) {
	args := []string{"-ignore-term", "-coll", s.coll, "-count", strconv.Itoa(max(s.count, 1)), "-comm", s.comm, "-path", s.path}
	if s.how == exited {
		args = append(args, "-exit", strconv.Itoa(victim))
	}
	timeout := deadTimeout
	if s.how == stopped {
		timeout = stallTimeout
	}
	env := append([]string{"GOCOLL_TIMEOUT=" + timeout.String()}, s.env...)
	j := startJob(t, env, gocollrun(s.n, prog, args...)...)
	pids := map[int]int{}
	var jobID string
	for _, m := range j.waitFor(ready, s.n, 30*time.Second) {
		r, _ := strconv.Atoi(m[1])
		pids[r], _ = strconv.Atoi(m[2])
		jobID = m[3]
		// The first call ran on the path the scenario is about, or the
		// failure below would be tested on another one.
		if n, _ := strconv.Atoi(m[5]); n != 1 {
			t.Errorf("rank %d: %s is %d after the first call, want 1: the call did not take the path under test", r, s.path, n)
		}
	}
	startup := time.Since(j.start)
	var allPids []int
	for _, p := range pids {
		allPids = append(allPids, p)
	}
	// The victim is stopped: whatever happens, do not leave it behind.
	defer syscall.Kill(pids[victim], syscall.SIGKILL)

	var t0 time.Time
	switch s.how {
	case killed, stopped:
		time.Sleep(delay) // somewhere inside the loop of collectives
		sig := syscall.SIGKILL
		if s.how == stopped {
			sig = syscall.SIGSTOP
		}
		t0 = time.Now()
		if err := syscall.Kill(pids[victim], sig); err != nil {
			t.Fatal(err)
		}
	case exited:
		re := regexp.MustCompile(fmt.Sprintf(`^rank %d: exiting`, victim))
		j.waitFor(re, 1, 30*time.Second)
		first, _ := j.firstLine(re)
		t0 = first.at
	}
	bound := timeout / 4
	if s.how == stopped {
		bound = timeout + max(stallSlack, 4*startup)
	}
	code := j.wait(bound + 15*time.Second)
	out := j.output()
	if code == 0 {
		t.Errorf("gocollrun exited 0 after rank %d failed", victim)
	}
	if strings.Contains(out, "WRONG") {
		t.Errorf("a rank reported a wrong result:\n%s", out)
	}

	// Every survivor failed by itself, in time, naming the call, the
	// communicator and the failed rank.
	call, comm := callNames[s.coll], commNames[s.comm]
	var worst time.Duration
	lines := map[int]line{}
	for r := range s.n {
		if l, ok := j.firstLine(regexp.MustCompile(fmt.Sprintf(`^gocoll: .*\(rank %d\)$`, r))); ok && r != victim {
			lines[r] = l
		}
	}
	tcp := slices.Contains(s.env, "GOCOLL_TRANSPORT=tcp")
	for r := range s.n {
		if r == victim {
			continue
		}
		l, ok := lines[r]
		if !ok {
			t.Errorf("rank %d printed no error of its own (killed by gocollrun instead?)", r)
			continue
		}
		took := l.at.Sub(t0)
		worst = max(worst, took)
		if took > bound {
			t.Errorf("rank %d failed %v after rank %d %s, bound %v: %s", r, took.Round(time.Millisecond), victim, s.how, bound, l.text)
		}
		for _, want := range []string{call + ": ", "failed on " + comm + " "} {
			if !strings.Contains(l.text, want) {
				t.Errorf("rank %d's error lacks %q: %s", r, want, l.text)
			}
		}
		if !strings.Contains(l.text, fmt.Sprintf("rank %d: ", victim)) {
			// Over TCP a rank may hear of a death only through a
			// neighbour that gave up and ended before its news came
			// (connections are made on first use): it then names that
			// neighbour, whose own message names the dead rank. Stalls
			// are always blamed on the stalled rank.
			named := regexp.MustCompile(`rank (\d+): peer failed`).FindStringSubmatch(l.text)
			cascade := false
			if named != nil {
				x, _ := strconv.Atoi(named[1])
				_, cascade = lines[x]
			}
			if tcp && s.how != stopped && cascade {
				t.Logf("rank %d names rank %s, which gave up after rank %d failed: %s", r, named[1], victim, l.text)
			} else {
				t.Errorf("rank %d's error does not name rank %d: %s", r, victim, l.text)
			}
		}
		if s.how == stopped && !strings.Contains(l.text, "timed out") {
			t.Errorf("rank %d's error does not say it timed out: %s", r, l.text)
		}
		if s.how != stopped && (!strings.Contains(l.text, "peer failed") || strings.Contains(l.text, "timed out")) {
			t.Errorf("rank %d's error does not say that a peer failed, or says it timed out (GOCOLL_TIMEOUT=%v): %s", r, timeout, l.text)
		}
	}
	t.Logf("rank %d %s after %v; survivors failed within %v (bound %v, start-up %v); gocollrun exit %d",
		victim, s.how, delay, worst.Round(time.Millisecond), bound.Round(time.Millisecond), startup.Round(time.Millisecond), code)

	// gocollrun says which rank failed and how.
	var report string
	switch s.how {
	case killed:
		report = fmt.Sprintf(`rank %d \(pid %d\) killed by signal 9 \(SIGKILL\)`, victim, pids[victim])
	case exited:
		report = fmt.Sprintf(`rank %d \(pid %d\) exited with status 3`, victim, pids[victim])
	case stopped:
		report = fmt.Sprintf(`rank %d \(pid %d\) did not exit within .*; sending SIGKILL`, victim, pids[victim])
	}
	if !regexp.MustCompile(`(?m)^gocollrun: ` + report).MatchString(out) {
		t.Errorf("gocollrun does not report %q:\n%s", report, out)
	}
	checkNothingLeft(t, jobID, j.tmp, allPids)
	if t.Failed() {
		t.Logf("output:\n%s", out)
	}
}
