package tcp

// Tests and benchmarks with ranks in other processes: the test binary
// re-executes itself with GOCOLL_TCP_CHILD set, and the ranks find each
// other through a KVS made of files in a shared directory.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
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

	"github.com/gocoll/gocoll/bootstrap"
	"github.com/gocoll/gocoll/transport"
)

func TestMain(m *testing.M) {
	if role := os.Getenv("GOCOLL_TCP_CHILD"); role != "" {
		if err := runChild(role); err != nil {
			fmt.Fprintf(os.Stderr, "child %s: %v\n", role, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// fileKVS is a bootstrap.KVS over files in a directory that every rank
// can read: Put writes a file atomically, Fence waits for one marker file
// per rank.
type fileKVS struct {
	dir        string
	rank, size int
	gen        int
}

func (k *fileKVS) Rank() int { return k.rank }
func (k *fileKVS) Size() int { return k.size }

func (k *fileKVS) Put(key, value string) error {
	tmp := filepath.Join(k.dir, fmt.Sprintf(".tmp-%d-%s", k.rank, key))
	if err := os.WriteFile(tmp, []byte(value), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(k.dir, "kv-"+key))
}

func (k *fileKVS) Fence() error {
	k.gen++
	if err := os.WriteFile(filepath.Join(k.dir, fmt.Sprintf("fence-%d-%d", k.gen, k.rank)), nil, 0o600); err != nil {
		return err
	}
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(2 * time.Millisecond) {
		n := 0
		for r := range k.size {
			if _, err := os.Stat(filepath.Join(k.dir, fmt.Sprintf("fence-%d-%d", k.gen, r))); err == nil {
				n++
			}
		}
		if n == k.size {
			return nil
		}
	}
	return errors.New("fence: other ranks missing after 30 s")
}

func (k *fileKVS) Get(key string) (string, error) {
	b, err := os.ReadFile(filepath.Join(k.dir, "kv-"+key))
	return string(b), err
}

// childEnv describes one child rank.
type childEnv struct {
	role, dir, addr string
	rank, size      int
}

func (c childEnv) environ() []string {
	return append(os.Environ(),
		"GOCOLL_TCP_CHILD="+c.role,
		"GOCOLL_TCP_KVS="+c.dir,
		"GOCOLL_TCP_ADDR="+c.addr,
		"GOCOLL_TCP_RANK="+strconv.Itoa(c.rank),
		"GOCOLL_TCP_SIZE="+strconv.Itoa(c.size),
		"GOCOLL_TCP_SECRET="+hex.EncodeToString(testSecret),
	)
}

// startChild starts the test binary as a child rank, optionally through a
// wrapper command (ip netns exec NS), killed at the latest when the test
// ends.
func startChild(t testing.TB, ctx context.Context, env childEnv, wrapper ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	args := append(append([]string(nil), wrapper...), self, "-test.run=^$")
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Env = env.environ()
	out := &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd, out
}

func runChild(role string) error {
	rank, _ := strconv.Atoi(os.Getenv("GOCOLL_TCP_RANK"))
	size, _ := strconv.Atoi(os.Getenv("GOCOLL_TCP_SIZE"))
	secret, _ := hex.DecodeString(os.Getenv("GOCOLL_TCP_SECRET"))
	kvs := &fileKVS{dir: os.Getenv("GOCOLL_TCP_KVS"), rank: rank, size: size}
	ep, err := New(kvs, Options{Addr: os.Getenv("GOCOLL_TCP_ADDR"), Secret: secret, Timeout: 20 * time.Second})
	if err != nil {
		return err
	}
	defer ep.Close()
	// The longest any child lives, should its parent vanish.
	time.AfterFunc(2*time.Minute, func() { os.Exit(3) })
	switch role {
	case "exchange":
		return childExchange(ep)
	case "echo":
		return childEcho(ep)
	case "sendhang":
		if err := childDo(ep, []transport.Op{{Peer: 0, Tag: tag(0), Buf: []byte("hello")}}); err != nil {
			return err
		}
		select {} // until killed
	case "idle":
		select {}
	}
	return fmt.Errorf("unknown role %q", role)
}

func childDo(ep *Endpoint, ops []transport.Op) error {
	if err := ep.Start(ops); err != nil {
		return err
	}
	return ep.Wait(ops)
}

// twoHostSizes are the sizes exchanged between the emulated hosts.
var twoHostSizes = []int{0, 1, 7, 64, 1000, 4096, 65535, 65536, 262145, 1 << 20, 3<<20 + 5, 8 << 20}

// childExchange swaps every size with the other rank both ways, then
// receives a burst of every size sent before the receives are posted.
func childExchange(ep *Endpoint) error {
	fmt.Printf("host %s\n", bootstrap.HostID())
	me, peer := ep.Rank(), 1-ep.Rank()
	total := 0
	for _, n := range twoHostSizes {
		got := make([]byte, n)
		ops := []transport.Op{
			{Peer: peer, Tag: tag(n), Buf: got, Recv: true},
			{Peer: peer, Tag: tag(n), Buf: pattern(n, me)},
		}
		if err := childDo(ep, ops); err != nil {
			return fmt.Errorf("size %d: %w", n, err)
		}
		if ops[0].N != n || !bytes.Equal(got, pattern(n, peer)) {
			return fmt.Errorf("size %d: received %d bytes, wrong contents", n, ops[0].N)
		}
		total += n
	}
	ops := make([]transport.Op, len(twoHostSizes))
	for i, n := range twoHostSizes {
		if me == 0 {
			ops[i] = transport.Op{Peer: peer, Tag: tag(1 << 30), Buf: pattern(n, i)}
		} else {
			ops[i] = transport.Op{Peer: peer, Tag: tag(1 << 30), Buf: make([]byte, n), Recv: true}
		}
	}
	if me == 1 {
		time.Sleep(100 * time.Millisecond) // let the burst arrive unexpected
	}
	if err := childDo(ep, ops); err != nil {
		return fmt.Errorf("burst: %w", err)
	}
	for i, n := range twoHostSizes {
		if me == 1 && (ops[i].N != n || !bytes.Equal(ops[i].Buf, pattern(n, i))) {
			return fmt.Errorf("burst message %d: wrong contents", i)
		}
	}
	// A last exchange, so that neither rank closes while the other
	// still receives the burst.
	if err := childDo(ep, []transport.Op{{Peer: peer, Tag: tag(-1), Recv: true}, {Peer: peer, Tag: tag(-1)}}); err != nil {
		return fmt.Errorf("goodbye: %w", err)
	}
	fmt.Printf("PASS %d bytes each way\n", total)
	return nil
}

// childEcho sends back every message from rank 0 until rank 0 closes.
func childEcho(ep *Endpoint) error {
	buf := make([]byte, 16<<20)
	ops := make([]transport.Op, 1)
	for {
		ops[0] = transport.Op{Peer: 0, Tag: tag(0), Buf: buf, Recv: true}
		if err := ep.Start(ops); err != nil {
			return err
		}
		if err := ep.Wait(ops); err != nil {
			if errors.Is(err, transport.ErrPeerFailed) {
				return nil // the parent is done
			}
			return err
		}
		ops[0] = transport.Op{Peer: 0, Tag: tag(0), Buf: buf[:ops[0].N]}
		if err := childDo(ep, ops); err != nil {
			return err
		}
	}
}

// A rank killed with SIGKILL fails the others' ops with it at once, naming
// it: through the connection's reset if one was up, through the refused
// dial if not.
func TestKilledPeer(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c1, out1 := startChild(t, ctx, childEnv{role: "sendhang", dir: dir, addr: "127.0.0.1", rank: 1, size: 3})
	c2, out2 := startChild(t, ctx, childEnv{role: "idle", dir: dir, addr: "127.0.0.1", rank: 2, size: 3})
	ep, err := New(&fileKVS{dir: dir, rank: 0, size: 3}, Options{Addr: "127.0.0.1", Secret: testSecret, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatalf("New: %v\nchild 1: %s\nchild 2: %s", err, out1, out2)
	}
	defer ep.Close()
	hello := make([]byte, 5)
	if err := exchange(t, ep, []transport.Op{{Peer: 1, Tag: tag(0), Buf: hello, Recv: true}}); err != nil || string(hello) != "hello" {
		t.Fatalf("hello from rank 1: %q %v\n%s", hello, err, out1)
	}
	ops := []transport.Op{{Peer: 1, Tag: tag(1), Buf: make([]byte, 8), Recv: true}}
	ep.Start(ops)
	time.Sleep(20 * time.Millisecond)
	start := time.Now()
	c1.Process.Signal(syscall.SIGKILL)
	c2.Process.Signal(syscall.SIGKILL)
	err = wait(t, ep, ops)
	var te *transport.Error
	if !errors.As(err, &te) || te.Peer != 1 || !errors.Is(err, transport.ErrPeerFailed) {
		t.Fatalf("receive from killed rank 1: %v", err)
	}
	t.Logf("connected rank killed: failed after %v: %v", time.Since(start), err)
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("failure took %v", d)
	}
	c2.Wait()
	start = time.Now()
	err = exchange(t, ep, []transport.Op{{Peer: 2, Tag: tag(1), Buf: make([]byte, 8), Recv: true}})
	if !errors.As(err, &te) || te.Peer != 2 || !errors.Is(err, transport.ErrPeerFailed) {
		t.Fatalf("receive from killed rank 2: %v", err)
	}
	t.Logf("unconnected rank killed: failed after %v: %v", time.Since(start), err)
}

// TestTwoHosts runs one rank in each of two network namespaces joined by a
// veth pair, with loopback-range addresses on the veth ends, and exchanges
// 1 B .. 8 MiB between them. The namespaces are always deleted.
func TestTwoHosts(t *testing.T) {
	h := setupHosts(t, "127.1.0.1", "127.1.0.2")
	nsA, nsB := h.ns[0], h.ns[1]
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cA, outA := startChild(t, ctx, childEnv{role: "exchange", dir: dir, addr: "127.1.0.1", rank: 0, size: 2}, "ip", "netns", "exec", nsA)
	cB, outB := startChild(t, ctx, childEnv{role: "exchange", dir: dir, addr: "127.1.0.2", rank: 1, size: 2}, "ip", "netns", "exec", nsB)
	errA, errB := cA.Wait(), cB.Wait()
	t.Logf("rank 0 in %s:\n%s", nsA, outA)
	t.Logf("rank 1 in %s:\n%s", nsB, outB)
	if errA != nil || errB != nil {
		t.Fatalf("ranks failed: %v, %v", errA, errB)
	}
	hostA, _, _ := strings.Cut(outA.String(), "\n")
	hostB, _, _ := strings.Cut(outB.String(), "\n")
	if hostA == hostB || !strings.HasPrefix(hostA, "host ") {
		t.Errorf("the ranks do not look like two hosts: %q, %q", hostA, hostB)
	}
	for _, out := range []string{outA.String(), outB.String()} {
		if !strings.Contains(out, "PASS") {
			t.Errorf("a rank did not finish: %s", out)
		}
	}
	// The bytes went over the veth pair, not through a loopback device.
	for i, ns := range h.ns {
		out, err := exec.Command("ip", "netns", "exec", ns, "cat", "/sys/class/net/"+h.veth[i]+"/statistics/tx_bytes").Output()
		if err != nil {
			t.Fatalf("reading the veth counters: %v", err)
		}
		n, _ := strconv.Atoi(strings.TrimSpace(string(out)))
		t.Logf("%s sent %d bytes", h.veth[i], n)
		if n < 8<<20 {
			t.Errorf("%s sent only %d bytes: the ranks did not talk over it", h.veth[i], n)
		}
	}
}

// hosts are two emulated hosts: network namespaces and their veth ends.
type hosts struct {
	ns, veth [2]string
}

// setupHosts creates two network namespaces joined by a veth pair whose
// ends get addrA/24 and addrB/24 (loopback range), and deletes them when
// the test ends. Inside each namespace lo is up and the local route that
// makes all of 127/8 local is narrowed to 127.0.0.1, so that the peer's
// 127.1.0.x address is reached over the veth; route_localnet lets the
// veth carry 127/8 addresses. Where namespaces cannot be made the test
// fails, as tests/netns_test.go does: a test that cannot make its
// environment has proved nothing. GOCOLL_TEST_NO_NETNS=1 skips it instead,
// by the user's choice, and says so.
func setupHosts(t *testing.T, addrA, addrB string) hosts {
	t.Helper()
	if os.Geteuid() != 0 {
		noHosts(t, "creating network namespaces (ip netns add) needs root")
	}
	ip, err := exec.LookPath("ip")
	if err != nil {
		noHosts(t, "iproute2's ip command, which creates network namespaces, is missing (make deps installs it)")
	}
	run := func(args ...string) error {
		out, err := exec.Command(ip, args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
		}
		return nil
	}
	var id [3]byte
	rand.Read(id[:])
	tag := hex.EncodeToString(id[:])
	ns := [2]string{"gocoll-test-" + tag + "-a", "gocoll-test-" + tag + "-b"}
	veth := [2]string{"gct" + tag + "a", "gct" + tag + "b"} // at most 15 bytes
	addr := [2]string{addrA, addrB}
	for _, n := range ns {
		if err := run("netns", "add", n); err != nil {
			noHosts(t, fmt.Sprintf("cannot create network namespaces: %v", err))
		}
		t.Cleanup(func() {
			if err := run("netns", "del", n); err != nil {
				t.Errorf("deleting namespace: %v", err)
			}
		})
	}
	// Created straight inside the namespaces: nothing touches the host's.
	if err := run("link", "add", veth[0], "netns", ns[0], "type", "veth", "peer", "name", veth[1], "netns", ns[1]); err != nil {
		noHosts(t, fmt.Sprintf("cannot create a veth pair: %v", err))
	}
	for i, n := range ns {
		steps := [][]string{
			{"-n", n, "link", "set", "lo", "up"},
			{"-n", n, "route", "del", "local", "127.0.0.0/8", "dev", "lo", "table", "local"},
			{"netns", "exec", n, "sh", "-c", "echo 1 > /proc/sys/net/ipv4/conf/" + veth[i] + "/route_localnet"},
			{"-n", n, "addr", "add", addr[i] + "/24", "dev", veth[i]},
			{"-n", n, "link", "set", veth[i], "up"},
		}
		for _, s := range steps {
			if err := run(s...); err != nil {
				t.Fatal(err)
			}
		}
	}
	return hosts{ns: ns, veth: veth}
}

// noHosts ends a test that needs two emulated hosts where they cannot be
// made: a failure, unless GOCOLL_TEST_NO_NETNS=1 asks to skip it.
func noHosts(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("GOCOLL_TEST_NO_NETNS") == "1" {
		t.Skipf("SKIPPED, not passed (GOCOLL_TEST_NO_NETNS=1): two emulated hosts: %s", why)
	}
	t.Fatalf("two emulated hosts: %s; run the tests as root with iproute2, or set GOCOLL_TEST_NO_NETNS=1 to skip the emulated-host tests knowingly", why)
}

// BenchmarkPingPong measures round trips between this process (rank 0)
// and a child process (rank 1) over loopback. MB/s is size over half the
// round trip; us/one-way is half the round trip.
func BenchmarkPingPong(b *testing.B) {
	dir := b.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	_, out := startChild(b, ctx, childEnv{role: "echo", dir: dir, addr: "127.0.0.1", rank: 1, size: 2})
	ep, err := New(&fileKVS{dir: dir, rank: 0, size: 2}, Options{Addr: "127.0.0.1", Secret: testSecret, Timeout: time.Minute})
	if err != nil {
		b.Fatalf("New: %v\nchild: %s", err, out)
	}
	defer ep.Close()
	for _, size := range []int{8, 64, 512, 4 << 10, 32 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20} {
		b.Run(sizeName(size), func(b *testing.B) {
			send, recv := pattern(size, 0), make([]byte, size)
			ops := make([]transport.Op, 2)
			b.SetBytes(int64(2 * size))
			b.ReportAllocs()
			for b.Loop() {
				ops[0] = transport.Op{Peer: 1, Tag: tag(0), Buf: recv, Recv: true}
				ops[1] = transport.Op{Peer: 1, Tag: tag(0), Buf: send}
				if err := ep.Start(ops); err != nil {
					b.Fatal(err)
				}
				if err := ep.Wait(ops); err != nil {
					b.Fatalf("%v\nchild: %s", err, out)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/2, "us/one-way")
		})
	}
}

func sizeName(n int) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}
