package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fields parses "k=v k=v" words of a rankprog line.
func fields(line string) map[string]string {
	m := map[string]string{}
	for _, f := range strings.Fields(line) {
		if k, v, ok := strings.Cut(f, "="); ok {
			m[k] = v
		}
	}
	return m
}

// envLines returns each rank's ENV line, by rank.
func envLines(t *testing.T, res result, n int) []map[string]string {
	t.Helper()
	out := make([]map[string]string, n)
	for _, line := range strings.Split(res.stdout, "\n") {
		if strings.HasPrefix(line, "ENV ") {
			f := fields(line)
			var r int
			fmt.Sscan(f["rank"], &r)
			out[r] = f
		}
	}
	for r, f := range out {
		if f == nil {
			t.Fatalf("no ENV line from rank %d; stdout:\n%s\nstderr:\n%s", r, res.stdout, res.stderr)
		}
	}
	return out
}

func TestKVS(t *testing.T) {
	t.Parallel()
	res := run(t, testEnv(), "-n", "5", "rankprog", "kvs")
	if res.code != 0 {
		t.Fatalf("exit %d\n%s", res.code, res.stderr)
	}
	for r := range 5 {
		want := fmt.Sprintf("PASS rank %d of 5 saw v0-localhost,v1-localhost,v2-localhost,v3-localhost,v4-localhost\n", r)
		if !strings.Contains(res.stdout, want) {
			t.Errorf("no %q in\n%s", want, res.stdout)
		}
	}
	if res.stderr != "" {
		t.Errorf("stderr: %s", res.stderr)
	}
}

func TestEnvironment(t *testing.T) {
	t.Parallel()
	// A launcher's variables in gocollrun's own environment must not leak.
	res := run(t, testEnv("RANKPROG_VAR=passed", "PMI_PORT=stale:1", "PMI_ID=9"), "-n", "3", "rankprog", "env")
	if res.code != 0 {
		t.Fatalf("exit %d\n%s", res.code, res.stderr)
	}
	envs := envLines(t, res, 3)
	hex := regexp.MustCompile(`^[0-9a-f]+$`)
	for r, f := range envs {
		for k, want := range map[string]string{
			"PMI_RANK": fmt.Sprint(r), "PMI_SIZE": "3", "PMI_FD": "3", "PMI_PORT": "", "PMI_ID": "",
			"GOCOLL_HOST": "localhost", "RANKPROG_VAR": "passed",
			"GOCOLL_JOB_ID": envs[0]["GOCOLL_JOB_ID"], "secret": envs[0]["secret"],
		} {
			if f[k] != want {
				t.Errorf("rank %d: %s=%q, want %q", r, k, f[k], want)
			}
		}
	}
	if id := envs[0]["GOCOLL_JOB_ID"]; len(id) != 16 || !hex.MatchString(id) {
		t.Errorf("GOCOLL_JOB_ID=%q, want 16 hex digits", id)
	}
	secret := envs[0]["secret"]
	if len(secret) != 64 || !hex.MatchString(secret) {
		t.Errorf("GOCOLL_JOB_SECRET=%q, want 32 bytes in hex", secret)
	}
	if strings.Contains(res.stderr, secret) {
		t.Error("gocollrun printed the job secret")
	}
	// Each job has its own.
	if again := envLines(t, run(t, testEnv(), "-n", "3", "rankprog", "env"), 3); again[0]["secret"] == secret ||
		again[0]["GOCOLL_JOB_ID"] == envs[0]["GOCOLL_JOB_ID"] {
		t.Error("two jobs got the same id or secret")
	}
}

// Output is forwarded whole lines at a time, unchanged or tagged.
func TestOutput(t *testing.T) {
	t.Parallel()
	const n, lines = 4, 300
	for _, tagged := range []bool{false, true} {
		args := []string{"-n", fmt.Sprint(n), "rankprog", "output", fmt.Sprint(lines)}
		if tagged {
			args = append([]string{"--tag-output"}, args...)
		}
		res := run(t, testEnv(), args...)
		if res.code != 0 {
			t.Fatalf("exit %d\n%s", res.code, res.stderr)
		}
		checkOutput(t, res, n, lines, tagged)
	}
}

// checkOutput checks the output of n ranks of rankprog output LINES:
// every line whole, in order, on the stream it was written to, tagged
// or not.
func checkOutput(t *testing.T, res result, n, lines int, tagged bool) {
	t.Helper()
	pad := strings.Repeat("x", 300)
	for _, stream := range []struct{ name, text, word string }{{"stdout", res.stdout, "line"}, {"stderr", res.stderr, "err"}} {
		next := make([]int, n)
		tails := 0
		for _, line := range strings.Split(stream.text, "\n") {
			// Untagged, a last line without a newline runs into
			// whatever another rank prints next: that is "unchanged".
			for !tagged && strings.HasPrefix(line, "no newline at the end") {
				line = strings.TrimPrefix(line, "no newline at the end")
				tails++
			}
			tag := ""
			var r, i int
			if tagged {
				if _, err := fmt.Sscanf(line, "[%d] ", &r); err != nil && line != "" {
					t.Fatalf("%s: untagged line %.80q", stream.name, line)
				}
				tag = fmt.Sprintf("[%d] ", r)
				if line == tag+"no newline at the end" {
					tails++
					continue
				}
			}
			if line == "" {
				continue
			}
			if _, err := fmt.Sscanf(line, tag+"rank %d "+stream.word+" %d", &r, &i); err != nil {
				t.Fatalf("%s: mangled line %.120q", stream.name, line)
			}
			if want := fmt.Sprintf("%srank %d %s %d %s", tag, r, stream.word, i, pad); line != want {
				t.Fatalf("%s: mangled line %.120q", stream.name, line)
			}
			if i != next[r] {
				t.Fatalf("%s: rank %d line %d after %d", stream.name, r, i, next[r]-1)
			}
			next[r]++
		}
		for r := range n {
			if next[r] != lines {
				t.Errorf("tagged=%v %s: %d lines from rank %d, want %d", tagged, stream.name, next[r], r, lines)
			}
		}
		if want := map[string]int{"stdout": n, "stderr": 0}[stream.name]; tails != want {
			t.Errorf("tagged=%v %s: %d unterminated last lines, want %d", tagged, stream.name, tails, want)
		}
	}
}

// A rank that fails ends the job, the ranks waiting for it included.
func TestFailingRank(t *testing.T) {
	t.Parallel()
	res := run(t, testEnv(), "-n", "3", "rankprog", "exit", "1", "3")
	if res.code != 3 {
		t.Errorf("exit %d, want rank 1's 3", res.code)
	}
	if !regexp.MustCompile(`gocollrun: rank 1 \(pid \d+\) exited with status 3; terminating the job`).MatchString(res.stderr) {
		t.Errorf("stderr does not name rank 1 and its status:\n%s", res.stderr)
	}
	if res.elapsed > 10*time.Second {
		t.Errorf("took %v: the other ranks were not killed promptly", res.elapsed)
	}
}

func TestKilledRank(t *testing.T) {
	t.Parallel()
	res := run(t, testEnv(), "-n", "3", "rankprog", "kill", "2")
	if res.code != 128+9 {
		t.Errorf("exit %d, want 137", res.code)
	}
	if !regexp.MustCompile(`gocollrun: rank 2 \(pid \d+\) killed by signal 9 \(SIGKILL\); terminating the job`).MatchString(res.stderr) {
		t.Errorf("stderr does not name rank 2 and SIGKILL:\n%s", res.stderr)
	}
	if res.elapsed > 10*time.Second {
		t.Errorf("took %v: the other ranks were not killed promptly", res.elapsed)
	}
}

func TestAbort(t *testing.T) {
	t.Parallel()
	res := run(t, testEnv(), "-n", "3", "rankprog", "abort", "1", "7")
	if res.code != 7 {
		t.Errorf("exit %d, want the abort's 7", res.code)
	}
	for _, want := range []string{"rankprog aborts on purpose", "called abort with exit code 7; terminating the job"} {
		if !strings.Contains(res.stderr, want) {
			t.Errorf("no %q in stderr:\n%s", want, res.stderr)
		}
	}
}

func TestNoFinalize(t *testing.T) {
	t.Parallel()
	res := run(t, testEnv(), "-n", "3", "rankprog", "nofinalize", "1")
	if res.code != 0 || !strings.Contains(res.stderr, "warning: rank 1 (pid") ||
		!strings.Contains(res.stderr, "without calling PMI finalize") {
		t.Errorf("exit %d, stderr:\n%s", res.code, res.stderr)
	}
	// Ranks waiting in a barrier for it would wait forever.
	res = run(t, testEnv(), "-n", "3", "rankprog", "nofinalize-stuck", "1")
	if res.code != exitStuck || !strings.Contains(res.stderr, "waits in a PMI barrier that rank 1 (pid") {
		t.Errorf("exit %d, stderr:\n%s", res.code, res.stderr)
	}
	// Programs that do not speak PMI draw no warning.
	res = run(t, testEnv(), "-n", "3", "sh", "-c", `[ "$PMI_RANK" = 0 ] || sleep 0.3`)
	if res.code != 0 || res.stderr != "" {
		t.Errorf("non-PMI program: exit %d, stderr:\n%s", res.code, res.stderr)
	}
}

func TestSIGINT(t *testing.T) {
	t.Parallel()
	s := startReady(t, 3, "rankprog", "hang")
	s.cmd.Process.Signal(syscall.SIGINT)
	code, took := s.wait(t)
	if code != 128+2 || !strings.Contains(s.stderr.String(), "received SIGINT") {
		t.Errorf("exit %d after SIGINT, want 130; stderr:\n%s", code, s.stderr)
	}
	if took > 5*time.Second {
		t.Errorf("took %v to end after SIGINT", took)
	}
	gone(t, s.pids)
}

// --timeout ends the job; ranks that ignore SIGTERM get SIGKILL.
func TestTimeout(t *testing.T) {
	t.Parallel()
	s := startReady(t, 2, "--timeout", "500ms", "rankprog", "stubborn")
	code, took := s.wait(t)
	stderr := s.stderr.String()
	if code != exitTimeout || !strings.Contains(stderr, "longer than --timeout 500ms") {
		t.Errorf("exit %d, want %d; stderr:\n%s", code, exitTimeout, stderr)
	}
	if !strings.Contains(stderr, "did not exit within 3s; sending SIGKILL") {
		t.Errorf("no SIGKILL escalation in stderr:\n%s", stderr)
	}
	if took > killGrace+5*time.Second {
		t.Errorf("took %v", took)
	}
	gone(t, s.pids)
}

// Hosts through a launcher template: here a wrapper that only marks the
// environment, so "remote" hosts' proxies run on this machine and relay
// their ranks' PMI over their connection to gocollrun.
func TestLauncher(t *testing.T) {
	t.Parallel()
	launcher := []string{"--launcher", "env GOCOLL_FAKEHOST=%h", "--bind", "127.0.0.1"}
	res := run(t, testEnv(), append(launcher, "-n", "4", "--host", "localhost:1,fakeA:2,fakeB:1", "rankprog", "env")...)
	if res.code != 0 {
		t.Fatalf("exit %d\n%s", res.code, res.stderr)
	}
	envs := envLines(t, res, 4)
	for r, host := range []string{"localhost", "fakeA", "fakeA", "fakeB"} {
		f := envs[r]
		if f["GOCOLL_HOST"] != host {
			t.Errorf("rank %d on %q, want %q", r, f["GOCOLL_HOST"], host)
		}
		if r == 0 {
			if f["PMI_FD"] != "3" || f["GOCOLL_FAKEHOST"] != "" {
				t.Errorf("local rank 0: %v", f)
			}
			continue
		}
		if f["GOCOLL_FAKEHOST"] != host || f["PMI_FD"] != "3" || f["PMI_ID"] != "" || f["PMI_PORT"] != "" ||
			f["GOCOLL_JOB_ID"] != envs[0]["GOCOLL_JOB_ID"] || f["secret"] != envs[0]["secret"] {
			t.Errorf("rank %d through the launcher: %v", r, f)
		}
	}
	res = run(t, testEnv(), append(launcher, "-n", "4", "--host", "fakeA,fakeB", "rankprog", "kvs")...)
	if res.code != 0 || strings.Count(res.stdout, "saw v0-fakeA,v1-fakeA,v2-fakeB,v3-fakeB\n") != 4 {
		t.Errorf("kvs over launched ranks: exit %d\nstdout:\n%s\nstderr:\n%s", res.code, res.stdout, res.stderr)
	}
}

// fakeSSH behaves like ssh as far as gocollrun can tell: it joins its
// arguments into one command for a shell that starts with an almost empty
// environment, and logs the command line it was given.
const fakeSSH = `#!/bin/sh
host=$1
shift
printf '%s\n' "$@" >> "$FAKESSH_LOG"
exec env -i PATH="$PATH" GOCOLL_FAKEHOST="$host" sh -c "$*"
`

func TestSSHLauncher(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ssh := filepath.Join(dir, "ssh")
	if err := os.WriteFile(ssh, []byte(fakeSSH), 0o755); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(dir, "log")
	tricky := `it's "quoted" $HOME`
	res := run(t, testEnv("FAKESSH_LOG="+log, "RANKPROG_VAR="+tricky),
		"-n", "2", "--host", "h1,h2", "--launcher", ssh+" %h", "--bind", "127.0.0.1", "rankprog", "env")
	if res.code != 0 {
		t.Fatalf("exit %d\n%s", res.code, res.stderr)
	}
	// fields() splits at spaces, so compare the whole line for the value.
	if strings.Count(res.stdout, "RANKPROG_VAR="+tricky+" ") != 2 {
		t.Errorf("RANKPROG_VAR did not arrive intact:\n%s", res.stdout)
	}
	envs := envLines(t, res, 2)
	for r, f := range envs {
		if want := fmt.Sprintf("h%d", r+1); f["GOCOLL_FAKEHOST"] != want || f["GOCOLL_HOST"] != want || f["PMI_FD"] != "3" {
			t.Errorf("rank %d: %v", r, f)
		}
	}
	secret := envs[0]["secret"]
	if len(secret) != 64 || envs[1]["secret"] != secret {
		t.Errorf("secrets %q %q", secret, envs[1]["secret"])
	}
	logged, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(logged), secret) {
		t.Error("the job secret was on ssh's command line")
	}
}

func TestShmCleanup(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat(shmDir); err != nil {
		t.Skipf("no %s: %v", shmDir, err)
	}
	res := run(t, testEnv(), "-n", "2", "rankprog", "shm")
	if res.code != 0 {
		t.Fatalf("exit %d\n%s", res.code, res.stderr)
	}
	var names []string
	for _, line := range strings.Split(res.stdout, "\n") {
		if name, ok := strings.CutPrefix(line, "SHM "); ok {
			names = append(names, name)
		}
	}
	if len(names) != 2 {
		t.Fatalf("ranks reported %d segments:\n%s", len(names), res.stdout)
	}
	for _, name := range names {
		if _, err := os.Stat(name); !os.IsNotExist(err) {
			t.Errorf("%s left behind (%v)", name, err)
			os.Remove(name)
		}
	}
}

func TestInfo(t *testing.T) {
	t.Parallel()
	const secret = "0123456789abcdef-do-not-print"
	res := run(t, testEnv("GOCOLL_JOB_SECRET="+secret), "--info")
	if res.code != 0 {
		t.Fatalf("exit %d\n%s", res.code, res.stderr)
	}
	for _, want := range []string{"GOCOLL_JOB_ID", "GOCOLL_JOB_SECRET", "GOCOLL_HOST", "gocollrun", "built with go"} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("--info lacks %q:\n%s", want, res.stdout)
		}
	}
	if strings.Contains(res.stdout, secret) {
		t.Error("--info printed GOCOLL_JOB_SECRET")
	}
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"rankprog", "kvs"}, exitUsage, "-n N"},
		{[]string{"-n", "2"}, exitUsage, "no program"},
		{[]string{"-n", "3", "--host", "a:1", "true"}, exitUsage, "1 slots for 3 ranks"},
		{[]string{"-n", "2", "--bogus", "true"}, exitUsage, "not defined"},
		{[]string{"-n", "2", "./does-not-exist"}, exitNotFound, "cannot start rank 0"},
	} {
		res := run(t, testEnv(), tc.args...)
		if res.code != tc.code || !strings.Contains(res.stderr, tc.msg) {
			t.Errorf("gocollrun %v: exit %d, stderr %q; want %d and %q", tc.args, res.code, res.stderr, tc.code, tc.msg)
		}
	}
}
