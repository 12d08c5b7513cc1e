//go:build linux

package shm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gocoll/gocoll/transport"
)

// The multi-process tests re-execute this test binary: TestHelperProcess
// is a rank when SHMTEST_ROLE is set, and does nothing otherwise.

const envRole = "SHMTEST_ROLE"

// child is one rank of a multi-process job, as the parent test sees it.
type child struct {
	rank   int
	cmd    *exec.Cmd
	out    bytes.Buffer // stdout and stderr
	done   chan struct{}
	err    error
	exited time.Time
}

// spawn starts the n ranks of a job in role. Each gets the job directory
// (its KVS) and extra environment; all are killed when the test ends.
func spawn(t testing.TB, role, dir string, n int, env ...string) []*child {
	return spawnFrom(t, role, dir, n, 0, env...)
}

// spawnFrom starts ranks lo..n-1 of a job of n ranks, as spawn does; the
// caller plays the others.
func spawnFrom(t testing.TB, role, dir string, n, lo int, env ...string) []*child {
	t.Helper()
	var kids []*child
	for r := lo; r < n; r++ {
		c := &child{rank: r, done: make(chan struct{})}
		c.cmd = exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.timeout=120s")
		c.cmd.Env = append(os.Environ(), envRole+"="+role, "SHMTEST_DIR="+dir,
			"SHMTEST_RANK="+strconv.Itoa(r), "SHMTEST_SIZE="+strconv.Itoa(n))
		c.cmd.Env = append(c.cmd.Env, env...)
		c.cmd.Stdout, c.cmd.Stderr = &c.out, &c.out
		c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := c.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() {
			c.err = c.cmd.Wait()
			c.exited = time.Now()
			close(c.done)
		}()
		kids = append(kids, c)
	}
	t.Cleanup(func() {
		for _, c := range kids {
			c.cmd.Process.Kill()
			<-c.done
		}
	})
	return kids
}

// waitAll waits for every child, for at most d, and fails the test with
// their output if one fails or is late.
func waitAll(t testing.TB, kids []*child, d time.Duration) {
	t.Helper()
	timeout := time.After(d)
	for _, c := range kids {
		select {
		case <-c.done:
		case <-timeout:
			for _, c := range kids {
				c.cmd.Process.Kill()
				<-c.done
				t.Logf("rank %d: %v\n%s", c.rank, c.err, c.out.String())
			}
			t.Fatalf("ranks still running after %v", d)
		}
	}
	for _, c := range kids {
		if c.err != nil {
			t.Errorf("rank %d: %v\n%s", c.rank, c.err, c.out.String())
		}
	}
}

// jobFiles lists what a job left in /dev/shm.
func jobFiles(job string) []string {
	m, _ := filepath.Glob("/dev/shm/gocoll-" + job + "-*")
	return m
}

func TestHelperProcess(t *testing.T) {
	role := os.Getenv(envRole)
	if role == "" {
		t.Skip("a rank of the multi-process tests")
	}
	rank, _ := strconv.Atoi(os.Getenv("SHMTEST_RANK"))
	size, _ := strconv.Atoi(os.Getenv("SHMTEST_SIZE"))
	dir := os.Getenv("SHMTEST_DIR")
	testNoCMA = os.Getenv("SHMTEST_CMA") == "0"
	if v := os.Getenv("SHMTEST_EAGER"); v != "" {
		testEagerLimit, _ = strconv.Atoi(v)
	}
	kvs := &fileKVS{dir: dir, rank: rank, size: size, deadline: time.Now().Add(30 * time.Second)}
	var err error
	switch role {
	case "ring":
		err = roleRing(kvs)
	case "crash":
		err = roleCrash(kvs)
	case "pong":
		err = rolePong(kvs)
	case "hosts":
		err = roleHosts(kvs)
	default:
		err = fmt.Errorf("unknown role %q", role)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "rank %d: %v\n", rank, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// ringSizes are the message sizes of the ring tests: each side of the
// eager limit, the ring size, and up to 16 MiB.
var ringSizes = []int{0, 1, 8, 100, 1 << 10, 4095, 16 << 10, 32<<10 + 1, 64 << 10, 65537, 300000, 1 << 20, 4<<20 + 7, 16 << 20}

// roleRing sends each size to the right neighbour and receives from the
// left one, checking the data; then it times 8-byte ring rounds. Rank 0,
// which creates the segment, checks its mode before it is unlinked.
func roleRing(kvs *fileKVS) error {
	var modeErr error
	checked := false
	testBeforeUnlink = func(path string) {
		checked = true
		var st syscall.Stat_t
		if err := syscall.Stat(path, &st); err != nil {
			modeErr = err
		} else if st.Mode&0o777 != 0o600 || int(st.Uid) != os.Geteuid() || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
			modeErr = fmt.Errorf("segment %s: mode %o, owner %d; want a file, 0600, owner %d", path, st.Mode, st.Uid, os.Geteuid())
		}
	}
	ep, err := New(kvs, Options{JobID: os.Getenv("SHMTEST_JOB"), Timeout: 20 * time.Second})
	if err != nil {
		return err
	}
	defer ep.Close()
	if modeErr != nil || kvs.rank == 0 && !checked {
		return fmt.Errorf("segment mode check: %v (ran: %v)", modeErr, checked)
	}
	n, me := kvs.size, kvs.rank
	right, left := (me+1)%n, (me+n-1)%n
	for _, p := range []int{left, right} {
		if !ep.Reaches(p) {
			return fmt.Errorf("rank %d not reachable", p)
		}
	}
	send, recv := make([]byte, 16<<20), make([]byte, 16<<20)
	ops := make([]transport.Op, 2)
	for _, size := range ringSizes {
		for it := range 2 {
			fill(send[:size], me, it)
			ops[0] = transport.Op{Peer: left, Tag: transport.Tag{Context: 7, Seq: uint32(size), Round: uint32(it)}, Buf: recv[:size], Recv: true}
			ops[1] = transport.Op{Peer: right, Tag: transport.Tag{Context: 7, Seq: uint32(size), Round: uint32(it)}, Buf: send[:size]}
			if err := ep.Start(ops); err != nil {
				return err
			}
			if err := ep.Wait(ops); err != nil {
				return fmt.Errorf("size %d: %w", size, err)
			}
			if ops[0].N != size || !check(recv[:size], left, it) {
				return fmt.Errorf("size %d: received %d bytes, wrong data", size, ops[0].N)
			}
		}
	}
	// Rank 0 unlinked the segment before its first exchange.
	if len(jobFiles(os.Getenv("SHMTEST_JOB"))) != 0 {
		return errors.New("segment still in /dev/shm after the first exchanges")
	}
	// Latency of a ring round of 8 bytes, oversubscribed or not.
	const rounds = 2000
	t0 := time.Now()
	for i := range rounds {
		ops[0] = transport.Op{Peer: left, Tag: transport.Tag{Context: 8, Round: uint32(i)}, Buf: recv[:8], Recv: true}
		ops[1] = transport.Op{Peer: right, Tag: transport.Tag{Context: 8, Round: uint32(i)}, Buf: send[:8]}
		ep.Start(ops)
		if err := ep.Wait(ops); err != nil {
			return err
		}
	}
	fmt.Printf("ring round of 8 B: %.1f us\n", float64(time.Since(t0).Microseconds())/rounds)
	return nil
}

// fill and check write and verify bytes that depend on rank and iteration.
func fill(b []byte, rank, it int) {
	for i := range b {
		b[i] = byte(i*7 + rank*131 + it*31 + i>>10)
	}
}

func check(b []byte, rank, it int) bool {
	for i := range b {
		if b[i] != byte(i*7+rank*131+it*31+i>>10) {
			return false
		}
	}
	return true
}

// roleCrash runs a ring of 4 MiB messages until it fails; after the first
// round it says so with a file, so that the parent kills a rank mid-job.
func roleCrash(kvs *fileKVS) error {
	ep, err := New(kvs, Options{JobID: os.Getenv("SHMTEST_JOB")})
	if err != nil {
		return err
	}
	defer ep.Close()
	n, me := kvs.size, kvs.rank
	right, left := (me+1)%n, (me+n-1)%n
	send, recv := make([]byte, 4<<20), make([]byte, 4<<20)
	ops := make([]transport.Op, 2)
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		ops[0] = transport.Op{Peer: left, Tag: transport.Tag{Round: uint32(i)}, Buf: recv, Recv: true}
		ops[1] = transport.Op{Peer: right, Tag: transport.Tag{Round: uint32(i)}, Buf: send}
		ep.Start(ops)
		if err := ep.Wait(ops); err != nil {
			return fmt.Errorf("round %d: %w", i, err)
		}
		if i == 0 {
			os.WriteFile(filepath.Join(kvs.dir, fmt.Sprintf("ready-%d", me)), nil, 0o600)
		}
	}
	return errors.New("no failure in 30 s")
}

// roleHosts pretends to be on host h0 or h1 by rank parity: it reaches
// only the ranks of its parity, exchanges with one of them, and cannot
// send to the others.
func roleHosts(kvs *fileKVS) error {
	os.Setenv("GOCOLL_HOST", fmt.Sprint("h", kvs.rank%2))
	ep, err := New(kvs, Options{JobID: os.Getenv("SHMTEST_JOB"), Timeout: 20 * time.Second})
	if err != nil {
		return err
	}
	defer ep.Close()
	me := kvs.rank
	for r := range kvs.size {
		if want := r != me && r%2 == me%2; ep.Reaches(r) != want {
			return fmt.Errorf("Reaches(%d) = %v", r, !want)
		}
	}
	partner := me ^ 2
	for _, size := range []int{8, 1 << 20} {
		got := make([]byte, size)
		ops := []transport.Op{{Peer: partner, Buf: got, Recv: true}, {Peer: partner, Buf: pattern(size, me)}}
		if err := exchange(ep, ops); err != nil {
			return err
		}
		if !bytes.Equal(got, pattern(size, partner)) {
			return fmt.Errorf("wrong data from %d", partner)
		}
	}
	if err := exchange(ep, []transport.Op{{Peer: me ^ 1, Buf: []byte{1}}}); !errors.Is(err, transport.ErrBadPeer) {
		return fmt.Errorf("send to another host: %v, want ErrBadPeer", err)
	}
	return nil
}

func runRing(t *testing.T, n int, d time.Duration, env ...string) {
	job := fmt.Sprintf("t%d-%d", os.Getpid(), time.Now().UnixNano())
	start := time.Now()
	kids := spawn(t, "ring", t.TempDir(), n, append(env, "SHMTEST_JOB="+job)...)
	waitAll(t, kids, d)
	t.Logf("%d processes: %v; rank 0 says %s", n, time.Since(start).Round(time.Millisecond), strings.TrimSpace(kids[0].out.String()))
	if f := jobFiles(job); len(f) != 0 {
		t.Errorf("left in /dev/shm: %v", f)
	}
}

func cmaEnv(cma bool) string {
	if cma {
		return "SHMTEST_CMA=1"
	}
	return "SHMTEST_CMA=0"
}

// Four processes exchange 0 B .. 16 MiB around a ring, with CMA and with
// the copy through the ring (as where Yama or seccomp forbid CMA).
func TestMultiProcessRing(t *testing.T) {
	for _, cma := range []bool{true, false} {
		t.Run(cmaName(cma), func(t *testing.T) { runRing(t, 4, 30*time.Second, cmaEnv(cma)) })
	}
}

// Eight processes on this machine's cores: waiting must block, not spin.
func TestMultiProcessRingOversubscribed(t *testing.T) {
	for _, cma := range []bool{true, false} {
		t.Run(cmaName(cma), func(t *testing.T) { runRing(t, 8, 40*time.Second, cmaEnv(cma)) })
	}
}

// Four ranks on two (pretended) hosts: one segment per host, and New is
// collective over all four.
func TestMultiProcessTwoHosts(t *testing.T) {
	job := fmt.Sprintf("h%d-%d", os.Getpid(), time.Now().UnixNano())
	kids := spawn(t, "hosts", t.TempDir(), 4, "SHMTEST_JOB="+job)
	waitAll(t, kids, 30*time.Second)
	if f := jobFiles(job); len(f) != 0 {
		t.Errorf("left in /dev/shm: %v", f)
	}
}

// SIGKILL one rank while 4 MiB messages are in flight: every other rank
// fails within seconds with an error that names it, and the job leaves
// nothing in /dev/shm.
func TestMultiProcessKill(t *testing.T) {
	for _, cma := range []bool{true, false} {
		t.Run(cmaName(cma), func(t *testing.T) { testKill(t, cmaEnv(cma)) })
	}
}

func testKill(t *testing.T, env ...string) {
	const n, victim = 4, 2
	dir := t.TempDir()
	job := fmt.Sprintf("k%d-%d", os.Getpid(), time.Now().UnixNano())
	kids := spawn(t, "crash", dir, n, append(env, "SHMTEST_JOB="+job)...)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for r := 0; r < n; {
		if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("ready-%d", r))); err == nil {
			r++
			continue
		}
		select {
		case <-kids[r].done:
			t.Fatalf("rank %d exited early: %v\n%s", r, kids[r].err, kids[r].out.String())
		case <-ctx.Done():
			t.Fatal("ranks not ready after 20 s")
		case <-time.After(time.Millisecond):
		}
	}
	if f := jobFiles(job); len(f) != 0 {
		t.Errorf("segment still in /dev/shm while the job runs: %v", f)
	}
	time.Sleep(20 * time.Millisecond)
	killed := time.Now()
	kids[victim].cmd.Process.Signal(syscall.SIGKILL)
	for _, c := range kids {
		select {
		case <-c.done:
		case <-time.After(10 * time.Second):
			t.Fatalf("rank %d still running 10 s after rank %d was killed\n%s", c.rank, victim, c.out.String())
		}
	}
	want := fmt.Sprintf("rank %d: %v", victim, transport.ErrPeerFailed)
	for _, c := range kids {
		if c.rank == victim {
			continue
		}
		out := c.out.String()
		if c.err == nil || !strings.Contains(out, want) {
			t.Errorf("rank %d: exit %v, output %q; want a failure naming rank %d", c.rank, c.err, out, victim)
		}
		t.Logf("rank %d failed %v after the kill: %s", c.rank, c.exited.Sub(killed).Round(time.Millisecond), strings.TrimSpace(out))
	}
	if f := jobFiles(job); len(f) != 0 {
		t.Errorf("left in /dev/shm: %v", f)
	}
}
