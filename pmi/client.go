package pmi

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"

	"github.com/gocoll/gocoll/bootstrap"
)

// Client is one rank's connection to its PMI-1 server. It implements
// bootstrap.KVS. Its methods may be called from several goroutines; they
// are served one at a time, in the order they take the client's lock,
// except Abort, which does not wait for calls in progress.
type Client struct {
	rank, size, appnum int
	kvsname            string
	keyMax, valMax     int // longest key and value the server keeps

	mu sync.Mutex // one request and its reply at a time
	r  *bufio.Reader
	// wmu guards writes, so that Abort can be sent while another call
	// waits for its reply (a Fence, typically).
	wmu  sync.Mutex
	conn net.Conn
	done bool // after Finalize or Abort

	bulk bool     // the server offers gocoll_getranks (gocollrun)
	tree treeHook // where UseTree set one
	ledger
}

var _ bootstrap.Launcher = (*Client)(nil)

var errFinalized = errors.New("client already finalized")

// newClient runs the init handshake on conn for a rank that knows its
// rank and size, and asks for the limits, the application number and the
// KVS name.
func newClient(conn net.Conn, r *bufio.Reader, rank, size int) (*Client, error) {
	c := &Client{rank: rank, size: size, conn: conn, r: r}
	m, err := c.call("response_to_init", "init", "pmi_version", "1", "pmi_subversion", "1")
	if err != nil {
		return nil, err
	}
	if err := resultErr(m, "init"); err != nil {
		return nil, err
	}
	if m, err = c.call("maxes", "get_maxes"); err != nil {
		return nil, err
	}
	keylen, err1 := intArg(m, "keylen_max")
	vallen, err2 := intArg(m, "vallen_max")
	if err := errors.Join(err1, err2); err != nil {
		return nil, err
	}
	// The server counts a terminating NUL (hydra silently truncates a
	// value of vallen_max bytes to vallen_max-1).
	c.keyMax, c.valMax = keylen-1, vallen-1
	c.bulk = m.args["gocoll_getranks"] == "1"
	if m, err = c.call("appnum", "get_appnum"); err != nil {
		return nil, err
	}
	if c.appnum, err = intArg(m, "appnum"); err != nil {
		return nil, err
	}
	if m, err = c.call("my_kvsname", "get_my_kvsname"); err != nil {
		return nil, err
	}
	if c.kvsname = m.args["kvsname"]; c.kvsname == "" {
		return nil, errors.New("pmi: server sent an empty kvsname")
	}
	c.traffic.Other = 4
	return c, nil
}

// Rank is this process's rank in the job, 0 <= Rank < Size.
func (c *Client) Rank() int { return c.rank }

// Size is the number of ranks in the job.
func (c *Client) Size() int { return c.size }

// AppNum is the application number in an MPMD launch (0 otherwise).
func (c *Client) AppNum() int { return c.appnum }

// KVSName is the name of the job's key-value space.
func (c *Client) KVSName() string { return c.kvsname }

// MaxValueLen is the longest value this server keeps: vallen_max-1.
func (c *Client) MaxValueLen() int { return c.valMax }

// Put stores value under key. The key must be at most keylen_max-1 bytes
// and the value at most vallen_max-1 bytes (Put refuses longer ones rather
// than let the server truncate them, as hydra does silently), both
// printable ASCII without spaces; a key also without '='. The value
// becomes visible to Gets only after the next Fence — under hydra even to
// this rank's own Gets.
func (c *Client) Put(key, value string) error {
	if err := errors.Join(checkToken("key", key, c.keyMax), checkToken("value", value, c.valMax)); err != nil {
		return err
	}
	m, err := c.call("put_result", "put", "kvsname", c.kvsname, "key", key, "value", value)
	if err != nil {
		return err
	}
	c.count(func(t *bootstrap.Traffic) { t.Puts++; t.Bytes += len(key) + len(value) })
	return resultErr(m, "put "+key)
}

// Fence is a barrier over all ranks of the job (PMI barrier_in /
// barrier_out). It returns when every rank has entered it; Puts made
// before it are then visible to every rank. There is no timeout: if a
// rank never arrives, the launcher is expected to end the job.
func (c *Client) Fence() error {
	_, err := c.call("barrier_out", "barrier_in")
	c.count(func(t *bootstrap.Traffic) { t.Fences++ })
	return err
}

// Get returns the value stored under key, or an error if there is none.
func (c *Client) Get(key string) (string, error) {
	if err := checkToken("key", key, c.keyMax); err != nil {
		return "", err
	}
	m, err := c.call("get_result", "get", "kvsname", c.kvsname, "key", key)
	if err != nil {
		return "", err
	}
	if err := resultErr(m, "get "+key); err != nil {
		return "", err
	}
	v, ok := m.args["value"]
	if !ok {
		return "", fmt.Errorf("pmi: get %s: reply has no value", key)
	}
	c.count(func(t *bootstrap.Traffic) { t.Gets++; t.Bytes += len(key) + len(v) })
	return v, nil
}

// GetRanks returns the values of prefix+r for every rank r in one request,
// where the server offers it (gocollrun's extension, announced in its
// maxes reply); it is not offered by hydra. KVSAllgather uses it.
func (c *Client) GetRanks(prefix string) ([]string, error) {
	if !c.bulk {
		return nil, errors.New("pmi: the server has no bulk get")
	}
	if err := checkToken("key", prefix, c.keyMax); err != nil {
		return nil, err
	}
	m, err := c.call("gocoll_ranks", "gocoll_getranks", "kvsname", c.kvsname, "prefix", prefix)
	if err != nil {
		return nil, err
	}
	if err := resultErr(m, "gocoll_getranks "+prefix); err != nil {
		return nil, err
	}
	out, bytes := m.ranks, len(prefix)
	if len(out) != c.size {
		return nil, fmt.Errorf("pmi: gocoll_getranks %s: %d values for %d ranks", prefix, len(out), c.size)
	}
	for _, v := range out {
		bytes += len(v)
	}
	c.count(func(t *bootstrap.Traffic) { t.Bulk++; t.Bytes += bytes })
	return out, nil
}

// Allgather is bootstrap.KVSAllgather: one put, one fence, and one bulk
// get under gocollrun or a get per rank under hydra; or, where UseTree
// set one, bootstrap.Tree's: one put (rank 0's), one fence and one get
// (the other ranks') in all, whatever the number of calls.
func (c *Client) Allgather(mine []byte) ([][]byte, error) {
	gen := c.nextGen()
	if t := c.tree.get(); t != nil {
		return t.Allgather(mine)
	}
	var kvs bootstrap.KVS = c
	maxValue := c.valMax
	if !c.bulk {
		kvs = noBulk{c}
		// Slurm's PMI-1 server reads a request with one read of 1024
		// bytes: a longer put line is cut and the job hangs. Keep the
		// whole line, with the longest key, within that.
		maxValue = min(maxValue, slurmLineMax-len(formatLine("put", "kvsname", c.kvsname, "key", "", "value", ""))-c.keyMax)
	}
	return bootstrap.KVSAllgather(kvs, gen, maxValue, mine)
}

// slurmLineMax is the longest PMI-1 request Slurm's pmi2 plugin reads.
const slurmLineMax = 1024

// noBulk hides GetRanks from KVSAllgather where the server lacks it.
type noBulk struct{ bootstrap.KVS }

// Name says "PMI-1" for messages.
func (c *Client) Name() string { return "PMI-1" }

// Finalize tells the server this rank is done with PMI and closes the
// connection. A launcher treats a rank that exits without it as failed
// (hydra) or suspicious (gocollrun).
func (c *Client) Finalize() error {
	c.tree.end()
	_, err := c.call("finalize_ack", "finalize")
	if errors.Is(err, errFinalized) {
		return err
	}
	c.mu.Lock()
	c.done = true
	c.mu.Unlock()
	return errors.Join(err, c.conn.Close())
}

// Abort asks the launcher to end the whole job with exit status code.
// PMI-1 servers do not show a message (hydra reads only the exit code),
// so a non-empty msg is written to standard error here first. Abort
// returns once the request is sent, without waiting for calls in progress
// on other goroutines; the launcher then kills every rank, this one
// included, so a caller that gets control back should exit with code.
func (c *Client) Abort(code int, msg string) error {
	if msg != "" {
		fmt.Fprintf(os.Stderr, "pmi: rank %d aborts the job with code %d: %s\n", c.rank, code, msg)
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err := c.conn.Write(formatLine("abort", "exitcode", strconv.Itoa(code)))
	return err
}

// call sends one command and reads the reply, which must be the command
// want.
func (c *Client) call(want, cmd string, kv ...string) (message, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return message{}, fmt.Errorf("pmi: %s: %w", cmd, errFinalized)
	}
	c.wmu.Lock()
	_, err := c.conn.Write(formatLine(cmd, kv...))
	c.wmu.Unlock()
	if err != nil {
		return message{}, fmt.Errorf("pmi: sending %s: %w", cmd, err)
	}
	var m message
	if want == "gocoll_ranks" {
		m, err = readRanks(c.r, c.size, c.size*(c.valMax+16)+maxLine)
	} else {
		m, err = readMessage(c.r)
	}
	if err != nil {
		return m, fmt.Errorf("pmi: waiting for the reply to %s: %w", cmd, err)
	}
	if m.cmd != want {
		return m, fmt.Errorf("pmi: server answered %s with cmd=%s (%v), want cmd=%s", cmd, m.cmd, m.args, want)
	}
	return m, nil
}

// resultErr turns a reply's rc and msg into an error.
func resultErr(m message, what string) error {
	rc, ok := m.args["rc"]
	if !ok || rc == "0" {
		return nil
	}
	return fmt.Errorf("pmi: %s: server returned rc=%s (%s)", what, rc, m.args["msg"])
}

// intArg reads an integer argument of a reply.
func intArg(m message, key string) (int, error) {
	v, ok := m.args[key]
	if !ok {
		return 0, fmt.Errorf("pmi: cmd=%s reply has no %s", m.cmd, key)
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("pmi: cmd=%s: %s=%q is not a number", m.cmd, key, v)
	}
	return n, nil
}
