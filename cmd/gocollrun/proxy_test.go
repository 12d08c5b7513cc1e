package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gocoll/gocoll/internal/netns"
)

// cluster is two emulated hosts (network namespaces, loopback-range
// addresses) and a launcher for them that logs every invocation.
type cluster struct {
	a, b, addrA, addrB string
	launcher           string // --launcher: the logging script, %h
	log                string // one line per launcher invocation: the host
	wrap               []string
	env                []string // the test environment with LAUNCH_LOG
}

// logLauncher is an exec-style launcher that logs the host it is asked
// for, then runs the command in that host's namespace.
const logLauncher = `#!/bin/sh
echo "$1" >> "$LAUNCH_LOG"
ns=$1
shift
exec ip netns exec "$ns" "$@"
`

// emulatedCluster makes two emulated hosts and removes them when the
// test ends. Where they cannot be made the test fails, as the emulated-
// host tests of tests/ do, unless GOCOLL_TEST_NO_NETNS=1 asks to skip.
func emulatedCluster(t *testing.T) *cluster {
	t.Helper()
	c, err := netns.New(2, "")
	if err != nil {
		if errors.Is(err, netns.ErrNoNamespaces) && os.Getenv("GOCOLL_TEST_NO_NETNS") == "1" {
			t.Skipf("SKIPPED, not passed (GOCOLL_TEST_NO_NETNS=1): two emulated hosts: %v", err)
		}
		t.Fatalf("two emulated hosts: %v; run the tests as root with iproute2, or set GOCOLL_TEST_NO_NETNS=1 to skip the emulated-host tests knowingly", err)
	}
	t.Cleanup(c.Close)
	dir := t.TempDir()
	script := filepath.Join(dir, "launch")
	if err := os.WriteFile(script, []byte(logLauncher), 0o755); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(dir, "log")
	return &cluster{
		a: c.Hosts[0], b: c.Hosts[1], addrA: c.Addrs[0], addrB: c.Addrs[1],
		launcher: script + " %h", log: log,
		// gocollrun runs on host a, as on a cluster's first node.
		wrap: []string{"ip", "netns", "exec", c.Hosts[0]},
		env:  testEnv("LAUNCH_LOG=" + log),
	}
}

// args is gocollrun's command line for n ranks over both hosts.
func (c *cluster) args(n int, hosts string, rest ...string) []string {
	return append([]string{"-n", fmt.Sprint(n), "--host", hosts, "--launcher", c.launcher, "--bind", c.addrA}, rest...)
}

// launches returns the hosts the launcher was invoked for, and clears
// the log.
func (c *cluster) launches(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(c.log)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	os.Remove(c.log)
	hosts := strings.Fields(string(b))
	slices.Sort(hosts)
	return hosts
}

// A gocoll program on 2 emulated hosts x 2 ranks: one launcher
// invocation per host, the allreduce right, placement by slot and by
// node.
func TestProxyAllreduce(t *testing.T) {
	c := emulatedCluster(t)
	for _, tc := range []struct {
		hosts, mapBy string
		on           []string // host of each rank
	}{
		{c.a + ":2," + c.b + ":2", "slot", []string{c.a, c.a, c.b, c.b}},
		{c.a + "," + c.b, "node", []string{c.a, c.b, c.a, c.b}},
	} {
		res := runIn(t, c.wrap, c.env, c.args(4, tc.hosts, "--map-by", tc.mapBy, "--tag-output", "allreduceprog")...)
		if res.code != 0 {
			t.Fatalf("--host %s --map-by %s: exit %d\nstdout:\n%s\nstderr:\n%s", tc.hosts, tc.mapBy, res.code, res.stdout, res.stderr)
		}
		for r, host := range tc.on {
			if want := fmt.Sprintf("[%d] PASS allreduce of 1003 doubles, rank %d of 4 on %s\n", r, r, host); !strings.Contains(res.stdout, want) {
				t.Errorf("--map-by %s: no %q in\n%s", tc.mapBy, want, res.stdout)
			}
		}
		if res.stderr != "" {
			t.Errorf("--map-by %s: stderr:\n%s", tc.mapBy, res.stderr)
		}
		if got, want := c.launches(t), []string{c.a, c.b}; !slices.Equal(got, want) {
			t.Errorf("--map-by %s: the launcher ran for %v, want once per host: %v", tc.mapBy, got, want)
		}
	}
}

// Remote ranks' output comes whole lines at a time, on the stream it was
// written to, tagged or not; their environment is the job's.
func TestProxyOutputAndEnv(t *testing.T) {
	c := emulatedCluster(t)
	const n, lines = 4, 200
	for _, tagged := range []bool{false, true} {
		args := c.args(n, c.a+","+c.b, "rankprog", "output", fmt.Sprint(lines))
		if tagged {
			args = append([]string{"--tag-output"}, args...)
		}
		res := runIn(t, c.wrap, c.env, args...)
		if res.code != 0 {
			t.Fatalf("exit %d\n%s", res.code, res.stderr)
		}
		checkOutput(t, res, n, lines, tagged)
	}
	res := runIn(t, c.wrap, testEnv("LAUNCH_LOG="+c.log, "RANKPROG_VAR=passed"), c.args(n, c.a+","+c.b, "rankprog", "env")...)
	if res.code != 0 {
		t.Fatalf("exit %d\n%s", res.code, res.stderr)
	}
	envs := envLines(t, res, n)
	for r, f := range envs {
		want := map[string]string{
			"PMI_RANK": fmt.Sprint(r), "PMI_SIZE": "4", "PMI_FD": "3", "PMI_PORT": "", "PMI_ID": "",
			"GOCOLL_HOST": []string{c.a, c.a, c.b, c.b}[r], "RANKPROG_VAR": "passed",
			// The address that routes to gocollrun, for the transport.
			"GOCOLL_TCP_ADDR": []string{c.addrA, c.addrA, c.addrB, c.addrB}[r],
			"GOCOLL_JOB_ID":   envs[0]["GOCOLL_JOB_ID"], "secret": envs[0]["secret"],
		}
		for k, v := range want {
			if f[k] != v {
				t.Errorf("rank %d: %s=%q, want %q", r, k, f[k], v)
			}
		}
	}
	if len(envs[0]["secret"]) != 64 || len(envs[0]["GOCOLL_JOB_ID"]) != 16 {
		t.Errorf("job id %q, secret %q", envs[0]["GOCOLL_JOB_ID"], envs[0]["secret"])
	}
}

// The failure rules hold for ranks behind a proxy: the first non-zero
// exit ends the job, named with its host; so does a death by signal.
func TestProxyFailingRank(t *testing.T) {
	c := emulatedCluster(t)
	hosts := c.a + ":2," + c.b + ":2"
	res := runIn(t, c.wrap, c.env, c.args(4, hosts, "rankprog", "exit", "3", "3")...)
	if res.code != 3 {
		t.Errorf("exit %d, want rank 3's 3", res.code)
	}
	if !regexp.MustCompile(`gocollrun: rank 3 \(on ` + c.b + `, pid \d+\) exited with status 3; terminating the job`).MatchString(res.stderr) {
		t.Errorf("stderr does not name rank 3, its host and its status:\n%s", res.stderr)
	}
	if res.elapsed > 10*time.Second {
		t.Errorf("took %v: the other ranks were not killed promptly", res.elapsed)
	}
	res = runIn(t, c.wrap, c.env, c.args(4, hosts, "rankprog", "kill", "1")...)
	if res.code != 128+9 || !regexp.MustCompile(`gocollrun: rank 1 \(on `+c.a+`, pid \d+\) killed by signal 9 \(SIGKILL\); terminating the job`).MatchString(res.stderr) {
		t.Errorf("exit %d, want 137; stderr:\n%s", res.code, res.stderr)
	}
	res = runIn(t, c.wrap, c.env, c.args(4, hosts, "rankprog", "abort", "2", "7")...)
	if res.code != 7 || !strings.Contains(res.stderr, "rank 2 (on "+c.b) || !strings.Contains(res.stderr, "called abort with exit code 7") {
		t.Errorf("abort: exit %d, want 7; stderr:\n%s", res.code, res.stderr)
	}
}

// SIGINT to gocollrun reaches the remote ranks; --timeout ends the job
// and escalates to SIGKILL for ranks that ignore SIGTERM.
func TestProxySignals(t *testing.T) {
	c := emulatedCluster(t)
	// The logging launcher is for counting; plain ip netns exec here.
	exec := []string{"--host", c.a + "," + c.b, "--launcher", "ip netns exec %h", "--bind", c.addrA}
	s := startReadyIn(t, c.wrap, 4, append(exec, "rankprog", "hang")...)
	s.cmd.Process.Signal(syscall.SIGINT)
	code, took := s.wait(t)
	if code != 128+2 || !strings.Contains(s.stderr.String(), "received SIGINT") {
		t.Errorf("exit %d after SIGINT, want 130; stderr:\n%s", code, s.stderr)
	}
	if took > 5*time.Second {
		t.Errorf("took %v to end after SIGINT", took)
	}
	gone(t, s.pids)

	s = startReadyIn(t, c.wrap, 2, append(exec, "--timeout", "1s", "rankprog", "stubborn")...)
	code, took = s.wait(t)
	stderr := s.stderr.String()
	if code != exitTimeout || !strings.Contains(stderr, "longer than --timeout 1s") ||
		!strings.Contains(stderr, "did not exit within 3s; sending SIGKILL") {
		t.Errorf("exit %d, want %d, and SIGKILL after 3 s; stderr:\n%s", code, exitTimeout, stderr)
	}
	if took > killGrace+6*time.Second {
		t.Errorf("took %v", took)
	}
	gone(t, s.pids)
}

// Killing gocollrun leaves no rank behind on the remote hosts: through
// an exec-style launcher the proxy dies with gocollrun and its ranks with
// it; through a launcher that outlives nothing for it (setsid -w: the
// proxy is in a session of its own and survives gocollrun) the proxy
// sees its connection drop and kills its ranks.
func TestProxyNoOrphans(t *testing.T) {
	c := emulatedCluster(t)
	for _, launcher := range []string{"ip netns exec %h", "setsid -w ip netns exec %h"} {
		marker := fmt.Sprintf("orphan-marker-%d-%d", os.Getpid(), time.Now().UnixNano())
		args := []string{"--host", c.a + "," + c.b, "--launcher", launcher, "--bind", c.addrA, "rankprog", "hang", marker}
		s := startReadyIn(t, c.wrap, 4, args...)
		s.cmd.Process.Signal(syscall.SIGKILL)
		s.wait(t)
		deadline := time.Now().Add(5 * time.Second)
		for {
			out, _ := exec.Command("pgrep", "-f", marker).Output()
			if len(strings.TrimSpace(string(out))) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("--launcher %q: 5 s after gocollrun was killed, processes with the job's marker remain: %s", launcher, out)
				for _, pid := range strings.Fields(string(out)) {
					var p int
					fmt.Sscan(pid, &p)
					syscall.Kill(p, syscall.SIGKILL)
				}
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		gone(t, s.pids)
	}
}

// A launcher that fails, a proxy without the job's secret and a program
// missing on the remote host each end the job with a message naming the
// rank and the host. These need no emulated hosts: the launcher is a
// local wrapper.
func TestProxyStartFailures(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	wrong := filepath.Join(dir, "wrongsecret")
	script := "#!/bin/sh\nshift\necho 0123456789abcdef | exec \"$@\"\n"
	if err := os.WriteFile(wrong, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		launcher, prog string
		code           int
		want           []string
	}{
		{"false %h", "rankprog", 1, []string{`lost track of rank 0 \(on fakeA\): the launcher of its proxy exited with status 1 before the rank ended; terminating the job`}},
		{wrong + " %h", "rankprog", 1, []string{`warning: a PMI connection: PMI protocol error: connection from 127\.0\.0\.1:\d+: the proxy does not know the job secret`, `lost track of rank 0 \(on fakeA\)`}},
		{"env GOCOLL_FAKEHOST=%h", "./does-not-exist", exitNotFound, []string{`cannot start rank 0 \(on fakeA\): .*does-not-exist.*; terminating the job`}},
	} {
		res := run(t, testEnv(), "-n", "2", "--host", "fakeA", "--launcher", tc.launcher, "--bind", "127.0.0.1", tc.prog, "kvs")
		if res.code != tc.code {
			t.Errorf("--launcher %q: exit %d, want %d; stderr:\n%s", tc.launcher, res.code, tc.code, res.stderr)
		}
		for _, w := range tc.want {
			if !regexp.MustCompile(w).MatchString(res.stderr) {
				t.Errorf("--launcher %q: stderr lacks %q:\n%s", tc.launcher, w, res.stderr)
			}
		}
		if res.elapsed > 15*time.Second {
			t.Errorf("--launcher %q: took %v", tc.launcher, res.elapsed)
		}
	}
}

// Hosts from a hostfile and from SLURM_JOB_NODELIST, said under -v.
func TestHostSources(t *testing.T) {
	t.Parallel()
	hostfile := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(hostfile, []byte("# two fake hosts\nfake[1-2] slots=2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	launcher := []string{"--launcher", "env GOCOLL_FAKEHOST=%h", "--bind", "127.0.0.1"}
	for _, tc := range []struct {
		env   []string
		args  []string
		said  string
		hosts []string
	}{
		{nil, []string{"--hostfile", hostfile}, "hosts from --hostfile " + hostfile, []string{"fake1", "fake1", "fake2", "fake2"}},
		{[]string{"SLURM_JOB_NODELIST=fake[1-2]"}, []string{"--map-by", "node"}, "hosts from SLURM_JOB_NODELIST=fake[1-2]", []string{"fake1", "fake2", "fake1", "fake2"}},
		{[]string{"SLURM_JOB_NODELIST=fake[1-2]", "SLURM_TASKS_PER_NODE=3,1"}, nil,
			"hosts from SLURM_JOB_NODELIST=fake[1-2] with slots from SLURM_TASKS_PER_NODE=3,1", []string{"fake1", "fake1", "fake1", "fake2"}},
		// --host wins over the allocation.
		{[]string{"SLURM_JOB_NODELIST=fake[1-2]"}, []string{"--host", "fake[3-4]"}, "hosts from --host fake[3-4]", []string{"fake3", "fake3", "fake4", "fake4"}},
	} {
		args := append(append(append([]string{"-v", "-n", "4"}, tc.args...), launcher...), "rankprog", "env")
		res := run(t, testEnv(tc.env...), args...)
		if res.code != 0 {
			t.Fatalf("gocollrun %v: exit %d\n%s", args, res.code, res.stderr)
		}
		if !strings.Contains(res.stderr, "gocollrun: "+tc.said) {
			t.Errorf("gocollrun %v: -v does not say %q:\n%s", args, tc.said, res.stderr)
		}
		for r, f := range envLines(t, res, 4) {
			if f["GOCOLL_HOST"] != tc.hosts[r] || f["GOCOLL_FAKEHOST"] != tc.hosts[r] {
				t.Errorf("gocollrun %v: rank %d on %q (launched for %q), want %q", args, r, f["GOCOLL_HOST"], f["GOCOLL_FAKEHOST"], tc.hosts[r])
			}
		}
	}
	for _, tc := range []struct{ env, want string }{
		{"SLURM_JOB_NODELIST=bad[3-1]", "runs backwards"},
		{"SLURM_TASKS_PER_NODE=2(x3)", "SLURM_TASKS_PER_NODE: 3 counts for the 2 nodes"},
		{"SLURM_TASKS_PER_NODE=1,1", "the hosts have 2 slots for 4 ranks"},
	} {
		env := []string{"SLURM_JOB_NODELIST=fake[1-2]", tc.env}
		if strings.HasPrefix(tc.env, "SLURM_JOB_NODELIST") {
			env = env[1:]
		}
		res := run(t, testEnv(env...), "-n", "4", "rankprog", "env")
		if res.code != exitUsage || !strings.Contains(res.stderr, "SLURM_") || !strings.Contains(res.stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr:\n%s", env, res.code, res.stderr)
		}
	}
}

// The hosts' launchers run at once, not one after another: three that
// each take a second (as ssh may, to connect) start a job in about one.
func TestHostsStartInParallel(t *testing.T) {
	t.Parallel()
	slow := filepath.Join(t.TempDir(), "slow")
	if err := os.WriteFile(slow, []byte("#!/bin/sh\nsleep 1\nshift\nexec \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	res := run(t, testEnv(), "-n", "3", "--host", "fake[1-3]", "--launcher", slow+" %h", "--bind", "127.0.0.1", "rankprog", "kvs")
	if res.code != 0 || strings.Count(res.stdout, "PASS") != 3 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", res.code, res.stdout, res.stderr)
	}
	if res.elapsed > 2500*time.Millisecond {
		t.Errorf("3 hosts whose launchers take 1 s each took %v to run: started one after another?", res.elapsed)
	}
}

// Each host's proxy fetches the start-up cards once for all of its ranks
// (the bulk get, gocollrun's PMI-1 extension), whose exchange is one, as
// GOCOLL_NUM_HOSTS tells the ranks they span two hosts.
func TestProxyBulkCache(t *testing.T) {
	c := emulatedCluster(t)
	res := runIn(t, c.wrap, c.env, c.args(6, c.a+":3,"+c.b+":3", "-v", "allreduceprog")...)
	if res.code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", res.code, res.stdout, res.stderr)
	}
	if n := strings.Count(res.stdout, "PASS allreduce"); n != 6 {
		t.Errorf("%d ranks passed, want 6:\n%s", n, res.stdout)
	}
	for _, h := range []string{c.a, c.b} {
		if want := fmt.Sprintf("gocollrun: proxy on %s: 1 bulk gets of its ranks went to gocollrun, 2 were answered here\n", h); !strings.Contains(res.stderr, want) {
			t.Errorf("no %q in\n%s", want, res.stderr)
		}
	}
}
