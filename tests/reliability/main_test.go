// Package reliability tests what happens when things go wrong in a real
// job: ranks that die, stop or exit in the middle of collectives,
// mismatched calls with and without GOCOLL_CHECK, bad arguments at the C
// ABI (the fuzz harness in tests/fuzz), and the security properties of
// the transports (segment modes, listening addresses, authentication).
// Every test runs C or Go programs under gocollrun, as users do, and
// every wait is bounded.
package reliability

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	root    string // the repository
	binDir  string // build/bin
	workDir string // compiled test programs
)

// TestMain builds the library, the wrappers and gocollrun (make build),
// as the tests in tests/ do, then runs the tests.
func TestMain(m *testing.M) {
	wd, _ := os.Getwd()
	root = filepath.Dir(filepath.Dir(wd))
	binDir = filepath.Join(root, "build", "bin")
	cmd := exec.Command("make", "-s", "-C", root, "build")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "tests/reliability: make build failed:", err)
		os.Exit(1)
	}
	dir, err := os.MkdirTemp("", "gocoll-reliability-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	workDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

var compileMu sync.Mutex

// compile builds src (relative to the repository) with gocoll's mpicc
// into the work directory, once, and returns the binary's path.
func compile(t *testing.T, src, name string) string {
	t.Helper()
	compileMu.Lock()
	defer compileMu.Unlock()
	out := filepath.Join(workDir, name)
	if _, err := os.Stat(out); err == nil {
		return out
	}
	cmd := exec.Command(filepath.Join(binDir, "mpicc"), "-O2", "-g", "-Wall", "-o", out, filepath.Join(root, src), "-lm")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mpicc %s: %v\n%s", src, err, b)
	}
	return out
}

// buildGo builds the Go program in pkg (relative to the repository) once.
func buildGo(t *testing.T, pkg, name string) string {
	t.Helper()
	compileMu.Lock()
	defer compileMu.Unlock()
	out := filepath.Join(workDir, name)
	if _, err := os.Stat(out); err == nil {
		return out
	}
	cmd := exec.Command("go", "build", "-o", out, "./"+pkg)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	return out
}

// baseEnv is the test's environment without launcher or gocoll
// variables, so that nothing set around `make test` changes a test.
func baseEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PMI_") && !strings.HasPrefix(kv, "GOCOLL_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// run launches argv with a time limit and returns its combined output and
// exit status; a run past the limit fails the test (a hang).
func run(t *testing.T, limit time.Duration, env []string, argv ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = baseEnv(env...)
	cmd.Dir = workDir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var buf lockedBuffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Start(); err != nil {
		t.Fatalf("%v: %v", argv, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(limit):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		t.Fatalf("%v: still running after %v (hang)\n%s", argv, limit, buf.String())
	}
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("%v: %v", argv, err)
		}
		code = ee.ExitCode()
	}
	return buf.String(), code
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func gocollrun(n int, prog string, args ...string) []string {
	return append([]string{filepath.Join(binDir, "gocollrun"), "-n", strconv.Itoa(n), prog}, args...)
}

var countsLine = regexp.MustCompile(`(?m)^(\d+) passed, (\d+) failed$`)

// expectCounts checks a program's final `N passed, N failed` line and
// returns the number passed.
func expectCounts(t *testing.T, what, out string, code int) int {
	t.Helper()
	m := countsLine.FindAllStringSubmatch(out, -1)
	if len(m) == 0 {
		t.Fatalf("%s: no `N passed, N failed` line (exit %d):\n%s", what, code, out)
	}
	passed, _ := strconv.Atoi(m[len(m)-1][1])
	failed, _ := strconv.Atoi(m[len(m)-1][2])
	if failed != 0 || passed == 0 || code != 0 {
		t.Fatalf("%s: %d passed, %d failed, exit %d:\n%s", what, passed, failed, code, out)
	}
	return passed
}

// line is one line of a job's output and when the test read it.
type line struct {
	at   time.Time
	text string
}

// job is a gocollrun run the test watches line by line while it runs.
type job struct {
	t     *testing.T
	cmd   *exec.Cmd
	tmp   string // the job's TMPDIR
	mu    sync.Mutex
	lines []line
	news  chan struct{}
	done  chan struct{}
	err   error
	ended time.Time
}

// startJob starts argv (a gocollrun command) with env and its own
// TMPDIR, reading its output as it comes.
func startJob(t *testing.T, env []string, argv ...string) *job {
	t.Helper()
	j := &job{t: t, news: make(chan struct{}, 1), done: make(chan struct{})}
	j.tmp = t.TempDir()
	j.cmd = exec.Command(argv[0], argv[1:]...)
	j.cmd.Env = baseEnv(append(env, "TMPDIR="+j.tmp)...)
	j.cmd.Dir = workDir
	j.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := j.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := j.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := j.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var readers sync.WaitGroup
	for _, r := range []io.Reader{stdout, stderr} {
		readers.Add(1)
		go func() {
			defer readers.Done()
			sc := bufio.NewScanner(r)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			for sc.Scan() {
				j.mu.Lock()
				j.lines = append(j.lines, line{time.Now(), sc.Text()})
				j.mu.Unlock()
				select {
				case j.news <- struct{}{}:
				default:
				}
			}
		}()
	}
	go func() {
		readers.Wait()
		err := j.cmd.Wait()
		j.mu.Lock()
		j.err, j.ended = err, time.Now()
		j.mu.Unlock()
		close(j.done)
	}()
	t.Cleanup(func() { j.kill() })
	return j
}

// kill ends the job's process group, if it still runs.
func (j *job) kill() {
	select {
	case <-j.done:
	default:
		syscall.Kill(-j.cmd.Process.Pid, syscall.SIGKILL)
		select {
		case <-j.done:
		case <-time.After(10 * time.Second):
		}
	}
}

// output returns the job's output so far.
func (j *job) output() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	var b strings.Builder
	for _, l := range j.lines {
		b.WriteString(l.text)
		b.WriteByte('\n')
	}
	return b.String()
}

// waitFor waits up to limit for n lines matching re, and returns the
// submatches of each, in the order they came.
func (j *job) waitFor(re *regexp.Regexp, n int, limit time.Duration) [][]string {
	j.t.Helper()
	deadline := time.After(limit)
	for {
		var found [][]string
		j.mu.Lock()
		for _, l := range j.lines {
			if m := re.FindStringSubmatch(l.text); m != nil {
				found = append(found, m)
			}
		}
		j.mu.Unlock()
		if len(found) >= n {
			return found
		}
		select {
		case <-j.news:
		case <-j.done:
			// One last look: the output may have ended with the lines.
			select {
			case <-j.news:
				continue
			default:
			}
			j.t.Fatalf("the job ended with %d of %d lines matching %q:\n%s", len(found), n, re, j.output())
		case <-deadline:
			j.t.Fatalf("%d of %d lines matching %q after %v:\n%s", len(found), n, re, limit, j.output())
		}
	}
}

// wait waits up to limit for gocollrun to exit and returns its status.
func (j *job) wait(limit time.Duration) int {
	j.t.Helper()
	select {
	case <-j.done:
	case <-time.After(limit):
		out := j.output()
		j.kill()
		j.t.Fatalf("gocollrun still running %v later (hang):\n%s", limit, out)
	}
	if j.err == nil {
		return 0
	}
	if ee, ok := j.err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	j.t.Fatalf("gocollrun: %v", j.err)
	return -1
}

// firstLine returns the first line matching re and when it came.
func (j *job) firstLine(re *regexp.Regexp) (line, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, l := range j.lines {
		if re.MatchString(l.text) {
			return l, true
		}
	}
	return line{}, false
}

// checkNothingLeft fails the test if the job left a shared-memory
// segment, a file in its TMPDIR, or a process behind.
func checkNothingLeft(t *testing.T, jobID, tmp string, pids []int) {
	t.Helper()
	if jobID != "" {
		if left, _ := filepath.Glob("/dev/shm/gocoll-" + jobID + "*"); len(left) > 0 {
			t.Errorf("shared-memory segments left behind: %v", left)
		}
		// Socket files or temporary files named after the job, anywhere
		// a library might put them.
		for _, dir := range []string{os.TempDir(), "/tmp", "/var/tmp", "/dev/shm", "/run"} {
			if left, _ := filepath.Glob(filepath.Join(dir, "*"+jobID+"*")); len(left) > 0 {
				t.Errorf("files left behind: %v", left)
			}
		}
	}
	if tmp != "" {
		if ents, _ := os.ReadDir(tmp); len(ents) > 0 {
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			t.Errorf("files left in the job's TMPDIR: %v", names)
		}
	}
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("process %d is still alive after the job ended", pid)
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// alive reports whether pid is a live process (not a zombie).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z' && s[i+2] != 'X'
	}
	return true
}
