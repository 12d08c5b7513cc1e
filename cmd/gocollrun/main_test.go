package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The binaries the end-to-end tests run, built once by TestMain.
var gocollrunBin, rankprogBin, allreduceBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "gocollrun-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	gocollrunBin = filepath.Join(dir, "gocollrun")
	rankprogBin = filepath.Join(dir, "rankprog")
	allreduceBin = filepath.Join(dir, "allreduceprog")
	for _, b := range [][2]string{{gocollrunBin, "."}, {rankprogBin, "./testdata/rankprog"}, {allreduceBin, "./testdata/allreduceprog"}} {
		if out, err := exec.Command("go", "build", "-o", b[0], b[1]).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "go build %s: %v\n%s", b[1], err, out)
			os.RemoveAll(dir)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// result is how one gocollrun run ended.
type result struct {
	stdout, stderr string
	code           int
	elapsed        time.Duration
}

// testEnv is the test's environment without launcher variables (nor a
// Slurm allocation's, which would give gocollrun hosts), plus extra.
func testEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PMI_") && !strings.HasPrefix(kv, "GOCOLL_") && !strings.HasPrefix(kv, "SLURM_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// command prepares a gocollrun run, under the command wrap (such as ip
// netns exec NS; none if empty); rankprog and allreduceprog in args stand
// for the test programs.
func command(ctx context.Context, env []string, wrap []string, args ...string) *exec.Cmd {
	for i, a := range args {
		switch a {
		case "rankprog":
			args[i] = rankprogBin
		case "allreduceprog":
			args[i] = allreduceBin
		}
	}
	argv := append(append(slices.Clip(wrap), gocollrunBin), args...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = env
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// run runs gocollrun to the end, which must come within 30 s.
func run(t *testing.T, env []string, args ...string) result {
	t.Helper()
	return runIn(t, nil, env, args...)
}

// runIn is run under the command wrap.
func runIn(t *testing.T, wrap []string, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := command(ctx, env, wrap, args...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	res := result{stdout.String(), stderr.String(), 0, time.Since(start)}
	if ctx.Err() != nil {
		t.Fatalf("gocollrun %v did not finish within 30 s\nstdout:\n%s\nstderr:\n%s", args, res.stdout, res.stderr)
	}
	if ee, ok := err.(*exec.ExitError); ok {
		res.code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return res
}

// started is a gocollrun whose ranks all said READY.
type started struct {
	cmd    *exec.Cmd
	pids   []int
	stderr *strings.Builder
	cancel context.CancelFunc
}

// startReady starts gocollrun on n ranks of rankprog mode (hang or
// stubborn) and waits, at most 10 s, for every rank's READY line.
func startReady(t *testing.T, n int, args ...string) *started {
	t.Helper()
	return startReadyIn(t, nil, n, args...)
}

// startReadyIn is startReady under the command wrap.
func startReadyIn(t *testing.T, wrap []string, n int, args ...string) *started {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	cmd := command(ctx, testEnv(), wrap, append([]string{"-n", fmt.Sprint(n)}, args...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	s := &started{cmd: cmd, stderr: &strings.Builder{}, cancel: cancel}
	cmd.Stderr = s.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); cmd.Wait() })
	ready := make(chan int)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var r, pid int
			if _, err := fmt.Sscanf(sc.Text(), "READY %d %d", &r, &pid); err == nil {
				ready <- pid
			}
		}
		io.Copy(io.Discard, stdout)
	}()
	deadline := time.After(10 * time.Second)
	for len(s.pids) < n {
		select {
		case pid := <-ready:
			s.pids = append(s.pids, pid)
		case <-deadline:
			t.Fatalf("only %d of %d ranks became ready; stderr:\n%s", len(s.pids), n, s.stderr)
		}
	}
	return s
}

// wait waits, at most 15 s, for gocollrun to end and returns its status.
func (s *started) wait(t *testing.T) (int, time.Duration) {
	t.Helper()
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	select {
	case err := <-done:
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		return code, time.Since(start)
	case <-time.After(15 * time.Second):
		s.cancel()
		t.Fatalf("gocollrun did not end within 15 s; stderr:\n%s", s.stderr)
	}
	return 0, 0
}

// gone checks that the processes no longer exist, or are zombies: an
// orphan that has ended waits for init to reap it, and some containers'
// init never does.
func gone(t *testing.T, pids []int) {
	t.Helper()
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); err != syscall.ESRCH && !zombie(pid) {
			t.Errorf("rank process %d still exists after gocollrun ended (kill 0: %v)", pid, err)
		}
	}
}

// zombie reports whether process pid has ended but not been reaped.
func zombie(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name, which is in parentheses.
	i := strings.LastIndexByte(string(stat), ')')
	return i > 0 && strings.HasPrefix(string(stat[i+1:]), " Z")
}
