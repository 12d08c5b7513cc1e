package pmi

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// socketpair returns the two ends of a connected Unix socket, as raw
// descriptors, the way gocollrun hands PMI_FD to a rank.
func socketpair(t testing.TB) (a, b int) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	return fds[0], fds[1]
}

// fdConn turns a descriptor into a net.Conn.
func fdConn(t testing.TB, fd int) net.Conn {
	t.Helper()
	f := os.NewFile(uintptr(fd), "socket")
	defer f.Close()
	c, err := net.FileConn(f)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// startJob serves n ranks over socketpairs and returns their clients.
func startJob(t *testing.T, n int) (*Server, []*Client) {
	t.Helper()
	s := NewServer(n, "kvs_test")
	t.Cleanup(s.Close)
	clients := make([]*Client, n)
	for r := range n {
		a, b := socketpair(t)
		go s.ServeConn(fdConn(t, a), r)
		conn := fdConn(t, b)
		c, err := newClient(conn, bufio.NewReaderSize(conn, maxLine), r, n)
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
		clients[r] = c
	}
	return s, clients
}

// within fails the test if f does not return in d: no test may hang.
func within(t *testing.T, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s did not finish within %v", what, d)
	}
}

func TestClientServerKVS(t *testing.T) {
	for _, n := range []int{1, 2, 5} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			_, clients := startJob(t, n)
			errs := make([]error, n)
			within(t, 10*time.Second, "the rounds", func() {
				var wg sync.WaitGroup
				for _, c := range clients {
					wg.Go(func() { errs[c.Rank()] = rounds(c, 3) })
				}
				wg.Wait()
			})
			for r, err := range errs {
				if err != nil {
					t.Errorf("rank %d: %v", r, err)
				}
			}
		})
	}
}

// rounds puts, fences and reads back every rank's keys, rounds times.
func rounds(c *Client, rounds int) error {
	n := c.Size()
	for round := range rounds {
		if err := c.Put(fmt.Sprintf("k-%d", c.Rank()), fmt.Sprintf("v%d.%d", round, c.Rank())); err != nil {
			return err
		}
		if err := c.Fence(); err != nil {
			return err
		}
		for p := range n {
			v, err := c.Get(fmt.Sprintf("k-%d", p))
			if err != nil {
				return err
			}
			if want := fmt.Sprintf("v%d.%d", round, p); v != want {
				return fmt.Errorf("round %d: rank %d's key is %q, want %q", round, p, v, want)
			}
		}
		if err := c.Fence(); err != nil {
			return err
		}
	}
	return nil
}

func TestClientLimits(t *testing.T) {
	s, clients := startJob(t, 1)
	c := clients[0]
	if c.KVSName() != "kvs_test" || c.AppNum() != 0 || c.MaxValueLen() != vallenMax-1 {
		t.Errorf("kvsname %q appnum %d max value %d", c.KVSName(), c.AppNum(), c.MaxValueLen())
	}
	max := strings.Repeat("v", c.MaxValueLen())
	if err := c.Put("max", max); err != nil {
		t.Errorf("a value of vallen_max-1 bytes: %v", err)
	}
	if err := c.Put("over", max+"v"); err == nil {
		t.Error("a value of vallen_max bytes was accepted")
	}
	if err := c.Put(strings.Repeat("k", keylenMax), "v"); err == nil {
		t.Error("a key of keylen_max bytes was accepted")
	}
	if err := c.Put("space", "a b"); err == nil {
		t.Error("a value with a space was accepted")
	}
	if err := c.Put("empty", ""); err != nil {
		t.Errorf("empty value: %v", err)
	}
	if v, err := c.Get("max"); err != nil || v != max {
		t.Errorf("get max: %d bytes, %v", len(v), err)
	}
	if v, err := c.Get("empty"); err != nil || v != "" {
		t.Errorf("get empty: %q, %v", v, err)
	}
	if _, err := c.Get("missing"); err == nil || !strings.Contains(err.Error(), "not_found") {
		t.Errorf("get missing: %v", err)
	}
	if s.Initialized(0) != true || s.Finalized(0) {
		t.Error("server state before finalize is wrong")
	}
	if err := c.Finalize(); err != nil {
		t.Fatal(err)
	}
	if !s.Finalized(0) {
		t.Error("server did not see finalize")
	}
	if err := c.Fence(); err == nil {
		t.Error("Fence after Finalize succeeded")
	}
	if err := c.Finalize(); err == nil {
		t.Error("second Finalize succeeded")
	}
}

func TestInitack(t *testing.T) {
	s := NewServer(3, "kvs_port")
	defer s.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(l) }()
	addr := l.Addr().String()
	c, err := fromPort(addr, s.PortID(2))
	if err != nil {
		t.Fatal(err)
	}
	if c.Rank() != 2 || c.Size() != 3 || c.KVSName() != "kvs_port" {
		t.Errorf("rank %d size %d kvs %q", c.Rank(), c.Size(), c.KVSName())
	}
	// A used PMI_ID, a rank number and garbage are all refused.
	for _, id := range []string{s.PortID(2), "1", "x"} {
		if _, err := fromPort(addr, id); err == nil {
			t.Errorf("pmiid=%s was accepted", id)
		}
	}
	// Without PMI_ID, rank and size come from the environment.
	t.Setenv("PMI_RANK", "1")
	t.Setenv("PMI_SIZE", "3")
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	conn.Write([]byte("cmd=init pmi_version=1 pmi_subversion=1\n"))
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := bufio.NewReader(conn).ReadString('\n'); err == nil {
		t.Error("a connection that skipped initack was answered")
	}
	conn.Close()
	s.Close()
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve after Close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Error("Serve did not return after Close")
	}
}

func TestFromEnv(t *testing.T) {
	t.Setenv("PMI_FD", "")
	t.Setenv("PMI_PORT", "")
	t.Setenv("PMI_JOBID", "")
	t.Setenv("GOCOLL_PMI", "")
	if c, ok, err := FromEnv(); c != nil || ok || err != nil {
		t.Fatalf("FromEnv without a launcher = %v, %v, %v", c, ok, err)
	}

	s := NewServer(2, "kvs_env")
	defer s.Close()
	a, b := socketpair(t)
	go s.ServeConn(fdConn(t, a), 1)
	t.Setenv("PMI_FD", strconv.Itoa(b))
	t.Setenv("PMI_RANK", "1")
	t.Setenv("PMI_SIZE", "2")
	c, ok, err := FromEnv()
	if err != nil || !ok {
		t.Fatalf("FromEnv with PMI_FD: %v %v", ok, err)
	}
	c1, isPMI1 := c.(*Client)
	if !isPMI1 || c.Rank() != 1 || c.Size() != 2 || c1.KVSName() != "kvs_env" {
		t.Fatalf("FromEnv gave %T rank %d size %d, want a PMI-1 client of rank 1 of 2 in kvs_env", c, c.Rank(), c.Size())
	}
	// FromEnv took the descriptor over and closed the original.
	if _, err := syscall.Getpeername(b); err == nil {
		t.Error("PMI_FD is still open after FromEnv")
	}

	t.Setenv("PMI_FD", "nonsense")
	if _, ok, err := FromEnv(); !ok || err == nil {
		t.Errorf("FromEnv with a bad PMI_FD = %v, %v", ok, err)
	}
	t.Setenv("PMI_FD", "")
	t.Setenv("PMI_PORT", "127.0.0.1:1")
	if _, ok, err := FromEnv(); !ok || err == nil {
		t.Errorf("FromEnv with nothing at PMI_PORT = %v, %v", ok, err)
	}
}

// Allgather against gocollrun's server takes one put, one fence and one
// bulk get per rank, whatever the job's size; with the bulk get hidden (as
// under hydra) it takes a get per rank instead. Blobs longer than a value
// travel in chunks.
func TestAllgatherTraffic(t *testing.T) {
	for _, bulk := range []bool{true, false} {
		const n = 6
		_, clients := startJob(t, n)
		blob := func(r int) []byte { return bytes.Repeat([]byte{byte(r), ' ', '='}, 100+r*300) }
		errs := make([]error, n)
		within(t, 10*time.Second, "the allgathers", func() {
			var wg sync.WaitGroup
			for _, c := range clients {
				c.bulk = bulk
				wg.Go(func() {
					for range 2 {
						all, err := c.Allgather(blob(c.Rank()))
						if err != nil {
							errs[c.Rank()] = err
							return
						}
						for q := range n {
							if !bytes.Equal(all[q], blob(q)) {
								errs[c.Rank()] = fmt.Errorf("rank %d's blob differs", q)
							}
						}
					}
				})
			}
			wg.Wait()
		})
		for r, err := range errs {
			if err != nil {
				t.Fatalf("bulk=%v: rank %d: %v", bulk, r, err)
			}
		}
		// Rank 0's blob fits one value (400 bytes of base64); rank 5's
		// takes 7 (6400 bytes in values of 1015): 23 values in all.
		tr := clients[0].Traffic()
		if bulk && (tr.Puts != 2 || tr.Fences != 2 || tr.Bulk != 2 || tr.Gets != 2*(23-n)) {
			t.Errorf("bulk: rank 0's traffic is %v", tr)
		}
		// Without the bulk get (hydra, Slurm) values are cut to 924 bytes
		// (916 of data), so that a put line fits Slurm's 1024-byte read:
		// 1+2+4+5+6+7 = 25 values, less rank 0's own.
		if !bulk && (tr.Bulk != 0 || tr.Gets != 2*24) {
			t.Errorf("no bulk: rank 0's traffic is %v", tr)
		}
	}
}
