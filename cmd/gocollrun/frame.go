package main

import (
	"bufio"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"syscall"
)

// The connection between gocollrun and the proxy on each remote host
// carries frames: a kind, the rank the frame is about, and a payload.
// One connection per host carries every rank's PMI traffic, output,
// start and exit, multiplexed by rank.
//
// Handshake: the proxy sends frameHello, its host's index in the rank
// field and proxyMagic as payload; gocollrun answers frameNonce, so a
// connection that is not a proxy's gets no byte back; the proxy answers
// frameAuth, HMAC-SHA256(secret, nonce || index), so the job secret never
// crosses the network; gocollrun answers frameSpec, the JSON proxySpec of
// what to run.
type frameKind uint8

const (
	frameHello       frameKind = iota + 1 // proxy -> gocollrun: index, proxyMagic
	frameNonce                            // gocollrun -> proxy: random bytes
	frameAuth                             // proxy -> gocollrun: index, MAC
	frameSpec                             // gocollrun -> proxy: proxySpec
	frameStarted                          // proxy -> gocollrun: rank's pid, decimal
	frameStartFailed                      // proxy -> gocollrun: 'n' (not found) or 'x', then why
	frameStdout                           // proxy -> gocollrun: whole lines of the rank's stdout
	frameStderr                           // proxy -> gocollrun: same for stderr
	frameExit                             // proxy -> gocollrun: exit code, signal (int32s)
	framePMI                              // both ways: bytes of the rank's PMI connection
	framePMIEnd                           // proxy -> gocollrun: the rank closed its PMI connection
	frameSignal                           // gocollrun -> proxy: signal the rank's process group
)

// proxyMagic opens a proxy's hello; a new version of the protocol
// changes it.
const proxyMagic = "gocollrun-proxy-1"

// maxFrame bounds a payload: PMI lines are under 4 KiB (bulk gets grow
// with the job), output goes a line of at most 64 KiB at a time, the spec
// holds the environment.
const maxFrame = 16 << 20

// frameConn is one end of a proxy connection; send may be called from
// any goroutine, recv from one.
type frameConn struct {
	c   net.Conn
	r   *bufio.Reader
	wmu sync.Mutex
}

func newFrameConn(c net.Conn) *frameConn {
	return &frameConn{c: c, r: bufio.NewReaderSize(c, 64<<10)}
}

// send writes one frame.
func (fc *frameConn) send(kind frameKind, rank uint32, payload []byte) error {
	if len(payload) > maxFrame {
		return fmt.Errorf("frame of %d bytes, more than %d", len(payload), maxFrame)
	}
	buf := make([]byte, 9+len(payload))
	buf[0] = byte(kind)
	binary.BigEndian.PutUint32(buf[1:], rank)
	binary.BigEndian.PutUint32(buf[5:], uint32(len(payload)))
	copy(buf[9:], payload)
	fc.wmu.Lock()
	defer fc.wmu.Unlock()
	_, err := fc.c.Write(buf)
	return err
}

// recv reads one frame.
func (fc *frameConn) recv() (frameKind, uint32, []byte, error) {
	var h [9]byte
	if _, err := io.ReadFull(fc.r, h[:]); err != nil {
		return 0, 0, nil, err
	}
	n := binary.BigEndian.Uint32(h[5:])
	if n > maxFrame {
		return 0, 0, nil, fmt.Errorf("frame of %d bytes, more than %d", n, maxFrame)
	}
	payload := make([]byte, n)
	if _, err := io.ReadFull(fc.r, payload); err != nil {
		return 0, 0, nil, err
	}
	return frameKind(h[0]), binary.BigEndian.Uint32(h[1:]), payload, nil
}

// helloMAC is the proxy's proof that it knows the job secret.
func helloMAC(secret string, nonce []byte, index uint32) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(nonce)
	m.Write([]byte(strconv.FormatUint(uint64(index), 10)))
	return m.Sum(nil)
}

// exitPayload encodes an exitStatus for frameExit.
func exitPayload(s exitStatus) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint32(b, uint32(int32(s.code)))
	binary.BigEndian.PutUint32(b[4:], uint32(int32(s.sig)))
	return b
}

// parseExit decodes frameExit's payload.
func parseExit(b []byte) (exitStatus, error) {
	if len(b) != 8 {
		return exitStatus{}, fmt.Errorf("exit frame of %d bytes, want 8", len(b))
	}
	return exitStatus{
		code: int(int32(binary.BigEndian.Uint32(b))),
		sig:  syscall.Signal(int32(binary.BigEndian.Uint32(b[4:]))),
	}, nil
}

// proxySpec is what gocollrun tells a proxy to run.
type proxySpec struct {
	JobID string   // GOCOLL_JOB_ID
	Host  string   // GOCOLL_HOST of the ranks
	Size  int      // PMI_SIZE
	Ranks []int    // the ranks to start, in order
	Prog  []string // the program and its arguments
	Env   []string // gocollrun's environment, less host-specific variables
	Dir   string   // gocollrun's working directory, used where it exists
	Tag   bool     // --tag-output
	// Hosts is GOCOLL_NUM_HOSTS, the job's number of hosts; Verbose is -v.
	Hosts   int
	Verbose bool
}
