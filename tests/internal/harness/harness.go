// Package harness is what the test packages under tests/ share: they run
// gocoll as users do (programs compiled with an MPI's compiler wrapper,
// launched by gocollrun or a host MPI's launcher), so each needs the
// repository built, a scratch directory, programs compiled once, and
// launches bounded in time.
package harness

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	// Root is the repository, Bin its build/bin and Work the test
	// package's scratch directory (compiled programs, per-run files).
	Root, Bin, Work string
	compileMu       sync.Mutex
)

// Main is a test package's TestMain: it runs `make -s target` in the
// repository (see build; up is how many directories the package lies
// below it), makes the scratch directory, runs the tests, calls after
// (if not nil) and exits with the tests' status.
func Main(m *testing.M, up int, target string, after func()) {
	wd, _ := os.Getwd()
	Root = wd
	for range up {
		Root = filepath.Dir(Root)
	}
	Bin = filepath.Join(Root, "build", "bin")
	name := strings.ReplaceAll(strings.TrimPrefix(wd, Root+string(filepath.Separator)), string(filepath.Separator), "-")
	if err := build(target); err != nil {
		fmt.Fprintf(os.Stderr, "%s: make %s failed: %v\n", name, target, err)
		os.Exit(1)
	}
	dir, err := os.MkdirTemp("", "gocoll-"+name+"-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	Work = dir
	code := m.Run()
	os.RemoveAll(dir)
	if after != nil {
		after()
	}
	os.Exit(code)
}

// build runs `make -s target` in Root, unless GOCOLL_TEST_BUILT names
// Root: `make test` sets it after building everything once, before go
// test. Makes of test packages that go test runs at once take turns
// (an exclusive flock on build/.test-make.lock), so that one never finds
// what another is writing half built.
func build(target string) error {
	if os.Getenv("GOCOLL_TEST_BUILT") == Root {
		return nil
	}
	if err := os.MkdirAll(filepath.Join(Root, "build"), 0o755); err != nil {
		return err
	}
	lock, err := os.OpenFile(filepath.Join(Root, "build", ".test-make.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	defer lock.Close() // and with it the lock
	for {
		err = syscall.Flock(int(lock.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("locking build/.test-make.lock: %w", err)
	}
	cmd := exec.Command("make", "-s", "-C", Root, target)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	return cmd.Run()
}

// Compile builds the sources srcs (relative to the repository) with
// compiler, -O2 and flags (after the sources) into Work/name, once per test binary, and returns
// the program's path. Fortran compilers get -w.
func Compile(t *testing.T, compiler, name string, flags []string, srcs ...string) string {
	t.Helper()
	compileMu.Lock()
	defer compileMu.Unlock()
	out := filepath.Join(Work, name)
	if _, err := os.Stat(out); err == nil {
		return out
	}
	args := []string{"-O2", "-o", out}
	if strings.Contains(filepath.Base(compiler), "f90") {
		args = append(args, "-w")
	}
	for _, s := range srcs {
		args = append(args, filepath.Join(Root, s))
	}
	args = append(args, flags...) // libraries after the sources
	if b, err := exec.Command(compiler, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", compiler, srcs, err, b)
	}
	return out
}

// BuildGo builds the Go command in pkg (relative to the repository) into
// Work/name, once, and returns its path.
func BuildGo(t *testing.T, pkg, name string) string {
	t.Helper()
	compileMu.Lock()
	defer compileMu.Unlock()
	out := filepath.Join(Work, name)
	if _, err := os.Stat(out); err == nil {
		return out
	}
	cmd := exec.Command("go", "build", "-o", out, "./"+pkg)
	cmd.Dir = Root
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	return out
}

// BaseEnv is the environment of the tests without launcher (PMI_, PMIX_,
// SLURM_, OMPI_) or gocoll (GOCOLL_) variables, so that nothing set
// around `make test` (a Slurm job, say) changes a test, with extra added.
func BaseEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !slices.ContainsFunc([]string{"PMI_", "PMIX_", "SLURM_", "OMPI_", "GOCOLL_"}, func(p string) bool { return strings.HasPrefix(kv, p) }) {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// Run runs argv in Work, in a process group of its own, with BaseEnv(env...);
// after limit it kills the whole group and fails the test as a hang. It
// returns the combined output and the exit status.
func Run(t *testing.T, limit time.Duration, env []string, argv ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = BaseEnv(env...)
	return RunCmd(t, limit, cmd, nil)
}

// RunCmd is Run for a command the caller made (its environment set): in
// Work, in a process group of its own, output combined; after limit it
// kills the group, calls onHang (if not nil) and fails the test as a hang.
func RunCmd(t *testing.T, limit time.Duration, cmd *exec.Cmd, onHang func()) (string, int) {
	t.Helper()
	argv := cmd.Args
	cmd.Dir = Work
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var buf LockedBuffer
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
		if onHang != nil {
			onHang()
		}
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

// LockedBuffer collects the output of a process and its children, which
// may write at the same time.
type LockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *LockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *LockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// Gocollrun is the command line that runs prog with args at n ranks
// under build/bin/gocollrun.
func Gocollrun(n int, prog string, args ...string) []string {
	return append([]string{filepath.Join(Bin, "gocollrun"), "-n", strconv.Itoa(n), prog}, args...)
}

var (
	countsLine = regexp.MustCompile(`(?m)^(\d+) passed, (\d+) failed$`)
	rankLine   = regexp.MustCompile(`(?m)^rank (\d+): (\d+) passed, (\d+) failed$`)
)

// ExpectCounts checks a program's verdict and returns the number of
// checks passed. A program whose ranks judge themselves prints one
// `rank R: N passed, N failed` line per rank: every rank from 0 up must
// have printed exactly one, none failed and each passed some. A program
// with one verdict prints `N passed, N failed` lines: none may report a
// failure and the last must report passes. Either way the exit status
// (the launcher's, which is non-zero when any rank's is) must be 0.
func ExpectCounts(t *testing.T, what, out string, code int) int {
	t.Helper()
	if rankLine.MatchString(out) {
		return expectRanks(t, what, out, code, -1)
	}
	m := countsLine.FindAllStringSubmatch(out, -1)
	if len(m) == 0 {
		t.Fatalf("%s: no `N passed, N failed` line (exit %d):\n%s", what, code, out)
	}
	for _, l := range m {
		if l[2] != "0" {
			t.Fatalf("%s: %s, exit %d:\n%s", what, l[0], code, out)
		}
	}
	passed, _ := strconv.Atoi(m[len(m)-1][1])
	failed, _ := strconv.Atoi(m[len(m)-1][2])
	if failed != 0 || passed == 0 || code != 0 {
		t.Fatalf("%s: %d passed, %d failed, exit %d:\n%s", what, passed, failed, code, out)
	}
	return passed
}

// ExpectRanks checks the verdicts of a program run on n ranks whose
// ranks judge themselves: exactly one `rank R: N passed, N failed` line
// from each rank 0..n-1, none failed, each passed some, and exit status
// 0. The verdict rests on each rank's own checks and the launcher's exit
// status, never on a collective of the library under test. It returns
// the checks passed, summed over the ranks.
func ExpectRanks(t *testing.T, what, out string, code, n int) int {
	t.Helper()
	return expectRanks(t, what, out, code, n)
}

// expectRanks is ExpectRanks; n < 0 takes the number of ranks from the
// highest rank that printed its line.
func expectRanks(t *testing.T, what, out string, code, n int) int {
	t.Helper()
	m := rankLine.FindAllStringSubmatch(out, -1)
	if n < 0 {
		for _, l := range m {
			if r, _ := strconv.Atoi(l[1]); r+1 > n {
				n = r + 1
			}
		}
	}
	seen := make([]int, n)
	total := 0
	var bad []string
	for _, l := range m {
		r, _ := strconv.Atoi(l[1])
		passed, _ := strconv.Atoi(l[2])
		failed, _ := strconv.Atoi(l[3])
		if r >= n {
			bad = append(bad, fmt.Sprintf("a line from rank %d of %d", r, n))
			continue
		}
		seen[r]++
		total += passed
		if failed != 0 || passed == 0 {
			bad = append(bad, l[0])
		}
	}
	for r, k := range seen {
		if k != 1 {
			bad = append(bad, fmt.Sprintf("rank %d printed %d verdict lines, want 1", r, k))
		}
	}
	if code != 0 {
		bad = append(bad, fmt.Sprintf("exit %d", code))
	}
	if n == 0 {
		bad = append(bad, "no `rank R: N passed, N failed` line")
	}
	if len(bad) > 0 {
		t.Fatalf("%s: %s:\n%s", what, strings.Join(bad, "; "), out)
	}
	return total
}

var reportLine = regexp.MustCompile(`(?m)^gocoll: rank (\d+): report: (MPI_\w+)((?: \w+=\d+)+)$`)

// ParseReport reads GOCOLL_REPORT's lines (`gocoll: rank R: report:
// MPI_Allreduce fast=10 go=5 ring=5`): rank -> call -> counter -> n, a
// counter left out of a line being 0. A call reported twice by one rank
// fails the test.
func ParseReport(t *testing.T, out string) map[int]map[string]map[string]int64 {
	t.Helper()
	rep := map[int]map[string]map[string]int64{}
	for _, m := range reportLine.FindAllStringSubmatch(out, -1) {
		r, _ := strconv.Atoi(m[1])
		if rep[r] == nil {
			rep[r] = map[string]map[string]int64{}
		}
		if rep[r][m[2]] != nil {
			t.Errorf("rank %d reports %s twice", r, m[2])
		}
		kv := map[string]int64{}
		for _, f := range strings.Fields(m[3]) {
			k, v, _ := strings.Cut(f, "=")
			kv[k], _ = strconv.ParseInt(v, 10, 64)
		}
		rep[r][m[2]] = kv
	}
	return rep
}
