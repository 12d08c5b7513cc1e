package bootstrap

// Tree allgather: every rank's blob to every rank over TCP, with O(1)
// requests per rank to the launcher's key-value space.
//
// What it does: on the first call, rank 0 puts one value (its listen
// address and a random secret), every rank fences once and every other
// rank gets that one value. Then each rank sends its blob and its own
// listen address to rank 0 (the gather), and rank 0 sends the table of
// all blobs and addresses down a binomial tree (the broadcast); every
// rank forwards the table to its children before it returns. Later calls
// reuse the addresses: no launcher traffic at all.
//
// When it wins: launchers whose key-value space has only put, fence and
// get (hydra's PMI-1, Slurm's PMI-2), where KVSAllgather costs every rank
// p-1 gets, p(p-1) in all at the launcher's daemons. It needs a TCP
// address every rank can reach (TreeOptions.Addr).
//
// Cost for p ranks and blobs of n bytes, with a TCP message costing
// alpha + beta*bytes: 1 put, 1 fence, 1 get (first call only); the gather
// is p-1 messages of n bytes into rank 0, alpha + (p-1)*n*beta there; the
// broadcast is ceil(log2 p) rounds of the whole table, p*(n+~25) bytes,
// each rank sending to its children concurrently. Memory: the table, on
// every rank.
//
// The broadcast for p = 7 (rank 0 sends to 4, 2, 1; 4 to 6 and 5; 2 to 3):
//
//	round 1: 0->4
//	round 2: 0->2  4->6
//	round 3: 0->1  2->3  4->5
//
// (the rounds overlap in time: each sender starts its children at once).
//
// Every message is a frame, authenticated with HMAC-SHA256 under rank 0's
// secret (which travels only through the key-value space), tagged with
// its call's generation so that a late message of call k is never taken
// for call k+1:
//
//	"gcT1" | kind (1 byte) | generation (4) | from rank (4) | body length (8) | body | HMAC (32)
//
// The receiver answers one byte: treeAck, or treeNack for a frame it
// refused (bad HMAC, wrong generation, bad layout).

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// TreeOptions configures a Tree.
type TreeOptions struct {
	// Addr is the address this rank listens on, one every other rank can
	// reach: 127.0.0.1 where every rank shares a host, else the address
	// that routes off this host.
	Addr string
	// Timeout bounds every wait over TCP (DefaultTreeTimeout where zero).
	// The launcher's fence has no timeout of ours: a rank that never
	// arrives there is the launcher's to notice.
	Timeout time.Duration
}

// TreeUser is a Launcher whose Allgather can run over a Tree (the PMI-1
// and PMI-2 clients, where the server has no bulk get and the job is big
// enough for the tree to win). Every rank calls UseTree alike before its
// first Allgather, and EndTree after its last exchange over the tree:
// Allgathers after it go through the KVS again.
type TreeUser interface {
	UseTree(opts TreeOptions)
	EndTree() error
}

// DefaultTreeTimeout is TreeOptions.Timeout's default.
const DefaultTreeTimeout = 300 * time.Second

// Tree is one rank's side of the tree allgather over a KVS. Its Allgather
// calls must be made by every rank in the same order, one at a time.
// Close releases its listener.
type Tree struct {
	kvs        KVS
	opts       TreeOptions
	rank, size int

	call   sync.Mutex // one Allgather at a time
	gen    int        // calls so far
	broken error      // the first call's failure to set up, for every later call
	secret []byte
	addrs  []string // every rank's listen address, known from the first table on
	ln     net.Listener
	in     inbox

	mu     sync.Mutex // conns, closed
	conns  map[net.Conn]bool
	closed bool
	wg     sync.WaitGroup // the accept loop and its connections
}

// NewTree returns this rank's Tree over kvs. Nothing happens until the
// first Allgather.
func NewTree(kvs KVS, opts TreeOptions) *Tree {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTreeTimeout
	}
	return &Tree{kvs: kvs, opts: opts, rank: kvs.Rank(), size: kvs.Size(),
		conns: map[net.Conn]bool{}, in: inbox{wake: make(chan struct{}, 1)}}
}

// treeKey is rank 0's one value in the KVS: "1,<secret>,<address>".
const treeKey = "gocoll-tree"

// Frame kinds.
const (
	kindGather = 1 // a rank's listen address and blob, to rank 0
	kindTable  = 2 // every rank's address and blob, down the tree
	kindFail   = 3 // an error text: a rank that cannot take part, or rank 0 giving up
)

// Answers to a frame.
const (
	treeAck  = 'k'
	treeNack = 'x'
)

const (
	frameHeader = 4 + 1 + 4 + 4 + 8
	macLen      = sha256.Size
	// maxBody bounds a frame's body: a table of 4096 ranks' blobs of
	// 256 KiB. The body is read as it arrives, so a lying length costs
	// no memory.
	maxBody = 1 << 30
)

// Allgather returns every rank's blob, in rank order, this rank's own
// included (a copy). The first call makes one request to the KVS on
// rank 0 (a put) and two on the others (a fence and a get) besides the
// fence every rank makes; later calls make none. Errors name the step and
// the rank; no wait over TCP outlasts TreeOptions.Timeout (a rank other
// than 0 waits for the table an eighth longer, so that rank 0's report of
// a missing rank reaches it first).
func (t *Tree) Allgather(mine []byte) ([][]byte, error) {
	t.call.Lock()
	defer t.call.Unlock()
	gen := t.gen
	t.gen++
	if t.size == 1 {
		return [][]byte{append([]byte(nil), mine...)}, nil
	}
	if t.broken != nil {
		return nil, t.broken
	}
	if gen == 0 {
		if err := t.join(); err != nil {
			// The others may be set up: a later call would wait for them.
			t.broken = fmt.Errorf("bootstrap: tree allgather: rank %d: %w", t.rank, err)
			return nil, t.broken
		}
	}
	if t.isClosed() {
		return nil, errors.New("bootstrap: tree allgather: the tree is closed")
	}
	if t.rank == 0 {
		return t.root(gen, mine)
	}
	return t.leaf(gen, mine)
}

// join listens, and exchanges rank 0's address and secret through the
// KVS. A rank that cannot listen still takes part in the fence, so that
// the others do not wait there for it, and tells rank 0 why it fails.
func (t *Tree) join() (err error) {
	ln, lerr := t.listen()
	defer func() {
		if err != nil && ln != nil {
			ln.Close()
		}
	}()
	if t.rank == 0 {
		var v string
		if lerr != nil {
			v = "0," + strings.Map(printable, lerr.Error())
		} else {
			t.secret = make([]byte, 32)
			if _, err := rand.Read(t.secret); err != nil {
				return fmt.Errorf("making the secret: %w", err)
			}
			v = "1," + base64.RawURLEncoding.EncodeToString(t.secret) + "," + ln.Addr().String()
		}
		if err := t.kvs.Put(treeKey, v); err != nil {
			return fmt.Errorf("putting rank 0's address: %w", err)
		}
	}
	if err := t.kvs.Fence(); err != nil {
		return err
	}
	t.addrs = make([]string, t.size)
	if t.rank == 0 {
		if lerr != nil {
			return lerr
		}
		t.addrs[0] = ln.Addr().String()
	} else {
		v, err := t.kvs.Get(treeKey)
		if err != nil {
			return fmt.Errorf("getting rank 0's address: %w", err)
		}
		parts := strings.SplitN(v, ",", 3)
		if len(parts) == 2 && parts[0] == "0" {
			return fmt.Errorf("rank 0 cannot listen: %s", parts[1])
		}
		if len(parts) != 3 || parts[0] != "1" {
			return fmt.Errorf("rank 0's value %q is not a tree address", v)
		}
		if t.secret, err = base64.RawURLEncoding.DecodeString(parts[1]); err != nil || len(t.secret) == 0 {
			return fmt.Errorf("rank 0's value %q has no secret", v)
		}
		t.addrs[0] = parts[2]
		if lerr != nil {
			// Rank 0 would wait for this rank's blob until its timeout.
			t.send(0, t.frame(kindFail, 0, []byte(lerr.Error())), "its failure")
			return lerr
		}
		t.addrs[t.rank] = ln.Addr().String()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		ln.Close()
		return errors.New("the tree is closed")
	}
	t.ln = ln
	t.wg.Add(1)
	go t.accept(ln)
	return nil
}

func (t *Tree) listen() (net.Listener, error) {
	if ip := net.ParseIP(t.opts.Addr); t.opts.Addr == "" || ip != nil && ip.IsUnspecified() {
		return nil, fmt.Errorf("TreeOptions.Addr %q: want an address the other ranks can reach", t.opts.Addr)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(t.opts.Addr, "0"))
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", t.opts.Addr, err)
	}
	return ln, nil
}

// printable keeps a text fit for a KVS value.
func printable(r rune) rune {
	if r <= ' ' || r >= 0x7f || r == ';' || r == '=' || r == '\\' {
		return '_'
	}
	return r
}

// root is rank 0's call: gather every blob, then send the table down.
func (t *Tree) root(gen int, mine []byte) ([][]byte, error) {
	blobs := make([][]byte, t.size)
	have := make([]bool, t.size)
	blobs[0], have[0] = append([]byte(nil), mine...), true
	missing := t.size - 1
	var failed []string
	deadline := time.Now().Add(t.opts.Timeout)
	for missing > 0 {
		f, err := t.in.next(gen, deadline)
		if err != nil {
			var absent []int
			for r, ok := range have {
				if !ok {
					absent = append(absent, r)
				}
			}
			err = fmt.Errorf("bootstrap: tree allgather (call %d): rank 0 waited %v for the blobs of %d of %d ranks; none from rank%s%s",
				gen, t.opts.Timeout, missing, t.size, rankList(absent), t.in.rejections())
			if len(failed) > 0 {
				err = fmt.Errorf("%w; %s", err, strings.Join(failed, "; "))
			}
			return nil, t.fail(gen, err)
		}
		switch f.kind {
		case kindFail:
			// Wait for the others all the same, to learn their addresses
			// and tell them.
			if f.from != 0 && !have[f.from] {
				have[f.from] = true
				missing--
				failed = append(failed, fmt.Sprintf("rank %d cannot take part: %s", f.from, f.body))
			}
		case kindGather:
			addr, blob, err := parseGather(f.body)
			if err != nil {
				t.in.reject(fmt.Errorf("rank %d's blob: %w", f.from, err))
				continue
			}
			if f.from == 0 || have[f.from] {
				t.in.reject(fmt.Errorf("a second blob from rank %d in call %d", f.from, gen))
				continue
			}
			blobs[f.from], have[f.from] = blob, true
			t.addrs[f.from] = addr
			missing--
		default:
			t.in.reject(fmt.Errorf("rank %d sent rank 0 a frame of kind %d", f.from, f.kind))
		}
	}
	if len(failed) > 0 {
		return nil, t.fail(gen, fmt.Errorf("bootstrap: tree allgather (call %d): %s", gen, strings.Join(failed, "; ")))
	}
	table := t.frame(kindTable, gen, encodeTable(t.addrs, blobs))
	return blobs, t.forward(gen, table)
}

// leaf is the call of a rank other than 0: send the blob to rank 0, wait
// for the table from the parent, forward it to the children.
func (t *Tree) leaf(gen int, mine []byte) ([][]byte, error) {
	body := binary.BigEndian.AppendUint16(nil, uint16(len(t.addrs[t.rank])))
	body = append(append(body, t.addrs[t.rank]...), mine...)
	if err := t.send(0, t.frame(kindGather, gen, body), "its blob"); err != nil {
		return nil, fmt.Errorf("bootstrap: tree allgather (call %d): %w", gen, err)
	}
	parent, _ := binomial(t.rank, t.size)
	for {
		f, err := t.in.next(gen, time.Now().Add(t.opts.Timeout+t.opts.Timeout/8))
		if err != nil {
			return nil, fmt.Errorf("bootstrap: tree allgather (call %d): rank %d waited %v for the table from rank %d%s",
				gen, t.rank, t.opts.Timeout+t.opts.Timeout/8, parent, t.in.rejections())
		}
		switch f.kind {
		case kindFail:
			return nil, fmt.Errorf("bootstrap: rank 0 gave up: %s", f.body)
		case kindTable:
			addrs, blobs, err := parseTable(f.body, t.size)
			if err != nil {
				return nil, fmt.Errorf("bootstrap: tree allgather (call %d): rank %d: the table: %w", gen, t.rank, err)
			}
			t.addrs = addrs
			return blobs, t.forward(gen, f.raw)
		default:
			t.in.reject(fmt.Errorf("rank %d sent rank %d a frame of kind %d", f.from, t.rank, f.kind))
		}
	}
}

// forward sends the table frame to this rank's children, all at once.
func (t *Tree) forward(gen int, table []byte) error {
	_, children := binomial(t.rank, t.size)
	errs := make([]error, len(children))
	var wg sync.WaitGroup
	for i, c := range children {
		wg.Go(func() { errs[i] = t.send(c, table, "the table") })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("bootstrap: tree allgather (call %d): %w", gen, err)
	}
	return nil
}

// fail sends rank 0's error to every rank whose address it knows (their
// children in the tree may not know theirs yet), best effort, and
// returns it.
func (t *Tree) fail(gen int, err error) error {
	f := t.frame(kindFail, gen, []byte(err.Error()))
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	for r := 1; r < t.size; r++ {
		if t.addrs[r] == "" {
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			t.send(r, f, "the failure")
		})
	}
	wg.Wait()
	return err
}

// send dials rank to and sends it one frame, and waits for its answer.
func (t *Tree) send(to int, frame []byte, what string) error {
	addr := t.addrs[to]
	deadline := time.Now().Add(t.opts.Timeout)
	c, err := dial(addr, deadline)
	if err != nil {
		return fmt.Errorf("rank %d cannot send %s to rank %d at %s: %w", t.rank, what, to, addr, err)
	}
	defer c.Close()
	c.SetDeadline(deadline)
	if _, err := c.Write(frame); err != nil {
		return fmt.Errorf("rank %d sending %s to rank %d at %s: %w", t.rank, what, to, addr, err)
	}
	var answer [1]byte
	if _, err := io.ReadFull(c, answer[:]); err != nil {
		return fmt.Errorf("rank %d sent %s to rank %d at %s, which did not answer: %w", t.rank, what, to, addr, err)
	}
	if answer[0] != treeAck {
		return fmt.Errorf("rank %d sent %s to rank %d at %s, which refused it (another job's secret?)", t.rank, what, to, addr)
	}
	// The receiver closes first, so that the closed connection waits out
	// TIME_WAIT on its listening port rather than holding this side's
	// ephemeral port: p ranks on one host make 2p connections a call.
	io.Copy(io.Discard, c)
	return nil
}

// dial connects to addr, retrying while this host is out of ephemeral
// ports (EADDRNOTAVAIL), until deadline.
func dial(addr string, deadline time.Time) (net.Conn, error) {
	pause := time.Millisecond
	for {
		c, err := net.DialTimeout("tcp", addr, time.Until(deadline))
		if err == nil || !errors.Is(err, syscall.EADDRNOTAVAIL) || time.Now().Add(pause).After(deadline) {
			return c, err
		}
		time.Sleep(pause)
		pause = min(2*pause, time.Second)
	}
}

// frame builds one authenticated frame.
func (t *Tree) frame(kind byte, gen int, body []byte) []byte {
	b := make([]byte, 0, frameHeader+len(body)+macLen)
	b = append(b, "gcT1"...)
	b = append(b, kind)
	b = binary.BigEndian.AppendUint32(b, uint32(gen))
	b = binary.BigEndian.AppendUint32(b, uint32(t.rank))
	b = binary.BigEndian.AppendUint64(b, uint64(len(body)))
	b = append(b, body...)
	h := hmac.New(sha256.New, t.secret)
	h.Write(b)
	return h.Sum(b)
}

// frame is a frame received and authenticated.
type frame struct {
	kind      byte
	gen, from int
	body      []byte
	raw       []byte // the whole frame, as a table is forwarded
}

// readFrame reads and authenticates one frame.
func readFrame(r io.Reader, secret []byte, size int) (frame, error) {
	var buf bytes.Buffer
	if _, err := io.CopyN(&buf, r, frameHeader); err != nil {
		return frame{}, fmt.Errorf("short header: %w", err)
	}
	h := buf.Bytes()
	if string(h[:4]) != "gcT1" {
		return frame{}, fmt.Errorf("not a tree frame (it starts %q)", h[:4])
	}
	f := frame{kind: h[4], gen: int(binary.BigEndian.Uint32(h[5:])), from: int(binary.BigEndian.Uint32(h[9:]))}
	n := binary.BigEndian.Uint64(h[13:])
	if n > maxBody {
		return frame{}, fmt.Errorf("a body of %d bytes, more than %d", n, maxBody)
	}
	// Room for all of a body up to 4 MiB at once (the table of 4096
	// ranks' cards is 600 KB); a bigger one grows as it arrives.
	buf.Grow(int(min(n, 4<<20)) + macLen)
	if got, err := io.CopyN(&buf, r, int64(n)+macLen); err != nil {
		return frame{}, fmt.Errorf("short frame: %d of %d bytes: %w", got, int64(n)+macLen, err)
	}
	f.raw = buf.Bytes()
	end := frameHeader + int(n)
	m := hmac.New(sha256.New, secret)
	m.Write(f.raw[:end])
	if !hmac.Equal(m.Sum(nil), f.raw[end:]) {
		return frame{}, errors.New("bad HMAC (not from a rank of this job)")
	}
	if f.from >= size {
		return frame{}, fmt.Errorf("from rank %d of %d", f.from, size)
	}
	f.body = f.raw[frameHeader:end]
	return f, nil
}

// accept serves the listener until Close: every connection brings one
// frame, read with a deadline, and takes one byte of answer.
func (t *Tree) accept(ln net.Listener) {
	defer t.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		t.mu.Lock()
		if t.closed {
			t.mu.Unlock()
			c.Close()
			return
		}
		t.conns[c] = true
		t.wg.Add(1)
		t.mu.Unlock()
		go t.serve(c)
	}
}

func (t *Tree) serve(c net.Conn) {
	defer t.wg.Done()
	defer func() {
		t.mu.Lock()
		delete(t.conns, c)
		t.mu.Unlock()
		c.Close()
	}()
	c.SetDeadline(time.Now().Add(t.opts.Timeout))
	f, err := readFrame(bufio.NewReader(c), t.secret, t.size)
	if err != nil {
		// The note goes first: a sender that sees the refusal finds it
		// noted.
		t.in.reject(fmt.Errorf("a connection from %s: %w", c.RemoteAddr(), err))
		c.Write([]byte{treeNack})
		return
	}
	// The answer goes first: once the frame is taken, this rank's
	// Allgather may return and Close this connection.
	c.Write([]byte{treeAck})
	t.in.put(f)
}

func (t *Tree) isClosed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.closed
}

// Close releases the listener and ends the connections being read. An
// Allgather after it fails.
func (t *Tree) Close() error {
	t.mu.Lock()
	t.closed = true
	var err error
	if t.ln != nil {
		err = t.ln.Close()
	}
	for c := range t.conns {
		c.Close()
	}
	t.mu.Unlock()
	t.wg.Wait()
	return err
}

// binomial is rank's place in the binomial tree over size ranks rooted at
// 0: its parent (-1 for 0) and its children, the largest subtree first.
// Rank r's parent is r without its highest set bit; its children are
// r+2^k for every 2^k above r's highest bit (all 2^k for r = 0), below
// size.
func binomial(rank, size int) (parent int, children []int) {
	parent = -1
	mask := 1
	for ; mask < size; mask <<= 1 {
		if rank&mask != 0 {
			parent = rank - mask
			break
		}
	}
	for mask >>= 1; mask > 0; mask >>= 1 {
		if rank+mask < size {
			children = append(children, rank+mask)
		}
	}
	return parent, children
}

// parseGather splits a gather body: address length (2 bytes), address,
// blob.
func parseGather(body []byte) (addr string, blob []byte, err error) {
	if len(body) < 2 || len(body) < 2+int(binary.BigEndian.Uint16(body)) {
		return "", nil, errors.New("truncated address")
	}
	n := 2 + int(binary.BigEndian.Uint16(body))
	return string(body[2:n]), body[n:], nil
}

// encodeTable lays out the table: for every rank, address length (2
// bytes), address, blob length (4 bytes), blob.
func encodeTable(addrs []string, blobs [][]byte) []byte {
	n := 0
	for r := range blobs {
		n += 6 + len(addrs[r]) + len(blobs[r])
	}
	b := make([]byte, 0, n)
	for r := range blobs {
		b = binary.BigEndian.AppendUint16(b, uint16(len(addrs[r])))
		b = append(b, addrs[r]...)
		b = binary.BigEndian.AppendUint32(b, uint32(len(blobs[r])))
		b = append(b, blobs[r]...)
	}
	return b
}

// parseTable is encodeTable's inverse; the blobs share body's memory.
func parseTable(body []byte, size int) (addrs []string, blobs [][]byte, err error) {
	addrs, blobs = make([]string, size), make([][]byte, size)
	for r := range size {
		if len(body) < 2 || len(body) < 6+int(binary.BigEndian.Uint16(body)) {
			return nil, nil, fmt.Errorf("truncated at rank %d", r)
		}
		a := int(binary.BigEndian.Uint16(body))
		addrs[r] = string(body[2 : 2+a])
		n := int(binary.BigEndian.Uint32(body[2+a:]))
		body = body[6+a:]
		if len(body) < n {
			return nil, nil, fmt.Errorf("truncated in rank %d's blob", r)
		}
		blobs[r], body = body[:n:n], body[n:]
	}
	if len(body) != 0 {
		return nil, nil, fmt.Errorf("%d bytes after the last rank", len(body))
	}
	return addrs, blobs, nil
}

// rankList writes ranks as " 3" or "s 3, 5, 8", the first ten only.
func rankList(ranks []int) string {
	var sb strings.Builder
	if len(ranks) > 1 {
		sb.WriteString("s")
	}
	for i, r := range ranks {
		if i == 10 {
			fmt.Fprintf(&sb, " and %d more", len(ranks)-10)
			break
		}
		if i > 0 {
			sb.WriteString(",")
		}
		sb.WriteString(" " + strconv.Itoa(r))
	}
	return sb.String()
}

// inbox holds the frames received and not yet taken, and notes on the
// ones refused, for the error of a wait that times out.
type inbox struct {
	mu       sync.Mutex
	frames   []frame
	refused  []string
	nRefused int
	wake     chan struct{} // one token: something was put
}

func (b *inbox) put(f frame) {
	b.mu.Lock()
	b.frames = append(b.frames, f)
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// reject notes a refused frame; the last few are kept.
func (b *inbox) reject(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.nRefused++
	if len(b.refused) == 3 {
		b.refused = b.refused[1:]
	}
	b.refused = append(b.refused, err.Error())
}

// rejections says what was refused, for an error message.
func (b *inbox) rejections() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.nRefused == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d frames refused, the last: %s)", b.nRefused, strings.Join(b.refused, "; "))
}

// next takes the first frame of generation gen, waiting until deadline.
// Frames of earlier generations are dropped (noted as refused); later
// ones are kept for their call.
func (b *inbox) next(gen int, deadline time.Time) (frame, error) {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for {
		b.mu.Lock()
		keep := b.frames[:0]
		var got *frame
		for _, f := range b.frames {
			switch {
			case got == nil && f.gen == gen:
				g := f
				got = &g
			case f.gen < gen:
				b.nRefused++
				b.refused = append(b.refused[max(0, len(b.refused)-2):], fmt.Sprintf("a late frame of call %d from rank %d", f.gen, f.from))
			default:
				keep = append(keep, f)
			}
		}
		b.frames = keep
		b.mu.Unlock()
		if got != nil {
			return *got, nil
		}
		select {
		case <-b.wake:
		case <-timer.C:
			return frame{}, errors.New("timed out")
		}
	}
}
