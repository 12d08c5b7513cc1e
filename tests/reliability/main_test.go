// Package reliability tests what happens when things go wrong in a real
// job: ranks that die, stop or exit in the middle of collectives,
// mismatched calls with and without GOCOLL_CHECK, bad arguments at the C
// ABI (the fuzz harness in tests/fuzz), and the security properties of
// the transports (segment modes, listening addresses, authentication).
// Every test runs C or Go programs under gocollrun, as users do, and
// every wait is bounded.
package reliability

import (
	"github.com/gocoll/gocoll/tests/internal/harness"

	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestMain(m *testing.M) { harness.Main(m, 2, "build", nil) }

// compile builds a C program of the repository with gocoll's mpicc.
func compile(t *testing.T, src, name string) string {
	return harness.Compile(t, filepath.Join(harness.Bin, "mpicc"), name, []string{"-g", "-Wall", "-lm"}, src)
}

var (
	run         = harness.Run
	gocollrun   = harness.Gocollrun
	expectRanks = harness.ExpectRanks
	baseEnv     = harness.BaseEnv
)

// line is one line of a job's output and when the test read it.
type line struct {
	at   time.Time
	text string
}

// job is a gocollrun run the test watches line by line while it runs.
type job struct {
	t     *testing.T
	cmd   *exec.Cmd
	tmp   string    // the job's TMPDIR
	start time.Time // when gocollrun was started
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
	j.cmd.Dir = harness.Work
	j.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := j.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := j.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	j.start = time.Now()
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
