package tcp

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocoll/gocoll/bootstrap"
	"github.com/gocoll/gocoll/transport"
	"github.com/gocoll/gocoll/transport/transporttest"
)

var testSecret = []byte("gocoll test secret")

// logBuffer collects an endpoint's log lines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// waitFor waits up to d for the log to contain s.
func (l *logBuffer) waitFor(s string, d time.Duration) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if strings.Contains(l.String(), s) {
			return true
		}
	}
	return false
}

// newJob creates the n endpoints of an in-process job over loopback; opts
// gives each rank's options. It closes them when the test ends.
func newJob(t testing.TB, n int, opts func(rank int) Options) []*Endpoint {
	t.Helper()
	kvs := bootstrap.Local(n)
	eps := make([]*Endpoint, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			eps[r], errs[r] = New(kvs[r], opts(r))
		}()
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, ep := range eps {
			if ep != nil {
				ep.Close()
			}
		}
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: New: %v", r, err)
		}
	}
	return eps
}

func loopback(log io.Writer) func(int) Options {
	return func(int) Options {
		return Options{Addr: "127.0.0.1", Secret: testSecret, Timeout: 20 * time.Second, Log: log}
	}
}

func TestConformance(t *testing.T) {
	log := &logBuffer{}
	transporttest.Run(t, func(t *testing.T, n int) []transport.Transport {
		eps := newJob(t, n, loopback(log))
		out := make([]transport.Transport, n)
		for i, ep := range eps {
			out[i] = ep
		}
		return out
	})
	if s := log.String(); strings.Contains(s, "refused") || strings.Contains(s, "protocol") {
		t.Errorf("conformance logged refusals:\n%s", s)
	}
}

// exchange runs ops on ep with a bound on the wait.
func exchange(t testing.TB, ep *Endpoint, ops []transport.Op) error {
	t.Helper()
	if err := ep.Start(ops); err != nil {
		return err
	}
	return wait(t, ep, ops)
}

// wait waits for started ops, with a bound.
func wait(t testing.TB, ep *Endpoint, ops []transport.Op) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- ep.Wait(ops) }()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatalf("rank %d: ops still pending after 30 s", ep.Rank())
		return nil
	}
}

func pattern(n, seed int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + seed*131 + i>>8)
	}
	return b
}

func tag(round int) transport.Tag { return transport.Tag{Context: 3, Seq: 4, Round: uint32(round)} }

// pairExchange sends pattern(size, rank) both ways between ranks a and b
// and checks what arrives.
func pairExchange(t testing.TB, eps []*Endpoint, a, b, size int) error {
	errs := make(chan error, 2)
	for _, pr := range [][2]int{{a, b}, {b, a}} {
		go func() {
			me, peer := pr[0], pr[1]
			got := make([]byte, size)
			ops := []transport.Op{
				{Peer: peer, Tag: tag(size), Buf: got, Recv: true},
				{Peer: peer, Tag: tag(size), Buf: pattern(size, me)},
			}
			err := exchange(t, eps[me], ops)
			if err == nil && (ops[0].N != size || !bytes.Equal(got, pattern(size, peer))) {
				err = fmt.Errorf("rank %d: %d bytes from %d, wrong contents", me, ops[0].N, peer)
			}
			errs <- err
		}()
	}
	return errors.Join(<-errs, <-errs)
}

func TestNoSecret(t *testing.T) {
	log := &logBuffer{}
	eps := newJob(t, 3, func(int) Options { return Options{Addr: "127.0.0.1", Log: log} })
	if len(eps[0].secret) != 32 || !bytes.Equal(eps[0].secret, eps[2].secret) {
		t.Fatalf("ranks derived different or short secrets")
	}
	if err := pairExchange(t, eps, 0, 2, 1000); err != nil {
		t.Fatal(err)
	}
	// A stranger that does not know the drawn secret is still refused.
	if v := rawHandshake(t, eps[1].Addr().String(), []byte{}, 0, 1); v != 0 {
		t.Fatalf("connection with an empty secret got verdict %d", v)
	}
	if !log.waitFor("wrong MAC", 5*time.Second) {
		t.Fatalf("refusal not logged; log:\n%s", log)
	}
}

// A connection closed before it sends anything, or in the middle of its
// hello, is dropped without a log line (a rank's dial cut short by the end
// of the job), while a wrong MAC still is one.
func TestHangUpIsNotLogged(t *testing.T) {
	log := &logBuffer{}
	eps := newJob(t, 2, func(int) Options { return Options{Addr: "127.0.0.1", Log: log} })
	for _, n := range []int{0, 3} {
		c, err := net.Dial("tcp", eps[1].Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c.Write([]byte(magic)[:n])
		c.Close()
	}
	if v := rawHandshake(t, eps[1].Addr().String(), []byte{}, 0, 1); v != 0 {
		t.Fatalf("connection with an empty secret got verdict %d", v)
	}
	if !log.waitFor("wrong MAC", 5*time.Second) {
		t.Fatalf("refusal not logged; log:\n%s", log)
	}
	if n := strings.Count(log.String(), "refused connection"); n != 1 {
		t.Errorf("%d refusals logged, want only the wrong MAC's:\n%s", n, log)
	}
}

// rawHandshake dials addr as rank 'from' and runs the dialer's side with
// secret, sending its MAC even when the acceptor's does not check out. It
// returns the verdict, or 0 if the acceptor closed the connection.
func rawHandshake(t testing.TB, addr string, secret []byte, from, to int) uint32 {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	nD := nonce()
	hello := []byte(magic)
	hello = binary.LittleEndian.AppendUint32(hello, version)
	hello = binary.LittleEndian.AppendUint32(hello, uint32(from))
	hello = binary.LittleEndian.AppendUint32(hello, uint32(to))
	hello = append(hello, nD...)
	if _, err := c.Write(hello); err != nil {
		t.Fatal(err)
	}
	ch := make([]byte, challengeLen)
	if _, err := io.ReadFull(c, ch); err != nil {
		return 0
	}
	nA := ch[len(magic)+8 : len(magic)+8+nonceLen]
	if _, err := c.Write(mac(secret, labelDial, uint32(from), uint32(to), nA, nD)); err != nil {
		return 0
	}
	var v [4]byte
	if _, err := io.ReadFull(c, v[:]); err != nil {
		return 0
	}
	return binary.LittleEndian.Uint32(v[:])
}

// The acceptor refuses and logs connections that do not prove the secret,
// and the job is not disturbed.
func TestAuthRefusals(t *testing.T) {
	log := &logBuffer{}
	eps := newJob(t, 2, func(int) Options {
		return Options{Addr: "127.0.0.1", Secret: testSecret, Timeout: 500 * time.Millisecond, Log: log}
	})
	addr := eps[1].Addr().String()
	if err := pairExchange(t, eps, 0, 1, 100); err != nil {
		t.Fatal(err)
	}

	t.Run("WrongSecret", func(t *testing.T) {
		if v := rawHandshake(t, addr, []byte("not the secret"), 0, 1); v != 0 {
			t.Fatalf("wrong secret got verdict %d", v)
		}
		if !log.waitFor("dialer claiming rank 0 sent a wrong MAC", 5*time.Second) {
			t.Fatalf("refusal not logged; log:\n%s", log)
		}
	})
	t.Run("RightSecretDuplicate", func(t *testing.T) {
		// Rank 0 is already connected: a second connection claiming it,
		// even one that knows the secret, is refused.
		if v := rawHandshake(t, addr, testSecret, 0, 1); v != verdictRefused {
			t.Fatalf("duplicate connection got verdict %d, want refused", v)
		}
		if !log.waitFor("refused second connection from rank 0", 5*time.Second) {
			t.Fatalf("duplicate not logged; log:\n%s", log)
		}
	})
	t.Run("Garbage", func(t *testing.T) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n" + strings.Repeat("x", 100)))
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if n, err := c.Read(make([]byte, 100)); err == nil {
			t.Fatalf("garbage got %d bytes of answer", n)
		}
		if !log.waitFor("not a gocoll tcp hello", 5*time.Second) {
			t.Fatalf("garbage not logged; log:\n%s", log)
		}
	})
	t.Run("WrongRank", func(t *testing.T) {
		if v := rawHandshake(t, addr, testSecret, 7, 1); v != 0 {
			t.Fatalf("rank 7 of 2 got verdict %d", v)
		}
		if !log.waitFor("claims rank 7 of 2", 5*time.Second) {
			t.Fatalf("not logged; log:\n%s", log)
		}
	})
	t.Run("Silent", func(t *testing.T) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		start := time.Now()
		if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, errors.ErrUnsupported) {
			t.Fatalf("silent connection: read %v", err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("silent connection held for %v", d)
		}
		if !log.waitFor("i/o timeout", 5*time.Second) {
			t.Fatalf("silent connection not logged; log:\n%s", log)
		}
	})
	// The job still works, over its original connection.
	if err := pairExchange(t, eps, 0, 1, 1<<16); err != nil {
		t.Fatal(err)
	}
	t.Logf("log:\n%s", log)
}

// Ranks with different secrets refuse each other: the ops fail naming the
// peer, and the dialer, which finds the acceptor's MAC wrong, logs it (the
// acceptor only sees it hang up: TestHangUpIsNotLogged).
func TestSecretMismatch(t *testing.T) {
	log := &logBuffer{}
	eps := newJob(t, 2, func(r int) Options {
		return Options{Addr: "127.0.0.1", Secret: []byte{byte(r)}, Timeout: 5 * time.Second, Log: log}
	})
	ops := []transport.Op{{Peer: 1, Tag: tag(0), Buf: []byte("x")}}
	err := exchange(t, eps[0], ops)
	var te *transport.Error
	if !errors.As(err, &te) || te.Peer != 1 || !errors.Is(err, transport.ErrPeerFailed) {
		t.Fatalf("send to a rank with another secret: %v", err)
	}
	if !log.waitFor("rank 1 at", 5*time.Second) {
		t.Fatalf("dialer did not log; log:\n%s", log)
	}
	t.Logf("error: %v\nlog:\n%s", err, log)
}

// Both ranks of many fresh pairs dial each other at once: every pair ends
// with one connection, the same at both ends.
func TestSimultaneousConnect(t *testing.T) {
	for trial := range 20 {
		log := &logBuffer{}
		eps := newJob(t, 2, loopback(log))
		if err := pairExchange(t, eps, 0, 1, 10); err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		a, b := eps[0].peers[1], eps[1].peers[0]
		a.mu.Lock()
		b.mu.Lock()
		ok := a.state == stateConnected && b.state == stateConnected &&
			a.conn.LocalAddr().String() == b.conn.RemoteAddr().String() &&
			a.conn.RemoteAddr().String() == b.conn.LocalAddr().String()
		b.mu.Unlock()
		a.mu.Unlock()
		if !ok {
			t.Fatalf("trial %d: the two ends hold different connections", trial)
		}
		if s := log.String(); s != "" {
			t.Fatalf("trial %d: logged:\n%s", trial, s)
		}
		for _, ep := range eps {
			ep.Close()
		}
	}
}

// Closing a rank fails every pending op with it at once, at every other
// rank, naming it; ops between the survivors still work.
func TestPeerClosedFailsFast(t *testing.T) {
	eps := newJob(t, 3, loopback(io.Discard))
	// Connect everyone first.
	if err := pairExchange(t, eps, 0, 1, 10); err != nil {
		t.Fatal(err)
	}
	if err := pairExchange(t, eps, 0, 2, 10); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 2)
	for _, r := range []int{1, 2} {
		go func() {
			ops := []transport.Op{
				{Peer: 0, Tag: tag(1), Buf: make([]byte, 10), Recv: true},
				{Peer: 0, Tag: tag(2), Buf: make([]byte, 10), Recv: true},
			}
			exchange(t, eps[r], ops)
			var err error
			for i := range ops {
				var te *transport.Error
				if !errors.As(ops[i].Err, &te) || te.Peer != 0 || !errors.Is(te, transport.ErrPeerFailed) {
					err = fmt.Errorf("rank %d op %d: %v, want a peer failure of rank 0", r, i, ops[i].Err)
				}
			}
			errs <- err
		}()
	}
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	eps[0].Close()
	for range 2 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("failure took %v to arrive", d)
	}
	if err := pairExchange(t, eps, 1, 2, 100); err != nil {
		t.Fatal(err)
	}
	// Later ops with the dead rank fail at once too.
	if err := exchange(t, eps[1], []transport.Op{{Peer: 0, Tag: tag(3), Buf: []byte{1}}}); !errors.Is(err, transport.ErrPeerFailed) {
		t.Fatalf("send to a closed rank: %v", err)
	}
}

// A message that arrived before the sender closed can still be received.
func TestDeliveredBeforeClose(t *testing.T) {
	eps := newJob(t, 2, loopback(io.Discard))
	if err := exchange(t, eps[0], []transport.Op{{Peer: 1, Tag: tag(0), Buf: pattern(300000, 1)}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	eps[0].Close()
	time.Sleep(50 * time.Millisecond)
	got := make([]byte, 300000)
	if err := exchange(t, eps[1], []transport.Op{{Peer: 0, Tag: tag(0), Buf: got, Recv: true}}); err != nil {
		t.Fatalf("receive of a message that arrived before its sender closed: %v", err)
	}
	if !bytes.Equal(got, pattern(300000, 1)) {
		t.Fatal("wrong data")
	}
	if err := exchange(t, eps[1], []transport.Op{{Peer: 0, Tag: tag(1), Buf: got, Recv: true}}); !errors.Is(err, transport.ErrPeerFailed) {
		t.Fatalf("second receive: %v, want peer failed", err)
	}
}

// A live peer that sends nothing fails a pending receive after Timeout.
func TestTimeout(t *testing.T) {
	eps := newJob(t, 2, func(int) Options {
		return Options{Addr: "127.0.0.1", Secret: testSecret, Timeout: 300 * time.Millisecond, Log: io.Discard}
	})
	// Idle time with nothing pending does not count.
	if err := pairExchange(t, eps, 0, 1, 10); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if err := pairExchange(t, eps, 0, 1, 8<<20); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err := exchange(t, eps[1], []transport.Op{{Peer: 0, Tag: tag(9), Buf: make([]byte, 8), Recv: true}})
	d := time.Since(start)
	var te *transport.Error
	if !errors.Is(err, transport.ErrTimeout) || !errors.As(err, &te) || te.Peer != 0 {
		t.Fatalf("got %v, want a timeout naming rank 0", err)
	}
	// The stall counts from the last byte of the exchange above, which
	// may be a little before start.
	if d < 250*time.Millisecond || d > 3*time.Second {
		t.Fatalf("timed out after %v, want about 300ms", d)
	}
	// The connection was closed: rank 0 sees rank 1 fail.
	err = exchange(t, eps[0], []transport.Op{{Peer: 1, Tag: tag(9), Buf: make([]byte, 8), Recv: true}})
	if !errors.As(err, &te) || te.Peer != 1 {
		t.Fatalf("the other side: %v", err)
	}
}

// Truncation on every path: receive posted first, message queued first,
// and receive posted while the message arrives; the connection stays
// usable.
func TestTruncation(t *testing.T) {
	eps := newJob(t, 2, loopback(io.Discard))
	for _, size := range []int{100, 300000, 3 << 20} {
		for _, postFirst := range []bool{true, false} {
			recv := []transport.Op{{Peer: 0, Tag: tag(size), Buf: make([]byte, size/2), Recv: true}}
			send := []transport.Op{{Peer: 1, Tag: tag(size), Buf: pattern(size, 0)}}
			if postFirst {
				eps[1].Start(recv)
				time.Sleep(5 * time.Millisecond)
				eps[0].Start(send)
			} else {
				eps[0].Start(send)
				time.Sleep(5 * time.Millisecond)
				eps[1].Start(recv)
			}
			eps[0].Wait(send)
			if err := eps[1].Wait(recv); !errors.Is(err, transport.ErrTruncate) || recv[0].N != 0 {
				t.Fatalf("size %d postFirst %v: %v, N %d; want ErrTruncate", size, postFirst, err, recv[0].N)
			}
			if err := pairExchange(t, eps, 0, 1, 1000); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// Many messages queued before their receives arrive intact, in order, on
// every size class, including a receive that takes over a message while
// it arrives.
func TestUnexpected(t *testing.T) {
	eps := newJob(t, 2, loopback(io.Discard))
	sizes := []int{0, 1, 63, 64, 65, 4095, 70000, 262144, 262145, 1 << 20, 5<<20 + 3}
	for _, delay := range []time.Duration{0, time.Millisecond, 20 * time.Millisecond} {
		send := make([]transport.Op, len(sizes))
		recv := make([]transport.Op, len(sizes))
		for i, n := range sizes {
			send[i] = transport.Op{Peer: 1, Tag: tag(0), Buf: pattern(n, i)}
			recv[i] = transport.Op{Peer: 0, Tag: tag(0), Buf: make([]byte, n+10), Recv: true}
		}
		eps[0].Start(send)
		time.Sleep(delay)
		for i := range recv {
			eps[1].Start(recv[i : i+1])
		}
		if err := wait(t, eps[1], recv); err != nil {
			t.Fatal(err)
		}
		eps[0].Wait(send)
		for i, n := range sizes {
			if recv[i].N != n || !bytes.Equal(recv[i].Buf[:n], pattern(n, i)) {
				t.Fatalf("delay %v: message %d of %d bytes: got %d bytes or wrong data", delay, i, n, recv[i].N)
			}
		}
	}
}

// authenticatedConn dials ep as rank 'from' with the right secret, for
// tests that play a misbehaving peer.
func authenticatedConn(t *testing.T, ep *Endpoint, from int) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", ep.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	v, err := dialHandshake(c, bufio.NewReader(c), testSecret, from, ep.Rank())
	if err != nil || v != verdictAccept {
		t.Fatalf("handshake: verdict %d, %v", v, err)
	}
	return c
}

func header(kind uint32, tg transport.Tag, n uint64) []byte {
	h := make([]byte, headerLen)
	binary.LittleEndian.PutUint32(h, kind)
	binary.LittleEndian.PutUint32(h[4:], tg.Context)
	binary.LittleEndian.PutUint32(h[8:], tg.Seq)
	binary.LittleEndian.PutUint32(h[12:], tg.Round)
	binary.LittleEndian.PutUint64(h[16:], n)
	return h
}

// A peer that lies in its headers fails, is logged, and never makes the
// endpoint touch memory outside the posted buffer.
func TestHostilePeer(t *testing.T) {
	cases := []struct {
		name  string
		frame []byte
		log   string
	}{
		{"HugeLength", header(kindData, tag(0), 1<<62), "protocol error"},
		{"BadKind", header(77, tag(0), 1), "protocol error"},
		{"ShortPayload", append(header(kindData, tag(0), 1<<30), 1, 2, 3), ""},
		{"ShortPayloadUnexpected", append(header(kindData, tag(1), 1<<30), 1, 2, 3), ""},
		{"LongerThanBuffer", append(header(kindData, tag(0), 100), make([]byte, 100)...), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			log := &logBuffer{}
			eps := newJob(t, 3, loopback(log))
			c := authenticatedConn(t, eps[0], 2)
			guard := make([]byte, 64)
			buf := guard[:8] // room for 8; 56 bytes beyond it must stay zero
			ops := []transport.Op{{Peer: 2, Tag: tag(0), Buf: buf, Recv: true}}
			eps[0].Start(ops)
			time.Sleep(10 * time.Millisecond)
			c.Write(tc.frame)
			if tc.name != "LongerThanBuffer" {
				c.Close()
			}
			err := wait(t, eps[0], ops)
			if err == nil {
				t.Fatal("receive succeeded")
			}
			var te *transport.Error
			if !errors.As(err, &te) || te.Peer != 2 {
				t.Fatalf("got %v, want an error naming rank 2", err)
			}
			if tc.name == "LongerThanBuffer" && !errors.Is(err, transport.ErrTruncate) {
				t.Fatalf("got %v, want ErrTruncate", err)
			}
			if !bytes.Equal(guard[8:], make([]byte, 56)) {
				t.Fatal("wrote beyond the receive buffer")
			}
			if tc.log != "" && !log.waitFor(tc.log, 5*time.Second) {
				t.Fatalf("not logged; log:\n%s", log)
			}
			// Rank 1 is undisturbed.
			if err := pairExchange(t, eps, 0, 1, 1000); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestBadOptions(t *testing.T) {
	for _, addr := range []string{"", "0.0.0.0", "::", "localhost"} {
		log := &logBuffer{}
		kvs := bootstrap.Local(2)
		errs := make(chan error, 2)
		for r := range 2 {
			go func() {
				a := "127.0.0.1"
				if r == 1 {
					a = addr
				}
				ep, err := New(kvs[r], Options{Addr: a, Secret: testSecret, Log: log})
				if ep != nil {
					ep.Close()
				}
				errs <- err
			}()
		}
		// Both ranks fail: the one that could not listen, and the other.
		for range 2 {
			select {
			case err := <-errs:
				if err == nil {
					t.Errorf("Addr %q: New succeeded", addr)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("Addr %q: New hangs", addr)
			}
		}
	}
}

// Steady-state ping-pong allocates nothing.
func TestPingPongAllocs(t *testing.T) {
	for _, size := range []int{8, 100000} {
		eps := newJob(t, 2, loopback(io.Discard))
		stop := make(chan struct{})
		echoDone := make(chan error, 1)
		go func() { echoDone <- echo(eps[1], 0, size, stop) }()
		buf, got := pattern(size, 1), make([]byte, size)
		ops := make([]transport.Op, 2)
		ping := func() {
			ops[0] = transport.Op{Peer: 1, Tag: tag(0), Buf: got, Recv: true}
			ops[1] = transport.Op{Peer: 1, Tag: tag(0), Buf: buf}
			if err := eps[0].Start(ops); err != nil {
				t.Fatal(err)
			}
			if err := eps[0].Wait(ops); err != nil {
				t.Fatal(err)
			}
		}
		for range 100 {
			ping()
		}
		allocs := testing.AllocsPerRun(1000, ping)
		close(stop)
		ping()
		if err := <-echoDone; err != nil {
			t.Fatal(err)
		}
		t.Logf("size %d: %.3f allocations per round trip", size, allocs)
		if allocs > 0.05 {
			t.Errorf("size %d: %.3f allocations per round trip, want 0", size, allocs)
		}
	}
}

// echo sends every message it receives from peer back, until stop is
// closed (checked after each message).
func echo(ep transport.Transport, peer, size int, stop chan struct{}) error {
	buf := make([]byte, size)
	ops := make([]transport.Op, 1)
	for {
		ops[0] = transport.Op{Peer: peer, Tag: tag(0), Buf: buf, Recv: true}
		if err := ep.Start(ops); err != nil {
			return err
		}
		if err := ep.Wait(ops); err != nil {
			return err
		}
		ops[0] = transport.Op{Peer: peer, Tag: tag(0), Buf: buf[:ops[0].N]}
		if err := ep.Start(ops); err != nil {
			return err
		}
		if err := ep.Wait(ops); err != nil {
			return err
		}
		select {
		case <-stop:
			return nil
		default:
		}
	}
}
