package tcp

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"
)

// The handshake; see the package doc for the exchange.
const (
	magic        = "gocollT1"
	version      = 2 // 2: status and abandon frames
	nonceLen     = 32
	macLen       = sha256.Size
	helloLen     = len(magic) + 4 + 4 + 4 + nonceLen      // dialer's hello
	challengeLen = len(magic) + 4 + 4 + nonceLen + macLen // acceptor's answer
	labelAccept  = "gocoll-tcp accept"
	labelDial    = "gocoll-tcp dial"
)

// Verdicts, the acceptor's last word.
const (
	verdictAccept uint32 = 1 + iota
	verdictLost          // both dialed; the acceptor's own dial wins
	verdictRefused
)

// errAuth marks handshake failures that are logged: the other side is not
// a rank of this job, or does not know its secret.
var errAuth = errors.New("authentication failed")

func mac(secret []byte, label string, dialer, acceptor uint32, n1, n2 []byte) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(label))
	var b [8]byte
	binary.LittleEndian.PutUint32(b[:4], dialer)
	binary.LittleEndian.PutUint32(b[4:], acceptor)
	h.Write(b[:])
	h.Write(n1)
	h.Write(n2)
	return h.Sum(nil)
}

func nonce() []byte {
	b := make([]byte, nonceLen)
	rand.Read(b)
	return b
}

// dialHandshake runs the dialer's side with the acceptor 'to' and returns
// its verdict. Errors wrapping errAuth mean the acceptor failed to prove
// the secret.
func dialHandshake(c net.Conn, br *bufio.Reader, secret []byte, from, to int) (uint32, error) {
	nD := nonce()
	hello := make([]byte, 0, helloLen)
	hello = append(hello, magic...)
	hello = binary.LittleEndian.AppendUint32(hello, version)
	hello = binary.LittleEndian.AppendUint32(hello, uint32(from))
	hello = binary.LittleEndian.AppendUint32(hello, uint32(to))
	hello = append(hello, nD...)
	if _, err := c.Write(hello); err != nil {
		return 0, err
	}
	ch := make([]byte, challengeLen)
	if _, err := io.ReadFull(br, ch); err != nil {
		return 0, err
	}
	if string(ch[:len(magic)]) != magic {
		return 0, fmt.Errorf("%w: not a gocoll tcp endpoint", errAuth)
	}
	b := ch[len(magic):]
	if v := binary.LittleEndian.Uint32(b); v != version {
		return 0, fmt.Errorf("%w: protocol version %d, want %d", errAuth, v, version)
	}
	if r := binary.LittleEndian.Uint32(b[4:]); r != uint32(to) {
		return 0, fmt.Errorf("%w: endpoint says it is rank %d", errAuth, r)
	}
	nA, macA := b[8:8+nonceLen], b[8+nonceLen:]
	if !hmac.Equal(macA, mac(secret, labelAccept, uint32(from), uint32(to), nD, nA)) {
		return 0, fmt.Errorf("%w: wrong MAC (different secret?)", errAuth)
	}
	if _, err := c.Write(mac(secret, labelDial, uint32(from), uint32(to), nA, nD)); err != nil {
		return 0, err
	}
	var v [4]byte
	if _, err := io.ReadFull(br, v[:]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return 0, fmt.Errorf("closed before its verdict (it refused our MAC?): %w", err)
		}
		return 0, err
	}
	return binary.LittleEndian.Uint32(v[:]), nil
}

// acceptHandshake runs the acceptor's side up to the verdict and returns
// the dialer's rank.
func acceptHandshake(c net.Conn, br *bufio.Reader, secret []byte, me, size int) (int, error) {
	hello := make([]byte, helloLen)
	if _, err := io.ReadFull(br, hello); err != nil {
		return -1, err
	}
	if string(hello[:len(magic)]) != magic {
		return -1, fmt.Errorf("%w: not a gocoll tcp hello", errAuth)
	}
	b := hello[len(magic):]
	if v := binary.LittleEndian.Uint32(b); v != version {
		return -1, fmt.Errorf("%w: protocol version %d, want %d", errAuth, v, version)
	}
	from, to := binary.LittleEndian.Uint32(b[4:]), binary.LittleEndian.Uint32(b[8:])
	if to != uint32(me) {
		return -1, fmt.Errorf("%w: dialer wants rank %d", errAuth, to)
	}
	if from >= uint32(size) || from == uint32(me) {
		return -1, fmt.Errorf("%w: dialer claims rank %d of %d", errAuth, from, size)
	}
	nD := b[12:]
	nA := nonce()
	ch := make([]byte, 0, challengeLen)
	ch = append(ch, magic...)
	ch = binary.LittleEndian.AppendUint32(ch, version)
	ch = binary.LittleEndian.AppendUint32(ch, uint32(me))
	ch = append(ch, nA...)
	ch = append(ch, mac(secret, labelAccept, from, uint32(me), nD, nA)...)
	if _, err := c.Write(ch); err != nil {
		return -1, err
	}
	macD := make([]byte, macLen)
	if _, err := io.ReadFull(br, macD); err != nil {
		return -1, err
	}
	if !hmac.Equal(macD, mac(secret, labelDial, from, uint32(me), nA, nD)) {
		return -1, fmt.Errorf("%w: dialer claiming rank %d sent a wrong MAC (wrong secret?)", errAuth, from)
	}
	return int(from), nil
}

func writeVerdict(c net.Conn, v uint32) error {
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], v)
	_, err := c.Write(b[:])
	return err
}

// serve runs the acceptor's handshake on an incoming connection and, if
// the dialer proves itself and wins, makes it the peer's connection.
func (e *Endpoint) serve(c net.Conn) {
	defer e.wg.Done()
	stop := context.AfterFunc(e.ctx, func() { c.Close() })
	c.SetDeadline(time.Now().Add(e.handshakeTimeout))
	br := bufio.NewReaderSize(c, readBufSize)
	from, err := acceptHandshake(c, br, e.secret, e.rank, e.size)
	if !stop() {
		c.Close() // closing
		return
	}
	if err != nil {
		// A dialer that hangs up before proving anything (a rank whose
		// endpoint closed at the end of the job while its dial was on the
		// way) is not refused: there is nothing to say about it.
		if !hungUp(err) {
			e.logf("refused connection from %v: %v", c.RemoteAddr(), err)
		}
		c.Close()
		return
	}
	p := e.peers[from]
	p.mu.Lock()
	defer p.mu.Unlock()
	verdict := verdictAccept
	switch {
	case e.closed.Load() || p.state == stateFailed:
		verdict = verdictRefused
	case p.state == stateConnected && p.dialedByUs && e.rank < from:
		// The peer started this dial before it accepted ours, which
		// won: a late loser, not an intruder.
		verdict = verdictLost
	case p.state == stateConnected:
		verdict = verdictRefused
		e.logf("refused second connection from rank %d (%v): already connected", from, c.RemoteAddr())
	case p.state == stateDialing && e.rank < from:
		verdict = verdictLost
	}
	// The verdict goes out before any frame, so it is written under the
	// lock, before the writer starts.
	if err := writeVerdict(c, verdict); err != nil || verdict != verdictAccept {
		c.Close()
		return
	}
	c.SetDeadline(time.Time{})
	p.attachLocked(c, br, false)
}

// dial connects to the peer and runs the dialer's handshake.
func (p *peer) dial() {
	e := p.ep
	defer e.wg.Done()
	d := net.Dialer{Timeout: e.handshakeTimeout}
	c, err := d.DialContext(e.ctx, "tcp", e.addrs[p.rank])
	if err != nil {
		p.fail(peerFailed(p.rank, "connect to %s: %v", e.addrs[p.rank], err))
		return
	}
	stop := context.AfterFunc(e.ctx, func() { c.Close() })
	c.SetDeadline(time.Now().Add(e.handshakeTimeout))
	br := bufio.NewReaderSize(c, readBufSize)
	verdict, err := dialHandshake(c, br, e.secret, e.rank, p.rank)
	if !stop() {
		c.Close()
		return
	}
	if err != nil {
		c.Close()
		if errors.Is(err, errAuth) {
			e.logf("rank %d at %s: %v", p.rank, e.addrs[p.rank], err)
		}
		p.fail(peerFailed(p.rank, "handshake with %s: %v", e.addrs[p.rank], err))
		return
	}
	switch verdict {
	case verdictAccept:
		c.SetDeadline(time.Time{})
		p.mu.Lock()
		if p.state == stateDialing {
			p.attachLocked(c, br, true)
		} else {
			c.Close() // failed or closed meanwhile
		}
		p.mu.Unlock()
	case verdictLost:
		c.Close()
		p.mu.Lock()
		if p.state == stateDialing {
			p.state = stateAwaiting
			time.AfterFunc(e.handshakeTimeout, p.awaitExpired)
		}
		p.mu.Unlock()
	default:
		c.Close()
		p.mu.Lock()
		connected := p.state == stateConnected
		p.mu.Unlock()
		if !connected {
			p.fail(peerFailed(p.rank, "%s refused the connection", e.addrs[p.rank]))
		}
	}
}

// awaitExpired fails the peer if its dial, which won the race against
// ours, never arrived.
func (p *peer) awaitExpired() {
	p.mu.Lock()
	waiting := p.state == stateAwaiting
	p.mu.Unlock()
	if waiting {
		p.fail(peerFailed(p.rank, "its connection did not arrive after winning the race against ours"))
	}
}

// hungUp reports whether a handshake failed because the other side closed
// the connection, not because of anything it sent.
func hungUp(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
}
