package tcp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gocoll/gocoll/bootstrap"
	"github.com/gocoll/gocoll/transport"
)

// Options configure an endpoint. Every rank of a job should pass the same
// Secret and Timeout.
type Options struct {
	// Addr is the IP address to listen on and to advertise to peers, for
	// example "127.0.0.1" when every rank shares one host. Required; it
	// must be an address peers can reach, not 0.0.0.0 or ::.
	Addr string
	// Secret is the job's secret from the launcher. Connections that
	// cannot prove they know it are refused and logged. Empty: rank 0
	// draws one and shares it through the KVS (see the package doc).
	Secret []byte
	// Timeout fails a peer with transport.ErrTimeout when it has pending
	// ops and moves no byte for this long. 0: no timeout.
	Timeout time.Duration
	// Log receives one line per refused connection or protocol error.
	// nil: os.Stderr.
	Log io.Writer
}

// MaxMessage is the longest message a frame may announce. Payloads are
// read into the posted buffer or into pooled chunks as they arrive, so a
// peer that announces more than it sends costs nothing; the limit only
// turns a corrupt header into an error early.
const MaxMessage = min(1<<40, math.MaxInt)

const (
	keyAddr   = "gocoll-tcp-addr-"
	keySecret = "gocoll-tcp-secret"
	noAddr    = "none"

	// defaultHandshakeTimeout bounds a handshake, and the wait for the
	// peer's dial after ours lost the race, unless Options.Timeout is
	// shorter.
	defaultHandshakeTimeout = 10 * time.Second
)

// Endpoint is one rank's TCP transport. It implements transport.Transport.
type Endpoint struct {
	rank, size       int
	secret           []byte
	timeout          time.Duration
	handshakeTimeout time.Duration

	ln    net.Listener
	addrs []string // each peer's "ip:port"
	peers []*peer  // nil at this rank

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // every goroutine of the endpoint
	closed atomic.Bool

	// doneMu and done publish completions to Wait.
	doneMu sync.Mutex
	done   *sync.Cond

	epoch     time.Time // origin of the progress stamps
	errClosed error

	logMu sync.Mutex
	log   io.Writer

	// abandoned holds the last calls (context<<32 | seq) given up
	// because a rank failed (abandon.go); ctrlPending counts control
	// frames queued and not yet written.
	abandonMu   sync.Mutex
	abandoned   []abandonedCall
	ctrlPending atomic.Int32
}

// New creates this rank's endpoint. It is collective over all ranks of
// kvs: each rank listens on opts.Addr, publishes its address, and waits in
// kvs.Fence for the others. Connections are made later, on first use.
func New(kvs bootstrap.KVS, opts Options) (*Endpoint, error) {
	rank, size := kvs.Rank(), kvs.Size()
	// Set up locally; on failure still publish and fence, so that the
	// other ranks fail in New too instead of waiting in Fence.
	e, setupErr := Listen(rank, size, opts)
	addr := noAddr
	if setupErr == nil {
		addr = e.ListenAddr()
	}
	if err := kvs.Put(keyAddr+strconv.Itoa(rank), addr); err != nil {
		e.closeListener()
		return nil, fmt.Errorf("tcp: publish address: %w", err)
	}
	if len(opts.Secret) == 0 && rank == 0 {
		if err := kvs.Put(keySecret, hex.EncodeToString(NewSecret())); err != nil {
			e.closeListener()
			return nil, fmt.Errorf("tcp: publish secret: %w", err)
		}
	}
	if err := kvs.Fence(); err != nil {
		e.closeListener()
		return nil, fmt.Errorf("tcp: fence: %w", err)
	}
	if setupErr != nil {
		return nil, setupErr
	}
	addrs, secret, err := readPeers(kvs, opts.Secret)
	if err == nil {
		err = e.Connect(addrs, secret)
	}
	if err != nil {
		e.closeListener()
		return nil, err
	}
	return e, nil
}

// Listen is the first half of New for a caller that exchanges addresses
// itself (in one blob per rank with the other transports'): the endpoint
// listens on opts.Addr; ListenAddr is what to publish, and Connect, given
// every rank's, completes it. On error the endpoint is still returned, so
// that its (empty) listener can be closed.
func Listen(rank, size int, opts Options) (*Endpoint, error) {
	e := &Endpoint{
		rank:             rank,
		size:             size,
		timeout:          opts.Timeout,
		handshakeTimeout: defaultHandshakeTimeout,
		log:              opts.Log,
		epoch:            time.Now(),
		errClosed:        &transport.Error{Peer: -1, Err: transport.ErrClosed},
	}
	if e.log == nil {
		e.log = os.Stderr
	}
	if opts.Timeout > 0 && opts.Timeout < e.handshakeTimeout {
		e.handshakeTimeout = opts.Timeout
	}
	e.done = sync.NewCond(&e.doneMu)
	return e, e.listen(opts.Addr)
}

// ListenAddr is the address to publish: "ip:port", or a marker that makes
// the peers' Connect fail where the listener could not be made.
func (e *Endpoint) ListenAddr() string {
	if e.ln == nil {
		return noAddr
	}
	return e.ln.Addr().String()
}

// NewSecret makes a job secret, for rank 0 to publish where the launcher
// gave none.
func NewSecret() []byte {
	s := make([]byte, 32)
	rand.Read(s)
	return s
}

// Connect completes Listen with every rank's published address (this
// rank's own is ignored) and the job's secret. A failure closes the
// listener.
func (e *Endpoint) Connect(addrs []string, secret []byte) error {
	var missing []int
	for r, a := range addrs {
		if r != e.rank && a == noAddr {
			missing = append(missing, r)
		}
	}
	switch {
	case len(addrs) != e.size:
		e.closeListener()
		return fmt.Errorf("tcp: %d addresses for %d ranks", len(addrs), e.size)
	case len(missing) > 0:
		e.closeListener()
		return fmt.Errorf("tcp: ranks %v could not listen", missing)
	case len(secret) == 0:
		e.closeListener()
		return errors.New("tcp: no job secret")
	}
	e.addrs = append([]string(nil), addrs...)
	e.secret = append([]byte(nil), secret...)
	e.ctx, e.cancel = context.WithCancel(context.Background())
	e.peers = make([]*peer, e.size)
	for r := range e.peers {
		if r != e.rank {
			e.peers[r] = &peer{ep: e, rank: r, wake: make(chan struct{}, 1)}
		}
	}
	e.wg.Add(1)
	go e.acceptLoop()
	if e.timeout > 0 {
		e.wg.Add(1)
		go e.watchdog()
	}
	return nil
}

func (e *Endpoint) listen(addr string) error {
	ip := net.ParseIP(addr)
	if ip == nil {
		return fmt.Errorf("tcp: Options.Addr %q is not an IP address", addr)
	}
	if ip.IsUnspecified() {
		return fmt.Errorf("tcp: Options.Addr %q is not an address peers can reach", addr)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(addr, "0"))
	if err != nil {
		return fmt.Errorf("tcp: listen: %w", err)
	}
	e.ln = ln
	return nil
}

func (e *Endpoint) closeListener() {
	if e.ln != nil {
		e.ln.Close()
	}
}

// readPeers reads every peer's address, and the job's secret if the
// launcher gave none.
func readPeers(kvs bootstrap.KVS, secret []byte) (addrs []string, _ []byte, _ error) {
	addrs = make([]string, kvs.Size())
	for r := range addrs {
		if r == kvs.Rank() {
			continue
		}
		v, err := kvs.Get(keyAddr + strconv.Itoa(r))
		if err != nil {
			return nil, nil, fmt.Errorf("tcp: address of rank %d: %w", r, err)
		}
		addrs[r] = v
	}
	if len(secret) > 0 {
		return addrs, secret, nil
	}
	v, err := kvs.Get(keySecret)
	if err != nil {
		return nil, nil, fmt.Errorf("tcp: job secret: %w", err)
	}
	if secret, err = hex.DecodeString(v); err != nil || len(secret) == 0 {
		return nil, nil, fmt.Errorf("tcp: job secret in the KVS is malformed")
	}
	return addrs, secret, nil
}

// Rank returns this endpoint's rank in the job.
func (e *Endpoint) Rank() int { return e.rank }

// Size returns the number of ranks in the job.
func (e *Endpoint) Size() int { return e.size }

// Addr returns the address the endpoint listens on and advertises.
func (e *Endpoint) Addr() net.Addr { return e.ln.Addr() }

// Start begins every op. It never waits for a peer: sends are queued for
// the connection's writer, receives are matched against messages that
// already arrived or posted for the reader.
func (e *Endpoint) Start(ops []transport.Op) error {
	for i := range ops {
		op := &ops[i]
		op.Reset()
		if err := transport.CheckPeer(op, e.rank, e.size); err != nil {
			op.Complete(0, err)
			continue
		}
		p := e.peers[op.Peer]
		if op.Recv {
			p.startRecv(op)
		} else {
			p.startSend(op)
		}
	}
	return nil
}

// Wait blocks until every op has completed and returns the first error.
func (e *Endpoint) Wait(ops []transport.Op) error {
	for i := range ops {
		if ops[i].Done() {
			continue
		}
		e.doneMu.Lock()
		for !ops[i].Done() {
			e.done.Wait()
		}
		e.doneMu.Unlock()
	}
	err := transport.FirstError(ops)
	if err != nil && e.ctrlPending.Load() > 0 {
		e.flushCtrl(200 * time.Millisecond)
	}
	return err
}

// Test reports whether every op has completed: the connections'
// goroutines complete them.
func (e *Endpoint) Test(ops []transport.Op) (bool, error) { return transport.Completed(ops) }

// complete records an op's outcome and wakes Wait.
func (e *Endpoint) complete(op *transport.Op, n int, err error) {
	e.doneMu.Lock()
	op.Complete(n, err)
	e.done.Broadcast()
	e.doneMu.Unlock()
}

// Close fails every pending op with transport.ErrClosed, closes the
// listener and every connection, and waits for the endpoint's goroutines
// to end. Peers see the connection close and fail their ops with this
// rank. Later calls do nothing.
func (e *Endpoint) Close() error {
	if !e.closed.CompareAndSwap(false, true) {
		return nil
	}
	if e.cancel == nil { // Listen without Connect: only the listener
		e.closeListener()
		return nil
	}
	e.cancel()
	err := e.ln.Close()
	for _, p := range e.peers {
		if p != nil {
			p.fail(e.errClosed)
		}
	}
	e.wg.Wait()
	for _, p := range e.peers {
		if p != nil {
			p.dropUnexpected()
		}
	}
	return err
}

func (e *Endpoint) acceptLoop() {
	defer e.wg.Done()
	for {
		c, err := e.ln.Accept()
		if err != nil {
			if e.closed.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			e.logf("accept: %v", err)
			time.Sleep(10 * time.Millisecond) // out of file descriptors, say
			continue
		}
		e.wg.Add(1)
		go e.serve(c)
	}
}

// watchdog fails peers that have pending ops and have moved no byte for
// Options.Timeout. A peer's stall is counted from its last progress or
// from the first tick at which it had ops pending, whichever is later, so
// that it is never overestimated: a timeout comes at most a tick (an
// eighth of Options.Timeout) late, never early.
func (e *Endpoint) watchdog() {
	defer e.wg.Done()
	tick := time.NewTicker(max(e.timeout/8, time.Millisecond))
	defer tick.Stop()
	busySince := make([]int64, e.size) // 0: nothing pending at the last tick
	limit := int64(e.timeout)
	var lastStatus int64
	for {
		select {
		case <-e.ctx.Done():
			return
		case <-tick.C:
		}
		now := e.now()
		waitingFor, longest := -1, int64(0)
		for r, p := range e.peers {
			if p == nil {
				continue
			}
			if p.active.Load() == 0 {
				busySince[r] = 0
				continue
			}
			if busySince[r] == 0 {
				busySince[r] = now
			}
			stall := now - max(p.progress.Load(), busySince[r])
			if stall > longest {
				waitingFor, longest = r, stall
			}
			if stall < limit {
				continue
			}
			// A peer that says it waits for another rank is alive: the
			// rank it waits for is the suspect, whose own waiter will
			// blame it for everyone; give up on this one by itself only
			// after twice the timeout. One that waits for this rank
			// while this rank waits for it is a deadlock.
			if st := now - p.statusAt.Load(); p.statusAt.Load() > 0 && st < limit/2 {
				switch w := int(p.statusFor.Load()) - 1; {
				case w == e.rank:
					// Both are alive: keep the connection, so that the
					// peer finds the deadlock itself, and later calls work.
					p.failPending(&transport.Error{Peer: r, Err: fmt.Errorf("%w: rank %d waits for this rank while this rank waits for it: a deadlock (mismatched collective calls? GOCOLL_CHECK=1 finds them)", transport.ErrTimeout, r)})
				case w >= 0 && stall < 2*limit:
				case w >= 0:
					p.fail(&transport.Error{Peer: r, Err: fmt.Errorf("%w: no progress for %v; it has itself been waiting for rank %d", transport.ErrTimeout, time.Duration(stall).Round(time.Millisecond), w)})
				default:
					p.fail(&transport.Error{Peer: r, Err: fmt.Errorf("%w: no progress for %v", transport.ErrTimeout, e.timeout)})
				}
				continue
			}
			p.fail(&transport.Error{Peer: r, Err: fmt.Errorf("%w: no progress for %v", transport.ErrTimeout, e.timeout)})
		}
		// Waiting for a while: say for whom, every quarter timeout.
		if longest >= limit/4 && now-lastStatus >= limit/4 {
			lastStatus = now
			e.sendStatus(waitingFor)
		}
	}
}

// now is a monotonic time stamp for progress.
func (e *Endpoint) now() int64 { return int64(time.Since(e.epoch)) }

func (e *Endpoint) logf(format string, args ...any) {
	e.logMu.Lock()
	defer e.logMu.Unlock()
	fmt.Fprintf(e.log, "gocoll/tcp: rank %d: %s\n", e.rank, fmt.Sprintf(format, args...))
}

// peerFailed wraps ErrPeerFailed with its cause.
func peerFailed(rank int, format string, args ...any) error {
	return &transport.Error{Peer: rank, Err: fmt.Errorf("%w: %s", transport.ErrPeerFailed, fmt.Sprintf(format, args...))}
}
